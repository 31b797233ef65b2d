// Rung 6 — warp-tiled: each warp owns a 64 x 64 sub-tile of the block tile, computed as a grid of warp
// sub-tiles; BK = 16. Blocks inside the matrix copy their tiles with cp.async, three K steps in flight; blocks on
// its edge (and rows not 16-byte aligned) run a bounds-checked body, double-buffered behind a register prefetch.
//
// Mechanism added over vectorized (128 x 128 block tile, 8x8 outputs per thread, BK = 8, 256 threads):
// * a warp tile: the 128 x 128 block tile is split into 64 x 64 warp tiles (4 warps, 128 threads); a warp
//   walks its tile as WNITER sub-tiles of 64 x 16 and each thread holds 8 x 4 outputs of every sub-tile
//   (8 x 16 = 128 accumulators). The 32 lanes of a warp read, per k, 8 distinct A rows and 4 distinct B
//   columns groups, so a warp's shared-memory reads are 64 + 64 floats for 4096 FMAs: 6 LDS.128 per
//   128 FFMA per thread (vectorized: 4 per 64, i.e. 0.047 against 0.0625 LDS per FFMA);
// * BK = 16: half as many barriers and prefetch round trips per FMA as BK = 8;
// * the same zero-padded edges and float4 loads as vectorized; A transposed into shared memory
//   (a_smem[k][m]) so a thread's 8 A values of one k are two LDS.128;
// * that transposed store skewed (Config::a_col): a loading warp writes BK / 4 k-rows of 128 / BK consecutive
//   m each, and a row stride of BM + 4 put two of those k-rows on the same 8 banks, so every scalar STS took
//   two wavefronts (ncu on an H100: shared bank conflicts 28.6 k for vectorized, 16.8 M for this rung at 4096,
//   exactly one extra wavefront per A store). Shifting row k by (k / 4) * (128 / BK) slots, with the stride
//   widened to hold the shift, gives each k-row of a warp its own banks. A shift, not an XOR swizzle: a
//   fragment read stays the thread's base address plus a compile-time offset (an XOR made ptxas keep one base
//   per k group: 255 registers and a spill on sm_90). tests/build/test_warptile_banks.py counts the
//   wavefronts of every store and read on the host with these index functions. Timed on an H100 it changed
//   nothing (0.875x / 0.880x cuBLAS at 4096 / 8192 against 0.876x / 0.874x): the conflicts were 4.3 % of the
//   shared wavefronts; kept because it costs nothing and the counters read clean.
// * the interior body (warptiled_body_async): the checked body spends 445 of its 2493 sm_90 SASS instructions per
//   K step on bounds checks, zero fills and the unaligned fallback (82 % FFMA). Dropping them from the register
//   prefetch (2210 instructions, 93 % FFMA) did not pay: at 255 registers ptxas then sank the next step's eight
//   LDG.128 to just before their shared stores, so every step waited out a global load (long_scoreboard 0.006 ->
//   0.302 cycles per issue on an H100). Interior blocks therefore copy their tiles with cp.async (LDGSTS: no
//   register holds the data, nothing to sink) one step ahead and transpose A shared-to-shared.
// Counters that should prove it: smsp__sass_inst_executed_op_shared_ld.sum per FFMA falls from 0.0625 to
// 0.047; barrier stalls (smsp__average_warp_latency_issue_stalled_barrier) fall with half the
// __syncthreads per FMA; the FMA pipe (sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active) gets busier.
// Other tile shapes compile from the same template (-DWARPTILE_CONFIG=N, see kConfig below) so that one
// benchmark run can compare them side by side in ladder_bench.
#include <tuple>

#include "harness.cuh"

namespace warptile {

template <int BM_, int BN_, int BK_, int WM_, int WN_, int WNITER_, int TM_, int TN_, int MIN_BLOCKS_ = 2>
struct Config {
    static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, WNITER = WNITER_, TM = TM_, TN = TN_;
    static constexpr int MIN_BLOCKS = MIN_BLOCKS_;  // __launch_bounds__: blocks per SM the registers must allow
    static constexpr int WARPS = (BM / WM) * (BN / WN);
    static constexpr int THREADS = WARPS * 32;
    static constexpr int WMITER = (WM * WN) / (32 * TM * TN * WNITER);  // warp sub-tiles along M
    static constexpr int WSUBM = WM / WMITER;
    static constexpr int WSUBN = WN / WNITER;
    static constexpr int A_PASSES = BM * BK / 4 / THREADS;  // float4 loads of A per thread per K step
    static constexpr int B_PASSES = BK * BN / 4 / THREADS;
    static constexpr int A_ROWS_PER_WARP = 128 / BK;  // m values one loading warp stores per k-row
    static constexpr int A_STRIDE = BM + (BK / 4 - 1) * A_ROWS_PER_WARP;  // room for a_col's shift; 16 B rows
    static constexpr int A_ROW_STEP = THREADS / (BK / 4);
    static constexpr int B_ROW_STEP = THREADS / (BN / 4);

    // The loaders: BK / 4 threads cover one A row's BK k-values; BN / 4 threads one B row (float4 each).
    __host__ __device__ static constexpr int a_load_row(int tid) { return tid / (BK / 4); }
    __host__ __device__ static constexpr int a_load_k(int tid) { return (tid % (BK / 4)) * 4; }
    __host__ __device__ static constexpr int b_load_row(int tid) { return tid / (BN / 4); }
    __host__ __device__ static constexpr int b_load_col(int tid) { return (tid % (BN / 4)) * 4; }
    // Where A[m][k] of the tile sits in a_smem[.][k][.]: shifted by (k / 4) * A_ROWS_PER_WARP (see the header).
    __host__ __device__ static constexpr int a_col(int k, int m) { return m + (k / 4) * A_ROWS_PER_WARP; }
    // The compute mapping: warp -> its warp tile; lane -> its TM x TN patch of every warp sub-tile.
    __host__ __device__ static constexpr int warp_row(int warp) { return (warp / (BN / WN)) * WM; }
    __host__ __device__ static constexpr int warp_col(int warp) { return (warp % (BN / WN)) * WN; }
    __host__ __device__ static constexpr int lane_row(int lane) { return (lane / (WSUBN / TN)) * TM; }
    __host__ __device__ static constexpr int lane_col(int lane) { return (lane % (WSUBN / TN)) * TN; }
    static_assert(BM % WM == 0 && BN % WN == 0, "warp tiles cover the block tile");
    static_assert(WMITER >= 1 && WM % WMITER == 0 && WN % WNITER == 0, "warp sub-tiles cover the warp tile");
    static_assert((WSUBN / TN) * (WSUBM / TM) == 32, "one warp's 32 lanes cover a warp sub-tile");
    static_assert(TM % 4 == 0 && TN % 4 == 0, "fragments are read as float4");
    static_assert(A_PASSES * THREADS * 4 == BM * BK && B_PASSES * THREADS * 4 == BK * BN, "whole float4 loads");
    static_assert(THREADS % (BK / 4) == 0 && THREADS % (BN / 4) == 0, "load rows split evenly");
    static_assert(A_ROWS_PER_WARP * (BK / 4) == 32 && A_ROWS_PER_WARP % 4 == 0,
                  "a_col's shift spreads one loading warp's k-rows over the banks and keeps float4s aligned");
};

// Every tile configuration, so that host-side checks see all of them; WARPTILE_CONFIG picks the built one.
using Configs = std::tuple<Config<128, 128, 16, 64, 64, 4, 8, 4>,      // 0: 128 threads
                           Config<128, 128, 8, 64, 32, 2, 8, 4>,       // 1: 256 threads, BK 8
                           Config<128, 256, 8, 64, 64, 4, 8, 4, 1>,    // 2: 256 threads, wider block tile, BK 8
                           Config<64, 128, 16, 32, 64, 2, 8, 4>,       // 3: 128 threads, smaller tile, more blocks
                           Config<128, 128, 16, 64, 32, 1, 8, 8, 1>>;  // 4: 256 threads, 8 x 8 per thread

#ifndef WARPTILE_CONFIG
#define WARPTILE_CONFIG 0
#endif
static_assert(WARPTILE_CONFIG >= 0 && WARPTILE_CONFIG < std::tuple_size<Configs>::value, "WARPTILE_CONFIG: 0..4");
using kConfig = std::tuple_element<WARPTILE_CONFIG, Configs>::type;

// Loads m[row][col .. col+3] of an n x n row-major matrix; zeros outside it (as in matmul_vectorized).
__device__ __forceinline__ float4 load4(const float* __restrict__ m, int n, int row, int col, bool aligned) {
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (row >= n) return v;
    const float* p = m + static_cast<size_t>(row) * n + col;
    if (aligned) {
        if (col < n) v = *reinterpret_cast<const float4*>(p);
    } else {
        if (col < n) v.x = p[0];
        if (col + 1 < n) v.y = p[1];
        if (col + 2 < n) v.z = p[2];
        if (col + 3 < n) v.w = p[3];
    }
    return v;
}

__device__ __forceinline__ void store4(float* __restrict__ m, int n, int row, int col, float4 v, bool aligned) {
    if (row >= n) return;
    float* p = m + static_cast<size_t>(row) * n + col;
    if (aligned) {
        if (col < n) *reinterpret_cast<float4*>(p) = v;
    } else {
        if (col < n) p[0] = v.x;
        if (col + 1 < n) p[1] = v.y;
        if (col + 2 < n) p[2] = v.z;
        if (col + 3 < n) p[3] = v.w;
    }
}

// This thread's place in the block tile: its warp tile's corner, and its patch inside every warp sub-tile.
struct Place {
    int warp_row, warp_col, lane_row, lane_col;
};

template <typename C>
__device__ __forceinline__ Place place_of(int tid) {
    const int warp = tid / 32, lane = tid % 32;
    return {C::warp_row(warp), C::warp_col(warp), C::lane_row(lane), C::lane_col(lane)};
}

template <typename C>
using Accumulators = float[C::WMITER * C::TM][C::WNITER * C::TN];

// One K step's FMAs, from an A tile transposed and skewed (a[k][a_col(k, m)]) and a B tile (b[k][n]): per k, this
// thread's TM A values and TN B values of every warp sub-tile (LDS.128 each), then their outer product into acc.
template <typename C>
__device__ __forceinline__ void fma_step(const float (*a)[C::A_STRIDE], const float (*b)[C::BN], const Place& at,
                                         Accumulators<C>& acc) {
#pragma unroll
    for (int k = 0; k < C::BK; ++k) {
        float a_frag[C::WMITER * C::TM], b_frag[C::WNITER * C::TN];
#pragma unroll
        for (int wm = 0; wm < C::WMITER; ++wm)
#pragma unroll
            for (int i = 0; i < C::TM; i += 4)
                *reinterpret_cast<float4*>(&a_frag[wm * C::TM + i]) = *reinterpret_cast<const float4*>(
                    &a[k][C::a_col(k, at.warp_row + wm * C::WSUBM + at.lane_row + i)]);
#pragma unroll
        for (int wn = 0; wn < C::WNITER; ++wn)
#pragma unroll
            for (int j = 0; j < C::TN; j += 4)
                *reinterpret_cast<float4*>(&b_frag[wn * C::TN + j]) = *reinterpret_cast<const float4*>(
                    &b[k][at.warp_col + wn * C::WSUBN + at.lane_col + j]);
#pragma unroll
        for (int i = 0; i < C::WMITER * C::TM; ++i)
#pragma unroll
            for (int j = 0; j < C::WNITER * C::TN; ++j) acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j]);
    }
}

// This thread's outputs into C; kChecked: bounds-checked stores (edge blocks, unaligned rows), else float4 stores.
template <typename C, bool kChecked>
__device__ __forceinline__ void store_outputs(float* __restrict__ c, int n, int block_row, int block_col,
                                              const Place& at, const Accumulators<C>& acc) {
    const bool aligned = (n % 4) == 0;
#pragma unroll
    for (int wm = 0; wm < C::WMITER; ++wm)
#pragma unroll
        for (int i = 0; i < C::TM; ++i) {
            const int row = block_row + at.warp_row + wm * C::WSUBM + at.lane_row + i;
#pragma unroll
            for (int wn = 0; wn < C::WNITER; ++wn)
#pragma unroll
                for (int j = 0; j < C::TN; j += 4) {
                    const float* out = &acc[wm * C::TM + i][wn * C::TN + j];
                    const int col = block_col + at.warp_col + wn * C::WSUBN + at.lane_col + j;
                    const float4 v = make_float4(out[0], out[1], out[2], out[3]);
                    if constexpr (kChecked)
                        store4(c, n, row, col, v, aligned);
                    else
                        *reinterpret_cast<float4*>(c + static_cast<size_t>(row) * n + col) = v;
                }
        }
}

// The checked body's shared tiles: A transposed (a[.][k][m], skewed by a_col), both double-buffered.
template <typename C>
struct CheckedTiles {
    float a[2][C::BK][C::A_STRIDE];
    float b[2][C::BK][C::BN];
};

// The checked body, for blocks on the matrix edge or rows not 16-byte aligned: bounds-checked float4 loads into
// registers one K step ahead, stored transposed into shared memory after the step's FMAs.
template <typename C>
__device__ __forceinline__ void warptiled_body(const float* __restrict__ a, const float* __restrict__ b,
                                               float* __restrict__ c, int n, CheckedTiles<C>& tiles) {
    auto& a_smem = tiles.a;
    auto& b_smem = tiles.b;

    const int tid = threadIdx.x;
    const int block_row = blockIdx.y * C::BM;
    const int block_col = blockIdx.x * C::BN;
    const bool aligned = (n % 4) == 0;

    const int a_row = C::a_load_row(tid), a_k = C::a_load_k(tid);
    const int b_row = C::b_load_row(tid), b_col = C::b_load_col(tid);
    const Place at = place_of<C>(tid);

    Accumulators<C> acc = {};
    float4 a_next[C::A_PASSES], b_next[C::B_PASSES];

    auto fetch = [&](int k0) {
#pragma unroll
        for (int p = 0; p < C::A_PASSES; ++p)
            a_next[p] = load4(a, n, block_row + a_row + p * C::A_ROW_STEP, k0 + a_k, aligned);
#pragma unroll
        for (int p = 0; p < C::B_PASSES; ++p)
            b_next[p] = load4(b, n, k0 + b_row + p * C::B_ROW_STEP, block_col + b_col, aligned);
    };
    auto store_tile = [&](int buf) {
#pragma unroll
        for (int p = 0; p < C::A_PASSES; ++p) {
            const int m = a_row + p * C::A_ROW_STEP;
            a_smem[buf][a_k + 0][C::a_col(a_k + 0, m)] = a_next[p].x;
            a_smem[buf][a_k + 1][C::a_col(a_k + 1, m)] = a_next[p].y;
            a_smem[buf][a_k + 2][C::a_col(a_k + 2, m)] = a_next[p].z;
            a_smem[buf][a_k + 3][C::a_col(a_k + 3, m)] = a_next[p].w;
        }
#pragma unroll
        for (int p = 0; p < C::B_PASSES; ++p)
            *reinterpret_cast<float4*>(&b_smem[buf][b_row + p * C::B_ROW_STEP][b_col]) = b_next[p];
    };

    const int num_k_tiles = (n + C::BK - 1) / C::BK;
    fetch(0);
    store_tile(0);
    __syncthreads();

    for (int t = 0; t < num_k_tiles; ++t) {
        const int cur = t % 2;
        const bool has_next = t + 1 < num_k_tiles;
        if (has_next) fetch((t + 1) * C::BK);  // the next step's global loads fly during this step's FMAs
        fma_step<C>(a_smem[cur], b_smem[cur], at, acc);

        // The other buffer was last read in step t - 1, finished by every thread before that step's barrier.
        if (has_next) store_tile(1 - cur);
        __syncthreads();
    }
    store_outputs<C, true>(c, n, block_row, block_col, at, acc);
}

// ---------------------------------------------------------------------------------------------
// The interior body: blocks whose tile and every K step lie inside the matrix, rows 16-byte aligned.

constexpr int kStages = 3;  // K steps of the copied tiles in shared memory: computed, transposed next, arriving

// 16 bytes global -> shared without registers (sm_80+). .cg: through L2 only, as the tiles are read once per block.
__device__ __forceinline__ void copy16_async(float* smem, const float* gmem) {
    const unsigned to = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(to), "l"(gmem) : "memory");
}
__device__ __forceinline__ void commit_copies() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// Wait until at most `pending` committed groups of this thread's copies are still in flight.
template <int pending>
__device__ __forceinline__ void wait_copies() { asm volatile("cp.async.wait_group %0;\n" ::"n"(pending) : "memory"); }

// The interior body's shared tiles: A and B copied as they lie in global memory, kStages K steps of them; A
// transposed (and skewed by a_col) into the same double buffer as the checked body's, from which the FMAs read.
template <typename C>
struct AsyncTiles {
    float a_rows[kStages][C::BM][C::BK];
    float b[kStages][C::BK][C::BN];
    float a[2][C::BK][C::A_STRIDE];
};

// Why a second body: without bounds checks a K step is 2238 instructions instead of 2493, but a register prefetch
// without them gets its global loads sunk by ptxas to their stores (see the header). Here cp.async copies both
// tiles into shared memory a step ahead with no register holding them, and A is transposed shared-to-shared (4
// LDS.128 and 16 STS a step, from a tile that has arrived: short latency) one step ahead of its FMAs, which read
// exactly as the checked body's do. Reading A row-major instead (4 k per LDS.128, no transposition) was measured
// slower on an H100: ptxas then moved accumulators between registers (in-place FFMAs 0.78 -> 0.37) and dispatch
// stalls more than doubled (0.19 -> 0.45 cycles per issue).
template <typename C>
__device__ __forceinline__ void warptiled_body_async(const float* __restrict__ a, const float* __restrict__ b,
                                                     float* __restrict__ c, int n, AsyncTiles<C>& tiles) {
    const int tid = threadIdx.x;
    const int block_row = blockIdx.y * C::BM;
    const int block_col = blockIdx.x * C::BN;
    const int a_row = C::a_load_row(tid), a_k = C::a_load_k(tid);
    const int b_row = C::b_load_row(tid), b_col = C::b_load_col(tid);
    const Place at = place_of<C>(tid);

    // This thread's first A and B element of K step 0; pass p and step t are fixed offsets from them.
    const float* a_first = a + static_cast<size_t>(block_row + a_row) * n + a_k;
    const float* b_first = b + static_cast<size_t>(b_row) * n + block_col + b_col;
    auto issue = [&](int t) {
        const int stage = t % kStages, k0 = t * C::BK;
#pragma unroll
        for (int p = 0; p < C::A_PASSES; ++p)
            copy16_async(&tiles.a_rows[stage][a_row + p * C::A_ROW_STEP][a_k],
                         a_first + static_cast<size_t>(p * C::A_ROW_STEP) * n + k0);
#pragma unroll
        for (int p = 0; p < C::B_PASSES; ++p)
            copy16_async(&tiles.b[stage][b_row + p * C::B_ROW_STEP][b_col],
                         b_first + static_cast<size_t>(k0 + p * C::B_ROW_STEP) * n);
    };
    auto transpose = [&](int t) {  // step t's A rows -> a[t % 2][k][a_col(k, m)]
#pragma unroll
        for (int p = 0; p < C::A_PASSES; ++p) {
            const int m = a_row + p * C::A_ROW_STEP;
            const float4 v = *reinterpret_cast<const float4*>(&tiles.a_rows[t % kStages][m][a_k]);
            tiles.a[t % 2][a_k + 0][C::a_col(a_k + 0, m)] = v.x;
            tiles.a[t % 2][a_k + 1][C::a_col(a_k + 1, m)] = v.y;
            tiles.a[t % 2][a_k + 2][C::a_col(a_k + 2, m)] = v.z;
            tiles.a[t % 2][a_k + 3][C::a_col(a_k + 3, m)] = v.w;
        }
    };

    Accumulators<C> acc = {};
    const int num_k_tiles = n / C::BK;
    issue(0);
    commit_copies();
    if (num_k_tiles > 1) issue(1);
    commit_copies();  // possibly empty: the waits below count groups
    wait_copies<1>();  // step 0 has landed (for this thread)
    __syncthreads();
    transpose(0);

    for (int t = 0; t < num_k_tiles; ++t) {
        wait_copies<0>();  // step t + 1, issued one step ago, has landed
        __syncthreads();   // for every thread; a[t % 2] is written; everyone is done with step t - 1
        if (t + 2 < num_k_tiles) issue(t + 2);  // into the stage step t - 1 used
        commit_copies();
        if (t + 1 < num_k_tiles) transpose(t + 1);  // into the A buffer step t - 1 used

        fma_step<C>(tiles.a[t % 2], tiles.b[t % kStages], at, acc);
    }
    store_outputs<C, false>(c, n, block_row, block_col, at, acc);
}

// Whether a block runs the interior body: its whole tile and every K step inside the matrix, rows 16-byte aligned
// (every block when n is a multiple of the tile).
template <typename C>
__host__ __device__ constexpr bool interior_block(int block_row, int block_col, int n) {
    return n % 4 == 0 && n % C::BK == 0 && block_row + C::BM <= n && block_col + C::BN <= n;
}

// One shared buffer for either body (a block runs one of them); dynamic, as it is over the 48 KB static limit.
template <typename C>
union SharedTiles {
    CheckedTiles<C> checked;
    AsyncTiles<C> async;
};

}  // namespace warptile

// One plain symbol per build, whatever WARPTILE_CONFIG picked: profiles and the ladder name it "matmul_warptiled".
__global__ void __launch_bounds__(warptile::kConfig::THREADS, warptile::kConfig::MIN_BLOCKS)
matmul_warptiled(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int n) {
    using C = warptile::kConfig;
    extern __shared__ __align__(16) unsigned char shared_bytes[];
    auto& tiles = *reinterpret_cast<warptile::SharedTiles<C>*>(shared_bytes);
    if (warptile::interior_block<C>(blockIdx.y * C::BM, blockIdx.x * C::BN, n))
        warptile::warptiled_body_async<C>(a, b, c, n, tiles.async);
    else
        warptile::warptiled_body<C>(a, b, c, n, tiles.checked);
}

static profkit::LaunchConfig launch_matmul_warptiled(const float* a, const float* b, float* c, int n,
                                                     cudaStream_t stream) {
    using C = warptile::kConfig;
    constexpr size_t shared_bytes = sizeof(warptile::SharedTiles<C>);
    static bool attribute_set = false;  // over 48 KB of dynamic shared memory must be allowed once per kernel
    if (!attribute_set) {
        CHECK_CUDA(cudaFuncSetAttribute(matmul_warptiled, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(shared_bytes)));
        attribute_set = true;
    }
    const dim3 block(C::THREADS);
    const dim3 grid((n + C::BN - 1) / C::BN, (n + C::BM - 1) / C::BM);
    matmul_warptiled<<<grid, block, shared_bytes, stream>>>(a, b, c, n);
    CHECK_LAUNCH();
    return profkit::LaunchConfig::of(grid, block, shared_bytes);
}

#ifndef PROFKIT_NO_MAIN  // ladder_bench.cu includes every rung into one program
int main(int argc, char** argv) {
    const profkit::KernelDescriptor desc{"matmul_warptiled", launch_matmul_warptiled, nullptr, nullptr};
    return profkit::run_matmul_program(argc, argv, desc);
}
#endif
