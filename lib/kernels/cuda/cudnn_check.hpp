// Checked cuDNN calls: a failing call becomes an mgt::Error naming the call, cuDNN's status and its
// last error message, and the source location, like MGT_CUDA_CHECK. Included only by code built
// with cuDNN (MGT_HAVE_CUDNN).
#pragma once
#include <cudnn_graph.h>

#include <string>

#include "kernels/cuda_check.hpp"

namespace mgt::cuda {

// cuDNN's status string, followed by its last error message where it left one.
inline std::string cudnn_status_text(cudnnStatus_t status) {
  std::string text = cudnnGetErrorString(status);
  char detail[512] = {};
  cudnnGetLastErrorString(detail, sizeof(detail));
  if (detail[0] != '\0') text += std::string(": ") + detail;
  return text;
}

}  // namespace mgt::cuda

#define MGT_CUDNN_CHECK(call)                                                                  \
  do {                                                                                         \
    const cudnnStatus_t mgt_cudnn_status_ = (call);                                            \
    if (mgt_cudnn_status_ != CUDNN_STATUS_SUCCESS) {                                           \
      ::mgt::cuda::throw_cuda_error(#call, ::mgt::cuda::cudnn_status_text(mgt_cudnn_status_).c_str(), \
                                    __FILE__, __LINE__);                                       \
    }                                                                                          \
  } while (0)
