#include "tokenizer/sentencepiece_unigram_encoder.hpp"

#include <algorithm>
#include <cfloat>
#include <cstdio>

#include "tokenizer/utf8_validation.hpp"

namespace mgt {

namespace {

using PieceType = SentencePieceModelProto::PieceType;

// unigram_model.cc kUnkPenalty.
constexpr float kUnkPenalty = 10.0f;

std::size_t hash_edge(std::uint64_t key) { return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 20); }

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
  std::fill(std::begin(t->root_), std::end(t->root_), kNone);
  std::size_t bytes = 0;
  for (const auto& p : model.pieces) bytes += p.text.size();
  std::size_t capacity = 64;
  while (capacity < 2 * bytes) capacity *= 2;
  t->edges_.resize(capacity);
  t->nodes.emplace_back();  // the root
  float min_score = FLT_MAX;
  bool has_unk = false;
  std::fill(std::begin(t->byte_ids), std::end(t->byte_ids), kNone);
  for (std::size_t i = 0; i < model.pieces.size(); ++i) {
    const auto& p = model.pieces[i];
    const auto id = static_cast<TokenId>(i);
    switch (p.type) {
      case PieceType::kNormal: min_score = std::min(min_score, p.score); break;
      case PieceType::kUnknown:
        t->unk_id = id;
        has_unk = true;
        continue;
      case PieceType::kByte: {
        unsigned value = 0;
        if (p.text.size() == 6 && std::sscanf(p.text.c_str(), "<0x%2X>", &value) == 1 && value < 256)
          t->byte_ids[value] = id;
        continue;
      }
      case PieceType::kUnused: break;
      default: continue;  // control pieces are never matched in text
    }
    if (p.text.empty()) continue;
    std::int32_t node = 0;
    for (char c : p.text) node = t->add_child(node, static_cast<unsigned char>(c));
    // The library's trie is built from the first piece of each text (duplicates are an error).
    if (t->nodes[static_cast<std::size_t>(node)].id == kNone && p.type == PieceType::kNormal)
      t->nodes[static_cast<std::size_t>(node)] = {id, p.score};
  }
  if (!has_unk) return refuse("no unknown piece");
  t->byte_fallback = model.byte_fallback;
  if (t->byte_fallback)
    for (TokenId& b : t->byte_ids)
      if (b == kNone) return refuse("byte fallback without every byte piece");
  t->unk_score = min_score - kUnkPenalty;
  return t;
}

std::int32_t SentencePieceUnigramTables::add_child(std::int32_t node, unsigned char c) {
  if (node == 0 && root_[c] != kNone) return root_[c];
  const std::uint64_t key = ((static_cast<std::uint64_t>(node) << 8) | c) + 1;
  const std::size_t mask = edges_.size() - 1;
  std::size_t i = hash_edge(key) & mask;
  for (; edges_[i].key != 0; i = (i + 1) & mask)
    if (edges_[i].key == key) return edges_[i].child;
  const auto child = static_cast<std::int32_t>(nodes.size());
  nodes.emplace_back();
  if (node == 0) {
    root_[c] = child;
  } else {
    edges_[i] = {key, child};
    ++edge_count_;
  }
  return child;
}

std::int32_t SentencePieceUnigramTables::child(std::int32_t node, unsigned char c) const {
  if (node == 0) return root_[c];
  const std::uint64_t key = ((static_cast<std::uint64_t>(node) << 8) | c) + 1;
  const std::size_t mask = edges_.size() - 1;
  for (std::size_t i = hash_edge(key) & mask;; i = (i + 1) & mask) {
    const Edge& e = edges_[i];
    if (e.key == key) return e.child;
    if (e.key == 0) return kNone;
  }
}

bool SentencePieceUnigramEncoder::encode(std::string_view text, std::vector<TokenId>& out) {
  if (text.size() > (std::size_t{1} << 30)) return false;
  const SentencePieceUnigramTables& t = *tables_;
  if (!t.normalizer->normalize(text, normalized_)) return false;
  const std::string_view s = normalized_;
  const auto size = static_cast<std::int32_t>(s.size());
  if (size == 0) return true;
  // EncodeOptimized: best_[e] is the best path over s[0, e), scores summed in float; once a score
  // leaves ±100000 the scores from here to the furthest end reached are shifted back to 0 (the
  // package's kScoreResetThreshold, which keeps long texts' sums precise).
  best_.assign(static_cast<std::size_t>(size) + 1, Best{});
  constexpr float kScoreResetThreshold = 100000.0f;
  std::int32_t frontier = 0;
  auto offer = [&](std::int32_t end, float candidate, std::int32_t start, TokenId id) {
    Best& target = best_[static_cast<std::size_t>(end)];
    frontier = std::max(frontier, end);
    if (target.starts_at == -1 || candidate > target.score) {
      target.score = candidate;
      target.starts_at = start;
      target.id = id;
    }
  };
  for (std::int32_t start = 0; start < size;) {
    float till_here = best_[static_cast<std::size_t>(start)].score;
    if (till_here < -kScoreResetThreshold || till_here > kScoreResetThreshold) {
      const float offset = till_here;
      for (std::int32_t i = start; i <= frontier; ++i)
        if (i == start || best_[static_cast<std::size_t>(i)].starts_at != -1) best_[static_cast<std::size_t>(i)].score -= offset;
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
      offer(end, piece.score + till_here, start, piece.id);
      if (end - start == mblen) has_single_node = true;
    }
    if (!has_single_node) offer(start + mblen, t.unk_score + till_here, start, t.unk_id);
    start += mblen;
  }
  // Back from the end, then forward into `out`; the library reports a run of unknown pieces as
  // one (with byte fallback, as the bytes of the run).
  path_.clear();
  for (std::int32_t end = size; end > 0; end = best_[static_cast<std::size_t>(end)].starts_at) path_.push_back(end);
  bool previous_unknown = false;
  for (auto it = path_.rbegin(); it != path_.rend(); ++it) {
    const Best& b = best_[static_cast<std::size_t>(*it)];
    const bool unknown = b.id == t.unk_id;
    if (unknown && previous_unknown && !t.byte_fallback) continue;
    previous_unknown = unknown;
    if (unknown && t.byte_fallback) {
      for (std::int32_t i = b.starts_at; i < *it; ++i)
        out.push_back(t.byte_ids[static_cast<unsigned char>(s[static_cast<std::size_t>(i)])]);
    } else {
      out.push_back(b.id);
    }
  }
  return true;
}

}  // namespace mgt
