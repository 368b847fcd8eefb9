// What Gpt2BpeTokenizer::load makes of the vocab and merges files: immutable, shared by clones.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/gpt2_bpe_tokenizer.hpp"
#include "tokenizer/gpt2_merge_table.hpp"

namespace mgt {

struct Gpt2BpeTokenizer::Tables {
  std::string vocab_file;
  std::string merge_file;
  std::int64_t vocab_size = 0;
  TokenId eod = 0;

  // Decoding, indexed by token id.
  enum class IdKind : std::uint8_t { kAbsent, kBytes, kNotByteAlphabet };
  std::vector<std::string> id_bytes;
  std::vector<IdKind> id_kind;

  // Encoding. Symbols are the distinct byte strings BPE can build; a symbol that is not a vocab
  // token (possible only with an unusual merges file) encodes as id 0, like encoder.get(t, 0).
  std::array<std::uint32_t, 256> byte_symbol{};
  std::array<TokenId, 256> byte_token{};
  std::vector<TokenId> symbol_token;
  gpt2::MergeTable merges;
};

}  // namespace mgt
