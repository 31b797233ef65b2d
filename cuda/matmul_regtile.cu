// Rung 4 — regtile: 2D register tiling; each thread owns an 8x8 block of C in registers.
//
// Mechanism added over coarsened: outer products from shared memory. A block computes a
// BM x BN = 128 x 128 tile of C with 256 threads, stepping K by BK = 8. Per k, a thread reads a
// column slice of 8 A values and a row slice of 8 B values from shared memory into registers
// and does all 64 FMAs of their outer product, so each shared-memory value feeds 8 FMAs instead
// of 1-4. Thread (ty, tx) owns rows ty + 16*i and columns tx + 16*j (i, j < 8): a warp's shared
// reads hit distinct banks or broadcast, and its C stores are coalesced 64-byte runs.
// Global loads stay scalar (each thread loads 4 A and 4 B elements per step, coalesced).
// About 130 registers (nvcc 13.0), so one 256-thread block per SM; capping it at 128 spills.
// Counter that should prove it: FLOPs per shared-memory load rise — shared-load instructions per
// FFMA fall from 1.06 (coarsened) to 0.16 (smsp__sass_inst_executed_op_shared_ld.sum vs
// smsp__sass_thread_inst_executed_op_ffma_pred_on.sum / 32; nvcc 13.0's SASS: 64 LDS for B and
// 16 LDS.128 for A per 512 FFMA), and global load sectors per FLOP fall to 1/1024 (the block
// tile is 128 wide in both M and N).
#include "harness.cuh"

constexpr int BM = 128;
constexpr int BN = 128;
constexpr int BK = 8;
constexpr int TM = 8;  // rows of C per thread
constexpr int TN = 8;  // columns of C per thread
constexpr int THREADS_M = BM / TM;  // 16
constexpr int THREADS_N = BN / TN;  // 16
constexpr int THREADS = THREADS_M * THREADS_N;  // 256
constexpr int A_LOADS = BM * BK / THREADS;  // A elements each thread loads per K step (4)
constexpr int B_LOADS = BK * BN / THREADS;  // B elements each thread loads per K step (4)

__global__ void __launch_bounds__(THREADS)
matmul_regtile(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int n) {
    __shared__ float a_smem[BM][BK];
    __shared__ float b_smem[BK][BN];

    const int tid = threadIdx.x;
    const int tx = tid % THREADS_N;
    const int ty = tid / THREADS_N;
    const int block_row = blockIdx.y * BM;
    const int block_col = blockIdx.x * BN;

    float acc[TM][TN] = {};
    float a_frag[TM];
    float b_frag[TN];

    for (int k0 = 0; k0 < n; k0 += BK) {
        // Consecutive threads take consecutive elements: 4 full 32-byte rows of A per warp,
        // 32 consecutive floats of one B row per warp.
#pragma unroll
        for (int l = 0; l < A_LOADS; ++l) {
            const int idx = tid + l * THREADS;
            const int r = idx / BK, kk = idx % BK;
            const int row = block_row + r, col = k0 + kk;
            a_smem[r][kk] = (row < n && col < n) ? a[row * n + col] : 0.0f;
        }
#pragma unroll
        for (int l = 0; l < B_LOADS; ++l) {
            const int idx = tid + l * THREADS;
            const int kk = idx / BN, cc = idx % BN;
            const int row = k0 + kk, col = block_col + cc;
            b_smem[kk][cc] = (row < n && col < n) ? b[row * n + col] : 0.0f;
        }
        __syncthreads();

#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; ++i) a_frag[i] = a_smem[ty + i * THREADS_M][k];
#pragma unroll
            for (int j = 0; j < TN; ++j) b_frag[j] = b_smem[k][tx + j * THREADS_N];
#pragma unroll
            for (int i = 0; i < TM; ++i) {
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a_frag[i] * b_frag[j];
            }
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = block_row + ty + i * THREADS_M;
        if (row >= n) continue;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int col = block_col + tx + j * THREADS_N;
            if (col < n) c[row * n + col] = acc[i][j];
        }
    }
}

static profkit::LaunchConfig launch_matmul_regtile(const float* a, const float* b, float* c, int n,
                                                   cudaStream_t stream) {
    const dim3 block(THREADS);
    const dim3 grid((n + BN - 1) / BN, (n + BM - 1) / BM);
    matmul_regtile<<<grid, block, 0, stream>>>(a, b, c, n);
    CHECK_LAUNCH();
    return profkit::LaunchConfig::of(grid, block);
}

#ifndef PROFKIT_NO_MAIN  // ladder_bench.cu includes every rung into one program
int main(int argc, char** argv) {
    const profkit::KernelDescriptor desc{"matmul_regtile", launch_matmul_regtile, nullptr, nullptr};
    return profkit::run_matmul_program(argc, argv, desc);
}
#endif
