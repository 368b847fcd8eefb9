#include "train/layout_candidates.hpp"

#include "core/error.hpp"
#include "core/log.hpp"
#include "tokenizer/tokenizer.hpp"
#include "train/gpt_config_from_options.hpp"
#include "train/train_memory.hpp"

namespace mgt {

namespace {

// Tensor parallelism beyond one node's NVLink domain (8 GPUs) is not planned.
constexpr std::int64_t kMaxTensorParallel = 8;

std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> d;
  for (std::int64_t i = 1; i <= n; ++i)
    if (n % i == 0) d.push_back(i);
  return d;
}

// The trainer's notes (sequence parallelism turned off, the batch size set) concern the user's
// flags, said once already: quiet while the candidates are validated.
class QuietLog {
 public:
  QuietLog() { log::set_min_level(log::Level::Error); }
  ~QuietLog() { log::set_min_level(log::Level::Info); }
  QuietLog(const QuietLog&) = delete;
  QuietLog& operator=(const QuietLog&) = delete;
};

}  // namespace

LayoutChoice layout_of(const TrainOptions& o) {
  const ParallelOptions& p = o.parallel;
  LayoutChoice l;
  l.tensor_parallel = p.tensor_model_parallel_size;
  l.pipeline_parallel = p.pipeline_model_parallel_size;
  l.virtual_pipeline = p.virtual_pipeline_model_parallel_size;
  l.context_parallel = p.context_parallel_size;
  l.data_parallel = p.data_parallel_size;
  l.expert_parallel = o.moe.expert_model_parallel_size;
  l.distributed_optimizer = p.use_distributed_optimizer && p.data_parallel_size * p.context_parallel_size > 1;
  l.recompute = o.model.recompute_granularity ? parse_recompute_granularity(*o.model.recompute_granularity)
                                              : RecomputeGranularity::kNone;
  return l;
}

std::string layout_flags(const LayoutChoice& l) {
  std::string f;
  auto add = [&](const std::string& flag) { f += (f.empty() ? "" : " ") + flag; };
  if (l.tensor_parallel > 1) add("--tensor-model-parallel-size " + std::to_string(l.tensor_parallel) + " --sequence-parallel");
  if (l.pipeline_parallel > 1) add("--pipeline-model-parallel-size " + std::to_string(l.pipeline_parallel));
  if (l.virtual_pipeline > 1) add("--num-virtual-stages-per-pipeline-rank " + std::to_string(l.virtual_pipeline));
  if (l.context_parallel > 1) add("--context-parallel-size " + std::to_string(l.context_parallel));
  if (l.expert_parallel > 1) add("--expert-model-parallel-size " + std::to_string(l.expert_parallel));
  if (l.distributed_optimizer) add("--use-distributed-optimizer");
  if (l.recompute == RecomputeGranularity::kSelective) add("--recompute-granularity selective");
  if (l.recompute == RecomputeGranularity::kFull)
    add("--recompute-granularity full --recompute-method uniform --recompute-num-layers 1");
  return f;
}

std::vector<LayoutChoice> enumerate_layouts(std::int64_t num_layers, int world_size, std::int64_t num_experts) {
  std::vector<LayoutChoice> out;
  const std::int64_t world = world_size;
  for (std::int64_t tp : divisors(world)) {
    if (tp > kMaxTensorParallel) break;
    for (std::int64_t pp : divisors(world / tp)) {
      if (num_layers % pp != 0) continue;
      for (std::int64_t cp : divisors(world / (tp * pp))) {
        const std::int64_t dp = world / (tp * pp * cp);
        std::vector<std::int64_t> chunks{1};
        if (pp > 1)
          for (std::int64_t v : divisors(num_layers / pp))
            if (v > 1) chunks.push_back(v);
        std::vector<std::int64_t> expert_sizes{1};
        for (std::int64_t ep : divisors(dp * cp))
          if (ep > 1 && num_experts > 0 && num_experts % ep == 0) expert_sizes.push_back(ep);
        for (std::int64_t vp : chunks)
          for (std::int64_t ep : expert_sizes)
            for (bool distributed : {false, true}) {
              if (distributed && dp * cp == 1) continue;
              for (RecomputeGranularity r :
                   {RecomputeGranularity::kNone, RecomputeGranularity::kSelective, RecomputeGranularity::kFull})
                out.push_back({tp, pp, vp, cp, dp, ep, distributed, r});
            }
      }
    }
  }
  return out;
}

TrainOptions options_for_layout(const TrainOptions& unvalidated, const TrainOptions& validated, const LayoutChoice& l) {
  TrainOptions o = unvalidated;
  ParallelOptions& p = o.parallel;
  p.tensor_model_parallel_size = l.tensor_parallel;
  p.pipeline_model_parallel_size = l.pipeline_parallel;
  p.context_parallel_size = l.context_parallel;
  p.sequence_parallel = l.tensor_parallel > 1;
  p.decoder_first_pipeline_num_layers.reset();
  p.decoder_last_pipeline_num_layers.reset();
  p.num_layers_per_virtual_pipeline_stage.reset();
  p.num_virtual_stages_per_pipeline_rank.reset();
  p.microbatch_group_size_per_virtual_pipeline_stage.reset();
  if (l.virtual_pipeline > 1) p.num_virtual_stages_per_pipeline_rank = l.virtual_pipeline;
  o.moe.expert_model_parallel_size = l.expert_parallel;
  o.moe.expert_tensor_parallel_size.reset();
  p.use_distributed_optimizer = l.distributed_optimizer;
  if (!l.distributed_optimizer) p.overlap_param_gather = false;
  ModelShapeOptions& m = o.model;
  m.recompute_activations = false;
  m.recompute_granularity.reset();
  m.recompute_method.reset();
  m.recompute_num_layers.reset();
  if (l.recompute == RecomputeGranularity::kSelective) {
    m.recompute_granularity = "selective";
  } else if (l.recompute == RecomputeGranularity::kFull) {
    m.recompute_granularity = "full";
    m.recompute_method = "uniform";
    m.recompute_num_layers = 1;
    m.recompute_modules.reset();
  }
  o.optim.global_batch_size = validated.optim.global_batch_size;
  return o;
}

std::vector<LayoutCandidate> layout_candidates(const TrainOptions& unvalidated, const TrainOptions& validated,
                                               int world_size, std::int64_t vocab_size) {
  std::vector<LayoutCandidate> out;
  const QuietLog quiet;
  for (const LayoutChoice& layout :
       enumerate_layouts(*validated.model.num_layers, world_size, validated.moe.num_experts.value_or(0))) {
    LayoutCandidate c;
    c.layout = layout;
    c.options = options_for_layout(unvalidated, validated, layout);
    try {
      validate_train_options(c.options, world_size);
      const std::int64_t padded = padded_vocab_size(vocab_size, c.options.model.make_vocab_size_divisible_by,
                                                    c.options.parallel.tensor_model_parallel_size);
      c.config = gpt_config_from_options(c.options, padded);
      c.memory = estimate_memory(c.config, train_memory_request(c.options, gpu_activation_type(c.options)));
    } catch (const Error& e) {
      c.refusal = e.what();
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace mgt
