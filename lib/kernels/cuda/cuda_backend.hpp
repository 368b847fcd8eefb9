// The CUDA backend: device memory from a stream-ordered pool (no cudaMalloc in the steady
// state), every operation queued on one stream, cuBLAS for GEMMs and the kernels of
// kernels/cuda. Operations return without waiting; only transfers to the host and the two
// reductions that return host values synchronise.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>

#include "kernels/backend.hpp"
#include "kernels/cuda/op_profiler.hpp"

namespace mgt {
namespace cuda {
class CudnnAttention;
}

class CudaBackend final : public Backend {
public:
  explicit CudaBackend(int device);
  ~CudaBackend() override;
  std::string name() const override { return "cuda:" + std::to_string(device_); }
  std::string description() const override;
  bool set_matmul_precision(MatmulPrecision precision) override;
  std::optional<AvailableMemory> available_memory() const override;
  int device() const { return device_; }
  cudaStream_t stream() const { return stream_; }
  // Waits for everything queued so far; reports a fault of an earlier kernel.
  void synchronize() override;

private:
  int device_;
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  double* reduction_ = nullptr;  // two device doubles for the host-returning reductions
  MatmulPrecision matmul_precision_ = MatmulPrecision::kFp32;
  std::unique_ptr<cuda::OpProfiler> profiler_;  // MGT_CUDA_PROFILE=1
  // bf16 attention through cuDNN, made at the first attention call under bf16 matmul precision.
  std::unique_ptr<cuda::CudnnAttention> cudnn_attention_;

  // The cuDNN attention where it should run this call (bf16 precision, a build with cuDNN).
  cuda::CudnnAttention* cudnn_attention_for(const AttentionShape& shape,
                                            const AttentionParams& params);

  void* do_allocate(size_t bytes) override;
  void do_free(void* data, size_t bytes) noexcept override;
  void do_copy_from_host(const void* host, void* device, size_t bytes) override;
  void do_copy_to_host(const void* device, void* host, size_t bytes) override;
  void do_copy(const float* src, float* dst, int64_t n) override;
  void do_fill(float* x, int64_t n, float value) override;

  void do_linear_forward(const float* x, const float* w, const float* bias, int64_t rows,
                         int64_t in, int64_t out, float* y) override;
  void do_linear_backward_input(const float* dy, const float* w, int64_t rows, int64_t in,
                                int64_t out, float* dx) override;
  void do_linear_backward_weight(const float* dy, const float* x, int64_t rows, int64_t in,
                                 int64_t out, float* dw) override;
  void do_bias_backward(const float* dy, int64_t rows, int64_t cols, float* dbias) override;

  void do_layer_norm_forward(const float* x, const float* weight, const float* bias, int64_t rows,
                             int64_t hidden, float eps, float* y, float* mean,
                             float* rstd) override;
  void do_layer_norm_backward(const float* dy, const float* x, const float* weight,
                              const float* mean, const float* rstd, int64_t rows, int64_t hidden,
                              float* dx, float* dweight, float* dbias) override;
  void do_rms_norm_forward(const float* x, const float* weight, int64_t rows, int64_t hidden,
                           float eps, float* y, float* rstd) override;
  void do_rms_norm_backward(const float* dy, const float* x, const float* weight, const float* rstd,
                            int64_t rows, int64_t hidden, float* dx, float* dweight) override;

  void do_gelu_forward(const float* x, int64_t n, float* y) override;
  void do_gelu_backward(const float* dy, const float* x, int64_t n, float* dx) override;
  void do_gelu_tanh_forward(const float* x, int64_t n, float* y) override;
  void do_gelu_tanh_backward(const float* dy, const float* x, int64_t n, float* dx) override;
  void do_swiglu_forward(const float* x, int64_t rows, int64_t ffn, float* y) override;
  void do_swiglu_backward(const float* dy, const float* x, int64_t rows, int64_t ffn,
                          float* dx) override;

  void do_dropout_forward(const float* x, int64_t n, float p, DropoutKey key, float* y) override;
  void do_dropout_backward(const float* dy, int64_t n, float p, DropoutKey key, float* dx) override;

  void do_embedding_forward(const int64_t* ids, int64_t n, const float* table, int64_t vocab_start,
                            int64_t local_rows, int64_t hidden, float* out) override;
  void do_embedding_backward(const int64_t* ids, int64_t n, const float* dout, int64_t vocab_start,
                             int64_t local_rows, int64_t hidden, float* dtable) override;

  void do_rotary_forward(const float* x, const HeadTensor& shape, const RotaryParams& params,
                         float* y) override;
  void do_rotary_backward(const float* dy, const HeadTensor& shape, const RotaryParams& params,
                          float* dx) override;

  void do_attention_forward(const float* q, const float* k, const float* v,
                            const AttentionShape& shape, const AttentionParams& params, float* out,
                            float* lse) override;
  void do_attention_backward(const float* q, const float* k, const float* v, const float* out,
                             const float* dout, const float* lse, const AttentionShape& shape,
                             const AttentionParams& params, float* dq, float* dk,
                             float* dv) override;

  void do_qkv_split(const float* mixed, int64_t tokens, int64_t heads, int64_t groups, int64_t unit,
                    float* q, float* k, float* v) override;
  void do_qkv_merge(const float* q, const float* k, const float* v, int64_t tokens, int64_t heads,
                    int64_t groups, int64_t unit, float* mixed) override;

  void do_cross_entropy_row_max(const float* logits, int64_t rows, int64_t vocab,
                                float* row_max) override;
  void do_cross_entropy_sum_exp(const float* logits, const float* row_max, int64_t rows,
                                int64_t vocab, float* sum_exp) override;
  void do_cross_entropy_target_logit(const float* logits, const int64_t* targets, int64_t rows,
                                     int64_t vocab, int64_t vocab_start,
                                     float* target_logit) override;
  void do_cross_entropy_loss(const float* row_max, const float* sum_exp, const float* target_logit,
                             int64_t rows, float* loss) override;
  void do_cross_entropy_forward(const float* logits, const int64_t* targets, int64_t rows,
                                int64_t vocab, float* loss, float* row_max,
                                float* sum_exp) override;
  void do_cross_entropy_backward(const float* logits, const int64_t* targets, const float* row_max,
                                 const float* sum_exp, const float* dloss, int64_t rows,
                                 int64_t vocab, int64_t vocab_start, float* dlogits) override;
  MaskedLossSum do_masked_loss_sum(const float* loss, const float* loss_mask,
                                   int64_t rows) override;
  void do_row_argmax(const float* x, int64_t rows, int64_t cols, int64_t* out) override;
  void do_masked_loss_grad(const float* loss_mask, int64_t rows, float scale,
                           float* dloss) override;

  void do_add_bias(float* y, const float* bias, int64_t rows, int64_t cols) override;
  void do_add(const float* a, const float* b, int64_t n, float* out) override;
  void do_accumulate(float* y, const float* x, int64_t n) override;
  void do_scale(float* x, int64_t n, float factor) override;

  void do_adamw_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq, int64_t n,
                     const AdamWParams& params, int64_t step) override;
  double do_sum_of_squares(const float* x, int64_t n) override;
};

}  // namespace mgt
