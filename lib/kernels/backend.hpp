// The narrow operation interface the GPT model is written against. A backend owns memory (host
// memory on the CPU, device memory on a GPU) and runs every numerical operation of a forward and
// backward pass; the model only sequences calls and never loops over elements itself, so the same
// model code runs on any backend.
//
// Each public operation is non-virtual: it checks the sizes of its views against the dimensions
// it is given (a wrong size must surface as an mgt::Error, not as memory corruption on a device)
// and then calls the matching private do_* hook with raw pointers. A backend implements only the
// hooks, so the checks exist once for all backends.
//
// The operation descriptors (attention shape, rotary parameters, dropout keys, AdamW
// hyper-parameters) are the CPU kernels' plain structs, reused so that each has one definition.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "core/available_memory.hpp"
#include "kernels/cpu/adamw.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cpu/cross_entropy.hpp"
#include "kernels/cpu/dropout.hpp"
#include "kernels/cpu/head_layout.hpp"
#include "kernels/cpu/rotary.hpp"
#include "kernels/device_span.hpp"

namespace mgt {

using AdamWParams = cpu::AdamWParams;
using AttentionParams = cpu::AttentionParams;
using AttentionShape = cpu::AttentionShape;
using DropoutKey = cpu::DropoutKey;
using HeadTensor = cpu::HeadTensor;
using MaskedLossSum = cpu::MaskedLossSum;
using RotaryParams = cpu::RotaryParams;
using SeqLayout = cpu::SeqLayout;

class Backend {
public:
  Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  virtual ~Backend() = default;

  // A short name for logs ("cpu", "cuda:0").
  virtual std::string name() const = 0;
  // One line for logs: the device, its precision and the attention implementation.
  virtual std::string description() const { return name(); }

  // How the linear layers' GEMMs round their inputs: fp32 throughout, or bf16 inputs with fp32
  // accumulation (--bf16 while activations are still stored in fp32). Returns false, changing
  // nothing, where the backend has no such arithmetic (the CPU).
  enum class MatmulPrecision { kFp32, kBf16 };
  virtual bool set_matmul_precision(MatmulPrecision precision) {
    return precision == MatmulPrecision::kFp32;
  }

  // Returns once every operation issued so far has completed (the CPU's operations complete
  // before they return). For handing the backend's memory to work that is not ordered after the
  // backend's own queue, such as a collective on a communicator's stream.
  virtual void synchronize() {}

  // The memory this backend's buffers come from, where it can be read: the host's for the CPU,
  // the device's free memory for a GPU. nullopt: unknown (callers then skip their check).
  virtual std::optional<AvailableMemory> available_memory() const { return std::nullopt; }

  // ---- memory (use DeviceArray rather than these directly) ----
  void* allocate_bytes(size_t bytes) { return do_allocate(bytes); }
  void free_bytes(void* data, size_t bytes) noexcept { do_free(data, bytes); }

  // Transfers at the edges of the model: batches in, losses and checkpoints out.
  template <typename T>
  void copy_from_host(std::span<const std::type_identity_t<T>> host, DeviceSpan<T> device) {
    check_transfer(static_cast<int64_t>(host.size()), device.size(), "copy_from_host");
    do_copy_from_host(host.data(), device.data(), host.size_bytes());
  }
  // T is deduced from the device view only, so a const view copies into a mutable host span.
  template <typename T>
  void copy_to_host(DeviceSpan<T> device, std::span<std::remove_const_t<T>> host) {
    check_transfer(device.size(), static_cast<int64_t>(host.size()), "copy_to_host");
    do_copy_to_host(device.data(), host.data(), host.size_bytes());
  }
  // Device to device; the views must not overlap.
  void copy(ConstFloatView src, FloatView dst);
  void fill(FloatView x, float value);

  // ---- linear layers: y = x·Wᵀ + b with W [out, in] ----
  // bias may be empty (no bias).
  void linear_forward(ConstFloatView x, ConstFloatView w, ConstFloatView bias, int64_t rows,
                      int64_t in, int64_t out, FloatView y);
  // dx = dy·W, overwritten.
  void linear_backward_input(ConstFloatView dy, ConstFloatView w, int64_t rows, int64_t in,
                             int64_t out, FloatView dx);
  // dw += dyᵀ·x.
  void linear_backward_weight(ConstFloatView dy, ConstFloatView x, int64_t rows, int64_t in,
                              int64_t out, FloatView dw);
  // dbias += Σ_rows dy.
  void bias_backward(ConstFloatView dy, int64_t rows, int64_t cols, FloatView dbias);

  // ---- normalisation over the last dimension ----
  // bias / dbias may be empty. mean and rstd: [rows], saved for the backward.
  void layer_norm_forward(ConstFloatView x, ConstFloatView weight, ConstFloatView bias,
                          int64_t rows, int64_t hidden, float eps, FloatView y, FloatView mean,
                          FloatView rstd);
  // dx overwritten; dweight and dbias accumulate.
  void layer_norm_backward(ConstFloatView dy, ConstFloatView x, ConstFloatView weight,
                           ConstFloatView mean, ConstFloatView rstd, int64_t rows, int64_t hidden,
                           FloatView dx, FloatView dweight, FloatView dbias);
  void rms_norm_forward(ConstFloatView x, ConstFloatView weight, int64_t rows, int64_t hidden,
                        float eps, FloatView y, FloatView rstd);
  void rms_norm_backward(ConstFloatView dy, ConstFloatView x, ConstFloatView weight,
                         ConstFloatView rstd, int64_t rows, int64_t hidden, FloatView dx,
                         FloatView dweight);

  // ---- activations (outputs may alias inputs where the kernels allow it) ----
  void gelu_forward(ConstFloatView x, FloatView y);
  void gelu_backward(ConstFloatView dy, ConstFloatView x, FloatView dx);
  void gelu_tanh_forward(ConstFloatView x, FloatView y);
  void gelu_tanh_backward(ConstFloatView dy, ConstFloatView x, FloatView dx);
  // x: [rows, 2·ffn] = [gate | up]; y: [rows, ffn].
  void swiglu_forward(ConstFloatView x, int64_t rows, int64_t ffn, FloatView y);
  void swiglu_backward(ConstFloatView dy, ConstFloatView x, int64_t rows, int64_t ffn,
                       FloatView dx);

  // ---- dropout, masks regenerated from the key (y may alias x) ----
  void dropout_forward(ConstFloatView x, float p, DropoutKey key, FloatView y);
  void dropout_backward(ConstFloatView dy, float p, DropoutKey key, FloatView dx);

  // ---- embedding lookup over rows [vocab_start, vocab_start + table rows) ----
  void embedding_forward(ConstIndexView ids, ConstFloatView table, int64_t vocab_start,
                         int64_t hidden, FloatView out);
  // dtable += scatter of dout.
  void embedding_backward(ConstIndexView ids, ConstFloatView dout, int64_t vocab_start,
                          int64_t hidden, FloatView dtable);

  // ---- rotary position embedding (y may alias x) ----
  void rotary_forward(ConstFloatView x, const HeadTensor& shape, const RotaryParams& params,
                      FloatView y);
  void rotary_backward(ConstFloatView dy, const HeadTensor& shape, const RotaryParams& params,
                       FloatView dx);

  // ---- causal self-attention; lse: [batch, heads, seq_q] ----
  void attention_forward(ConstFloatView q, ConstFloatView k, ConstFloatView v,
                         const AttentionShape& shape, const AttentionParams& params, FloatView out,
                         FloatView lse);
  // dq, dk, dv overwritten.
  void attention_backward(ConstFloatView q, ConstFloatView k, ConstFloatView v, ConstFloatView out,
                          ConstFloatView dout, ConstFloatView lse, const AttentionShape& shape,
                          const AttentionParams& params, FloatView dq, FloatView dk, FloatView dv);

  // ---- Megatron's per-group fused QKV layout ----
  void qkv_split(ConstFloatView mixed, int64_t tokens, int64_t heads, int64_t groups, int64_t unit,
                 FloatView q, FloatView k, FloatView v);
  void qkv_merge(ConstFloatView q, ConstFloatView k, ConstFloatView v, int64_t tokens,
                 int64_t heads, int64_t groups, int64_t unit, FloatView mixed);

  // ---- softmax cross-entropy, in the steps of the vocab-parallel version ----
  void cross_entropy_row_max(ConstFloatView logits, int64_t rows, int64_t vocab, FloatView row_max);
  void cross_entropy_sum_exp(ConstFloatView logits, ConstFloatView row_max, int64_t rows,
                             int64_t vocab, FloatView sum_exp);
  void cross_entropy_target_logit(ConstFloatView logits, ConstIndexView targets, int64_t rows,
                                  int64_t vocab, int64_t vocab_start, FloatView target_logit);
  void cross_entropy_loss(ConstFloatView row_max, ConstFloatView sum_exp,
                          ConstFloatView target_logit, FloatView loss);
  // All steps on an unsharded vocabulary.
  void cross_entropy_forward(ConstFloatView logits, ConstIndexView targets, int64_t rows,
                             int64_t vocab, FloatView loss, FloatView row_max, FloatView sum_exp);
  // dlogits overwritten; it may alias logits.
  void cross_entropy_backward(ConstFloatView logits, ConstIndexView targets, ConstFloatView row_max,
                              ConstFloatView sum_exp, ConstFloatView dloss, int64_t rows,
                              int64_t vocab, int64_t vocab_start, FloatView dlogits);
  // Σ loss·mask and Σ mask, read back to the host.
  MaskedLossSum masked_loss_sum(ConstFloatView loss, ConstFloatView loss_mask);
  // dloss = loss_mask · scale.
  void masked_loss_grad(ConstFloatView loss_mask, float scale, FloatView dloss);
  // out[r] = index of the largest of x[r, 0…cols), the first one on ties (torch.argmax): the
  // model's prediction at each position, without moving the logits to the host.
  void row_argmax(ConstFloatView x, int64_t rows, int64_t cols, IndexView out);

  // ---- element-wise ----
  void add_bias(FloatView y, ConstFloatView bias, int64_t rows, int64_t cols);
  // out = a + b; out may alias a or b.
  void add(ConstFloatView a, ConstFloatView b, FloatView out);
  // y += x.
  void accumulate(FloatView y, ConstFloatView x);
  void scale(FloatView x, float factor);

  // ---- optimizer support ----
  void adamw_step(FloatView param, ConstFloatView grad, FloatView exp_avg, FloatView exp_avg_sq,
                  const AdamWParams& params, int64_t step);
  // Σ x², accumulated in double and read back to the host.
  double sum_of_squares(ConstFloatView x);

private:
  static void check_transfer(int64_t from, int64_t to, const char* op);

  virtual void* do_allocate(size_t bytes) = 0;
  virtual void do_free(void* data, size_t bytes) noexcept = 0;
  virtual void do_copy_from_host(const void* host, void* device, size_t bytes) = 0;
  virtual void do_copy_to_host(const void* device, void* host, size_t bytes) = 0;
  virtual void do_copy(const float* src, float* dst, int64_t n) = 0;
  virtual void do_fill(float* x, int64_t n, float value) = 0;

  virtual void do_linear_forward(const float* x, const float* w, const float* bias, int64_t rows,
                                 int64_t in, int64_t out, float* y) = 0;
  virtual void do_linear_backward_input(const float* dy, const float* w, int64_t rows, int64_t in,
                                        int64_t out, float* dx) = 0;
  virtual void do_linear_backward_weight(const float* dy, const float* x, int64_t rows, int64_t in,
                                         int64_t out, float* dw) = 0;
  virtual void do_bias_backward(const float* dy, int64_t rows, int64_t cols, float* dbias) = 0;

  virtual void do_layer_norm_forward(const float* x, const float* weight, const float* bias,
                                     int64_t rows, int64_t hidden, float eps, float* y, float* mean,
                                     float* rstd) = 0;
  virtual void do_layer_norm_backward(const float* dy, const float* x, const float* weight,
                                      const float* mean, const float* rstd, int64_t rows,
                                      int64_t hidden, float* dx, float* dweight, float* dbias) = 0;
  virtual void do_rms_norm_forward(const float* x, const float* weight, int64_t rows,
                                   int64_t hidden, float eps, float* y, float* rstd) = 0;
  virtual void do_rms_norm_backward(const float* dy, const float* x, const float* weight,
                                    const float* rstd, int64_t rows, int64_t hidden, float* dx,
                                    float* dweight) = 0;

  virtual void do_gelu_forward(const float* x, int64_t n, float* y) = 0;
  virtual void do_gelu_backward(const float* dy, const float* x, int64_t n, float* dx) = 0;
  virtual void do_gelu_tanh_forward(const float* x, int64_t n, float* y) = 0;
  virtual void do_gelu_tanh_backward(const float* dy, const float* x, int64_t n, float* dx) = 0;
  virtual void do_swiglu_forward(const float* x, int64_t rows, int64_t ffn, float* y) = 0;
  virtual void do_swiglu_backward(const float* dy, const float* x, int64_t rows, int64_t ffn,
                                  float* dx) = 0;

  virtual void do_dropout_forward(const float* x, int64_t n, float p, DropoutKey key, float* y) = 0;
  virtual void do_dropout_backward(const float* dy, int64_t n, float p, DropoutKey key,
                                   float* dx) = 0;

  virtual void do_embedding_forward(const int64_t* ids, int64_t n, const float* table,
                                    int64_t vocab_start, int64_t local_rows, int64_t hidden,
                                    float* out) = 0;
  virtual void do_embedding_backward(const int64_t* ids, int64_t n, const float* dout,
                                     int64_t vocab_start, int64_t local_rows, int64_t hidden,
                                     float* dtable) = 0;

  virtual void do_rotary_forward(const float* x, const HeadTensor& shape,
                                 const RotaryParams& params, float* y) = 0;
  virtual void do_rotary_backward(const float* dy, const HeadTensor& shape,
                                  const RotaryParams& params, float* dx) = 0;

  virtual void do_attention_forward(const float* q, const float* k, const float* v,
                                    const AttentionShape& shape, const AttentionParams& params,
                                    float* out, float* lse) = 0;
  virtual void do_attention_backward(const float* q, const float* k, const float* v,
                                     const float* out, const float* dout, const float* lse,
                                     const AttentionShape& shape, const AttentionParams& params,
                                     float* dq, float* dk, float* dv) = 0;

  virtual void do_qkv_split(const float* mixed, int64_t tokens, int64_t heads, int64_t groups,
                            int64_t unit, float* q, float* k, float* v) = 0;
  virtual void do_qkv_merge(const float* q, const float* k, const float* v, int64_t tokens,
                            int64_t heads, int64_t groups, int64_t unit, float* mixed) = 0;

  virtual void do_cross_entropy_row_max(const float* logits, int64_t rows, int64_t vocab,
                                        float* row_max) = 0;
  virtual void do_cross_entropy_sum_exp(const float* logits, const float* row_max, int64_t rows,
                                        int64_t vocab, float* sum_exp) = 0;
  virtual void do_cross_entropy_target_logit(const float* logits, const int64_t* targets,
                                             int64_t rows, int64_t vocab, int64_t vocab_start,
                                             float* target_logit) = 0;
  virtual void do_cross_entropy_loss(const float* row_max, const float* sum_exp,
                                     const float* target_logit, int64_t rows, float* loss) = 0;
  virtual void do_cross_entropy_forward(const float* logits, const int64_t* targets, int64_t rows,
                                        int64_t vocab, float* loss, float* row_max,
                                        float* sum_exp) = 0;
  virtual void do_cross_entropy_backward(const float* logits, const int64_t* targets,
                                         const float* row_max, const float* sum_exp,
                                         const float* dloss, int64_t rows, int64_t vocab,
                                         int64_t vocab_start, float* dlogits) = 0;
  virtual MaskedLossSum do_masked_loss_sum(const float* loss, const float* loss_mask,
                                           int64_t rows) = 0;
  virtual void do_row_argmax(const float* x, int64_t rows, int64_t cols, int64_t* out) = 0;
  virtual void do_masked_loss_grad(const float* loss_mask, int64_t rows, float scale,
                                   float* dloss) = 0;

  virtual void do_add_bias(float* y, const float* bias, int64_t rows, int64_t cols) = 0;
  virtual void do_add(const float* a, const float* b, int64_t n, float* out) = 0;
  virtual void do_accumulate(float* y, const float* x, int64_t n) = 0;
  virtual void do_scale(float* x, int64_t n, float factor) = 0;

  virtual void do_adamw_step(float* param, const float* grad, float* exp_avg, float* exp_avg_sq,
                             int64_t n, const AdamWParams& params, int64_t step) = 0;
  virtual double do_sum_of_squares(const float* x, int64_t n) = 0;
};

// Owning, move-only array of T in a backend's memory (RAII). Contents start undefined.
template <typename T>
class DeviceArray {
public:
  DeviceArray() = default;
  DeviceArray(Backend& backend, int64_t size) : backend_(&backend), size_(size) {
    if (size < 0) throw_device_span_range(0, size, 0);
    if (size > 0) {
      data_ = static_cast<T*>(backend.allocate_bytes(static_cast<size_t>(size) * sizeof(T)));
    }
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& other) noexcept
      : backend_(other.backend_),
        data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)) {}
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    if (this != &other) {
      release();
      backend_ = other.backend_;
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~DeviceArray() { release(); }

  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  DeviceSpan<T> view() { return {data_, size_}; }
  DeviceSpan<const T> view() const { return {data_, size_}; }

private:
  void release() noexcept {
    if (data_ != nullptr) backend_->free_bytes(data_, static_cast<size_t>(size_) * sizeof(T));
    data_ = nullptr;
    size_ = 0;
  }

  Backend* backend_ = nullptr;
  T* data_ = nullptr;
  int64_t size_ = 0;
};

using DeviceBuffer = DeviceArray<float>;
using DeviceIndexBuffer = DeviceArray<int64_t>;

}  // namespace mgt
