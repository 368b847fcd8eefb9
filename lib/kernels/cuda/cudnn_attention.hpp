// Causal self-attention through cuDNN's fused flash-attention engines (the scaled-dot-product
// attention operation graphs of its backend API): bf16 or fp16 operands, fp32 softmax and
// accumulation. The CUDA backend routes attention here when its matmul precision is bf16 (--bf16)
// or fp16 (--fp16) and cuDNN runs the call; otherwise the fp32 kernels of attention.cu run.
//
// The semantics are those of kernels/cpu/attention.hpp with q, k, v (and dout) rounded to bf16 on
// the way in and out, dq, dk, dv rounded to bf16 before they are widened back to fp32. lse is
// cuDNN's softmax statistics tensor, max + ln Σ exp(s − max) over the scaled, masked scores s of a
// row: exactly the CPU's lse (natural log, scale included), so cuDNN writes and reads it in place
// and the fp32 kernels can consume it too.
//
// cuDNN runs a call when seq_q == seq_kv (the causal mask is then the same at either corner),
// head_dim is a multiple of 8 up to 128, groups divides heads (grouped-query attention is native
// to cuDNN's graphs), lse is 16-byte aligned, and an engine exists for the shape.
//
// Attention dropout runs on cuDNN's own Philox generator, seeded from the DropoutKey (seed, stream
// and the call's first global head) so that the backward regenerates the forward's mask. Those
// masks are not the CPU reference's (kernels/cpu/dropout.hpp), nor the fp32 kernel's, and a
// tensor-parallel run does not draw the single-rank run's masks: bf16 attention dropout is
// statistically the same dropout, not the same bits.
//
// Not deterministic: the backward engines sum dQ in an order that varies from run to run, also
// those cuDNN does not note as non-deterministic (measured at GPT-2 124M's shape, 8 × 1024 tokens
// of 12 heads). Deterministic mode therefore does not route attention here (CudaBackend).
#pragma once
#include "kernels/float_view.hpp"
#include <cuda_runtime_api.h>

#include <memory>

#include "kernels/cpu/attention.hpp"

namespace mgt::cuda {

class CudnnAttention {
public:
  // A cuDNN handle on `stream`, where every call is queued. Throws where this build has no cuDNN.
  explicit CudnnAttention(cudaStream_t stream);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Whether this build links cuDNN (MGT_HAVE_CUDNN).
  static bool built();
  // The shapes and parameters cuDNN is asked to run (see above); the alignment of lse and the
  // existence of an engine are checked by the calls themselves.
  static bool handles(const AttentionShape& shape, const AttentionParams& params);

  // Each runs the call on the stream and returns true, or returns false having queued nothing,
  // and the caller runs the fp32 kernel. Plans are built once per shape, layout and dropout rate
  // (the first call of a shape pays for cuDNN's engine compilation); a shape without an engine
  // is reported once and then falls back at once. A forward with dropout runs here only if its
  // backward can too, so that both draw cuDNN's masks.
  // bf16 and fp16 operands are used in place; fp32 ones go through bf16 copies. All operands of a
  // call are of one type. lse is fp32.
  bool forward(ConstFloatView q, ConstFloatView k, ConstFloatView v,
               const AttentionShape& shape, const AttentionParams& params,
               FloatView out, float* lse);
  bool backward(ConstFloatView q, ConstFloatView k, ConstFloatView v, ConstFloatView out,
                ConstFloatView dout, const float* lse, const AttentionShape& shape,
                const AttentionParams& params, FloatView dq, FloatView dk, FloatView dv);

  // The same reading Q, K and V from the fused QKV projection's output, mixed [s, b, heads, 3,
  // head_dim] (seq-major, groups == heads, 2-byte storage), and writing dQ, dK and dV into
  // d_mixed in that layout: no split or merge around the call. The output and its gradient are
  // [s, b, heads, head_dim] as above.
  static bool handles_fused_qkv(const AttentionShape& shape, const AttentionParams& params);
  bool forward_fused_qkv(ConstFloatView mixed, const AttentionShape& shape,
                         const AttentionParams& params, FloatView out, float* lse);
  bool backward_fused_qkv(ConstFloatView mixed, ConstFloatView out, ConstFloatView dout, const float* lse,
                          const AttentionShape& shape, const AttentionParams& params,
                          FloatView d_mixed);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mgt::cuda
