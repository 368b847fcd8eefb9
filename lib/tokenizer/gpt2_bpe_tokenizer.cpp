#include "tokenizer/gpt2_bpe_tokenizer.hpp"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/error.hpp"
#include "core/log.hpp"
#include "core/utf8.hpp"
#include "tokenizer/gpt2_bpe_tables.hpp"
#include "tokenizer/gpt2_bpe_workspace.hpp"
#include "tokenizer/gpt2_pretokenizer.hpp"
#include "tokenizer/gpt2_vocab_files.hpp"
#include "tokenizer/utf8_lossy.hpp"

namespace mgt {

using gpt2::alphabet_to_bytes;
using gpt2::fail_file;
using gpt2::read_merges;
using gpt2::read_vocab;
using gpt2::VocabEntry;

std::unique_ptr<Gpt2BpeTokenizer> Gpt2BpeTokenizer::load(const std::string& vocab_file,
                                                         const std::string& merge_file) {
  auto t = std::make_shared<Tables>();
  t->vocab_file = vocab_file;
  t->merge_file = merge_file;

  std::vector<VocabEntry> vocab = read_vocab(vocab_file);
  t->vocab_size = static_cast<std::int64_t>(vocab.size());
  TokenId max_id = 0;
  for (const VocabEntry& e : vocab) max_id = std::max(max_id, e.id);
  t->id_bytes.resize(static_cast<std::size_t>(max_id) + 1);
  t->id_kind.assign(static_cast<std::size_t>(max_id) + 1, Tables::IdKind::kAbsent);

  std::unordered_map<std::string, std::uint32_t> symbol_of;  // bytes -> symbol
  symbol_of.reserve(vocab.size() + 256);
  auto intern = [&](const std::string& bytes, TokenId token) {
    auto [it, inserted] = symbol_of.try_emplace(bytes, static_cast<std::uint32_t>(t->symbol_token.size()));
    if (inserted) t->symbol_token.push_back(token);
    return it->second;
  };

  bool have_eod = false;
  std::string bytes;
  for (const VocabEntry& e : vocab) {
    if (e.token == "<|endoftext|>") {
      t->eod = e.id;
      have_eod = true;
    }
    auto id = static_cast<std::size_t>(e.id);
    if (alphabet_to_bytes(e.token, bytes)) {
      // decoder = {v: k for k, v in encoder.items()}: the last token with an id wins.
      t->id_bytes[id] = bytes;
      t->id_kind[id] = Tables::IdKind::kBytes;
      intern(bytes, e.id);
    } else {
      t->id_bytes[id].clear();
      t->id_kind[id] = Tables::IdKind::kNotByteAlphabet;
    }
  }
  if (!have_eod) fail_file("GPT-2 vocab file", vocab_file, "no entry for \"<|endoftext|>\"");
  // Symbols from here on are not vocabulary tokens: a byte or a merge result that reaches one
  // encodes as id 0, as Megatron's encoder.get(token, 0) encodes it.
  const std::size_t vocab_symbols = t->symbol_token.size();
  std::int64_t missing_bytes = 0;
  for (int b = 0; b < 256; ++b) {
    t->byte_symbol[b] = intern(std::string(1, static_cast<char>(b)), 0);
    t->byte_token[b] = t->symbol_token[t->byte_symbol[b]];
    if (t->byte_symbol[b] >= vocab_symbols) ++missing_bytes;
  }

  struct Merge {
    std::uint32_t rank, left, right, merged;
  };
  std::vector<Merge> merges;
  std::int64_t missing_merges = 0;
  std::string first_missing;
  std::string left_bytes;
  std::string right_bytes;
  read_merges(merge_file, [&](std::uint32_t rank, std::string_view left, std::string_view right) {
    // A merge naming characters outside the byte alphabet can never apply.
    if (!alphabet_to_bytes(left, left_bytes) || !alphabet_to_bytes(right, right_bytes)) return;
    std::uint32_t l = intern(left_bytes, 0);
    std::uint32_t r = intern(right_bytes, 0);
    left_bytes += right_bytes;
    std::uint32_t m = intern(left_bytes, 0);
    if (m >= vocab_symbols && ++missing_merges == 1) first_missing = std::string(left) + std::string(right);
    merges.push_back({rank, l, r, m});
  });
  // Files of one tokenizer never do this; a vocab and merges of two different ones would turn
  // text into id 0 wherever they disagree, which Megatron does without a word.
  if (missing_merges > 0 || missing_bytes > 0)
    log::warn("GPT-2 vocab file " + vocab_file + " lacks " +
              (missing_merges > 0 ? std::to_string(missing_merges) + " of the pieces merge file " + merge_file +
                                        " builds (the first: \"" + first_missing + "\")"
                                  : std::string()) +
              (missing_merges > 0 && missing_bytes > 0 ? " and " : "") +
              (missing_bytes > 0 ? std::to_string(missing_bytes) + " of the 256 single bytes" : std::string()) +
              "; they encode as id 0, as Megatron encodes them: do the two files belong to one tokenizer?");
  t->merges.reserve(merges.size());
  for (const Merge& m : merges) t->merges.set(m.left, m.right, m.rank, m.merged);

  return std::make_unique<Gpt2BpeTokenizer>(Private{}, std::move(t));
}

Gpt2BpeTokenizer::Gpt2BpeTokenizer(Private, std::shared_ptr<const Tables> tables)
    : tables_(std::move(tables)), work_(std::make_unique<Workspace>()) {}

Gpt2BpeTokenizer::~Gpt2BpeTokenizer() = default;

std::unique_ptr<Tokenizer> Gpt2BpeTokenizer::clone() const {
  return std::make_unique<Gpt2BpeTokenizer>(Private{}, tables_);
}

std::int64_t Gpt2BpeTokenizer::vocab_size() const { return tables_->vocab_size; }
TokenId Gpt2BpeTokenizer::eod() const { return tables_->eod; }
std::vector<std::string> Gpt2BpeTokenizer::tokenizer_paths() const {
  return {tables_->vocab_file, tables_->merge_file};
}

void Gpt2BpeTokenizer::tokenize(std::string_view text, std::vector<TokenId>& out) {
  work_->encode(*tables_, text, out);
}

std::vector<std::string_view> Gpt2BpeTokenizer::pretokenize(std::string_view text) {
  std::vector<std::string_view> pieces;
  gpt2::for_each_piece(text, [&](std::string_view piece) { pieces.push_back(piece); });
  return pieces;
}

// ----------------------------------------------------------------------------------------------
// Decoding


std::string Gpt2BpeTokenizer::detokenize(std::span<const TokenId> ids) const {
  const Tables& t = *tables_;
  std::string bytes;
  for (TokenId id : ids) {
    auto i = static_cast<std::size_t>(id);
    if (id < 0 || i >= t.id_kind.size() || t.id_kind[i] == Tables::IdKind::kAbsent)
      throw Error("GPT-2 tokenizer: token id " + std::to_string(id) + " is not in the vocabulary '" +
                  t.vocab_file + "'");
    if (t.id_kind[i] == Tables::IdKind::kNotByteAlphabet)
      throw Error("GPT-2 tokenizer: token id " + std::to_string(id) + " of '" + t.vocab_file +
                  "' has characters outside GPT-2's byte alphabet and cannot be decoded");
    bytes += t.id_bytes[i];
  }
  if (!utf8::find_invalid(bytes)) return bytes;
  return utf8_lossy(bytes);  // Python's decode(errors="replace")
}


}  // namespace mgt
