#include "train/train_options.hpp"

#include <map>
#include <string_view>

#include "core/cxxopts_command_line.hpp"
#include "core/error.hpp"
#include "core/megatron_compatibility.hpp"
#include "kernels/backend_factory.hpp"
#include "tokenizer/tokenizer_flags.hpp"
#include "tokenizer/tokenizer_type_inference.hpp"

namespace mgt {

namespace {

constexpr const char* kProgram = "mgt-train";

struct OptionDef {
  const char* group;
  const char* name;  // without "--"
  FlagArity arity;
  const char* arg;   // shown in --help for flags with values
  const char* help;
};

// clang-format off
constexpr OptionDef kOptions[] = {
  {"model", "num-layers", FlagArity::One, "N", "Transformer layers (required)"},
  {"model", "hidden-size", FlagArity::One, "N", "Hidden size (required)"},
  {"model", "num-attention-heads", FlagArity::One, "N", "Attention heads (required)"},
  {"model", "ffn-hidden-size", FlagArity::One, "N", "MLP hidden size (default: 4 x hidden, or int(8 x hidden / 3 / 64) x 64 with --swiglu)"},
  {"model", "kv-channels", FlagArity::One, "N", "Channels per head (default: hidden / heads)"},
  {"model", "group-query-attention", FlagArity::None, "", "Grouped-query attention with --num-query-groups groups"},
  {"model", "num-query-groups", FlagArity::One, "N", "Key/value groups with --group-query-attention (default: 1)"},
  {"model", "seq-length", FlagArity::One, "N", "Tokens per sample (required)"},
  {"model", "max-position-embeddings", FlagArity::One, "N", "Position table size, >= --seq-length (required)"},
  {"model", "position-embedding-type", FlagArity::One, "TYPE", "learned_absolute, rope or none (default: learned_absolute)"},
  {"model", "rotary-percent", FlagArity::One, "F", "Fraction of each head rotated by RoPE (default: 1.0)"},
  {"model", "rotary-base", FlagArity::One, "N", "RoPE base (default: 10000)"},
  {"model", "use-rope-scaling", FlagArity::None, "", "Llama 3.1's scaling of the RoPE frequencies (low_freq_factor 1, high_freq_factor 4, original_max_position_embeddings 8192)"},
  {"model", "rope-scaling-factor", FlagArity::One, "F", "Its factor (default: 8.0)"},
  {"model", "normalization", FlagArity::One, "NORM", "LayerNorm or RMSNorm (default: LayerNorm)"},
  {"model", "norm-epsilon", FlagArity::One, "F", "Norm epsilon (default: 1e-05)"},
  {"model", "apply-layernorm-1p", FlagArity::None, "", "Norm weights stored zero-centred (initialised to 0), the norm scaling by 1 + weight"},
  {"model", "swiglu", FlagArity::None, "", "SwiGLU MLP"},
  {"model", "openai-gelu", FlagArity::None, "", "GELU by its tanh approximation, as OpenAI's GPT-2"},
  {"model", "no-bias-gelu-fusion", FlagArity::None, "",
   "GELU in its exact erf form instead of the tanh approximation that Megatron's fused bias-GELU computes"},
  {"model", "disable-bias-linear", FlagArity::None, "", "No biases in the linear layers"},
  {"model", "untie-embeddings-and-output-weights", FlagArity::None, "", "Separate output layer weights"},
  {"model", "hidden-dropout", FlagArity::One, "P", "Dropout after attention, MLP and embedding (default: 0.1)"},
  {"model", "attention-dropout", FlagArity::One, "P", "Dropout of attention probabilities (default: 0.1)"},
  {"model", "init-method-std", FlagArity::One, "F", "Standard deviation of initial weights (default: 0.02)"},
  {"model", "make-vocab-size-divisible-by", FlagArity::One, "N", "Pad the vocabulary to a multiple of N x TP (default: 128)"},
  {"model", "recompute-activations", FlagArity::None, "", "Selective activation recomputation"},
  {"model", "recompute-granularity", FlagArity::One, "G", "full or selective"},
  {"model", "recompute-method", FlagArity::One, "M", "uniform or block (with full granularity)"},
  {"model", "recompute-num-layers", FlagArity::One, "N", "Layers per recomputation unit (with full granularity)"},

  {"training", "micro-batch-size", FlagArity::One, "N", "Samples per micro-batch (required)"},
  {"training", "global-batch-size", FlagArity::One, "N", "Samples per iteration (default: micro-batch x data-parallel size)"},
  {"training", "train-iters", FlagArity::One, "N", "Iterations to train (required, or --train-samples)"},
  {"training", "train-samples", FlagArity::One, "N", "Samples to train (required, or --train-iters)"},
  {"training", "rampup-batch-size", FlagArity::Many, "START INCREMENT SAMPLES", "Ramp the global batch size up from START by INCREMENT over SAMPLES samples (with --train-samples)"},
  {"training", "lr", FlagArity::One, "F", "Peak learning rate (required)"},
  {"training", "min-lr", FlagArity::One, "F", "Learning rate at the end of the decay (default: 0.0)"},
  {"training", "decoupled-lr", FlagArity::One, "F", "Peak learning rate of the word embedding and output layer (default: --lr)"},
  {"training", "decoupled-min-lr", FlagArity::One, "F", "Their learning rate at the end of the decay (default: --min-lr)"},
  {"training", "lr-decay-style", FlagArity::One, "S", "constant, linear, cosine, inverse-square-root or WSD (default: linear)"},
  {"training", "lr-warmup-iters", FlagArity::One, "N", "Warm-up iterations (default: 0)"},
  {"training", "lr-warmup-fraction", FlagArity::One, "F", "Warm-up as a fraction of the decay"},
  {"training", "lr-warmup-samples", FlagArity::One, "N", "Warm-up samples (default: 0)"},
  {"training", "lr-warmup-init", FlagArity::One, "F", "Learning rate at the start of warm-up (default: 0.0)"},
  {"training", "lr-decay-iters", FlagArity::One, "N", "Decay iterations (default: --train-iters)"},
  {"training", "lr-decay-samples", FlagArity::One, "N", "Decay samples (default: --train-samples)"},
  {"training", "lr-wsd-decay-style", FlagArity::One, "S", "WSD annealing: exponential, linear, cosine or minus_sqrt (default: exponential)"},
  {"training", "lr-wsd-decay-iters", FlagArity::One, "N", "WSD annealing iterations"},
  {"training", "lr-wsd-decay-samples", FlagArity::One, "N", "WSD annealing samples"},
  {"training", "override-opt_param-scheduler", FlagArity::None, "", "On --load, keep the schedule of the flags"},
  {"training", "use-checkpoint-opt_param-scheduler", FlagArity::None, "", "On --load, take the schedule from the checkpoint"},
  {"training", "weight-decay", FlagArity::One, "F", "Weight decay (default: 0.01)"},
  {"training", "start-weight-decay", FlagArity::One, "F", "Initial weight decay (non-constant increment styles)"},
  {"training", "end-weight-decay", FlagArity::One, "F", "Final weight decay (non-constant increment styles)"},
  {"training", "weight-decay-incr-style", FlagArity::One, "S", "constant, linear or cosine (default: constant)"},
  {"training", "calculate-per-token-loss", FlagArity::None, "", "Normalise the loss by the global batch's tokens, not per micro-batch"},
  {"training", "clip-grad", FlagArity::One, "F", "Global gradient-norm clip, 0 for none (default: 1.0)"},
  {"training", "adam-beta1", FlagArity::One, "F", "Adam beta1 (default: 0.9)"},
  {"training", "adam-beta2", FlagArity::One, "F", "Adam beta2 (default: 0.999)"},
  {"training", "adam-eps", FlagArity::One, "F", "Adam epsilon (default: 1e-08)"},
  {"training", "optimizer", FlagArity::One, "NAME", "adam (AdamW), the only one (default: adam)"},
  {"training", "seed", FlagArity::One, "N", "Random seed (default: 1234)"},
  {"training", "device", FlagArity::One, "D", "mgt: auto (a GPU when one is visible), cpu, cuda or cuda:N (default: auto)"},
  {"training", "bf16", FlagArity::None, "", "bf16 compute on CUDA (the CPU backend computes in fp32)"},
  {"training", "fp16", FlagArity::None, "", "fp16 compute on CUDA (the CPU backend computes in fp32)"},

  {"data", "data-path", FlagArity::Many, "[W] PREFIX...", "Datasets, optionally weighted: 'W1 PREFIX1 W2 PREFIX2 ...' (required, or --data-args-path, the per-split paths or --mock-data)"},
  {"data", "data-args-path", FlagArity::One, "FILE", "File holding the --data-path list"},
  {"data", "split", FlagArity::One, "A,B,C", "Train, valid, test proportions (default: \"969, 30, 1\")"},
  {"data", "train-data-path", FlagArity::Many, "[W] PREFIX...", "Train split datasets, instead of --data-path"},
  {"data", "valid-data-path", FlagArity::Many, "[W] PREFIX...", "Validation split datasets"},
  {"data", "test-data-path", FlagArity::Many, "[W] PREFIX...", "Test split datasets"},
  {"data", "data-cache-path", FlagArity::One, "DIR", "Directory for the index files"},
  {"data", "mock-data", FlagArity::None, "", "Megatron's synthetic data instead of datasets (required without a data path)"},
  {"data", "mid-level-dataset-surplus", FlagArity::One, "F", "Extra fraction of samples per blended dataset (default: 0.005)"},
  {"data", "dataloader-type", FlagArity::One, "TYPE", "single, the only one (default: single)"},
  {"data", "tokenizer-type", FlagArity::One, "TYPE", "Tokenizer (GPT2BPETokenizer, NullTokenizer, ...) (required, unless --vocab-file and --merge-file name GPT2BPETokenizer)"},
  {"data", "vocab-file", FlagArity::One, "FILE", "Vocabulary file"},
  {"data", "merge-file", FlagArity::One, "FILE", "GPT-2 BPE merges file"},
  {"data", "vocab-size", FlagArity::One, "N", "Vocabulary size (NullTokenizer)"},
  {"data", "vocab-extra-ids", FlagArity::One, "N", "Extra <extra_id_i> tokens of the BERT tokenizers (default: 0)"},
  {"data", "tokenizer-model", FlagArity::One, "PATH", "SentencePiece .model, tokenizer.json (or its directory), or TikToken ranks"},
  {"data", "tiktoken-pattern", FlagArity::One, "V", "TikTokenizer regex: v1 or v2"},
  {"data", "tiktoken-num-special-tokens", FlagArity::One, "N", "TikTokenizer ids reserved for special tokens (default: 1000)"},
  {"data", "tiktoken-special-tokens", FlagArity::Many, "TOKEN...", "TikTokenizer special tokens"},
  {"data", "eod-mask-loss", FlagArity::None, "", "No loss on end-of-document input tokens"},
  {"data", "reset-position-ids", FlagArity::None, "", "Positions restart after each end of document"},
  {"data", "reset-attention-mask", FlagArity::None, "", "No attention across document boundaries"},

  {"checkpointing", "save", FlagArity::One, "DIR", "Checkpoint directory to write"},
  {"checkpointing", "save-interval", FlagArity::One, "N", "Iterations between checkpoints (needed with --save)"},
  {"checkpointing", "persistent-save-interval", FlagArity::One, "N", "Same as --save-interval"},
  {"checkpointing", "load", FlagArity::One, "DIR", "Checkpoint directory to resume from"},
  {"checkpointing", "no-save-optim", FlagArity::None, "", "Do not save the optimizer state"},
  {"checkpointing", "no-save-rng", FlagArity::None, "", "Do not save the random state"},
  {"checkpointing", "no-load-optim", FlagArity::None, "", "Do not load the optimizer state"},
  {"checkpointing", "no-load-rng", FlagArity::None, "", "Do not load the random state"},
  {"checkpointing", "finetune", FlagArity::None, "", "Load weights only and start at iteration 0"},

  {"logging", "log-interval", FlagArity::One, "N", "Iterations between log lines (default: 100)"},
  {"logging", "eval-interval", FlagArity::One, "N", "Iterations between validations (default: 1000)"},
  {"logging", "eval-iters", FlagArity::One, "N", "Iterations per validation (default: 100)"},
  {"logging", "exit-interval", FlagArity::One, "N", "Exit (after saving) when the iteration is a multiple of N"},
  {"logging", "exit-duration-in-mins", FlagArity::One, "N", "Exit (after saving) once N minutes have passed"},
  {"logging", "exit-signal-handler", FlagArity::None, "", "On the exit signal, save and exit after the current iteration"},
  {"logging", "exit-signal", FlagArity::One, "SIG", "mgt: the signal for --exit-signal-handler: SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2 or SIGXCPU (default: SIGTERM)"},
  {"logging", "log-throughput", FlagArity::None, "", "Log TFLOP/s per GPU"},
  {"logging", "profile", FlagArity::None, "", "Print the GPU time per backend operation at the end of the run (as MGT_CUDA_PROFILE=1; the CUDA backend only)"},
  {"logging", "profile-ranks", FlagArity::Many, "RANK...", "The ranks that --profile profiles (default: 0)"},
  {"logging", "log-params-norm", FlagArity::None, "", "Log the L2 norm of the parameters"},
  {"logging", "log-num-zeros-in-grad", FlagArity::None, "", "Log the number of zeros in the gradient"},
  {"logging", "metrics-file", FlagArity::One, "FILE", "mgt: append one JSON object per log line and validation"},
  {"logging", "tensorboard-dir", FlagArity::One, "DIR", "Write TensorBoard event files (scalars) to DIR"},
  {"logging", "tensorboard-log-interval", FlagArity::One, "N", "Iterations between TensorBoard training scalars (default: 1)"},
  {"logging", "tensorboard-queue-size", FlagArity::One, "N", "TensorBoard events buffered before a write (default: 1000; also written at each --log-interval)"},
  {"logging", "log-timers-to-tensorboard", FlagArity::None, "", "Write iteration-time (and throughput with --log-throughput) to TensorBoard"},
  {"logging", "no-log-learning-rate-to-tensorboard", FlagArity::None, "", "Do not write learning-rate to TensorBoard (older Megatron's flag)"},
  {"logging", "no-log-loss-scale-to-tensorboard", FlagArity::None, "", "Do not write loss-scale to TensorBoard"},
  {"logging", "log-validation-ppl-to-tensorboard", FlagArity::None, "", "Write validation perplexities to TensorBoard"},
  {"logging", "log-world-size-to-tensorboard", FlagArity::None, "", "Write world-size to TensorBoard"},

  {"parallelism", "tensor-model-parallel-size", FlagArity::One, "N", "Tensor-parallel size: ranks that split each layer"},
  {"parallelism", "pipeline-model-parallel-size", FlagArity::One, "N", "Pipeline-parallel size: stages of consecutive layers, 1F1B schedule"},
  {"parallelism", "decoder-first-pipeline-num-layers", FlagArity::One, "N", "Layers of the first pipeline stage (default: num-layers / PP)"},
  {"parallelism", "decoder-last-pipeline-num-layers", FlagArity::One, "N", "Layers of the last pipeline stage (default: num-layers / PP)"},
  {"parallelism", "context-parallel-size", FlagArity::One, "N", "Context-parallel size (1 only)"},
  {"parallelism", "sequence-parallel", FlagArity::None, "", "Sequence parallelism (needs tensor parallelism)"},
  {"parallelism", "use-distributed-optimizer", FlagArity::None, "", "Shard the optimizer state over data-parallel ranks"},
  {"parallelism", "overlap-grad-reduce", FlagArity::None, "", "Overlap the gradient reduction with the backward pass (accepted; not overlapped yet)"},
  {"parallelism", "overlap-param-gather", FlagArity::None, "", "Overlap the weight all-gather with the forward pass (accepted; not overlapped yet)"},
  {"parallelism", "distributed-backend", FlagArity::One, "B", "nccl (NCCL between GPUs, MPI for CPU ranks and ranks sharing a GPU) or gloo/mpi (MPI, device buffers staged through host memory) (default: nccl)"},
  {"parallelism", "distributed-timeout-minutes", FlagArity::One, "N", "End the job when a communication waits longer than N minutes (default: 10)"},

  {"other", "version", FlagArity::None, "", "Print the version and exit"},
  {"other", "dry-run", FlagArity::None, "", "mgt: print the parameter count and the memory per rank (JSON on stdout, a summary on stderr) and exit, reading no data"},
};
// clang-format on

std::map<std::string, FlagArity> known_flags() {
  std::map<std::string, FlagArity> known;
  for (const auto& o : kOptions) known[std::string("--") + o.name] = o.arity;
  return known;
}

cxxopts::Options make_cxxopts() {
  cxxopts::Options options(kProgram, "Pretrain a GPT model with Megatron-LM's flags and defaults.");
  options.custom_help("--num-layers N --hidden-size N --num-attention-heads N --seq-length N "
                      "--max-position-embeddings N --micro-batch-size N --lr F (--train-iters N | "
                      "--train-samples N) (--data-path [W] PREFIX... | --mock-data) --tokenizer-type TYPE "
                      "[options]");
  for (const auto& o : kOptions) {
    auto adder = options.add_options(o.group);
    switch (o.arity) {
      case FlagArity::None: adder(o.name, o.help); break;
      case FlagArity::One: adder(o.name, o.help, cxxopts::value<std::string>(), o.arg); break;
      case FlagArity::Many:
      case FlagArity::ManyAppending:
        adder(o.name, o.help, cxxopts::value<std::vector<std::string>>(), o.arg);
        break;
    }
  }
  options.add_options("other")("h,help", "Show this help");
  return options;
}

void read_model(const FlagValues& f, ModelShapeOptions& m) {
  f.set("num-layers", m.num_layers);
  f.set("hidden-size", m.hidden_size);
  f.set("num-attention-heads", m.num_attention_heads);
  f.set("ffn-hidden-size", m.ffn_hidden_size);
  f.set("kv-channels", m.kv_channels);
  f.set("group-query-attention", m.group_query_attention);
  f.set("num-query-groups", m.num_query_groups);
  f.set("seq-length", m.seq_length);
  f.set("max-position-embeddings", m.max_position_embeddings);
  f.set("position-embedding-type", m.position_embedding_type);
  f.set("rotary-percent", m.rotary_percent);
  f.set("rotary-base", m.rotary_base);
  f.set("use-rope-scaling", m.use_rope_scaling);
  f.set("rope-scaling-factor", m.rope_scaling_factor);
  f.set("normalization", m.normalization);
  f.set("norm-epsilon", m.norm_epsilon);
  f.set("apply-layernorm-1p", m.apply_layernorm_1p);
  f.set("swiglu", m.swiglu);
  f.set("openai-gelu", m.openai_gelu);
  if (f.has("disable-bias-linear")) m.add_bias_linear = false;
  if (f.has("no-bias-gelu-fusion")) m.bias_gelu_fusion = false;
  f.set("untie-embeddings-and-output-weights", m.untie_embeddings_and_output_weights);
  f.set("hidden-dropout", m.hidden_dropout);
  f.set("attention-dropout", m.attention_dropout);
  f.set("init-method-std", m.init_method_std);
  f.set("make-vocab-size-divisible-by", m.make_vocab_size_divisible_by);
  f.set("recompute-activations", m.recompute_activations);
  f.set("recompute-granularity", m.recompute_granularity);
  f.set("recompute-method", m.recompute_method);
  f.set("recompute-num-layers", m.recompute_num_layers);
}

void read_optimization(const FlagValues& f, OptimizationOptions& o) {
  f.set("micro-batch-size", o.micro_batch_size);
  f.set("global-batch-size", o.global_batch_size);
  f.set("train-iters", o.train_iters);
  f.set("train-samples", o.train_samples);
  if (f.has("rampup-batch-size")) o.rampup_batch_size = parse_rampup_batch_size(f.list("rampup-batch-size"));
  f.set("lr", o.lr);
  f.set("min-lr", o.min_lr);
  f.set("decoupled-lr", o.decoupled_lr);
  f.set("decoupled-min-lr", o.decoupled_min_lr);
  f.set("lr-decay-style", o.lr_decay_style);
  f.set("lr-warmup-iters", o.lr_warmup_iters);
  f.set("lr-warmup-fraction", o.lr_warmup_fraction);
  f.set("lr-warmup-samples", o.lr_warmup_samples);
  f.set("lr-warmup-init", o.lr_warmup_init);
  f.set("lr-decay-iters", o.lr_decay_iters);
  f.set("lr-decay-samples", o.lr_decay_samples);
  f.set("lr-wsd-decay-style", o.lr_wsd_decay_style);
  f.set("lr-wsd-decay-iters", o.lr_wsd_decay_iters);
  f.set("lr-wsd-decay-samples", o.lr_wsd_decay_samples);
  f.set("override-opt_param-scheduler", o.override_opt_param_scheduler);
  f.set("use-checkpoint-opt_param-scheduler", o.use_checkpoint_opt_param_scheduler);
  f.set("weight-decay", o.weight_decay);
  f.set("start-weight-decay", o.start_weight_decay);
  f.set("end-weight-decay", o.end_weight_decay);
  f.set("weight-decay-incr-style", o.weight_decay_incr_style);
  f.set("clip-grad", o.clip_grad);
  f.set("calculate-per-token-loss", o.calculate_per_token_loss);
  f.set("adam-beta1", o.adam_beta1);
  f.set("adam-beta2", o.adam_beta2);
  f.set("adam-eps", o.adam_eps);
  f.set("optimizer", o.optimizer);
  f.set("seed", o.seed);
  if (f.has("bf16") && f.has("fp16")) throw UsageError("--bf16 and --fp16 are mutually exclusive");
  if (f.has("bf16")) o.precision = Precision::Bf16;
  if (f.has("fp16")) o.precision = Precision::Fp16;
}

void read_data(const FlagValues& f, DataOptions& d) {
  f.set("data-path", d.data_path);
  f.set("data-args-path", d.data_args_path);
  f.set("split", d.split);
  f.set("train-data-path", d.train_data_path);
  f.set("valid-data-path", d.valid_data_path);
  f.set("test-data-path", d.test_data_path);
  f.set("data-cache-path", d.data_cache_path);
  f.set("mock-data", d.mock_data);
  f.set("mid-level-dataset-surplus", d.mid_level_dataset_surplus);
  f.set("dataloader-type", d.dataloader_type);
  f.set("tokenizer-type", d.tokenizer.type);
  f.set("vocab-file", d.tokenizer.vocab_file);
  f.set("merge-file", d.tokenizer.merge_file);
  f.set("vocab-size", d.tokenizer.vocab_size);
  set_tokenizer_model_flags(f, d.tokenizer);
  std::int64_t extra = d.tokenizer.vocab_extra_ids;
  f.set("vocab-extra-ids", extra);
  if (extra < 0 || extra > 1000000) throw UsageError("--vocab-extra-ids must be between 0 and 1000000");
  d.tokenizer.vocab_extra_ids = static_cast<int>(extra);
  infer_tokenizer_type_from_files(d.tokenizer, kProgram);
  f.set("eod-mask-loss", d.eod_mask_loss);
  f.set("reset-position-ids", d.reset_position_ids);
  f.set("reset-attention-mask", d.reset_attention_mask);
}

void read_checkpoint_and_logging(const FlagValues& f, CheckpointOptions& c, LoggingOptions& l) {
  f.set("save", c.save);
  // Megatron declares both names for one option; the later one on the line wins there too, but
  // giving both is almost certainly a mistake.
  if (f.has("save-interval") && f.has("persistent-save-interval"))
    throw UsageError("--save-interval and --persistent-save-interval are the same flag; give one");
  f.set("save-interval", c.save_interval);
  f.set("persistent-save-interval", c.save_interval);
  f.set("load", c.load);
  f.set("no-save-optim", c.no_save_optim);
  f.set("no-save-rng", c.no_save_rng);
  f.set("no-load-optim", c.no_load_optim);
  f.set("no-load-rng", c.no_load_rng);
  f.set("finetune", c.finetune);
  f.set("log-interval", l.log_interval);
  f.set("eval-interval", l.eval_interval);
  f.set("eval-iters", l.eval_iters);
  f.set("exit-interval", l.exit_interval);
  f.set("exit-duration-in-mins", l.exit_duration_in_mins);
  f.set("exit-signal-handler", l.exit_signal_handler);
  if (f.has("exit-signal") && !f.has("exit-signal-handler"))
    throw UsageError("--exit-signal needs --exit-signal-handler");
  f.set("exit-signal", l.exit_signal);
  f.set("log-throughput", l.log_throughput);
  f.set("profile", l.profile);
  if (f.has("profile-ranks")) {
    l.profile_ranks.clear();
    for (const std::string& rank : f.list("profile-ranks")) {
      const std::int64_t r = parse_integer_flag("--profile-ranks", rank);
      if (r < 0) throw UsageError("--profile-ranks: a rank is at least 0, not " + rank);
      l.profile_ranks.push_back(r);
    }
  }
  f.set("log-params-norm", l.log_params_norm);
  f.set("log-num-zeros-in-grad", l.log_num_zeros_in_grad);
  f.set("metrics-file", l.metrics_file);
  f.set("tensorboard-dir", l.tensorboard_dir);
  f.set("tensorboard-log-interval", l.tensorboard_log_interval);
  f.set("tensorboard-queue-size", l.tensorboard_queue_size);
  f.set("log-timers-to-tensorboard", l.log_timers_to_tensorboard);
  if (f.has("no-log-learning-rate-to-tensorboard")) l.log_learning_rate_to_tensorboard = false;
  if (f.has("no-log-loss-scale-to-tensorboard")) l.log_loss_scale_to_tensorboard = false;
  f.set("log-validation-ppl-to-tensorboard", l.log_validation_ppl_to_tensorboard);
  f.set("log-world-size-to-tensorboard", l.log_world_size_to_tensorboard);
}

void read_parallel(const FlagValues& f, ParallelOptions& p) {
  f.set("tensor-model-parallel-size", p.tensor_model_parallel_size);
  f.set("pipeline-model-parallel-size", p.pipeline_model_parallel_size);
  f.set("decoder-first-pipeline-num-layers", p.decoder_first_pipeline_num_layers);
  f.set("decoder-last-pipeline-num-layers", p.decoder_last_pipeline_num_layers);
  f.set("context-parallel-size", p.context_parallel_size);
  f.set("sequence-parallel", p.sequence_parallel);
  f.set("use-distributed-optimizer", p.use_distributed_optimizer);
  f.set("overlap-grad-reduce", p.overlap_grad_reduce);
  f.set("overlap-param-gather", p.overlap_param_gather);
  f.set("distributed-backend", p.distributed_backend);
  f.set("distributed-timeout-minutes", p.distributed_timeout_minutes);
}

CommandLineRules train_command_line_rules() {
  CommandLineRules rules;
  rules.known = known_flags();
  // Megatron's interleaved schedule (virtual pipeline stages) is not implemented.
  for (const char* flag : {"--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank"})
    rules.refused[flag] = "interleaved pipeline stages are not implemented; --pipeline-model-parallel-size runs "
                          "Megatron's non-interleaved 1F1B schedule";
  for (const char* flag : {"--wandb-project", "--wandb-exp-name", "--wandb-save-dir"})
    rules.refused[flag] = "Weights & Biases needs its network service; --tensorboard-dir DIR writes the same "
                          "scalars as TensorBoard event files";
  // Older Megatron's TensorBoard switches: core_v0.13 always writes the batch size.
  rules.ignored["--log-batch-size-to-tensorboard"] = {FlagArity::None, "batch-size is always written, as Megatron "
                                                      "core_v0.13 does", {}, false, {}};
  rules.ignored["--log-memory-to-tensorboard"] = {FlagArity::None, "mgt keeps no PyTorch memory statistics; no "
                                                  "mem-* scalars are written", {}, false, {}};
  add_megatron_compatibility_flags(rules);
  return rules;
}

}  // namespace

TrainOptions parse_train_options(int argc, const char* const* argv, int world_size) {
  TrainOptions o = read_train_options(argc, argv);
  if (!o.show_help) validate_train_options(o, world_size);
  return o;
}

TrainOptions read_train_options(int argc, const char* const* argv) {
  cxxopts::Options options = make_cxxopts();
  ParsedCommandLine parsed = parse_command_line(options, argc, argv, train_command_line_rules(), kProgram);
  const cxxopts::ParseResult& result = parsed.flags;
  TrainOptions o;
  if (result.count("help")) {
    o.show_help = true;
    return o;
  }
  o.ignored_flags = std::move(parsed.ignored);
  const FlagValues flags(result);
  read_model(flags, o.model);
  read_optimization(flags, o.optim);
  read_data(flags, o.data);
  read_checkpoint_and_logging(flags, o.checkpoint, o.logging);
  read_parallel(flags, o.parallel);
  flags.set("dry-run", o.dry_run);
  flags.set("device", o.device);
  check_device_name(o.device);
  return o;
}

std::string train_options_help() {
  return make_cxxopts().help({"model", "training", "data", "checkpointing", "logging", "parallelism", "other"}) +
         "\n" + ignored_flags_help(train_command_line_rules()) +
         "\nFlags are Megatron-LM's (pretrain_gpt.py), with its defaults; a Megatron flag that is "
         "not listed here is refused by name.\nSee man mgt-train(1).\n";
}

PipelineSplit pipeline_split(const ParallelOptions& p) {
  return {p.pipeline_model_parallel_size, p.decoder_first_pipeline_num_layers, p.decoder_last_pipeline_num_layers};
}

IndexOptions index_options(const TrainOptions& o) {
  IndexOptions x;
  x.data_path = o.data.data_path;
  x.data_args_path = o.data.data_args_path;
  x.train_data_path = o.data.train_data_path;
  x.valid_data_path = o.data.valid_data_path;
  x.test_data_path = o.data.test_data_path;
  x.split = o.data.split;
  x.seq_length = o.model.seq_length;
  x.seed = o.optim.seed;
  x.data_cache_path = o.data.data_cache_path;
  x.train_samples = o.optim.train_samples;
  x.train_iters = o.optim.train_iters;
  x.global_batch_size = o.optim.global_batch_size;
  x.micro_batch_size = o.optim.micro_batch_size;
  x.rampup_batch_size = o.optim.rampup_batch_size;
  x.eval_iters = o.logging.eval_iters;
  x.eval_interval = o.logging.eval_interval;
  x.mid_level_dataset_surplus = o.data.mid_level_dataset_surplus;
  x.tokenizer = o.data.tokenizer;
  x.eod_mask_loss = o.data.eod_mask_loss;
  x.reset_position_ids = o.data.reset_position_ids;
  x.reset_attention_mask = o.data.reset_attention_mask;
  return x;
}

}  // namespace mgt
