// The CUDA backend: device memory from a stream-ordered pool (no cudaMalloc in the steady
// state), every operation queued on one stream, cuBLAS (fp32) and cuBLASLt (bf16, bias in the
// epilogue) for GEMMs and the kernels of kernels/cuda. Operations return without waiting; only
// transfers to the host and the two reductions that return host values synchronise.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/backend_factory.hpp"
#include "kernels/cuda/gemm_lanes.hpp"
#include "kernels/cuda/lt_matmul.hpp"
#include "kernels/cuda/op_profiler.hpp"

namespace mgt {
namespace cuda {
class CudnnAttention;
}

class CudaBackend final : public Backend {
public:
  // `options`: --profile (the per-operation table, cuda/op_profiler.hpp) and --profile-gemms
  // (cuBLASLt's plans and timed choices, cuda/lt_matmul.hpp).
  CudaBackend(int device, const BackendOptions& options);
  ~CudaBackend() override;
  std::string name() const override { return "cuda:" + std::to_string(device_); }
  std::string description() const override;
  bool set_matmul_precision(MatmulPrecision precision) override;
  void set_deterministic(bool deterministic) override;
  bool takes_natively(BackendOp op, FloatType type) const override;
  std::optional<AvailableMemory> available_memory() const override;
  // The stream-ordered pool's counts (cuBLAS's and the CUDA context's own memory are outside it).
  std::optional<MemoryUse> memory_use() const override;
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  // The items on the grouped layers' streams, each issuing its operations to its lane's stream
  // (one after another under --profile, whose events time the stream's operations).
  void side_by_side(std::span<const int64_t> weight, const std::function<void(int64_t lane, int64_t item)>& f) override;
  int64_t side_by_side_lanes() const override;
  std::optional<DeviceQueue> device_queue() const override { return DeviceQueue{device_, stream_}; }
  // Waits for everything queued so far; reports a fault of an earlier kernel.
  void synchronize() override;
  void set_profiling(bool on) override;
  // cuDNN reads the fused projection in place: 2-byte storage, seq-major, groups == heads.
  bool attends_fused_qkv(const AttentionShape& shape, const AttentionParams& params) const override;
  // A CUDA graph of the operations (none while --profile times each operation).
  std::unique_ptr<RecordedOperations> record(const std::function<void()>& run) override;
  std::unique_ptr<QueueEvent> record_event() override;
  std::unique_ptr<QueueEvent> record_timed_event() override;

private:
  int device_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  std::unique_ptr<cuda::LtMatmul> main_lt_;  // the stream's
  // The cuBLASLt of the stream the operations go to now: main_lt_, or a lane's inside side_by_side.
  cuda::LtMatmul* lt_ = nullptr;
  bool beside_ = false;  // inside side_by_side: a lane's operations, the grouped ones in order
  // The grouped linear layers' side streams, and side_by_side's.
  std::unique_ptr<cuda::GemmLanes> gemm_lanes_;
  double* reduction_ = nullptr;  // two device doubles for the host-returning reductions
  MatmulPrecision matmul_precision_ = MatmulPrecision::kFp32;
  bool recording_ = false;  // capturing a graph: allocations are refused
  // allocate_shareable's allocations, outside the pool: bytes now and at most, for memory_use().
  int64_t shareable_bytes_ = 0;
  int64_t max_shareable_bytes_ = 0;
  bool deterministic_ = false;
  // The 2-byte attention shapes that took the fp32 kernel, each reported once (a slow path).
  std::set<std::string> fp32_attention_reported_;
  void report_fp32_attention(const AttentionShape& shape, const AttentionParams& params);
  bool profile_gemms_ = false;  // BackendOptions::profile_gemms, for each LtMatmul made
  // adamw_update's segments on the device ([ends…, flags…]), uploaded when they change.
  std::vector<int64_t> segments_host_;
  DeviceIndexBuffer segments_device_;
  std::unique_ptr<cuda::OpProfiler> profiler_;  // BackendOptions::profile
  // bf16 attention through cuDNN, made at the first attention call under bf16 matmul precision.
  std::unique_ptr<cuda::CudnnAttention> cudnn_attention_;

  // The cuDNN attention where it should run this call (bf16 precision, a build with cuDNN).
  cuda::CudnnAttention* cudnn_attention_for(const AttentionShape& shape,
                                            const AttentionParams& params);
  bool cudnn_attention_applies(const AttentionShape& shape, const AttentionParams& params) const;

  void do_copy_ranges(ConstFloatView src, FloatView dst, std::span<const CopyRange> ranges) override;
  void do_attention_forward_fused_qkv(ConstFloatView mixed, const AttentionShape& shape,
                                      const AttentionParams& params, FloatView out, FloatView lse) override;
  void do_attention_backward_fused_qkv(ConstFloatView mixed, ConstFloatView out, ConstFloatView dout,
                                       ConstFloatView lse, const AttentionShape& shape,
                                       const AttentionParams& params, FloatView d_mixed) override;
  void* do_allocate(size_t bytes) override;
  void do_free(void* data, size_t bytes) noexcept override;
  void* do_allocate_shareable(size_t bytes) override;
  void do_free_shareable(void* data, size_t bytes) noexcept override;
  void do_copy_from_host(const void* host, void* device, size_t bytes) override;
  void do_copy_to_host(const void* device, void* host, size_t bytes) override;
  void* do_allocate_pinned(size_t bytes) override;
  void do_free_pinned(void* data, size_t bytes) noexcept override;
  void do_copy_from_host_async(const void* host, void* device, size_t bytes) override;
  void do_copy_to_host_async(const void* device, void* host, size_t bytes) override;
  void do_copy(ConstFloatArg src, FloatArg dst, int64_t n) override;
  void do_convert(ConstFloatView src, FloatView dst) override;
  void do_fill(FloatArg x, int64_t n, float value) override;

  void do_fp8_quantize(ConstFloatArg x, int64_t rows, int64_t cols, const Fp8Scaling& scaling,
                       Fp8View rowwise, Fp8View transposed) override;
  void do_fp8_linear(ConstFp8View x, ConstFp8View w, ConstFloatArg bias, int64_t rows, int64_t in, int64_t out,
                     FloatArg y, bool accumulate, Fp8GemmRole role) override;
  void do_fp8_scaling_update(FloatView history, FloatView scale, int64_t tensors, int64_t history_len,
                             Fp8AmaxAlgo algo, float scaled_max) override;
  void do_fp8_transpose(Fp8View x, int64_t rows, int64_t cols, ConstFloatView scale, Fp8View transposed) override;
  void do_fp8_norm_forward(ConstFloatView x, ConstFloatView b, ConstFloatView c, FloatView sum, ConstFloatView weight,
                           ConstFloatView bias, int64_t rows, int64_t hidden, float eps, const Fp8Scaling& scaling,
                           Fp8View rowwise, FloatView mean, FloatView rstd) override;

  void do_linear_forward(ConstFloatArg x, ConstFloatArg w, ConstFloatArg bias, int64_t rows,
                         int64_t in, int64_t out, FloatArg y) override;
  void do_linear_backward_input(ConstFloatArg dy, ConstFloatArg w, int64_t rows, int64_t in,
                                int64_t out, FloatArg dx) override;
  void do_linear_backward_weight(ConstFloatArg dy, ConstFloatArg x, int64_t rows, int64_t in,
                                 int64_t out, FloatArg dw, bool accumulate) override;
  void do_linear_forward_fp64(ConstFloatArg x, ConstFloatArg w, int64_t rows, int64_t in, int64_t out,
                              FloatArg y) override;
  void do_linear_backward_fp64(ConstFloatArg dy, ConstFloatArg x, ConstFloatArg w, int64_t rows, int64_t in,
                               int64_t out, FloatArg dx, FloatArg dw, bool accumulate) override;
  void do_bias_backward(ConstFloatArg dy, int64_t rows, int64_t cols, FloatArg dbias, bool accumulate) override;
  // 2-byte operands: the groups' GEMMs side by side on gemm_lanes_ (others: one after another).
  void do_grouped_linear_forward(ConstFloatView x, std::span<const ConstFloatView> w,
                                 std::span<const ConstFloatView> bias, std::span<const int64_t> group_rows, int64_t in,
                                 int64_t out, FloatView y) override;
  void do_grouped_linear_backward_input(ConstFloatView dy, std::span<const ConstFloatView> w,
                                        std::span<const int64_t> group_rows, int64_t in, int64_t out,
                                        FloatView dx) override;
  void do_grouped_linear_backward_weight(ConstFloatView dy, ConstFloatView x, std::span<const int64_t> group_rows,
                                         int64_t in, int64_t out, std::span<const FloatView> dw,
                                         bool accumulate) override;

  void do_layer_norm_forward(ConstFloatArg x, ConstFloatArg weight, ConstFloatArg bias, int64_t rows,
                             int64_t hidden, float eps, FloatArg y, FloatArg mean,
                             FloatArg rstd) override;
  void do_layer_norm_backward(ConstFloatArg dy, ConstFloatArg x, ConstFloatArg weight,
                              ConstFloatArg mean, ConstFloatArg rstd, int64_t rows, int64_t hidden,
                              FloatArg dx, FloatArg dweight, FloatArg dbias, bool accumulate_dx,
                              bool accumulate_params) override;
  void do_add_norm_forward(ConstFloatView a, ConstFloatView b, ConstFloatView c, FloatView sum, ConstFloatView weight,
                           ConstFloatView bias, int64_t rows, int64_t hidden, float eps, FloatView y,
                           FloatView mean, FloatView rstd) override;
  void do_rms_norm_forward(ConstFloatArg x, ConstFloatArg weight, int64_t rows, int64_t hidden,
                           float eps, FloatArg y, FloatArg rstd) override;
  void do_rms_norm_backward(ConstFloatArg dy, ConstFloatArg x, ConstFloatArg weight, ConstFloatArg rstd,
                            int64_t rows, int64_t hidden, FloatArg dx, FloatArg dweight,
                            bool accumulate_dx, bool accumulate_params) override;

  void do_gelu_forward(ConstFloatArg x, int64_t n, FloatArg y) override;
  void do_gelu_backward(ConstFloatArg dy, ConstFloatArg x, int64_t n, FloatArg dx) override;
  void do_squared_relu_forward(ConstFloatArg x, int64_t n, FloatArg y) override;
  void do_squared_relu_backward(ConstFloatArg dy, ConstFloatArg x, int64_t n, FloatArg dx) override;
  void do_linear_gelu_tanh_forward(ConstFloatView x, ConstFloatView w, ConstFloatView bias, int64_t rows,
                                   int64_t in, int64_t out, FloatView pre, FloatView y) override;
  void do_linear_backward_input_gelu_tanh(ConstFloatView dy, ConstFloatView w, ConstFloatView pre,
                                          int64_t rows, int64_t in, int64_t out, FloatView dpre) override;
  void do_fp8_linear_gelu_tanh_forward(ConstFp8View x, ConstFp8View w, ConstFloatView bias, int64_t rows, int64_t in,
                                       int64_t out, FloatView pre, FloatView y) override;
  void do_fp8_quantize_gradient(ConstFloatView dy, ConstFloatView pre, int64_t rows, int64_t cols,
                                const Fp8Scaling& scaling, Fp8View rowwise, Fp8View transposed, FloatView dbias,
                                FloatView dpre, bool accumulate_dbias) override;
  void do_fp8_quantize_gelu_tanh(ConstFloatView pre, int64_t rows, int64_t cols, const Fp8Scaling& scaling,
                                 Fp8View rowwise, Fp8View transposed) override;
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

  void do_cached_attention(FloatView q, FloatView k, ConstFloatView v, FloatView key_cache,
                           FloatView value_cache, ConstIndexView length, const AttentionShape& shape,
                           const RotaryParams* rotary, float softmax_scale, FloatView out) override;

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
  void do_masked_loss_sum_on_device(ConstFloatArg loss, ConstFloatArg loss_mask, int64_t rows, double* sums,
                                    bool accumulate) override;
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
  void do_moe_permutation(ConstFloatView routing_map, const MoePermutation& p, IndexView row_token, IndexView row_slot,
                          IndexView token_rows, IndexView slot_row, IndexView expert_rows) override;
  void do_gather_rows(ConstFloatArg in, int64_t in_rows, int64_t cols, const int64_t* index, int64_t out_rows,
                      ConstFloatArg weights, FloatArg out) override;
  void do_gather_sum_rows(ConstFloatArg in, int64_t in_rows, int64_t cols, const int64_t* index, int64_t out_rows,
                          int64_t k, ConstFloatArg weights, FloatArg out) override;
  void do_row_dot(ConstFloatArg a, ConstFloatArg b, int64_t rows, int64_t cols, FloatArg out) override;
  void do_scale_rows(ConstFloatArg x, ConstFloatArg factors, int64_t rows, int64_t cols, FloatArg out) override;

  void do_cross_entropy_forward_backward(FloatView logits, ConstIndexView targets,
                                         ConstFloatView dloss, int64_t rows, int64_t vocab,
                                         FloatView loss) override;

  void do_adamw_update(FloatView param, ConstFloatView grad, FloatView exp_avg, FloatView exp_avg_sq,
                       std::span<const int64_t> segment_ends, std::span<const int64_t> segment_flags,
                       const AdamWParams& params, float decoupled_lr, float grad_scale, int64_t step,
                       FloatView compute) override;

  void do_adamw_step(FloatArg param, ConstFloatArg grad, FloatArg exp_avg, FloatArg exp_avg_sq, int64_t n,
                     const AdamWParams& params, int64_t step) override;
  double do_sum_of_squares(ConstFloatArg x, int64_t n) override;
  double do_sum_of_squares_ranges(ConstFloatView x, std::span<const ElementRange> ranges) override;
};

}  // namespace mgt
