#include "core/protobuf_writer.hpp"

#include <bit>

namespace mgt {

void ProtobufWriter::varint(std::uint64_t value) {
  while (value >= 0x80) {
    out_.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out_.push_back(static_cast<char>(value));
}

void ProtobufWriter::tag(int field, int wire_type) {
  varint((static_cast<std::uint64_t>(field) << 3) | static_cast<std::uint64_t>(wire_type));
}

void ProtobufWriter::little_endian(std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

void ProtobufWriter::varint_field(int field, std::uint64_t value) {
  tag(field, 0);
  varint(value);
}

void ProtobufWriter::double_field(int field, double value) {
  tag(field, 1);
  little_endian(std::bit_cast<std::uint64_t>(value), 8);
}

void ProtobufWriter::float_field(int field, float value) {
  tag(field, 5);
  little_endian(std::bit_cast<std::uint32_t>(value), 4);
}

void ProtobufWriter::bytes_field(int field, std::string_view bytes) {
  tag(field, 2);
  varint(bytes.size());
  out_.append(bytes);
}

}  // namespace mgt
