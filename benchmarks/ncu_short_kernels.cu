// Kernels of known, growing duration: the same FMA loop with 1 .. 4096 iterations per thread, one kernel name per
// length so ncu and nsys can be matched by name. Used to measure how ncu's gpu__time_duration relates to nsys'.
#include <cstdio>
#include <nvtx3/nvToolsExt.h>
#define SPIN(N) __global__ void spin_##N(float *x) { float a = x[threadIdx.x], b = 1.0001f; \
  for (int i = 0; i < N; ++i) a = fmaf(a, b, 0.5f); x[blockIdx.x * blockDim.x + threadIdx.x] = a; }
SPIN(1) SPIN(16) SPIN(64) SPIN(256) SPIN(1024) SPIN(4096) SPIN(16384)
__global__ void copy_mb(const float4 *in, float4 *out, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = in[i]; }
int main() {
  float *x; cudaMalloc(&x, 132 * 4 * 256 * sizeof(float)); cudaMemset(x, 0, 132 * 4 * 256 * sizeof(float));
  float4 *a, *b; int n = (1 << 20) / 16; cudaMalloc(&a, 1 << 20); cudaMalloc(&b, 1 << 20);
  for (int r = 0; r < 40; ++r) {
    spin_1<<<528, 256>>>(x); spin_16<<<528, 256>>>(x); spin_64<<<528, 256>>>(x); spin_256<<<528, 256>>>(x);
    spin_1024<<<528, 256>>>(x); spin_4096<<<528, 256>>>(x); spin_16384<<<528, 256>>>(x);
    copy_mb<<<(n + 255) / 256, 256>>>(a, b, n);
    if (r % 10 == 9) { cudaDeviceSynchronize(); }
  }
  cudaError_t e = cudaDeviceSynchronize(); printf("done %s\n", cudaGetErrorString(e)); return e != cudaSuccess;
}
