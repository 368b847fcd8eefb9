#include "tokenizer/sentencepiece_model_proto.hpp"

#include <cstring>

#include "core/error.hpp"

namespace mgt {

namespace {

// A cursor over protobuf wire-format bytes: varints, 32/64-bit fixed fields and
// length-delimited fields; anything else is skipped by its wire type.
class WireReader {
public:
  explicit WireReader(std::string_view bytes) : rest_(bytes) {}
  bool done() const { return rest_.empty(); }

  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (rest_.empty()) bad();
      const auto b = static_cast<unsigned char>(rest_.front());
      rest_.remove_prefix(1);
      v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    bad();
  }
  std::string_view take(std::size_t n) {
    if (n > rest_.size()) bad();
    const std::string_view out = rest_.substr(0, n);
    rest_.remove_prefix(n);
    return out;
  }
  std::string_view bytes() { return take(static_cast<std::size_t>(varint())); }
  float fixed32_float() {
    const std::string_view b = take(4);
    float f;
    std::memcpy(&f, b.data(), 4);  // little-endian on the wire and on every target we build
    return f;
  }
  void skip(int wire_type) {
    switch (wire_type) {
      case 0: varint(); return;
      case 1: take(8); return;
      case 2: bytes(); return;
      case 5: take(4); return;
      default: bad();
    }
  }
  [[noreturn]] static void bad() { throw Error("malformed SentencePiece model (protobuf wire format)"); }

private:
  std::string_view rest_;
};

SentencePieceModelProto::Piece parse_piece(std::string_view bytes) {
  SentencePieceModelProto::Piece p;
  WireReader r(bytes);
  while (!r.done()) {
    const std::uint64_t key = r.varint();
    const int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
    if (field == 1 && wire == 2) p.text = std::string(r.bytes());
    else if (field == 2 && wire == 5) p.score = r.fixed32_float();
    else if (field == 3 && wire == 0) p.type = static_cast<SentencePieceModelProto::PieceType>(r.varint());
    else r.skip(wire);
  }
  return p;
}

void parse_trainer_spec(std::string_view bytes, SentencePieceModelProto& m) {
  WireReader r(bytes);
  while (!r.done()) {
    const std::uint64_t key = r.varint();
    const int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
    if (field == 3 && wire == 0) m.model_type = static_cast<int>(r.varint());
    else if (field == 24 && wire == 0) m.treat_whitespace_as_suffix = r.varint() != 0;
    else if (field == 35 && wire == 0) m.byte_fallback = r.varint() != 0;
    else r.skip(wire);
  }
}

void parse_normalizer_spec(std::string_view bytes, SentencePieceModelProto& m) {
  WireReader r(bytes);
  while (!r.done()) {
    const std::uint64_t key = r.varint();
    const int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
    if (field == 2 && wire == 2) m.precompiled_charsmap = std::string(r.bytes());
    else if (field == 3 && wire == 0) m.add_dummy_prefix = r.varint() != 0;
    else if (field == 4 && wire == 0) m.remove_extra_whitespaces = r.varint() != 0;
    else if (field == 5 && wire == 0) m.escape_whitespaces = r.varint() != 0;
    else r.skip(wire);
  }
}

}  // namespace

SentencePieceModelProto SentencePieceModelProto::parse(std::string_view bytes) {
  SentencePieceModelProto m;
  WireReader r(bytes);
  while (!r.done()) {
    const std::uint64_t key = r.varint();
    const int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
    if (field == 1 && wire == 2) m.pieces.push_back(parse_piece(r.bytes()));
    else if (field == 2 && wire == 2) parse_trainer_spec(r.bytes(), m);
    else if (field == 3 && wire == 2) parse_normalizer_spec(r.bytes(), m);
    else r.skip(wire);
  }
  return m;
}

bool sentencepiece_space_only_leading(std::string_view piece) {
  while (piece.starts_with(kSentencePieceSpace)) piece.remove_prefix(kSentencePieceSpace.size());
  return piece.find(kSentencePieceSpace) == std::string_view::npos;
}

}  // namespace mgt
