"""What the sm_90 compiler makes of the Gluon five-matmul backward (flash_attention.sm90_bwd), without a GPU.

Run from the repository root with the triton whose build matters (the device's is 3.6):

    PYTHONPATH=$PWD python benchmarks/fa_bwd_sm90_build.py [--json] [--cuobjdump PATH]

Each build (head dim, BLOCK_Q, DQ_VEC, STAGES; causal and not) is lowered ahead of time for sm_90 with triton's
bundled ptxas, and read back from its PTX, its resource usage and its SASS: shared memory, stack bytes a thread
(spills), the fp16 wgmma tiles, the dQ atomics, and the partition barriers and local-memory instructions in the
SASS. It is what the counters of a GPU run are later read against (spills show there as local-memory traffic,
barriers as barrier stalls). --json prints one JSON object (the compile test reads it) instead of the table.
An older sm90_bwd on PYTHONPATH (a git worktree) is read too: builds that need a constexpr it lacks are left out.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import subprocess
import tempfile

import triton
from triton.backends.compiler import GPUTarget

from profkit.kernels.flash_attention import sm90_bwd

BUILDS = ((64, 64, 4, 2), (64, 128, 4, 2), (64, 64, 2, 2), (64, 128, 2, 2), (64, 128, 2, 3), (128, 64, 4, 2))
"""(head dim, BLOCK_Q, DQ_VEC, STAGES): the shipped default first, then the alternatives the probe times, and
d = 128 (not in SUPPORTED_HEAD_DIMS: it failed on the GPU, see sm90_bwd)."""
TENSORS = ("Q", "K", "V", "DO", "DQ_ACC", "DK", "DV", "LSE", "Delta")


def compile_build(head_dim: int, block_q: int, dq_vec: int, stages: int, causal: bool):
    """The compiled kernel of one build, fp16, 16-byte aligned tensors."""
    from triton.experimental.gluon._runtime import GluonASTSource

    fn = sm90_bwd.attn_bwd_sm90
    signature = {name: "*fp16" for name in ("Q", "K", "V", "DO")}
    signature.update(DQ_ACC="*fp32", DK="*fp16", DV="*fp16", LSE="*fp32", Delta="*fp32", sm_scale="fp32",
                     N_CTX="i32", BH="i32", HEAD_GROUP="i32")
    for name in fn.arg_names[len(signature):]:
        signature[name] = "constexpr"
    constants = dict(HEAD_DIM=head_dim, CAUSAL=causal, STAGES=stages, PIPELINE=False,
                     DQ_COLS=min(sm90_bwd.DQ_COLS, head_dim), CONSUMER_REGS=sm90_bwd.CONSUMER_REGS,
                     LOADER_REGS=sm90_bwd.LOADER_REGS, BLOCK_Q=block_q, DQ_VEC=dq_vec)
    constants = {name: value for name, value in constants.items() if name in fn.arg_names}
    attrs = {(fn.arg_names.index(name),): [["tt.divisibility", 16]] for name in TENSORS}
    return triton.compile(GluonASTSource(fn, signature, constants, attrs), target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": 4})


def cubin_text(cuobjdump: str, cubin: bytes) -> tuple[str, str]:
    """(resource usage, SASS) of a cubin, through cuobjdump."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        usage = subprocess.run([cuobjdump, "--dump-resource-usage", f.name], capture_output=True, text=True,
                               check=True).stdout
        sass = subprocess.run([cuobjdump, "-sass", f.name], capture_output=True, text=True, check=True).stdout
    return usage, sass


def build_stats(kernel, cuobjdump: str, block_q: int, dq_vec: int) -> dict:
    """The figures of one compiled build (see the module docstring)."""
    ptx = kernel.asm["ptx"]
    usage, sass = cubin_text(cuobjdump, kernel.asm["cubin"])
    return {
        "shared": kernel.metadata.shared,
        "stack": int(re.search(r"STACK:(\d+)", usage).group(1)),
        "s_tiles": len(re.findall(rf"wgmma\.mma_async\.sync\.aligned\.m64n{block_q}k16\.f32", ptx)),
        "wgmma": len(re.findall(r"wgmma\.mma_async\S*\.f32\.f16\.f16", ptx)),
        "vector_adds": bool(re.search(rf"(red|atom)\.global\.gpu\.relaxed\.add\.v{dq_vec}\.f32", ptx)),
        "tma_3d": "cp.async.bulk.tensor.3d" in ptx,
        "tma_1d": "cp.async.bulk.tensor.1d" in ptx,
        "loader_regs": bool(re.search(r"setmaxnreg\.dec\.sync\.aligned\.u32\s+24;", ptx)),
        "consumer_regs": bool(re.search(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+240;", ptx)),
        "sass_barriers": len(re.findall(r"\bBAR\.SYNC", sass)),
        "sass_local": len(re.findall(r"\b(STL|LDL)\b", sass)),
    }


def collect(cuobjdump: str, builds=BUILDS) -> dict:
    """{"d=.. block_q=.. dq_vec=.. stages=.. causal=..": stats} over the builds, causal and not."""
    results = {}
    names = sm90_bwd.attn_bwd_sm90.arg_names
    for head_dim, block_q, dq_vec, stages in builds:
        if (block_q != 64 and "BLOCK_Q" not in names) or (dq_vec != 4 and "DQ_VEC" not in names):
            continue  # an older kernel: 64-row blocks and v4 adds only
        for causal in (True, False):
            kernel = compile_build(head_dim, block_q, dq_vec, stages, causal)
            name = f"d={head_dim} block_q={block_q} dq_vec={dq_vec} stages={stages} causal={causal}"
            results[name] = {"head_dim": head_dim, "block_q": block_q, "dq_vec": dq_vec,
                             **build_stats(kernel, cuobjdump, block_q, dq_vec)}
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    parser.add_argument("--cuobjdump", default=str(pathlib.Path(triton.__file__).parent / "backends" / "nvidia"
                                                   / "bin" / "cuobjdump"))
    args = parser.parse_args()
    results = collect(args.cuobjdump)
    if args.json:
        print(json.dumps(results))
        return 0
    print(f"triton {triton.__version__}, sm_90, fp16")
    print(f"{'build':<52} {'shared B':>9} {'stack B':>8} {'SASS STL/LDL':>12} {'SASS BAR.SYNC':>13} {'wgmma':>6}")
    for name, r in results.items():
        print(f"{name:<52} {r['shared']:>9} {r['stack']:>8} {r['sass_local']:>12} {r['sass_barriers']:>13} "
              f"{r['wgmma']:>6}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
