// The ladder benchmark: every rung and cuBLAS in ONE process, timed side by side.
//
//   ladder_bench [N ...] [--reps R] [--warmup W] [--seed S]     (the harness's options and defaults)
//
// For each N: one input pair (uniform [-1,1), fixed seed), every kernel checked against the
// harness's reference (float64 CPU for N <= 512, else cuBLAS with TF32 off plus 256 sampled
// float64 dot products), then R rounds; in each round every kernel runs once, in rotated order,
// each after an L2 flush (2x L2) and an output poison, with CUDA events around the launch only.
// Each timed launch sits alone in an NVTX range named after its rung, as in the rung's own program, so one
// ncu process can capture the whole ladder (`--nvtx-include matmul_naive/ ...`).
// One JSON line per (kernel, N) on stdout: median/p20/p80/min/max ms over the R runs, GFLOP/s
// from the harness's single matmul_flops(n) = 2n^3, the ratio to cuBLAS's median and every run's time in round order.
#define PROFKIT_NO_MAIN
#include "harness.cuh"

namespace rung_naive {
#include "matmul_naive.cu"
}
namespace rung_tiled {
#include "matmul_tiled.cu"
}
namespace rung_coarsened {
#include "matmul_coarsened.cu"
}
namespace rung_regtile {
#include "matmul_regtile.cu"
}
namespace rung_vectorized {
#include "matmul_vectorized.cu"
}
namespace rung_warptiled {
#include "matmul_warptiled.cu"
}
namespace rung_cublas {
#include "matmul_cublas.cu"
}

namespace {

using profkit::KernelDescriptor;

const KernelDescriptor kRungs[] = {
    {"matmul_naive", rung_naive::launch_matmul_naive, nullptr, nullptr},
    {"matmul_tiled", rung_tiled::launch_matmul_tiled, nullptr, nullptr},
    {"matmul_coarsened", rung_coarsened::launch_matmul_coarsened, nullptr, nullptr},
    {"matmul_regtile", rung_regtile::launch_matmul_regtile, nullptr, nullptr},
    {"matmul_vectorized", rung_vectorized::launch_matmul_vectorized, nullptr, nullptr},
    {"matmul_warptiled", rung_warptiled::launch_matmul_warptiled, nullptr, nullptr},
    {"matmul_cublas", rung_cublas::launch_matmul_cublas, rung_cublas::setup_matmul_cublas,
     rung_cublas::teardown_matmul_cublas},
};
constexpr int kRungCount = sizeof(kRungs) / sizeof(kRungs[0]);
constexpr int kBaseline = kRungCount - 1;  // cuBLAS

// Every run in round order (entry r of each kernel is round r), so that ratios can be taken round by round.
std::string json_list(const std::vector<double>& v) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + profkit::json_number(v[i]);
    return out;
}

double quantile(std::vector<double> v, double q) {
    std::sort(v.begin(), v.end());
    const double pos = q * (v.size() - 1);
    const size_t lo = static_cast<size_t>(pos);
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (pos - lo) * (v[hi] - v[lo]);
}

}  // namespace

int main(int argc, char** argv) {
    using namespace profkit;
    Options opt;
    if (const auto exit_code = options_from_command_line(argc, argv, &opt)) return *exit_code;
    if (opt.check == CheckMode::None) opt.check = CheckMode::Auto;  // the benchmark always checks

    int device = 0, l2_bytes = 0;
    CHECK_CUDA(cudaGetDevice(&device));
    cudaDeviceProp prop{};
    CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
    CHECK_CUDA(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
    const size_t flush_bytes = std::max<size_t>(2 * static_cast<size_t>(l2_bytes), size_t{1} << 20);
    std::fprintf(stderr, "ladder_bench on %s (sm_%d%d, %d SMs); reps %d, warmup %d\n", prop.name, prop.major,
                 prop.minor, prop.multiProcessorCount, opt.reps, opt.warmup);

    cudaStream_t stream = nullptr;
    CHECK_CUDA(cudaStreamCreate(&stream));
    float* flush_buffer = nullptr;
    CHECK_CUDA(cudaMalloc(&flush_buffer, flush_bytes));
    for (const auto& rung : kRungs)
        if (rung.setup != nullptr) rung.setup(stream);
    cudaEvent_t start, stop;
    CHECK_CUDA(cudaEventCreate(&start));
    CHECK_CUDA(cudaEventCreate(&stop));
    {
        ReferenceBuilder references(stream);
        for (const int n : opt.sizes) {
            const Problem problem(n, opt.seed, stream);
            const DeviceBuffers& dev = problem.dev;
            const Reference ref =
                references.build(opt.check, problem.a, problem.b, dev.a, dev.b, dev.scratch, n, opt.seed);
            require_trusted_reference(ref, n);
            double rel_err[kRungCount];
            for (int k = 0; k < kRungCount; ++k) {  // check, then warm up
                poison(dev.c, n, stream);
                kRungs[k].launch(dev.a, dev.b, dev.c, n, stream);
                CHECK_CUDA(cudaStreamSynchronize(stream));
                const ErrorSummary error = check_output(dev.c, ref, n, stream);
                require_within_tolerance(kRungs[k].name, n, "check run", error, ref.method);
                rel_err[k] = error.rel_err;
                for (int w = 0; w < opt.warmup; ++w) kRungs[k].launch(dev.a, dev.b, dev.c, n, stream);
            }
            CHECK_CUDA(cudaStreamSynchronize(stream));
            std::vector<std::vector<double>> times(kRungCount);
            for (int round = 0; round < opt.reps; ++round) {
                for (int j = 0; j < kRungCount; ++j) {
                    const int k = (j + round) % kRungCount;
                    CHECK_CUDA(cudaMemsetAsync(flush_buffer, round & 0xFF, flush_bytes, stream));
                    poison(dev.c, n, stream);
                    CHECK_CUDA(cudaEventRecord(start, stream));
                    nvtxRangePushA(kRungs[k].name);  // as in each rung's own program: ncu --nvtx-include NAME/
                    kRungs[k].launch(dev.a, dev.b, dev.c, n, stream);
                    nvtxRangePop();
                    CHECK_CUDA(cudaEventRecord(stop, stream));
                    CHECK_CUDA(cudaEventSynchronize(stop));
                    float ms = 0.0f;
                    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
                    times[k].push_back(ms);
                    if (round == opt.reps - 1) {  // each rung's last timed output is checked too
                        const ErrorSummary error = check_output(dev.c, ref, n, stream);
                        require_within_tolerance(kRungs[k].name, n, "last timed run", error, ref.method);
                    }
                }
            }
            const double baseline_ms = quantile(times[kBaseline], 0.5);
            for (int k = 0; k < kRungCount; ++k) {
                const double median = quantile(times[k], 0.5);
                std::printf("{\"profkit_bench\": 1, \"kernel\": \"%s\", \"n\": %d, \"runs\": %d, \"median_ms\": %s, "
                            "\"p20_ms\": %s, \"p80_ms\": %s, \"min_ms\": %s, \"max_ms\": %s, \"gflops\": %s, "
                            "\"ratio_vs_cublas\": %s, \"rel_err\": %s, \"check\": \"%s\", \"times_ms\": [%s]}\n",
                            kRungs[k].name, n, opt.reps, json_number(median).c_str(),
                            json_number(quantile(times[k], 0.2)).c_str(), json_number(quantile(times[k], 0.8)).c_str(),
                            json_number(quantile(times[k], 0.0)).c_str(), json_number(quantile(times[k], 1.0)).c_str(),
                            json_number(matmul_flops(n) / (median * 1e-3) / 1e9).c_str(),
                            json_number(baseline_ms / median).c_str(), json_number(rel_err[k]).c_str(),
                            ref.method.c_str(), json_list(times[k]).c_str());
            }
            std::fflush(stdout);
        }
    }
    for (const auto& rung : kRungs)
        if (rung.teardown != nullptr) rung.teardown();
    CHECK_CUDA(cudaEventDestroy(start));
    CHECK_CUDA(cudaEventDestroy(stop));
    CHECK_CUDA(cudaFree(flush_buffer));
    CHECK_CUDA(cudaStreamDestroy(stream));
    return 0;
}
