#include "tokenizer/tiktoken_tokenizer.hpp"

#include <simdjson.h>

#include <array>
#include <unordered_set>

#include "core/error.hpp"
#include "core/mapped_file.hpp"
#include "tokenizer/byte_bpe.hpp"
#include "tokenizer/split_pretokenizer.hpp"
#include "tokenizer/tiktoken_v2_pretokenizer.hpp"
#include "tokenizer/utf8_lossy.hpp"

namespace mgt {

const std::string_view kTikTokenPatternV1 =
    R"([^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)";
const std::string_view kTikTokenPatternV2 =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|)"
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|)"
    R"(\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct TikTokenizer::Tables {
  TikTokenOptions options;
  std::string_view pattern;
  std::optional<LlamaSplitPattern> llama;  // v1; v2 has a matcher of its own
  ByteBpeTables bpe;
  std::vector<std::string> id_bytes;  // special tokens first, then the ranks
  std::int64_t vocab_size = 0;
  TokenId eos = 0, bos = 0;
};

class TikTokenizer::Workspace {
public:
  explicit Workspace(const Tables&) {}
  void encode(const Tables& t, std::string_view text, std::vector<TokenId>& out) {
    // encode_ordinary encodes the matches only; both patterns match every character.
    auto encode_piece = [&](std::string_view piece) { bpe_.encode(t.bpe, piece, out); };
    if (t.llama) for_each_llama_piece(text, *t.llama, encode_piece);
    else tiktoken_v2::for_each_piece(text, encode_piece);
  }

private:
  ByteBpeEncoder bpe_;
};

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw Error("TikToken vocabulary '" + path + "': " + why);
}

bool base64_decode(std::string_view in, std::string& out) {
  static const std::array<int, 256> value = [] {
    std::array<int, 256> v{};
    v.fill(-1);
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) v[static_cast<unsigned char>(alphabet[i])] = i;
    return v;
  }();
  out.clear();
  if (in.size() % 4 != 0) return false;
  for (std::size_t i = 0; i < in.size(); i += 4) {
    int pad = 0;
    std::uint32_t group = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const char c = in[i + k];
      int v;
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        v = 0;
        ++pad;
      } else {
        if (pad) return false;
        v = value[static_cast<unsigned char>(c)];
        if (v < 0) return false;
      }
      group = (group << 6) | static_cast<std::uint32_t>(v);
    }
    out += static_cast<char>(group >> 16);
    if (pad < 2) out += static_cast<char>((group >> 8) & 0xFF);
    if (pad < 1) out += static_cast<char>(group & 0xFF);
  }
  return true;
}

// Megatron's JSON: [{"rank": i, "token_bytes": BASE64, "token_str": ...}, ...] with rank == i.
std::vector<std::string> read_json_ranks(const std::string& path, std::string_view text) {
  simdjson::padded_string json(text);
  simdjson::dom::parser parser;
  simdjson::dom::array entries;
  if (auto code = parser.parse(json).get_array().get(entries))
    fail(path, std::string("not a JSON list of ranks (") + simdjson::error_message(code) + ")");
  std::vector<std::string> ranks;
  std::string bytes;
  for (simdjson::dom::element e : entries) {
    const std::string where = "entry " + std::to_string(ranks.size());
    simdjson::dom::object o;
    if (e.get_object().get(o) || o.size() != 3) fail(path, where + " is not {\"rank\", \"token_bytes\", \"token_str\"}");
    std::int64_t rank;
    std::string_view b64;
    std::string_view str;
    if (o["rank"].get_int64().get(rank) || o["token_bytes"].get_string().get(b64) || o["token_str"].get_string().get(str))
      fail(path, where + " is not {\"rank\", \"token_bytes\", \"token_str\"}");
    if (rank != static_cast<std::int64_t>(ranks.size())) fail(path, where + " has rank " + std::to_string(rank));
    if (!base64_decode(b64, bytes)) fail(path, where + ": token_bytes is not base64");
    ranks.push_back(bytes);
  }
  return ranks;
}

// tiktoken's own format: "BASE64 RANK" per line; mgt takes it with ranks 0, 1, 2, ... in order.
std::vector<std::string> read_tiktoken_ranks(const std::string& path, std::string_view text) {
  std::vector<std::string> ranks;
  std::string bytes;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    pos = eol + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    const std::size_t space = line.find(' ');
    const std::string where = "line " + std::to_string(ranks.size() + 1);
    if (space == std::string_view::npos || !base64_decode(line.substr(0, space), bytes))
      fail(path, where + " is not \"BASE64 RANK\"");
    if (line.substr(space + 1) != std::to_string(ranks.size()))
      fail(path, where + " does not have rank " + std::to_string(ranks.size()) + " (ranks must count up from 0)");
    ranks.push_back(bytes);
  }
  return ranks;
}

// Python's repr() of a str, as str(list) writes each item.
std::string python_repr(const std::string& s) {
  const char quote = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\' || c == quote) out += '\\', out += c;
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (u < 0x20 || u == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else out += c;
  }
  return out + quote;
}

// What one special token costs while the tables are built: its name ("<SPECIAL_123456>" outgrows
// the short-string buffer) in the list of names and in the table of each id's bytes. Measured:
// mgt-tokenize peaks at 172 bytes a token with 2^22 of them; rounded up.
constexpr std::int64_t kBytesPerSpecialToken = 192;

}  // namespace

void check_tiktoken_special_token_memory(std::int64_t num_special_tokens, const std::optional<AvailableMemory>& available) {
  if (!available || num_special_tokens <= 0) return;
  const double needed = static_cast<double>(num_special_tokens) * static_cast<double>(kBytesPerSpecialToken);
  if (needed <= static_cast<double>(available->bytes)) return;
  throw UsageError("--tiktoken-num-special-tokens " + std::to_string(num_special_tokens) + " needs about " +
                   format_bytes(needed) + " of memory for its table of special tokens, but only " +
                   format_bytes(static_cast<double>(available->bytes)) + " is available (" + available->source + ")");
}

std::unique_ptr<TikTokenizer> TikTokenizer::load(const TikTokenOptions& options) {
  auto t = std::make_shared<Tables>();
  t->options = options;
  const std::string& path = options.path;
  if (options.pattern == "v1") t->pattern = kTikTokenPatternV1;
  else if (options.pattern == "v2") t->pattern = kTikTokenPatternV2;
  else throw UsageError("--tiktoken-pattern must be v1 or v2, got '" + options.pattern + "'");
  // v1 is a Llama 3-family pattern; v2's case-sensitive letter classes need a matcher of their
  // own. Both cut text exactly as the regex does (tests/tokenizer/test_tiktoken_v2_pretokenizer).
  if (t->pattern == kTikTokenPatternV1) t->llama = recognize_split_pattern(t->pattern)->llama;

  // CustomTikTokenizer.__init__'s checks.
  const std::int64_t vocab_size = options.vocab_size.value_or(std::int64_t{1} << 17);
  const std::int64_t num_special = options.num_special_tokens;
  std::vector<std::string> special = options.special_tokens.value_or(std::vector<std::string>{"<unk>", "<s>", "</s>"});
  std::unordered_set<std::string> unique(special.begin(), special.end());
  if (unique.size() != special.size()) throw UsageError("--tiktoken-special-tokens must be unique");
  for (const char* required : {"<unk>", "<s>", "</s>"})
    if (!unique.count(required))
      throw UsageError("--tiktoken-special-tokens must include <unk>, <s> and </s>");
  if (static_cast<std::int64_t>(special.size()) > num_special || num_special >= vocab_size)
    throw UsageError("TikTokenizer needs len(--tiktoken-special-tokens) <= --tiktoken-num-special-tokens (" +
                     std::to_string(num_special) + ") < --vocab-size (" + std::to_string(vocab_size) + ")");
  check_tiktoken_special_token_memory(num_special, available_host_memory());
  // Fillers differ from each other by their number: only a given name can repeat one, so the set
  // of given names is all there is to check (it stays small however many fillers there are).
  special.reserve(static_cast<std::size_t>(num_special));
  for (auto i = static_cast<std::int64_t>(special.size()); i < num_special; ++i) {
    std::string filler = "<SPECIAL_" + std::to_string(i) + ">";
    if (unique.count(filler)) throw UsageError("--tiktoken-special-tokens repeats the filler " + filler);
    special.push_back(std::move(filler));
  }

  std::vector<std::string> ranks;
  {
    MappedFile file = [&] {
      try {
        return MappedFile(path);
      } catch (const Error& e) {
        throw Error(std::string("TikToken vocabulary: ") + e.what());
      }
    }();
    const bool json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
    ranks = json ? read_json_ranks(path, file.view()) : read_tiktoken_ranks(path, file.view());
  }
  const std::int64_t inner = vocab_size - num_special;
  if (static_cast<std::int64_t>(ranks.size()) < inner)
    fail(path, "has " + std::to_string(ranks.size()) + " ranks, fewer than --vocab-size " + std::to_string(vocab_size) +
                   " minus --tiktoken-num-special-tokens " + std::to_string(num_special));
  ranks.resize(static_cast<std::size_t>(inner));  // vocab[:max_vocab]
  for (std::size_t i = 0; i < 256 && i < ranks.size(); ++i)
    if (ranks[i] != std::string(1, static_cast<char>(i)))
      fail(path, "rank " + std::to_string(i) + " is not the single byte " + std::to_string(i));
  if (ranks.size() < 256) fail(path, "has fewer than the 256 single-byte ranks");

  t->id_bytes = special;
  t->id_bytes.insert(t->id_bytes.end(), ranks.begin(), ranks.end());
  t->vocab_size = vocab_size;
  auto special_id = [&](const char* name) {
    return static_cast<TokenId>(std::find(special.begin(), special.end(), name) - special.begin());
  };
  t->eos = special_id("</s>");
  t->bos = special_id("<s>");

  const auto first_id = static_cast<TokenId>(num_special);
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const std::uint32_t symbol = t->bpe.intern(ranks[r]);
    if (const TokenId seen = t->bpe.token_of(symbol); seen != ByteBpeTables::kNoToken)
      fail(path, "rank " + std::to_string(r) + " repeats the bytes of rank " + std::to_string(seen - first_id));
    t->bpe.set_token(symbol, static_cast<TokenId>(r) + first_id);
  }
  // tiktoken merges the adjacent pair whose concatenation has the lowest rank: every way of
  // cutting a token into two tokens is a merge of that token's rank. Every symbol interned so
  // far is a rank's, so symbol_of finds exactly the ranks.
  for (std::size_t r = 256; r < ranks.size(); ++r) {
    const std::string_view whole = ranks[r];
    const std::uint32_t merged = *t->bpe.symbol_of(whole);
    for (std::size_t k = 1; k < whole.size(); ++k) {
      const auto left = t->bpe.symbol_of(whole.substr(0, k));
      if (!left) continue;
      const auto right = t->bpe.symbol_of(whole.substr(k));
      if (!right) continue;
      t->bpe.add_merge(*left, *right, static_cast<std::uint32_t>(r), merged);
    }
  }
  t->bpe.ignore_merges = true;
  t->bpe.finish();
  return std::make_unique<TikTokenizer>(Private{}, std::move(t));
}

TikTokenizer::TikTokenizer(Private, std::shared_ptr<const Tables> tables)
    : tables_(std::move(tables)), work_(std::make_unique<Workspace>(*tables_)) {}

TikTokenizer::~TikTokenizer() = default;

std::unique_ptr<Tokenizer> TikTokenizer::clone() const { return std::make_unique<TikTokenizer>(Private{}, tables_); }

void TikTokenizer::tokenize(std::string_view text, std::vector<TokenId>& out) { work_->encode(*tables_, text, out); }

std::string TikTokenizer::detokenize(std::span<const TokenId> ids) const {
  std::string bytes;
  for (TokenId id : ids) {
    if (id < 0 || static_cast<std::size_t>(id) >= tables_->id_bytes.size())
      throw Error("TikTokenizer: token id " + std::to_string(id) + " is not in the vocabulary of '" +
                  tables_->options.path + "'");
    bytes += tables_->id_bytes[static_cast<std::size_t>(id)];
  }
  return utf8_lossy(bytes);
}

std::int64_t TikTokenizer::vocab_size() const { return tables_->vocab_size; }
TokenId TikTokenizer::eod() const { return tables_->eos; }
std::optional<TokenId> TikTokenizer::bos() const { return tables_->bos; }
std::vector<std::string> TikTokenizer::tokenizer_paths() const { return {tables_->options.path}; }

// MegatronLegacyTokenizer(path, pattern=..., vocab_size=..., num_special_tokens=...,
// special_tokens=...), each option as str(): the flag values as given, None where absent.
std::vector<std::pair<std::string, std::string>> TikTokenizer::tokenizer_options() const {
  const TikTokenOptions& o = tables_->options;
  std::string special = "None";
  if (o.special_tokens) {
    special = "[";
    for (std::size_t i = 0; i < o.special_tokens->size(); ++i)
      special += (i ? ", " : "") + python_repr((*o.special_tokens)[i]);
    special += "]";
  }
  return {{"pattern", std::string(tables_->pattern)},
          {"vocab_size", o.vocab_size ? std::to_string(*o.vocab_size) : "None"},
          {"num_special_tokens", std::to_string(o.num_special_tokens)},
          {"special_tokens", special}};
}

}  // namespace mgt
