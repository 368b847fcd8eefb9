// The operation graphs are the ones cuDNN's fused flash-attention engines recognise (the
// "composite" SDPA graphs of cuDNN 9 before its single SDPA operation takes masks), built with
// the backend API's descriptors:
//
//   forward   S = scale · Q·Kᵀ; S = causal(S) (row ≥ col, else −∞);
//             M = max S, E = exp(S − M), Z = Σ E, stats = M + ln Z, P = E / Z;
//             [dropout: P = P · bernoulli(1 − p) · 1/(1 − p)];  O = P·V
//   backward  D = Σ dO∘O · (1 − p);  P = exp(causal(scale · Q·Kᵀ − stats)) [· mask / (1 − p)];
//             dV = Pᵀ·dO;  dS = (dO·Vᵀ [· mask] − D) ∘ exp(…) [/ (1 − p)] · scale;
//             dK = dSᵀ·Q;  dQ = dS·K (accumulated in fp32, then rounded to the i/o type)
//
// with the key/value heads of a group shared by its query heads (dK, dV summed over them by a
// reduction). Q, K, V, O and their gradients are bf16 or fp16, in the caller's layout, addressed with
// strides (no transposes); the scores never leave the engine.
#include "kernels/cuda/cudnn_attention.hpp"

#include "core/error.hpp"

#if defined(MGT_HAVE_CUDNN)

#include <cudnn_graph.h>

#include <array>
#include <bit>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/log.hpp"
#include "kernels/cuda/bf16_convert.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/cuda/cudnn_check.hpp"

namespace mgt::cuda {
namespace {

using Dims = std::array<int64_t, 4>;

// Unique ids of the tensors a variant pack binds; virtual tensors are numbered from kFirstVirtual.
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kDO,
  kDQ,
  kDK,
  kDV,
  kSoftmaxSum,  // backward: Σ dO∘O per row, fp32 scratch
  kDQAccum,     // backward: dQ accumulated in fp32, scratch
  kScale,       // by value from here on
  kMaskValue,
  kOne,
  kDropoutScale,
  kDropoutKeep,
  kSeed,  // device int64
  kOffset,
  kFirstVirtual = 100,
};

constexpr int64_t kAlignment = 16;

// An owned backend descriptor.
class Descriptor {
public:
  Descriptor() = default;
  explicit Descriptor(cudnnBackendDescriptorType_t type) {
    MGT_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d_));
  }
  ~Descriptor() {
    if (d_ != nullptr) cudnnBackendDestroyDescriptor(d_);
  }
  Descriptor(Descriptor&& other) noexcept : d_(std::exchange(other.d_, nullptr)) {}
  Descriptor& operator=(Descriptor&& other) noexcept {
    if (this != &other) {
      if (d_ != nullptr) cudnnBackendDestroyDescriptor(d_);
      d_ = std::exchange(other.d_, nullptr);
    }
    return *this;
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }

  // Names the attribute in the error, which the call alone would not.
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
           const void* values) {
    const cudnnStatus_t status = cudnnBackendSetAttribute(d_, name, type, count, values);
    if (status != CUDNN_STATUS_SUCCESS) {
      const std::string call = "cudnnBackendSetAttribute(attribute " + std::to_string(name) + ")";
      throw_cuda_error(call.c_str(), cudnn_status_text(status).c_str(), __FILE__, __LINE__);
    }
  }
  void set(cudnnBackendAttributeName_t name, const Descriptor& value) {
    cudnnBackendDescriptor_t raw = value.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw);
  }
  template <typename T>
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, T value) {
    set(name, type, 1, &value);
  }
  void finalize() { MGT_CUDNN_CHECK(cudnnBackendFinalize(d_)); }

private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// Collects tensors and operations, then finalises them into an operation graph.
class GraphBuilder {
public:
  static constexpr int64_t kNone = -1;

  // A tensor bound in the variant pack (by device address).
  int64_t io(int64_t uid, const Dims& dims, const Dims& strides, cudnnDataType_t type) {
    return add(uid, dims, strides, type, false, false);
  }
  // A [1, 1, 1, 1] fp32 scalar bound by host address, read when the plan is launched.
  int64_t scalar(int64_t uid) {
    return add(uid, {1, 1, 1, 1}, {1, 1, 1, 1}, CUDNN_DATA_FLOAT, false, true);
  }
  // An intermediate tensor that never reaches memory.
  int64_t temp(const Dims& dims, const Dims& strides, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    return add(next_virtual_++, dims, strides, type, true, false);
  }
  int64_t temp_like(int64_t like, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    const Shape& s = shapes_.at(like);
    return temp(s.dims, s.strides, type);
  }

  // y = mode(x[, b[, t]]); math in `precision`; axis for GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, int64_t x, int64_t b, int64_t t, int64_t y,
                 cudnnDataType_t precision = CUDNN_DATA_FLOAT, int64_t axis = kNone) {
    Descriptor pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, mode);
    pw.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, precision);
    if (axis != kNone) pw.set(CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, axis);
    pw.finalize();
    Descriptor op(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, tensors_.at(x));
    if (b != kNone) op.set(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, tensors_.at(b));
    if (t != kNone) op.set(CUDNN_ATTR_OPERATION_POINTWISE_TDESC, tensors_.at(t));
    op.set(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, tensors_.at(y));
    op.finalize();
    parts_.push_back(std::move(pw));
    ops_.push_back(std::move(op));
  }
  void unary(cudnnPointwiseMode_t mode, int64_t x, int64_t y) { pointwise(mode, x, kNone, kNone, y); }
  void binary(cudnnPointwiseMode_t mode, int64_t x, int64_t b, int64_t y) {
    pointwise(mode, x, b, kNone, y);
  }

  // c = a·b over the last two dimensions, batched (and broadcast over heads) over the first two.
  void matmul(int64_t a, int64_t b, int64_t c) {
    Descriptor mm(CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    mm.set(CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT);
    mm.finalize();
    Descriptor op(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_MATMUL_ADESC, tensors_.at(a));
    op.set(CUDNN_ATTR_OPERATION_MATMUL_BDESC, tensors_.at(b));
    op.set(CUDNN_ATTR_OPERATION_MATMUL_CDESC, tensors_.at(c));
    op.set(CUDNN_ATTR_OPERATION_MATMUL_DESC, mm);
    op.finalize();
    parts_.push_back(std::move(mm));
    ops_.push_back(std::move(op));
  }

  // y = reduce(x) over the dimensions where y has extent 1.
  void reduction(cudnnReduceTensorOp_t mode, int64_t x, int64_t y) {
    Descriptor red(CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    red.set(CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, mode);
    red.set(CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, CUDNN_DATA_FLOAT);
    red.finalize();
    Descriptor op(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_REDUCTION_XDESC, tensors_.at(x));
    op.set(CUDNN_ATTR_OPERATION_REDUCTION_YDESC, tensors_.at(y));
    op.set(CUDNN_ATTR_OPERATION_REDUCTION_DESC, red);
    op.finalize();
    parts_.push_back(std::move(red));
    ops_.push_back(std::move(op));
  }

  // y = x seen with y's dimensions and strides (a transpose of the last two, here).
  void reshape(int64_t x, int64_t y) {
    Descriptor op(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_RESHAPE_XDESC, tensors_.at(x));
    op.set(CUDNN_ATTR_OPERATION_RESHAPE_YDESC, tensors_.at(y));
    op.finalize();
    ops_.push_back(std::move(op));
  }

  // y = 1 with probability keep, else 0, from the Philox stream of (seed, offset).
  void bernoulli(double keep, int64_t seed, int64_t offset, int64_t y) {
    Descriptor rng(CUDNN_BACKEND_RNG_DESCRIPTOR);
    rng.set(CUDNN_ATTR_RNG_DISTRIBUTION, CUDNN_TYPE_RNG_DISTRIBUTION, CUDNN_RNG_DISTRIBUTION_BERNOULLI);
    rng.set(CUDNN_ATTR_RNG_BERNOULLI_DIST_PROBABILITY, CUDNN_TYPE_DOUBLE, keep);
    rng.finalize();
    Descriptor op(CUDNN_BACKEND_OPERATION_RNG_DESCRIPTOR);
    op.set(CUDNN_ATTR_OPERATION_RNG_DESC, rng);
    op.set(CUDNN_ATTR_OPERATION_RNG_YDESC, tensors_.at(y));
    op.set(CUDNN_ATTR_OPERATION_RNG_SEED, tensors_.at(seed));
    op.set(CUDNN_ATTR_OPERATION_RNG_OFFSET_DESC, tensors_.at(offset));
    op.finalize();
    parts_.push_back(std::move(rng));
    ops_.push_back(std::move(op));
  }

  // The finalised operation graph; `keep` receives every descriptor it refers to.
  Descriptor finish(cudnnHandle_t handle, std::vector<Descriptor>& keep) {
    std::vector<cudnnBackendDescriptor_t> raw;
    raw.reserve(ops_.size());
    for (const Descriptor& op : ops_) raw.push_back(op.get());
    Descriptor graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    graph.set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, handle);
    graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
              static_cast<int64_t>(raw.size()), raw.data());
    graph.finalize();
    for (auto& [uid, tensor] : tensors_) keep.push_back(std::move(tensor));
    for (Descriptor& d : parts_) keep.push_back(std::move(d));
    for (Descriptor& d : ops_) keep.push_back(std::move(d));
    tensors_.clear();
    parts_.clear();
    ops_.clear();
    return graph;
  }

private:
  struct Shape {
    Dims dims;
    Dims strides;
  };

  int64_t add(int64_t uid, const Dims& dims, const Dims& strides, cudnnDataType_t type,
              bool is_virtual, bool by_value) {
    Descriptor t(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    t.set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, uid);
    t.set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, type);
    t.set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
    t.set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
    t.set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, kAlignment);
    t.set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, is_virtual);
    if (by_value) t.set(CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, true);
    t.finalize();
    tensors_.emplace(uid, std::move(t));
    shapes_.emplace(uid, Shape{dims, strides});
    return uid;
  }

  std::map<int64_t, Descriptor> tensors_;
  std::map<int64_t, Shape> shapes_;
  std::vector<Descriptor> parts_;  // pointwise, matmul, reduction and RNG descriptors
  std::vector<Descriptor> ops_;
  int64_t next_virtual_ = kFirstVirtual;
};

// What a plan depends on; the scale, the dropout seed and the data are bound per call.
struct PlanKey {
  bool backward = false;
  int64_t batch = 0, seq = 0, heads = 0, groups = 0, head_dim = 0;
  bool batch_major = false;
  // Q, K and V inside the fused QKV projection's output (seq-major, groups == heads: per token
  // and head, q, k and v), dQ, dK and dV written there too.
  bool fused_qkv = false;
  uint32_t dropout_bits = 0;  // the dropout rate's bits: it is baked into the RNG operation
  bool half = false;          // fp16 operands (--fp16); otherwise bf16

  cudnnDataType_t io_type() const { return half ? CUDNN_DATA_HALF : CUDNN_DATA_BFLOAT16; }

  auto operator<=>(const PlanKey&) const = default;

  float dropout() const { return std::bit_cast<float>(dropout_bits); }
  std::string describe() const {
    return std::string(backward ? "backward" : "forward") + " batch " + std::to_string(batch) +
           " seq " + std::to_string(seq) + " heads " + std::to_string(heads) + "/" +
           std::to_string(groups) + " head_dim " + std::to_string(head_dim) +
           (batch_major ? " batch-major" : " seq-major") + (fused_qkv ? " fused QKV" : "") +
           " dropout " + std::to_string(dropout()) +
           (half ? " fp16" : " bf16");
  }
};

// The operands of one call share a storage type: fp32 (attended through bf16 copies), bf16 or fp16.
bool same_type(std::initializer_list<ConstFloatView> operands) {
  for (const ConstFloatView& t : operands) {
    if (t.type() != operands.begin()->type()) return false;
  }
  return true;
}

PlanKey make_key(bool backward, const AttentionShape& s, const AttentionParams& p, bool half,
                 bool fused_qkv = false) {
  PlanKey key;
  key.fused_qkv = fused_qkv;
  key.half = half;
  key.backward = backward;
  key.batch = s.batch;
  key.seq = s.seq_q;
  key.heads = s.heads;
  key.groups = s.groups;
  key.head_dim = s.head_dim;
  key.batch_major = s.layout == SeqLayout::kBatchMajor;
  key.dropout_bits = std::bit_cast<uint32_t>(p.dropout_p > 0.0f ? p.dropout_p : 0.0f);
  return key;
}

// Dimensions and strides of the graph's tensors, in cuDNN's [batch, heads, rows, cols] order.
struct Geometry {
  Dims q, q_strides;          // Q, dQ (and O, dO unless the QKV is fused)
  Dims o_strides;             // O, dO: the caller's layout
  Dims kv, kv_strides;        // K, V, dK, dV
  Dims kt, kt_strides;        // Kᵀ and Vᵀ: K and V seen transposed
  Dims scores, scores_strides;
  Dims scores_t_strides;      // the scores seen transposed
  Dims rows, rows_strides;    // one value per query row: stats, softmax sums
  Dims packed_q_strides;      // fp32 dQ accumulator, and the per-query-head dK, dV of a group
};

Geometry geometry(const PlanKey& k) {
  const int64_t b = k.batch, s = k.seq, h = k.heads, g = k.groups, d = k.head_dim;
  Geometry t;
  t.q = {b, h, s, d};
  t.kv = {b, g, s, d};
  // HeadTensor: seq-major [s, b, heads, d] or batch-major [b, s, heads, d].
  t.q_strides = k.batch_major ? Dims{s * h * d, d, h * d, 1} : Dims{h * d, d, b * h * d, 1};
  t.kv_strides = k.batch_major ? Dims{s * g * d, d, g * d, 1} : Dims{g * d, d, b * g * d, 1};
  t.o_strides = t.q_strides;
  // The fused projection's [s, b, heads, 3, d]: Q, K and V are every third d-vector of a head.
  if (k.fused_qkv) t.q_strides = t.kv_strides = Dims{3 * h * d, 3 * d, b * 3 * h * d, 1};
  t.kt = {b, g, d, s};
  t.kt_strides = {t.kv_strides[0], t.kv_strides[1], 1, t.kv_strides[2]};
  t.scores = {b, h, s, s};
  t.scores_strides = {h * s * s, s * s, s, 1};
  t.scores_t_strides = {h * s * s, s * s, 1, s};
  t.rows = {b, h, s, 1};
  t.rows_strides = {h * s, s, 1, 1};
  t.packed_q_strides = {h * s * d, s * d, d, 1};
  return t;
}

// x where row >= col, else the mask value (−∞): the causal mask of seq_q == seq_kv.
int64_t causal_mask(GraphBuilder& g, int64_t x, int64_t mask_value) {
  const int64_t row = g.temp_like(x, CUDNN_DATA_INT32);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, x, GraphBuilder::kNone, GraphBuilder::kNone, row,
              CUDNN_DATA_FLOAT, 2);
  const int64_t col = g.temp_like(x, CUDNN_DATA_INT32);
  g.pointwise(CUDNN_POINTWISE_GEN_INDEX, x, GraphBuilder::kNone, GraphBuilder::kNone, col,
              CUDNN_DATA_FLOAT, 3);
  const int64_t visible = g.temp_like(x, CUDNN_DATA_BOOLEAN);
  g.pointwise(CUDNN_POINTWISE_CMP_GE, row, col, GraphBuilder::kNone, visible, CUDNN_DATA_BOOLEAN);
  const int64_t y = g.temp_like(x);
  g.pointwise(CUDNN_POINTWISE_BINARY_SELECT, x, mask_value, visible, y);
  return y;
}

// The dropout mask of the scores, from the seed and offset tensors.
int64_t dropout_mask(GraphBuilder& g, const PlanKey& key, const Geometry& t) {
  const Dims one = {1, 1, 1, 1};
  const int64_t seed = g.io(kSeed, one, one, CUDNN_DATA_INT64);
  const int64_t offset = g.io(kOffset, one, one, CUDNN_DATA_INT64);
  const int64_t mask = g.temp(t.scores, t.scores_strides);
  g.bernoulli(1.0 - static_cast<double>(key.dropout()), seed, offset, mask);
  return mask;
}

void build_forward(GraphBuilder& g, const PlanKey& key) {
  const cudnnDataType_t io = key.io_type();
  const Geometry t = geometry(key);
  const bool dropout = key.dropout_bits != 0;
  const int64_t q = g.io(kQ, t.q, t.q_strides, io);
  const int64_t kt = g.io(kK, t.kt, t.kt_strides, io);
  const int64_t v = g.io(kV, t.kv, t.kv_strides, io);
  const int64_t o = g.io(kO, t.q, t.o_strides, io);
  const int64_t stats = g.io(kStats, t.rows, t.rows_strides, CUDNN_DATA_FLOAT);
  const int64_t scale = g.scalar(kScale);
  const int64_t mask_value = g.scalar(kMaskValue);

  const int64_t qk = g.temp(t.scores, t.scores_strides);
  g.matmul(q, kt, qk);
  const int64_t scaled = g.temp_like(qk);
  g.binary(CUDNN_POINTWISE_MUL, qk, scale, scaled);
  const int64_t s = causal_mask(g, scaled, mask_value);

  // Softmax, keeping its row statistics for the backward.
  const int64_t max = g.temp(t.rows, t.rows_strides);
  g.reduction(CUDNN_REDUCE_TENSOR_MAX, s, max);
  const int64_t shifted = g.temp_like(s);
  g.binary(CUDNN_POINTWISE_SUB, s, max, shifted);
  const int64_t e = g.temp_like(s);
  g.unary(CUDNN_POINTWISE_EXP, shifted, e);
  const int64_t sum = g.temp(t.rows, t.rows_strides);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, e, sum);
  const int64_t log_sum = g.temp(t.rows, t.rows_strides);
  g.unary(CUDNN_POINTWISE_LOG, sum, log_sum);
  g.binary(CUDNN_POINTWISE_ADD, max, log_sum, stats);
  // The second matmul takes its left operand in the i/o type.
  int64_t p = g.temp_like(s, dropout ? CUDNN_DATA_FLOAT : io);
  g.binary(CUDNN_POINTWISE_DIV, e, sum, p);

  if (dropout) {
    const int64_t mask = dropout_mask(g, key, t);
    const int64_t kept = g.temp_like(s);
    g.binary(CUDNN_POINTWISE_MUL, p, mask, kept);
    const int64_t rescaled = g.temp_like(s, io);
    g.binary(CUDNN_POINTWISE_MUL, kept, g.scalar(kDropoutScale), rescaled);
    p = rescaled;
  }
  g.matmul(p, v, o);
}

void build_backward(GraphBuilder& g, const PlanKey& key) {
  const cudnnDataType_t io = key.io_type();
  const Geometry t = geometry(key);
  const bool dropout = key.dropout_bits != 0;
  const bool grouped = key.groups != key.heads;
  const int64_t q = g.io(kQ, t.q, t.q_strides, io);
  const int64_t kt = g.io(kK, t.kt, t.kt_strides, io);
  const int64_t vt = g.io(kV, t.kt, t.kt_strides, io);
  const int64_t o = g.io(kO, t.q, t.o_strides, io);
  const int64_t d_o = g.io(kDO, t.q, t.o_strides, io);
  const int64_t stats = g.io(kStats, t.rows, t.rows_strides, CUDNN_DATA_FLOAT);
  const int64_t dq = g.io(kDQ, t.q, t.q_strides, io);
  const int64_t dk = g.io(kDK, t.kv, t.kv_strides, io);
  const int64_t dv = g.io(kDV, t.kv, t.kv_strides, io);
  const int64_t softmax_sum = g.io(kSoftmaxSum, t.rows, t.rows_strides, CUDNN_DATA_FLOAT);
  const int64_t dq_accum = g.io(kDQAccum, t.q, t.packed_q_strides, CUDNN_DATA_FLOAT);
  const int64_t scale = g.scalar(kScale);
  const int64_t mask_value = g.scalar(kMaskValue);
  const int64_t mask = dropout ? dropout_mask(g, key, t) : GraphBuilder::kNone;
  const int64_t dropout_scale = dropout ? g.scalar(kDropoutScale) : GraphBuilder::kNone;

  // D = Σ dO∘O per row, times the keep probability: O carries the dropout scale.
  const int64_t do_o = g.temp(t.q, t.o_strides);
  g.binary(CUDNN_POINTWISE_MUL, d_o, o, do_o);
  const int64_t row_sum = g.temp(t.rows, t.rows_strides);
  g.reduction(CUDNN_REDUCE_TENSOR_ADD, do_o, row_sum);
  g.binary(CUDNN_POINTWISE_MUL, row_sum, g.scalar(dropout ? kDropoutKeep : kOne), softmax_sum);

  // P recomputed from the statistics.
  const int64_t qk = g.temp(t.scores, t.scores_strides);
  g.matmul(q, kt, qk);
  const int64_t scaled = g.temp_like(qk);
  g.binary(CUDNN_POINTWISE_MUL, qk, scale, scaled);
  const int64_t shifted = g.temp_like(qk);
  g.binary(CUDNN_POINTWISE_SUB, scaled, stats, shifted);
  const int64_t masked = causal_mask(g, shifted, mask_value);
  const int64_t p = g.temp_like(qk);
  g.unary(CUDNN_POINTWISE_EXP, masked, p);

  // dV = (dropped P)ᵀ·dO, summed over the query heads of a group.
  int64_t p_used = p;
  if (dropout) {
    const int64_t kept = g.temp_like(qk);
    g.binary(CUDNN_POINTWISE_MUL, p, mask, kept);
    const int64_t rescaled = g.temp_like(qk);
    g.binary(CUDNN_POINTWISE_MUL, kept, dropout_scale, rescaled);
    p_used = rescaled;
  }
  const int64_t p_t = g.temp(t.scores, t.scores_t_strides, io);
  g.reshape(p_used, p_t);
  if (grouped) {
    const int64_t dv_heads = g.temp(t.q, t.packed_q_strides, io);
    g.matmul(p_t, d_o, dv_heads);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, dv_heads, dv);
  } else {
    g.matmul(p_t, d_o, dv);
  }

  // dS = P ∘ (dP − D), dP = dO·Vᵀ through the dropout mask.
  int64_t dp = g.temp(t.scores, t.scores_strides);
  g.matmul(d_o, vt, dp);
  if (dropout) {
    const int64_t kept = g.temp_like(qk);
    g.binary(CUDNN_POINTWISE_MUL, dp, mask, kept);
    dp = kept;
  }
  const int64_t centred = g.temp_like(qk);
  g.binary(CUDNN_POINTWISE_SUB, dp, softmax_sum, centred);
  int64_t ds = g.temp_like(qk);
  g.binary(CUDNN_POINTWISE_MUL, centred, p, ds);
  if (dropout) {
    const int64_t rescaled = g.temp_like(qk);
    g.binary(CUDNN_POINTWISE_MUL, ds, dropout_scale, rescaled);
    ds = rescaled;
  }
  const int64_t ds_scaled = g.temp_like(qk);
  g.binary(CUDNN_POINTWISE_MUL, ds, scale, ds_scaled);

  // dK = dSᵀ·Q, summed over the query heads of a group.
  const int64_t ds_t = g.temp(t.scores, t.scores_t_strides, io);
  g.reshape(ds_scaled, ds_t);
  if (grouped) {
    const int64_t dk_heads = g.temp(t.q, t.packed_q_strides, io);
    g.matmul(ds_t, q, dk_heads);
    g.reduction(CUDNN_REDUCE_TENSOR_ADD, dk_heads, dk);
  } else {
    g.matmul(ds_t, q, dk);
  }

  // dQ = dS·K, accumulated in fp32 scratch, then rounded.
  const int64_t k = g.temp(t.kv, t.kv_strides);
  g.reshape(kt, k);
  g.matmul(ds_scaled, k, dq_accum);
  g.unary(CUDNN_POINTWISE_IDENTITY, dq_accum, dq);
}

struct Plan {
  PlanKey key;
  std::vector<Descriptor> parts;  // everything the plan refers to, kept alive with it
  Descriptor plan;
  int64_t workspace = 0;
};

// The first engine configuration cuDNN's heuristics offer that finalises for the graph.
std::unique_ptr<Plan> build_plan(cudnnHandle_t handle, const PlanKey& key) {
  auto plan = std::make_unique<Plan>();
  plan->key = key;
  GraphBuilder g;
  if (key.backward) {
    build_backward(g, key);
  } else {
    build_forward(g, key);
  }
  Descriptor graph = g.finish(handle, plan->parts);

  Descriptor heuristics(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  heuristics.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, CUDNN_HEUR_MODE_A);
  heuristics.finalize();
  int64_t count = 0;
  MGT_CUDNN_CHECK(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                           CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr));
  std::vector<Descriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    configs.emplace_back(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    raw.push_back(configs.back().get());
  }
  int64_t returned = 0;
  if (count > 0) {
    MGT_CUDNN_CHECK(cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                             CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &returned,
                                             raw.data()));
  }
  std::string refusal = "no engine configuration offered";
  for (int64_t i = 0; i < returned; ++i) {
    Descriptor candidate(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
    candidate.set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, handle);
    candidate.set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs[static_cast<size_t>(i)]);
    const cudnnStatus_t status = cudnnBackendFinalize(candidate.get());
    if (status != CUDNN_STATUS_SUCCESS) {
      refusal = std::to_string(returned) + " engine configurations refused, the last with " +
                cudnn_status_text(status);
      continue;
    }
    int64_t elements = 0;
    MGT_CUDNN_CHECK(cudnnBackendGetAttribute(candidate.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                             CUDNN_TYPE_INT64, 1, &elements, &plan->workspace));
    plan->plan = std::move(candidate);
    plan->parts.push_back(std::move(graph));
    plan->parts.push_back(std::move(configs[static_cast<size_t>(i)]));
    return plan;
  }
  throw Error("cuDNN attention: no engine runs the " + key.describe() + " graph (" + refusal + ")");
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
  std::map<PlanKey, std::unique_ptr<Plan>> plans;  // null: no engine for the key (reported once)

  const Plan* plan_for(const PlanKey& key) {
    auto it = plans.find(key);
    if (it == plans.end()) {
      std::unique_ptr<Plan> plan;
      try {
        plan = build_plan(handle, key);
      } catch (const Error& e) {
        log::warn(std::string(e.what()) + "; the fp32 attention kernel runs it instead");
      }
      it = plans.emplace(key, std::move(plan)).first;
    }
    return it->second.get();
  }

  // One forward on 2-byte operands (seed and offset of dropout's Philox in philox[0..1]).
  void run_forward(const Plan& plan, const AttentionParams& params, const void* q, const void* k, const void* v,
                   void* o, float* lse, int64_t* philox, void* workspace) {
    const float scale = params.softmax_scale;
    if (plan.key.dropout_bits != 0) {
      const float dropout_scale = 1.0f / (1.0f - params.dropout_p);
      store_int64_pair(philox, philox_seed(params), static_cast<int64_t>(params.dropout_key.offset), stream);
      execute(plan,
              {{kQ, q}, {kK, k}, {kV, v}, {kO, o}, {kStats, lse}, {kScale, &scale}, {kMaskValue, &mask_value},
               {kDropoutScale, &dropout_scale}, {kSeed, philox}, {kOffset, philox + 1}},
              workspace);
    } else {
      execute(plan, {{kQ, q}, {kK, k}, {kV, v}, {kO, o}, {kStats, lse}, {kScale, &scale}, {kMaskValue, &mask_value}},
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
      execute(plan,
              {{kQ, in.q}, {kK, in.k}, {kV, in.v}, {kO, in.o}, {kDO, in.d_o}, {kStats, in.lse}, {kDQ, out.dq},
               {kDK, out.dk}, {kDV, out.dv}, {kSoftmaxSum, softmax_sum}, {kDQAccum, dq_accum}, {kScale, &scale},
               {kMaskValue, &mask_value}, {kDropoutScale, &dropout_scale}, {kDropoutKeep, &keep}, {kSeed, philox},
               {kOffset, philox + 1}},
              workspace);
    } else {
      execute(plan,
              {{kQ, in.q}, {kK, in.k}, {kV, in.v}, {kO, in.o}, {kDO, in.d_o}, {kStats, in.lse}, {kDQ, out.dq},
               {kDK, out.dk}, {kDV, out.dv}, {kSoftmaxSum, softmax_sum}, {kDQAccum, dq_accum}, {kScale, &scale},
               {kMaskValue, &mask_value}, {kOne, &one}},
              workspace);
    }
  }

  void execute(const Plan& plan, std::initializer_list<std::pair<int64_t, const void*>> bindings,
               void* workspace) {
    std::vector<int64_t> uids;
    std::vector<void*> pointers;
    for (const auto& [uid, pointer] : bindings) {
      uids.push_back(uid);
      pointers.push_back(const_cast<void*>(pointer));
    }
    Descriptor pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, static_cast<int64_t>(uids.size()),
             uids.data());
    pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
             static_cast<int64_t>(pointers.size()), pointers.data());
    pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, workspace);
    pack.finalize();
    MGT_CUDNN_CHECK(cudnnBackendExecute(handle, plan.plan.get(), pack.get()));
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
  return s.seq_q == s.seq_kv && s.seq_q > 0 && s.batch > 0 && s.heads > 0 && s.groups > 0 &&
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
