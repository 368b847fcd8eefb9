// Checkpoints opened to run their model: the architecture from the stored arguments, the
// weights bit for bit, the recorded tokenizer, repeated model-shape flags checked, and clear
// refusals of what cannot be run.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "../model/model_testing.hpp"
#include "../test_paths.hpp"
#include "ckpt/model_checkpoint.hpp"
#include "ckpt/model_weights.hpp"
#include "kernels/backend_factory.hpp"

using namespace mgt;
using namespace mgt::model_testing;
namespace fs = std::filesystem;

namespace {

// A fresh scratch directory per use.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name) : path(mgt::test::scratch_dir("model_checkpoint_" + name)) {}
  ~TempDir() { fs::remove_all(path); }
};

std::string gpt2_tokenizer_json() {
  return "{\"tokenizer_type\": \"GPT2BPETokenizer\", \"vocab_file\": \"" +
         mgt::test::dataset_path("gpt2-vocab.json") + "\", \"merge_file\": \"" +
         mgt::test::dataset_path("gpt2-merges.txt") + "\", \"vocab_size\": null, \"vocab_extra_ids\": 0}";
}

}  // namespace

TEST_CASE("A model checkpoint reloads the same architecture and weights", "[ckpt]") {
  for (GptConfig config : {gpt2_like_config(), llama_like_config(), openai_gelu_config()}) {
    TempDir dir("roundtrip");
    const auto backend_owner = make_backend("cpu");
    Backend& backend = *backend_owner;
    GptModel model(config, backend, 21);
    randomize_parameters(model.parameters(), 21);
    const std::string saved =
        save_model_checkpoint(dir.path.string(), 7, model.parameters(), model_args_json(model.config()));
    CHECK(saved == (dir.path / "iter_0000007").string());

    // Through the tracker file and through the iteration directory.
    for (const std::string& load : {dir.path.string(), saved}) {
      const ModelCheckpoint ckpt = open_model_checkpoint(load);
      CHECK(ckpt.directory == saved);
      CHECK(ckpt.metadata.iteration == 7);
      CHECK(model_args_json(ckpt.config) == model_args_json(model.config()));
      const std::unique_ptr<GptModel> loaded = load_checkpoint_model(ckpt, backend);
      for (const ParameterEntry& e : model.parameters().entries())
        CHECK(loaded->parameters().read_param(e) == model.parameters().read_param(e));
    }
  }
}

TEST_CASE("A model checkpoint opened with --ckpt-step is that iteration of the save directory", "[ckpt]") {
  TempDir dir("ckpt_step");
  const auto backend_owner = make_backend("cpu");
  GptModel model(gpt2_like_config(), *backend_owner, 21);
  const std::string third =
      save_model_checkpoint(dir.path.string(), 3, model.parameters(), model_args_json(model.config()));
  const std::string seventh =
      save_model_checkpoint(dir.path.string(), 7, model.parameters(), model_args_json(model.config()));
  CHECK(open_model_checkpoint(dir.path.string(), 3).directory == third);
  CHECK(open_model_checkpoint(dir.path.string(), 3).metadata.iteration == 3);
  CHECK(open_model_checkpoint(dir.path.string(), 0).directory == seventh);  // 0: not given, as Megatron
  CHECK(open_model_checkpoint(dir.path.string()).directory == seventh);
  CHECK_THROWS_WITH(open_model_checkpoint(dir.path.string(), 5),
                    Catch::Contains("--ckpt-step 5: " + dir.path.string() +
                                    " holds no checkpoint of iteration 5 (its iterations: 3, 7)"));
  CHECK_THROWS_WITH(open_model_checkpoint(third, 3),
                    Catch::Contains("is an iteration directory itself; give the --save directory that holds it"));
}

TEST_CASE("The arguments of a training run describe the model for inference", "[ckpt]") {
  // Keys as mgt-train writes them, with Megatron's None for derived sizes.
  const std::string args =
      "{\"num_layers\": 2, \"hidden_size\": 64, \"num_attention_heads\": 4, \"ffn_hidden_size\": null, "
      "\"kv_channels\": null, \"group_query_attention\": false, \"num_query_groups\": 4, \"seq_length\": 32, "
      "\"max_position_embeddings\": 48, \"position_embedding_type\": \"learned_absolute\", \"rotary_percent\": 1.0, "
      "\"rotary_base\": 10000, \"normalization\": \"LayerNorm\", \"norm_epsilon\": 1e-05, \"swiglu\": false, "
      "\"openai_gelu\": true, \"add_bias_linear\": true, \"untie_embeddings_and_output_weights\": false, "
      "\"padded_vocab_size\": 50304, \"lr\": 0.001}";
  const GptConfig c = gpt_config_from_args_json(args, "test arguments");
  CHECK(c.ffn_hidden_size == 256);
  CHECK(c.kv_channels == 16);
  CHECK(c.max_position_embeddings == 48);
  CHECK(c.activation == Activation::kOpenaiGelu);
  CHECK(c.padded_vocab_size == 50304);
  // Megatron's arguments: the fused bias-GELU (its default) computes the tanh form, its absence
  // the erf form (and so do arguments of mgt from before it recorded the fusion).
  std::string fused = args;
  fused.replace(fused.find("\"openai_gelu\": true"), 19, "\"openai_gelu\": false, \"bias_gelu_fusion\": true");
  CHECK(gpt_config_from_args_json(fused, "Megatron's arguments").activation == Activation::kOpenaiGelu);
  std::string unfused = args;
  unfused.replace(unfused.find("\"openai_gelu\": true"), 19, "\"openai_gelu\": false");
  CHECK(gpt_config_from_args_json(unfused, "older arguments").activation == Activation::kGelu);
  CHECK_THROWS_WITH(gpt_config_from_args_json("{\"hidden_size\": 64}", "the arguments of X"),
                    Catch::Contains("the arguments of X has no 'num_layers'"));
  CHECK_THROWS_WITH(gpt_config_from_args_json("[1]", "the arguments of X"), Catch::Contains("not a JSON object"));
}

TEST_CASE("Model-shape flags must agree with the checkpoint", "[ckpt]") {
  TempDir dir("agree");
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptModel model(gpt2_like_config(), backend, 1);
  save_model_checkpoint(dir.path.string(), 1, model.parameters(), model_args_json(model.config()));
  const ModelCheckpoint ckpt = open_model_checkpoint(dir.path.string());
  CHECK_NOTHROW(check_model_flags_agree(ckpt, {{"num-layers", "2"}, {"hidden-size", "16"}, {"norm-epsilon", "1e-5"},
                                               {"position-embedding-type", "learned_absolute"}}));
  CHECK_THROWS_WITH(check_model_flags_agree(ckpt, {{"hidden-size", "32"}}),
                    Catch::Contains("--hidden-size 32 disagrees with checkpoint") && Catch::Contains("(16)"));
  CHECK_THROWS_WITH(check_model_flags_agree(ckpt, {{"swiglu", "true"}}),
                    Catch::Contains("--swiglu disagrees") && Catch::Contains("saved without it"));
  CHECK_THROWS_WITH(check_model_flags_agree(ckpt, {{"normalization", "RMSNorm"}}),
                    Catch::Contains("--normalization RMSNorm disagrees"));
}

TEST_CASE("The tokenizer comes from the checkpoint unless flags name one", "[ckpt]") {
  TempDir dir("tokenizer");
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptConfig config = gpt2_like_config();
  config.padded_vocab_size = 50304;
  GptModel model(config, backend, 1);
  save_model_checkpoint(dir.path.string(), 1, model.parameters(), model_args_json(model.config()),
                        gpt2_tokenizer_json());
  const ModelCheckpoint ckpt = open_model_checkpoint(dir.path.string());
  CHECK(make_checkpoint_tokenizer(ckpt, std::nullopt, "mgt-eval")->vocab_size() == 50257);
  TokenizerOptions null;
  null.type = "NullTokenizer";
  null.vocab_size = 100;
  CHECK(make_checkpoint_tokenizer(ckpt, null, "mgt-eval")->vocab_size() == 101);
  null.vocab_size = 60000;
  CHECK_THROWS_WITH(make_checkpoint_tokenizer(ckpt, null, "mgt-eval"), Catch::Contains("more than the model's vocabulary of 50304"));

  TempDir bare("bare");
  save_model_checkpoint(bare.path.string(), 1, model.parameters(), model_args_json(model.config()));
  CHECK_THROWS_WITH(make_checkpoint_tokenizer(open_model_checkpoint(bare.path.string()), std::nullopt, "mgt-eval"),
                    Catch::Contains("does not record its tokenizer"));
  // Without a recorded tokenizer, the GPT-2 files alone name GPT2BPETokenizer, as in older scripts.
  TokenizerOptions files;
  files.vocab_file = test::dataset_path("gpt2-vocab.json");
  files.merge_file = test::dataset_path("gpt2-merges.txt");
  CHECK(make_checkpoint_tokenizer(open_model_checkpoint(bare.path.string()), files, "mgt-eval")->vocab_size() == 50257);

  // A recorded training tokenizer's size: another tokenizer's is refused though the padding holds it.
  TempDir sized("sized");
  std::string sized_json = gpt2_tokenizer_json();
  sized_json.insert(sized_json.size() - 1, ", \"true_vocab_size\": 50257");
  save_model_checkpoint(sized.path.string(), 1, model.parameters(), model_args_json(model.config()), sized_json);
  const ModelCheckpoint sized_ckpt = open_model_checkpoint(sized.path.string());
  CHECK(make_checkpoint_tokenizer(sized_ckpt, std::nullopt, "mgt-eval")->vocab_size() == 50257);
  null.vocab_size = 100;
  CHECK_THROWS_WITH(make_checkpoint_tokenizer(sized_ckpt, null, "mgt-eval"),
                    "--tokenizer-type NullTokenizer has 101 tokens, but checkpoint " + sized_ckpt.directory +
                        " was trained with a tokenizer of 50257 (GPT2BPETokenizer); pass the tokenizer it was "
                        "trained with");
}

TEST_CASE("Opening what is not a runnable checkpoint fails with a clear message", "[ckpt]") {
  TempDir dir("errors");
  CHECK_THROWS_WITH(open_model_checkpoint((dir.path / "missing").string()), Catch::Contains("no such directory"));
  CHECK_THROWS_WITH(open_model_checkpoint(dir.path.string()), Catch::Contains("holds no checkpoint"));

  const auto backend_owner = make_backend("cpu");

  Backend& backend = *backend_owner;
  GptModel model(gpt2_like_config(), backend, 1);
  const std::string saved = save_model_checkpoint(dir.path.string(), 3, model.parameters(), model_args_json(model.config()));
  // A tensor-parallel checkpoint that lost a rank's file names the missing piece.
  TempDir split("split");
  write_mgt_model_weights(read_mgt_model_weights(saved), (split.path / "tp2").string(), ckpt::TargetLayout{2});
  fs::remove(split.path / "tp2" / "iter_0000003" / "mp_rank_01.h5");
  CHECK_THROWS_WITH(load_checkpoint_model(open_model_checkpoint((split.path / "tp2").string()), backend),
                    Catch::Contains("lacks piece 1 of 2"));

  // Arguments describing another model than the stored tensors.
  GptConfig other = gpt2_like_config();
  other.num_layers = 3;
  TempDir wrong("wrong");
  save_model_checkpoint(wrong.path.string(), 1, model.parameters(), model_args_json(other));
  CHECK_THROWS_WITH(load_checkpoint_model(open_model_checkpoint(wrong.path.string()), backend),
                    Catch::Contains("has no tensor 'model/decoder.layers.2."));

  // A diverged run's weights: refused, naming the tensor, rather than run to NaN logits.
  GptModel diverged(gpt2_like_config(), backend, 1);
  const ParameterEntry& first = diverged.parameters().entries().front();
  std::vector<float> values = diverged.parameters().read_param(first);
  values[values.size() / 2] = std::nanf("");
  diverged.parameters().write_param(first, values);
  TempDir nan("nan");
  save_model_checkpoint(nan.path.string(), 1, diverged.parameters(), model_args_json(diverged.config()));
  CHECK_THROWS_WITH(load_checkpoint_model(open_model_checkpoint(nan.path.string()), backend),
                    Catch::Contains("tensor 'model/" + first.name + "' holds NaN or infinite values"));
}
