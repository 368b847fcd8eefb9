// The GPT-2 architecture as Hugging Face's GPT2Config (config.json) describes it, and how it
// corresponds to mgt's GptConfig. GPT-2 is Megatron's default GPT with fewer choices: learned
// absolute positions, LayerNorm, a GELU MLP, biases everywhere, one key/value per head, the output
// layer tied to the word embedding. Everything else is refused, naming the property.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "model/gpt_config.hpp"

namespace mgt {

// GPT2Config's fields that matter here, with transformers' defaults for absent keys.
struct HfGpt2Config {
  std::int64_t vocab_size = 50257;
  std::int64_t n_positions = 1024;
  std::int64_t n_embd = 768;
  std::int64_t n_layer = 12;
  std::int64_t n_head = 12;
  std::optional<std::int64_t> n_inner;  // null: 4·n_embd
  std::string activation_function = "gelu_new";
  double resid_pdrop = 0.1;
  double embd_pdrop = 0.1;
  double attn_pdrop = 0.1;
  double layer_norm_epsilon = 1e-5;
  double initializer_range = 0.02;
  std::int64_t bos_token_id = 50256;
  std::int64_t eos_token_id = 50256;
  std::string torch_dtype = "float32";  // of the weights as written
};

// GPT-2's end-of-text token, the id to write when the checkpoint does not record its tokenizer.
inline constexpr std::int64_t kGpt2EndOfText = 50256;

// Throws mgt::Error "WHAT cannot be expressed as GPT-2: ..." naming the first property GPT-2
// has no equivalent for (rotary or no position embeddings, RMSNorm, SwiGLU, no biases, an untied
// output layer, grouped-query attention, heads that do not split the hidden size).
void require_gpt2_expressible(const GptConfig& config, const std::string& what);

// The GPT-2 configuration of a model whose word embedding has `vocab_rows` rows; `eod` becomes
// the bos and eos token. The config must be GPT-2-expressible.
HfGpt2Config hf_gpt2_config_of(const GptConfig& config, std::int64_t vocab_rows, std::int64_t eod);

// The mgt configuration of a GPT-2 model trained (or run) on sequences of `seq_length` tokens
// (at most n_positions), with a word embedding of `padded_vocab_size` rows.
GptConfig gpt_config_of(const HfGpt2Config& hf, std::int64_t seq_length, std::int64_t padded_vocab_size);

// config.json as transformers writes it for GPT2LMHeadModel (keys sorted, fp32 weights).
std::string hf_gpt2_config_json(const HfGpt2Config& config);

// Reads config.json; throws mgt::Error naming `path` and the key when it is not a GPT-2 model
// or uses a GPT-2 option mgt's model does not compute the same way.
HfGpt2Config parse_hf_gpt2_config_json(const std::string& text, const std::string& path);

}  // namespace mgt
