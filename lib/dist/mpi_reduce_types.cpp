#include "dist/mpi_reduce_types.hpp"

#include <cstdint>

#include "dist/mpi_check.hpp"
#include "kernels/cpu/bf16.hpp"

namespace mgt::dist {
namespace {

// MPI has no bf16: sums and maxima of bf16 elements are computed in fp32 and rounded back per
// pair, as NCCL's bf16 reductions do.
template <ReduceOp Op>
void reduce_bf16(void* in, void* inout, int* len, MPI_Datatype* /*type*/) {
  const auto* a = static_cast<const std::uint16_t*>(in);
  auto* b = static_cast<std::uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = cpu::bf16_to_float(a[i]);
    const float y = cpu::bf16_to_float(b[i]);
    b[i] = cpu::float_to_bf16(Op == ReduceOp::Sum ? x + y : (x > y || x != x ? x : y));
  }
}

}  // namespace

MPI_Datatype mpi_type(ElementType type) {
  switch (type) {
    case ElementType::Float32: return MPI_FLOAT;
    case ElementType::Float64: return MPI_DOUBLE;
    case ElementType::Int64: return MPI_INT64_T;
    case ElementType::BFloat16: return MPI_UINT16_T;  // reduced by the operations below
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(ReduceOp op, ElementType type) {
  if (type == ElementType::BFloat16) {
    // Created once, after MPI_Init (the first reduction comes later), and kept until exit like
    // MPI's own operations.
    static const MPI_Op sum = [] {
      MPI_Op created = MPI_OP_NULL;
      MGT_MPI_CHECK(MPI_Op_create(&reduce_bf16<ReduceOp::Sum>, 1, &created));
      return created;
    }();
    static const MPI_Op max = [] {
      MPI_Op created = MPI_OP_NULL;
      MGT_MPI_CHECK(MPI_Op_create(&reduce_bf16<ReduceOp::Max>, 1, &created));
      return created;
    }();
    return op == ReduceOp::Sum ? sum : max;
  }
  return op == ReduceOp::Sum ? MPI_SUM : MPI_MAX;
}

}  // namespace mgt::dist
