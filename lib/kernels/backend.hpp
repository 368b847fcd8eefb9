// The narrow operation interface the GPT model is written against. A backend owns memory (host
// memory on the CPU, device memory on a GPU) and runs every numerical operation of a forward and
// backward pass; the model only sequences calls and never loops over elements itself, so the same
// model code runs on any backend.
//
// Each public operation is non-virtual: it checks the sizes of its views against the dimensions
// it is given (a wrong size must surface as an mgt::Error, not as memory corruption on a device)
// and then calls the matching private do_* hook. A backend implements only the hooks, so the
// checks exist once for all backends.
//
// The operations are listed once, in kernels/backend_operations.inc (BackendOp): the checked
// wrappers name themselves by it, the capability query takes it, and a test runs every entry on
// every backend (tests/kernels/test_backend_operations.cpp).
//
// Floating-point views carry their storage type (FloatView): fp32, or bf16 for the activations
// and weight copies of a --bf16 run. A hook receives operands of another type than fp32 only
// where its backend's takes_natively(op, type) says so; otherwise the public call converts such
// operands to fp32 copies, runs the fp32 hook and converts the results back. So every operation
// works on every type on every backend, the CPU's fp32 kernels stay the reference for bf16
// storage (rounding at the same points), and a GPU backend gains speed one native kernel at a
// time.
//
// The operation descriptors (attention shape, rotary parameters, dropout keys, AdamW
// hyper-parameters) are the plain structs of kernels/operation_params.hpp.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include "core/available_memory.hpp"
#include "kernels/backend_operation.hpp"
#include "kernels/copy_range.hpp"
#include "kernels/device_queue.hpp"
#include "kernels/device_span.hpp"
#include "kernels/fp8_view.hpp"
#include "kernels/moe_routing_params.hpp"
#include "kernels/operation_params.hpp"

namespace mgt {

// Flags of Backend::adamw_update's runs.
inline constexpr int64_t kAdamWDecay = 1;
inline constexpr int64_t kAdamWDecoupledLr = 2;

// Operations recorded once and replayed as a whole (a CUDA graph on a GPU): for a decode step,
// whose many short operations would otherwise each pay a launch. A replay runs the same
// operations on the same memory; what varies between replays must be read from that memory.
class RecordedOperations {
public:
  virtual ~RecordedOperations() = default;
  virtual void replay() = 0;
};

// A point in the backend's queue: wait() returns once every operation issued before the event
// was recorded has completed (at once on the CPU, whose operations complete before they return).
class QueueEvent {
public:
  virtual ~QueueEvent() = default;
  virtual void wait() = 0;
  // Seconds from `earlier` to this event, both from the same backend's record_timed_event(),
  // `earlier` recorded first; waits for this one.
  virtual double seconds_since(QueueEvent& earlier) = 0;
};

// Whether other processes may map an allocation (Backend::allocate_shareable).
enum class MemorySharing { kPrivate, kShareable };

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

  // The run's precision: fp32 throughout, or --bf16 / --fp16 (bf16 / fp16 storage for activations
  // and the weights' compute copy, see activation_type(); GEMMs of fp32 operands then also round
  // their inputs to that type with fp32 accumulation). Returns false, changing nothing, where the
  // backend has no such arithmetic (the CPU).
  enum class MatmulPrecision { kFp32, kBf16, kFp16 };
  virtual bool set_matmul_precision(MatmulPrecision precision) {
    return precision == MatmulPrecision::kFp32;
  }

  // Megatron's --deterministic-mode: only kernels that give the same bits on every run, at some
  // cost in speed. Without it, a backend may use faster kernels whose summation order varies
  // between runs (on a GPU: cuDNN attention backward engines that sum with atomics). The CPU's
  // kernels are always deterministic.
  virtual void set_deterministic(bool /*deterministic*/) {}

  // Whether operation `op`'s hook takes operands of `type` as they are (fp32: always). Where it
  // does not, the public call runs the hook on fp32 copies of such operands (see above). The
  // fused operations whose hooks take views (add_norm_forward, attention_forward_fused_qkv, …)
  // handle every type in the hook, falling back to the listed operations they are made of.
  virtual bool takes_natively(BackendOp /*op*/, FloatType type) const { return type == FloatType::kF32; }

  // Whether the backend's per-operation profile (BackendOptions::profile) counts the
  // operations issued from now on: Megatron's --profile-step-start/--profile-step-end window.
  // Ignored where there is no profile.
  virtual void set_profiling(bool /*on*/) {}

  // The storage type the model gives its activations and its weights' compute copy: fp32, or
  // bf16 / fp16 after a GPU backend accepted set_matmul_precision(kBf16 / kFp16) (Megatron's
  // --bf16 / --fp16: 2-byte weights and activations, fp32 master weights and gradients). Tests set it on the CPU, whose
  // fp32 kernels then run on converted copies.
  FloatType activation_type() const { return activation_type_; }
  void set_activation_type(FloatType type) { activation_type_ = type; }

  // Returns once every operation issued so far has completed (the CPU's operations complete
  // before they return). For handing the backend's memory to work that is not ordered after the
  // backend's own queue, such as a collective on a communicator's own stream.
  virtual void synchronize() {}

  // The device queue the operations run in, for work outside the backend that should be queued
  // among them instead (a communicator made for it: dist/nccl_communicator.hpp), so that neither
  // the host nor the device waits for a synchronisation. nullopt where operations complete before
  // they return (the CPU).
  virtual std::optional<DeviceQueue> device_queue() const { return std::nullopt; }

  // The memory this backend's buffers come from, where it can be read: the host's for the CPU,
  // the device's free memory for a GPU. nullopt: unknown (callers then skip their check).
  virtual std::optional<AvailableMemory> available_memory() const { return std::nullopt; }

  // What the backend's allocator holds, in bytes, as Megatron's report_memory prints it from
  // PyTorch's: allocated now and at most, reserved from the device now and at most. nullopt where
  // the backend keeps no such count (the CPU).
  struct MemoryUse {
    int64_t allocated = 0;
    int64_t max_allocated = 0;
    int64_t reserved = 0;
    int64_t max_reserved = 0;
  };
  virtual std::optional<MemoryUse> memory_use() const { return std::nullopt; }

  // Runs f(lane, i) for each item i with weight[i] > 0: independent pieces of work (a mixture's
  // experts, each over its own rows, weights and scratch) that a backend may run side by side on
  // up to side_by_side_lanes() lanes, `lane` naming the one item i runs on (the caller's scratch
  // per lane); everything queued before starts first, everything queued after waits for all of
  // them. The results are those of running them in order: items must share no buffer they write,
  // and scratch only with the items of their lane. Here, one after another on lane 0.
  virtual void side_by_side(std::span<const int64_t> weight, const std::function<void(int64_t lane, int64_t item)>& f) {
    for (std::size_t i = 0; i < weight.size(); ++i)
      if (weight[i] > 0) f(0, static_cast<int64_t>(i));
  }
  virtual int64_t side_by_side_lanes() const { return 1; }

  // Records the operations `run` issues and runs them once; replay() runs them again. nullptr,
  // with nothing run, where the backend does not record (the CPU, whose operations have no
  // launch cost) or where `run` did something a recording cannot hold (a read-back, an
  // allocation): the caller then runs the operations directly.
  virtual std::unique_ptr<RecordedOperations> record(const std::function<void()>& /*run*/) {
    return nullptr;
  }

  // ---- memory (use DeviceArray rather than these directly) ----
  void* allocate_bytes(size_t bytes) { return do_allocate(bytes); }
  void free_bytes(void* data, size_t bytes) noexcept { do_free(data, bytes); }
  // Memory that the other processes of this machine may map (CUDA IPC): the gradients and the
  // weights, which the data-parallel ranks' copy engines read from each other
  // (dist/nccl_peer_copy.hpp). On a GPU an allocation of its own rather than a block of the
  // stream-ordered pool; ordinary memory elsewhere. Free with free_shareable.
  void* allocate_shareable(size_t bytes) { return do_allocate_shareable(bytes); }
  void free_shareable(void* data, size_t bytes) noexcept { do_free_shareable(data, bytes); }

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
  // Floating-point views to and from fp32 host memory, converting where the view is not fp32.
  void copy_from_host(std::span<const float> host, FloatView device);
  void copy_to_host(ConstFloatView device, std::span<float> host);

  // ---- asynchronous transfers ----
  // Host memory a transfer may still read after its call returned: page-locked on a GPU, whose
  // copy engine reads it directly; ordinary memory on the CPU. Use PinnedHostArray.
  void* allocate_pinned(size_t bytes) { return do_allocate_pinned(bytes); }
  void free_pinned(void* data, size_t bytes) noexcept { do_free_pinned(data, bytes); }
  // Queues the copy among the operations and returns without waiting for it: `host` must come
  // from allocate_pinned and stay unchanged until an event recorded after this call has been
  // waited for (a GPU backend refuses other host memory).
  template <typename T>
  void copy_from_host_async(std::span<const std::type_identity_t<T>> host, DeviceSpan<T> device) {
    check_transfer(static_cast<int64_t>(host.size()), device.size(), "copy_from_host_async");
    do_copy_from_host_async(host.data(), device.data(), host.size_bytes());
  }
  // The other way: `host` (from allocate_pinned) holds the values once an event recorded after
  // this call has been waited for, and must not be read before.
  template <typename T>
  void copy_to_host_async(DeviceSpan<T> device, std::span<std::remove_const_t<T>> host) {
    check_transfer(device.size(), static_cast<int64_t>(host.size()), "copy_to_host_async");
    do_copy_to_host_async(device.data(), host.data(), host.size_bytes());
  }
  // An event at the current end of the queue.
  virtual std::unique_ptr<QueueEvent> record_event();
  // The same, for timing the operations between two of them (QueueEvent::seconds_since): on the
  // GPU a CUDA event with timing, on the CPU the host clock.
  virtual std::unique_ptr<QueueEvent> record_timed_event();

  // Device to device; the views must not overlap and must have the same type.
  void copy(ConstFloatView src, FloatView dst);
  // Many copies between two views of one type at once: dst[r.dst + i] = src[r.src + i] for
  // i < r.count, for every range r (each within its view; the views must not overlap, nor the
  // ranges' destinations, which may be written in any order). For
  // packing hundreds of small tensors, where one copy each costs a launch each.
  void copy_ranges(ConstFloatView src, FloatView dst, std::span<const CopyRange> ranges);
  // dst = src converted to dst's type (rounded to nearest even when narrowing).
  void convert(ConstFloatView src, FloatView dst);
  void fill(FloatView x, float value);

  // ---- linear layers: y = x·Wᵀ + b with W [out, in] ----
  // bias may be empty (no bias).
  void linear_forward(ConstFloatView x, ConstFloatView w, ConstFloatView bias, int64_t rows,
                      int64_t in, int64_t out, FloatView y);
  // dx = dy·W, overwritten.
  void linear_backward_input(ConstFloatView dy, ConstFloatView w, int64_t rows, int64_t in,
                             int64_t out, FloatView dx);
  // dw += dyᵀ·x, or without `accumulate` dw = dyᵀ·x (zero for zero rows): an iteration's first
  // write of a parameter's gradient, which spares zeroing it first (GptParameters::zero_grads).
  void linear_backward_weight(ConstFloatView dy, ConstFloatView x, int64_t rows, int64_t in,
                              int64_t out, FloatView dw, bool accumulate = true);
  // dbias += Σ_rows dy, or without `accumulate` dbias = Σ_rows dy.
  void bias_backward(ConstFloatView dy, int64_t rows, int64_t cols, FloatView dbias, bool accumulate = true);
  // Megatron's fused bias-GELU after a linear layer: pre = x·Wᵀ + b (saved for the backward),
  // y = gelu_tanh(pre). A GPU backend computes both in the GEMM's epilogue.
  void linear_gelu_tanh_forward(ConstFloatView x, ConstFloatView w, ConstFloatView bias, int64_t rows,
                                int64_t in, int64_t out, FloatView pre, FloatView y);
  // The input gradient of the linear layer that follows such a GELU, through the GELU:
  // dpre = (dy·W) ⊙ gelu_tanh'(pre), overwritten; pre and dpre are [rows, in].
  void linear_backward_input_gelu_tanh(ConstFloatView dy, ConstFloatView w, ConstFloatView pre,
                                       int64_t rows, int64_t in, int64_t out, FloatView dpre);

  // ---- the MoE router's gating linear layer in fp64 (--moe-router-dtype fp64) ----
  // Megatron's RouterGatingLinearFunction with router_dtype float64: the operands converted to
  // fp64 (exactly), every product and sum in fp64, each result rounded to fp32 and then to its
  // view's type (as PyTorch converts a float64 tensor to bfloat16 or float16: through float).
  // y = x·Wᵀ, no bias.
  void linear_forward_fp64(ConstFloatView x, ConstFloatView w, int64_t rows, int64_t in, int64_t out, FloatView y);
  // dx = dy·W, overwritten (dx may be empty: not wanted), and dw += dyᵀ·x, or without
  // `accumulate` dw = dyᵀ·x (with `accumulate` dw's value is added in fp64 before the rounding).
  void linear_backward_fp64(ConstFloatView dy, ConstFloatView x, ConstFloatView w, int64_t rows, int64_t in,
                            int64_t out, FloatView dx, FloatView dw, bool accumulate = true);

  // ---- grouped linear layers: a linear layer per group of consecutive rows ----
  // A mixture's local experts over their rows of the permuted tokens, as Megatron-Core's
  // GroupedMLP (megatron/core/transformer/moe/experts.py) runs them: group g is the next
  // group_rows[g] rows (0 allowed) of x and y and has its own weight w[g] [out, in] (and bias[g]
  // [out]), each a view of its own. The results equal those of one linear_forward,
  // linear_backward_input or linear_backward_weight per group up to rounding. The CUDA backend
  // runs bf16 groups on Hopper as one grouped GEMM of its own (kernels/cuda/grouped_gemm_hopper.hpp)
  // and elsewhere one cuBLASLt GEMM per group: on an H200, cuBLAS's grouped GEMM
  // (cublasGemmGroupedBatchedEx) made a Mixtral-style step 1.45 times longer than the latter
  // (BENCHMARKS.md). bias is empty (no bias) or has one view per group.
  void grouped_linear_forward(ConstFloatView x, std::span<const ConstFloatView> w, std::span<const ConstFloatView> bias,
                              std::span<const int64_t> group_rows, int64_t in, int64_t out, FloatView y);
  // dx_g = dy_g·W_g, overwritten.
  void grouped_linear_backward_input(ConstFloatView dy, std::span<const ConstFloatView> w,
                                     std::span<const int64_t> group_rows, int64_t in, int64_t out, FloatView dx);
  // dw[g] += dy_gᵀ·x_g, or without `accumulate` dw[g] = dy_gᵀ·x_g (zero for a group of no rows).
  void grouped_linear_backward_weight(ConstFloatView dy, ConstFloatView x, std::span<const int64_t> group_rows,
                                      int64_t in, int64_t out, std::span<const FloatView> dw, bool accumulate = true);

  // ---- FP8 linear layers (Transformer Engine's recipes; kernels/fp8.hpp has the formats) ----
  // x [rows, cols] cast to FP8 with the scale `scaling` gives (see Fp8Scaling): into `rowwise`
  // [rows, cols] and/or `transposed` [cols, rows] (either may be empty), each of which also
  // receives its scale_inv = 1/scale.
  void fp8_quantize(ConstFloatView x, int64_t rows, int64_t cols, const Fp8Scaling& scaling, Fp8View rowwise,
                    Fp8View transposed);
  // y[rows, out] = (x·wᵀ)·sx·sw + bias (+ y with `accumulate`) for x [rows, in] and w [out, in]
  // in FP8 with their scale_inv factors sx and sw: the GEMM of a linear layer's forward, and, on
  // transposed copies, of its input and weight gradients. bias may be empty. Products are summed
  // in fp32 (on a GPU the tensor cores' FP8 accumulation, fast only for the forward: see
  // Fp8GemmRole) and rounded once to y's type.
  void fp8_linear(ConstFp8View x, ConstFp8View w, ConstFloatView bias, int64_t rows, int64_t in, int64_t out,
                  FloatView y, bool accumulate, Fp8GemmRole role);
  // fp8_linear into pre, then y = gelu_tanh(pre) (an FP8 MLP's fc1; a GPU backend takes the GELU
  // into the GEMM's epilogue). pre and y [rows, out], of one type.
  void fp8_linear_gelu_tanh_forward(ConstFp8View x, ConstFp8View w, ConstFloatView bias, int64_t rows, int64_t in,
                                    int64_t out, FloatView pre, FloatView y);
  // The output gradient's cast in a linear layer's backward, with what Transformer Engine fuses
  // into it (its cast-dbias and cast-dbias-dgelu): g = dy, or, with `pre`, the gradient through
  // the tanh GELU that made the layer's input, g = dy ⊙ gelu_tanh'(pre) rounded to dy's type as
  // gelu_tanh_backward writes it. g is cast as fp8_quantize casts x, dbias += Σ_rows g (dbias may
  // be empty; without `accumulate_dbias` dbias = Σ_rows g) and g goes to dpre where given (it may
  // alias dy; only with pre). The CUDA backend does it in one pass where the shapes allow
  // (kernels/cuda/fp8_quantize.hpp).
  void fp8_quantize_gradient(ConstFloatView dy, ConstFloatView pre, int64_t rows, int64_t cols,
                             const Fp8Scaling& scaling, Fp8View rowwise, Fp8View transposed, FloatView dbias,
                             FloatView dpre, bool accumulate_dbias = true);
  // The cast of an MLP's activation from the GELU's input: y = gelu_tanh(pre) rounded to pre's type,
  // as gelu_tanh_forward writes it, cast as fp8_quantize casts x (its amax that of y). A GPU backend
  // does it in one pass where the shapes allow, so that y itself is never written.
  void fp8_quantize_gelu_tanh(ConstFloatView pre, int64_t rows, int64_t cols, const Fp8Scaling& scaling,
                              Fp8View rowwise, Fp8View transposed);
  // Transformer Engine's delayed-scaling update of `tensors` scales from their amax histories
  // history [history_len, tensors] (fp32, in place), as fp8_delayed_scaling_update describes.
  void fp8_scaling_update(FloatView history, FloatView scale, int64_t tensors, int64_t history_len,
                          Fp8AmaxAlgo algo, float scaled_max);
  // The transposed copy [cols, rows] of FP8 codes x [rows, cols] that were cast elsewhere with
  // `scale` [1] (a weight all-gathered in FP8 under --fp8-param-gather): x's scale_inv and the
  // copy's both become 1/scale, as fp8_quantize writes them; the copy takes x's format.
  void fp8_transpose(Fp8View x, int64_t rows, int64_t cols, ConstFloatView scale, Fp8View transposed);
  // The norm before an FP8 linear layer with its output cast (Transformer Engine's LayerNormLinear
  // with a norm that writes FP8): y = LayerNorm (mean given; bias may be empty) or RMSNorm (mean
  // and bias empty) of x, or, where b is given, of sum = x + b (+ c where given) written to sum as
  // add_norm_forward writes it. y is rounded to the type of the norm's input (x, or sum) as the
  // norm writes it, then cast as fp8_quantize casts x into rowwise [rows, hidden] only (its amax
  // that of y); y itself is never written. mean and rstd as the norm saves them. A GPU backend
  // does it in one pass over the rows.
  void fp8_norm_forward(ConstFloatView x, ConstFloatView b, FloatView sum, ConstFloatView weight, ConstFloatView bias,
                        int64_t rows, int64_t hidden, float eps, const Fp8Scaling& scaling, Fp8View rowwise,
                        FloatView mean, FloatView rstd, ConstFloatView c = {});

  // ---- normalisation over the last dimension ----
  // bias / dbias may be empty. mean and rstd: [rows], saved for the backward.
  void layer_norm_forward(ConstFloatView x, ConstFloatView weight, ConstFloatView bias,
                          int64_t rows, int64_t hidden, float eps, FloatView y, FloatView mean,
                          FloatView rstd);
  // dx overwritten, or with accumulate_dx added to (the residual's gradient: one pass and one
  // rounding, not two); dweight and dbias accumulate, or without accumulate_params are
  // overwritten (as linear_backward_weight's dw).
  void layer_norm_backward(ConstFloatView dy, ConstFloatView x, ConstFloatView weight,
                           ConstFloatView mean, ConstFloatView rstd, int64_t rows, int64_t hidden,
                           FloatView dx, FloatView dweight, FloatView dbias, bool accumulate_dx = false,
                           bool accumulate_params = true);
  // The residual add before a norm: sum = a + b, or a + b + c where c is given (rounded once to
  // sum's type), then LayerNorm of sum (mean given; bias may be empty) or RMSNorm (mean and bias
  // empty) into y. A GPU backend does both in one pass over the rows.
  void add_norm_forward(ConstFloatView a, ConstFloatView b, FloatView sum, ConstFloatView weight,
                        ConstFloatView bias, int64_t rows, int64_t hidden, float eps, FloatView y,
                        FloatView mean, FloatView rstd, ConstFloatView c = {});
  void rms_norm_forward(ConstFloatView x, ConstFloatView weight, int64_t rows, int64_t hidden,
                        float eps, FloatView y, FloatView rstd);
  void rms_norm_backward(ConstFloatView dy, ConstFloatView x, ConstFloatView weight,
                         ConstFloatView rstd, int64_t rows, int64_t hidden, FloatView dx,
                         FloatView dweight, bool accumulate_dx = false, bool accumulate_params = true);

  // ---- activations (outputs may alias inputs where the kernels allow it) ----
  void gelu_forward(ConstFloatView x, FloatView y);
  void gelu_backward(ConstFloatView dy, ConstFloatView x, FloatView dx);
  void gelu_tanh_forward(ConstFloatView x, FloatView y);
  void gelu_tanh_backward(ConstFloatView dy, ConstFloatView x, FloatView dx);
  // relu(x)² and its gradient dy · 2·relu(x) (--squared-relu).
  void squared_relu_forward(ConstFloatView x, FloatView y);
  void squared_relu_backward(ConstFloatView dy, ConstFloatView x, FloatView dx);
  // x: [rows, 2·ffn] = [gate | up]; y: [rows, ffn].
  void swiglu_forward(ConstFloatView x, int64_t rows, int64_t ffn, FloatView y);
  void swiglu_backward(ConstFloatView dy, ConstFloatView x, int64_t rows, int64_t ffn,
                       FloatView dx);

  // ---- dropout, masks regenerated from the key (y may alias x) ----
  void dropout_forward(ConstFloatView x, float p, DropoutKey key, FloatView y);
  void dropout_backward(ConstFloatView dy, float p, DropoutKey key, FloatView dx);
  // y = x · (1 − eps + 2·eps·u) with u ∈ [0, 1) from the dropout's Philox stream of `key`
  // (kernels/cpu/dropout.hpp): uniform noise in [1 − eps, 1 + eps), regenerated from the key, so
  // the backward is the same call on the gradient (y may alias x).
  void uniform_jitter(ConstFloatView x, float eps, DropoutKey key, FloatView y);
  // y = standard normal draws of `key`'s Philox stream, element i the draw of index key.offset + i
  // (kernels/cpu/dropout.hpp standard_normal): the same values on every backend up to rounding,
  // regenerated from the key (the MoE router's random logits).
  void standard_normal(DropoutKey key, FloatView y);

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

  // ---- attention on the fused QKV projection's output ----
  // mixed [s, b, heads, 3, head_dim], as qkv_split reads it when groups == heads (seq-major
  // shapes only); out and lse as attention_forward's, d_mixed (overwritten) in mixed's layout.
  // The results of qkv_split + attention_forward, and of attention_backward + qkv_merge, without
  // the split and the merge where attends_fused_qkv() says the backend reads the projection in
  // place; elsewhere they split into temporaries.
  void attention_forward_fused_qkv(ConstFloatView mixed, const AttentionShape& shape,
                                   const AttentionParams& params, FloatView out, FloatView lse);
  void attention_backward_fused_qkv(ConstFloatView mixed, ConstFloatView out, ConstFloatView dout,
                                    ConstFloatView lse, const AttentionShape& shape,
                                    const AttentionParams& params, FloatView d_mixed);
  virtual bool attends_fused_qkv(const AttentionShape& /*shape*/, const AttentionParams& /*params*/) const {
    return false;
  }

  // ---- one step of key/value-cached decoding ----
  // The seq_q new positions of each sequence follow `length` cached ones, length being read from
  // backend memory (length[0]) so that a recorded step replays at any length: q [seq_q, batch,
  // heads, head_dim] and k, v [seq_q, batch, groups, head_dim] are this step's, sequence-major;
  // with rotary (non-null) q and k are rotated in place at positions length…length + seq_q − 1;
  // k and v are stored into the caches ([shape.seq_kv = capacity, batch, groups, head_dim]) at
  // position length; out = causal attention of q over the caches' first length + seq_q
  // positions (no dropout). Element for element: rotary_forward, two copies and
  // attention_forward.
  void cached_attention(FloatView q, FloatView k, ConstFloatView v, FloatView key_cache,
                        FloatView value_cache, ConstIndexView length, const AttentionShape& shape,
                        const RotaryParams* rotary, float softmax_scale, FloatView out);

  // ---- attention over keys in parts (context parallelism's ring) ----
  // The same queries' attention over another part of the keys merged into an attention so far:
  // rows [first_row, first_row + part_rows) of out ([whole]) and lse ([batch, heads, whole.seq])
  // take in part_out ([part_rows, …] in whole's layout) and part_lse ([batch, heads, part_rows]):
  //   lse' = log(e^lse + e^part_lse),  out' = out·e^(lse − lse') + part_out·e^(part_lse − lse').
  // (TransformerEngine's flash_attn_fwd_out_correction and its LSE correction, in one pass.)
  void attention_merge(ConstFloatView part_out, ConstFloatView part_lse, const HeadTensor& whole,
                       int64_t first_row, int64_t part_rows, FloatView out, FloatView lse);

  // ---- Megatron's per-group fused QKV layout ----
  void qkv_split(ConstFloatView mixed, int64_t tokens, int64_t heads, int64_t groups, int64_t unit,
                 FloatView q, FloatView k, FloatView v);
  void qkv_merge(ConstFloatView q, ConstFloatView k, ConstFloatView v, int64_t tokens,
                 int64_t heads, int64_t groups, int64_t unit, FloatView mixed);

  // ---- softmax cross-entropy, whole or over a vocabulary split between ranks ----
  // One pass over this rank's slice [rows, vocab] of the logits, vocabulary entries
  // [vocab_start, vocab_start + vocab): statistics [3, rows] = the slice's row maxima, its sums
  // of exp(logit − that maximum), and the target logits (0 where the target is another rank's).
  void cross_entropy_shard_statistics(ConstFloatView logits, ConstIndexView targets, int64_t rows,
                                      int64_t vocab, int64_t vocab_start, FloatView statistics);
  // The ranks' statistics [ranks, 3, rows], all-gathered, combined in rank order: the whole
  // rows' losses, maxima and sums of exp(logit − maximum), which cross_entropy_backward takes.
  void cross_entropy_combine(ConstFloatView statistics, int64_t ranks, int64_t rows,
                             FloatView loss, FloatView row_max, FloatView sum_exp);
  // The loss on an unsharded vocabulary, and the statistics the backward takes.
  void cross_entropy_forward(ConstFloatView logits, ConstIndexView targets, int64_t rows,
                             int64_t vocab, FloatView loss, FloatView row_max, FloatView sum_exp);
  // dlogits overwritten; it may alias logits.
  void cross_entropy_backward(ConstFloatView logits, ConstIndexView targets, ConstFloatView row_max,
                              ConstFloatView sum_exp, ConstFloatView dloss, int64_t rows,
                              int64_t vocab, int64_t vocab_start, FloatView dlogits);
  // Both steps in one pass where the backend can (the vocabulary's logits are read once from
  // memory): loss[r] = CE of row r, and logits overwritten by their gradient, (softmax − one-hot)
  // · dloss[r]. Element for element the result equals cross_entropy_forward followed by
  // cross_entropy_backward into the logits.
  void cross_entropy_forward_backward(FloatView logits, ConstIndexView targets,
                                      ConstFloatView dloss, int64_t rows, int64_t vocab,
                                      FloatView loss);
  // Σ loss·mask and Σ mask, read back to the host.
  MaskedLossSum masked_loss_sum(ConstFloatView loss, ConstFloatView loss_mask);
  // The same sums kept on the device: sums[0] = Σ loss·mask and sums[1] = Σ mask, or with
  // `accumulate` added to them (a step's micro-batches, read back once at its end).
  void masked_loss_sum_on_device(ConstFloatView loss, ConstFloatView loss_mask, DeviceSpan<double> sums,
                                 bool accumulate);
  // dloss = loss_mask · scale.
  void masked_loss_grad(ConstFloatView loss_mask, float scale, FloatView dloss);
  // out[r] = index of the largest of x[r, 0…cols), the first one on ties (torch.argmax): the
  // model's prediction at each position, without moving the logits to the host. Rows are
  // row_stride elements apart (0: cols), so that x may be [rows, row_stride] of which the first
  // cols columns count (a padded vocabulary).
  void row_argmax(ConstFloatView x, int64_t rows, int64_t cols, IndexView out, int64_t row_stride = 0);

  // ---- mixture of experts (kernels/moe_routing_params.hpp, kernels/moe_routing_math.hpp) ----
  // Megatron-Core's TopKRouter.routing on router logits [tokens, experts] (fp32): gates, the
  // chosen experts' probabilities before the capacity (topk_masked_gates, 0 elsewhere); probs and
  // routing_map (1 or 0), after it (tokens beyond an expert's capacity dropped; not padded). With
  // p.aux_groups > 0, aux_counts [aux_groups, experts] receives the tokens per expert of the
  // auxiliary loss's top-k, and statistics[0] the auxiliary loss divided by its coefficient (what
  // Megatron logs as load_balancing_loss); with p.z_loss, statistics[1] the z-loss divided by its
  // coefficient. Both added to the values there with `accumulate`, else stored (0 when not
  // computed). The statistics stay in backend memory (read back with the step's other sums).
  void moe_route(ConstFloatView logits, const MoeRoutingParams& p, FloatView gates, FloatView probs,
                 FloatView routing_map, FloatView aux_counts, DeviceSpan<double> statistics, bool accumulate);
  // The gradient of the logits (overwritten) from that of probs, plus aux_grad times the auxiliary
  // loss's gradient divided by its coefficient (aux_counts as moe_route left them) and z_grad
  // times the z-loss's.
  void moe_route_backward(ConstFloatView logits, const MoeRoutingParams& p, ConstFloatView d_probs,
                          ConstFloatView routing_map, ConstFloatView aux_counts, float aux_grad, float z_grad,
                          FloatView d_logits);
  // Megatron's sinkhorn (megatron/core/transformer/moe/moe_utils.py) of router logits [tokens,
  // experts], fp32: exp(logits) scaled by a factor per token and one per expert, both updated in
  // turn until the experts' factors change by at most 1e-4 on average (at most 10,000 rounds);
  // the scores sinkhorn routing chooses by in training (MoeRoutingParams::choice_scores).
  void moe_sinkhorn(ConstFloatView logits, int64_t tokens, int64_t experts, FloatView out);
  // The index tables of the token permutation (model/moe_token_dispatcher.hpp) from a routing map
  // [p.tokens, p.experts] (fp32, > 0 where routed), over the experts [p.first, + p.count): each
  // expert's rows are its routed tokens in token order, then its padding rows (MoePermutation),
  // the experts one after another. row_token and row_slot [max rows]: each row's token and
  // t·experts + e, −1 for padding and past the last row; token_rows [tokens, topk]: each token's
  // rows in expert order, −1 after its last; slot_row [tokens · experts]: the row of (t, e), −1
  // where not routed or outside the range; expert_rows [count + 1]: the rows of each expert, then
  // the status (MoePermutationStatus). The tables stay in backend memory: the rows per expert
  // (needed on the host for the experts' GEMM shapes) can be read back while the permutation's
  // gathers run.
  void moe_permutation(ConstFloatView routing_map, const MoePermutation& p, IndexView row_token, IndexView row_slot,
                       IndexView token_rows, IndexView slot_row, IndexView expert_rows);
  // out[r, :] = weights[r] · in[index[r], :] (without weights: in[index[r], :]), or zeros where
  // index[r] < 0: the permutation of tokens to the experts' rows.
  void gather_rows(ConstFloatView in, int64_t in_rows, int64_t cols, ConstIndexView index, ConstFloatView weights,
                   FloatView out);
  // out[t, :] = Σ_j weights[i] · in[i, :] for i = index[t·k + j] ≥ 0, j < k (weights[i] = 1
  // without weights): the experts' rows combined back into tokens, in a fixed order.
  void gather_sum_rows(ConstFloatView in, int64_t in_rows, int64_t cols, ConstIndexView index, int64_t k,
                       ConstFloatView weights, FloatView out);
  // out[r] = Σ_c a[r, c] · b[r, c].
  void row_dot(ConstFloatView a, ConstFloatView b, int64_t rows, int64_t cols, FloatView out);
  // out[r, :] = factors[r] · x[r, :] for x and out [rows, cols] (not overlapping) and factors
  // [rows]: a per-token gate on a layer's output (the shared experts' sigmoid gate).
  void scale_rows(ConstFloatView x, ConstFloatView factors, int64_t rows, int64_t cols, FloatView out);

  // ---- element-wise ----
  void add_bias(FloatView y, ConstFloatView bias, int64_t rows, int64_t cols);
  // out = a + b, or a + b + c where c is given (rounded once); out may alias a or b.
  void add(ConstFloatView a, ConstFloatView b, FloatView out, ConstFloatView c = {});
  // y += x.
  void accumulate(FloatView y, ConstFloatView x);
  void scale(FloatView x, float factor);

  // ---- optimizer support ----
  void adamw_step(FloatView param, ConstFloatView grad, FloatView exp_avg, FloatView exp_avg_sq,
                  const AdamWParams& params, int64_t step);
  // One AdamW step over a contiguous part of the flat buffers (Megatron's fused Adam over its
  // gradient buffer), in runs [segment_ends[r−1], segment_ends[r]) (increasing, the last one =
  // param.size()) whose segment_flags[r] say how they update: kAdamWDecay, decayed with
  // params.weight_decay (else not at all); kAdamWDecoupledLr, at decoupled_lr instead of
  // params.lr (Megatron's --decoupled-lr for the embedding and output layer). The gradient is
  // multiplied by grad_scale as it is read (gradient clipping without a pass of its own).
  // compute, when not empty, receives the updated weights in its own type (the model's bf16
  // copy). Element for element the result equals scale() followed by adamw_step() on each run.
  // The moments may be bf16 (Megatron's precision-aware optimizer): read into fp32, updated, and
  // stored rounded to nearest even.
  void adamw_update(FloatView param, ConstFloatView grad, FloatView exp_avg, FloatView exp_avg_sq,
                    std::span<const int64_t> segment_ends, std::span<const int64_t> segment_flags,
                    const AdamWParams& params, float decoupled_lr, float grad_scale, int64_t step,
                    FloatView compute);
  // Σ x², accumulated in double and read back to the host.
  double sum_of_squares(ConstFloatView x);
  // The same over some ranges of x, each range's sum as above, added in their order: what a
  // loop of sum_of_squares(x.subspan(…)) returns, with one read back instead of one per range.
  double sum_of_squares(ConstFloatView x, std::span<const ElementRange> ranges);

protected:
  // By default through qkv_split / qkv_merge and temporaries (overrides fall back to them).
  virtual void do_attention_forward_fused_qkv(ConstFloatView mixed, const AttentionShape& shape,
                                              const AttentionParams& params, FloatView out, FloatView lse);
  virtual void do_attention_backward_fused_qkv(ConstFloatView mixed, ConstFloatView out, ConstFloatView dout,
                                               ConstFloatView lse, const AttentionShape& shape,
                                               const AttentionParams& params, FloatView d_mixed);
  // Default: one sum_of_squares per range (overrides fall back to it). Ranges are within x and
  // not empty.
  virtual double do_sum_of_squares_ranges(ConstFloatView x, std::span<const ElementRange> ranges);

  FloatType activation_type_ = FloatType::kF32;

  // Fused operations: by default the unfused operations one after the other (the reference); a
  // backend's override falls back to these where its fused kernel does not apply.
  virtual void do_linear_gelu_tanh_forward(ConstFloatView x, ConstFloatView w, ConstFloatView bias,
                                           int64_t rows, int64_t in, int64_t out, FloatView pre,
                                           FloatView y);
  virtual void do_linear_backward_input_gelu_tanh(ConstFloatView dy, ConstFloatView w,
                                                  ConstFloatView pre, int64_t rows, int64_t in,
                                                  int64_t out, FloatView dpre);
  // Grouped linear layers: by default one do_linear_* per group with rows (overrides fall back to
  // it). The views are as the public call checked and staged them.
  virtual void do_grouped_linear_forward(ConstFloatView x, std::span<const ConstFloatView> w,
                                         std::span<const ConstFloatView> bias, std::span<const int64_t> group_rows,
                                         int64_t in, int64_t out, FloatView y);
  virtual void do_grouped_linear_backward_input(ConstFloatView dy, std::span<const ConstFloatView> w,
                                                std::span<const int64_t> group_rows, int64_t in, int64_t out,
                                                FloatView dx);
  virtual void do_grouped_linear_backward_weight(ConstFloatView dy, ConstFloatView x,
                                                 std::span<const int64_t> group_rows, int64_t in, int64_t out,
                                                 std::span<const FloatView> dw, bool accumulate);
  virtual void do_fp8_linear_gelu_tanh_forward(ConstFp8View x, ConstFp8View w, ConstFloatView bias, int64_t rows,
                                               int64_t in, int64_t out, FloatView pre, FloatView y);
  virtual void do_fp8_quantize_gradient(ConstFloatView dy, ConstFloatView pre, int64_t rows, int64_t cols,
                                        const Fp8Scaling& scaling, Fp8View rowwise, Fp8View transposed,
                                        FloatView dbias, FloatView dpre, bool accumulate_dbias);
  // Default: gelu_tanh_forward into a temporary, then fp8_quantize.
  virtual void do_fp8_quantize_gelu_tanh(ConstFloatView pre, int64_t rows, int64_t cols, const Fp8Scaling& scaling,
                                         Fp8View rowwise, Fp8View transposed);
  // Default: through host memory (the CPU backend's own).
  virtual void do_fp8_transpose(Fp8View x, int64_t rows, int64_t cols, ConstFloatView scale, Fp8View transposed);
  // Default: the norm (add_norm_forward with b) into a temporary of the norm input's type, then
  // fp8_quantize. b and c empty without the add; sum then empty too.
  virtual void do_fp8_norm_forward(ConstFloatView x, ConstFloatView b, ConstFloatView c, FloatView sum,
                                   ConstFloatView weight, ConstFloatView bias, int64_t rows, int64_t hidden, float eps,
                                   const Fp8Scaling& scaling, Fp8View rowwise, FloatView mean, FloatView rstd);
  // Default: the length read back, then rotary_forward, copies and attention_forward.
  virtual void do_cached_attention(FloatView q, FloatView k, ConstFloatView v, FloatView key_cache,
                                   FloatView value_cache, ConstIndexView length,
                                   const AttentionShape& shape, const RotaryParams* rotary,
                                   float softmax_scale, FloatView out);

  // Default: add, then layer_norm_forward or rms_norm_forward.
  virtual void do_add_norm_forward(ConstFloatView a, ConstFloatView b, ConstFloatView c, FloatView sum,
                                   ConstFloatView weight, ConstFloatView bias, int64_t rows, int64_t hidden,
                                   float eps, FloatView y, FloatView mean, FloatView rstd);

private:
  friend class Fp32Staging;
  static void check_transfer(int64_t from, int64_t to, const char* op);

  virtual void* do_allocate(size_t bytes) = 0;
  virtual void do_free(void* data, size_t bytes) noexcept = 0;
  // Defaults: do_allocate and do_free.
  virtual void* do_allocate_shareable(size_t bytes) { return do_allocate(bytes); }
  virtual void do_free_shareable(void* data, size_t bytes) noexcept { do_free(data, bytes); }
  virtual void do_copy_from_host(const void* host, void* device, size_t bytes) = 0;
  virtual void do_copy_to_host(const void* device, void* host, size_t bytes) = 0;
  // Defaults: ordinary memory, and the synchronous copy (the CPU's operations complete anyway).
  virtual void* do_allocate_pinned(size_t bytes);
  virtual void do_free_pinned(void* data, size_t bytes) noexcept;
  virtual void do_copy_from_host_async(const void* host, void* device, size_t bytes) {
    do_copy_from_host(host, device, bytes);
  }
  virtual void do_copy_to_host_async(const void* device, void* host, size_t bytes) {
    do_copy_to_host(device, host, bytes);
  }
  virtual void do_copy(ConstFloatArg src, FloatArg dst, int64_t n) = 0;
  // By default one do_copy per range.
  virtual void do_copy_ranges(ConstFloatView src, FloatView dst, std::span<const CopyRange> ranges);
  virtual void do_fill(FloatArg x, int64_t n, float value) = 0;
  // Between any two types (the only hook that must take every type).
  virtual void do_convert(ConstFloatView src, FloatView dst) = 0;

  virtual void do_linear_forward(ConstFloatArg x, ConstFloatArg w, ConstFloatArg bias, int64_t rows,
                                 int64_t in, int64_t out, FloatArg y) = 0;
  virtual void do_linear_backward_input(ConstFloatArg dy, ConstFloatArg w, int64_t rows, int64_t in,
                                        int64_t out, FloatArg dx) = 0;
  virtual void do_linear_backward_weight(ConstFloatArg dy, ConstFloatArg x, int64_t rows, int64_t in,
                                         int64_t out, FloatArg dw, bool accumulate) = 0;
  virtual void do_bias_backward(ConstFloatArg dy, int64_t rows, int64_t cols, FloatArg dbias, bool accumulate) = 0;
  virtual void do_linear_forward_fp64(ConstFloatArg x, ConstFloatArg w, int64_t rows, int64_t in, int64_t out,
                                      FloatArg y) = 0;
  virtual void do_linear_backward_fp64(ConstFloatArg dy, ConstFloatArg x, ConstFloatArg w, int64_t rows, int64_t in,
                                       int64_t out, FloatArg dx, FloatArg dw, bool accumulate) = 0;

  virtual void do_fp8_quantize(ConstFloatArg x, int64_t rows, int64_t cols, const Fp8Scaling& scaling,
                               Fp8View rowwise, Fp8View transposed) = 0;
  virtual void do_fp8_linear(ConstFp8View x, ConstFp8View w, ConstFloatArg bias, int64_t rows, int64_t in,
                             int64_t out, FloatArg y, bool accumulate, Fp8GemmRole role) = 0;
  virtual void do_fp8_scaling_update(FloatView history, FloatView scale, int64_t tensors, int64_t history_len,
                                     Fp8AmaxAlgo algo, float scaled_max) = 0;

  virtual void do_layer_norm_forward(ConstFloatArg x, ConstFloatArg weight, ConstFloatArg bias,
                                     int64_t rows, int64_t hidden, float eps, FloatArg y, FloatArg mean,
                                     FloatArg rstd) = 0;
  virtual void do_layer_norm_backward(ConstFloatArg dy, ConstFloatArg x, ConstFloatArg weight,
                                      ConstFloatArg mean, ConstFloatArg rstd, int64_t rows,
                                      int64_t hidden, FloatArg dx, FloatArg dweight, FloatArg dbias,
                                      bool accumulate_dx, bool accumulate_params) = 0;
  virtual void do_rms_norm_forward(ConstFloatArg x, ConstFloatArg weight, int64_t rows,
                                   int64_t hidden, float eps, FloatArg y, FloatArg rstd) = 0;
  virtual void do_rms_norm_backward(ConstFloatArg dy, ConstFloatArg x, ConstFloatArg weight,
                                    ConstFloatArg rstd, int64_t rows, int64_t hidden, FloatArg dx,
                                    FloatArg dweight, bool accumulate_dx, bool accumulate_params) = 0;

  virtual void do_gelu_forward(ConstFloatArg x, int64_t n, FloatArg y) = 0;
  virtual void do_gelu_backward(ConstFloatArg dy, ConstFloatArg x, int64_t n, FloatArg dx) = 0;
  virtual void do_gelu_tanh_forward(ConstFloatArg x, int64_t n, FloatArg y) = 0;
  virtual void do_gelu_tanh_backward(ConstFloatArg dy, ConstFloatArg x, int64_t n, FloatArg dx) = 0;
  virtual void do_squared_relu_forward(ConstFloatArg x, int64_t n, FloatArg y) = 0;
  virtual void do_squared_relu_backward(ConstFloatArg dy, ConstFloatArg x, int64_t n, FloatArg dx) = 0;
  virtual void do_swiglu_forward(ConstFloatArg x, int64_t rows, int64_t ffn, FloatArg y) = 0;
  virtual void do_swiglu_backward(ConstFloatArg dy, ConstFloatArg x, int64_t rows, int64_t ffn,
                                  FloatArg dx) = 0;

  virtual void do_dropout_forward(ConstFloatArg x, int64_t n, float p, DropoutKey key, FloatArg y) = 0;
  virtual void do_dropout_backward(ConstFloatArg dy, int64_t n, float p, DropoutKey key,
                                   FloatArg dx) = 0;
  virtual void do_uniform_jitter(ConstFloatArg x, int64_t n, float eps, DropoutKey key, FloatArg y) = 0;
  virtual void do_standard_normal(int64_t n, DropoutKey key, FloatArg y) = 0;

  virtual void do_embedding_forward(const int64_t* ids, int64_t n, ConstFloatArg table,
                                    int64_t vocab_start, int64_t local_rows, int64_t hidden,
                                    FloatArg out) = 0;
  virtual void do_embedding_backward(const int64_t* ids, int64_t n, ConstFloatArg dout,
                                     int64_t vocab_start, int64_t local_rows, int64_t hidden,
                                     FloatArg dtable) = 0;

  virtual void do_rotary_forward(ConstFloatArg x, const HeadTensor& shape,
                                 const RotaryParams& params, FloatArg y) = 0;
  virtual void do_rotary_backward(ConstFloatArg dy, const HeadTensor& shape,
                                  const RotaryParams& params, FloatArg dx) = 0;

  virtual void do_attention_forward(ConstFloatArg q, ConstFloatArg k, ConstFloatArg v,
                                    const AttentionShape& shape, const AttentionParams& params,
                                    FloatArg out, FloatArg lse) = 0;
  virtual void do_attention_backward(ConstFloatArg q, ConstFloatArg k, ConstFloatArg v,
                                     ConstFloatArg out, ConstFloatArg dout, ConstFloatArg lse,
                                     const AttentionShape& shape, const AttentionParams& params,
                                     FloatArg dq, FloatArg dk, FloatArg dv) = 0;

  virtual void do_attention_merge(ConstFloatArg part_out, ConstFloatArg part_lse, const HeadTensor& whole,
                                  int64_t first_row, int64_t part_rows, FloatArg out, FloatArg lse) = 0;

  virtual void do_qkv_split(ConstFloatArg mixed, int64_t tokens, int64_t heads, int64_t groups,
                            int64_t unit, FloatArg q, FloatArg k, FloatArg v) = 0;
  virtual void do_qkv_merge(ConstFloatArg q, ConstFloatArg k, ConstFloatArg v, int64_t tokens,
                            int64_t heads, int64_t groups, int64_t unit, FloatArg mixed) = 0;

  virtual void do_cross_entropy_shard_statistics(ConstFloatArg logits, const int64_t* targets,
                                                 int64_t rows, int64_t vocab, int64_t vocab_start,
                                                 FloatArg statistics) = 0;
  virtual void do_cross_entropy_combine(ConstFloatArg statistics, int64_t ranks, int64_t rows,
                                        FloatArg loss, FloatArg row_max, FloatArg sum_exp) = 0;
  virtual void do_cross_entropy_forward(ConstFloatArg logits, const int64_t* targets, int64_t rows,
                                        int64_t vocab, FloatArg loss, FloatArg row_max,
                                        FloatArg sum_exp) = 0;
  virtual void do_cross_entropy_backward(ConstFloatArg logits, const int64_t* targets,
                                         ConstFloatArg row_max, ConstFloatArg sum_exp,
                                         ConstFloatArg dloss, int64_t rows, int64_t vocab,
                                         int64_t vocab_start, FloatArg dlogits) = 0;
  virtual MaskedLossSum do_masked_loss_sum(ConstFloatArg loss, ConstFloatArg loss_mask,
                                           int64_t rows) = 0;
  // Default: do_masked_loss_sum and the host's addition (memory the host can read: the CPU's).
  virtual void do_masked_loss_sum_on_device(ConstFloatArg loss, ConstFloatArg loss_mask, int64_t rows,
                                            double* sums, bool accumulate);
  virtual void do_row_argmax(ConstFloatArg x, int64_t rows, int64_t cols, int64_t row_stride,
                             int64_t* out) = 0;
  virtual void do_masked_loss_grad(ConstFloatArg loss_mask, int64_t rows, float scale,
                                   FloatArg dloss) = 0;
  virtual void do_moe_route(ConstFloatArg logits, const MoeRoutingParams& p, FloatArg gates, FloatArg probs,
                            FloatArg routing_map, FloatArg aux_counts, double* statistics, bool accumulate) = 0;
  virtual void do_moe_route_backward(ConstFloatArg logits, const MoeRoutingParams& p, ConstFloatArg d_probs,
                                     ConstFloatArg routing_map, ConstFloatArg aux_counts, float aux_grad,
                                     float z_grad, FloatArg d_logits) = 0;
  virtual void do_moe_sinkhorn(ConstFloatArg logits, int64_t tokens, int64_t experts, FloatArg out) = 0;
  // By default on the host: the map read back, the tables written from host memory.
  virtual void do_moe_permutation(ConstFloatView routing_map, const MoePermutation& p, IndexView row_token,
                                  IndexView row_slot, IndexView token_rows, IndexView slot_row, IndexView expert_rows);
  virtual void do_gather_rows(ConstFloatArg in, int64_t in_rows, int64_t cols, const int64_t* index,
                              int64_t out_rows, ConstFloatArg weights, FloatArg out) = 0;
  virtual void do_gather_sum_rows(ConstFloatArg in, int64_t in_rows, int64_t cols, const int64_t* index,
                                  int64_t out_rows, int64_t k, ConstFloatArg weights, FloatArg out) = 0;
  virtual void do_row_dot(ConstFloatArg a, ConstFloatArg b, int64_t rows, int64_t cols, FloatArg out) = 0;
  virtual void do_scale_rows(ConstFloatArg x, ConstFloatArg factors, int64_t rows, int64_t cols, FloatArg out) = 0;

  virtual void do_add_bias(FloatArg y, ConstFloatArg bias, int64_t rows, int64_t cols) = 0;
  virtual void do_add(ConstFloatArg a, ConstFloatArg b, ConstFloatArg c, int64_t n, FloatArg out) = 0;
  virtual void do_accumulate(FloatArg y, ConstFloatArg x, int64_t n) = 0;
  virtual void do_scale(FloatArg x, int64_t n, float factor) = 0;

  virtual void do_adamw_step(FloatArg param, ConstFloatArg grad, FloatArg exp_avg, FloatArg exp_avg_sq,
                             int64_t n, const AdamWParams& params, int64_t step) = 0;
  // Default: the two operations with their statistics in temporaries.
  virtual void do_cross_entropy_forward_backward(FloatView logits, ConstIndexView targets,
                                                 ConstFloatView dloss, int64_t rows,
                                                 int64_t vocab, FloatView loss);
  // Default: scale and adamw_step per run, then a conversion into compute; bf16 moments through
  // fp32 copies (adamw_update_on_fp32_moments).
  virtual void do_adamw_update(FloatView param, ConstFloatView grad, FloatView exp_avg,
                               FloatView exp_avg_sq, std::span<const int64_t> segment_ends,
                               std::span<const int64_t> segment_flags, const AdamWParams& params,
                               float decoupled_lr, float grad_scale, int64_t step,
                               FloatView compute);
  virtual double do_sum_of_squares(ConstFloatArg x, int64_t n) = 0;
  // do_adamw_update of bf16 moments on fp32 copies of them, a part at a time: for a backend whose
  // update reads fp32 moments only.
  void adamw_update_on_fp32_moments(FloatView param, ConstFloatView grad, FloatView exp_avg, FloatView exp_avg_sq,
                                    std::span<const int64_t> segment_ends, std::span<const int64_t> segment_flags,
                                    const AdamWParams& params, float decoupled_lr, float grad_scale, int64_t step,
                                    FloatView compute);
};

// Owning, move-only array of T in a backend's memory (RAII). Contents start undefined.
template <typename T>
class DeviceArray {
public:
  DeviceArray() = default;
  DeviceArray(Backend& backend, int64_t size, MemorySharing sharing = MemorySharing::kPrivate)
      : backend_(&backend), size_(size), sharing_(sharing) {
    if (size < 0) throw_device_span_range(0, size, 0);
    if (size > 0) {
      const size_t bytes = static_cast<size_t>(size) * sizeof(T);
      data_ = static_cast<T*>(sharing == MemorySharing::kShareable ? backend.allocate_shareable(bytes)
                                                                  : backend.allocate_bytes(bytes));
    }
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  DeviceArray(DeviceArray&& other) noexcept
      : backend_(other.backend_),
        data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)),
        sharing_(other.sharing_) {}
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    if (this != &other) {
      release();
      backend_ = other.backend_;
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      sharing_ = other.sharing_;
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
    if (data_ != nullptr) {
      const size_t bytes = static_cast<size_t>(size_) * sizeof(T);
      if (sharing_ == MemorySharing::kShareable) {
        backend_->free_shareable(data_, bytes);
      } else {
        backend_->free_bytes(data_, bytes);
      }
    }
    data_ = nullptr;
    size_ = 0;
  }

  Backend* backend_ = nullptr;
  T* data_ = nullptr;
  int64_t size_ = 0;
  MemorySharing sharing_ = MemorySharing::kPrivate;
};

using DeviceIndexBuffer = DeviceArray<int64_t>;

// Owning, move-only array of T in host memory that asynchronous transfers may read (RAII).
template <typename T>
class PinnedHostArray {
public:
  PinnedHostArray() = default;
  PinnedHostArray(Backend& backend, int64_t size) : backend_(&backend), size_(size) {
    if (size < 0) throw_device_span_range(0, size, 0);
    if (size > 0) data_ = static_cast<T*>(backend.allocate_pinned(static_cast<size_t>(size) * sizeof(T)));
  }
  PinnedHostArray(const PinnedHostArray&) = delete;
  PinnedHostArray& operator=(const PinnedHostArray&) = delete;
  PinnedHostArray(PinnedHostArray&& other) noexcept
      : backend_(other.backend_), data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  PinnedHostArray& operator=(PinnedHostArray&& other) noexcept {
    if (this != &other) {
      release();
      backend_ = other.backend_;
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~PinnedHostArray() { release(); }

  int64_t size() const { return size_; }
  std::span<T> host() { return {data_, static_cast<size_t>(size_)}; }

private:
  void release() noexcept {
    if (data_ != nullptr) backend_->free_pinned(data_, static_cast<size_t>(size_) * sizeof(T));
    data_ = nullptr;
    size_ = 0;
  }

  Backend* backend_ = nullptr;
  T* data_ = nullptr;
  int64_t size_ = 0;
};

// Owning, move-only array of floating-point elements of one storage type (RAII).
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  DeviceBuffer(Backend& backend, int64_t size, FloatType type = FloatType::kF32,
               MemorySharing sharing = MemorySharing::kPrivate)
      : bytes_(backend, size < 0 ? size : size * float_type_size(type), sharing), size_(size), type_(type) {}
  DeviceBuffer(DeviceBuffer&& other) noexcept
      : bytes_(std::move(other.bytes_)), size_(std::exchange(other.size_, 0)), type_(other.type_) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    bytes_ = std::move(other.bytes_);
    size_ = std::exchange(other.size_, 0);
    type_ = other.type_;
    return *this;
  }

  int64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  FloatType type() const { return type_; }
  FloatView view() { return {bytes_.view().data(), size_, type_}; }
  ConstFloatView view() const { return {bytes_.view().data(), size_, type_}; }

private:
  DeviceArray<unsigned char> bytes_;
  int64_t size_ = 0;
  FloatType type_ = FloatType::kF32;
};

}  // namespace mgt
