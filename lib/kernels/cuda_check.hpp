// Checked CUDA and cuBLAS calls: a failing call becomes an mgt::Error naming the call, its status
// and the source location, so a device fault reads like any other mgt failure (one line, exit 1)
// instead of an abort deep inside a kernel launch.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

namespace mgt::cuda {

[[noreturn]] void throw_cuda_error(const char* call, const char* status, const char* file,
                                   int line);

}  // namespace mgt::cuda

#define MGT_CUDA_CHECK(call)                                                              \
  do {                                                                                    \
    const cudaError_t mgt_cuda_status_ = (call);                                          \
    if (mgt_cuda_status_ != cudaSuccess) {                                                \
      ::mgt::cuda::throw_cuda_error(#call, cudaGetErrorString(mgt_cuda_status_), __FILE__, \
                                    __LINE__);                                            \
    }                                                                                     \
  } while (0)

// After a kernel launch: reports an invalid configuration at the launch site.
#define MGT_CUDA_CHECK_LAUNCH(kernel_name) MGT_CUDA_CHECK(cudaPeekAtLastError() /* kernel_name */)

#define MGT_CUBLAS_CHECK(call)                                                                 \
  do {                                                                                         \
    const cublasStatus_t mgt_cublas_status_ = (call);                                          \
    if (mgt_cublas_status_ != CUBLAS_STATUS_SUCCESS) {                                         \
      ::mgt::cuda::throw_cuda_error(#call, cublasGetStatusString(mgt_cublas_status_), __FILE__, \
                                    __LINE__);                                                 \
    }                                                                                          \
  } while (0)
