// The layout planner of mgt-train --dry-run: its cost model against the steps mgt measured, the
// candidate layouts against the trainer's own checks, their order and memory filter, and the GPU
// it plans for without one visible.
#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "tokenizer/tokenizer.hpp"
#include "train/gpt_config_from_options.hpp"
#include "train/layout_candidates.hpp"
#include "train/layout_plan_output.hpp"
#include "train/layout_planner.hpp"
#include "train/planner_target.hpp"
#include "train/step_cost_model.hpp"
#include "train_options_testing.hpp"

namespace mgt {
namespace {

using train_testing::parse_with;
using train_testing::usage_error_with;

// The Llama 3 8B shape, micro-batch 1, global batch 8, bf16, mock data.
const std::vector<std::string> kLlama8b = {
    "--num-layers", "32", "--hidden-size", "4096", "--ffn-hidden-size", "14336", "--num-attention-heads", "32",
    "--group-query-attention", "--num-query-groups", "8", "--seq-length", "8192", "--max-position-embeddings",
    "8192", "--micro-batch-size", "1", "--global-batch-size", "8", "--bf16", "--swiglu", "--normalization",
    "RMSNorm", "--position-embedding-type", "rope", "--disable-bias-linear", "--untie-embeddings-and-output-weights",
    "--tokenizer-type", "NullTokenizer", "--vocab-size", "128255", "--mock-data", "--train-iters", "10", "--lr",
    "1e-4", "--dry-run"};

// tools/gpu/moe_speed.sh's Mixtral-style model (8 experts of ffn 5632, top-2) and its dense
// equivalent (ffn 11264), micro-batch 1; the global batch per GPU count is the caller's.
const std::vector<std::string> kMixtralSmall = {
    "--num-layers", "16", "--hidden-size", "2048", "--num-attention-heads", "16", "--group-query-attention",
    "--num-query-groups", "8", "--seq-length", "4096", "--max-position-embeddings", "4096",
    "--position-embedding-type", "rope", "--normalization", "RMSNorm", "--swiglu",
    "--untie-embeddings-and-output-weights", "--disable-bias-linear", "--micro-batch-size", "1", "--bf16",
    "--tokenizer-type", "NullTokenizer", "--vocab-size", "32000", "--mock-data", "--train-iters", "10", "--lr",
    "3e-4", "--dry-run"};
const std::vector<std::string> kExperts = {"--num-experts", "8", "--moe-router-topk", "2", "--moe-ffn-hidden-size",
                                           "5632", "--ffn-hidden-size", "5632", "--moe-token-dispatcher-type",
                                           "alltoall", "--moe-grouped-gemm"};

// GPT 1.3B as tools/bench/bench_train_gpu.py runs it: micro-batch 4, sequence 2048.
const std::vector<std::string> kGpt13b = {
    "--num-layers", "24", "--hidden-size", "2048", "--num-attention-heads", "16", "--seq-length", "2048",
    "--max-position-embeddings", "2048", "--micro-batch-size", "4", "--bf16", "--tokenizer-type",
    "NullTokenizer", "--vocab-size", "50303", "--mock-data", "--train-iters", "10", "--lr", "1e-4",
    "--attention-dropout", "0", "--hidden-dropout", "0"};

TrainOptions unvalidated(const std::vector<std::string>& base, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"mgt-train"};
  args.insert(args.end(), base.begin(), base.end());
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return read_train_options(static_cast<int>(argv.size()), argv.data(), false);
}

std::int64_t vocab_of(const TrainOptions& o) { return make_tokenizer(o.data.tokenizer)->vocab_size(); }

StepEstimate estimate_for(const std::vector<std::string>& base, std::vector<std::string> extra, int world,
                          std::string_view gpu) {
  const TrainOptions o = parse_with(base, std::move(extra), world);
  const std::int64_t padded = padded_vocab_size(vocab_of(o), o.model.make_vocab_size_divisible_by,
                                                o.parallel.tensor_model_parallel_size);
  return estimate_step(step_cost_shape(o, gpt_config_from_options(o, padded)), *find_gpu_cost_constants(gpu));
}

PlannerTarget h200() {
  PlannerOptions p;
  p.gpu = "h200";
  return choose_planner_target(p, std::nullopt);
}

}  // namespace

TEST_CASE("cost model: the measured steps it is calibrated on", "[train][planner]") {
  // One H200, GPT 1.3B at micro-batch 4: 61,853 tokens/s measured.
  const StepEstimate one = estimate_for(kGpt13b, {}, 1, "h200");
  CHECK(one.tokens_per_second_per_gpu == Approx(61853).epsilon(0.05));
  // FP8 (hybrid): 70,612 measured in the same call as 62,132 for bf16.
  CHECK(estimate_for(kGpt13b, {"--fp8-format", "hybrid"}, 1, "h200").tokens_per_second_per_gpu ==
        Approx(70612).epsilon(0.05));
  // 4 × H200, the 8B shape: TP=4 SP with the distributed optimizer 8,092, TP=2 × PP=2 SP 8,645.
  const StepEstimate tp4 =
      estimate_for(kLlama8b, {"--tensor-model-parallel-size", "4", "--sequence-parallel", "--use-distributed-optimizer"}, 4, "h200");
  const StepEstimate tp2pp2 = estimate_for(
      kLlama8b, {"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2", "--sequence-parallel"}, 4, "h200");
  CHECK(tp4.tokens_per_second_per_gpu == Approx(8092).epsilon(0.05));
  CHECK(tp2pp2.tokens_per_second_per_gpu == Approx(8645).epsilon(0.05));
  CHECK(tp2pp2.step_seconds < tp4.step_seconds);  // the order measured
  // The parts add up; MFU is Megatron's FLOPs over the step.
  const double parts = tp2pp2.gemm_seconds + tp2pp2.attention_seconds + tp2pp2.memory_bound_seconds +
                       tp2pp2.tensor_parallel_seconds + tp2pp2.context_parallel_seconds +
                       tp2pp2.expert_parallel_seconds + tp2pp2.pipeline_send_seconds +
                       tp2pp2.bubble_seconds + tp2pp2.data_parallel_seconds + tp2pp2.optimizer_seconds;
  CHECK(parts == Approx(tp2pp2.step_seconds));
  CHECK(tp4.mfu == Approx(tp4.tokens_per_second_per_gpu / 8092 * 0.42).epsilon(0.03));
}

TEST_CASE("cost model: context parallelism and the interleaved schedule, against measured steps", "[train][planner]") {
  // 4 × H200, the 8B shape: PP=4 2.17 s a step, with two chunks per GPU 1.97 s; CP=4 with the
  // distributed optimizer and both overlaps 2.03 s.
  const StepEstimate pp4 = estimate_for(kLlama8b, {"--pipeline-model-parallel-size", "4"}, 4, "h200");
  const StepEstimate vp2 = estimate_for(
      kLlama8b, {"--pipeline-model-parallel-size", "4", "--num-layers-per-virtual-pipeline-stage", "4"}, 4, "h200");
  CHECK(pp4.step_seconds == Approx(2.17).epsilon(0.06));
  CHECK(vp2.step_seconds == Approx(1.97).epsilon(0.06));
  const StepEstimate cp4 = estimate_for(kLlama8b,
                                        {"--context-parallel-size", "4", "--use-distributed-optimizer",
                                         "--overlap-grad-reduce", "--overlap-param-gather"},
                                        4, "h200");
  CHECK(cp4.step_seconds == Approx(2.03).epsilon(0.10));
  CHECK(cp4.data_parallel_seconds > 0.1);  // 218 ms exposed, measured: the last backward is short
  CHECK(cp4.context_parallel_seconds == Approx(0.102).epsilon(0.25));
  // GPT 1.3B at micro-batch 1 on H200s: sequence 32k over CP=2 0.675 s, 64k over CP=4 1.065 s.
  const auto long_sequence = [](const char* seq, const char* cp, int world) {
    return estimate_for(kGpt13b,
                        {"--seq-length", seq, "--max-position-embeddings", seq, "--micro-batch-size", "1",
                         "--position-embedding-type", "rope", "--context-parallel-size", cp},
                        world, "h200");
  };
  CHECK(long_sequence("32768", "2", 2).step_seconds == Approx(0.675).epsilon(0.10));
  CHECK(long_sequence("65536", "4", 4).step_seconds == Approx(1.065).epsilon(0.05));
}

TEST_CASE("cost model: a mixture of experts, against measured steps", "[train][planner]") {
  // H200s, 32 sequences per GPU: the dense equivalent 2.23 s a step on one; the MoE model 2.65 s
  // on one, 2.85 s at EP=2 and 2.83 s at EP=4 (the router's load even by then), with the
  // distributed optimizer and both overlaps.
  const auto moe = [](const char* global, const char* ep, int world) {
    std::vector<std::string> flags = kExperts;
    flags.insert(flags.end(), {"--global-batch-size", global, "--expert-model-parallel-size", ep});
    if (world > 1)
      flags.insert(flags.end(), {"--use-distributed-optimizer", "--overlap-grad-reduce", "--overlap-param-gather"});
    return estimate_for(kMixtralSmall, flags, world, "h200");
  };
  const StepEstimate dense =
      estimate_for(kMixtralSmall, {"--ffn-hidden-size", "11264", "--global-batch-size", "32"}, 1, "h200");
  const StepEstimate one = moe("32", "1", 1), ep2 = moe("64", "2", 2), ep4 = moe("128", "4", 4);
  CHECK(dense.step_seconds == Approx(2.23).epsilon(0.10));
  CHECK(one.step_seconds == Approx(2.65).epsilon(0.10));
  CHECK(ep2.step_seconds == Approx(2.85).epsilon(0.12));
  CHECK(ep4.step_seconds == Approx(2.83).epsilon(0.10));
  CHECK(dense.step_seconds / one.step_seconds == Approx(2.23 / 2.65).epsilon(0.05));
  CHECK(one.expert_parallel_seconds == 0);
  // The all-to-alls: 374 ms per step at EP=4 (CUDA events), all exposed.
  CHECK(ep4.expert_parallel_seconds == Approx(0.374).epsilon(0.15));
  const double parts = ep4.gemm_seconds + ep4.attention_seconds + ep4.memory_bound_seconds + ep4.tensor_parallel_seconds +
                       ep4.context_parallel_seconds + ep4.expert_parallel_seconds + ep4.pipeline_send_seconds +
                       ep4.bubble_seconds + ep4.data_parallel_seconds + ep4.optimizer_seconds;
  CHECK(parts == Approx(ep4.step_seconds));
}

TEST_CASE("layout candidates: expert-parallel sizes for a mixture of experts only", "[train][planner]") {
  for (const LayoutChoice& l : enumerate_layouts(32, 8)) CHECK(l.expert_parallel == 1);
  bool seen = false;
  for (const LayoutChoice& l : enumerate_layouts(16, 8, 4)) {
    CHECK(4 % l.expert_parallel == 0);
    CHECK((l.data_parallel * l.context_parallel) % l.expert_parallel == 0);
    seen = seen || l.expert_parallel == 4;
  }
  CHECK(seen);
  std::vector<std::string> flags = kMixtralSmall;
  flags.insert(flags.end(), kExperts.begin(), kExperts.end());
  flags.insert(flags.end(), {"--global-batch-size", "128"});
  const TrainOptions raw = unvalidated(flags, {"--world-size", "4"});
  const TrainOptions validated = parse_with(flags, {"--world-size", "4"}, 4);
  std::int64_t expert_parallel = 0;
  for (const LayoutCandidate& c : layout_candidates(raw, validated, 4, vocab_of(raw))) {
    if (!c.refusal.empty()) continue;
    CHECK(layout_of(c.options) == c.layout);
    CHECK(c.options.moe.expert_model_parallel_size == c.layout.expert_parallel);
    if (c.layout.expert_parallel > 1) {
      ++expert_parallel;
      CHECK_THAT(layout_flags(c.layout),
                 Catch::Contains("--expert-model-parallel-size " + std::to_string(c.layout.expert_parallel)));
    }
  }
  CHECK(expert_parallel > 10);
  // The table has an EP column, the JSON an expert_model_parallel_size per layout.
  const LayoutPlan plan = plan_layouts(raw, validated, 4, vocab_of(raw), h200());
  REQUIRE(!plan.fitting.empty());
  std::ostringstream table;
  write_layout_plan_table(plan, table);
  CHECK_THAT(table.str(), Catch::Contains("  DP  EP  dist-opt"));
  CHECK_THAT(table.str(), Catch::Contains("tokens spread evenly over the experts"));
  CHECK_THAT(layout_plan_json(plan).dumps(), Catch::Contains("\"expert_model_parallel_size\": 4"));
}

TEST_CASE("cost model: bubble, recomputation, FP8, the slower H100", "[train][planner]") {
  const std::vector<std::string> pp2 = {"--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
                                        "--sequence-parallel"};
  const StepEstimate plain = estimate_for(kLlama8b, pp2, 4, "h200");
  // 8 micro-batches, 2 stages: the bubble is (p − 1)/(v·m) of the work, halved by 2 chunks.
  const double work = plain.step_seconds - plain.bubble_seconds - plain.optimizer_seconds - plain.data_parallel_seconds;
  CHECK(plain.bubble_seconds == Approx(work / 8));
  std::vector<std::string> interleaved = pp2;
  interleaved.insert(interleaved.end(), {"--num-virtual-stages-per-pipeline-rank", "2"});
  const StepEstimate chunks = estimate_for(kLlama8b, interleaved, 4, "h200");
  CHECK(chunks.bubble_seconds < 0.55 * plain.bubble_seconds);
  CHECK(chunks.step_seconds < plain.step_seconds);

  std::vector<std::string> selective = pp2, full = pp2;
  selective.insert(selective.end(), {"--recompute-granularity", "selective"});
  full.insert(full.end(), {"--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"});
  const StepEstimate s = estimate_for(kLlama8b, selective, 4, "h200");
  const StepEstimate f = estimate_for(kLlama8b, full, 4, "h200");
  CHECK(plain.step_seconds < s.step_seconds);
  CHECK(s.step_seconds < f.step_seconds);
  // Full recomputation runs the layers' forward again: about a third more of their work.
  CHECK(f.gemm_seconds == Approx(plain.gemm_seconds * 4 / 3).epsilon(0.05));

  std::vector<std::string> fp8 = pp2;
  fp8.insert(fp8.end(), {"--fp8-format", "hybrid"});
  const StepEstimate e = estimate_for(kLlama8b, fp8, 4, "h200");
  CHECK(e.gemm_seconds < 0.6 * plain.gemm_seconds);
  CHECK(e.memory_bound_seconds > plain.memory_bound_seconds);  // its casts
  CHECK(e.step_seconds < plain.step_seconds);

  CHECK(estimate_for(kLlama8b, pp2, 4, "h100").step_seconds > plain.step_seconds);  // less HBM bandwidth
}

TEST_CASE("layout candidates: only what mgt-train's checks accept", "[train][planner]") {
  const TrainOptions raw = unvalidated(kLlama8b, {"--world-size", "4"});
  const TrainOptions validated = parse_with(kLlama8b, {"--world-size", "4"}, 4);
  const std::vector<LayoutCandidate> candidates = layout_candidates(raw, validated, 4, vocab_of(raw));
  REQUIRE(candidates.size() == enumerate_layouts(32, 4).size());
  std::size_t accepted = 0;
  for (const LayoutCandidate& c : candidates) {
    const LayoutChoice& l = c.layout;
    CHECK(l.tensor_parallel * l.pipeline_parallel * l.context_parallel * l.data_parallel == 4);
    if (!c.refusal.empty()) continue;
    ++accepted;
    CHECK(32 % l.tensor_parallel == 0);
    CHECK(8 % l.tensor_parallel == 0);  // query groups
    CHECK(32 % (l.pipeline_parallel * l.virtual_pipeline) == 0);
    CHECK(8192 % (2 * l.context_parallel) == 0);
    const std::int64_t microbatches = 8 / l.data_parallel;
    if (l.virtual_pipeline > 1) CHECK(microbatches % l.pipeline_parallel == 0);
    CHECK((l.distributed_optimizer ? l.data_parallel * l.context_parallel > 1 : true));
    CHECK(layout_of(c.options) == l);
    // What the planner proposes, the trainer takes: validated again from its flags as parsed.
    TrainOptions again = options_for_layout(raw, validated, l);
    CHECK_NOTHROW(validate_train_options(again, 4));
    CHECK(c.memory.total_bytes > 0);
  }
  CHECK(accepted > 10);

  // Two query groups: TP=4 refused by the trainer's check, so never proposed.
  std::vector<std::string> two = kLlama8b;
  two[std::find(two.begin(), two.end(), "--num-query-groups") - two.begin() + 1] = "2";
  const TrainOptions raw2 = unvalidated(two, {"--world-size", "4"});
  for (const LayoutCandidate& c : layout_candidates(raw2, parse_with(two, {"--world-size", "4"}, 4), 4, vocab_of(raw2)))
    if (c.layout.tensor_parallel == 4) CHECK_THAT(c.refusal, Catch::Contains("--num-query-groups (2) must be divisible"));
}

TEST_CASE("layout plan: best first, within the memory, the flags' layout marked", "[train][planner]") {
  const std::vector<std::string> given = {"--world-size", "4", "--tensor-model-parallel-size", "4",
                                          "--sequence-parallel", "--use-distributed-optimizer"};
  const TrainOptions raw = unvalidated(kLlama8b, given);
  const TrainOptions validated = parse_with(kLlama8b, given, 4);
  const LayoutPlan plan = plan_layouts(raw, validated, 4, vocab_of(raw), h200());
  REQUIRE(!plan.fitting.empty());
  CHECK(plan.considered == plan.refused + plan.too_large + static_cast<std::int64_t>(plan.fitting.size()));
  for (std::size_t i = 1; i < plan.fitting.size(); ++i)
    CHECK(plan.fitting[i - 1].step.step_seconds <= plan.fitting[i].step.step_seconds);
  for (const PlannedLayout& p : plan.fitting) CHECK(p.memory.total_bytes <= plan.target.budget_bytes);
  // TP=4 with one data-parallel rank: the distributed optimizer shards nothing, listed as off.
  CHECK(std::count_if(plan.fitting.begin(), plan.fitting.end(), [](const PlannedLayout& p) { return p.given; }) == 1);
  CHECK(plan.given.layout.tensor_parallel == 4);
  CHECK(plan.given.step.tokens_per_second_per_gpu == Approx(8092).epsilon(0.05));

  // A smaller GPU: fewer layouts fit, and those that do within 90% of it.
  PlannerOptions small;
  small.gpu = "h200";
  small.gpu_memory_gib = 48;
  const LayoutPlan tight = plan_layouts(raw, validated, 4, vocab_of(raw), choose_planner_target(small, std::nullopt));
  CHECK(tight.too_large > plan.too_large);
  for (const PlannedLayout& p : tight.fitting) CHECK(p.memory.total_bytes <= 48.0 * 0.9 * 1024 * 1024 * 1024);

  std::ostringstream table;
  write_layout_plan_table(plan, table);
  CHECK_THAT(table.str(), Catch::Contains("<- flags given"));
  CHECK_THAT(table.str(), Catch::Matches("(.|\n)*\nestimated step: [0-9.]+(e-[0-9]+)? s \\(.*\n$"));
  const std::string json = layout_plan_json(plan).dumps();
  CHECK_THAT(json, Catch::Contains("\"given_layout\""));
}

TEST_CASE("planner target: an H100 80GB without a visible GPU, the visible one's memory otherwise", "[train][planner]") {
  const PlannerTarget none = choose_planner_target({}, std::nullopt);
  CHECK(none.gpu.key == "h100");
  CHECK(none.memory_bytes == static_cast<std::int64_t>(79.1 * 1024 * 1024 * 1024));
  CHECK(none.budget_bytes == static_cast<std::int64_t>(static_cast<double>(none.memory_bytes) * 0.9));
  CHECK_THAT(none.description, Catch::Contains("no GPU visible"));

  const PlannerTarget seen = choose_planner_target({}, VisibleGpu{"NVIDIA H200", 150109880320, 0});
  CHECK(seen.gpu.key == "h200");
  CHECK(seen.memory_bytes == 150109880320);
  const PlannerTarget other = choose_planner_target({}, VisibleGpu{"NVIDIA A100-SXM4-80GB", 85000000000, 1});
  CHECK(other.gpu.key == "h100");
  CHECK_THAT(other.description, Catch::Contains("no cost table of its own"));

  PlannerOptions named;
  named.gpu = "h200";
  named.gpu_memory_gib = 100;
  const PlannerTarget both = choose_planner_target(named, VisibleGpu{"NVIDIA H100 80GB HBM3", 85000000000, 0});
  CHECK(both.gpu.key == "h200");
  CHECK(both.memory_bytes == 100LL * 1024 * 1024 * 1024);
}

TEST_CASE("planner flags: for --dry-run, GPU runs, a positive world size", "[train][planner]") {
  std::vector<std::string> run(kLlama8b.begin(), kLlama8b.end() - 1);  // without --dry-run
  CHECK_THAT(usage_error_with(run, {"--world-size", "4"}), Catch::Contains("--world-size plans a layout: it needs --dry-run"));
  CHECK_THAT(usage_error_with(run, {"--planner-gpu", "h200"}), Catch::Contains("--planner-gpu needs --dry-run"));
  CHECK_THAT(usage_error_with(kLlama8b, {"--world-size", "0"}), Catch::Contains("--world-size"));
  CHECK_THAT(usage_error_with(kLlama8b, {"--planner-gpu", "a100"}), Catch::Contains("--planner-gpu"));
  CHECK_THAT(usage_error_with(kLlama8b, {"--planner-gpu-memory", "0"}), Catch::Contains("--planner-gpu-memory"));
  const TrainOptions o = parse_with(kLlama8b, {"--world-size", "4"}, 4);
  CHECK(planned_world_size(o, 1) == 4);
  CHECK(planned_world_size(o, 4) == 4);
  CHECK_THROWS_WITH(planned_world_size(o, 2), Catch::Contains("differs from the launcher's 2 ranks"));
  std::string why;
  CHECK(wants_layout_plan(o, false, false, &why));
  const TrainOptions lone = parse_with(kLlama8b, {"--device", "cuda"});
  CHECK_FALSE(wants_layout_plan(lone, false, false, &why));  // no launcher, no --world-size
  CHECK(wants_layout_plan(lone, true, false, &why));         // under a launcher
  const TrainOptions cpu = parse_with(kLlama8b, {"--device", "cpu"}, 2);
  CHECK_FALSE(wants_layout_plan(cpu, true, true, &why));
  // CPU ranks: --world-size checks the flags for that many ranks and plans nothing.
  const TrainOptions cpu_ranks = parse_with(kLlama8b, {"--world-size", "4", "--device", "cpu"}, 4);
  CHECK(planned_world_size(cpu_ranks, 1) == 4);
  CHECK_FALSE(wants_layout_plan(cpu_ranks, false, false, &why));
  CHECK_THAT(why, Catch::Contains("not --device cpu"));
}

}  // namespace mgt
