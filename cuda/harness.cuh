// Shared driver for the matmul ladder: every program is its kernel, a launcher and
//
//   int main(int argc, char** argv) { return profkit::run_matmul_program(argc, argv, desc); }
//
// so that all rungs are measured and verified the same way:
//
// * inputs: A and B (row-major N x N fp32) uniform in [-1, 1) from a fixed-seed host RNG;
// * C is poisoned with 0xFF bytes (a NaN pattern) before every run, outside the timed window,
//   so an element a kernel forgets to write shows up as a non-finite error;
// * check (before timing, and again on the output of the last timed run): relative Frobenius
//   error against a float64 CPU reference (N <= 512) or cuBLAS sgemm with TF32 off, whose own
//   result is checked against float64 CPU dot products at 256 sampled entries. The comparison
//   runs on the device (float64 partial sums per block, added on the host in a fixed order), so a
//   check reads C where it lies instead of copying N^2 floats to the host;
// * timing: W warm-up runs, then R runs, each with L2 flushed (a memset of 2x the L2 size) and C
//   poisoned first, CUDA events around the single launch only; median / min / max reported;
// * NVTX: each timed launch sits alone in a range named exactly after the kernel; warm-up runs
//   in "warmup", the check launch in "check", the reference's cuBLAS calls in "reference";
// * output: one JSON line per N on stdout (fields below), human-readable lines on stderr;
//   exit 0 on success, 1 on a failed check or CUDA/cuBLAS error, 2 on a usage error.
//
// Command-line parsing lives in harness_args.h (host-only, unit-tested without a GPU).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "harness_args.h"

namespace profkit {

// ---------------------------------------------------------------------------------------------
// Error checking: any failing CUDA or cuBLAS call prints file:line and the failing expression,
// then exits with kFailureExitCode.

inline void check_cuda(cudaError_t status, const char* expr, const char* file, int line) {
    if (status != cudaSuccess) {
        std::fprintf(stderr, "%s:%d: CUDA error %s (%s) from %s\n", file, line, cudaGetErrorName(status),
                     cudaGetErrorString(status), expr);
        std::exit(kFailureExitCode);
    }
}

inline void check_cublas(cublasStatus_t status, const char* expr, const char* file, int line) {
    if (status != CUBLAS_STATUS_SUCCESS) {
        std::fprintf(stderr, "%s:%d: cuBLAS error %s (%s) from %s\n", file, line, cublasGetStatusName(status),
                     cublasGetStatusString(status), expr);
        std::exit(kFailureExitCode);
    }
}

#define CHECK_CUDA(expr) ::profkit::check_cuda((expr), #expr, __FILE__, __LINE__)
#define CHECK_CUBLAS(expr) ::profkit::check_cublas((expr), #expr, __FILE__, __LINE__)
// Catches launch-configuration errors right after a <<<...>>> launch (no synchronisation).
#define CHECK_LAUNCH() ::profkit::check_cuda(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

// ---------------------------------------------------------------------------------------------
// What a program hands to the harness.

struct LaunchConfig {
    bool known = false;  // false for library calls (cuBLAS picks its own kernels and grids)
    dim3 grid;
    dim3 block;
    size_t dyn_smem_bytes = 0;

    static LaunchConfig of(dim3 grid, dim3 block, size_t dyn_smem_bytes = 0) {
        LaunchConfig config;
        config.known = true;
        config.grid = grid;
        config.block = block;
        config.dyn_smem_bytes = dyn_smem_bytes;
        return config;
    }
    static LaunchConfig opaque() { return LaunchConfig{}; }
};

// Launches C = A * B for row-major N x N fp32 device matrices on `stream`, asynchronously,
// and returns the configuration it used. Launchers call CHECK_LAUNCH() after their launch.
using LaunchFn = LaunchConfig (*)(const float* a, const float* b, float* c, int n, cudaStream_t stream);

struct KernelDescriptor {
    const char* name;             // kernel function name; also the NVTX range and JSON "kernel"
    LaunchFn launch;
    void (*setup)(cudaStream_t);  // optional, runs once before any launch (e.g. create a cuBLAS handle)
    void (*teardown)();           // optional, runs once at exit
};

// ---------------------------------------------------------------------------------------------
// Workload arithmetic: the one FLOP count used for every rung and for cuBLAS.

inline double matmul_flops(int n) { return 2.0 * n * static_cast<double>(n) * n; }

// Tolerance on ||C - C_ref||_F / ||C_ref||_F. With inputs uniform in [-1, 1) the rounding errors
// of an fp32 dot product of length K behave like a random walk: relative error about u * sqrt(K)
// with u = 2^-24 = 6e-8, i.e. ~5e-6 at K = 8192 (blocked/tiled summation is smaller still); the
// candidate and the cuBLAS reference each carry that much. 1e-4 leaves a ~20x margin over it,
// yet rounding the inputs to TF32 (u = 2^-11) gives ~2.6e-4 whatever K is, so an accidental TF32
// path on either side fails the check. The worst-case bound K * u = 5e-4 needs every rounding
// error to point the same way, which random signed data does not produce.
constexpr double kRelErrTolerance = 1e-4;
constexpr int kFullCpuReferenceMaxN = 512;  // auto mode: full float64 CPU reference up to here
constexpr int kSampledEntries = 256;        // float64 dot products that check the cuBLAS reference

// ---------------------------------------------------------------------------------------------
// Host data.

// splitmix64: small, fast and identical on every platform (std distributions are not).
class HostRng {
public:
    explicit HostRng(std::uint64_t seed) : state_(seed) {}

    std::uint64_t next() {
        std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }

    // Uniform in [-1, 1) on a 2^-23 grid: every value is exact in fp32.
    float uniform_pm1() {
        const float u = static_cast<float>(next() >> 40) * 0x1.0p-24f;  // [0, 1)
        return 2.0f * u - 1.0f;
    }

private:
    std::uint64_t state_;
};

inline void fill_uniform_pm1(std::vector<float>& values, HostRng& rng) {
    for (float& v : values) v = rng.uniform_pm1();
}

// Full float64 reference C = A * B, row-major; products of fp32 values are exact in float64.
inline std::vector<double> cpu_reference(const std::vector<float>& a, const std::vector<float>& b, int n) {
    std::vector<double> c(static_cast<size_t>(n) * n, 0.0);
    for (int i = 0; i < n; ++i) {
        double* c_row = &c[static_cast<size_t>(i) * n];
        for (int k = 0; k < n; ++k) {
            const double a_ik = a[static_cast<size_t>(i) * n + k];
            const float* b_row = &b[static_cast<size_t>(k) * n];
            for (int j = 0; j < n; ++j) c_row[j] += a_ik * b_row[j];
        }
    }
    return c;
}

inline double cpu_dot(const std::vector<float>& a, const std::vector<float>& b, int n, int row, int col) {
    double sum = 0.0;
    for (int k = 0; k < n; ++k) {
        sum += static_cast<double>(a[static_cast<size_t>(row) * n + k]) * b[static_cast<size_t>(k) * n + col];
    }
    return sum;
}

struct ErrorSummary {
    double rel_err;          // ||C - ref||_F / ||ref||_F; NaN when any entry of C is not finite
    size_t non_finite = 0;   // entries of C still NaN/Inf (e.g. the poison pattern: never written)
};

// Running sums of a relative-error check; the host and the device check add entries the same way.
struct ErrorParts {
    double diff2 = 0.0;                // sum of (c - ref)^2
    double ref2 = 0.0;                 // sum of ref^2
    unsigned long long non_finite = 0;  // entries of c that are NaN or Inf
};

// x - x is 0 for every finite float and NaN for NaN and +-Inf (IEEE arithmetic; no fast-math here).
__host__ __device__ inline bool is_finite_float(float x) { return x - x == 0.0f; }

__host__ __device__ inline void add_entry(ErrorParts& parts, float c, double ref) {
    if (!is_finite_float(c)) ++parts.non_finite;
    const double d = static_cast<double>(c) - ref;
    parts.diff2 += d * d;
    parts.ref2 += ref * ref;
}

inline void add_parts(ErrorParts& total, const ErrorParts& more) {
    total.diff2 += more.diff2;
    total.ref2 += more.ref2;
    total.non_finite += more.non_finite;
}

inline ErrorSummary summarize(const ErrorParts& parts) {
    const double rel = parts.non_finite ? std::numeric_limits<double>::quiet_NaN() : std::sqrt(parts.diff2 / parts.ref2);
    return ErrorSummary{rel, static_cast<size_t>(parts.non_finite)};
}

constexpr int kCheckBlocks = 528;   // 4 per SM on a 132-SM H200; any count works (grid-stride loop)
constexpr int kCheckThreads = 256;

// Each block adds its grid-stride share of (c, ref) into block_parts[blockIdx.x].
template <typename Ref>
__global__ void error_parts_kernel(const float* c, const Ref* ref, size_t count, ErrorParts* block_parts) {
    ErrorParts mine;
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
        add_entry(mine, c[i], static_cast<double>(ref[i]));
    }
    __shared__ double diff2[kCheckThreads];
    __shared__ double ref2[kCheckThreads];
    __shared__ unsigned long long non_finite[kCheckThreads];
    diff2[threadIdx.x] = mine.diff2;
    ref2[threadIdx.x] = mine.ref2;
    non_finite[threadIdx.x] = mine.non_finite;
    __syncthreads();
    for (int half = kCheckThreads / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) {
            diff2[threadIdx.x] += diff2[threadIdx.x + half];
            ref2[threadIdx.x] += ref2[threadIdx.x + half];
            non_finite[threadIdx.x] += non_finite[threadIdx.x + half];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) block_parts[blockIdx.x] = ErrorParts{diff2[0], ref2[0], non_finite[0]};
}

// Relative error of the device matrix c (n x n) against the device reference ref, computed on the device.
template <typename Ref>
ErrorSummary device_relative_error(const float* c, const Ref* ref, int n, cudaStream_t stream) {
    ErrorParts* d_parts = nullptr;
    CHECK_CUDA(cudaMalloc(&d_parts, kCheckBlocks * sizeof(ErrorParts)));
    error_parts_kernel<<<kCheckBlocks, kCheckThreads, 0, stream>>>(c, ref, static_cast<size_t>(n) * n, d_parts);
    CHECK_CUDA(cudaGetLastError());
    std::vector<ErrorParts> parts(kCheckBlocks);
    CHECK_CUDA(cudaMemcpyAsync(parts.data(), d_parts, parts.size() * sizeof(ErrorParts), cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaFree(d_parts));
    ErrorParts total;
    for (const ErrorParts& p : parts) add_parts(total, p);  // fixed order: the same inputs give the same bits
    return summarize(total);
}

// ---------------------------------------------------------------------------------------------
// Host <-> device copies, ordered on the harness stream and complete on return.

inline void upload(float* d_dst, const std::vector<float>& src, cudaStream_t stream) {
    CHECK_CUDA(cudaMemcpyAsync(d_dst, src.data(), src.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
}

// One entry of a device array (the sampled check of the cuBLAS reference reads 256 of them).
inline float download_entry(const float* d_src, size_t index, cudaStream_t stream) {
    float value = 0.0f;
    CHECK_CUDA(cudaMemcpyAsync(&value, d_src + index, sizeof(float), cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    return value;
}

// ---------------------------------------------------------------------------------------------
// cuBLAS.

// Row-major C = A * B is column-major C^T = B^T * A^T: hand cuBLAS B first, no transposes.
inline void cublas_sgemm_row_major(cublasHandle_t handle, const float* a, const float* b, float* c, int n) {
    const float alpha = 1.0f, beta = 0.0f;
    CHECK_CUBLAS(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, b, n, a, n, &beta, c, n));
}

// ---------------------------------------------------------------------------------------------
// Reference and verification.

// A device buffer of doubles, freed with the last copy of its handle.
using DeviceDoubles = std::shared_ptr<double>;

inline DeviceDoubles upload_doubles(const std::vector<double>& values, cudaStream_t stream) {
    double* d = nullptr;
    CHECK_CUDA(cudaMalloc(&d, values.size() * sizeof(double)));
    CHECK_CUDA(cudaMemcpyAsync(d, values.data(), values.size() * sizeof(double), cudaMemcpyHostToDevice, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    return DeviceDoubles(d, [](double* p) { cudaFree(p); });
}

struct Reference {
    std::string method;       // "cpu" or "cublas+sampled-cpu"; the JSON "check" field
    bool uses_cublas = false;
    const float* cublas_c = nullptr;  // cuBLAS's C on the device (the problem's scratch buffer)
    DeviceDoubles cpu_c;              // the float64 CPU reference, uploaded
    // cuBLAS reference vs float64 dot products at the sampled entries; NaN for "cpu".
    double sampled_rel_err = std::numeric_limits<double>::quiet_NaN();
};

// Relative error of the device matrix c against the reference, computed on the device.
inline ErrorSummary check_output(const float* c, const Reference& ref, int n, cudaStream_t stream) {
    return ref.uses_cublas ? device_relative_error(c, ref.cublas_c, n, stream)
                           : device_relative_error(c, ref.cpu_c.get(), n, stream);
}

class ReferenceBuilder {
public:
    explicit ReferenceBuilder(cudaStream_t stream) : stream_(stream) {}
    ~ReferenceBuilder() {
        if (handle_ != nullptr) cublasDestroy(handle_);
    }
    ReferenceBuilder(const ReferenceBuilder&) = delete;
    ReferenceBuilder& operator=(const ReferenceBuilder&) = delete;

    Reference build(CheckMode mode, const std::vector<float>& a, const std::vector<float>& b, const float* d_a,
                    const float* d_b, float* d_scratch, int n, std::uint64_t seed) {
        const bool use_cpu = mode == CheckMode::Cpu || (mode == CheckMode::Auto && n <= kFullCpuReferenceMaxN);
        if (use_cpu) {
            return Reference{"cpu", false, nullptr, upload_doubles(cpu_reference(a, b, n), stream_)};
        }
        Reference ref{"cublas+sampled-cpu", true, d_scratch, nullptr, 0.0};
        nvtxRangePushA("reference");
        cublas_sgemm_row_major(handle(), d_a, d_b, d_scratch, n);
        nvtxRangePop();
        CHECK_CUDA(cudaGetLastError());
        CHECK_CUDA(cudaStreamSynchronize(stream_));

        HostRng pick(seed ^ 0xC0FFEE0DDF00Dull);
        ErrorParts sampled;
        for (int s = 0; s < kSampledEntries; ++s) {
            const int row = static_cast<int>(pick.next() % static_cast<std::uint64_t>(n));
            const int col = static_cast<int>(pick.next() % static_cast<std::uint64_t>(n));
            const float value = download_entry(d_scratch, static_cast<size_t>(row) * n + col, stream_);
            add_entry(sampled, value, cpu_dot(a, b, n, row, col));
        }
        ref.sampled_rel_err = summarize(sampled).rel_err;
        return ref;
    }

private:
    cublasHandle_t handle() {
        if (handle_ == nullptr) {
            CHECK_CUBLAS(cublasCreate(&handle_));
            // Pedantic: standard fp32 arithmetic throughout, never TF32 or reduced-precision reduction.
            CHECK_CUBLAS(cublasSetMathMode(handle_, CUBLAS_PEDANTIC_MATH));
            CHECK_CUBLAS(cublasSetStream(handle_, stream_));
        }
        return handle_;
    }

    cudaStream_t stream_;
    cublasHandle_t handle_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// JSON output.

inline std::string json_number(double value) {
    if (!std::isfinite(value)) return "null";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", value);
    return buf;
}

inline std::string json_dim3(const LaunchConfig& config, bool grid) {
    if (!config.known) return "null";
    const dim3 d = grid ? config.grid : config.block;
    return "[" + std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + "]";
}

struct SizeResult {
    int n;
    int reps;
    int warmup;
    double median_ms, min_ms, max_ms;
    double rel_err;          // NaN (JSON null) when not checked
    double ref_rel_err;      // sampled check of the cuBLAS reference; NaN when not applicable
    std::string check;       // method name, "none" when skipped
    LaunchConfig config;
    size_t l2_flush_bytes;
    std::uint64_t seed;
};

inline std::string result_json(const char* kernel, const SizeResult& r) {
    const double gflops = matmul_flops(r.n) / (r.median_ms * 1e-3) / 1e9;
    std::string s = "{\"profkit_result\": 1";
    s += ", \"kernel\": \"" + std::string(kernel) + "\"";
    s += ", \"n\": " + std::to_string(r.n);
    s += ", \"reps\": " + std::to_string(r.reps);
    s += ", \"warmup\": " + std::to_string(r.warmup);
    s += ", \"median_ms\": " + json_number(r.median_ms);
    s += ", \"min_ms\": " + json_number(r.min_ms);
    s += ", \"max_ms\": " + json_number(r.max_ms);
    s += ", \"gflops\": " + json_number(gflops);
    s += ", \"rel_err\": " + json_number(r.rel_err);
    s += ", \"check\": \"" + r.check + "\"";
    s += ", \"grid\": " + json_dim3(r.config, true);
    s += ", \"block\": " + json_dim3(r.config, false);
    s += ", \"dyn_smem_bytes\": " + (r.config.known ? std::to_string(r.config.dyn_smem_bytes) : std::string("null"));
    s += ", \"ref_rel_err\": " + json_number(r.ref_rel_err);
    s += ", \"l2_flush_bytes\": " + std::to_string(r.l2_flush_bytes);
    s += ", \"seed\": " + std::to_string(r.seed);
    s += "}";
    return s;
}

// ---------------------------------------------------------------------------------------------
// The driver.

struct DeviceBuffers {
    float* a = nullptr;
    float* b = nullptr;
    float* c = nullptr;
    float* scratch = nullptr;  // cuBLAS reference output
    explicit DeviceBuffers(int n) {
        const size_t bytes = static_cast<size_t>(n) * n * sizeof(float);
        CHECK_CUDA(cudaMalloc(&a, bytes));
        CHECK_CUDA(cudaMalloc(&b, bytes));
        CHECK_CUDA(cudaMalloc(&c, bytes));
        CHECK_CUDA(cudaMalloc(&scratch, bytes));
    }
    ~DeviceBuffers() {
        cudaFree(a);
        cudaFree(b);
        cudaFree(c);
        cudaFree(scratch);
    }
    DeviceBuffers(const DeviceBuffers&) = delete;
    DeviceBuffers& operator=(const DeviceBuffers&) = delete;
};

// One size's random inputs: A and B (uniform [-1, 1), fixed seed) on the host for the references and
// uploaded to the device.
struct Problem {
    std::vector<float> a, b;
    DeviceBuffers dev;
    Problem(int n, std::uint64_t seed, cudaStream_t stream)
        : a(static_cast<size_t>(n) * n), b(static_cast<size_t>(n) * n), dev(n) {
        HostRng rng(seed);
        fill_uniform_pm1(a, rng);
        fill_uniform_pm1(b, rng);
        upload(dev.a, a, stream);
        upload(dev.b, b, stream);
    }
};

inline void poison(float* c, int n, cudaStream_t stream) {
    CHECK_CUDA(cudaMemsetAsync(c, 0xFF, static_cast<size_t>(n) * n * sizeof(float), stream));
}

// Exits with kFailureExitCode when `error` is out of tolerance (or non-finite).
inline void require_within_tolerance(const char* kernel, int n, const char* what, const ErrorSummary& error,
                                     const std::string& method) {
    if (error.rel_err <= kRelErrTolerance) return;
    if (error.non_finite) {
        std::fprintf(stderr, "FAIL %s n=%d (%s): %zu of %zu entries of C are NaN/Inf (0xFF poison = never written)\n",
                     kernel, n, what, error.non_finite, static_cast<size_t>(n) * n);
    } else {
        std::fprintf(stderr, "FAIL %s n=%d (%s): relative error %.3e vs %s reference exceeds tolerance %.0e\n",
                     kernel, n, what, error.rel_err, method.c_str(), kRelErrTolerance);
    }
    std::exit(kFailureExitCode);
}

// Exits with kFailureExitCode when the cuBLAS reference disagrees with the float64 sampled check.
inline void require_trusted_reference(const Reference& ref, int n) {
    if (!ref.uses_cublas || ref.sampled_rel_err <= kRelErrTolerance) return;
    std::fprintf(stderr,
                 "FAIL n=%d: cuBLAS reference disagrees with float64 CPU dot products at %d sampled "
                 "entries (relative error %.3e, tolerance %.0e): the reference itself is wrong\n",
                 n, kSampledEntries, ref.sampled_rel_err, kRelErrTolerance);
    std::exit(kFailureExitCode);
}

inline SizeResult run_size(const KernelDescriptor& desc, const Options& opt, int n, cudaStream_t stream,
                           ReferenceBuilder& references, float* flush_buffer, size_t flush_bytes) {
    const Problem problem(n, opt.seed, stream);
    const std::vector<float>& a = problem.a;
    const std::vector<float>& b = problem.b;
    const DeviceBuffers& dev = problem.dev;

    SizeResult result{};
    result.n = n;
    result.reps = opt.reps;
    result.warmup = opt.warmup;
    result.seed = opt.seed;
    result.l2_flush_bytes = flush_bytes;
    result.rel_err = std::numeric_limits<double>::quiet_NaN();
    result.ref_rel_err = std::numeric_limits<double>::quiet_NaN();
    result.check = "none";

    // Check phase: one launch, synchronised and error-checked, compared with the reference.
    Reference ref;
    if (opt.check != CheckMode::None) {
        poison(dev.c, n, stream);
        nvtxRangePushA("check");
        result.config = desc.launch(dev.a, dev.b, dev.c, n, stream);
        nvtxRangePop();
        CHECK_CUDA(cudaGetLastError());
        CHECK_CUDA(cudaStreamSynchronize(stream));

        ref = references.build(opt.check, a, b, dev.a, dev.b, dev.scratch, n, opt.seed);
        result.check = ref.method;
        result.ref_rel_err = ref.sampled_rel_err;
        require_trusted_reference(ref, n);
        const ErrorSummary error = check_output(dev.c, ref, n, stream);
        require_within_tolerance(desc.name, n, "check run", error, ref.method);
        result.rel_err = error.rel_err;
    }

    // Warm-up: same work as a timed run, outside the kernel's NVTX range.
    if (opt.warmup > 0) {
        nvtxRangePushA("warmup");
        for (int i = 0; i < opt.warmup; ++i) {
            poison(dev.c, n, stream);
            result.config = desc.launch(dev.a, dev.b, dev.c, n, stream);
            CHECK_CUDA(cudaGetLastError());
        }
        nvtxRangePop();
        CHECK_CUDA(cudaStreamSynchronize(stream));
    }

    // Timed runs: L2 flush and poison first (outside the events), events around the launch only.
    std::vector<cudaEvent_t> starts(opt.reps), stops(opt.reps);
    for (int i = 0; i < opt.reps; ++i) {
        CHECK_CUDA(cudaEventCreate(&starts[i]));
        CHECK_CUDA(cudaEventCreate(&stops[i]));
    }
    for (int i = 0; i < opt.reps; ++i) {
        CHECK_CUDA(cudaMemsetAsync(flush_buffer, i & 0xFF, flush_bytes, stream));
        poison(dev.c, n, stream);
        nvtxRangePushA(desc.name);
        CHECK_CUDA(cudaEventRecord(starts[i], stream));
        result.config = desc.launch(dev.a, dev.b, dev.c, n, stream);
        CHECK_CUDA(cudaEventRecord(stops[i], stream));
        nvtxRangePop();
        CHECK_CUDA(cudaGetLastError());
    }
    CHECK_CUDA(cudaStreamSynchronize(stream));
    std::vector<double> times_ms(opt.reps);
    for (int i = 0; i < opt.reps; ++i) {
        float ms = 0.0f;
        CHECK_CUDA(cudaEventElapsedTime(&ms, starts[i], stops[i]));
        times_ms[i] = ms;
        CHECK_CUDA(cudaEventDestroy(starts[i]));
        CHECK_CUDA(cudaEventDestroy(stops[i]));
    }
    std::sort(times_ms.begin(), times_ms.end());
    const int r = opt.reps;
    result.median_ms = r % 2 ? times_ms[r / 2] : 0.5 * (times_ms[r / 2 - 1] + times_ms[r / 2]);
    result.min_ms = times_ms.front();
    result.max_ms = times_ms.back();

    // The last timed run's output must be as correct as the check run's.
    if (opt.check != CheckMode::None) {
        const ErrorSummary error = check_output(dev.c, ref, n, stream);
        require_within_tolerance(desc.name, n, "last timed run", error, ref.method);
        result.rel_err = std::max(result.rel_err, error.rel_err);
    }
    return result;
}

inline int run_matmul_program(int argc, char** argv, const KernelDescriptor& desc) {
    Options opt;
    if (const auto exit_code = options_from_command_line(argc, argv, &opt)) return *exit_code;

    int device = 0;
    CHECK_CUDA(cudaGetDevice(&device));
    cudaDeviceProp prop{};
    CHECK_CUDA(cudaGetDeviceProperties(&prop, device));
    int l2_bytes = 0;
    CHECK_CUDA(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
    const size_t flush_bytes = std::max<size_t>(2 * static_cast<size_t>(l2_bytes), size_t{1} << 20);
    std::fprintf(stderr, "%s on %s (sm_%d%d, %d SMs, L2 %d MiB); reps %d, warmup %d, seed %llu, check %s\n",
                 desc.name, prop.name, prop.major, prop.minor, prop.multiProcessorCount, l2_bytes >> 20, opt.reps,
                 opt.warmup, static_cast<unsigned long long>(opt.seed), check_mode_name(opt.check));

    cudaStream_t stream = nullptr;
    CHECK_CUDA(cudaStreamCreate(&stream));
    float* flush_buffer = nullptr;
    CHECK_CUDA(cudaMalloc(&flush_buffer, flush_bytes));
    if (desc.setup != nullptr) desc.setup(stream);
    {
        ReferenceBuilder references(stream);
        for (const int n : opt.sizes) {
            const SizeResult r = run_size(desc, opt, n, stream, references, flush_buffer, flush_bytes);
            std::printf("%s\n", result_json(desc.name, r).c_str());
            std::fflush(stdout);
            std::fprintf(stderr,
                         "%s n=%d: median %.4f ms (min %.4f, max %.4f, %d reps), %.1f GFLOP/s, rel err %s (%s)\n",
                         desc.name, n, r.median_ms, r.min_ms, r.max_ms, r.reps,
                         matmul_flops(n) / (r.median_ms * 1e-3) / 1e9, json_number(r.rel_err).c_str(),
                         r.check.c_str());
        }
    }
    if (desc.teardown != nullptr) desc.teardown();
    CHECK_CUDA(cudaFree(flush_buffer));
    CHECK_CUDA(cudaStreamDestroy(stream));
    return 0;
}

}  // namespace profkit
