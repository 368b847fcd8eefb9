#include "dist/mpi_reduce_types.hpp"

#include <cstdint>

#include "dist/mpi_check.hpp"
#include "kernels/bf16.hpp"
#include "kernels/fp16.hpp"

namespace mgt::dist {
namespace {

// MPI has no bf16 or fp16: sums and maxima of such elements are computed in fp32 and rounded back
// per pair, as NCCL's reductions do.
template <ReduceOp Op, float (*kToFloat)(std::uint16_t), std::uint16_t (*kFromFloat)(float)>
void reduce_16bit(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = kToFloat(a[i]);
    const float y = kToFloat(b[i]);
    b[i] = kFromFloat(Op == ReduceOp::Sum ? x + y : (x > y || x != x ? x : y));
  }
}

// Created once, after MPI_Init (the first reduction comes later), and kept until exit like MPI's
// own operations.
template <ReduceOp Op, float (*kToFloat)(std::uint16_t), std::uint16_t (*kFromFloat)(float)>
MPI_Op created_op() {
  static const MPI_Op op = [] {
    MPI_Op created = MPI_OP_NULL;
    MGT_MPI_CHECK(MPI_Op_create(&reduce_16bit<Op, kToFloat, kFromFloat>, 1, &created));
    return created;
  }();
  return op;
}

}  // namespace

MPI_Datatype mpi_type(ElementType type) {
  switch (type) {
    case ElementType::Float32: return MPI_FLOAT;
    case ElementType::Float64: return MPI_DOUBLE;
    case ElementType::Int64: return MPI_INT64_T;
    case ElementType::BFloat16:
    case ElementType::Float16: return MPI_UINT16_T;  // reduced by the operations below
    case ElementType::UInt8: return MPI_UINT8_T;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(ReduceOp op, ElementType type) {
  if (type == ElementType::BFloat16) {
    return op == ReduceOp::Sum ? created_op<ReduceOp::Sum, bf16_to_float, float_to_bf16>()
                               : created_op<ReduceOp::Max, bf16_to_float, float_to_bf16>();
  }
  if (type == ElementType::Float16) {
    return op == ReduceOp::Sum ? created_op<ReduceOp::Sum, fp16_to_float, float_to_fp16>()
                               : created_op<ReduceOp::Max, fp16_to_float, float_to_fp16>();
  }
  return op == ReduceOp::Sum ? MPI_SUM : MPI_MAX;
}

}  // namespace mgt::dist
