// The parts of a SentencePiece .model file (a serialized sentencepiece.ModelProto) that decide
// how text is encoded: the pieces, the model type, and the normalizer and trainer settings that
// the encoder reads. Read from the protobuf wire format directly, because Debian's
// libsentencepiece-dev does not ship the generated message classes.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mgt {

struct SentencePieceModelProto {
  // sentencepiece_model.proto ModelProto.SentencePiece.Type.
  enum class PieceType : int { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };
  struct Piece {
    std::string text;
    float score = 0.0f;
    PieceType type = PieceType::kNormal;
  };
  std::vector<Piece> pieces;

  // TrainerSpec, with the proto's defaults.
  int model_type = 1;  // UNIGRAM = 1, BPE = 2, WORD = 3, CHAR = 4
  bool treat_whitespace_as_suffix = false;
  bool byte_fallback = false;

  // NormalizerSpec, with the proto's defaults.
  std::string precompiled_charsmap;
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;

  // Throws mgt::Error when `bytes` is not a well-formed message.
  static SentencePieceModelProto parse(std::string_view bytes);
};

// U+2581, the escaped space of SentencePiece's normalized text.
inline constexpr std::string_view kSentencePieceSpace = "\xE2\x96\x81";

// Whether U+2581 (the escaped space) comes in `piece` only as a leading run: a piece with U+2581
// after another character could join the end of one word to the start of the next, so an
// encoder may cut the normalized text before each run of U+2581 only when no piece has that.
bool sentencepiece_space_only_leading(std::string_view piece);

}  // namespace mgt
