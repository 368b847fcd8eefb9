#include "train/layout_planner.hpp"

#include <algorithm>
#include <memory>
#include <ostream>

#include "tokenizer/tokenizer.hpp"
#include "train/gpt_config_from_options.hpp"
#include "train/train_memory.hpp"

namespace mgt {

namespace {

PlannedLayout planned(const LayoutChoice& layout, const TrainOptions& options, const GptConfig& config,
                      const MemoryEstimate& memory, const PlannerTarget& target) {
  PlannedLayout p;
  p.layout = layout;
  p.memory = memory;
  p.step = estimate_step(step_cost_shape(options, config), target.gpu);
  p.fits = !memory.beyond_64_bits && memory.total_bytes <= target.budget_bytes;
  return p;
}

}  // namespace

LayoutPlan plan_layouts(const TrainOptions& unvalidated, const TrainOptions& validated, int world_size,
                        std::int64_t vocab_size, const PlannerTarget& target) {
  LayoutPlan plan;
  plan.world_size = world_size;
  plan.target = target;
  plan.experts = validated.moe.enabled();
  const LayoutChoice given = layout_of(validated);
  for (LayoutCandidate& c : layout_candidates(unvalidated, validated, world_size, vocab_size)) {
    ++plan.considered;
    if (!c.refusal.empty()) {
      ++plan.refused;
      continue;
    }
    PlannedLayout p = planned(c.layout, c.options, c.config, c.memory, target);
    if (!p.fits) {
      ++plan.too_large;
      continue;
    }
    p.given = c.layout == given;
    plan.fitting.push_back(std::move(p));
  }
  std::stable_sort(plan.fitting.begin(), plan.fitting.end(), [](const PlannedLayout& a, const PlannedLayout& b) {
    if (a.step.step_seconds != b.step.step_seconds) return a.step.step_seconds < b.step.step_seconds;
    return a.memory.total_bytes < b.memory.total_bytes;
  });

  // The flags' own layout, as they give it (an uneven first stage, no sequence parallelism ...).
  const std::int64_t padded = padded_vocab_size(vocab_size, validated.model.make_vocab_size_divisible_by,
                                                validated.parallel.tensor_model_parallel_size);
  const GptConfig config = gpt_config_from_options(validated, padded);
  plan.given = planned(given, validated, config, estimate_memory(config, train_memory_request(validated, gpu_activation_type(validated))), target);
  plan.given.given = true;

  // Where the model is known to err, from the measured steps it is checked against.
  if (plan.experts)
    plan.notes.push_back("a mixture of experts is estimated with its tokens spread evenly over the experts: while "
                         "the router's load is uneven, expert-parallel steps wait longer in the all-to-alls");
  if (std::any_of(plan.fitting.begin(), plan.fitting.end(),
                  [](const PlannedLayout& p) { return p.layout.context_parallel > 1; }))
    plan.notes.push_back("context parallelism's estimates came out 2-8% under the measured steps (CP=2 and CP=4 on "
                         "H200s): its attention in chunks is slower than whole");
  if (validated.optim.precision != Precision::Bf16)
    plan.notes.push_back("the estimates are of a --bf16 run (these flags compute in " +
                         std::string(validated.optim.precision == Precision::Fp16 ? "fp16" : "fp32") + ")");
  if (validated.parallel.tensor_model_parallel_size > 1 && !validated.parallel.sequence_parallel)
    plan.notes.push_back("the layouts with TP > 1 use --sequence-parallel, which the flags given do not");
  if (!validated.parallel.overlap_grad_reduce)
    plan.notes.push_back("the data-parallel reduction is counted whole after the backward; "
                         "--overlap-grad-reduce would hide most of it");
  return plan;
}

bool wants_layout_plan(const TrainOptions& o, bool launched, bool gpu_visible, std::string* why_not) {
  const bool gpu_run = o.device.rfind("cuda", 0) == 0 || (o.device == "auto" && gpu_visible);
  if (!o.planner.world_size && !(launched && gpu_run)) return false;
  // --world-size with CPU ranks checks the flags for that many ranks and gives their memory.
  if (o.device == "cpu") {
    if (why_not) *why_not = "no layouts planned: the planner's cost model is for GPUs, not --device cpu";
    return false;
  }
  return true;
}

std::optional<LayoutPlan> dry_run_layout_plan(const TrainOptions& unvalidated, const TrainOptions& validated,
                                              int world_size, bool launched, std::ostream& err) {
  // No device is touched (no CUDA context made) for a dry run that plans nothing.
  if (!validated.planner.world_size && !(launched && validated.device != "cpu")) return std::nullopt;
  const std::optional<VisibleGpu> gpu = query_visible_gpu(validated.device);
  std::string why_not;
  if (!wants_layout_plan(validated, launched, gpu.has_value(), &why_not)) {
    if (!why_not.empty()) err << "mgt-train --dry-run: " << why_not << "\n";
    return std::nullopt;
  }
  const std::unique_ptr<Tokenizer> tokenizer = make_tokenizer(validated.data.tokenizer);
  return plan_layouts(unvalidated, validated, world_size, tokenizer->vocab_size(),
                      choose_planner_target(validated.planner, gpu));
}

}  // namespace mgt
