"""The persistent TMA int8 GEMM's tiles at the 114M model's layer shapes, beside fp16 ``F.linear``, in one process:

    python3 benchmarks/int8_gemm_tile_probe.py [--m 2048 8192] [--rounds 3] [--out FILE]

Why: in the guided capture of the INT8 forward (batch 8 from a CUDA graph, H100) the int8 GEMMs hold 73% of the GPU
time at 22-37% of the tensor pipe, with ``barrier`` the top stall: each persistent program runs its tile's epilogue
(scales, the outlier product, GELU or the residual, the store) while its tensor cores idle, and at K = 1024 a tile
has only 8 steps of K to hide it behind. This probe times every tile the autotuner may pick (``gemm.TMA_TILES``, among them tiles
small enough for two programs per SM, where one program's epilogue runs beside the other's main loop) and others.

Cases: the layers of one block of the ``--size large`` model with the fused forward's epilogues (qkv with its bias,
out and fc2 adding the residual, fc1 with GELU, lm_head), 10 outlier columns. Every candidate's output is checked
against the shipped ``int8_linear`` (the int32 accumulation is exact and the epilogue the same code; the outlier
columns' fp16 product may round in another order: the largest relative difference is recorded, above 1e-3 stops).
Timing: ``timing.interleaved_rounds`` (CUDA-graph replays, ``--rounds`` rounds), median of the rounds' medians,
L2 not flushed (in the forward the codes were just written by the quantizer) and flushed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F
import triton
from triton.runtime.errors import OutOfResources

from profkit.bench.device import require_cuda
from profkit.bench.results import environment
from profkit.bench.timing import interleaved_rounds
from profkit.kernels.common import device_info, tma_workspace
from profkit.kernels.int8 import gemm
from profkit.kernels.int8.layers import quantize_weight

# (layer, K, N, bias, activation, residual) of the 114M model (d_model 1024, d_ff 4096, vocabulary 12928).
LAYERS = (("qkv", 1024, 3072, True, None, False), ("out", 1024, 1024, True, None, True),
          ("fc1", 1024, 4096, True, "gelu", False), ("fc2", 4096, 1024, True, None, True),
          ("lm_head", 1024, 12928, False, None, False))
N_OUTLIERS = 10
# (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps, programs per SM): the autotuner's tiles (gemm.TMA_TILES), then others.
CANDIDATES = gemm.TMA_TILES + tuple(t for t in (
    (128, 128, 64, 3, 4, 2), (128, 256, 64, 2, 8, 2), (128, 128, 64, 4, 8, 2), (128, 128, 64, 6, 8, 1),
    (128, 128, 128, 3, 8, 1), (256, 128, 64, 4, 8, 1), (128, 128, 128, 5, 4, 2)) if t not in gemm.TMA_TILES)


def launch(operands, m, n, k, n_out, config, programs, epilogue):
    """One launch of the persistent kernel's body (the autotuner bypassed) with `programs` programs; returns
    triton's compiled kernel (its registers and shared memory say how many programs an SM holds)."""
    bm, bn, bk, stages, warps, _ = config
    triton.set_allocator(tma_workspace)
    return gemm._int8_gemm_tma_kernel.fn[(min(programs, triton.cdiv(m, bm) * triton.cdiv(n, bn)),)](
        *operands, m, n, k, n_out, gemm.m_bucket(m), operands[2].stride(0), operands[6].stride(0),
        operands[7].stride(0), operands[8].stride(0), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, BLOCK_O=16,
        NUM_SMS=programs, num_stages=stages, num_warps=warps, **epilogue)


def occupancy(compiled, warps: int) -> tuple[int, int, int]:
    """(registers a thread, shared bytes, programs an SM can hold) of a compiled kernel."""
    regs, smem = compiled.n_regs, compiled.metadata.shared
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    by_regs = 65536 // max(1, regs * 32 * warps)
    by_smem = props.shared_memory_per_multiprocessor // max(1, smem + 1024)  # 1 KiB reserved per block
    return regs, smem, min(by_regs, by_smem)


def probe(layer, k, n, has_bias, activation, has_residual, m, rounds, gen) -> list[dict]:
    """Every candidate tile for one layer shape at M rows; returns one row per side."""
    outlier_idx = torch.randperm(k, generator=gen)[:N_OUTLIERS].sort().values
    w = (torch.randn(n, k, generator=gen) * 0.03).half()
    parts = {key: t.cuda() if isinstance(t, torch.Tensor) else t for key, t in
             quantize_weight(w, outlier_idx, torch.float16).items()}
    x = (torch.randn(m, k, generator=gen) * 2 + 0.3)
    x[:, outlier_idx] *= 25.0
    x = x.half().cuda()
    bias = (torch.randn(n, generator=gen) * 0.1).half().cuda() if has_bias else None
    residual = torch.randn(m, n, generator=gen).half().cuda() if has_residual else None
    kq_pad = parts["weight_int8"].shape[1]
    ocols = gemm.column_lists(parts["column_map"], k, x.device)[1]
    codes, scales, outliers = gemm.quantize_rows(x, parts["column_map"], ocols, kq_pad, torch.float16)
    out = torch.empty((m, n), dtype=torch.float16, device="cuda")
    outliers = outliers[:, :N_OUTLIERS]
    args = (codes, scales, parts["weight_int8"], parts["weight_scale"], outliers, parts["weight_outlier"], bias,
            torch.float16)

    def shipped():
        return gemm.int8_linear(*args, out=out, activation=activation, residual=residual)

    reference = shipped().clone()
    operands = gemm._gemm_operands(codes, parts["weight_int8"], out, scales, parts["weight_scale"], bias, outliers,
                                   parts["weight_outlier"], residual)
    epilogue = {"HAS_BIAS": has_bias, "HAS_OUTLIERS": True, "ACTIVATION": gemm.ACTIVATIONS[activation],
                "HAS_RESIDUAL": has_residual}
    _, num_sms = device_info(torch.cuda.current_device())
    sides, info = {"shipped int8_linear (autotuned)": shipped}, {}
    for config in CANDIDATES:
        programs = config[5] * num_sms
        name = "{}x{}x{} s{} w{} p{}".format(*config)
        try:
            out.fill_(float("nan"))
            compiled = launch(operands, m, n, kq_pad, N_OUTLIERS, config, programs, epilogue)
            torch.cuda.synchronize()
        except OutOfResources as error:  # a tile whose shared memory does not fit is reported, not timed
            print(f"   {name}: not run ({type(error).__name__}: {str(error)[:80]})")
            continue
        # the int32 products are exact; only the outlier columns' fp16 MMA may round in another order
        error = ((out.float() - reference.float()).abs().max() / reference.float().abs().max()).item()
        if not error <= 1e-3:
            raise SystemExit(f"{layer} M={m}: tile {name} differs from the shipped int8_linear (relative {error:.2e})")
        info[name] = (*occupancy(compiled, config[4]), error)
        sides[name] = (lambda config=config, programs=programs: launch(
            operands, m, n, kq_pad, N_OUTLIERS, config, programs, epilogue))
    w16 = w.cuda()
    sides["fp16 F.linear (+ GELU / residual)"] = (
        lambda: (F.gelu(F.linear(x, w16, bias)) if activation else
                 F.linear(x, w16, bias) + residual if has_residual else F.linear(x, w16, bias)))
    with torch.no_grad():
        timed = interleaved_rounds({(side, mode): (fn, True, mode == "flushed") for side, fn in sides.items()
                                    for mode in ("hot", "flushed")}, rounds, rep_ms=10)
    times = {side: {mode: timed[side, mode] for mode in ("hot", "flushed")} for side in sides}
    print(f"--- {layer} M={m} K={k} N={n}: the autotuner chose {gemm.gemm_config(m, n, kq_pad)}")
    rows = []
    for side, modes in times.items():
        regs, smem, per_sm, error = info.get(side, (None, None, None, None))
        row = {"layer": layer, "M": m, "K": k, "N": n, "side": side, "hot_us": statistics.median(modes["hot"]),
               "flushed_us": statistics.median(modes["flushed"]), "rounds_hot_us": modes["hot"],
               "rounds_flushed_us": modes["flushed"], "registers": regs, "shared_bytes": smem,
               "programs_per_sm": per_sm, "max_rel_diff_vs_shipped": error, "tops_hot": 2 * m * n * k / statistics.median(modes["hot"]) / 1e6}
        rows.append(row)
        print(f"   {side:36s} hot {row['hot_us']:7.2f} us  flushed {row['flushed_us']:7.2f} us  "
              f"{row['tops_hot']:6.0f} TOPS  regs {regs} smem {smem} fits {per_sm}/SM")
    return rows


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--m", type=int, nargs="+", default=[2048, 8192])
    parser.add_argument("--layers", nargs="+", default=[layer[0] for layer in LAYERS])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="")
    args = parser.parse_args(argv)
    require_cuda("benchmarks/int8_gemm_tile_probe.py")
    gen = torch.Generator().manual_seed(0)
    rows = []
    for m in args.m:
        for layer in LAYERS:
            if layer[0] in args.layers:
                rows += probe(*layer, m, args.rounds, gen)
                if args.out:  # written after every case: a probe cut short by the device's limit keeps what it timed
                    with open(args.out, "w") as f:
                        json.dump({"meta": environment(), "rounds": args.rounds, "n_outliers": N_OUTLIERS,
                                   "rows": rows, "timing": "time_fn on CUDA-graph replays; hot: L2 not cleared; "
                                                           "flushed: cleared before each call"}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
