// TFRecord framing, the container of TensorFlow and TensorBoard files: each record is
//   uint64 length | uint32 masked CRC-32C of the length's 8 bytes | data | uint32 masked CRC-32C of data
// all little-endian, with TensorFlow's mask ((crc >> 15) | (crc << 17)) + 0xa282ead8
// (tensorflow/core/lib/hash/crc32c.h), so that a CRC of data holding CRCs is not itself trivial.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace mgt {

std::uint32_t masked_crc32c(std::string_view data);

// The framed record of `data`.
std::string tfrecord(std::string_view data);

}  // namespace mgt
