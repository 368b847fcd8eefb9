#include "kernels/cuda/cudnn_graph_builder.hpp"

#if defined(MGT_HAVE_CUDNN)

namespace mgt::cuda::cudnn {

// y = mode(x[, b[, t]]); math in `precision`; axis for GEN_INDEX.
void GraphBuilder::pointwise(cudnnPointwiseMode_t mode, int64_t x, int64_t b, int64_t t, int64_t y,
                             cudnnDataType_t precision, int64_t axis) {
  Descriptor pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, mode);
  pw.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, precision);
  if (axis != kNone) pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, axis);
  pw.finalize();
  Descriptor op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, tensors_.at(x));
  if (b != kNone) op.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, tensors_.at(b));
  if (t != kNone) op.set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, tensors_.at(t));
  op.set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, tensors_.at(y));
  op.finalize();
  parts_.push_back(std::move(pw));
  ops_.push_back(std::move(op));
}

// c = a·b over the last two dimensions, batched (and broadcast over heads) over the first two.
void GraphBuilder::matmul(int64_t a, int64_t b, int64_t c) {
  Descriptor mm(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
  mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT);
  mm.finalize();
  Descriptor op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, tensors_.at(a));
  op.set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, tensors_.at(b));
  op.set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, tensors_.at(c));
  op.set(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
  op.finalize();
  parts_.push_back(std::move(mm));
  ops_.push_back(std::move(op));
}

// y = reduce(x) over the dimensions where y has extent 1.
void GraphBuilder::reduction(cudnnReduceTensorOp_t mode, int64_t x, int64_t y) {
  Descriptor red(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
  red.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, mode);
  red.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT);
  red.finalize();
  Descriptor op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, tensors_.at(x));
  op.set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, tensors_.at(y));
  op.set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, red);
  op.finalize();
  parts_.push_back(std::move(red));
  ops_.push_back(std::move(op));
}

// y = x seen with y's dimensions and strides (a transpose of the last two, here).
void GraphBuilder::reshape(int64_t x, int64_t y) {
  Descriptor op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, tensors_.at(x));
  op.set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, tensors_.at(y));
  op.finalize();
  ops_.push_back(std::move(op));
}

// y = 1 with probability keep, else 0, from the Philox stream of (seed, offset).
void GraphBuilder::bernoulli(double keep, int64_t seed, int64_t offset, int64_t y) {
  Descriptor rng(CUDNN_BACKEND_RNG_DESCRIPTOR);
  rng.set(CUDNN_ATTR_RNG_DISTRIBUTION, CUDNN_TYPE_RNG_DISTRIBUTION, CUDNN_RNG_DISTRIBUTION_BERNOULLI);
  rng.set(CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY, CUDNN_TYPE_DOUBLE, keep);
  rng.finalize();
  Descriptor op(CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR);
  op.set(CUDNN_ATTR_OPERATION_RNG_DESC, rng);
  op.set(CUDNN_ATTR_OPERATION_RNG_YDESC, tensors_.at(y));
  op.set(CUDNN_ATTR_OPERATION_RNG_SEED, tensors_.at(seed));
  op.set(CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC, tensors_.at(offset));
  op.finalize();
  parts_.push_back(std::move(rng));
  ops_.push_back(std::move(op));
}

// The finalised operation graph; `keep` receives every descriptor it refers to.
Descriptor GraphBuilder::finish(cudnnHandle_t handle, std::vector<Descriptor>& keep) {
  std::vector<cudnnBackendDescriptor_t> raw;
  raw.reserve(ops_.size());
  for (const Descriptor& op : ops_) raw.push_back(op.get());
  Descriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, handle);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
            static_cast<int64_t>(raw.size()), raw.data());
  graph.finalize();
  for (auto& [uid, tensor] : tensors_) keep.push_back(std::move(tensor));
  for (Descriptor& d : parts_) keep.push_back(std::move(d));
  for (Descriptor& d : ops_) keep.push_back(std::move(d));
  tensors_.clear();
  parts_.clear();
  ops_.clear();
  return graph;
}

int64_t GraphBuilder::add(int64_t uid, const Dims& dims, const Dims& strides, cudnnDataType_t type,
                          bool is_virtual, bool by_value) {
  Descriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, uid);
  t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, type);
  t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
  t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
  t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, kAlignment);
  t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, is_virtual);
  if (by_value) t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, true);
  t.finalize();
  tensors_.emplace(uid, std::move(t));
  shapes_.emplace(uid, Shape{dims, strides});
  return uid;
}

}  // namespace mgt::cuda::cudnn

#endif  // MGT_HAVE_CUDNN
