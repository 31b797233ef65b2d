"""profkit.kernels.matmul.ffma_order: the serpentine FMA pass on PTX text, its triton hook, and (ahead of time, no GPU) what it
and the M-major A of the fma path do to the sm_90 SASS of the shipped fp32 matmul kernel."""

import random

import pytest

from profkit.kernels.matmul import ffma_order
from tests.kernels.offline_compile import needs_triton_tools, run_compile_script


def _fma(d, a, b, c):
    return f"\tfma.rn.f32 \t%r{d}, %r{a}, %r{b}, %r{c};"


def _outer_product(rows, cols, first=100):
    """PTX lines of one k step as triton emits them: row r's FMAs share A register 10 + r, column j's B is 50 + j."""
    return [_fma(first + r * cols + j, 10 + r, 50 + j, 200 + r * cols + j) for r in range(rows) for j in range(cols)]


def _sources(line):
    return [x.strip(" ;%r") for x in line.split(",")[1:3]]


def test_every_other_row_is_reversed_and_the_rest_is_untouched():
    head, tail = ["\tld.shared.v4.f32 \t{%r10, %r11, %r12, %r13}, [%r1];"], ["\tbar.sync \t0;", "\tret;"]
    body = _outer_product(rows=4, cols=4)
    out = ffma_order.serpentine("\n".join(head + body + tail)).split("\n")
    assert out[:1] == head and out[-2:] == tail
    fmas = out[1:-2]
    assert sorted(fmas) == sorted(body)  # a permutation: the same instructions
    assert fmas[:4] == body[:4] and fmas[4:8] == body[4:8][::-1] and fmas[8:12] == body[8:12]
    # Every FMA after the first shares its A or its B register with the FMA before it.
    for before, after in zip(fmas, fmas[1:]):
        a0, b0 = _sources(before)
        a1, b1 = _sources(after)
        assert a0 == a1 or b0 == b1, (before, after)
    # In triton's order, every row boundary shares nothing.
    assert sum(_sources(x)[0] != _sources(y)[0] and _sources(x)[1] != _sources(y)[1] for x, y in zip(body, body[1:])) == 3


def test_rows_whose_fmas_depend_on_each_other_keep_their_order():
    chain = [_fma(100, 10, 50, 200), _fma(101, 11, 50, 300), _fma(102, 11, 51, 101), _fma(103, 12, 50, 103)]
    # Row 1 (A = %r11) reads %r101, which it writes itself: reversing it would read a stale value.
    assert ffma_order.serpentine("\n".join(chain)).split("\n") == chain
    again = [_fma(100, 10, 50, 200), _fma(101, 11, 50, 300), _fma(101, 11, 51, 301)]  # one register written twice
    assert ffma_order.serpentine("\n".join(again)).split("\n") == again


def test_rows_split_by_other_instructions_restart_the_walk():
    first, second = _outer_product(2, 3, first=100), _outer_product(2, 3, first=300)
    text = "\n".join(first + ["\tadd.s32 \t%r5, %r5, 1;"] + second)
    out = ffma_order.serpentine(text).split("\n")
    assert out[:6] == first[:3] + first[3:6][::-1]
    assert out[7:] == second[:3] + second[3:6][::-1]


def test_random_outer_products_stay_permutations():
    rng = random.Random(7)
    for _ in range(20):
        rows, cols = rng.randint(1, 9), rng.randint(1, 9)
        body = _outer_product(rows, cols, first=rng.randint(100, 999))
        out = ffma_order.serpentine("\n".join(body)).split("\n")
        assert sorted(out) == sorted(body) and len(out) == rows * cols


def test_only_kernels_named_serpentine_are_rewritten():
    body = "\n".join(_outer_product(2, 2))
    plain = f".visible .entry matmul_kernel(\n)\n{{\n{body}\n}}"
    named = plain.replace("matmul_kernel(", "matmul_kernel_serpentine(")
    assert ffma_order.entry_names(named) == ["matmul_kernel_serpentine"]
    assert ffma_order.rewrite(plain) == plain
    assert ffma_order.rewrite(named) != named and ffma_order.rewrite(named) == ffma_order.serpentine(named)


def test_specialization_name_follows_the_constexpr():
    from collections import namedtuple

    spec = namedtuple("Spec", ["constants", "signature"])
    name = ffma_order.specialization_name("matmul_kernel")
    assert name(spec({"FFMA_ORDER": ffma_order.SERPENTINE}, {})) == "matmul_kernel_serpentine"
    assert name(spec({"FFMA_ORDER": ""}, {})) == "matmul_kernel"
    assert name(spec({}, {})) == "matmul_kernel"


def test_hook_wraps_the_ptx_stage_and_chains_the_previous_hook():
    calls = []

    def previous(*args):
        if not args:
            return "theirs", "h"
        calls.append(args)

    hook = ffma_order._Hook(previous)
    key, digest = hook()
    assert "theirs" in key and "profkit-ffma-order" in key and digest.startswith("h+")
    body = "\n".join(_outer_product(2, 2))
    stages = {"ptx": lambda src, metadata: f".visible .entry k_serpentine(\n)\n{body}", "cubin": None}
    hook(None, stages, None, None, 90)
    assert len(calls) == 1
    assert stages["ptx"]("llir", {}) == ffma_order.serpentine(f".visible .entry k_serpentine(\n)\n{body}")


def test_install_is_idempotent():
    import triton

    runtime = triton.knobs.runtime
    saved = runtime.add_stages_inspection_hook
    try:
        runtime.add_stages_inspection_hook = None
        assert ffma_order.install() and ffma_order.install()
        hook = runtime.add_stages_inspection_hook
        assert isinstance(hook, ffma_order._Hook) and hook.previous is None
    finally:
        runtime.add_stages_inspection_hook = saved


COMPILE_SCRIPT = r"""
import json, re, subprocess, sys, tempfile
import triton
from triton.backends.compiler import GPUTarget
from profkit.kernels.matmul import ffma_order
from profkit.build.sass import ffma_registers
from tests.kernels.matmul.aot import matmul_kernel_source

results = {}
for a_major in ("k", "m"):
    for order in ("", ffma_order.SERPENTINE):
        unit = "stride_am" if a_major == "m" else "stride_ak"
        consts = {unit: 1, "stride_bn": 1, "stride_cn": 1, "BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32,
                  "GROUP_M": 8, "INPUT_PRECISION": "ieee", "FFMA_ORDER": order}
        aligned = tuple(n for n in ("M", "N", "K", "M_LOAD", "N_LOAD", "stride_am", "stride_ak", "stride_bk",
                                    "stride_cm") if n != unit)
        src = matmul_kernel_source(consts, aligned)
        kernel = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8, "num_stages": 3})
        with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
            f.write(kernel.asm["cubin"]); f.flush()
            sass = subprocess.run([sys.argv[1], "-sass", f.name], capture_output=True, text=True, check=True).stdout
            usage = subprocess.run([sys.argv[1], "--dump-resource-usage", f.name],
                                   capture_output=True, text=True, check=True).stdout
        lines = (m.group(1) for m in map(re.compile(r"/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;").search, sass.splitlines()) if m)
        ffmas = [r for r in map(ffma_registers, lines) if r is not None]
        unshared = sum(1 for (_, s), (_, p) in zip(ffmas[1:], ffmas) if not any(x is not None and x == y for x, y in zip(s, p)))
        results[a_major + ("serpentine" if order else "plain")] = {
            "name": kernel.metadata.name, "ffma": len(ffmas),
            "fma_ptx": sorted(l.split("\t")[-1] for l in kernel.asm["ptx"].splitlines() if "fma.rn.f32" in l),
            "in_place": sum(d == s[2] for d, s in ffmas) / len(ffmas), "unshared": unshared / len(ffmas),
            "local": int(re.search(r"LOCAL:(\d+)", usage).group(1)), "registers": int(re.search(r"REG:(\d+)", usage).group(1)),
        }
print(json.dumps(results))
"""


@pytest.mark.slow  # 4 sm_90 compiles with SASS, ~5 s
@needs_triton_tools
def test_m_major_a_and_serpentine_order_in_the_sm90_sass():
    """The fp32 fma kernel (128x128x32 tile, 8 warps, 3 stages) compiled for sm_90 ahead of time: the serpentine
    specialization is named ``matmul_kernel_serpentine`` and holds the same FMAs as the plain one; with A M-major
    ptxas accumulates more FFMAs in place (an outer product per k step; 66% against 53% from a K-major A) and
    uses fewer registers, and the serpentine order cuts the FFMAs that share no source register with the one
    before them (offline, triton 3.6 / 3.9: 28% -> 6.5%); no spills."""
    r = run_compile_script("fp32 matmul sm_90 SASS", COMPILE_SCRIPT)
    for key in ("kplain", "kserpentine", "mplain", "mserpentine"):
        assert r[key]["ffma"] >= 128 * 128 * 32 // 256, f"{key}: {r[key]['ffma']} FFMAs"
        assert r[key]["local"] == 0, f"{key}: {r[key]['local']} bytes of local memory"
    assert r["mplain"]["name"] == "matmul_kernel" and r["mserpentine"]["name"] == "matmul_kernel_serpentine"
    assert r["mserpentine"]["fma_ptx"] == r["mplain"]["fma_ptx"]
    assert r["mplain"]["in_place"] > r["kplain"]["in_place"] + 0.1, (r["mplain"]["in_place"], r["kplain"]["in_place"])
    assert r["mplain"]["registers"] < r["kplain"]["registers"]
    assert r["mserpentine"]["unshared"] < 0.5 * r["mplain"]["unshared"], (r["mserpentine"]["unshared"],
                                                                          r["mplain"]["unshared"])
