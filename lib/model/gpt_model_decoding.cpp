// GptModel's decoding (gpt_model.hpp): forward_cached and forward_cached_greedy, the steps of
// generation over a key/value cache, with one-token steps recorded once and replayed.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/gpt_model.hpp"
#include "model/gpt_model_internal.hpp"

namespace mgt {

using gpt_model_internal::check_input;
using gpt_model_internal::require;
using gpt_model_internal::transpose_01;

ConstFloatView GptModel::decode_step(std::span<const int64_t> tokens, int64_t n, KvCache& cache) {
  require_whole_model("forward_cached");
  prepare_parameters();
  const int64_t b = cache.batch();
  const int64_t past = cache.length();
  require(n >= 1, "forward_cached needs at least one token per sequence");
  require(past + n <= cache.capacity(), "the key/value cache holds " + std::to_string(cache.capacity()) +
                                            " positions; " + std::to_string(past) + " + " + std::to_string(n) +
                                            " do not fit");
  check_input(tokens, b * n, "tokens", config().padded_vocab_size);
  const bool learned = config().position_embedding_type == PositionEmbeddingType::kLearnedAbsolute;
  require(!learned || past + n <= config().max_position_embeddings,
          "position " + std::to_string(past + n - 1) + " is beyond --max-position-embeddings " +
              std::to_string(config().max_position_embeddings));

  // One-token steps keep buffers of their own, so that a prompt's pass does not move them from
  // under the recorded step.
  std::unique_ptr<ActivationMemory>& slot = n == 1 ? step_memory_ : generation_memory_;
  if (!slot || slot->seq() != n || slot->batch() != b) {
    if (n == 1) decode_recording_ = DecodeRecording();  // it refers to the old buffers
    slot.reset();
    slot = std::make_unique<ActivationMemory>(*backend_, config(), params_.tensor_parallel(), n, b, false, true);
  }
  ActivationMemory& memory = *slot;
  // Tokens and positions go through page-locked staging without the host waiting for the copy.
  staging_.begin(2 * n * b, 0);
  staging_.put(transpose_01(tokens, b, n, 1), memory.tokens);
  if (learned) {
    std::vector<int64_t> positions(static_cast<size_t>(n * b));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < b; ++j) positions[static_cast<size_t>(i * b + j)] = past + i;
    staging_.put(positions, memory.positions);
  }
  staging_.end();

  const int64_t h = config().hidden_size;
  // Only the last position's logits are wanted: its b rows are the last block of [n, b, h].
  const auto run = [&] {
    const ForwardContext ctx{n, b, false, {}};
    const auto num_layers = static_cast<int64_t>(layers_.size());
    embedding_->forward(ctx, memory.tokens, memory.positions, memory.scratch.hidden_a, memory.sequence,
                        memory.hidden(0));
    for (int64_t l = 0; l < num_layers; ++l)
      layers_[static_cast<size_t>(l)].forward(ctx, memory.hidden(l), memory.layer(l), memory.scratch,
                                              memory.hidden(l + 1), &cache.layer(l));
    const FloatView last = memory.hidden(num_layers).subspan((n - 1) * b * h, b * h);
    const NormStats stats{memory.final_norm.mean.empty() ? FloatView() : memory.final_norm.mean.first(b),
                          memory.final_norm.rstd.first(b)};
    final_norm_->forward(last, b, memory.final_norm_output.first(b * h), stats);
    output_layer_->forward(memory.final_norm_output.first(b * h), b, memory.logits);
  };
  // A recording replays the same buffers: the step's varying inputs (tokens, positions, the
  // cache's length) are in backend memory. The first step for a cache runs directly, so that
  // whatever the operations set up on first use (GEMM plans, workspaces) exists before.
  DecodeRecording& rec = decode_recording_;
  if (rec.cache_id != cache.id()) {
    rec = DecodeRecording{};
    rec.cache_id = cache.id();
  }
  // Tensor-parallel steps hold collectives, which stay out of recordings; so do the steps of a
  // mixture of experts, whose dispatcher reads the routing back to the host
  // (moe_token_dispatcher.cpp) to size the experts' inputs.
  if (n != 1 || tp_.active() || config().moe.enabled() || rec.failed || rec.runs++ == 0) {
    run();
  } else if (rec.operations != nullptr) {
    rec.operations->replay();
  } else {
    rec.operations = backend_->record(run);
    if (rec.operations == nullptr) {
      rec.failed = true;
      run();
    }
  }
  cache.advance(n);
  return memory.logits;
}

std::vector<float> GptModel::forward_cached(std::span<const int64_t> tokens, int64_t n, KvCache& cache) {
  const ConstFloatView logits = decode_step(tokens, n, cache);
  const int64_t b = cache.batch();
  std::vector<float> host(static_cast<size_t>(b * config().padded_vocab_size));
  DeviceBuffer gathered;
  backend_->copy_to_host(whole_vocab_logits(logits, b, gathered), host);
  return host;
}

std::vector<int64_t> GptModel::forward_cached_greedy(std::span<const int64_t> tokens, int64_t n, KvCache& cache,
                                                     int64_t vocab) {
  const int64_t padded = config().padded_vocab_size;
  require(vocab >= 1 && vocab <= padded, "the vocabulary to pick from has " + std::to_string(vocab) +
                                             " tokens; the model has " + std::to_string(padded));
  const ConstFloatView logits = decode_step(tokens, n, cache);
  const int64_t b = cache.batch();
  if (decode_tokens_.size() != b) decode_tokens_ = DeviceIndexBuffer(*backend_, b);
  DeviceBuffer gathered;
  backend_->row_argmax(whole_vocab_logits(logits, b, gathered), b, vocab, decode_tokens_.view(), padded);
  std::vector<int64_t> picked(static_cast<size_t>(b));
  backend_->copy_to_host(ConstIndexView(decode_tokens_.view()), picked);
  return picked;
}

}  // namespace mgt
