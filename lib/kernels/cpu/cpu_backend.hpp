// The reference backend: host memory, fp32, the mgt::cpu kernels (OpenBLAS for GEMM).
#pragma once
#include <memory>
#include <string>

#include "kernels/backend.hpp"
#include "kernels/cpu/host_op_profiler.hpp"
#include "kernels/thread_pool.hpp"

namespace mgt {

// GEMMs run on OpenBLAS's threads; the row- and element-wise operations on the backend's own
// pool of `threads` (results do not depend on the count).
class CpuBackend : public Backend {
public:
  explicit CpuBackend(int threads = default_cpu_threads()) : pool_(threads) {}
  // Prints the --profile table (start_profile) on standard error.
  ~CpuBackend() override;
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;
  std::string name() const override { return "cpu"; }
  std::string description() const override {
    return "cpu (" + std::to_string(threads()) + " threads), fp32, OpenBLAS GEMMs, tiled attention";
  }
  int threads() const { return pool_.size(); }
  std::optional<AvailableMemory> available_memory() const override { return available_host_memory(); }
  // BackendOptions::profile: from now on every operation is timed (cpu/host_op_profiler.hpp),
  // and the table is printed when the backend is destroyed. `timeline`: --profile-timeline.
  void start_profile(std::string timeline);
  void set_profiling(bool on) override;

private:
  // body(begin, end) over [0, n) on the pool, ranges of at least `grain` items.
  void parallel(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
    pool_.for_each_range(n, grain, body);
  }

  ThreadPool pool_;
  std::unique_ptr<cpu::HostOpProfiler> profiler_;  // null: no --profile

  void* do_allocate(size_t bytes) override;
  void do_free(void* data, size_t bytes) noexcept override;
  void do_copy_from_host(const void* host, void* device, size_t bytes) override;
  void do_copy_to_host(const void* device, void* host, size_t bytes) override;
  void do_copy(ConstFloatArg src, FloatArg dst, int64_t n) override;
  void do_convert(ConstFloatView src, FloatView dst) override;
  void do_fill(FloatArg x, int64_t n, float value) override;

  void do_linear_forward(ConstFloatArg x, ConstFloatArg w, ConstFloatArg bias, int64_t rows,
                         int64_t in, int64_t out, FloatArg y) override;
  void do_linear_backward_input(ConstFloatArg dy, ConstFloatArg w, int64_t rows, int64_t in,
                                int64_t out, FloatArg dx) override;
  void do_linear_backward_weight(ConstFloatArg dy, ConstFloatArg x, int64_t rows, int64_t in,
                                 int64_t out, FloatArg dw, bool accumulate) override;
  void do_bias_backward(ConstFloatArg dy, int64_t rows, int64_t cols, FloatArg dbias, bool accumulate) override;
  void do_linear_forward_fp64(ConstFloatArg x, ConstFloatArg w, int64_t rows, int64_t in, int64_t out,
                              FloatArg y) override;
  void do_linear_backward_fp64(ConstFloatArg dy, ConstFloatArg x, ConstFloatArg w, int64_t rows, int64_t in,
                               int64_t out, FloatArg dx, FloatArg dw, bool accumulate) override;

  void do_fp8_quantize(ConstFloatArg x, int64_t rows, int64_t cols, const Fp8Scaling& scaling,
                       Fp8View rowwise, Fp8View transposed) override;
  void do_fp8_linear(ConstFp8View x, ConstFp8View w, ConstFloatArg bias, int64_t rows, int64_t in, int64_t out,
                     FloatArg y, bool accumulate, Fp8GemmRole role) override;
  void do_fp8_scaling_update(FloatView history, FloatView scale, int64_t tensors, int64_t history_len,
                             Fp8AmaxAlgo algo, float scaled_max) override;

  void do_layer_norm_forward(ConstFloatArg x, ConstFloatArg weight, ConstFloatArg bias, int64_t rows,
                             int64_t hidden, float eps, FloatArg y, FloatArg mean,
                             FloatArg rstd) override;
  void do_layer_norm_backward(ConstFloatArg dy, ConstFloatArg x, ConstFloatArg weight,
                              ConstFloatArg mean, ConstFloatArg rstd, int64_t rows, int64_t hidden,
                              FloatArg dx, FloatArg dweight, FloatArg dbias, bool accumulate_dx,
                              bool accumulate_params) override;
  void do_rms_norm_forward(ConstFloatArg x, ConstFloatArg weight, int64_t rows, int64_t hidden,
                           float eps, FloatArg y, FloatArg rstd) override;
  void do_rms_norm_backward(ConstFloatArg dy, ConstFloatArg x, ConstFloatArg weight, ConstFloatArg rstd,
                            int64_t rows, int64_t hidden, FloatArg dx, FloatArg dweight,
                            bool accumulate_dx, bool accumulate_params) override;

  void do_gelu_forward(ConstFloatArg x, int64_t n, FloatArg y) override;
  void do_gelu_backward(ConstFloatArg dy, ConstFloatArg x, int64_t n, FloatArg dx) override;
  void do_squared_relu_forward(ConstFloatArg x, int64_t n, FloatArg y) override;
  void do_squared_relu_backward(ConstFloatArg dy, ConstFloatArg x, int64_t n, FloatArg dx) override;
  void do_gelu_tanh_forward(ConstFloatArg x, int64_t n, FloatArg y) override;
  void do_gelu_tanh_backward(ConstFloatArg dy, ConstFloatArg x, int64_t n, FloatArg dx) override;
  void do_swiglu_forward(ConstFloatArg x, int64_t rows, int64_t ffn, FloatArg y) override;
  void do_swiglu_backward(ConstFloatArg dy, ConstFloatArg x, int64_t rows, int64_t ffn,
                          FloatArg dx) override;

  void do_dropout_forward(ConstFloatArg x, int64_t n, float p, DropoutKey key, FloatArg y) override;
  void do_uniform_jitter(ConstFloatArg x, int64_t n, float eps, DropoutKey key, FloatArg y) override;
  void do_standard_normal(int64_t n, DropoutKey key, FloatArg y) override;
  void do_dropout_backward(ConstFloatArg dy, int64_t n, float p, DropoutKey key, FloatArg dx) override;

  void do_embedding_forward(const int64_t* ids, int64_t n, ConstFloatArg table, int64_t vocab_start,
                            int64_t local_rows, int64_t hidden, FloatArg out) override;
  void do_embedding_backward(const int64_t* ids, int64_t n, ConstFloatArg dout, int64_t vocab_start,
                             int64_t local_rows, int64_t hidden, FloatArg dtable) override;

  void do_rotary_forward(ConstFloatArg x, const HeadTensor& shape, const RotaryParams& params,
                         FloatArg y) override;
  void do_rotary_backward(ConstFloatArg dy, const HeadTensor& shape, const RotaryParams& params,
                          FloatArg dx) override;

  void do_attention_forward(ConstFloatArg q, ConstFloatArg k, ConstFloatArg v,
                            const AttentionShape& shape, const AttentionParams& params, FloatArg out,
                            FloatArg lse) override;
  void do_attention_backward(ConstFloatArg q, ConstFloatArg k, ConstFloatArg v, ConstFloatArg out,
                             ConstFloatArg dout, ConstFloatArg lse, const AttentionShape& shape,
                             const AttentionParams& params, FloatArg dq, FloatArg dk,
                             FloatArg dv) override;

  void do_qkv_split(ConstFloatArg mixed, int64_t tokens, int64_t heads, int64_t groups, int64_t unit,
                    FloatArg q, FloatArg k, FloatArg v) override;
  void do_qkv_merge(ConstFloatArg q, ConstFloatArg k, ConstFloatArg v, int64_t tokens, int64_t heads,
                    int64_t groups, int64_t unit, FloatArg mixed) override;

  void do_cross_entropy_shard_statistics(ConstFloatArg logits, const int64_t* targets, int64_t rows,
                                         int64_t vocab, int64_t vocab_start,
                                         FloatArg statistics) override;
  void do_cross_entropy_combine(ConstFloatArg statistics, int64_t ranks, int64_t rows,
                                FloatArg loss, FloatArg row_max, FloatArg sum_exp) override;
  void do_cross_entropy_forward(ConstFloatArg logits, const int64_t* targets, int64_t rows,
                                int64_t vocab, FloatArg loss, FloatArg row_max,
                                FloatArg sum_exp) override;
  void do_cross_entropy_backward(ConstFloatArg logits, const int64_t* targets, ConstFloatArg row_max,
                                 ConstFloatArg sum_exp, ConstFloatArg dloss, int64_t rows,
                                 int64_t vocab, int64_t vocab_start, FloatArg dlogits) override;
  MaskedLossSum do_masked_loss_sum(ConstFloatArg loss, ConstFloatArg loss_mask,
                                   int64_t rows) override;
  void do_row_argmax(ConstFloatArg x, int64_t rows, int64_t cols, int64_t row_stride,
                     int64_t* out) override;
  void do_masked_loss_grad(ConstFloatArg loss_mask, int64_t rows, float scale,
                           FloatArg dloss) override;

  void do_add_bias(FloatArg y, ConstFloatArg bias, int64_t rows, int64_t cols) override;
  void do_add(ConstFloatArg a, ConstFloatArg b, ConstFloatArg c, int64_t n, FloatArg out) override;
  void do_accumulate(FloatArg y, ConstFloatArg x, int64_t n) override;
  void do_attention_merge(ConstFloatArg part_out, ConstFloatArg part_lse, const HeadTensor& whole,
                          int64_t first_row, int64_t part_rows, FloatArg out, FloatArg lse) override;
  void do_scale(FloatArg x, int64_t n, float factor) override;
  void do_moe_route(ConstFloatArg logits, const MoeRoutingParams& p, FloatArg gates, FloatArg probs,
                    FloatArg routing_map, FloatArg aux_counts, double* statistics, bool accumulate) override;
  void do_moe_sinkhorn(ConstFloatArg logits, int64_t tokens, int64_t experts, FloatArg out) override;
  void do_moe_route_backward(ConstFloatArg logits, const MoeRoutingParams& p, ConstFloatArg d_probs,
                             ConstFloatArg routing_map, ConstFloatArg aux_counts, float aux_grad, float z_grad,
                             FloatArg d_logits) override;
  void do_gather_rows(ConstFloatArg in, int64_t in_rows, int64_t cols, const int64_t* index, int64_t out_rows,
                      ConstFloatArg weights, FloatArg out) override;
  void do_gather_sum_rows(ConstFloatArg in, int64_t in_rows, int64_t cols, const int64_t* index, int64_t out_rows,
                          int64_t k, ConstFloatArg weights, FloatArg out) override;
  void do_row_dot(ConstFloatArg a, ConstFloatArg b, int64_t rows, int64_t cols, FloatArg out) override;
  void do_scale_rows(ConstFloatArg x, ConstFloatArg factors, int64_t rows, int64_t cols, FloatArg out) override;

  void do_adamw_step(FloatArg param, ConstFloatArg grad, FloatArg exp_avg, FloatArg exp_avg_sq, int64_t n,
                     const AdamWParams& params, int64_t step) override;
  double do_sum_of_squares(ConstFloatArg x, int64_t n) override;
};

}  // namespace mgt
