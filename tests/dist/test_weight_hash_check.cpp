// --check-weight-hash-across-dp-replicas-interval's comparison (train/weight_hash_check.hpp) over
// a data-parallel group: replicas initialised alike agree; one element changed on one rank is
// named, on every rank, and nothing else is; mgt-train compares them before training and every N
// iterations, and stops every rank when a replica differs. Run alone and under mpiexec with 1, 2
// and 4 ranks.
#include <catch2/catch.hpp>

#include <sstream>
#include <vector>

#include "dist/backend_memory_mover.hpp"
#include "dist/dist_testing.hpp"
#include "dist/process_groups.hpp"
#include "kernels/backend_factory.hpp"
#include "model/gpt_parameters.hpp"
#include "core/error.hpp"
#include "train/train_options.hpp"
#include "train/trainer.hpp"
#include "train/weight_hash_check.hpp"

using namespace mgt;
using mgt::dist_test::runtime;

TEST_CASE("weight hashes: equal replicas agree, a changed element on one rank is named on every rank",
          "[dist][data-parallel]") {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  dist::BackendMemoryMover mover{*backend};
  const dist::ParallelLayout layout(dist::ParallelFlags{}, runtime().world_size());
  dist::ProcessGroups groups = dist::make_process_groups(runtime(), layout, &mover);
  dist::Communicator& dp = *groups.data_parallel;

  GptConfig config;
  config.num_layers = 2;
  config.hidden_size = 8;
  config.num_attention_heads = 2;
  config.seq_length = 4;
  config.padded_vocab_size = 32;
  GptParameters params(config, *backend);
  params.initialize(5);
  CHECK(tensors_differing_across_replicas(params, &dp, nullptr).empty());

  // The last rank's second layer's fc2 weight, one element a bit larger.
  const ParameterEntry& changed = params.entry("decoder.layers.1.mlp.linear_fc2.weight");
  if (dp.rank() == dp.size() - 1) {
    std::vector<float> values(static_cast<std::size_t>(changed.numel()));
    backend->copy_to_host(ConstFloatView(params.param(changed)), std::span<float>(values));
    values[3] = std::nextafter(values[3], 1.0f);
    backend->copy_from_host(std::span<const float>(values), params.param(changed));
  }
  const std::vector<std::string> differing = tensors_differing_across_replicas(params, &dp, nullptr);
  if (dp.size() == 1)
    CHECK(differing.empty());
  else
    CHECK(differing == std::vector<std::string>{changed.name});
}

TEST_CASE("weight hashes: the hash of values", "[dist][data-parallel]") {
  const std::vector<float> a = {1.0f, -2.5f, 3.0f, 0.0f, 7.0f};
  std::vector<float> b = a;
  CHECK(hash_values(a) == hash_values(b));
  b[4] = std::nextafter(b[4], 8.0f);  // the odd last element counts
  CHECK(hash_values(a) != hash_values(b));
  b = a;
  b[3] = -0.0f;  // bit patterns, not values
  CHECK(hash_values(a) != hash_values(b));
  CHECK(hash_values(std::span<const float>(a).first(4)) != hash_values(a));
  CHECK(hash_values(a, 1) != hash_values(a, 2));
}

namespace {

TrainOptions hash_checked_options(int world, const char* seed) {
  std::vector<std::string> args = {
      "mgt-train", "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
      "--max-position-embeddings", "16", "--micro-batch-size", "1", "--global-batch-size", std::to_string(2 * world),
      "--lr", "1e-3", "--train-iters", "4", "--log-interval", "1", "--eval-iters", "0", "--mock-data",
      "--tokenizer-type", "NullTokenizer", "--vocab-size", "127", "--seed", seed,
      "--check-weight-hash-across-dp-replicas-interval", "2"};
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_train_options(static_cast<int>(argv.size()), argv.data(), world);
}

}  // namespace

TEST_CASE("weight hashes: mgt-train compares the replicas before training and stops every rank on a difference",
          "[dist][data-parallel]") {
  std::unique_ptr<Backend> backend = make_backend("cpu");
  dist::BackendMemoryMover mover{*backend};
  const int world = runtime().world_size();
  const dist::ParallelLayout layout(dist::ParallelFlags{}, world);
  dist::ProcessGroups groups = dist::make_process_groups(runtime(), layout, &mover);
  const auto run = [&](const char* seed) {
    const TrainOptions options = hash_checked_options(world, seed);
    std::ostringstream out;
    TrainerSettings settings;
    settings.out = &out;
    settings.backend = backend.get();
    settings.ranks.world = &runtime().world();
    settings.ranks.data_parallel = &groups.get(dist::GroupKind::DataParallel);
    settings.ranks.tensor_model_parallel = &groups.get(dist::GroupKind::TensorModelParallel);
    train_gpt(options, settings, {});
    return out.str();
  };
  const std::string agreed = run("1234");
  if (runtime().world().rank() == 0)
    for (const char* line : {">>> Weight hashes match after 0 iterations...\n",
                             ">>> Weight hashes match after 2 iterations...\n",
                             ">>> Weight hashes match after 4 iterations...\n"})
      CHECK(agreed.find(line) != std::string::npos);
  // The last rank initialises its replica from another seed: every rank stops before training.
  if (world == 1) return;
  const bool last = runtime().world().rank() == world - 1;
  try {
    run(last ? "99" : "1234");
    FAIL("the replicas' difference went unnoticed");
  } catch (const Error& e) {
    const std::string message = e.what();
    CHECK(message.rfind("Parameter hashes not matching across DP replicas after 0 iterations: "
                        "embedding.word_embeddings.weight, ", 0) == 0);
    CHECK(message.find(" more") != std::string::npos);
  }
}
