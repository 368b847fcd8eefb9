// The unigram encoder's word cache on its own: lookups of short and long words across the
// table's growth, one-piece words kept in their slot, replacement, and the size cap.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tokenizer/sentencepiece_word_cache.hpp"

using namespace mgt;

namespace {

using Piece = SentencePieceWordCache::Piece;

// Word i's made-up pieces: one for even i, three for odd i, ids and scores from i.
std::vector<Piece> pieces_of(int i, int length) {
  if (i % 2 == 0) return {{i, 0, length, -0.5f * static_cast<float>(i)}};
  return {{i, 0, 1, 1.0f}, {i + 1, 1, 2, 2.0f}, {i + 2, 2, length, static_cast<float>(i)}};
}

std::string numbered(std::string prefix, int i) {
  prefix += std::to_string(i);
  return prefix;
}

// Short (up to 8 bytes) and long words, all distinct, some sharing their first 8 bytes.
std::string word_of(int i) {
  return i % 3 == 0 ? numbered("w", i) : numbered("\xE2\x96\x81" "common-prefix-", i);
}

void check_entry(const SentencePieceWordCache& cache, int i, float max_ulp) {
  const std::string w = word_of(i);
  SentencePieceWordCache::Entry entry;
  REQUIRE(cache.find(w, SentencePieceWordCache::key(w), entry) != nullptr);
  CHECK(entry.max_ulp == max_ulp);
  const std::vector<Piece> want = pieces_of(i, static_cast<int>(w.size()));
  REQUIRE(entry.pieces.size() == want.size());
  for (std::size_t p = 0; p < want.size(); ++p) {
    CHECK(entry.pieces[p].id == want[p].id);
    CHECK(entry.pieces[p].begin == want[p].begin);
    CHECK(entry.pieces[p].end == want[p].end);
    CHECK(entry.pieces[p].score == want[p].score);
  }
}

}  // namespace

TEST_CASE("the unigram word cache finds what it holds across growth and replacement", "[tokenizer][sentencepiece]") {
  SentencePieceWordCache cache;
  constexpr int kWords = 20000;  // several doublings of the slot table
  for (int i = 0; i < kWords; ++i) {
    const std::string w = word_of(i);
    const SentencePieceWordCache::Key k = SentencePieceWordCache::key(w);
    SentencePieceWordCache::Entry entry;
    CHECK(cache.find(w, k, entry) == nullptr);
    cache.prefetch_slot(k);
    cache.insert(w, k, 0.25f, pieces_of(i, static_cast<int>(w.size())));
    cache.prefetch_entry(w, k);
  }
  for (int i = 0; i < kWords; i += 7) check_entry(cache, i, 0.25f);
  // A word not inserted, of the same length and first 8 bytes as a cached long one.
  const std::string absent = word_of(kWords + 1);
  SentencePieceWordCache::Entry entry;
  CHECK(cache.find(absent, SentencePieceWordCache::key(absent), entry) == nullptr);
  // Replacing an entry changes it alone.
  const std::string w5 = word_of(5);
  cache.insert(w5, SentencePieceWordCache::key(w5), 0.5f, pieces_of(5, static_cast<int>(w5.size())));
  check_entry(cache, 5, 0.5f);
  check_entry(cache, 4, 0.25f);
  check_entry(cache, 6, 0.25f);
}

TEST_CASE("the unigram word cache stops adding words at its cap", "[tokenizer][sentencepiece]") {
  SentencePieceWordCache cache;
  const auto words = static_cast<int>(SentencePieceWordCache::kMaxWords);
  for (int i = 0; i < words + 10; ++i) {
    const std::string w = numbered("x", i);
    cache.insert(w, SentencePieceWordCache::key(w), 1.0f, {{{i, 0, static_cast<int>(w.size()), 0.0f}}});
  }
  SentencePieceWordCache::Entry entry;
  const std::string last_kept = numbered("x", words - 1);
  const std::string first_dropped = numbered("x", words);
  CHECK(cache.find(last_kept, SentencePieceWordCache::key(last_kept), entry) != nullptr);
  CHECK(cache.find(first_dropped, SentencePieceWordCache::key(first_dropped), entry) == nullptr);
}
