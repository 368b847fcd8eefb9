// Prompts as JSON lines, one object per line with a string field "prompt" (other fields are
// ignored; blank lines are skipped), from files or standard input ("-"), read in batches so that
// a long prompt file streams through a run.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/input_stream.hpp"
#include "data/json_document.hpp"

namespace mgt {

class PromptReader {
public:
  explicit PromptReader(const std::string& path);  // "-": standard input

  // Up to `count` more prompts; empty at the end. Throws mgt::Error "FILE:LINE: ..." for a line
  // that is not a JSON object with a string "prompt".
  std::vector<std::string> next_batch(int64_t count);
  // "FILE:LINE" of prompt `index` (from 0) of the last batch.
  const std::string& where(size_t index) const { return where_.at(index); }
  int64_t prompts_read() const { return read_; }

private:
  InputLines lines_;
  JsonDocumentParser parser_;
  int64_t read_ = 0;
  std::vector<std::string> where_;  // of the last batch's prompts
};

}  // namespace mgt
