#include "tokenizer/sentencepiece_tokenizer.hpp"

#include <sentencepiece_processor.h>

#include <filesystem>
#include <system_error>
#include <unordered_map>

#include "core/error.hpp"
#include "tokenizer/sentencepiece_bpe_encoder.hpp"
#include "tokenizer/sentencepiece_model_proto.hpp"
#include "tokenizer/sentencepiece_unigram_encoder.hpp"

namespace mgt {

struct SentencePieceTokenizer::Tables {
  std::string path;
  Kind kind = Kind::kSentencePiece;
  int vocab_extra_ids = 0;
  sentencepiece::SentencePieceProcessor sp;  // Encode and Decode are const and thread-safe
  std::int64_t vocab_size = 0;
  TokenId eod = 0;
  std::optional<TokenId> bos, pad;
  // kSentencePiece: the special tokens in Megatron's insertion order, which breaks ties
  // between tokens found at the same position.
  std::vector<std::pair<std::string, TokenId>> special;
  std::unordered_map<TokenId, std::string> special_of_id;
  // mgt's own encoder (BPE or unigram) when the model's settings are ones it reproduces; both
  // null send every text to the library.
  std::shared_ptr<const SentencePieceBpeTables> bpe;
  std::shared_ptr<const SentencePieceUnigramTables> unigram;
  std::string own_refused;  // why both are null
};

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw Error("SentencePiece model '" + path + "': " + why);
}

}  // namespace

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::load(const std::string& model_file, Kind kind,
                                                                     int vocab_extra_ids, bool use_own_encoder) {
  auto t = std::make_shared<Tables>();
  t->path = model_file;
  t->kind = kind;
  t->vocab_extra_ids = vocab_extra_ids;
  // The library reads a directory (an HF model's, a common slip) with a stream that throws a bare
  // "basic_filebuf::underflow" naming neither: refused here instead, and anything it throws is
  // said with the path.
  if (std::error_code ec; std::filesystem::is_directory(model_file, ec))
    fail(model_file, "is a directory, not a model file (--tokenizer-model names the .model file)");
  try {
    if (const auto status = t->sp.Load(model_file); !status.ok()) fail(model_file, status.ToString());
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(model_file, e.what());
  }
  if (use_own_encoder) {
    const SentencePieceModelProto proto = SentencePieceModelProto::parse(t->sp.serialized_model_proto());
    if (proto.model_type == 1) t->unigram = SentencePieceUnigramTables::build(proto, &t->own_refused);
    else t->bpe = SentencePieceBpeTables::build(proto, &t->own_refused);
  } else {
    t->own_refused = "disabled by the caller";
  }
  const int pieces = t->sp.GetPieceSize();
  auto piece_or = [&](int id, const char* fallback) {
    return id >= 0 && id < pieces ? t->sp.IdToPiece(id) : std::string(fallback);
  };

  if (kind == Kind::kSentencePiece) {
    // _SentencePieceTokenizer._initalize: vocab = pieces, then each special token appended
    // when it is not a piece already.
    std::unordered_map<std::string, TokenId> vocab;
    for (int i = 0; i < pieces; ++i) vocab.emplace(t->sp.IdToPiece(i), i);
    auto add = [&](const std::string& token) {
      auto [it, inserted] = vocab.emplace(token, static_cast<TokenId>(vocab.size()));
      for (const auto& [name, id] : t->special)
        if (name == token) return it->second;
      t->special.emplace_back(token, it->second);
      t->special_of_id.emplace(it->second, token);
      return it->second;
    };
    add("<CLS>");
    add("<SEP>");
    t->eod = add("<EOD>");
    add("<MASK>");
    t->pad = add(piece_or(t->sp.pad_id(), "<PAD>"));
    t->bos = add(piece_or(t->sp.bos_id(), "<BOS>"));
    add(piece_or(t->sp.eos_id(), "<EOS>"));
    for (int i = 0; i < vocab_extra_ids; ++i) add("<extra_id_" + std::to_string(i) + ">");
    t->vocab_size = static_cast<std::int64_t>(vocab.size());
  } else {
    t->vocab_size = pieces;
    const int eos = t->sp.eos_id();
    if (eos < 0 || eos >= pieces)
      fail(model_file, "has no eos piece, whose id Megatron's " +
                           std::string(kind == Kind::kGpt ? "GPTSentencePieceTokenizer" : "Llama2Tokenizer") +
                           " uses as the end-of-document id");
    t->eod = eos;
    const int bos = t->sp.bos_id();
    if (bos >= 0 && bos < pieces) t->bos = bos;
    else if (kind == Kind::kLlama2) fail(model_file, "has no bos piece, which Llama2Tokenizer puts before every text");
    const int pad = t->sp.pad_id();
    if (pad >= 0 && pad < pieces) t->pad = pad;
  }
  return std::make_unique<SentencePieceTokenizer>(Private{}, std::move(t));
}

SentencePieceTokenizer::SentencePieceTokenizer(Private, std::shared_ptr<const Tables> tables)
    : tables_(std::move(tables)) {
  if (tables_->bpe) bpe_ = std::make_unique<SentencePieceBpeEncoder>(tables_->bpe);
  if (tables_->unigram) unigram_ = std::make_unique<SentencePieceUnigramEncoder>(tables_->unigram);
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::unique_ptr<Tokenizer> SentencePieceTokenizer::clone() const {
  return std::make_unique<SentencePieceTokenizer>(Private{}, tables_);
}

void SentencePieceTokenizer::tokenize(std::string_view text, std::vector<TokenId>& out) {
  const Tables& t = *tables_;
  std::vector<int> ids;
  auto encode = [&](std::string_view part) {
    if (part.empty()) return;
    if (bpe_ && bpe_->encode(part, out)) return;
    if (unigram_ && unigram_->encode(part, out)) return;
    ids.clear();
    if (const auto status = t.sp.Encode(part, &ids); !status.ok())
      throw Error("SentencePiece '" + t.path + "': " + status.ToString());
    out.insert(out.end(), ids.begin(), ids.end());
  };
  if (t.kind == Kind::kLlama2) out.push_back(*t.bos);
  if (t.kind != Kind::kSentencePiece) {
    encode(text);
    return;
  }
  // The earliest special token in the rest of the text (the first listed on a tie), the text
  // before it encoded, repeatedly.
  std::size_t idx = 0;
  while (true) {
    std::size_t best = std::string_view::npos;
    const std::pair<std::string, TokenId>* found = nullptr;
    for (const auto& special : t.special) {
      const std::size_t at = text.find(special.first, idx);
      if (at < best) {
        best = at;
        found = &special;
      }
    }
    if (!found) break;
    encode(text.substr(idx, best - idx));
    out.push_back(found->second);
    idx = best + found->first.size();
  }
  encode(text.substr(idx));
}

bool SentencePieceTokenizer::uses_own_encoder(std::string* why_not) const {
  if (why_not) *why_not = tables_->own_refused;
  return bpe_ != nullptr || unigram_ != nullptr;
}

std::string SentencePieceTokenizer::detokenize(std::span<const TokenId> ids) const {
  const Tables& t = *tables_;
  auto decode = [&](std::span<const TokenId> part) {
    std::string text;
    const std::vector<int> v(part.begin(), part.end());
    for (int id : v)
      if (id < 0 || id >= t.sp.GetPieceSize())
        throw Error("SentencePiece tokenizer: token id " + std::to_string(id) + " is not in the vocabulary of '" +
                    t.path + "'");
    if (const auto status = t.sp.Decode(v, &text); !status.ok())
      throw Error("SentencePiece '" + t.path + "': " + status.ToString());
    return text;
  };
  if (t.kind != Kind::kSentencePiece) return decode(ids);
  std::string text;
  std::size_t last = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    auto it = t.special_of_id.find(ids[i]);
    if (it == t.special_of_id.end()) continue;
    text += decode(ids.subspan(last, i - last)) + " " + it->second + " ";
    last = i + 1;
  }
  return text + decode(ids.subspan(last));
}

std::int64_t SentencePieceTokenizer::vocab_size() const { return tables_->vocab_size; }
TokenId SentencePieceTokenizer::eod() const { return tables_->eod; }
std::optional<TokenId> SentencePieceTokenizer::pad() const { return tables_->pad; }
std::optional<TokenId> SentencePieceTokenizer::bos() const { return tables_->bos; }

std::string SentencePieceTokenizer::class_name() const {
  switch (tables_->kind) {
    case Kind::kSentencePiece: return "_SentencePieceTokenizer";
    case Kind::kGpt: return "_GPTSentencePieceTokenizer";
    case Kind::kLlama2: return "_Llama2Tokenizer";
  }
  return "";
}

std::vector<std::string> SentencePieceTokenizer::tokenizer_paths() const { return {tables_->path}; }

// MegatronLegacyTokenizer(model_file, vocab_extra_ids=...): the GPT and Llama 2 variants pass 0.
std::vector<std::pair<std::string, std::string>> SentencePieceTokenizer::tokenizer_options() const {
  return {{"vocab_extra_ids", std::to_string(tables_->vocab_extra_ids)}};
}

}  // namespace mgt
