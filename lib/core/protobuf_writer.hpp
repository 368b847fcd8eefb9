// The few pieces of the Protocol Buffers wire format that mgt writes (TensorBoard's Event
// messages): varints, 64- and 32-bit little-endian fixed fields, and length-delimited fields
// (strings and nested messages). Fields are appended in the order called; a message is the
// concatenation of its fields.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace mgt {

class ProtobufWriter {
public:
  void varint_field(int field, std::uint64_t value);  // wire type 0 (int64 as its two's complement)
  void double_field(int field, double value);         // wire type 1 (fixed64)
  void float_field(int field, float value);           // wire type 5 (fixed32)
  void bytes_field(int field, std::string_view bytes);  // wire type 2: strings, bytes, messages

  const std::string& bytes() const { return out_; }

private:
  void varint(std::uint64_t value);
  void tag(int field, int wire_type);
  void little_endian(std::uint64_t value, int bytes);

  std::string out_;
};

}  // namespace mgt
