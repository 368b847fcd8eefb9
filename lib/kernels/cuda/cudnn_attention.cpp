// CudnnAttention (cudnn_attention.hpp): the calls, their operands (2-byte storage in place, fp32
// through bf16 copies) and scratch, and the dropout seed; the operation graphs are
// cudnn_attention_graphs.cpp's, built with cudnn_graph_builder.hpp and kept as plans by
// cudnn_plan_cache.hpp.
#include "kernels/cuda/cudnn_attention.hpp"

#include "core/error.hpp"

#if defined(MGT_HAVE_CUDNN)

#include <cudnn_graph.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <utility>

#include "kernels/cuda/bf16_convert.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/cuda/cudnn_attention_graphs.hpp"
#include "kernels/cuda/cudnn_check.hpp"
#include "kernels/cuda/cudnn_plan_cache.hpp"

namespace mgt::cuda {

// The graphs' builder, keys and plans.
using namespace cudnn;

namespace {

// The operands of one call share a storage type: fp32 (attended through bf16 copies), bf16 or fp16.
bool same_type(std::initializer_list<ConstFloatView> operands) {
  for (const ConstFloatView& t : operands) {
    if (t.type() != operands.begin()->type()) return false;
  }
  return true;
}

// One stream-ordered allocation carved into 256-byte aligned parts, freed in stream order.
class Scratch {
public:
  Scratch(cudaStream_t stream, std::initializer_list<int64_t> bytes) : stream_(stream) {
    int64_t total = 0;
    for (const int64_t b : bytes) {
      offsets_.push_back(total);
      total += (b + 255) / 256 * 256;
    }
    MGT_CUDA_CHECK(cudaMallocAsync(&base_, static_cast<size_t>(total > 0 ? total : 256), stream_));
  }
  ~Scratch() { cudaFreeAsync(base_, stream_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;

  template <typename T = void>
  T* part(size_t i) const {
    return reinterpret_cast<T*>(static_cast<char*>(base_) + offsets_.at(i));
  }

private:
  cudaStream_t stream_;
  void* base_ = nullptr;
  std::vector<int64_t> offsets_;
};

uint64_t mix64(uint64_t x) {  // SplitMix64's finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// cuDNN's Philox seed for a call: one per (seed, stream, first global head), so that layers,
// micro-batches and tensor-parallel ranks draw independent masks; the offset is the key's.
int64_t philox_seed(const AttentionParams& p) {
  const uint64_t first_head = static_cast<uint64_t>(p.dropout_first_head);
  return static_cast<int64_t>(mix64(p.dropout_key.seed ^ mix64(p.dropout_key.stream ^ mix64(first_head))));
}

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kAlignment == 0; }

}  // namespace

struct CudnnAttention::Impl {
  cudaStream_t stream = nullptr;
  cudnnHandle_t handle = nullptr;
  float mask_value = 0.0f;
  PlanCache plans;

  const Plan* plan_for(const PlanKey& key) { return plans.plan_for(handle, key); }

  // One forward on 2-byte operands (seed and offset of dropout's Philox in philox[0..1]).
  void run_forward(const Plan& plan, const AttentionParams& params, const void* q, const void* k, const void* v,
                   void* o, float* lse, int64_t* philox, void* workspace) {
    const float scale = params.softmax_scale;
    if (plan.key.dropout_bits != 0) {
      const float dropout_scale = 1.0f / (1.0f - params.dropout_p);
      store_int64_pair(philox, philox_seed(params), static_cast<int64_t>(params.dropout_key.offset), stream);
      execute_plan(handle, plan,
                   {{kQ, q}, {kK, k}, {kV, v}, {kO, o}, {kStats, lse}, {kScale, &scale}, {kMaskValue, &mask_value},
                    {kDropoutScale, &dropout_scale}, {kSeed, philox}, {kOffset, philox + 1}},
                   workspace);
    } else {
      execute_plan(handle, plan,
                   {{kQ, q}, {kK, k}, {kV, v}, {kO, o}, {kStats, lse}, {kScale, &scale}, {kMaskValue, &mask_value}},
                   workspace);
    }
  }

  struct BackwardInputs {
    const void* q;
    const void* k;
    const void* v;
    const void* o;
    const void* d_o;
    const float* lse;
  };
  struct BackwardOutputs {
    void* dq;
    void* dk;
    void* dv;
  };
  // One backward on 2-byte operands; softmax_sum (fp32, a value per query row) and dq_accum
  // (fp32, as Q) are its scratch.
  void run_backward(const Plan& plan, const AttentionParams& params, const BackwardInputs& in,
                    const BackwardOutputs& out, void* softmax_sum, void* dq_accum, int64_t* philox,
                    void* workspace) {
    const PlanKey& key = plan.key;
    // cudnn-frontend stopped clearing the accumulator with cuDNN 9.6; clearing it costs little and
    // keeps older libraries right.
    const int64_t nq = key.batch * key.heads * key.seq * key.head_dim;
    MGT_CUDA_CHECK(cudaMemsetAsync(dq_accum, 0, static_cast<size_t>(4 * nq), stream));
    const float scale = params.softmax_scale;
    const float one = 1.0f;
    if (key.dropout_bits != 0) {
      const float dropout_scale = 1.0f / (1.0f - params.dropout_p);
      const float keep = 1.0f - params.dropout_p;
      store_int64_pair(philox, philox_seed(params), static_cast<int64_t>(params.dropout_key.offset), stream);
      execute_plan(handle, plan,
                   {{kQ, in.q}, {kK, in.k}, {kV, in.v}, {kO, in.o}, {kDO, in.d_o}, {kStats, in.lse}, {kDQ, out.dq},
                    {kDK, out.dk}, {kDV, out.dv}, {kSoftmaxSum, softmax_sum}, {kDQAccum, dq_accum}, {kScale, &scale},
                    {kMaskValue, &mask_value}, {kDropoutScale, &dropout_scale}, {kDropoutKeep, &keep},
                    {kSeed, philox}, {kOffset, philox + 1}},
                   workspace);
    } else {
      execute_plan(handle, plan,
                   {{kQ, in.q}, {kK, in.k}, {kV, in.v}, {kO, in.o}, {kDO, in.d_o}, {kStats, in.lse}, {kDQ, out.dq},
                    {kDK, out.dk}, {kDV, out.dv}, {kSoftmaxSum, softmax_sum}, {kDQAccum, dq_accum}, {kScale, &scale},
                    {kMaskValue, &mask_value}, {kOne, &one}},
                   workspace);
    }
  }
};

CudnnAttention::CudnnAttention(cudaStream_t stream) : impl_(std::make_unique<Impl>()) {
  impl_->stream = stream;
  MGT_CUDNN_CHECK(cudnnCreate(&impl_->handle));
  MGT_CUDNN_CHECK(cudnnSetStream(impl_->handle, stream));
  // cuDNN before 9.10 wants the lowest finite float as the masked score, later ones −∞.
  impl_->mask_value = cudnnGetVersion() < 91000 ? std::numeric_limits<float>::lowest()
                                                : -std::numeric_limits<float>::infinity();
}

CudnnAttention::~CudnnAttention() {
  impl_->plans.clear();
  if (impl_->handle != nullptr) cudnnDestroy(impl_->handle);
}

bool CudnnAttention::built() { return true; }

bool CudnnAttention::handles(const AttentionShape& s, const AttentionParams& p) {
  // Before 9.16 the backward of a key length that is not a multiple of 128 needs a padding mask
  // (cudnn-frontend adds one); those lengths keep to the fp32 kernel there.
  const bool length_ok = s.seq_kv % 128 == 0 || cudnnGetVersion() >= 91600;
  // A causal graph has as many keys as queries; the unmasked blocks of ring attention any number.
  return (p.causal ? s.seq_q == s.seq_kv : s.seq_kv > 0) && s.seq_q > 0 && s.batch > 0 && s.heads > 0 &&
         s.groups > 0 &&
         s.heads % s.groups == 0 && s.head_dim % 8 == 0 && s.head_dim >= 8 && s.head_dim <= 128 &&
         p.dropout_p >= 0.0f && p.dropout_p < 1.0f && length_ok;
}

bool CudnnAttention::handles_fused_qkv(const AttentionShape& s, const AttentionParams& p) {
  return handles(s, p) && s.groups == s.heads && s.layout == SeqLayout::kSeqMajor;
}

bool CudnnAttention::forward(ConstFloatView q, ConstFloatView k, ConstFloatView v,
                             const AttentionShape& shape, const AttentionParams& params,
                             FloatView out, float* lse) {
  if (!handles(shape, params) || !aligned(lse) || !same_type({q, k, v, out})) return false;
  Impl& im = *impl_;
  const bool half = q.type() == FloatType::kF16;
  const PlanKey key = make_key(false, shape, params, half);
  const bool dropout = key.dropout_bits != 0;
  const Plan* plan = im.plan_for(key);
  if (plan == nullptr) return false;
  // With dropout the masks are cuDNN's: the forward runs here only if the backward can too.
  if (dropout && im.plan_for(make_key(true, shape, params, half)) == nullptr) return false;

  const int64_t nq = shape.query().elements();
  const int64_t nkv = shape.key_value().elements();
  const bool copies = q.is_fp32();  // 2-byte storage: cuDNN reads and writes the tensors
  const int64_t cq = copies ? nq : 0;
  const int64_t ckv = copies ? nkv : 0;
  const Scratch scratch(im.stream, {2 * cq, 2 * ckv, 2 * ckv, 2 * cq, 16, plan->workspace});
  const void* q16 = copies ? scratch.part(0) : q.raw();
  const void* k16 = copies ? scratch.part(1) : k.raw();
  const void* v16 = copies ? scratch.part(2) : v.raw();
  void* o16 = copies ? scratch.part(3) : out.raw();
  int64_t* philox = scratch.part<int64_t>(4);
  if (copies) {
    fp32_to_bf16({{q.raw(), const_cast<void*>(q16), nq}, {k.raw(), const_cast<void*>(k16), nkv},
                  {v.raw(), const_cast<void*>(v16), nkv}},
                 im.stream);
  }
  im.run_forward(*plan, params, q16, k16, v16, o16, lse, philox, scratch.part(5));
  if (copies) bf16_to_fp32({{o16, out.raw(), nq}}, im.stream);
  return true;
}

bool CudnnAttention::forward_fused_qkv(ConstFloatView mixed, const AttentionShape& shape,
                                       const AttentionParams& params, FloatView out, float* lse) {
  if (!handles_fused_qkv(shape, params) || !aligned(lse) || !same_type({mixed, out}) || mixed.is_fp32())
    return false;
  Impl& im = *impl_;
  const bool half = mixed.type() == FloatType::kF16;
  const PlanKey key = make_key(false, shape, params, half, true);
  const Plan* plan = im.plan_for(key);
  if (plan == nullptr) return false;
  if (key.dropout_bits != 0 && im.plan_for(make_key(true, shape, params, half, true)) == nullptr) return false;
  const Scratch scratch(im.stream, {16, plan->workspace});
  const auto* base = static_cast<const char*>(mixed.raw());
  const int64_t vector_bytes = shape.head_dim * static_cast<int64_t>(float_type_size(mixed.type()));
  im.run_forward(*plan, params, base, base + vector_bytes, base + 2 * vector_bytes, out.raw(), lse,
                 scratch.part<int64_t>(0), scratch.part(1));
  return true;
}

bool CudnnAttention::backward(ConstFloatView q, ConstFloatView k, ConstFloatView v,
                              ConstFloatView out, ConstFloatView dout, const float* lse,
                              const AttentionShape& shape, const AttentionParams& params,
                              FloatView dq, FloatView dk, FloatView dv) {
  if (!handles(shape, params) || !aligned(lse) || !same_type({q, k, v, out, dout, dq, dk, dv})) return false;
  Impl& im = *impl_;
  const Plan* plan = im.plan_for(make_key(true, shape, params, q.type() == FloatType::kF16));
  if (plan == nullptr) return false;

  const int64_t nq = shape.query().elements();
  const int64_t nkv = shape.key_value().elements();
  const int64_t rows = shape.batch * shape.heads * shape.seq_q;
  const bool copies = q.is_fp32();  // 2-byte storage: cuDNN reads and writes the tensors
  const int64_t cq = copies ? nq : 0;
  const int64_t ckv = copies ? nkv : 0;
  const Scratch scratch(im.stream, {2 * cq, 2 * ckv, 2 * ckv, 2 * cq, 2 * cq, 2 * cq, 2 * ckv,
                                    2 * ckv, 4 * rows, 4 * nq, 16, plan->workspace});
  const auto in16 = [&](ConstFloatView t, int part) {
    return copies ? scratch.part(part) : const_cast<void*>(t.raw());
  };
  const auto out16 = [&](FloatView t, int part) { return copies ? scratch.part(part) : t.raw(); };
  void* q16 = in16(q, 0);
  void* k16 = in16(k, 1);
  void* v16 = in16(v, 2);
  void* o16 = in16(out, 3);
  void* do16 = in16(dout, 4);
  void* dq16 = out16(dq, 5);
  void* dk16 = out16(dk, 6);
  void* dv16 = out16(dv, 7);
  void* softmax_sum = scratch.part(8);
  void* dq_accum = scratch.part(9);
  int64_t* philox = scratch.part<int64_t>(10);
  if (copies) {
    fp32_to_bf16({{q.raw(), q16, nq}, {k.raw(), k16, nkv}, {v.raw(), v16, nkv},
                  {out.raw(), o16, nq}, {dout.raw(), do16, nq}},
                 im.stream);
  }
  im.run_backward(*plan, params, {q16, k16, v16, o16, do16, lse}, {dq16, dk16, dv16}, softmax_sum, dq_accum,
                  philox, scratch.part(11));
  if (copies) {
    bf16_to_fp32({{dq16, dq.raw(), nq}, {dk16, dk.raw(), nkv}, {dv16, dv.raw(), nkv}}, im.stream);
  }
  return true;
}

bool CudnnAttention::backward_fused_qkv(ConstFloatView mixed, ConstFloatView out, ConstFloatView dout,
                                        const float* lse, const AttentionShape& shape,
                                        const AttentionParams& params, FloatView d_mixed) {
  if (!handles_fused_qkv(shape, params) || !aligned(lse) || !same_type({mixed, out, dout, d_mixed}) ||
      mixed.is_fp32())
    return false;
  Impl& im = *impl_;
  const Plan* plan = im.plan_for(make_key(true, shape, params, mixed.type() == FloatType::kF16, true));
  if (plan == nullptr) return false;
  const int64_t rows = shape.batch * shape.heads * shape.seq_q;
  const Scratch scratch(im.stream, {4 * rows, 4 * shape.query().elements(), 16, plan->workspace});
  const auto* in = static_cast<const char*>(mixed.raw());
  auto* grad = static_cast<char*>(d_mixed.raw());
  const int64_t vector_bytes = shape.head_dim * static_cast<int64_t>(float_type_size(mixed.type()));
  im.run_backward(*plan, params, {in, in + vector_bytes, in + 2 * vector_bytes, out.raw(), dout.raw(), lse},
                  {grad, grad + vector_bytes, grad + 2 * vector_bytes}, scratch.part(0), scratch.part(1),
                  scratch.part<int64_t>(2), scratch.part(3));
  return true;
}

}  // namespace mgt::cuda

#else  // !MGT_HAVE_CUDNN: the fp32 kernel runs every attention.

namespace mgt::cuda {

struct CudnnAttention::Impl {};

CudnnAttention::CudnnAttention(cudaStream_t /*stream*/) {
  throw Error("cuDNN attention: this build has no cuDNN");
}

CudnnAttention::~CudnnAttention() = default;

bool CudnnAttention::built() { return false; }

bool CudnnAttention::handles(const AttentionShape& /*shape*/,
                             const AttentionParams& /*params*/) {
  return false;
}

bool CudnnAttention::forward(ConstFloatView, ConstFloatView, ConstFloatView,
                             const AttentionShape&, const AttentionParams&, FloatView,
                             float*) {
  return false;
}

bool CudnnAttention::backward(ConstFloatView, ConstFloatView, ConstFloatView, ConstFloatView,
                              ConstFloatView, const float*, const AttentionShape&,
                              const AttentionParams&, FloatView, FloatView, FloatView) {
  return false;
}

bool CudnnAttention::handles_fused_qkv(const AttentionShape& /*shape*/,
                                       const AttentionParams& /*params*/) {
  return false;
}

bool CudnnAttention::forward_fused_qkv(ConstFloatView, const AttentionShape&, const AttentionParams&,
                                       FloatView, float*) {
  return false;
}

bool CudnnAttention::backward_fused_qkv(ConstFloatView, ConstFloatView, ConstFloatView, const float*,
                                        const AttentionShape&, const AttentionParams&, FloatView) {
  return false;
}

}  // namespace mgt::cuda

#endif
