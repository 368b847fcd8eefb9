#include "ckpt/tensor_pieces.hpp"

#include <cstring>
#include <string>

#include "core/error.hpp"

namespace mgt::ckpt {
namespace {

// The tensor seen as [outer, chunks, count, rows, inner]: piece `rank` is [outer, chunks, rows, inner].
struct PieceGeometry {
  std::size_t outer = 1;
  std::size_t chunks = 1;
  std::size_t count = 1;
  std::size_t row_bytes = 0;  // rows · inner · element size: one contiguous run
};

PieceGeometry geometry_of(const TensorPartition& p, std::span<const std::int64_t> global_shape,
                          std::size_t element_size) {
  PieceGeometry g;
  std::size_t inner = element_size;
  for (std::size_t i = static_cast<std::size_t>(p.dim) + 1; i < global_shape.size(); ++i)
    inner *= static_cast<std::size_t>(global_shape[i]);
  for (int i = 0; i < p.dim; ++i) g.outer *= static_cast<std::size_t>(global_shape[static_cast<std::size_t>(i)]);
  g.chunks = static_cast<std::size_t>(p.chunks);
  g.count = static_cast<std::size_t>(p.count);
  const auto extent = static_cast<std::size_t>(global_shape[static_cast<std::size_t>(p.dim)]);
  if (extent % (g.chunks * g.count) != 0)
    throw Error("a tensor dimension of " + std::to_string(extent) + " does not split into " +
                std::to_string(g.chunks) + " x " + std::to_string(g.count) + " equal pieces");
  g.row_bytes = extent / (g.chunks * g.count) * inner;
  return g;
}

template <bool kIntoWhole>
void move_piece(const TensorPartition& p, std::span<const std::int64_t> global_shape, std::size_t element_size,
                const std::byte* from, std::byte* to, std::size_t whole_bytes, std::size_t piece_bytes) {
  if (p.dim < 0 || p.count == 1) {
    if (whole_bytes != piece_bytes) throw Error("internal error: a whole piece of the wrong size");
    std::memcpy(to, from, piece_bytes);
    return;
  }
  const PieceGeometry g = geometry_of(p, global_shape, element_size);
  if (g.outer * g.chunks * g.row_bytes != piece_bytes || piece_bytes * g.count != whole_bytes)
    throw Error("internal error: a tensor piece of the wrong size");
  const auto rank = static_cast<std::size_t>(p.rank);
  std::size_t piece_at = 0;
  for (std::size_t o = 0; o < g.outer; ++o)
    for (std::size_t c = 0; c < g.chunks; ++c) {
      const std::size_t whole_at = ((o * g.chunks + c) * g.count + rank) * g.row_bytes;
      if constexpr (kIntoWhole) std::memcpy(to + whole_at, from + piece_at, g.row_bytes);
      else std::memcpy(to + piece_at, from + whole_at, g.row_bytes);
      piece_at += g.row_bytes;
    }
}

}  // namespace

std::int64_t element_count(std::span<const std::int64_t> shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

void place_piece(const TensorPartition& partition, std::span<const std::int64_t> global_shape,
                 std::size_t element_size, std::span<const std::byte> piece, std::span<std::byte> whole) {
  move_piece<true>(partition, global_shape, element_size, piece.data(), whole.data(), whole.size(), piece.size());
}

void cut_piece(const TensorPartition& partition, std::span<const std::int64_t> global_shape,
               std::size_t element_size, std::span<const std::byte> whole, std::span<std::byte> piece) {
  move_piece<false>(partition, global_shape, element_size, whole.data(), piece.data(), whole.size(), piece.size());
}

}  // namespace mgt::ckpt
