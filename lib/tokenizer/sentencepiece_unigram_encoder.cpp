#include "tokenizer/sentencepiece_unigram_encoder.hpp"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <limits>

#include "tokenizer/utf8_validation.hpp"

namespace mgt {

namespace {

using PieceType = SentencePieceModelProto::PieceType;

// unigram_model.cc kUnkPenalty and kScoreResetThreshold.
constexpr float kUnkPenalty = 10.0f;
constexpr float kScoreResetThreshold = 100000.0f;
constexpr std::string_view kSpace = kSentencePieceSpace;

// The spacing of floats at x >= 1, 2^(exponent - 23), from x's bits (std::ilogb and std::ldexp
// were calls into libm, once per word).
float float_spacing(float x) {
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(x) & 0x7F800000u) - (23u << 23));
}

}  // namespace

std::shared_ptr<const SentencePieceUnigramTables> SentencePieceUnigramTables::build(
    const SentencePieceModelProto& model, std::string* why_not) {
  auto refuse = [&](const std::string& why) {
    if (why_not) *why_not = why;
    return nullptr;
  };
  if (model.model_type != 1) return refuse("not a unigram model");
  auto t = std::make_shared<SentencePieceUnigramTables>();
  t->normalizer = SentencePieceNormalizer::build(model, why_not);
  if (!t->normalizer) return nullptr;
  // The pieces the library's trie holds (normal and unused ones; control, unknown and byte
  // pieces are never matched in text), sorted, so that a breadth-first walk numbers the nodes.
  std::vector<std::pair<std::string_view, std::size_t>> keys;
  float min_score = FLT_MAX;
  float max_abs_normal = 0.0f;
  bool has_unk = false;
  std::fill(std::begin(t->byte_ids), std::end(t->byte_ids), kNone);
  for (std::size_t i = 0; i < model.pieces.size(); ++i) {
    const auto& p = model.pieces[i];
    const auto id = static_cast<TokenId>(i);
    if (p.type == PieceType::kNormal) {
      min_score = std::min(min_score, p.score);
      max_abs_normal = std::max(max_abs_normal, std::fabs(p.score));
    }
    if (p.type == PieceType::kUnknown) {
      t->unk_id = id;
      has_unk = true;
    } else if (p.type == PieceType::kByte) {
      unsigned value = 0;
      if (p.text.size() == 6 && std::sscanf(p.text.c_str(), "<0x%2X>", &value) == 1 && value < 256)
        t->byte_ids[value] = id;
    }
    if ((p.type == PieceType::kNormal || p.type == PieceType::kUnused) && !p.text.empty()) {
      keys.emplace_back(p.text, i);
      if (!sentencepiece_space_only_leading(p.text)) t->words_are_independent = false;
    }
  }
  if (!has_unk) return refuse("no unknown piece");
  t->byte_fallback = model.byte_fallback;
  if (t->byte_fallback)
    for (TokenId& b : t->byte_ids)
      if (b == kNone) return refuse("byte fallback without every byte piece");
  t->unk_score = min_score - kUnkPenalty;
  t->max_abs_score = std::max(max_abs_normal, std::fabs(t->unk_score));
  // The library's trie keeps the first piece of each text (duplicates are an error there).
  std::stable_sort(keys.begin(), keys.end(), [](const auto& a, const auto& b) { return a.first < b.first; });

  // Breadth first: a level's nodes are the distinct prefixes of one more byte, in sorted order,
  // each the child of the node of its prefix. `level` holds, per node of the current depth, the
  // range of keys under it.
  struct Range {
    std::size_t begin, end;
    std::int32_t node;
  };
  std::vector<Range> level = {{0, keys.size(), 0}};
  t->nodes.emplace_back();
  t->child_begin_.push_back(0);
  std::fill(std::begin(t->root_), std::end(t->root_), kNone);
  for (std::size_t depth = 0; !level.empty(); ++depth) {
    std::vector<Range> next;
    for (const Range& r : level) {
      // child_begin_[node] must be set in node order, which breadth first guarantees.
      t->child_begin_.resize(static_cast<std::size_t>(r.node) + 1, static_cast<std::uint32_t>(t->child_bytes_.size()));
      t->child_begin_[static_cast<std::size_t>(r.node)] = static_cast<std::uint32_t>(t->child_bytes_.size());
      std::size_t k = r.begin;
      while (k < r.end && keys[k].first.size() == depth) ++k;  // the key ending here (set below)
      while (k < r.end) {
        const auto c = static_cast<unsigned char>(keys[k].first[depth]);
        std::size_t e = k;
        while (e < r.end && static_cast<unsigned char>(keys[e].first[depth]) == c) ++e;
        const auto child = static_cast<std::int32_t>(t->child_bytes_.size()) + 1;
        t->child_bytes_.push_back(c);
        t->nodes.emplace_back();
        if (r.node == 0) t->root_[c] = child;
        // The key that ends at the child (sorted first among those under it).
        const auto& [text, index] = keys[k];
        if (text.size() == depth + 1 && model.pieces[index].type == PieceType::kNormal)
          t->nodes[static_cast<std::size_t>(child)] = {static_cast<TokenId>(index), model.pieces[index].score};
        next.push_back({k, e, child});
        k = e;
      }
    }
    level = std::move(next);
  }
  t->child_begin_.resize(t->nodes.size() + 1, static_cast<std::uint32_t>(t->child_bytes_.size()));
  return t;
}

float SentencePieceUnigramEncoder::viterbi(std::string_view s, std::int32_t offset, float base, float* min_gap) {
  const SentencePieceUnigramTables& t = *tables_;
  const auto size = static_cast<std::int32_t>(s.size());
  // EncodeOptimized: best_[e] is the best path over s[0, e), scores summed in float; once a score
  // leaves ±100000 the scores from here to the furthest end reached are shifted back to 0 (the
  // package's kScoreResetThreshold, which keeps long texts' sums precise).
  best_.assign(static_cast<std::size_t>(size) + 1, Best{});
  best_[0].score = base;
  std::int32_t frontier = 0;
  auto offer = [&](std::int32_t end, float piece_score, float candidate, std::int32_t start, TokenId id) {
    Best& target = best_[static_cast<std::size_t>(end)];
    frontier = std::max(frontier, end);
    if (target.starts_at == -1 || candidate > target.score) {
      if (target.starts_at != -1) target.runner_up = target.score;
      target.score = candidate;
      target.piece_score = piece_score;
      target.starts_at = start;
      target.id = id;
    } else {
      target.runner_up = std::max(target.runner_up, candidate);
    }
  };
  for (std::int32_t start = 0; start < size;) {
    float till_here = best_[static_cast<std::size_t>(start)].score;
    if (till_here < -kScoreResetThreshold || till_here > kScoreResetThreshold) {
      const float shift = till_here;
      for (std::int32_t i = start; i <= frontier; ++i)
        if (i == start || best_[static_cast<std::size_t>(i)].starts_at != -1) best_[static_cast<std::size_t>(i)].score -= shift;
      till_here = 0.0f;
    }
    const auto mblen = std::min<std::int32_t>(
        static_cast<std::int32_t>(utf8_char_length(static_cast<unsigned char>(s[static_cast<std::size_t>(start)]))),
        size - start);
    bool has_single_node = false;
    std::int32_t node = 0;
    for (std::int32_t end = start; end < size;) {
      node = t.child(node, static_cast<unsigned char>(s[static_cast<std::size_t>(end)]));
      if (node == SentencePieceUnigramTables::kNone) break;
      ++end;
      const SentencePieceUnigramTables::NodePiece& piece = t.nodes[static_cast<std::size_t>(node)];
      if (piece.id == SentencePieceUnigramTables::kNone) continue;
      offer(end, piece.score, piece.score + till_here, start, piece.id);
      if (end - start == mblen) has_single_node = true;
    }
    if (!has_single_node) offer(start + mblen, t.unk_score, t.unk_score + till_here, start, t.unk_id);
    start += mblen;
  }
  if (min_gap) {
    *min_gap = std::numeric_limits<float>::infinity();
    for (std::int32_t e = 1; e <= size; ++e) {
      const Best& b = best_[static_cast<std::size_t>(e)];
      if (b.starts_at != -1) *min_gap = std::min(*min_gap, b.score - b.runner_up);
    }
  }
  // Back from the end: the pieces in order, appended to pieces_.
  const std::size_t first = pieces_.size();
  for (std::int32_t end = size; end > 0; end = best_[static_cast<std::size_t>(end)].starts_at) {
    const Best& b = best_[static_cast<std::size_t>(end)];
    pieces_.push_back({b.id, offset + b.starts_at, offset + end, b.piece_score});
  }
  std::reverse(pieces_.begin() + static_cast<std::ptrdiff_t>(first), pieces_.end());
  return best_[static_cast<std::size_t>(size)].score;
}

void SentencePieceUnigramEncoder::encode_word(std::string_view word, std::int32_t offset, float& base,
                                              const SentencePieceWordCache::Key* key) {
  const SentencePieceUnigramTables& t = *tables_;
  // The score is reset where a word starts past the threshold: to exactly 0.
  if (base < -kScoreResetThreshold || base > kScoreResetThreshold) base = 0.0f;
  // Every score inside the word is at most (bytes + 1) pieces from the base, each piece scoring
  // within ±max_abs_score, so below the threshold nothing resets there, and each float sum
  // rounds by at most half the ulp of `magnitude`.
  const float magnitude = std::fabs(base) + static_cast<float>(word.size() + 1) * t.max_abs_score;
  const bool cacheable = key != nullptr && magnitude + 1.0f < kScoreResetThreshold;
  const float ulp = float_spacing(std::max(magnitude, 1.0f));
  if (cacheable) {
    SentencePieceWordCache::Entry entry;
    if (cache_.find(word, *key, entry) && ulp < entry.max_ulp) {
      for (const SentencePieceWordCache::Piece& p : entry.pieces) {
        pieces_.push_back({p.id, offset + p.begin, offset + p.end, p.score});
        base = p.score + base;  // the float sums the full pass makes along the path
      }
      return;
    }
  }
  float min_gap = 0.0f;
  const std::size_t first = pieces_.size();
  base = viterbi(word, offset, base, cacheable ? &min_gap : nullptr);
  if (!cacheable) return;
  // A value inside the word is at most k = bytes + 1 sums from the base, each off by at most
  // ulp / 2 here: the margins measured now are within k x ulp of the exact ones. Another base
  // whose ulp is u makes the same decisions while k x (ulp + u) stays below the smallest margin.
  const float k = static_cast<float>(word.size() + 1);
  const float max_ulp = min_gap / k - ulp;
  if (!(max_ulp > 0.0f)) return;  // a tie, or too close to one: always computed
  word_pieces_.clear();
  for (std::size_t i = first; i < pieces_.size(); ++i) {
    const Piece& p = pieces_[i];
    word_pieces_.push_back({p.id, p.begin - offset, p.end - offset, p.score});
  }
  cache_.insert(word, *key, max_ulp, word_pieces_);
}

void SentencePieceUnigramEncoder::encode_words(std::string_view s) {
  // Every path passes the start of each run of U+2581 (no piece spans one): the text is encoded
  // word by word, each word from the score the whole pass would have there. The words start at
  // the runs' first U+2581, which the normalizer listed.
  word_starts_.assign(1, 0);
  std::int32_t previous = -3;
  for (const std::int32_t at : spaces_) {
    if (at >= 1 && at != previous + 3) word_starts_.push_back(at);
    previous = at;
  }
  word_starts_.push_back(static_cast<std::int32_t>(s.size()));
  const std::size_t words = word_starts_.size() - 1;
  const auto word = [&](std::size_t j) {
    return s.substr(static_cast<std::size_t>(word_starts_[j]),
                    static_cast<std::size_t>(word_starts_[j + 1] - word_starts_[j]));
  };
  const auto cached_length = [](std::string_view w) { return w.size() <= SentencePieceWordCache::kMaxWordBytes; };
  word_keys_.resize(words);
  for (std::size_t j = 0; j < words; ++j)
    if (const std::string_view w = word(j); cached_length(w)) word_keys_[j] = SentencePieceWordCache::key(w);
  // The cache's slots eight words ahead, each word's entry three words ahead (its slot has
  // arrived by then): the misses of rarer words overlap.
  constexpr std::size_t kSlotsAhead = 8;
  constexpr std::size_t kEntriesAhead = 3;
  for (std::size_t j = 0; j < std::min(words, kSlotsAhead); ++j)
    if (cached_length(word(j))) cache_.prefetch_slot(word_keys_[j]);
  float base = 0.0f;
  for (std::size_t j = 0; j < words; ++j) {
    if (j + kSlotsAhead < words && cached_length(word(j + kSlotsAhead))) cache_.prefetch_slot(word_keys_[j + kSlotsAhead]);
    if (j + kEntriesAhead < words && cached_length(word(j + kEntriesAhead)))
      cache_.prefetch_entry(word(j + kEntriesAhead), word_keys_[j + kEntriesAhead]);
    const std::string_view w = word(j);
    encode_word(w, word_starts_[j], base, cached_length(w) ? &word_keys_[j] : nullptr);
  }
}

bool SentencePieceUnigramEncoder::encode(std::string_view text, std::vector<TokenId>& out) {
  if (text.size() > (std::size_t{1} << 30)) return false;
  const SentencePieceUnigramTables& t = *tables_;
  if (!t.normalizer->normalize(text, normalized_, t.words_are_independent ? &spaces_ : nullptr)) return false;
  const std::string_view s = normalized_;
  if (s.empty()) return true;
  pieces_.clear();
  if (t.words_are_independent) {
    encode_words(s);
  } else {
    viterbi(s, 0, 0.0f, nullptr);
  }
  // The library reports a run of unknown pieces as one (with byte fallback, as the run's bytes).
  bool previous_unknown = false;
  for (const Piece& p : pieces_) {
    const bool unknown = p.id == t.unk_id;
    if (unknown && previous_unknown && !t.byte_fallback) continue;
    previous_unknown = unknown;
    if (unknown && t.byte_fallback) {
      for (std::int32_t i = p.begin; i < p.end; ++i) out.push_back(t.byte_ids[static_cast<unsigned char>(s[static_cast<std::size_t>(i)])]);
    } else {
      out.push_back(p.id);
    }
  }
  return true;
}

}  // namespace mgt
