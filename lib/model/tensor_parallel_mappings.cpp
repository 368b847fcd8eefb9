#include "model/tensor_parallel_mappings.hpp"

#include <string>
#include <vector>

#include "core/error.hpp"

namespace mgt {
namespace {

void require(bool ok, const char* mapping, const std::string& problem) {
  if (!ok) throw Error(std::string(mapping) + ": " + problem);
}

std::string count_text(int64_t n) { return std::to_string(n); }

}  // namespace

TensorParallelMappings::TensorParallelMappings(Backend& backend, dist::Communicator* group)
    : backend_(&backend), group_(group != nullptr && group->size() > 1 ? group : nullptr) {
  if (group != nullptr) {
    size_ = group->size();
    rank_ = group->rank();
  }
}

void TensorParallelMappings::all_reduce(FloatView x, dist::ReduceOp op) const {
  if (!group_) return;
  group_->all_reduce(x, op);
}

void TensorParallelMappings::all_gather(ConstFloatView local, FloatView whole) const {
  all_gather_first_dim(local, whole, "all-gather");
}

bool TensorParallelMappings::share(FloatView buffer) const {
  return group_ && group_->register_buffer(dist::backend_buffer(buffer));
}

void TensorParallelMappings::unshare(FloatView buffer) const {
  if (group_) group_->unregister_buffer(dist::backend_buffer(buffer));
}

void TensorParallelMappings::copy_if_distinct(ConstFloatView src, FloatView dst) const {
  if (src.raw() != dst.raw()) backend_->copy(src, dst);
}

// ---- first dim: contiguous blocks of size() equal parts ----

void TensorParallelMappings::require_first_dim(ConstFloatView whole, ConstFloatView local, const char* mapping,
                                               const char* what) const {
  require(whole.size() == local.size() * size_, mapping,
          std::string("the whole ") + what + " has " + count_text(whole.size()) + " elements, expected " +
              count_text(size_) + " x " + count_text(local.size()));
}

void TensorParallelMappings::all_gather_first_dim(ConstFloatView local, FloatView whole, const char* mapping) const {
  require_first_dim(whole, local, mapping, "tensor");
  if (group_) {
    group_->all_gather(local, whole);
  } else {
    copy_if_distinct(local, whole);
  }
}

void TensorParallelMappings::split_first_dim(ConstFloatView whole, FloatView local) const {
  require_first_dim(whole, local, "sequence-parallel split", "tensor");
  copy_if_distinct(whole.subspan(rank_ * local.size(), local.size()), local);
}

// ---- last dim: the backend has no strided copy, but its embedding lookup is a row gather ----

void TensorParallelMappings::all_gather_last_dim(ConstFloatView local, int64_t rows,
                                                 FloatView whole) const {
  require(rows > 0 && local.size() % rows == 0 && whole.size() == local.size() * size_,
          "tensor-parallel all-gather",
          "a local [" + count_text(rows) + ", cols] tensor of " + count_text(local.size()) +
              " elements does not gather into " + count_text(whole.size()));
  if (!group_) {
    copy_if_distinct(local, whole);
    return;
  }
  const int64_t cols = local.size() / rows;
  // The gathered shards, rank-major: [size, rows, cols], viewed as size·rows rows of width cols.
  DeviceBuffer gathered(*backend_, whole.size(), whole.type());
  group_->all_gather(local, gathered.view());
  // Row (r, j) of whole, j the rank, is row j·rows + r of the gathered shards.
  std::vector<int64_t> source(static_cast<size_t>(rows * size_));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < size_; ++j) source[static_cast<size_t>(r * size_ + j)] = j * rows + r;
  DeviceIndexBuffer ids(*backend_, rows * size_);
  backend_->copy_from_host<int64_t>(source, ids.view());
  backend_->embedding_forward(ids.view(), gathered.view(), 0, cols, whole);
}

void TensorParallelMappings::split_last_dim(ConstFloatView whole, int64_t rows,
                                            FloatView local) const {
  require(rows > 0 && local.size() % rows == 0 && whole.size() == local.size() * size_,
          "tensor-parallel split",
          "a whole [" + count_text(rows) + ", cols] tensor of " + count_text(whole.size()) +
              " elements does not split into " + count_text(local.size()));
  if (!group_) {
    copy_if_distinct(whole, local);
    return;
  }
  const int64_t cols = local.size() / rows;
  // Row r of local is row r·size + rank of whole viewed as rows·size rows of width cols.
  std::vector<int64_t> source(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) source[static_cast<size_t>(r)] = r * size_ + rank_;
  DeviceIndexBuffer ids(*backend_, rows);
  backend_->copy_from_host<int64_t>(source, ids.view());
  backend_->embedding_forward(ids.view(), whole, 0, cols, local);
}

// ---- the pairs ----

void TensorParallelMappings::copy_to_tensor_region_backward(FloatView grad) const {
  all_reduce(grad, dist::ReduceOp::Sum);
}

void TensorParallelMappings::reduce_from_tensor_region_forward(FloatView x) const {
  all_reduce(x, dist::ReduceOp::Sum);
}

void TensorParallelMappings::scatter_to_tensor_region_forward(ConstFloatView whole, int64_t rows,
                                                              FloatView local) const {
  split_last_dim(whole, rows, local);
}

void TensorParallelMappings::scatter_to_tensor_region_backward(ConstFloatView d_local,
                                                               int64_t rows,
                                                               FloatView d_whole) const {
  all_gather_last_dim(d_local, rows, d_whole);
}

void TensorParallelMappings::gather_from_tensor_region_forward(ConstFloatView local, int64_t rows,
                                                               FloatView whole) const {
  all_gather_last_dim(local, rows, whole);
}

void TensorParallelMappings::gather_from_tensor_region_backward(ConstFloatView d_whole,
                                                                int64_t rows,
                                                                FloatView d_local) const {
  split_last_dim(d_whole, rows, d_local);
}

void TensorParallelMappings::scatter_to_sequence_parallel_region_forward(ConstFloatView whole,
                                                                         FloatView local) const {
  split_first_dim(whole, local);
}

void TensorParallelMappings::scatter_to_sequence_parallel_region_backward(
    ConstFloatView d_local, FloatView d_whole) const {
  all_gather_first_dim(d_local, d_whole);
}

void TensorParallelMappings::gather_from_sequence_parallel_region_forward(ConstFloatView local,
                                                                          FloatView whole) const {
  all_gather_first_dim(local, whole);
}

void TensorParallelMappings::gather_from_sequence_parallel_region_backward(
    ConstFloatView d_whole, FloatView d_local) const {
  require_first_dim(d_whole, d_local, "sequence-parallel reduce-scatter", "gradient");
  if (group_) {
    group_->reduce_scatter(d_whole, d_local, dist::ReduceOp::Sum);
  } else {
    copy_if_distinct(d_whole, d_local);
  }
}

dist::PendingCollective TensorParallelMappings::start_gather_from_sequence_parallel_region_forward(
    ConstFloatView local, FloatView whole) const {
  if (!group_) {
    all_gather_first_dim(local, whole);
    return {};
  }
  require_first_dim(whole, local, "sequence-parallel all-gather", "tensor");
  return group_->start_all_gather(dist::backend_buffer(local), dist::backend_buffer(whole));
}

dist::PendingCollective TensorParallelMappings::start_gather_from_sequence_parallel_region_backward(
    ConstFloatView d_whole, FloatView d_local) const {
  if (!group_) {
    gather_from_sequence_parallel_region_backward(d_whole, d_local);
    return {};
  }
  require_first_dim(d_whole, d_local, "sequence-parallel reduce-scatter", "gradient");
  return group_->start_reduce_scatter(dist::backend_buffer(d_whole), dist::backend_buffer(d_local),
                                      dist::ReduceOp::Sum);
}

dist::PendingCollective TensorParallelMappings::start_reduce_scatter_to_sequence_parallel_region_backward(
    ConstFloatView d_local, FloatView d_whole) const {
  return start_gather_from_sequence_parallel_region_forward(d_local, d_whole);
}

void TensorParallelMappings::reduce_scatter_to_sequence_parallel_region_forward(
    ConstFloatView whole, FloatView local) const {
  require_first_dim(whole, local, "sequence-parallel reduce-scatter", "tensor");
  if (group_) {
    group_->reduce_scatter(whole, local, dist::ReduceOp::Sum);
  } else {
    copy_if_distinct(whole, local);
  }
}

void TensorParallelMappings::reduce_scatter_to_sequence_parallel_region_forward(const BlockProduct& product,
                                                                                FloatView local,
                                                                                FloatView whole,
                                                                                ConstFloatView* addend) const {
  require_first_dim(whole, local, "sequence-parallel reduce-scatter", "tensor");
  if (addend) *addend = {};
  if (!group_) {
    product(0, local);
    return;
  }
  const int64_t n = local.size();
  const auto block = [&](int64_t b) { return whole.subspan(b * n, n); };
  // This rank's own block of `whole` is not needed: it receives the partial sums.
  const FloatView received = block(rank_);
  const int to = (rank_ + size_ - 1) % size_;
  const int from = (rank_ + 1) % size_;
  dist::PendingCollective exchange;
  for (int step = 0; step + 1 < size_; ++step) {
    const int b = (rank_ + step + 1) % size_;
    product(b, block(b));
    if (step > 0) {
      exchange.wait();
      backend_->accumulate(block(b), received);
    }
    // Two ranks swap: each sends the other's block from where the other receives its own.
    exchange = size_ == 2 ? group_->start_swap(dist::backend_buffer(ConstFloatView(block(b))), dist::backend_buffer(received))
                          : group_->start_send_recv(dist::backend_buffer(ConstFloatView(block(b))), to,
                                                    dist::backend_buffer(received), from);
  }
  product(rank_, local);
  exchange.wait();
  if (addend) {
    *addend = received;
  } else {
    backend_->accumulate(local, received);
  }
}

void TensorParallelMappings::reduce_scatter_to_sequence_parallel_region_backward(
    ConstFloatView d_local, FloatView d_whole) const {
  all_gather_first_dim(d_local, d_whole);
}

}  // namespace mgt
