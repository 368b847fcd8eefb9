// Shared pieces of the trainer tests: a small synthetic dataset whose next token follows from
// the current one (a tiny model learns it within tens of steps), the flags of a tiny GPT run on
// it, and helpers to read what a run printed and saved.
#pragma once
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "ckpt/checkpoint_layout.hpp"
#include "ckpt/checkpoint_reader.hpp"
#include "data/indexed_dataset.hpp"
#include "test_paths.hpp"
#include "train/train_options.hpp"
#include "train/trainer.hpp"

namespace mgt::trainer_test {

// NullTokenizer --vocab-size 63: ids 0…62, eod 63, a vocabulary of 64 (padded to 64).
inline constexpr std::int32_t kEod = 63;

// 240 documents of 20…79 tokens, each walking t → (5t + 3) mod 63 from its own start, then eod.
inline std::string write_pattern_dataset(const std::string& dir) {
  const std::string prefix = dir + "/pattern_text_document";
  IndexedDatasetWriter writer(prefix, DType::UInt16);
  for (std::int32_t d = 0; d < 240; ++d) {
    std::vector<TokenId> tokens;
    TokenId t = (d * 7) % 63;
    const std::int32_t length = 20 + (d * 37) % 60;
    for (std::int32_t i = 0; i < length; ++i) {
      tokens.push_back(t);
      t = (5 * t + 3) % 63;
    }
    tokens.push_back(kEod);
    const std::int32_t lengths[] = {static_cast<std::int32_t>(tokens.size())};
    writer.add_document(tokens, lengths);
  }
  writer.finalize();
  return prefix;
}

// A scratch directory holding the dataset; runs put their cache and checkpoints in it.
struct TrainerFixture {
  std::string dir;
  std::string prefix;
  explicit TrainerFixture(const std::string& name) : dir(test::scratch_dir(name)), prefix(write_pattern_dataset(dir)) {}

  // Flags of a 2-layer, hidden-32 model on sequences of 32 with two micro-batches of 2 per
  // iteration, dropout on (Megatron's defaults), followed by `extra`.
  std::vector<std::string> flags(const std::vector<std::string>& extra) const {
    std::vector<std::string> f = {
        "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4",
        "--seq-length", "32", "--max-position-embeddings", "32",
        "--micro-batch-size", "2", "--global-batch-size", "4",
        "--lr", "1e-3", "--min-lr", "1e-4", "--lr-decay-style", "linear",
        "--tokenizer-type", "NullTokenizer", "--vocab-size", "63", "--make-vocab-size-divisible-by", "64",
        "--data-path", prefix, "--split", "90,5,5", "--data-cache-path", dir + "/cache",
        "--log-interval", "1", "--eval-interval", "1000", "--eval-iters", "2",
    };
    f.insert(f.end(), extra.begin(), extra.end());
    return f;
  }

  TrainOptions options(const std::vector<std::string>& extra) const {
    const std::vector<std::string> f = flags(extra);
    std::vector<const char*> argv = {"mgt-train"};
    for (const auto& s : f) argv.push_back(s.c_str());
    return parse_train_options(static_cast<int>(argv.size()), argv.data());
  }
};

// A run with its printed lines and per-iteration records.
struct RunCapture {
  std::ostringstream out;
  std::vector<IterationRecord> records;
  TrainResult result;
};

inline TrainResult run(const TrainOptions& options, RunCapture& capture, TrainerHooks hooks = {},
                       TrainerSettings settings = {}) {
  auto user_hook = hooks.after_iteration;
  hooks.after_iteration = [&capture, user_hook](const IterationRecord& r) {
    capture.records.push_back(r);
    if (user_hook) user_hook(r);
  };
  settings.out = &capture.out;
  capture.result = train_gpt(options, settings, hooks);
  return capture.result;
}

// The loss of each recorded iteration, in order.
inline std::vector<double> losses_of(const RunCapture& c) {
  std::vector<double> out;
  for (const auto& r : c.records) out.push_back(r.loss);
  return out;
}

inline std::vector<std::string> lines_containing(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.find(needle) != std::string::npos) out.push_back(line);
  return out;
}

// The bytes of every tensor of the checkpoint the tracker in `save_dir` names, by name.
inline std::vector<std::pair<std::string, std::vector<std::byte>>> checkpoint_tensors(const std::string& save_dir) {
  auto dir = ckpt::find_latest_checkpoint_directory(save_dir);
  if (!dir) return {};
  ckpt::ShardReader reader(*dir + "/mp_rank_00.h5");
  std::vector<std::pair<std::string, std::vector<std::byte>>> out;
  for (const auto& record : reader.tensors()) out.emplace_back(record.name, reader.read_bytes(record.name));
  return out;
}

}  // namespace mgt::trainer_test
