// Helpers shared by the tokenization tests: a cheap tokenizer configuration, directory
// listings and gzip-compressed fixtures.
#pragma once
#include <zlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <set>
#include <string>

#include "data/tokenize_job.hpp"

namespace mgt::test {

// NullTokenizer (Megatron v0.13): the text is the ids; eod = vocab size = 100.
inline TokenizeOptions null_options(const std::string& input, const std::string& prefix) {
  TokenizeOptions o;
  o.inputs = {input};
  o.output_prefix = prefix;
  o.tokenizer.type = "NullTokenizer";
  o.tokenizer.vocab_size = 100;
  o.quiet = true;
  o.workers = 2;
  return o;
}

// Names of the entries of a directory, to check that a run left nothing (or only its outputs).
inline std::set<std::string> files_in(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

// `text` as a gzip file's bytes.
inline std::string gzip_bytes(const std::string& text) {
  z_stream zs{};
  REQUIRE(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&zs, text.size()) + 64, '\0');
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  zs.avail_in = static_cast<uInt>(text.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

}  // namespace mgt::test
