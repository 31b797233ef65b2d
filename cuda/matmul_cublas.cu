// The production reference: cuBLAS SGEMM, fp32 in and out, through the same harness.
//
// The handle uses CUBLAS_DEFAULT_MATH, which for cublasSgemm means CUBLAS_COMPUTE_32F: plain fp32
// FMAs, never TF32 (that needs CUBLAS_TF32_TENSOR_OP_MATH, never set here), so the ladder
// competes with what an fp32 user of the library gets. The harness's own check reference uses a
// separate handle in CUBLAS_PEDANTIC_MATH and is itself checked against float64 dot products.
// The JSON "kernel" and the NVTX range are "matmul_cublas"; the kernels cuBLAS launches inside
// that range have their own names (they vary by GPU, size and library version).
#include "harness.cuh"

static cublasHandle_t g_handle = nullptr;

static void setup_matmul_cublas(cudaStream_t stream) {
    CHECK_CUBLAS(cublasCreate(&g_handle));
    CHECK_CUBLAS(cublasSetMathMode(g_handle, CUBLAS_DEFAULT_MATH));
    CHECK_CUBLAS(cublasSetStream(g_handle, stream));
}

static void teardown_matmul_cublas() {
    CHECK_CUBLAS(cublasDestroy(g_handle));
    g_handle = nullptr;
}

static profkit::LaunchConfig launch_matmul_cublas(const float* a, const float* b, float* c, int n,
                                                  cudaStream_t) {
    profkit::cublas_sgemm_row_major(g_handle, a, b, c, n);  // on the stream bound in setup
    return profkit::LaunchConfig::opaque();
}

#ifndef PROFKIT_NO_MAIN  // ladder_bench.cu includes every rung into one program
int main(int argc, char** argv) {
    const profkit::KernelDescriptor desc{"matmul_cublas", launch_matmul_cublas, setup_matmul_cublas,
                                         teardown_matmul_cublas};
    return profkit::run_matmul_program(argc, argv, desc);
}
#endif
