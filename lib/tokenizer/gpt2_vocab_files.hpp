// The two files of GPT-2's tokenizer, read as Megatron reads them: vocab.json (token -> id) and
// merges.txt, both writing tokens in GPT-2's byte alphabet.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace mgt::gpt2 {

// Maps a token written in the byte alphabet back to its bytes. False when a character lies
// outside the alphabet: such a token can never come out of BPE and cannot be decoded.
bool alphabet_to_bytes(std::string_view token, std::string& bytes);

struct VocabEntry {
  std::string token;  // as written in the file (byte alphabet, UTF-8)
  TokenId id;
};

// json.load semantics: a duplicate key keeps its first position and its last id.
std::vector<VocabEntry> read_vocab(const std::string& path);

using MergeLineFn = std::function<void(std::uint32_t rank, std::string_view left, std::string_view right)>;

// Calls fn(rank, left, right) for each "left right" line of a merges file, reproducing
// open(path, encoding='utf-8').read().split('\n')[1:-1] and line.split(): universal newlines,
// first line skipped, the text after the last newline ignored, lines of other than two fields
// kept as ranks that can never match.
void read_merges(const std::string& path, const MergeLineFn& fn);

// Throws mgt::Error "WHAT 'PATH': WHY".
[[noreturn]] void fail_file(const char* what, const std::string& path, const std::string& why);

}  // namespace mgt::gpt2
