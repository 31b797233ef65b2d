// Rung 1 — naive: one thread per element of C, every operand read straight from global memory.
//
// Mechanism: coalescing only. 16x16 thread blocks with threadIdx.x along columns, so a warp
// covers 2 rows x 16 columns of C: its B load is 16 consecutive floats (2 sectors, shared by
// both rows), its A load is one address per row (a broadcast), its C store is 2 x 64 bytes.
// Every FMA still issues two global loads; the caches carry all reuse.
// Counter that shows the baseline: global load sectors per FLOP
// (l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum / 2N^3, 1/16 here), which each later rung
// lowers; sectors per request (.../l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum) ~2 proves
// the loads coalesce.
#include "harness.cuh"

constexpr int BLOCK = 16;

__global__ void __launch_bounds__(BLOCK * BLOCK)
matmul_naive(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int n) {
    const int col = blockIdx.x * BLOCK + threadIdx.x;
    const int row = blockIdx.y * BLOCK + threadIdx.y;
    if (row >= n || col >= n) return;
    float sum = 0.0f;
    for (int k = 0; k < n; ++k) sum += a[row * n + k] * b[k * n + col];
    c[row * n + col] = sum;
}

static profkit::LaunchConfig launch_matmul_naive(const float* a, const float* b, float* c, int n,
                                                 cudaStream_t stream) {
    const dim3 block(BLOCK, BLOCK);
    const dim3 grid((n + BLOCK - 1) / BLOCK, (n + BLOCK - 1) / BLOCK);
    matmul_naive<<<grid, block, 0, stream>>>(a, b, c, n);
    CHECK_LAUNCH();
    return profkit::LaunchConfig::of(grid, block);
}

#ifndef PROFKIT_NO_MAIN  // ladder_bench.cu includes every rung into one program
int main(int argc, char** argv) {
    const profkit::KernelDescriptor desc{"matmul_naive", launch_matmul_naive, nullptr, nullptr};
    return profkit::run_matmul_program(argc, argv, desc);
}
#endif
