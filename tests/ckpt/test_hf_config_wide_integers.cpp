// Hugging Face config.json files with an integer wider than 64 bits (Python writes any int, and
// transformers writes int(1e30) for "no maximum"): read, the wide value as a double, where they
// used to fail as "not valid JSON".
#include <catch2/catch.hpp>
#include <string>

#include "ckpt/hf_gpt2_config.hpp"
#include "ckpt/hf_llama_config.hpp"

using namespace mgt;

TEST_CASE("HF configs with an integer beyond 64 bits are read", "[ckpt][hf][json]") {
  const HfGpt2Config gpt2 = parse_hf_gpt2_config_json(
      R"({"model_type": "gpt2", "n_embd": 32, "n_head": 4, "n_layer": 2, "n_positions": 64, "vocab_size": 300,
          "model_max_length": 1000000000000000019884624838656})",
      "config.json");
  CHECK(gpt2.n_positions == 64);
  CHECK(gpt2.vocab_size == 300);

  const HfLlamaConfig llama = parse_hf_llama_config_json(
      R"({"model_type": "llama", "vocab_size": 300, "hidden_size": 32, "intermediate_size": 88,
          "num_hidden_layers": 2, "num_attention_heads": 4, "max_position_embeddings": 64,
          "model_max_length": 1000000000000000019884624838656, "extra": {"big": -99999999999999999999999}})",
      "config.json");
  CHECK(llama.max_position_embeddings == 64);
  CHECK(llama.hidden_size == 32);
}
