#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>

#include "core/crc32c.hpp"
#include "core/protobuf_writer.hpp"
#include "core/tfrecord.hpp"

using namespace mgt;

namespace {

std::uint64_t little_endian(const std::string& bytes, std::size_t at, int size) {
  std::uint64_t v = 0;
  for (int i = 0; i < size; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes.at(at + i))) << (8 * i);
  return v;
}

}  // namespace

TEST_CASE("crc32c: Castagnoli's check values", "[core][tensorboard]") {
  CHECK(crc32c("123456789") == 0xE3069283u);
  CHECK(crc32c("") == 0u);
  CHECK(crc32c(std::string(32, '\0')) == 0x8A9136AAu);  // RFC 3720 B.4: 32 bytes of zeros
  CHECK(crc32c(std::string(32, '\xff')) == 0x62A8AB43u);  // and of ones
  // Continuing over a split input gives the CRC of the whole.
  CHECK(crc32c("6789", crc32c("12345")) == 0xE3069283u);
}

TEST_CASE("tfrecord: length, masked CRCs, data", "[core][tensorboard]") {
  const std::uint32_t crc = crc32c("abc");
  CHECK(masked_crc32c("abc") == static_cast<std::uint32_t>(((crc >> 15) | (crc << 17)) + 0xa282ead8u));
  const std::string record = tfrecord("abc");
  REQUIRE(record.size() == 8 + 4 + 3 + 4);
  CHECK(little_endian(record, 0, 8) == 3);
  CHECK(little_endian(record, 8, 4) == masked_crc32c(record.substr(0, 8)));
  CHECK(record.substr(12, 3) == "abc");
  CHECK(little_endian(record, 15, 4) == masked_crc32c("abc"));
  // An empty record still has its CRCs.
  CHECK(tfrecord("").size() == 16);
}

TEST_CASE("protobuf writer: the wire format", "[core][tensorboard]") {
  ProtobufWriter w;
  w.varint_field(1, 150);  // the encoding guide's example: 08 96 01
  CHECK(w.bytes() == std::string("\x08\x96\x01", 3));

  ProtobufWriter negative;
  negative.varint_field(2, static_cast<std::uint64_t>(std::int64_t{-1}));  // int64: ten bytes
  CHECK(negative.bytes() == std::string("\x10\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11));

  ProtobufWriter d;
  d.double_field(1, 1.0);
  CHECK(d.bytes() == std::string("\x09\x00\x00\x00\x00\x00\x00\xf0\x3f", 9));
  ProtobufWriter f;
  f.float_field(2, 1.0f);
  CHECK(f.bytes() == std::string("\x15\x00\x00\x80\x3f", 5));
  ProtobufWriter s;
  s.bytes_field(2, "testing");  // 12 07 74 65 73 74 69 6e 67
  CHECK(s.bytes() == std::string("\x12\x07testing", 9));
  ProtobufWriter big;
  big.bytes_field(20, std::string(300, 'x'));  // field 20: a two-byte tag; length 300: two bytes
  CHECK(big.bytes().substr(0, 4) == std::string("\xa2\x01\xac\x02", 4));
  CHECK(big.bytes().size() == 4 + 300);
}
