// --overlap-grad-reduce's pieces on one process: Megatron's bucket layout, the model's notices of
// finished gradients and parameter use, and reductions that start during the backward, bucket by
// bucket, rather than after it. (tests/e2e/mgt_train_overlap.sh checks the results across ranks.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend_factory.hpp"
#include "model/linear_layer.hpp"
#include "model/model_testing.hpp"
#include "train/fp8_param_gather.hpp"
#include "train/gradient_buckets.hpp"
#include "train/overlapped_data_parallel.hpp"

using namespace mgt;
using namespace mgt::model_testing;

namespace {

// What happened, in order: the model's notices and the communicator's operations.
using Log = std::vector<std::string>;

// A data-parallel group of two that moves nothing and records each operation it is given, and
// whether it was started alone (Communicator::set_alone).
class RecordingCommunicator final : public dist::Communicator {
public:
  explicit RecordingCommunicator(Log& log) : Communicator(dist::GroupMembers{"data-parallel", {0, 1}, 0}, nullptr), log_(&log) {}
  const char* transport() const override { return "recording"; }

private:
  void record(const std::string& what, dist::SendBuffer b) {
    log_->push_back(what + " " + std::to_string(b.count) + (b.type == dist::ElementType::UInt8 ? " bytes" : "") +
                    (alone() ? " alone" : ""));
  }
  void do_all_reduce(dist::RecvBuffer data, dist::ReduceOp) override { record("all_reduce", data); }
  void do_all_gather(dist::SendBuffer, dist::RecvBuffer recv) override { record("all_gather", recv); }
  void do_reduce_scatter(dist::SendBuffer send, dist::RecvBuffer, dist::ReduceOp) override { record("reduce_scatter", send); }
  void do_broadcast(dist::RecvBuffer data, int) override { record("broadcast", data); }
  void do_send(dist::SendBuffer, int) override {}
  void do_recv(dist::RecvBuffer, int) override {}
  void do_send_recv(dist::SendBuffer, int, dist::RecvBuffer, int) override {}
  void do_barrier() override {}
  void do_reduce_scatter_chunks(dist::RecvBuffer data, std::span<const std::int64_t>, dist::ReduceOp) override {
    record("reduce_scatter_chunks", data);
  }
  void do_all_gather_chunks(dist::RecvBuffer data, std::span<const std::int64_t>) override {
    record("all_gather_chunks", data);
  }
  Log* log_;
};

// Passes the model's notices on, logging them first.
class LoggingHooks final : public ParameterHooks {
public:
  LoggingHooks(Log& log, ParameterHooks* next) : log_(&log), next_(next) {}
  void before_parameter_use(std::int64_t begin, std::int64_t end) override {
    log_->push_back("use " + std::to_string(begin) + " " + std::to_string(end));
    if (next_) next_->before_parameter_use(begin, end);
  }
  void gradients_done_from(std::int64_t begin) override {
    log_->push_back("done " + std::to_string(begin));
    if (next_) next_->gradients_done_from(begin);
  }

private:
  Log* log_;
  ParameterHooks* next_;
};

std::int64_t number_after(const std::string& line, std::size_t word) {
  std::size_t at = 0;
  for (std::size_t w = 0; w < word; ++w) at = line.find(' ', at) + 1;
  return std::stoll(line.substr(at));
}

// The Llama-like model with its second layer a mixture of 4 experts, top-2.
GptConfig two_layers_one_moe() {
  GptConfig config = llama_like_config();
  config.moe.num_experts = 4;
  config.moe.layer_pattern = {false, true};
  config.moe.ffn_hidden_size = 8;
  config.moe.topk = 2;
  return config;
}

}  // namespace

TEST_CASE("gradient buckets: reverse parameter order, parameter boundaries, the whole buffer", "[train][overlap]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  const GptConfig config = gpt2_like_config();
  GptParameters params(config, backend);
  const std::int64_t n = params.params().size();
  const auto none = [](const ParameterEntry&) { return false; };

  const std::vector<GradientBucket> one = gradient_buckets(params, std::nullopt, none);
  REQUIRE(one.size() == 1);
  CHECK((one[0].begin == 0 && one[0].end == n && !one[0].finalized_later));

  const std::int64_t size = 500;
  const std::vector<GradientBucket> buckets = gradient_buckets(params, size, none);
  REQUIRE(buckets.size() > 3);
  CHECK(buckets.front().end == n);
  CHECK(buckets.back().begin == 0);
  std::vector<std::int64_t> starts;
  for (const ParameterEntry& e : params.entries()) starts.push_back(e.offset);
  for (std::size_t i = 0; i < buckets.size(); ++i) {
    const GradientBucket& b = buckets[i];
    INFO("bucket " << i << " [" << b.begin << ", " << b.end << ")");
    if (i > 0) CHECK(b.end == buckets[i - 1].begin);
    CHECK(std::find(starts.begin(), starts.end(), b.begin) != starts.end());
    // Closed at the first parameter boundary at or past the size (the last takes what is left).
    if (i + 1 < buckets.size()) {
      CHECK(b.size() >= size);
      const auto next_start = std::upper_bound(starts.begin(), starts.end(), b.begin);
      if (next_start != starts.end() && *next_start < b.end) CHECK(b.end - *next_start < size);
    }
  }

  // A parameter changed after the backward: a tied embedding gets a bucket of its own; any other
  // marks its bucket.
  const ParameterEntry& embedding = params.entry("embedding.word_embeddings.weight");
  const std::vector<GradientBucket> tied = gradient_buckets(
      params, size, [](const ParameterEntry& e) { return e.name == "embedding.word_embeddings.weight"; });
  REQUIRE(!tied.empty());
  CHECK((tied.back().begin == 0 && tied.back().end == embedding.offset + embedding.numel() && tied.back().finalized_later));
  for (std::size_t i = 0; i + 1 < tied.size(); ++i) CHECK(!tied[i].finalized_later);
  const std::vector<GradientBucket> norms = gradient_buckets(
      params, size, [](const ParameterEntry& e) { return e.name == "decoder.final_layernorm.weight"; });
  CHECK(norms.front().finalized_later);
  CHECK(default_ddp_bucket_size(1) == 40000000);
  CHECK(default_ddp_bucket_size(64) == 64000000);
}

TEST_CASE("the backward starts each bucket's reduction as soon as its gradients are done", "[train][overlap]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  const GptConfig config = gpt2_like_config();
  GptModel model(config, backend, 1234);
  GptParameters& params = model.parameters();
  const RefBatch batch = random_batch(config, 2, 8, 7);
  for (const bool distributed : {false, true}) {
    INFO((distributed ? "distributed optimizer" : "plain"));
    Log log;
    RecordingCommunicator group(log);
    OverlappedDataParallel overlap(params, gradient_buckets(params, 2000, [](const ParameterEntry&) { return false; }),
                                   group, distributed);
    const std::size_t buckets = overlap.buckets().size();
    REQUIRE(buckets > 3);
    LoggingHooks hooks(log, &overlap);
    model.set_parameter_hooks(&hooks);
    params.zero_grads();
    // An earlier micro-batch only accumulates.
    model.forward_backward(micro_batch(batch), {1, 0}, 2);
    const std::string reduction = distributed ? "reduce_scatter_chunks" : "all_reduce";
    const auto reductions = [&] {
      return std::count_if(log.begin(), log.end(), [&](const std::string& l) { return l.starts_with(reduction); });
    };
    CHECK(reductions() == 0);
    log.clear();
    overlap.arm();
    model.forward_backward(micro_batch(batch), {1, 1}, 2);
    // Every bucket started inside the backward, in order, each right after the notice that
    // finished it — the first long before the backward's end.
    CHECK(static_cast<std::size_t>(reductions()) == buckets);
    std::size_t first_start = log.size();
    std::size_t last_done = 0;
    std::int64_t previous_done = params.params().size();
    std::int64_t previous_use = -1;
    for (std::size_t i = 0; i < log.size(); ++i) {
      if (log[i].starts_with(reduction)) first_start = std::min(first_start, i);
      if (log[i].starts_with("done ")) {
        last_done = i;
        CHECK(number_after(log[i], 1) <= previous_done);
        previous_done = number_after(log[i], 1);
      }
      if (log[i].starts_with("use ")) {
        CHECK(number_after(log[i], 1) > previous_use);
        previous_use = number_after(log[i], 1);
      }
    }
    CHECK(previous_done == 0);
    CHECK(first_start < last_done);
    overlap.finish_gradient_reduction();
    CHECK(static_cast<std::size_t>(reductions()) == buckets);

    if (distributed) {
      // The weights' all-gather: one per bucket, each waited for by the forward that reads it.
      log.clear();
      overlap.start_param_gather();
      CHECK(std::count_if(log.begin(), log.end(), [](const std::string& l) { return l.starts_with("all_gather_chunks"); }) ==
            static_cast<std::ptrdiff_t>(buckets));
      model.forward_backward(micro_batch(batch), {1, 2}, 2);
      overlap.finish_param_gather();
    }
    model.set_parameter_hooks(nullptr);
  }
}

TEST_CASE("the reduction of the last bucket the backward finishes is started alone", "[train][overlap]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  const GptConfig config = gpt2_like_config();
  GptModel model(config, backend, 1234);
  GptParameters& params = model.parameters();
  const RefBatch batch = random_batch(config, 2, 8, 7);
  for (const bool distributed : {false, true}) {
    INFO((distributed ? "distributed optimizer" : "plain"));
    Log log;
    RecordingCommunicator group(log);
    OverlappedDataParallel overlap(params, gradient_buckets(params, 2000, [](const ParameterEntry&) { return false; }),
                                   group, distributed);
    const std::size_t buckets = overlap.buckets().size();
    REQUIRE(buckets > 3);
    model.set_parameter_hooks(&overlap);
    params.zero_grads();
    overlap.arm();
    model.forward_backward(micro_batch(batch), {1, 0}, 1);
    overlap.finish_gradient_reduction();
    // One reduction per bucket, in the backward's order: the last of them alone.
    std::vector<bool> alone;
    for (const std::string& line : log) alone.push_back(line.ends_with(" alone"));
    REQUIRE(alone.size() == buckets);
    for (std::size_t i = 0; i < buckets; ++i) CHECK(alone[i] == (i + 1 == buckets));
    CHECK(!group.alone());
    model.set_parameter_hooks(nullptr);
  }
  // A bucket the model finalises after the backward starts after it, alone.
  Log log;
  RecordingCommunicator group(log);
  OverlappedDataParallel overlap(
      params, gradient_buckets(params, 2000, [](const ParameterEntry& e) { return e.name == "decoder.final_layernorm.weight"; }),
      group, false);
  REQUIRE(overlap.buckets().front().finalized_later);
  model.set_parameter_hooks(&overlap);
  params.zero_grads();
  overlap.arm();
  model.forward_backward(micro_batch(batch), {1, 0}, 1);
  overlap.finish_gradient_reduction();
  REQUIRE(log.size() == overlap.buckets().size());
  CHECK(log.back().ends_with(" alone"));
  model.set_parameter_hooks(nullptr);
}

// --overlap-param-gather under expert parallelism: the dense buckets' weights are gathered over
// the data-parallel group, the experts' region (after them in the buffer) over its own group, in
// one gather of the whole region.
TEST_CASE("the experts' weights are gathered over their own group", "[train][overlap]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  const GptConfig config = two_layers_one_moe();
  GptParameters params(config, backend, {}, {}, ExpertParallelRank{2, 1});
  const std::int64_t experts = params.table().expert_begin;
  const std::int64_t size = params.params().size();
  REQUIRE(experts < size);
  std::vector<GradientBucket> buckets = gradient_buckets(params, 2000, [](const ParameterEntry&) { return false; });
  std::erase_if(buckets, [&](const GradientBucket& b) { return b.begin >= experts; });
  for (GradientBucket& b : buckets) b.end = std::min(b.end, experts);
  Log dense_log, expert_log;
  RecordingCommunicator dense(dense_log), expert_group(expert_log);
  OverlappedDataParallel overlap(params, buckets, dense, true, nullptr, ExpertParameterRegion{experts, size, &expert_group});
  overlap.start_param_gather();
  std::int64_t dense_gathered = 0;
  for (const std::string& line : dense_log) {
    CHECK(line.starts_with("all_gather_chunks "));
    dense_gathered += number_after(line, 1);
  }
  CHECK(dense_gathered == experts);
  CHECK(expert_log == Log{"all_gather_chunks " + std::to_string(size - experts)});
  overlap.before_parameter_use(experts, size);
  overlap.finish_param_gather();
}

TEST_CASE("fp8 param gather: each bucket gathers its FP8 codes beside its other weights", "[train][overlap][fp8]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  GptConfig config = gpt2_like_config();
  Fp8Recipe recipe;
  recipe.current_scaling = true;  // --fp8-recipe tensorwise: the parts' amaxes reduced first
  config.fp8 = recipe;
  GptModel model(config, backend, 1234);
  GptParameters& params = model.parameters();
  const std::int64_t size = std::as_const(params).params().size();
  Log log;
  RecordingCommunicator group(log);
  OverlappedDataParallel overlap(params, gradient_buckets(params, 2000, [](const ParameterEntry&) { return false; }),
                                 group, true);
  Fp8ParamGather gather(params, *model.fp8(), group, {0, size});
  overlap.set_fp8_param_gather(&gather);
  REQUIRE(gather.fp8_weights() == 8);
  overlap.start_param_gather();
  REQUIRE_FALSE(log.empty());
  CHECK(log.front() == "all_reduce 8");  // the packed amaxes, before any cast with their scale
  // Buckets that hold FP8 weights gather their codes (bytes) each, beside their other elements:
  // no single gather of every code after the step.
  std::set<std::size_t> fp8_buckets;
  for (const ParameterEntry& e : params.entries()) {
    if (!e.name.ends_with(".weight") || e.name.find("linear_") == std::string::npos) continue;
    for (std::size_t i = 0; i < overlap.buckets().size(); ++i) {
      const GradientBucket& b = overlap.buckets()[i];
      if (b.begin < e.offset + e.numel() && b.end > e.offset) fp8_buckets.insert(i);
    }
  }
  REQUIRE(fp8_buckets.size() > 2);
  std::int64_t codes = 0;
  std::int64_t others = 0;
  std::size_t code_gathers = 0;
  for (std::size_t i = 1; i < log.size(); ++i) {
    REQUIRE(log[i].starts_with("all_gather_chunks "));
    const bool bytes = log[i].find(" bytes") != std::string::npos;
    (bytes ? codes : others) += number_after(log[i], 1);
    code_gathers += bytes ? 1 : 0;
  }
  CHECK(code_gathers == fp8_buckets.size());
  CHECK(codes == gather.fp8_elements());
  CHECK(others == size - gather.fp8_elements());
  // The forward's wait for the first layer's buckets derives that layer's transposed copies only.
  CHECK(gather.weights_in_flight() == 8);
  std::int64_t begin = size;
  std::int64_t end = 0;
  for (const ParameterEntry& e : params.entries()) {
    if (!e.name.starts_with("decoder.layers.0.")) continue;
    begin = std::min(begin, e.offset);
    end = std::max(end, e.offset + e.numel());
  }
  overlap.before_parameter_use(begin, end);
  CHECK(gather.weights_in_flight() == 4);
  overlap.finish_param_gather();
  CHECK(gather.weights_in_flight() == 0);
  CHECK_FALSE(gather.behind());
}

// --fp8-param-gather under expert parallelism: the experts' FP8 weights are cast by their shards'
// ranks and their codes gathered over the experts' own group, in the region's gather beside its
// other elements; the dense buckets' gathers bring none of them.
TEST_CASE("fp8 param gather: the experts' FP8 codes are gathered over their own group", "[train][overlap][fp8]") {
  const auto backend_owner = make_backend("cpu");
  Backend& backend = *backend_owner;
  const GptConfig config = two_layers_one_moe();
  GptParameters params(config, backend, {}, {}, ExpertParallelRank{2, 1});
  params.initialize(1234);
  const std::int64_t experts = params.table().expert_begin;
  const std::int64_t size = std::as_const(params).params().size();
  REQUIRE(experts < size);
  // This rank's two experts (2 and 3), fc1 and fc2 each, in FP8 under current scaling.
  Fp8Recipe recipe;
  recipe.current_scaling = true;
  Fp8Training fp8(recipe, backend, 0, 4);
  std::vector<LinearLayer> layers;
  layers.reserve(4);
  for (const ParameterEntry& e : params.entries())
    if (e.expert_parallel && (e.name.ends_with(".linear_fc1.weight") || e.name.ends_with(".linear_fc2.weight")))
      layers.emplace_back(params, e.name, e.name.substr(0, e.name.rfind('.')) + ".bias", &fp8, true);
  REQUIRE(layers.size() == 4);
  std::vector<GradientBucket> buckets = gradient_buckets(params, 2000, [](const ParameterEntry&) { return false; });
  std::erase_if(buckets, [&](const GradientBucket& b) { return b.begin >= experts; });
  for (GradientBucket& b : buckets) b.end = std::min(b.end, experts);
  Log dense_log, expert_log;
  RecordingCommunicator dense(dense_log), expert_group(expert_log);
  OverlappedDataParallel overlap(params, buckets, dense, true, nullptr, ExpertParameterRegion{experts, size, &expert_group});
  Fp8ParamGather gather(params, fp8, expert_group, {experts, size});
  overlap.set_fp8_expert_param_gather(&gather);
  REQUIRE(gather.fp8_weights() == 4);
  overlap.start_param_gather();
  for (const std::string& line : dense_log) CHECK(line.find(" bytes") == std::string::npos);
  REQUIRE_FALSE(expert_log.empty());
  CHECK(expert_log.front() == "all_reduce 4");  // the packed amaxes, before any cast with their scale
  std::int64_t codes = 0;
  std::int64_t others = 0;
  for (std::size_t i = 1; i < expert_log.size(); ++i) {
    REQUIRE(expert_log[i].starts_with("all_gather_chunks "));
    (expert_log[i].find(" bytes") != std::string::npos ? codes : others) += number_after(expert_log[i], 1);
  }
  CHECK(codes == gather.fp8_elements());
  CHECK(others == size - experts - gather.fp8_elements());
  CHECK(gather.weights_in_flight() == 4);
  CHECK(gather.behind());
  // A block that reads none of the experts' weights derives none of their transposed copies.
  overlap.before_parameter_use(0, 1);
  CHECK(gather.weights_in_flight() == 4);
  overlap.before_parameter_use(experts, size);
  CHECK(gather.weights_in_flight() == 0);
  overlap.finish_param_gather();
  CHECK_FALSE(gather.behind());
  for (std::int64_t k = 0; k < 4; ++k) CHECK_FALSE(fp8.weight_copy(k).pinned);
}
