"""Ahead-of-time sources of ``matmul_kernel`` for the offline sm_90 compile tests (imported by their scripts)."""

from __future__ import annotations

import inspect

from triton.compiler import ASTSource

from profkit.kernels.matmul import tiled as mm

POINTERS = ("a_ptr", "b_ptr", "c_ptr")
"""Operand pointers, of the problem's dtype; the split-K workspace is fp32 and the arrival counts int32."""


def matmul_kernel_source(consts: dict, aligned: tuple[str, ...], dtype: str = "fp32") -> ASTSource:
    """matmul_kernel specialised by `consts` (runtime arguments named there become constants, e.g. a stride of 1);
    constexprs not in `consts` take the kernel's defaults; the other runtime integers are i32, those named in
    `aligned` (and every pointer) with triton's divisibility-by-16 attribute."""
    fn = mm.matmul_kernel
    defaults = {name: p.default for name, p in inspect.signature(fn.fn).parameters.items()
                if p.default is not inspect.Parameter.empty}
    constants = {**defaults, **consts}
    pointer_types = {**{n: "*" + dtype for n in POINTERS}, "ws_ptr": "*fp32", "lock_ptr": "*i32"}
    signature = {name: "constexpr" if name in constants else pointer_types.get(name, "i32") for name in fn.arg_names}
    missing = [n for n in fn.arg_names if signature[n] == "constexpr" and constants.get(n) is None
               and n not in consts]
    assert not missing, f"constexprs without a value: {missing}"
    divisible = set(aligned) | set(pointer_types)
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(fn.arg_names)
             if n in divisible and signature[n] != "constexpr"}
    return ASTSource(fn=fn, signature=signature, constexprs={(fn.arg_names.index(k),): v for k, v in constants.items()},
                     attrs=attrs)
