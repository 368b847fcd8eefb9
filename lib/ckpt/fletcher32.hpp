// The Fletcher-32 checksum HDF5's fletcher32 filter stores after each chunk (H5Zfletcher32.c,
// H5checksum.c): the bytes read as big-endian 16-bit words (an odd last byte as the high byte of
// a word), both sums starting at 0 and kept modulo 65535 in ones' complement (a non-zero sum that
// is a multiple of 65535 is 0xffff, not 0), the result sum2 << 16 | sum1, stored little-endian.
// Computed here over long blocks with 64-bit sums, which the compiler vectorizes, so that shard
// files can be written chunk by chunk without HDF5's filter pipeline (checkpoint_writer.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

namespace mgt::ckpt {

std::uint32_t hdf5_fletcher32(std::span<const std::byte> bytes);

}  // namespace mgt::ckpt
