// The lines Megatron's training loop prints (megatron/training/training.py training_log,
// evaluate_and_print_results, print_datetime) formatted byte for byte, so that tools reading
// Megatron logs read mgt-train's; and the same values as JSON lines for --metrics-file.
#pragma once
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mgt {

// Named losses in the order they were first reported ("lm loss").
using LossValues = std::vector<std::pair<std::string, double>>;

// Megatron's total_loss_dict between two log lines: losses summed over the iterations that
// updated the model, counts of skipped (fp16 overflow) and NaN iterations.
class LossAccumulator {
public:
  // One iteration. A skipped iteration adds no loss; it counts as NaN if a loss is not finite.
  void add(const LossValues& losses, bool skipped);

  // Averages over the iterations that were not skipped (at least 1 as divisor).
  LossValues averages() const;
  std::int64_t advanced_iterations() const { return advanced_; }
  std::int64_t skipped_iterations() const { return skipped_; }
  std::int64_t nan_iterations() const { return nan_; }
  // Advanced + skipped: what the elapsed time is divided by.
  std::int64_t iterations() const { return advanced_ + skipped_; }
  void reset();

private:
  // Megatron sums into a float32 tensor; summing in float reproduces its averages exactly.
  std::vector<std::pair<std::string, float>> sums_;
  std::int64_t advanced_ = 0;
  std::int64_t skipped_ = 0;
  std::int64_t nan_ = 0;
};

struct IterationLog {
  std::int64_t iteration = 0;
  std::int64_t train_iters = 0;          // total iterations of the run
  std::int64_t consumed_samples = 0;
  std::int64_t skipped_samples = 0;      // printed only when positive
  double seconds_per_iteration = 0.0;    // elapsed time since the last log / iterations
  // With --log-throughput (see throughput_tflops_per_gpu): printed with one decimal as Megatron
  // does, or with two significant digits below 1 (0.0034), which one decimal would show as 0.0.
  std::optional<double> tflops_per_gpu;
  std::optional<double> learning_rate;   // absent on ranks without parameters
  std::optional<double> decoupled_learning_rate;  // --decoupled-lr: the embedding's and output layer's
  std::int64_t global_batch_size = 0;
  LossValues losses;                     // averaged; a loss is printed only when >= 0
  // --moe-per-layer-logging: the iteration's MoE losses per layer ("moe/load_balancing_loss_layer_0",
  // Megatron's TensorBoard names) for metrics.jsonl; the log line leaves them out, as Megatron's.
  LossValues moe_layer_losses;
  double loss_scale = 1.0;               // 1.0 without fp16 loss scaling
  std::optional<double> grad_norm;
  std::optional<double> num_zeros;       // --log-num-zeros-in-grad (a float in Megatron)
  std::optional<double> params_norm;     // --log-params-norm
  std::int64_t skipped_iterations = 0;
  std::int64_t nan_iterations = 0;
  // For the metrics file only.
  std::int64_t seq_length = 0;           // tokens per sample, for tokens per second
  // Collectives queued on the device (NCCL), per iteration and group: their time (on the
  // communication stream for the started ones of --overlap-grad-reduce / --overlap-param-gather,
  // on the compute stream for the others) and the part of it the compute stream waited for (all
  // of the latter's).
  std::optional<double> data_parallel_comm_ms;
  std::optional<double> data_parallel_comm_exposed_ms;
  std::optional<double> tensor_parallel_comm_ms;
  std::optional<double> tensor_parallel_comm_exposed_ms;
  std::optional<double> pipeline_parallel_comm_ms;
  std::optional<double> pipeline_parallel_comm_exposed_ms;
  // Context parallelism's ring (the keys and values passed beside the attention).
  std::optional<double> context_parallel_comm_ms;
  std::optional<double> context_parallel_comm_exposed_ms;
  // Expert parallelism's token dispatch (the all-to-alls or all-gathers around the experts).
  std::optional<double> expert_parallel_comm_ms;
  std::optional<double> expert_parallel_comm_exposed_ms;
  // The same per operation ("all_gather", "send_recv", …) and where it ran.
  struct CommPart {
    std::string operation;
    bool beside = false;  // started beside the compute, else on the compute stream
    double ms = 0.0;
    double exposed_ms = 0.0;
    double count = 0.0;  // operations per iteration
  };
  std::vector<CommPart> data_parallel_comm_parts;
  std::vector<CommPart> tensor_parallel_comm_parts;
  std::vector<CommPart> pipeline_parallel_comm_parts;
  std::vector<CommPart> context_parallel_comm_parts;
  std::vector<CommPart> expert_parallel_comm_parts;
  // Per iteration, the device's time in the step's phases (Megatron's level-1 timers
  // forward-backward, all-grads-sync and optimizer), from queue events.
  std::optional<double> forward_backward_ms;
  std::optional<double> grads_sync_ms;
  std::optional<double> optimizer_ms;
};

// Megatron's throughput: FLOPs of one iteration / (seconds per iteration × 10¹² × world size).
double throughput_tflops_per_gpu(double flops_per_iteration, double seconds_per_iteration, std::int64_t world_size);

// "2024-05-01 12:34:56.123456": datetime.now().strftime('%Y-%m-%d %H:%M:%S.%f'), local time.
std::string log_timestamp(std::chrono::system_clock::time_point when);

// " [TIMESTAMP] iteration        N/       T | consumed samples: ... | number of nan iterations:   0 |"
std::string format_iteration_line(const IterationLog& log, const std::string& timestamp);

// Megatron's report_memory line after the first logged iteration, sizes in bytes:
// "[Rank 0] (after 1 iterations) memory (MB) | allocated: … | max allocated: … | reserved: … |
// max reserved: …", the MiB as Python prints floats.
std::string format_memory_report(std::int64_t rank, std::int64_t iteration, std::int64_t allocated,
                                 std::int64_t max_allocated, std::int64_t reserved, std::int64_t max_reserved);

// The three lines (dashes, values, dashes; each ending in '\n') of evaluate_and_print_results:
// " validation loss at PREFIX | lm loss value: V | lm loss PPL: P | ", PPL = exp(min(20, V)).
std::string format_validation_block(const std::string& prefix, const LossValues& losses);
// The prefixes Megatron uses: "iteration N" during training, and after it
// "iteration N on validation set" / "iteration N on test set".
std::string validation_prefix(std::int64_t iteration);
std::string validation_set_prefix(std::int64_t iteration);
std::string test_set_prefix(std::int64_t iteration);

// "[WHAT] datetime: TIMESTAMP " (print_datetime), e.g. WHAT = "after training is done".
std::string format_datetime_line(const std::string& what, const std::string& timestamp);

// " > padded vocab (size: 50257) with 47 dummy tokens (new size: 50304)"
std::string format_padded_vocab_line(std::int64_t vocab_size, std::int64_t padded_vocab_size);
// "> building GPT2BPETokenizer tokenizer ..."
std::string format_building_tokenizer_line(const std::string& tokenizer_type);

// JSON objects for --metrics-file, one per line (no trailing newline), keys in a fixed order:
// {"event": "train", "iteration", "train_iters", "consumed_samples", "skipped_samples",
//  "elapsed_ms_per_iteration", "tokens_per_second", ["tflops_per_gpu",] ["learning_rate",]
//  ["decoupled_learning_rate",]
//  "global_batch_size", "lm_loss" (each loss, spaces as '_'), "loss_scale", ["grad_norm",]
//  ["num_zeros",] ["params_norm",] "skipped_iterations", "nan_iterations",
//  ["data_parallel_comm_ms", "data_parallel_comm_exposed_ms",] ["tensor_parallel_comm_ms",
//  "tensor_parallel_comm_exposed_ms",] ["pipeline_parallel_comm_ms",
//  "pipeline_parallel_comm_exposed_ms",] ["context_parallel_comm_ms",
//  "context_parallel_comm_exposed_ms",] ["expert_parallel_comm_ms", "expert_parallel_comm_exposed_ms",]
//  ["forward_backward_ms", "grads_sync_ms", "optimizer_ms",]
//  ["data_parallel_comm_by_operation", "tensor_parallel_comm_by_operation",
//  "pipeline_parallel_comm_by_operation", "context_parallel_comm_by_operation",
//  "expert_parallel_comm_by_operation"] ({"all_gather beside": {"ms", "exposed_ms", "count"},
//  "all_reduce on stream": {…}, …}, per iteration), "timestamp"}.
// Non-finite numbers are written as null (JSON has no NaN).
std::string iteration_metrics_json(const IterationLog& log, const std::string& timestamp);
// {"event": "validation"|"test", "iteration", "lm_loss", "lm_loss_ppl", ..., "timestamp"}
std::string validation_metrics_json(const std::string& event, std::int64_t iteration, const LossValues& losses,
                                    const std::string& timestamp);

}  // namespace mgt
