"""A foreign program that launches known kernels from every place a real one does, and writes down where each
launch happened: the ground truth profkit's reading of its nsys capture is checked against.

Each site launches its own Triton kernel (the kernel name says the site) on a 2^20-element fp32 buffer:
nested push/pop ranges on the main thread; a side stream; a worker thread with ranges of its own; a start/end
range opened on the main thread and closed on the worker; a CUDA graph captured in one range and replayed in
another; a child process (spawned) with its own range; an NVTX domain range with a registered string (the
`nvtx` package); host<->device copies. Nothing here knows about profkit.

    python benchmarks/attribution_probe.py --truth truth.json      # writes {kernel: {path, launches}, ...}

`path` is the NVTX path profkit should give each launch: the ranges open on the launching thread (push/pop)
or anywhere in its process (start/end) when the launch call ran, outermost first, joined by "/"; a kernel of a
graph replay belongs to the replay's call, not to the capture.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import threading

import nvtx
import torch
import triton
import triton.language as tl

N = 1 << 20
BLOCK = 1024
REPLAYS = 3
CHILD_LAUNCHES = 2


@triton.jit
def _bump(x_ptr, n, value, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 0.5 + value, mask=mask)


@triton.jit
def probe_outer(x_ptr, n, BLOCK: tl.constexpr):
    _bump(x_ptr, n, 1.0, BLOCK)


@triton.jit
def probe_inner(x_ptr, n, BLOCK: tl.constexpr):
    _bump(x_ptr, n, 2.0, BLOCK)


@triton.jit
def probe_side_stream(x_ptr, n, BLOCK: tl.constexpr):
    _bump(x_ptr, n, 3.0, BLOCK)


@triton.jit
def probe_worker(x_ptr, n, BLOCK: tl.constexpr):
    _bump(x_ptr, n, 4.0, BLOCK)


@triton.jit
def probe_after_epoch(x_ptr, n, BLOCK: tl.constexpr):
    _bump(x_ptr, n, 5.0, BLOCK)


@triton.jit
def probe_graph_a(x_ptr, n, BLOCK: tl.constexpr):
    _bump(x_ptr, n, 6.0, BLOCK)


@triton.jit
def probe_graph_b(x_ptr, n, BLOCK: tl.constexpr):
    _bump(x_ptr, n, 7.0, BLOCK)


@triton.jit
def probe_child(x_ptr, n, BLOCK: tl.constexpr):
    _bump(x_ptr, n, 8.0, BLOCK)


@triton.jit
def probe_domain(x_ptr, n, BLOCK: tl.constexpr):
    _bump(x_ptr, n, 9.0, BLOCK)


KERNELS = [probe_outer, probe_inner, probe_side_stream, probe_worker, probe_after_epoch, probe_graph_a,
           probe_graph_b, probe_child, probe_domain]


def launch(kernel, x: torch.Tensor) -> None:
    kernel[(triton.cdiv(x.numel(), BLOCK),)](x, x.numel(), BLOCK=BLOCK)


def child(seed: int) -> None:
    """The spawned process: its own CUDA context, its own range."""
    torch.manual_seed(seed)
    x = torch.randn(N, device="cuda")
    torch.cuda.nvtx.range_push("child")
    for _ in range(CHILD_LAUNCHES):
        launch(probe_child, x)
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--truth", default="", help="write the ground truth here (JSON)")
    args = parser.parse_args()
    torch.manual_seed(0)
    x = torch.randn(N, device="cuda")
    host = torch.randn(N, pin_memory=True)

    torch.cuda.nvtx.range_push("warmup")  # every kernel compiled and loaded once, before the sites below
    for kernel in KERNELS:
        launch(kernel, x)
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()

    torch.cuda.nvtx.range_push("step")
    launch(probe_outer, x)
    torch.cuda.nvtx.range_push("inner")
    launch(probe_inner, x)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        launch(probe_side_stream, x)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_pop()

    epoch = torch.cuda.nvtx.range_start("epoch")  # start/end: process-wide, ended by the worker

    def work() -> None:
        torch.cuda.nvtx.range_push("worker")
        launch(probe_worker, x)
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_end(epoch)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    launch(probe_after_epoch, x)

    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push("capture")
    with torch.cuda.graph(graph):
        launch(probe_graph_a, x)
        launch(probe_graph_b, x)
    torch.cuda.nvtx.range_pop()
    torch.cuda.nvtx.range_push("replay")
    for _ in range(REPLAYS):
        graph.replay()
    torch.cuda.nvtx.range_pop()

    torch.cuda.nvtx.range_push("copies")
    back = x.to("cpu")
    x.copy_(host, non_blocking=True)
    torch.cuda.nvtx.range_pop()

    with nvtx.annotate("library_call", domain="probe_lib"):
        launch(probe_domain, x)
    torch.cuda.synchronize()

    process = multiprocessing.get_context("spawn").Process(target=child, args=(1,))
    process.start()
    process.join()
    if process.exitcode != 0:
        raise SystemExit(f"the child process failed (exit {process.exitcode})")

    expected = {
        "probe_outer": "step", "probe_inner": "step/inner", "probe_side_stream": "step/inner",
        "probe_worker": "epoch/worker", "probe_after_epoch": "", "probe_graph_a": "replay",
        "probe_graph_b": "replay", "probe_child": "child", "probe_domain": "library_call",
    }
    launches = {"probe_graph_a": REPLAYS, "probe_graph_b": REPLAYS, "probe_child": CHILD_LAUNCHES}
    out = {name: {"path": expected[name], "launches": launches.get(name, 1), "warmup_path": "warmup",
                  "warmup_launches": 1} for name in expected}
    out["_copies"] = {"path": "copies", "DtoH_bytes": back.numel() * back.element_size(),
                      "HtoD_bytes": host.numel() * host.element_size()}
    # the last two writes were the copy from `host` and probe_domain's bump: the kernels really ran
    torch.testing.assert_close(x.cpu(), host * 0.5 + 9.0)
    if args.truth:
        with open(args.truth, "w") as f:
            json.dump(out, f, indent=1, sort_keys=True)
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
