#include "core/flag_ranges.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <limits>

#include "core/error.hpp"

namespace mgt {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Model dimensions and batch sizes: tensor shapes are products of them in 64-bit arithmetic,
// and kernels index rows of one dimension with 32-bit counts.
constexpr double kInt32Max = 2147483647.0;

struct Entry {
  std::string_view flag;
  FlagRange range;
};

constexpr FlagRange count_from(double min) { return {min, kInf, true, true, true}; }
constexpr FlagRange count_between(double min, double max) { return {min, max, true, true, true}; }
constexpr FlagRange size() { return count_between(1, kInt32Max); }
constexpr FlagRange at_least(double min) { return {min, kInf, true, true, false}; }
constexpr FlagRange above(double min) { return {min, kInf, false, true, false}; }
constexpr FlagRange fraction() { return {0, 1, true, false, false}; }      // [0, 1)
constexpr FlagRange probability() { return {0, 1, true, true, false}; }   // [0, 1]
// Megatron keeps loss scales in fp32 tensors: positive and finite there.
constexpr FlagRange loss_scale() { return {0, std::numeric_limits<float>::max(), false, true, false}; }

// Sorted by flag name (checked by a unit test). Megatron's meanings (arguments.py, core_v0.13.0),
// with the bounds its later asserts or the mathematics impose.
constexpr Entry kRanges[] = {
    {"--adam-beta1", fraction()},
    {"--adam-beta2", fraction()},
    {"--adam-eps", above(0)},
    {"--async-save-delay-ms", count_from(0)},
    {"--attention-dropout", fraction()},
    {"--ckpt-step", count_from(0)},
    {"--clip-grad", at_least(0)},
    {"--context-parallel-size", size()},
    {"--ddp-bucket-size", count_from(1)},
    {"--ddp-num-buckets", count_from(1)},
    {"--decoupled-lr", at_least(0)},
    {"--decoupled-min-lr", at_least(0)},
    {"--distributed-timeout-minutes", count_from(1)},
    {"--dump-count", count_from(0)},
    {"--end-weight-decay", at_least(0)},
    {"--eval-interval", count_from(1)},
    {"--eval-iters", count_from(0)},
    {"--exit-duration-in-mins", count_from(0)},
    {"--exit-interval", count_from(0)},
    {"--expert-model-parallel-size", size()},
    {"--expert-tensor-parallel-size", size()},
    {"--ffn-hidden-size", size()},
    {"--fp8-amax-history-len", count_from(1)},
    {"--fp8-interval", count_from(1)},
    {"--fp8-margin", count_from(0)},
    {"--global-batch-size", count_from(1)},
    {"--hidden-dropout", fraction()},
    {"--hidden-size", size()},
    {"--hysteresis", count_from(1)},
    {"--init-method-std", above(0)},
    {"--initial-loss-scale", loss_scale()},
    {"--kv-channels", size()},
    {"--log-interval", count_from(1)},
    {"--loss-scale", loss_scale()},
    {"--loss-scale-window", count_from(1)},
    {"--lr", at_least(0)},
    {"--lr-decay-iters", count_from(1)},
    {"--lr-decay-samples", count_from(1)},
    {"--lr-warmup-fraction", fraction()},
    {"--lr-warmup-iters", count_from(0)},
    {"--lr-warmup-samples", count_from(0)},
    {"--lr-wsd-decay-iters", count_from(1)},
    {"--lr-wsd-decay-samples", count_from(1)},
    {"--make-vocab-size-divisible-by", size()},
    {"--manual-gc-interval", count_from(0)},
    {"--max-new-tokens", count_between(0, kInt32Max)},
    {"--max-position-embeddings", size()},
    {"--max-queue-size", count_from(1)},
    {"--micro-batch-size", size()},
    {"--mid-level-dataset-surplus", at_least(0)},
    {"--min-loss-scale", loss_scale()},
    {"--min-lr", at_least(0)},
    {"--moe-ffn-hidden-size", size()},
    {"--moe-input-jitter-eps", above(0)},  // Uniform(1 - eps, 1 + eps) needs eps > 0
    {"--moe-router-group-topk", size()},
    {"--moe-router-num-groups", size()},
    {"--moe-router-topk", size()},
    {"--moe-shared-expert-intermediate-size", size()},
    {"--moe-upcycling-granularity", size()},
    {"--norm-epsilon", above(0)},
    {"--num-attention-heads", size()},
    {"--num-experts", count_from(0)},  // 0: no experts (Megatron turns it into None)
    {"--num-layers", size()},
    {"--num-layers-at-end-in-bf16", count_from(0)},
    {"--num-layers-at-start-in-bf16", count_from(0)},
    {"--num-query-groups", size()},
    {"--num-tokens-to-generate", count_between(0, kInt32Max)},
    {"--num-workers", count_from(0)},
    {"--overlapping-eval", count_from(1)},
    {"--partitions", count_between(1, 1 << 16)},
    {"--persistent-save-interval", count_from(1)},
    {"--pipeline-model-parallel-size", size()},
    {"--planner-gpu-memory", above(0)},
    {"--profile-ranks", count_from(0)},
    {"--profile-step-end", count_from(0)},
    {"--profile-step-start", count_from(0)},
    {"--recompute-num-layers", size()},
    {"--rope-scaling-factor", above(0)},
    {"--rotary-base", count_from(1)},
    {"--rotary-percent", {0, 1, false, true, false}},  // (0, 1]
    {"--save-interval", count_from(1)},
    {"--seed", count_between(0, 4294967295.0)},  // NumPy's RandomState takes 32-bit seeds
    {"--seq-length", count_between(1, kInt32Max - 1)},  // seq_length + 1 tokens per sample
    {"--start-weight-decay", at_least(0)},
    {"--target-pipeline-parallel-size", size()},
    {"--target-tensor-parallel-size", size()},
    {"--temperature", {0, 100, false, true, false}},  // (0, 100], as Megatron's generate asserts
    {"--tensor-model-parallel-size", size()},
    {"--tensorboard-log-interval", count_from(1)},
    {"--tensorboard-queue-size", count_from(1)},
    {"--tiktoken-num-special-tokens", count_between(0, 1 << 26)},
    {"--top-k", count_between(0, kInt32Max)},
    {"--top-p", probability()},
    {"--top-p-bound", probability()},
    {"--top-p-decay", probability()},
    {"--train-iters", count_from(1)},
    {"--train-samples", count_from(1)},
    {"--true-vocab-size", size()},
    {"--vocab-extra-ids", count_between(0, 1000000)},
    {"--vocab-size", count_between(1, kInt32Max - 1)},  // ids are 32-bit; NullTokenizer's eod is vocab-size
    {"--weight-decay", at_least(0)},
    {"--workers", count_from(1)},
    {"--world-size", size()},
};

std::string number(double v, bool integer) {
  char buffer[64];
  if (integer) std::snprintf(buffer, sizeof buffer, "%.0f", v);
  else std::snprintf(buffer, sizeof buffer, "%g", v);
  return buffer;
}

}  // namespace

bool FlagRange::contains(double value) const {
  const bool above_min = min_inclusive ? value >= min : value > min;
  const bool below_max = max_inclusive ? value <= max : value < max;
  return above_min && below_max;
}

std::string FlagRange::describe() const {
  const bool has_min = min > -kInf;
  const bool has_max = max < kInf;
  if (has_min && has_max) {
    if (integer && min_inclusive && max_inclusive)
      return "between " + number(min, true) + " and " + number(max, true);
    return std::string("in ") + (min_inclusive ? "[" : "(") + number(min, integer) + ", " + number(max, integer) +
           (max_inclusive ? "]" : ")");
  }
  if (has_min) return (min_inclusive ? "at least " : "greater than ") + number(min, integer);
  if (has_max) return (max_inclusive ? "at most " : "less than ") + number(max, integer);
  return "a number";
}

std::vector<std::string_view> flags_with_known_ranges() {
  std::vector<std::string_view> flags;
  for (const Entry& e : kRanges) flags.push_back(e.flag);
  return flags;
}

std::optional<FlagRange> known_flag_range(std::string_view flag) {
  const auto it = std::lower_bound(std::begin(kRanges), std::end(kRanges), flag,
                                   [](const Entry& e, std::string_view f) { return e.flag < f; });
  if (it == std::end(kRanges) || it->flag != flag) return std::nullopt;
  return it->range;
}

void check_flag_range(std::string_view flag, double value, std::string_view text) {
  const std::optional<FlagRange> range = known_flag_range(flag);
  if (!range || range->contains(value)) return;
  throw UsageError(std::string(flag) + " must be " + range->describe() + ", got " + std::string(text));
}

}  // namespace mgt
