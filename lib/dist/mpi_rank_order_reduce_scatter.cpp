#include "dist/mpi_rank_order_reduce_scatter.hpp"

#include <algorithm>
#include <cstring>

#include "core/error.hpp"
#include "dist/mpi_check.hpp"
#include "dist/mpi_reduce_types.hpp"
#include "dist/mpi_wait.hpp"
#include "kernels/bf16.hpp"
#include "kernels/fp16.hpp"

namespace mgt::dist {
namespace {

// Its own tag, so that the exchange never matches the communicator's other point-to-point
// messages (tag 0); exchanges between two ranks match in the order they were started.
constexpr int kReduceScatterTag = 1;

template <typename T>
T combine(T acc, T x, ReduceOp op) {
  if (op == ReduceOp::Sum) return acc + x;
  return acc > x || acc != acc ? acc : x;  // NOLINT(misc-redundant-expression): NaN wins
}

template <typename T>
void accumulate(void* acc, const void* x, std::int64_t n, ReduceOp op) {
  auto* a = static_cast<T*>(acc);
  const auto* b = static_cast<const T*>(x);
  for (std::int64_t i = 0; i < n; ++i) a[i] = combine(a[i], b[i], op);
}

// bf16 and fp16 are combined in fp32 and rounded back per pair, as NCCL (and
// mpi_reduce_types.cpp) do.
template <float (*to_float)(std::uint16_t), std::uint16_t (*from_float)(float)>
void accumulate_half(void* acc, const void* x, std::int64_t n, ReduceOp op) {
  auto* a = static_cast<std::uint16_t*>(acc);
  const auto* b = static_cast<const std::uint16_t*>(x);
  for (std::int64_t i = 0; i < n; ++i) a[i] = from_float(combine(to_float(a[i]), to_float(b[i]), op));
}

void accumulate(ElementType type, void* acc, const void* x, std::int64_t n, ReduceOp op) {
  switch (type) {
    case ElementType::Float32: return accumulate<float>(acc, x, n, op);
    case ElementType::Float64: return accumulate<double>(acc, x, n, op);
    case ElementType::Int64: return accumulate<std::int64_t>(acc, x, n, op);
    case ElementType::BFloat16: return accumulate_half<bf16_to_float, float_to_bf16>(acc, x, n, op);
    case ElementType::Float16: return accumulate_half<fp16_to_float, float_to_fp16>(acc, x, n, op);
    case ElementType::UInt8: throw Error("internal error: FP8 codes are moved, never reduced");
  }
}

}  // namespace

RankOrderReduceScatter::RankOrderReduceScatter(MPI_Comm comm, int rank, const void* send,
                                               std::span<const std::int64_t> counts, ElementType type,
                                               ReduceOp op)
    : type_(type), op_(op), rank_(rank), ranks_(static_cast<int>(counts.size())) {
  const int ranks = static_cast<int>(counts.size());
  const std::size_t element = element_size(type);
  const auto* bytes = static_cast<const std::byte*>(send);
  mine_ = counts[static_cast<std::size_t>(rank)];
  std::int64_t offset = 0;
  for (int r = 0; r < rank; ++r) offset += counts[static_cast<std::size_t>(r)];
  own_ = bytes + static_cast<std::size_t>(offset) * element;
  const std::size_t chunk_bytes = static_cast<std::size_t>(mine_) * element;
  incoming_ = std::make_unique_for_overwrite<std::byte[]>(std::max<std::size_t>(1, chunk_bytes * ranks));
  requests_.reserve(2 * static_cast<std::size_t>(ranks));
  // Receives first, so that the sends find them posted.
  if (mine_ > 0) {
    for (int s = 0; s < ranks; ++s) {
      if (s == rank) continue;
      requests_.push_back(MPI_REQUEST_NULL);
      MGT_MPI_CHECK(MPI_Irecv(incoming_.get() + static_cast<std::size_t>(s) * chunk_bytes, static_cast<int>(mine_),
                              mpi_type(type), s, kReduceScatterTag, comm, &requests_.back()));
    }
  }
  offset = 0;
  for (int r = 0; r < ranks; ++r) {
    const std::int64_t n = counts[static_cast<std::size_t>(r)];
    if (r != rank && n > 0) {
      requests_.push_back(MPI_REQUEST_NULL);
      MGT_MPI_CHECK(MPI_Isend(bytes + static_cast<std::size_t>(offset) * element, static_cast<int>(n), mpi_type(type),
                              r, kReduceScatterTag, comm, &requests_.back()));
    }
    offset += n;
  }
}

RankOrderReduceScatter::~RankOrderReduceScatter() {
  // Never left in flight over freed memory.
  if (!requests_.empty()) mpi_wait_all(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
}

void RankOrderReduceScatter::finish(void* out) {
  if (!requests_.empty())
    MGT_MPI_CHECK(mpi_wait_all(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE));
  requests_.clear();
  if (mine_ == 0) return;
  const std::size_t chunk_bytes = static_cast<std::size_t>(mine_) * element_size(type_);
  std::byte* slot_of_mine = incoming_.get() + static_cast<std::size_t>(rank_) * chunk_bytes;
  std::memcpy(slot_of_mine, own_, chunk_bytes);
  std::memcpy(out, incoming_.get(), chunk_bytes);
  for (int s = 1; s < ranks_; ++s)
    accumulate(type_, out, incoming_.get() + static_cast<std::size_t>(s) * chunk_bytes, mine_, op_);
}

}  // namespace mgt::dist
