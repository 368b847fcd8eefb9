// Internal to lib/dist (includes nccl.h): NCCL failures as one-line mgt::Error messages naming
// the call, NCCL's explanation and the source location.
#pragma once
#include <nccl.h>

namespace mgt::dist {

[[noreturn]] void throw_nccl_error(ncclResult_t result, const char* call, const char* file,
                                   int line);

}  // namespace mgt::dist

#define MGT_NCCL_CHECK(call)                                                       \
  do {                                                                             \
    const ncclResult_t mgt_nccl_result_ = (call);                                  \
    if (mgt_nccl_result_ != ncclSuccess) {                                         \
      ::mgt::dist::throw_nccl_error(mgt_nccl_result_, #call, __FILE__, __LINE__);  \
    }                                                                              \
  } while (0)
