#include "core/megatron_compatibility.hpp"

#include <utility>

namespace mgt {

namespace {

IgnoredFlag switch_flag(std::string reason) { return {FlagArity::None, std::move(reason), {}, false, {}}; }
IgnoredFlag integer_flag(std::string reason, std::vector<std::string> choices = {}) {
  return {FlagArity::One, std::move(reason), std::move(choices), true, {}};
}
IgnoredFlag real_flag(std::string reason) { return {FlagArity::One, std::move(reason), {}, false, {}, true}; }
IgnoredFlag choice_flag(std::string reason, std::vector<std::string> choices,
                        std::map<std::string, std::string> refused_values = {}) {
  return {FlagArity::One, std::move(reason), std::move(choices), false, std::move(refused_values)};
}

std::map<std::string, IgnoredFlag> make_python_runtime_flags() {
  const std::string fusion = "a kernel-fusion choice; results agree up to rounding";
  const std::string gc = "mgt has no Python garbage collector to drive";
  const std::string timers = "mgt times whole iterations only";
  const std::string attention = "mgt chooses its attention kernel itself; results agree up to rounding";
  const std::string loss_fusion = "mgt's cross-entropy is always fused; the loss agrees up to rounding";
  const std::string scheduling = "it schedules communication only";
  const std::string unread = "Megatron-Core's GPT model and training loop do not read it; only its legacy model or "
                             "other tasks do";
  const std::string averaging = "where it divides the gradients for their average over the data-parallel ranks "
                                "is mgt's choice; the average agrees up to rounding";
  const std::string offload = "it pins the host buffers of the optimizer's CPU offload, which mgt does not do";
  const std::string memory_tools = "it drives PyTorch's memory snapshots; mgt's log reports its memory itself";
  const std::string wandb = "mgt does not log to Weights & Biases itself; Megatron logs there the scalars it writes to "
                            "TensorBoard, and `wandb sync --sync-tensorboard -p PROJECT DIR` uploads those of mgt's "
                            "--tensorboard-dir";
  const std::string resiliency = "it drives nvidia-resiliency-ext, a Python package mgt does not run; mgt ends a "
                                 "job whose communication waits past --distributed-timeout-minutes";
  return {
      {"--use-mcore-models", switch_flag("mgt's model is Megatron Core's GPT already")},
      {"--num-workers", integer_flag("mgt reads batches in its own prefetch thread")},
      {"--manual-gc", switch_flag(gc)},
      {"--manual-gc-interval", integer_flag(gc)},
      {"--no-manual-gc-eval", switch_flag(gc)},
      {"--empty-unused-memory-level",
       integer_flag("a PyTorch caching-allocator setting; it does not change results", {"0", "1", "2"})},
      {"--no-mmap-bin-files", switch_flag("mgt maps .bin files into memory; the data read is the same")},
      {"--cross-entropy-loss-fusion", switch_flag(loss_fusion)},
      {"--cross-entropy-fusion-impl", choice_flag(loss_fusion, {"native", "te"})},
      {"--attention-backend", choice_flag(attention, {"flash", "fused", "unfused", "local", "auto"})},
      {"--use-flash-attn", switch_flag(attention)},
      {"--no-create-attention-mask-in-dataloader", switch_flag("mgt's attention is causal without a mask tensor")},
      {"--distributed-backend",
       choice_flag("mgt communicates through NCCL on GPUs and MPI otherwise", {"nccl", "gloo"})},
      // Megatron's last versions with --data-impl read the mmap format only; lazy and cached
      // were an older file format.
      {"--data-impl", choice_flag("mgt reads Megatron's mmap indexed datasets, the only kind there is now",
                                  {"mmap", "infer"},
                                  {{"lazy", "the old IndexedDataset format is not read; tokenize the corpus again "
                                            "with mgt-tokenize (mmap format)"},
                                   {"cached", "the old IndexedDataset format is not read; tokenize the corpus "
                                              "again with mgt-tokenize (mmap format)"}})},
      {"--ckpt-format",
       choice_flag("mgt writes HDF5 checkpoints that reshard on load, in place of torch, torch_dist and torch_dcp",
                   {"torch", "torch_dist", "torch_dcp"},
                   {{"zarr", "Megatron deprecated the zarr backend; mgt's HDF5 checkpoints stand for torch, "
                             "torch_dist and torch_dcp"}})},
      {"--auto-detect-ckpt-format", switch_flag("mgt reads its own checkpoint format only")},
      {"--ckpt-fully-parallel-save", switch_flag("every rank writes its own part of mgt's checkpoints, always")},
      {"--no-ckpt-fully-parallel-save", switch_flag("every rank writes its own part of mgt's checkpoints, always")},
      {"--ckpt-fully-parallel-load", switch_flag("every rank reads its own part of mgt's checkpoints, always")},
      {"--ckpt-assume-constant-structure", switch_flag("it caches torch_dist's save plan; mgt's checkpoints have none")},
      {"--dist-ckpt-strictness",
       choice_flag("mgt loads a checkpoint only when its tensors are the model's by name and shape, and otherwise "
                   "stops naming the first difference",
                   {"assume_ok_unexpected", "log_unexpected", "log_all", "raise_unexpected", "raise_all",
                    "return_unexpected", "return_all", "ignore_all"})},
      {"--use-dist-ckpt", switch_flag("Megatron deprecated it; mgt's checkpoints are distributed (every rank writes its own part)")},
      {"--moe-extended-tp", switch_flag("Megatron-Core ignores it since v0.10; --expert-tensor-parallel-size took its "
                                        "place")},
      {"--moe-use-legacy-grouped-gemm",
       switch_flag("it picks among Megatron's grouped-GEMM implementations; mgt has one (--moe-grouped-gemm), and "
                   "results agree up to rounding")},
      {"--transformer-impl", choice_flag("mgt has one transformer implementation, with Megatron's local layer "
                                         "names; results agree up to rounding",
                                         {"local", "transformer_engine"})},
      {"--no-async-tensor-model-parallel-allreduce", switch_flag(scheduling)},
      {"--ddp-bucket-size", integer_flag(scheduling)},
      {"--ddp-num-buckets", integer_flag(scheduling)},
      {"--ddp-average-in-collective", switch_flag(averaging)},
      {"--no-gradient-reduce-div-fusion", switch_flag(averaging)},
      {"--ddp-pad-buckets-for-high-nccl-busbw", switch_flag(scheduling)},
      {"--no-align-grad-reduce", switch_flag(scheduling)},
      {"--no-align-param-gather", switch_flag(scheduling)},
      {"--overlap-param-gather-with-optimizer-step", switch_flag(scheduling)},
      {"--no-overlap-p2p-communication", switch_flag(scheduling)},
      {"--overlap-p2p-communication-warmup-flush", switch_flag(scheduling)},
      {"--no-scatter-gather-tensors-in-pipeline", switch_flag(scheduling)},
      {"--use-ring-exchange-p2p", switch_flag(scheduling)},
      {"--pipeline-model-parallel-comm-backend", choice_flag(scheduling, {"nccl", "ucc"})},
      {"--defer-embedding-wgrad-compute", switch_flag(scheduling)},
      {"--wgrad-deferral-limit", integer_flag(scheduling)},
      {"--train-sync-interval",
       integer_flag("it paces the host's waits for the GPU; mgt's host waits only where it reads results")},
      {"--nccl-communicator-config-path",
       choice_flag("it tunes NCCL's communicators; the collectives give the same results", {})},
      {"--disable-gloo-process-groups", switch_flag("mgt has no Gloo groups: its host collectives run over MPI")},
      {"--no-pin-cpu-grads", switch_flag(offload)},
      {"--no-pin-cpu-params", switch_flag(offload)},
      {"--init-model-with-meta-device",
       switch_flag("mgt allocates each rank's parameters where they live; the initial values are the same")},
      {"--record-memory-history", switch_flag(memory_tools)},
      {"--memory-snapshot-path", choice_flag(memory_tools, {})},
      {"--logging-level", integer_flag("it sets the level of Python's logging, which mgt does not use")},
      {"--log-straggler", switch_flag(resiliency)},
      {"--disable-straggler-on-startup", switch_flag(resiliency)},
      {"--straggler-ctrlr-port", integer_flag(resiliency)},
      {"--straggler-minmax-count", integer_flag(resiliency)},
      {"--enable-ft-package", switch_flag(resiliency)},
      {"--calc-ft-timeouts", switch_flag(resiliency)},
      {"--log-energy", switch_flag("mgt does not read the GPUs' energy counters; the results are the same")},
      // Megatron's rerun state machine (megatron/core/rerun_state_machine.py), off by default.
      {"--rerun-mode",
       choice_flag("mgt has no rerun state machine, and with 'disabled', the default, Megatron runs none either",
                   {"disabled"},
                   {{"validate_results", "re-running iterations to check their results is Megatron's rerun state "
                                         "machine, which mgt lacks; drop the flag (mgt skips the step of an "
                                         "iteration whose loss or gradients are not finite)"},
                    {"report_stats", "reporting the spread of re-run results is Megatron's rerun state machine, "
                                     "which mgt lacks; drop the flag"}})},
      {"--no-clone-scatter-output-in-embedding",
       switch_flag("it saves PyTorch autograd a copy of the embedding's output; mgt's embedding keeps none, and "
                   "the results are the same")},
      // Megatron logs to Weights & Biases only the scalars it writes to TensorBoard, and only when
      // it writes to TensorBoard (training.py training_log).
      {"--wandb-project", choice_flag(wandb, {})},
      {"--wandb-exp-name", choice_flag(wandb, {})},
      {"--wandb-save-dir", choice_flag(wandb, {})},
      // Parsed by Megatron's pretraining parser yet read by nothing of pretrain_gpt.py's Megatron-Core
      // model and training loop (core_v0.13.0: only the legacy model or other tasks read them).
      {"--apply-residual-connection-post-layernorm", switch_flag(unread)},
      {"--fp16-lm-cross-entropy", switch_flag(unread)},
      {"--rotary-seq-len-interpolation-factor", integer_flag(unread)},
      {"--head-lr-mult", real_flag(unread)},
      {"--onnx-safe", choice_flag(unread, {})},
      {"--no-initialization",
       switch_flag("mgt initialises the weights regardless, quickly, and a checkpoint --load reads replaces them")},
      {"--no-gradient-accumulation-fusion", switch_flag(fusion)},
      {"--no-masked-softmax-fusion", switch_flag(fusion)},
      {"--no-bias-gelu-fusion", switch_flag("the model's GELU form is read from its checkpoint")},
      {"--no-bias-swiglu-fusion", switch_flag(fusion)},
      {"--no-bias-dropout-fusion", switch_flag(fusion)},
      {"--no-rope-fusion", switch_flag(fusion)},
      {"--no-persist-layer-norm", switch_flag(fusion)},
      {"--timing-log-level", integer_flag(timers, {"0", "1", "2"})},
      {"--timing-log-option", choice_flag(timers, {"max", "minmax", "all"})},
      {"--no-barrier-with-level-1-timing", switch_flag(timers)},
      {"--no-one-logger", switch_flag("mgt has no One Logger telemetry to turn off")},
      // mgt-train's --profile and its step window map onto mgt's per-operation profile (its
      // own flags take precedence over these).
      {"--profile-step-start", integer_flag("only mgt-train profiles training steps")},
      {"--profile-step-end", integer_flag("only mgt-train profiles training steps")},
      {"--num-dataset-builder-threads", integer_flag("it parallelises building the indices; they are the same")},
      {"--use-pytorch-profiler", switch_flag("mgt has no PyTorch; it profiles with its own events")},
      // Numerics Megatron makes optional and mgt always has.
      {"--attention-softmax-in-fp32", switch_flag("mgt's attention computes its masking and softmax in fp32 always")},
      {"--apply-query-key-layer-scaling",
       switch_flag("mgt's attention accumulates Q*K^T and takes its softmax in fp32, where scaling by 1/layer number "
                   "and back (an fp16 safeguard) changes nothing")},
      {"--accumulate-allreduce-grads-in-fp32",
       switch_flag("mgt accumulates and reduces gradients in fp32 always (the reduction in bf16 under "
                   "--grad-reduce-in-bf16, which Megatron lets win too)")},
      {"--no-check-for-nan-in-loss-and-grad",
       switch_flag("mgt skips an update whose loss or gradient is not finite, warns, and stops after 10 in a row, "
                   "with the check or without it")},
      {"--use-cpu-initialization",
       switch_flag("mgt draws the initial parameters from its own counter-based generator: the same values on "
                   "every device and layout")},
  };
}

constexpr RenamedFlag kRenamed[] = {
    {"--batch-size", "--micro-batch-size", "Megatron replaced it with --micro-batch-size"},
    {"--model-parallel-size", "--tensor-model-parallel-size",
     "Megatron replaced it with --tensor-model-parallel-size"},
    {"--checkpoint-activations", "--recompute-activations",
     "Megatron replaced it with --recompute-activations, or --recompute-granularity and --recompute-method for "
     "more control"},
    {"--activations-checkpoint-method", "--recompute-method", "Megatron replaced it with --recompute-method"},
    {"--activations-checkpoint-num-layers", "--recompute-num-layers",
     "Megatron replaced it with --recompute-num-layers"},
    {"--warmup", "--lr-warmup-fraction", "Megatron replaced it with --lr-warmup-fraction"},
};

// Megatron flags that need a GPU feature mgt lacks, with what the feature is and what to do
// instead; refused by name rather than as flags mgt does not support, so that a user knows
// whether dropping the flag changes the results.
std::map<std::string, std::string> make_gpu_feature_flags() {
  // mgt-train defines the FP8 flags it implements; these texts are what the other programs say.
  const std::string fp8 = "FP8 is a training recipe of mgt-train; evaluation and generation compute in the "
                          "checkpoint's bf16/fp16 weights: drop the --fp8-* flags";
  const std::string bf16_layers = "it chooses layers of FP8 training (mgt-train); evaluation and generation "
                                  "compute in bf16/fp16: drop it";
  const std::string graphs = "CUDA graphs of the training step (PyTorch's graph capture) are what mgt lacks; drop "
                             "the flag: the step computes the same without them";
  const std::string userbuffers = "overlapping tensor-parallel communication with the GEMMs needs Transformer "
                                  "Engine's userbuffers, which mgt lacks; drop the flag: results are the same without it";
  return {
      {"--fp8-format", fp8},
      {"--fp8-recipe", fp8},
      {"--fp8-margin", fp8},
      {"--fp8-interval", fp8},
      {"--fp8-amax-history-len", fp8},
      {"--fp8-amax-compute-algo", fp8},
      {"--no-fp8-wgrad", fp8},
      {"--fp8-param-gather", fp8},
      {"--reuse-grad-buf-for-mxfp8-param-ag", "MXFP8 needs Blackwell GPUs, which mgt does not target; drop the flag"},
      {"--first-last-layers-bf16", bf16_layers},
      {"--num-layers-at-start-in-bf16", bf16_layers},
      {"--num-layers-at-end-in-bf16", bf16_layers},
      {"--enable-cuda-graph", graphs},
      {"--external-cuda-graph", graphs},
      {"--cuda-graph-scope", graphs},
      {"--cuda-graph-warmup-steps", graphs},
      {"--tp-comm-overlap", userbuffers},
      {"--tp-comm-overlap-cfg", userbuffers},
      {"--tp-comm-overlap-rs-dgrad", userbuffers},
      {"--tp-comm-bootstrap-backend", userbuffers},
      {"--disable-tp-comm-overlap-ag", userbuffers},
      {"--disable-tp-comm-overlap-rs", userbuffers},
      {"--disable-tp-comm-split-ag", userbuffers},
      {"--disable-tp-comm-split-rs", userbuffers},
      {"--disable-tp-comm-bulk-dgrad", userbuffers},
      {"--disable-tp-comm-bulk-wgrad", userbuffers},
      {"--use-sharp", "SHARP in-network reductions (InfiniBand switches, through NCCL's CollNet) are what mgt lacks; "
                      "drop the flag: the reductions give the same results without it"},
      {"--use-nccl-ub", "registering NCCL user buffers (NVLink SHARP on NVSwitch systems) is what mgt lacks; drop the "
                        "flag: the collectives give the same results without it"},
  };
}

}  // namespace

const std::map<std::string, std::string>& gpu_feature_flags() {
  static const std::map<std::string, std::string> flags = make_gpu_feature_flags();
  return flags;
}

const std::map<std::string, IgnoredFlag>& python_runtime_flags() {
  static const std::map<std::string, IgnoredFlag> flags = make_python_runtime_flags();
  return flags;
}

std::span<const RenamedFlag> renamed_megatron_flags() { return kRenamed; }

void add_megatron_compatibility_flags(CommandLineRules& rules) {
  for (const auto& [name, flag] : python_runtime_flags())
    if (!rules.known.count(name) && !rules.refused.count(name)) rules.ignored.emplace(name, flag);
  for (const auto& [name, reason] : gpu_feature_flags())
    if (!rules.known.count(name)) rules.refused.emplace(name, reason);
  for (const RenamedFlag& r : kRenamed)
    if (rules.known.count(r.successor) && !rules.known.count(r.name)) rules.refused.emplace(r.name, r.advice);
}

std::string ignored_flags_help(const CommandLineRules& rules) {
  if (rules.ignored.empty()) return "";
  std::string text =
      "Accepted and ignored, named on a start-up line (they tune how Megatron-LM runs, or ask for what mgt "
      "always computes):\n ";
  std::size_t column = 1;
  for (const auto& entry : rules.ignored) {
    const std::string& name = entry.first;
    if (column > 1 && column + 1 + name.size() > 100) {
      text += "\n ";
      column = 1;
    }
    text += " " + name;
    column += 1 + name.size();
  }
  return text + "\n";
}

CommandLineRules table_command_line_rules(std::span<const FlagDefinition> flags,
                                          std::map<std::string, std::string> refused) {
  CommandLineRules rules{flag_arities(flags), std::move(refused), true};
  rules.known["--version"] = FlagArity::None;  // answered before parsing (core/program_main.hpp)
  add_megatron_compatibility_flags(rules);
  return rules;
}

}  // namespace mgt
