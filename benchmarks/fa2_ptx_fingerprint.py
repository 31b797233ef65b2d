"""A fingerprint of the sm_90 PTX of every Triton kernel in flash_attention.fa2, without a GPU.

A change meant to leave the kernels' code alone (a helper factored out, a rename) is checked by running this before
and after it and comparing the two outputs: equal fingerprints mean the same PTX, so the same SASS and the same speed.
Run from the repository root, under the triton whose code matters (the device's is 3.6):

    PROFKIT_FA_AUTOTUNE=0 PYTHONPATH=$PWD python benchmarks/fa2_ptx_fingerprint.py [--configs N] > before.json

Each kernel (forward, dQ, dK/dV with and without dQ added, the one-launch backward, the preprocess and the dQ
conversion) is lowered ahead of time for sm_90 at d = 64 and 128, causal and not, for the first N configs of each
autotune search space (pointer and descriptor ones), with the launch-time specialisation of contiguous fp16
inputs. The PTX is hashed without its debug lines (.loc, .file, labels of line-table temporaries and the debug
sections), which move with any edit of the source file.
"""

from __future__ import annotations

import argparse
import hashlib
import json

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from profkit.kernels.flash_attention import fa2 as fa

FP32_POINTERS = {"LSE", "Delta", "DQ_ACC"}
FP16_POINTERS = {"Q", "K", "V", "O", "Out", "DO", "DK", "DV", "DQ"}
CONSTEXPRS = {"HEAD_DIM", "CAUSAL", "BLOCK_SKIP", "BLOCK_M", "BLOCK_N", "TMA_OK", "USE_TMA", "FUSE_DQ", "DQ_TMA"}


def code_lines(ptx: str) -> str:
    """The PTX without what only locates it in the source: .loc / .file lines, comments, $L__tmp / $L__func labels
    and everything from the first debug section on."""
    kept = []
    for line in ptx.splitlines():
        text = line.strip()
        if text.startswith(".section") and "debug" in text:
            break
        if not text.startswith((".loc", ".file", "//", "$L__tmp", "$L__func")):
            kept.append(line)
    return "\n".join(kept)


def compile_for_hopper(fn, head_dim: int, config: triton.Config, causal: bool, **flags):
    """One fa2 kernel lowered for sm_90 (triton.compile's result) as a launch on contiguous fp16 (B, H, N, d)
    tensors specialises it: unit head_dim strides as constants, pointers and other ints 16-divisible (H aside);
    flags set the fused backward's FUSE_DQ / DQ_TMA (both off unless given). The compile tests read it too."""
    signature, constants, aligned = {}, {}, []
    for name in fn.arg_names:
        if name in FP16_POINTERS or name in FP32_POINTERS:
            signature[name] = "*fp32" if name in FP32_POINTERS else "*fp16"
            aligned.append(name)
        elif name == "sm_scale":
            signature[name] = "fp32"
        elif name in CONSTEXPRS or (name.startswith("stride_") and name.endswith("d")):
            signature[name] = "constexpr"
        else:
            signature[name] = "i32"
            if name != "H":
                aligned.append(name)
    constants.update({name: 1 for name in signature if name.startswith("stride_") and signature[name] == "constexpr"})
    constants.update({"HEAD_DIM": head_dim, "CAUSAL": causal, "BLOCK_SKIP": True, "FUSE_DQ": False, "DQ_TMA": False,
                      "TMA_OK": config.kwargs.get("USE_TMA", False), **config.kwargs, **flags})
    constants = {name: value for name, value in constants.items() if name in signature}
    attrs = {(fn.arg_names.index(name),): [["tt.divisibility", 16]] for name in aligned}
    return triton.compile(ASTSource(fn, signature, constants, attrs), target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": config.num_warps, "num_stages": config.num_stages})


def fingerprint(fn, head_dim: int, config: triton.Config, causal: bool, **flags) -> str:
    """The first 16 hex digits of the sha256 of one build's code lines (see ``compile_for_hopper``)."""
    kernel = compile_for_hopper(fn, head_dim, config, causal, **flags)
    return hashlib.sha256(code_lines(kernel.asm["ptx"]).encode()).hexdigest()[:16]


def builds(configs: int):
    """(name, kernel, head dim, config, causal, flags) of every build fingerprinted."""
    for d in fa.SUPPORTED_HEAD_DIMS:
        for causal in (True, False):
            for name, fn in (("fwd", fa._attn_fwd), ("dkdv", fa._attn_bwd_dkdv), ("dq", fa._attn_bwd_dq)):
                for config in fa.autotune_configs(name, d)[:configs]:
                    yield name, fn, d, config, causal, {}
                if name != "dkdv":
                    for config in [c for c in fa.autotune_configs(name, d, tma=True) if c.kwargs["USE_TMA"]][:configs]:
                        yield f"{name}-tma", fn, d, config, causal, {}
            for config in fa.autotune_configs("dkdvq", d)[:configs]:
                yield "dkdvq", fa._attn_bwd_dkdv, d, config, causal, {"FUSE_DQ": True, "DQ_TMA": True}
                yield "dkdvq-atomic", fa._attn_bwd_dkdv, d, config, causal, {"FUSE_DQ": True}
            for config in fa.autotune_configs("single", d)[:configs]:
                yield "single", fa._attn_bwd_single, d, config, causal, {}
        for block_m in (64, 128):
            config = triton.Config({"BLOCK_M": block_m}, num_warps=4, num_stages=1)
            yield "preprocess", fa._attn_bwd_preprocess, d, config, False, {}
            yield "dq_convert", fa._attn_bwd_dq_convert, d, config, False, {}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", type=int, default=2, help="configs per search space (default 2)")
    args = parser.parse_args()
    out = {"triton": triton.__version__, "builds": {}}
    for name, fn, d, config, causal, flags in builds(args.configs):
        key = (f"{name} d={d} causal={causal} {config.kwargs} w{config.num_warps} s{config.num_stages}"
               + (f" {flags}" if flags else ""))
        out["builds"][key] = fingerprint(fn, d, config, causal, **flags)
    print(json.dumps(out, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
