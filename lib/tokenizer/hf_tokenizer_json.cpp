// HuggingFaceTokenizer::load: tokenizer.json as Hugging Face `tokenizers` reads it
// (tokenizer/serialization.rs and the serde forms of each component), and the special tokens of
// tokenizer_config.json / special_tokens_map.json as transformers' from_pretrained takes them.
#include <simdjson.h>

#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <unordered_map>
#include <unordered_set>

#include "core/error.hpp"
#include "core/json_text.hpp"
#include "core/json_wide_integers.hpp"
#include "core/mapped_file.hpp"
#include "core/utf8.hpp"
#include "tokenizer/gpt2_vocab_files.hpp"
#include "tokenizer/hf_tokenizer.hpp"
#include "tokenizer/hf_tokenizer_tables.hpp"

namespace mgt {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::object;

constexpr std::int64_t kMaxTokenId = std::int64_t{1} << 26;

class JsonFile {
public:
  JsonFile(const std::string& path, const char* what) : path_(path), what_(what) {
    std::string text;
    try {
      MappedFile file(path);
      text.assign(file.view());
    } catch (const Error& e) {
      throw Error(std::string(what) + ": " + e.what());
    }
    // tokenizer_config.json's model_max_length is int(1e30) when the model sets none: an
    // integer wider than 64 bits reads as a double.
    json_ = simdjson::padded_string(json_with_wide_integers_as_reals(text));
    if (auto code = parser_.parse(json_).get(root_))
      fail(std::string("not valid JSON (") + simdjson::error_message(code) + ")");
  }

  [[noreturn]] void fail(const std::string& why) const {
    throw Error(std::string(what_) + " '" + path_ + "': " + why);
  }
  // A feature mgt does not implement: named, so that a user knows what to change.
  [[noreturn]] void unsupported(const std::string& feature) const {
    fail(feature + " is not supported (mgt reads BPE tokenizers: byte-level ones with ByteLevel, Split "
                   "and Digits pre-tokenizers, and SentencePiece-style ones with a Metaspace pre-tokenizer "
                   "or Prepend and Replace normalizers; Unicode normalizers)");
  }

  element root() const { return root_; }
  const std::string& path() const { return path_; }

  object as_object(element e, const std::string& where) const {
    object o;
    if (e.get_object().get(o)) fail(where + " is not a JSON object");
    return o;
  }
  array as_array(element e, const std::string& where) const {
    array a;
    if (e.get_array().get(a)) fail(where + " is not a JSON array");
    return a;
  }
  std::string as_string(element e, const std::string& where) const {
    std::string_view s;
    if (e.get_string().get(s)) fail(where + " is not a string");
    return std::string(s);
  }
  // A field that may be absent or null.
  std::optional<element> field(object o, std::string_view key) const {
    element e;
    if (o.at_key(key).get(e) || e.is_null()) return std::nullopt;
    return e;
  }
  bool flag(object o, std::string_view key, bool fallback, const std::string& where) const {
    auto e = field(o, key);
    if (!e) return fallback;
    bool b;
    if (e->get_bool().get(b)) fail(where + "." + std::string(key) + " is not true or false");
    return b;
  }
  std::optional<std::string> text(object o, std::string_view key, const std::string& where) const {
    auto e = field(o, key);
    if (!e) return std::nullopt;
    return as_string(*e, where + "." + std::string(key));
  }
  std::string type_of(object o, const std::string& where) const {
    auto t = text(o, "type", where);
    if (!t) fail(where + " has no \"type\"");
    return *t;
  }
  std::size_t count(object o, std::string_view key, const std::string& where) const {
    auto e = field(o, key);
    if (!e) return 0;
    std::uint64_t v;
    if (e->get_uint64().get(v) || v > 1000000) fail(where + "." + std::string(key) + " is not a small count");
    return static_cast<std::size_t>(v);
  }
  // {"String": "..."}; a regular expression is refused by name.
  std::string string_pattern(object o, const std::string& where) const {
    auto pattern = field(o, "pattern");
    if (!pattern) fail(where + " has no \"pattern\"");
    const object p = as_object(*pattern, where + ".pattern");
    if (auto literal = text(p, "String", where + ".pattern")) {
      if (literal->empty()) unsupported(where + " on the empty string");
      return *literal;
    }
    if (field(p, "Regex")) unsupported(where + " with a Regex pattern");
    fail(where + ".pattern is not {\"String\": ...}");
  }
  TokenId id(element e, const std::string& where) const {
    std::int64_t v;
    if (e.get_int64().get(v) || v < 0 || v >= kMaxTokenId) fail(where + " is not a token id in [0, 2^26)");
    return static_cast<TokenId>(v);
  }

private:
  std::string path_;
  const char* what_;
  simdjson::padded_string json_;
  simdjson::dom::parser parser_;
  element root_;
};

void read_normalizer(const JsonFile& f, element e, std::vector<HfNormalizer>& out) {
  const object o = f.as_object(e, "normalizer");
  const std::string type = f.type_of(o, "normalizer");
  if (type == "Sequence") {
    auto list = f.field(o, "normalizers");
    if (!list) f.fail("normalizer Sequence has no \"normalizers\"");
    for (element n : f.as_array(*list, "normalizer.normalizers")) read_normalizer(f, n, out);
  } else if (type == "NFC") {
    out.push_back({HfNormalizer::Kind::kNfc, "", ""});
  } else if (type == "NFD") {
    out.push_back({HfNormalizer::Kind::kNfd, "", ""});
  } else if (type == "NFKC") {
    out.push_back({HfNormalizer::Kind::kNfkc, "", ""});
  } else if (type == "NFKD") {
    out.push_back({HfNormalizer::Kind::kNfkd, "", ""});
  } else if (type == "Prepend") {
    auto prepend = f.text(o, "prepend", "normalizer");
    if (!prepend) f.fail("the Prepend normalizer has no \"prepend\"");
    out.push_back({HfNormalizer::Kind::kPrepend, "", *prepend});
  } else if (type == "Replace") {
    std::string pattern = f.string_pattern(o, "the Replace normalizer");
    auto content = f.text(o, "content", "normalizer");
    if (!content) f.fail("the Replace normalizer has no \"content\"");
    out.push_back({HfNormalizer::Kind::kReplace, std::move(pattern), *content});
  } else {
    f.unsupported("the normalizer \"" + type + "\"");
  }
}

void read_pre_tokenizer(const JsonFile& f, element e, std::vector<HfPreTokenizerStep>& out) {
  const object o = f.as_object(e, "pre_tokenizer");
  const std::string type = f.type_of(o, "pre_tokenizer");
  HfPreTokenizerStep step{};
  if (type == "Sequence") {
    auto list = f.field(o, "pretokenizers");
    if (!list) f.fail("pre_tokenizer Sequence has no \"pretokenizers\"");
    for (element p : f.as_array(*list, "pre_tokenizer.pretokenizers")) read_pre_tokenizer(f, p, out);
    return;
  }
  if (type == "ByteLevel") {
    step.kind = HfPreTokenizerStep::Kind::kByteLevel;
    step.add_prefix_space = f.flag(o, "add_prefix_space", true, "pre_tokenizer");
    step.use_regex = f.flag(o, "use_regex", true, "pre_tokenizer");
  } else if (type == "Metaspace") {
    step.kind = HfPreTokenizerStep::Kind::kMetaspace;
    step.replacement = f.text(o, "replacement", "pre_tokenizer").value_or("\u2581");
    if (step.replacement.empty()) f.fail("the Metaspace pre-tokenizer's replacement is empty");
    // tokenizers before 0.19 wrote add_prefix_space instead of prepend_scheme; split defaults on.
    const std::string scheme = f.text(o, "prepend_scheme", "pre_tokenizer")
                                   .value_or(f.flag(o, "add_prefix_space", true, "pre_tokenizer") ? "always" : "never");
    if (scheme == "always") step.prepend = HfPreTokenizerStep::Prepend::kAlways;
    else if (scheme == "first") step.prepend = HfPreTokenizerStep::Prepend::kFirst;
    else if (scheme == "never") step.prepend = HfPreTokenizerStep::Prepend::kNever;
    else f.fail("the Metaspace pre-tokenizer's prepend_scheme \"" + scheme + "\" is not always, first or never");
    step.split = f.flag(o, "split", true, "pre_tokenizer");
  } else if (type == "Digits") {
    step.kind = HfPreTokenizerStep::Kind::kDigits;
    step.individual_digits = f.flag(o, "individual_digits", false, "pre_tokenizer");
  } else if (type == "Split") {
    const std::string behavior = f.text(o, "behavior", "pre_tokenizer").value_or("");
    if (behavior != "Isolated") f.unsupported("the Split pre-tokenizer's behavior \"" + behavior + "\"");
    if (f.flag(o, "invert", false, "pre_tokenizer")) f.unsupported("the Split pre-tokenizer with invert");
    auto pattern = f.field(o, "pattern");
    if (!pattern) f.fail("Split pre-tokenizer has no \"pattern\"");
    const object p = f.as_object(*pattern, "pre_tokenizer.pattern");
    if (auto literal = f.text(p, "String", "pre_tokenizer.pattern")) {
      if (literal->empty()) f.unsupported("a Split pre-tokenizer on the empty string");
      step.kind = HfPreTokenizerStep::Kind::kSplitString;
      step.literal = *literal;
    } else if (auto regex = f.text(p, "Regex", "pre_tokenizer.pattern")) {
      if (auto known = recognize_split_pattern(*regex)) {
        step.kind = known->kind == KnownSplitPattern::Kind::kGpt2 ? HfPreTokenizerStep::Kind::kSplitGpt2
                                                                  : HfPreTokenizerStep::Kind::kSplitLlama;
        step.llama = known->llama;
      } else {
        step.kind = HfPreTokenizerStep::Kind::kSplitIcu;
        step.icu = std::make_shared<IcuSplitRegex>(*regex, "tokenizer.json '" + f.path() + "'");
      }
    } else {
      f.fail("the Split pre-tokenizer's pattern is neither {\"String\": ...} nor {\"Regex\": ...}");
    }
  } else {
    f.unsupported("the pre-tokenizer \"" + type + "\"");
  }
  out.push_back(std::move(step));
}

std::size_t utf8_length(std::string_view s) {
  std::size_t n = 0;
  for (std::size_t pos = 0; pos < s.size(); ++n) utf8::decode_next(s, pos);
  return n;
}

// The decoders of a plain-string vocabulary, flattened out of any Sequence.
void read_decoder(const JsonFile& f, element e, std::vector<HfDecoderStep>& out) {
  const object o = f.as_object(e, "decoder");
  const std::string type = f.type_of(o, "decoder");
  HfDecoderStep step{};
  if (type == "Sequence") {
    auto list = f.field(o, "decoders");
    if (!list) f.fail("decoder Sequence has no \"decoders\"");
    for (element d : f.as_array(*list, "decoder.decoders")) read_decoder(f, d, out);
    return;
  }
  if (type == "Replace") {
    step.kind = HfDecoderStep::Kind::kReplace;
    step.pattern = f.string_pattern(o, "the Replace decoder");
    step.content = f.text(o, "content", "decoder").value_or("");
  } else if (type == "ByteFallback") {
    step.kind = HfDecoderStep::Kind::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = HfDecoderStep::Kind::kFuse;
  } else if (type == "Strip") {
    step.kind = HfDecoderStep::Kind::kStrip;
    step.content = f.text(o, "content", "decoder").value_or(" ");
    if (utf8_length(step.content) != 1) f.fail("the Strip decoder's content is not one character");
    step.start = f.count(o, "start", "decoder");
    step.stop = f.count(o, "stop", "decoder");
  } else if (type == "Metaspace") {
    step.kind = HfDecoderStep::Kind::kMetaspace;
    step.content = f.text(o, "replacement", "decoder").value_or("\u2581");
    const std::string scheme = f.text(o, "prepend_scheme", "decoder")
                                   .value_or(f.flag(o, "add_prefix_space", true, "decoder") ? "always" : "never");
    step.strip_first = scheme != "never";
  } else {
    f.unsupported("the decoder \"" + type + "\" for a vocabulary that is not byte-level");
  }
  out.push_back(std::move(step));
}

// The ids of a post-processor's template for one sequence: prefix $A suffix.
void read_post_processor(const JsonFile& f, element e, std::vector<TokenId>& prefix, std::vector<TokenId>& suffix) {
  const object o = f.as_object(e, "post_processor");
  const std::string type = f.type_of(o, "post_processor");
  if (type == "Sequence") {
    auto list = f.field(o, "processors");
    if (!list) f.fail("post_processor Sequence has no \"processors\"");
    for (element p : f.as_array(*list, "post_processor.processors")) read_post_processor(f, p, prefix, suffix);
    return;
  }
  if (type == "ByteLevel") return;  // only adjusts offsets
  std::vector<TokenId> before, after;
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    // ["[CLS]", 101]: the single-sequence template is CLS $A SEP.
    auto pair_id = [&](const char* key) {
      auto p = f.field(o, key);
      if (!p) f.fail(type + " has no \"" + key + "\"");
      array a = f.as_array(*p, std::string("post_processor.") + key);
      if (a.size() != 2) f.fail(std::string("post_processor.") + key + " is not [token, id]");
      return f.id(a.at(1).value(), std::string("post_processor.") + key);
    };
    before.push_back(pair_id("cls"));
    after.push_back(pair_id("sep"));
  } else if (type == "TemplateProcessing") {
    auto single = f.field(o, "single");
    if (!single) f.fail("TemplateProcessing has no \"single\"");
    std::unordered_map<std::string, std::vector<TokenId>> specials;
    if (auto s = f.field(o, "special_tokens")) {
      for (auto [name, value] : f.as_object(*s, "post_processor.special_tokens")) {
        const object v = f.as_object(value, "post_processor.special_tokens");
        auto ids = f.field(v, "ids");
        if (!ids) f.fail("post_processor.special_tokens entry has no \"ids\"");
        std::vector<TokenId>& list = specials[std::string(name)];
        for (element i : f.as_array(*ids, "post_processor.special_tokens.ids")) list.push_back(f.id(i, "special token id"));
      }
    }
    bool seen_sequence = false;
    for (element item : f.as_array(*single, "post_processor.single")) {
      const object it = f.as_object(item, "post_processor.single item");
      if (auto seq = f.field(it, "Sequence")) {
        const std::string which = f.text(f.as_object(*seq, "Sequence"), "id", "Sequence").value_or("A");
        if (which != "A") f.unsupported("a single-sequence template naming sequence " + which);
        seen_sequence = true;
      } else if (auto tok = f.field(it, "SpecialToken")) {
        const std::string name = f.text(f.as_object(*tok, "SpecialToken"), "id", "SpecialToken").value_or("");
        auto found = specials.find(name);
        if (found == specials.end()) f.fail("template token \"" + name + "\" is not in special_tokens");
        auto& side = seen_sequence ? after : before;
        side.insert(side.end(), found->second.begin(), found->second.end());
      } else {
        f.fail("post_processor.single has an item that is neither Sequence nor SpecialToken");
      }
    }
  } else {
    f.unsupported("the post-processor \"" + type + "\"");
  }
  prefix.insert(prefix.begin(), before.begin(), before.end());
  suffix.insert(suffix.end(), after.begin(), after.end());
}

// eos_token and friends: a string, an AddedToken object {"content": ...}, or null.
std::optional<std::string> special_token_name(const JsonFile& f, object o, const char* key) {
  auto e = f.field(o, key);
  if (!e) return std::nullopt;
  std::string_view s;
  if (!e->get_string().get(s)) return std::string(s);
  object t;
  if (!e->get_object().get(t)) return f.text(t, "content", key);
  f.fail(std::string(key) + " is neither a string nor a token object");
}

}  // namespace

std::unique_ptr<HuggingFaceTokenizer> HuggingFaceTokenizer::load(const std::string& path) {
  namespace fs = std::filesystem;
  auto t = std::make_shared<Tables>();
  t->path = path;
  std::error_code ec;
  const bool is_dir = fs::is_directory(path, ec);
  t->tokenizer_json = is_dir ? (fs::path(path) / "tokenizer.json").string() : path;
  const fs::path dir = is_dir ? fs::path(path) : fs::path(path).parent_path();
  if (is_dir && !fs::exists(t->tokenizer_json, ec)) {
    const bool slow = fs::exists(dir / "vocab.json", ec) || fs::exists(dir / "tokenizer.model", ec);
    throw Error("HuggingFaceTokenizer: '" + path + "' has no tokenizer.json" +
                (slow ? " (only the files of a slow tokenizer; save it with a fast tokenizer first)" : ""));
  }
  const JsonFile f(t->tokenizer_json, "tokenizer.json");
  const object root = f.as_object(f.root(), "the document");

  // Model.
  auto model_e = f.field(root, "model");
  if (!model_e) f.fail("no \"model\"");
  const object model = f.as_object(*model_e, "model");
  const std::string model_type = f.text(model, "type", "model").value_or(f.field(model, "merges") ? "BPE" : "");
  if (model_type != "BPE") f.unsupported("the model \"" + model_type + "\"");
  if (auto d = f.field(model, "dropout")) {
    double p = 0;
    if (d->get_double().get(p)) f.fail("model.dropout is not a number");
    if (p != 0.0) f.unsupported("BPE dropout");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (auto s = f.text(model, key, "model"); s && !s->empty()) f.unsupported(std::string("BPE ") + key);
  t->bpe.ignore_merges = f.flag(model, "ignore_merges", false, "model");
  t->bpe.fuse_unk = f.flag(model, "fuse_unk", false, "model");
  const bool byte_fallback = f.flag(model, "byte_fallback", false, "model");

  // Pre-tokenizer and normalizer.
  if (auto n = f.field(root, "normalizer")) read_normalizer(f, *n, t->normalizers);
  if (auto p = f.field(root, "pre_tokenizer")) read_pre_tokenizer(f, *p, t->pre_tokenizer);
  // Without a ByteLevel pre-tokenizer the vocabulary is of plain strings (SentencePiece-derived
  // BPE, as Llama 2's): words start from characters, and the decoder is read.
  t->byte_level = false;
  for (const auto& step : t->pre_tokenizer) t->byte_level |= step.kind == HfPreTokenizerStep::Kind::kByteLevel;
  t->bpe.char_symbols = !t->byte_level;
  if (!t->byte_level)
    if (auto d = f.field(root, "decoder")) read_decoder(f, *d, t->decoder.emplace());

  // Vocabulary: token strings in GPT-2's byte alphabet, or plain strings.
  auto vocab_e = f.field(model, "vocab");
  if (!vocab_e) f.fail("model has no \"vocab\"");
  std::unordered_map<std::string, TokenId> token_id;   // model and added tokens, by string
  std::unordered_map<std::string, TokenId> model_vocab;
  std::string bytes;
  for (auto [key, value] : f.as_object(*vocab_e, "model.vocab")) {
    const TokenId id = f.id(value, "the id of token " + json_quote(key));
    model_vocab[std::string(key)] = id;
    if (static_cast<std::size_t>(id) >= t->id_token.size()) t->id_token.resize(static_cast<std::size_t>(id) + 1);
    t->id_token[static_cast<std::size_t>(id)] = std::string(key);
    if (!t->byte_level) t->bpe.set_token(t->bpe.intern(key), id);
    else if (gpt2::alphabet_to_bytes(key, bytes)) t->bpe.set_token(t->bpe.intern(bytes), id);
  }
  token_id = model_vocab;
  if (auto unk = f.text(model, "unk_token", "model")) {
    auto it = model_vocab.find(*unk);
    if (it == model_vocab.end()) f.fail("unk_token " + json_quote(*unk) + " is not in the vocabulary");
    t->bpe.unk = it->second;
  }
  if (byte_fallback) {
    // A byte without a token of its own becomes <0xHH> where the vocabulary has it.
    char name[8];
    for (int b = 0; b < 256; ++b) {
      const std::uint32_t sym = t->bpe.intern(std::string(1, static_cast<char>(b)));
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      if (t->bpe.token_of(sym) == ByteBpeTables::kNoToken)
        if (auto it = model_vocab.find(name); it != model_vocab.end()) t->bpe.set_token(sym, it->second);
    }
  }

  // Merges: "a b" strings or ["a", "b"] pairs; rank = position.
  auto merges_e = f.field(model, "merges");
  std::uint32_t rank = 0;
  std::string left_bytes, right_bytes;
  if (merges_e) {
    for (element m : f.as_array(*merges_e, "model.merges")) {
      std::string left, right;
      std::string_view line;
      array pair;
      if (!m.get_string().get(line)) {
        const std::size_t space = line.find(' ');
        if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos)
          f.fail("merge " + std::to_string(rank) + " (" + json_quote(line) + ") is not \"a b\"");
        left = line.substr(0, space);
        right = line.substr(space + 1);
      } else if (!m.get_array().get(pair) && pair.size() == 2) {
        left = f.as_string(pair.at(0).value(), "a merge");
        right = f.as_string(pair.at(1).value(), "a merge");
      } else {
        f.fail("merge " + std::to_string(rank) + " is neither \"a b\" nor [\"a\", \"b\"]");
      }
      for (const std::string* part : {&left, &right})
        if (!model_vocab.count(*part))
          f.fail("merge " + std::to_string(rank) + " names " + json_quote(*part) + ", which is not in the vocabulary");
      if (!model_vocab.count(left + right))
        f.fail("merge " + std::to_string(rank) + " makes " + json_quote(left + right) + ", which is not in the vocabulary");
      if (!t->byte_level) {
        left_bytes = left;
        right_bytes = right;
      } else if (!gpt2::alphabet_to_bytes(left, left_bytes) || !gpt2::alphabet_to_bytes(right, right_bytes)) {
        f.fail("merge " + std::to_string(rank) + " has characters outside the byte-level alphabet");
      }
      const std::uint32_t l = t->bpe.intern(left_bytes);
      const std::uint32_t r = t->bpe.intern(right_bytes);
      t->bpe.add_merge(l, r, rank, t->bpe.intern(left_bytes + right_bytes));
      ++rank;
    }
  }
  t->bpe.finish();

  // Added tokens.
  std::optional<TokenId> max_added;
  if (auto added = f.field(root, "added_tokens")) {
    for (element a : f.as_array(*added, "added_tokens")) {
      const object o = f.as_object(a, "an added token");
      HfAddedToken tok;
      auto id = f.field(o, "id");
      if (!id) f.fail("an added token has no \"id\"");
      f.id(*id, "an added token's id");
      tok.content = f.text(o, "content", "added_tokens").value_or("");
      if (tok.content.empty()) f.fail("an added token has no content");
      // AddedVocabulary::add_tokens gives the id, whatever the file says: the model's id for a
      // token of its vocabulary, else the next id after the model's and the added ones.
      if (auto it = token_id.find(tok.content); it != token_id.end()) {
        tok.id = it->second;
      } else {
        const auto model_size = static_cast<TokenId>(model_vocab.size());
        tok.id = (max_added && (*max_added >= model_size || model_size == 0)) ? *max_added + 1 : model_size;
        if (tok.id >= kMaxTokenId) f.fail("too many added tokens");
      }
      max_added = std::max(max_added.value_or(0), tok.id);
      tok.special = f.flag(o, "special", false, "added_tokens");
      tok.normalized = f.flag(o, "normalized", !tok.special, "added_tokens");
      tok.lstrip = f.flag(o, "lstrip", false, "added_tokens");
      tok.rstrip = f.flag(o, "rstrip", false, "added_tokens");
      tok.single_word = f.flag(o, "single_word", false, "added_tokens");
      token_id[tok.content] = tok.id;
      if (static_cast<std::size_t>(tok.id) >= t->id_token.size()) t->id_token.resize(static_cast<std::size_t>(tok.id) + 1);
      t->id_token[static_cast<std::size_t>(tok.id)] = tok.content;
      (tok.normalized ? t->added_normalized : t->added_raw).push_back(std::move(tok));
    }
  }
  t->vocab_size = static_cast<std::int64_t>(token_id.size());
  t->id_is_added.assign(t->id_token.size(), 0);
  for (const auto* list : {&t->added_raw, &t->added_normalized})
    for (const HfAddedToken& a : *list) t->id_is_added[static_cast<std::size_t>(a.id)] = 1;

  if (auto p = f.field(root, "post_processor")) read_post_processor(f, *p, t->prefix, t->suffix);

  // Special tokens: tokenizer_config.json, then special_tokens_map.json over it.
  std::optional<std::string> names[3];  // eos, bos, pad
  const char* keys[3] = {"eos_token", "bos_token", "pad_token"};
  std::string named_in;
  for (const char* file : {"tokenizer_config.json", "special_tokens_map.json"}) {
    const fs::path config = dir / file;
    if (!fs::exists(config, ec)) continue;
    const JsonFile c(config.string(), file);
    const object o = c.as_object(c.root(), "the document");
    for (int k = 0; k < 3; ++k) {
      element e;
      if (o.at_key(keys[k]).get(e)) continue;
      names[k] = special_token_name(c, o, keys[k]);
      if (k == 0) named_in = config.string();
    }
  }
  auto resolve = [&](const std::optional<std::string>& name) -> std::optional<TokenId> {
    if (!name) return std::nullopt;
    if (auto it = token_id.find(*name); it != token_id.end()) return it->second;
    return t->bpe.unk;  // convert_tokens_to_ids gives unk_token_id for an unknown token
  };
  if (!names[0])
    throw Error("HuggingFaceTokenizer '" + path + "': no eos_token in tokenizer_config.json or "
                "special_tokens_map.json beside tokenizer.json; Megatron's end-of-document id is the eos token's");
  const std::optional<TokenId> eos = resolve(names[0]);
  if (!eos) throw Error("HuggingFaceTokenizer: eos_token " + json_quote(*names[0]) + " of '" + named_in + "' is not in the vocabulary");
  t->eos = *eos;
  t->bos = resolve(names[1]);
  t->pad = resolve(names[2]);

  return std::make_unique<HuggingFaceTokenizer>(Private{}, std::move(t));
}

}  // namespace mgt
