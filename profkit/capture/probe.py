"""A one-kernel CUDA program with no build step, for `profkit doctor` to run under ncu.

It uses the driver API through ctypes and a PTX kernel that the driver compiles for the present GPU, so it
needs neither nvcc nor torch: only libcuda. The kernel writes 1 to one int; the program checks it and
exits 0, or prints the failing call and CUDA's error name and exits 1. Run: python -m profkit.capture.probe
"""

from __future__ import annotations

import ctypes
import sys

KERNEL = "profkit_probe"
# .target sm_50 PTX is compiled by the driver for any newer GPU (PTX is forward compatible).
PTX = rb"""
.version 6.0
.target sm_50
.address_size 64

.visible .entry profkit_probe(.param .u64 out)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [out];
    cvta.to.global.u64 %rd2, %rd1;
    mov.u32 %r1, 1;
    st.global.u32 [%rd2], %r1;
    ret;
}
"""


class ProbeFailed(Exception):
    """A driver call failed; the message names the call and CUDA's error."""


def _check(cuda, call: str, status: int) -> None:
    if status != 0:
        name = ctypes.c_char_p()
        cuda.cuGetErrorName(status, ctypes.byref(name))
        raise ProbeFailed(f"{call} failed: {(name.value or b'').decode() or status}")


def run_probe() -> None:
    """Launch the probe kernel once on device 0 and check its result; raises ProbeFailed."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise ProbeFailed(f"cannot load libcuda.so.1 (no NVIDIA driver?): {exc}") from exc
    device, context = ctypes.c_int(), ctypes.c_void_p()
    module, function = ctypes.c_void_p(), ctypes.c_void_p()
    pointer, value = ctypes.c_uint64(), ctypes.c_int(0)
    _check(cuda, "cuInit", cuda.cuInit(0))
    _check(cuda, "cuDeviceGet", cuda.cuDeviceGet(ctypes.byref(device), 0))
    _check(cuda, "cuDevicePrimaryCtxRetain", cuda.cuDevicePrimaryCtxRetain(ctypes.byref(context), device))
    _check(cuda, "cuCtxSetCurrent", cuda.cuCtxSetCurrent(context))
    _check(cuda, "cuModuleLoadData", cuda.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(PTX)))
    _check(cuda, "cuModuleGetFunction",
           cuda.cuModuleGetFunction(ctypes.byref(function), module, KERNEL.encode()))
    _check(cuda, "cuMemAlloc", cuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(4)))
    _check(cuda, "cuMemsetD32", cuda.cuMemsetD32_v2(pointer, ctypes.c_uint(0), ctypes.c_size_t(1)))
    params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.byref(pointer), ctypes.c_void_p))
    _check(cuda, "cuLaunchKernel", cuda.cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, None, params, None))
    _check(cuda, "cuCtxSynchronize", cuda.cuCtxSynchronize())
    _check(cuda, "cuMemcpyDtoH", cuda.cuMemcpyDtoH_v2(ctypes.byref(value), pointer, ctypes.c_size_t(4)))
    cuda.cuMemFree_v2(pointer)
    cuda.cuDevicePrimaryCtxRelease_v2(device)
    if value.value != 1:
        raise ProbeFailed(f"the probe kernel ran but wrote {value.value}, not 1")


def main() -> int:
    try:
        run_probe()
    except ProbeFailed as exc:
        print(f"profkit probe: {exc}", file=sys.stderr)
        return 1
    print("profkit probe: kernel ran")
    return 0


if __name__ == "__main__":
    sys.exit(main())
