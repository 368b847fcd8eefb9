// The backend's operations as values: BackendOp names one entry of backend_operations.inc, and
// backend_op_name() gives its name ("linear_forward"). The enumerators are spelled as the member
// functions of Backend they stand for, so that the list writes each name once.
#pragma once
#include <array>
#include <cstddef>

namespace mgt {

enum class BackendOp : unsigned char {
#define MGT_BACKEND_OP(name) name,
#include "kernels/backend_operations.inc"
#undef MGT_BACKEND_OP
};

// Every operation, in the list's order.
inline constexpr std::array kBackendOps = {
#define MGT_BACKEND_OP(name) BackendOp::name,
#include "kernels/backend_operations.inc"
#undef MGT_BACKEND_OP
};
inline constexpr std::size_t kBackendOpCount = kBackendOps.size();

constexpr const char* backend_op_name(BackendOp op) {
  constexpr const char* kNames[] = {
#define MGT_BACKEND_OP(name) #name,
#include "kernels/backend_operations.inc"
#undef MGT_BACKEND_OP
  };
  static_assert(std::size(kNames) == kBackendOpCount);
  return kNames[static_cast<std::size_t>(op)];
}

}  // namespace mgt
