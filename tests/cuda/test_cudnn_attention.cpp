// cuDNN's bf16 fused attention (kernels/cuda/cudnn_attention.hpp) against the CPU kernels on
// random inputs, with bf16 bounds (relative to the largest reference element): out, lse, dq, dk,
// dv over GPT-sized lengths, 64- and 128-wide heads, grouped-query heads and both layouts; its
// dropout against an fp64 reference that uses the mask cuDNN drew; and the CUDA backend's routing
// (cuDNN under bf16 matmul precision, the fp32 kernel where cuDNN does not apply).
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "../kernels/kernel_testing.hpp"
#include "backend_pair.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/cuda/cudnn_attention.hpp"
#include "kernels/cuda_device.hpp"

using namespace mgt;
using namespace mgt::kernel_testing;

namespace {

constexpr double kBf16Bound = 2e-2;

// A device copy of a host vector, freed on scope exit.
class DeviceVector {
public:
  explicit DeviceVector(const std::vector<float>& host) : size_(host.size()) {
    MGT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&ptr_), bytes() > 0 ? bytes() : 4));
    MGT_CUDA_CHECK(cudaMemcpy(ptr_, host.data(), bytes(), cudaMemcpyHostToDevice));
  }
  ~DeviceVector() { cudaFree(ptr_); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;

  float* get() const { return ptr_; }
  FloatView view() const { return {ptr_, static_cast<int64_t>(size_)}; }
  std::vector<float> to_host() const {
    std::vector<float> host(size_);
    MGT_CUDA_CHECK(cudaMemcpy(host.data(), ptr_, bytes(), cudaMemcpyDeviceToHost));
    return host;
  }

private:
  size_t bytes() const { return size_ * sizeof(float); }
  size_t size_;
  float* ptr_ = nullptr;
};

// A stream of the test's own, destroyed on scope exit.
class Stream {
public:
  Stream() { MGT_CUDA_CHECK(cudaStreamCreate(&s_)); }
  ~Stream() { cudaStreamDestroy(s_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }
  void sync() const { MGT_CUDA_CHECK(cudaStreamSynchronize(s_)); }

private:
  cudaStream_t s_ = nullptr;
};

// max |got − want| / max |want|; a NaN or infinity anywhere in got is an infinite error.
template <typename Want>
double error(const std::vector<float>& got, const std::vector<Want>& want) {
  REQUIRE(got.size() == want.size());
  double diff = 0.0;
  double scale = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::abs(static_cast<double>(got[i]) - static_cast<double>(want[i]));
    diff = std::isfinite(d) ? std::max(diff, d) : INFINITY;
    scale = std::max(scale, std::abs(static_cast<double>(want[i])));
  }
  REQUIRE(scale > 0.0);
  return diff / scale;
}

std::string describe(const AttentionShape& s) {
  return "batch " + std::to_string(s.batch) + " seq " + std::to_string(s.seq_q) + " heads " +
         std::to_string(s.heads) + "/" + std::to_string(s.groups) + " head_dim " +
         std::to_string(s.head_dim) + (s.layout == SeqLayout::kSeqMajor ? " seq-major" : " batch-major");
}

bool skip_without_cudnn() {
  if (cuda::visible_device_count() == 0) {
    testing::skip_test("no CUDA device visible");
    return true;
  }
  if (!cuda::CudnnAttention::built()) {
    testing::skip_test("this build has no cuDNN");
    return true;
  }
  return false;
}

// fp64 attention of seq_q == seq_kv with a given dropout mask keep[b, h, i, j] (1 kept, 0
// dropped): out, dq, dk, dv in the tensors' layouts.
struct Reference {
  std::vector<double> out, dq, dk, dv;
};

Reference reference(const std::vector<float>& q, const std::vector<float>& k,
                    const std::vector<float>& v, const std::vector<float>& dout,
                    const AttentionShape& s, float scale, float p, const std::vector<uint8_t>& keep) {
  const HeadTensor qt = s.query(), kt = s.key_value();
  const int64_t n = s.seq_q, d = s.head_dim, per_group = s.heads / s.groups;
  Reference r{std::vector<double>(q.size()), std::vector<double>(q.size()),
              std::vector<double>(k.size()), std::vector<double>(v.size())};
  const double rescale = 1.0 / (1.0 - p);
  std::vector<double> prob(n * n), dropped(n * n), dprob(n * n);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t g = h / per_group;
      const uint8_t* mask = keep.data() + (b * s.heads + h) * n * n;
      for (int64_t i = 0; i < n; ++i) {
        double top = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          double dotp = 0.0;
          for (int64_t c = 0; c < d; ++c) {
            dotp += static_cast<double>(q[qt.offset(i, b, h) + c]) * k[kt.offset(j, b, g) + c];
          }
          prob[i * n + j] = scale * dotp;
          top = std::max(top, prob[i * n + j]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) sum += (prob[i * n + j] = std::exp(prob[i * n + j] - top));
        for (int64_t j = 0; j < n; ++j) {
          prob[i * n + j] = j <= i ? prob[i * n + j] / sum : 0.0;
          dropped[i * n + j] = prob[i * n + j] * mask[i * n + j] * rescale;
        }
        for (int64_t c = 0; c < d; ++c) {
          double o = 0.0;
          for (int64_t j = 0; j <= i; ++j) o += dropped[i * n + j] * v[kt.offset(j, b, g) + c];
          r.out[qt.offset(i, b, h) + c] = o;
        }
      }
      for (int64_t i = 0; i < n; ++i) {
        double row = 0.0;  // Σ_j P_ij dP_ij
        for (int64_t j = 0; j <= i; ++j) {
          double dd = 0.0;
          for (int64_t c = 0; c < d; ++c) {
            dd += static_cast<double>(dout[qt.offset(i, b, h) + c]) * v[kt.offset(j, b, g) + c];
          }
          dprob[i * n + j] = dd * mask[i * n + j] * rescale;
          row += prob[i * n + j] * dprob[i * n + j];
        }
        for (int64_t j = 0; j <= i; ++j) {
          const double ds = prob[i * n + j] * (dprob[i * n + j] - row) * scale;
          for (int64_t c = 0; c < d; ++c) {
            r.dq[qt.offset(i, b, h) + c] += ds * k[kt.offset(j, b, g) + c];
            r.dk[kt.offset(j, b, g) + c] += ds * q[qt.offset(i, b, h) + c];
            r.dv[kt.offset(j, b, g) + c] += dropped[i * n + j] * dout[qt.offset(i, b, h) + c];
          }
        }
      }
    }
  }
  return r;
}

}  // namespace

TEST_CASE("cuDNN bf16 attention matches the CPU kernels (lengths, head sizes, GQA, layouts)",
          "[cuda]") {
  if (skip_without_cudnn()) return;
  const AttentionShape shapes[] = {
      {2, 128, 128, 12, 12, 64, SeqLayout::kSeqMajor},
      {2, 128, 128, 8, 2, 128, SeqLayout::kBatchMajor},
      {2, 1024, 1024, 12, 12, 64, SeqLayout::kBatchMajor},
      {1, 1024, 1024, 8, 2, 64, SeqLayout::kSeqMajor},
      {1, 1024, 1024, 16, 16, 128, SeqLayout::kBatchMajor},
      {1, 2048, 2048, 12, 12, 64, SeqLayout::kSeqMajor},
      {1, 2048, 2048, 16, 16, 128, SeqLayout::kSeqMajor},
      {1, 2048, 2048, 8, 2, 128, SeqLayout::kBatchMajor},
  };
  Stream stream;
  cuda::CudnnAttention attention(stream.get());
  uint32_t seed = 4200;
  for (const AttentionShape& s : shapes) {
    INFO(describe(s));
    AttentionParams p;
    p.softmax_scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
    const auto q_size = static_cast<size_t>(s.query().elements());
    const auto kv_size = static_cast<size_t>(s.key_value().elements());
    const auto lse_size = static_cast<size_t>(s.batch * s.heads * s.seq_q);
    const auto q = random_floats(q_size, seed++, -2.0f, 2.0f);
    const auto k = random_floats(kv_size, seed++, -2.0f, 2.0f);
    const auto v = random_floats(kv_size, seed++);
    const auto dout = random_floats(q_size, seed++);
    std::vector<float> out(q_size), lse(lse_size), dq(q_size), dk(kv_size), dv(kv_size);
    cpu::attention_forward(q.data(), k.data(), v.data(), s, p, out.data(), lse.data());
    cpu::attention_backward(q.data(), k.data(), v.data(), out.data(), dout.data(), lse.data(), s,
                            p, dq.data(), dk.data(), dv.data());

    // NaN in every output: each must be written.
    const std::vector<float> q_nan(q_size, NAN), kv_nan(kv_size, NAN);
    const DeviceVector d_q(q), d_k(k), d_v(v), d_dout(dout), d_out(q_nan);
    const DeviceVector d_lse(std::vector<float>(lse_size, NAN)), d_dq(q_nan), d_dk(kv_nan),
        d_dv(kv_nan);
    REQUIRE(attention.forward(d_q.view(), d_k.view(), d_v.view(), s, p, d_out.view(), d_lse.get()));
    // The backward reads the GPU's own forward output, as it does in training.
    REQUIRE(attention.backward(d_q.view(), d_k.view(), d_v.view(), d_out.view(), d_dout.view(),
                               d_lse.get(), s, p, d_dq.view(), d_dk.view(), d_dv.view()));
    stream.sync();
    const double e_out = error(d_out.to_host(), out), e_lse = error(d_lse.to_host(), lse);
    const double e_dq = error(d_dq.to_host(), dq), e_dk = error(d_dk.to_host(), dk),
                 e_dv = error(d_dv.to_host(), dv);
    CHECK(e_out <= kBf16Bound);
    CHECK(e_lse <= kBf16Bound);
    CHECK(e_dq <= kBf16Bound);
    CHECK(e_dk <= kBf16Bound);
    CHECK(e_dv <= kBf16Bound);
  }
}

TEST_CASE("cuDNN attention dropout: forward and backward draw the same mask at the rate asked",
          "[cuda]") {
  if (skip_without_cudnn()) return;
  struct Case {
    AttentionShape shape;
    float p;
  };
  // head_dim == seq, so that V = identity makes out the dropped probabilities themselves.
  const Case cases[] = {
      {{2, 128, 128, 4, 4, 128, SeqLayout::kSeqMajor}, 0.2f},
      {{2, 64, 64, 8, 2, 64, SeqLayout::kBatchMajor}, 0.1f},
  };
  Stream stream;
  cuda::CudnnAttention attention(stream.get());
  uint32_t seed = 5200;
  for (const Case& c : cases) {
    const AttentionShape& s = c.shape;
    INFO(describe(s) << " dropout " << c.p);
    AttentionParams p;
    p.softmax_scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
    p.dropout_p = c.p;
    p.dropout_key = DropoutKey{99, 7, 0};
    const int64_t n = s.seq_q;
    const auto q_size = static_cast<size_t>(s.query().elements());
    const auto kv_size = static_cast<size_t>(s.key_value().elements());
    const auto lse_size = static_cast<size_t>(s.batch * s.heads * n);
    const auto q = random_floats(q_size, seed++, -2.0f, 2.0f);
    const auto k = random_floats(kv_size, seed++, -2.0f, 2.0f);
    const auto v = random_floats(kv_size, seed++);
    const auto dout = random_floats(q_size, seed++);
    std::vector<float> identity(kv_size, 0.0f);
    const HeadTensor kt = s.key_value(), qt = s.query();
    for (int64_t b = 0; b < s.batch; ++b) {
      for (int64_t g = 0; g < s.groups; ++g) {
        for (int64_t j = 0; j < n; ++j) identity[kt.offset(j, b, g) + j] = 1.0f;
      }
    }
    const DeviceVector d_q(q), d_k(k), d_v(v), d_identity(identity), d_dout(dout);
    const DeviceVector d_out{std::vector<float>(q_size)}, d_lse{std::vector<float>(lse_size)};
    const DeviceVector d_dq{std::vector<float>(q_size)}, d_dk{std::vector<float>(kv_size)},
        d_dv{std::vector<float>(kv_size)};

    // With V = I, out[i, b, h, j] is the kept, rescaled probability P[b, h, i, j] or 0.
    REQUIRE(attention.forward(d_q.view(), d_k.view(), d_identity.view(), s, p, d_out.view(), d_lse.get()));
    stream.sync();
    const auto dropped_probs = d_out.to_host();
    std::vector<uint8_t> keep(static_cast<size_t>(s.batch * s.heads * n * n), 0);
    int64_t visible = 0, kept = 0, above_diagonal = 0;
    for (int64_t b = 0; b < s.batch; ++b) {
      for (int64_t h = 0; h < s.heads; ++h) {
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            const bool nonzero = dropped_probs[qt.offset(i, b, h) + j] != 0.0f;
            if (j > i) {
              above_diagonal += nonzero;
              continue;
            }
            keep[((b * s.heads + h) * n + i) * n + j] = nonzero;
            ++visible;
            kept += nonzero;
          }
        }
      }
    }
    CHECK(above_diagonal == 0);
    const double dropped_share = 1.0 - static_cast<double>(kept) / static_cast<double>(visible);
    INFO("dropped share " << dropped_share << " of " << visible);
    CHECK(std::abs(dropped_share - c.p) < 0.02);

    // The kept values are the undropped probabilities / (1 − p): the mask multiplies, nothing else.
    const std::vector<float> zeros(q_size, 0.0f);
    const Reference probs = reference(q, k, identity, zeros, s, p.softmax_scale, c.p, keep);
    CHECK(error(dropped_probs, probs.out) <= kBf16Bound);

    // The same key draws the same mask; another stream another one.
    REQUIRE(attention.forward(d_q.view(), d_k.view(), d_identity.view(), s, p, d_out.view(), d_lse.get()));
    stream.sync();
    CHECK(d_out.to_host() == dropped_probs);
    AttentionParams other = p;
    other.dropout_key.stream += 1;
    REQUIRE(attention.forward(d_q.view(), d_k.view(), d_identity.view(), s, other, d_out.view(),
                              d_lse.get()));
    stream.sync();
    CHECK(d_out.to_host() != dropped_probs);

    // Real values under the same key: forward and backward against fp64 with that mask.
    REQUIRE(attention.forward(d_q.view(), d_k.view(), d_v.view(), s, p, d_out.view(), d_lse.get()));
    REQUIRE(attention.backward(d_q.view(), d_k.view(), d_v.view(), d_out.view(), d_dout.view(),
                               d_lse.get(), s, p, d_dq.view(), d_dk.view(), d_dv.view()));
    stream.sync();
    const Reference want = reference(q, k, v, dout, s, p.softmax_scale, c.p, keep);
    CHECK(error(d_out.to_host(), want.out) <= kBf16Bound);
    CHECK(error(d_dq.to_host(), want.dq) <= kBf16Bound);
    CHECK(error(d_dk.to_host(), want.dk) <= kBf16Bound);
    CHECK(error(d_dv.to_host(), want.dv) <= kBf16Bound);
  }
}

TEST_CASE("cuda backend: bf16 and fp16 precision run attention through cuDNN where it applies", "[cuda]") {
  if (cuda_testing::skip_without_gpu()) return;
  using cuda_testing::Side;
  // fp32 operands under bf16 precision (cuDNN on bf16 copies), and operands stored in bf16 or
  // fp16, which cuDNN reads and writes in place.
  for (const auto& [precision, storage] :
       {std::pair{Backend::MatmulPrecision::kBf16, FloatType::kF32},
        std::pair{Backend::MatmulPrecision::kBf16, FloatType::kBf16},
        std::pair{Backend::MatmulPrecision::kFp16, FloatType::kF16}}) {
  cuda_testing::BackendPair pair;
  REQUIRE(pair.gpu->set_matmul_precision(precision));
  INFO(float_type_name(storage) << " operands");
  if (cuda::CudnnAttention::built()) CHECK(pair.gpu->description().find("cuDNN") != std::string::npos);
  struct Case {
    AttentionShape shape;
    double bound;
  };
  // cuDNN's bf16 bound where it applies; the fp32 kernel's where it does not (a key/value cache
  // longer than the queries, a head size that is not a multiple of 8), which shows it ran there.
  const double cudnn_bound = cuda::CudnnAttention::built() ? kBf16Bound : 1e-4;
  const Case cases[] = {
      {{2, 256, 256, 4, 2, 64, SeqLayout::kSeqMajor}, cudnn_bound},
      {{2, 100, 160, 4, 2, 64, SeqLayout::kSeqMajor}, 1e-4},
      {{2, 96, 96, 4, 4, 36, SeqLayout::kBatchMajor}, 1e-4},
  };
  // 2-byte operands round on the way in and out whichever kernel runs.
  const double storage_bound = storage == FloatType::kF32 ? 0.0 : kBf16Bound;
  for (const Case& c : cases) {
    const AttentionShape& s = c.shape;
    INFO(describe(s) << " seq_kv " << s.seq_kv);
    AttentionParams params;
    params.softmax_scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
    auto q = cuda_testing::random_twin(pair, s.query().elements(), 301, -2.0f, 2.0f, storage);
    auto k = cuda_testing::random_twin(pair, s.key_value().elements(), 302, -2.0f, 2.0f, storage);
    auto v = cuda_testing::random_twin(pair, s.key_value().elements(), 303, -1.0f, 1.0f, storage);
    auto dout = cuda_testing::random_twin(pair, s.query().elements(), 304, -1.0f, 1.0f, storage);
    auto out = cuda_testing::random_twin(pair, s.query().elements(), 305, -1.0f, 1.0f, storage);
    auto lse = cuda_testing::random_twin(pair, s.batch * s.heads * s.seq_q, 306);
    auto dq = cuda_testing::random_twin(pair, q.size(), 307, -1.0f, 1.0f, storage);
    auto dk = cuda_testing::random_twin(pair, k.size(), 308, -1.0f, 1.0f, storage);
    auto dv = cuda_testing::random_twin(pair, v.size(), 309, -1.0f, 1.0f, storage);
    for (Side side : {Side::kCpu, Side::kGpu}) {
      Backend& be = pair.on(side);
      be.attention_forward(q(side), k(side), v(side), s, params, out(side), lse(side));
      be.attention_backward(q(side), k(side), v(side), out(side), dout(side), lse(side), s, params,
                            dq(side), dk(side), dv(side));
    }
    const double bound = std::max(c.bound, storage_bound);
    cuda_testing::check_close(pair, out, bound, "attention out");
    cuda_testing::check_close(pair, lse, bound, "attention lse");
    cuda_testing::check_close(pair, dq, bound, "attention dq");
    cuda_testing::check_close(pair, dk, bound, "attention dk");
    cuda_testing::check_close(pair, dv, bound, "attention dv");
  }
  }
}

TEST_CASE("cuda backend: attention on the fused QKV projection, in place through cuDNN", "[cuda]") {
  if (cuda_testing::skip_without_gpu()) return;
  using cuda_testing::Side;
  for (const auto& [precision, storage] : {std::pair{Backend::MatmulPrecision::kBf16, FloatType::kBf16},
                                           std::pair{Backend::MatmulPrecision::kFp16, FloatType::kF16}}) {
    cuda_testing::BackendPair pair;
    REQUIRE(pair.gpu->set_matmul_precision(precision));
    pair.gpu->set_activation_type(storage);
    INFO(float_type_name(storage) << " operands");
    // GPT-2's head size and one of 128; a length past one engine tile.
    for (const AttentionShape& s : {AttentionShape{2, 256, 256, 4, 4, 64, SeqLayout::kSeqMajor},
                                    AttentionShape{1, 384, 384, 2, 2, 128, SeqLayout::kSeqMajor}}) {
      INFO(describe(s));
      AttentionParams params;
      params.softmax_scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
      CHECK(pair.gpu->attends_fused_qkv(s, params) == cuda::CudnnAttention::built());
      CHECK_FALSE(pair.cpu->attends_fused_qkv(s, params));
      const int64_t n = s.query().elements();
      auto mixed = cuda_testing::random_twin(pair, 3 * n, 311, -2.0f, 2.0f, storage);
      auto dout = cuda_testing::random_twin(pair, n, 312, -1.0f, 1.0f, storage);
      auto out = cuda_testing::random_twin(pair, n, 313, -1.0f, 1.0f, storage);
      auto lse = cuda_testing::random_twin(pair, s.batch * s.heads * s.seq_q, 314);
      auto d_mixed = cuda_testing::random_twin(pair, 3 * n, 315, -1.0f, 1.0f, storage);
      // The CPU splits the projection into temporaries (Backend's own version); the GPU does not.
      for (Side side : {Side::kCpu, Side::kGpu}) {
        Backend& be = pair.on(side);
        be.attention_forward_fused_qkv(mixed(side), s, params, out(side), lse(side));
        be.attention_backward_fused_qkv(mixed(side), out(side), dout(side), lse(side), s, params, d_mixed(side));
      }
      cuda_testing::check_close(pair, out, kBf16Bound, "fused-QKV attention out");
      cuda_testing::check_close(pair, lse, kBf16Bound, "fused-QKV attention lse");
      cuda_testing::check_close(pair, d_mixed, kBf16Bound, "fused-QKV attention d_mixed");
    }
    // Grouped-query shapes are refused: their projection interleaves the query heads of a group.
    auto mixed = cuda_testing::random_twin(pair, 3 * 2 * 64 * 4 * 64, 316, -1.0f, 1.0f, storage);
    auto out = cuda_testing::random_twin(pair, 2 * 64 * 4 * 64, 317, -1.0f, 1.0f, storage);
    auto lse = cuda_testing::random_twin(pair, 2 * 4 * 64, 318);
    const AttentionShape grouped{2, 64, 64, 4, 2, 64, SeqLayout::kSeqMajor};
    CHECK_FALSE(pair.gpu->attends_fused_qkv(grouped, AttentionParams{}));
    CHECK_THROWS_WITH(pair.gpu->attention_forward_fused_qkv(mixed.gpu.view(), grouped, AttentionParams{},
                                                            out.gpu.view(), lse.gpu.view()),
                      Catch::Contains("groups == heads only"));
  }
}

// Not a test: times forward + backward of GPT-2-124M's attention (batch 8, seq 1024, 12 heads of
// 64) through cuDNN and through the fp32 kernel, and prints TFLOP/s. Run it by its tag:
//   mgt-tests "[.cudnn-bench]"
TEST_CASE("cuDNN attention timing against the fp32 kernel", "[.cudnn-bench]") {
  if (skip_without_cudnn()) return;
  const AttentionShape s{8, 1024, 1024, 12, 12, 64, SeqLayout::kSeqMajor};
  const auto q_size = static_cast<size_t>(s.query().elements());
  const auto lse_size = static_cast<size_t>(s.batch * s.heads * s.seq_q);
  const DeviceVector q(random_floats(q_size, 1, -2.0f, 2.0f)), k(random_floats(q_size, 2, -2.0f, 2.0f));
  const DeviceVector v(random_floats(q_size, 3)), dout(random_floats(q_size, 4));
  const DeviceVector out{std::vector<float>(q_size)}, lse{std::vector<float>(lse_size)};
  const DeviceVector dq{std::vector<float>(q_size)}, dk{std::vector<float>(q_size)},
      dv{std::vector<float>(q_size)};
  Stream stream;
  cuda::CudnnAttention attention(stream.get());
  // Causal: half of the s × s scores. Forward two matmuls, backward five.
  const double forward_flop = 2.0 * 2.0 * s.batch * s.heads * s.seq_q * s.seq_kv * s.head_dim / 2.0;
  const double backward_flop = 2.5 * forward_flop;

  enum class Path { kCudnn, kFp32 };
  auto measure = [&](Path path, float dropout, bool backward) {
    AttentionParams p;
    p.softmax_scale = 0.125f;
    p.dropout_p = dropout;
    p.dropout_key = DropoutKey{1, 2, 0};
    auto run = [&] {
      if (path == Path::kCudnn) {
        REQUIRE(attention.forward(q.view(), k.view(), v.view(), s, p, out.view(), lse.get()));
        if (backward) {
          REQUIRE(attention.backward(q.view(), k.view(), v.view(), out.view(), dout.view(), lse.get(), s, p,
                                     dq.view(), dk.view(), dv.view()));
        }
      } else {
        cuda::attention_forward(q.get(), k.get(), v.get(), s, p, out.get(), lse.get(), stream.get());
        if (backward) {
          cuda::attention_backward(q.get(), k.get(), v.get(), out.get(), dout.get(), lse.get(), s,
                                   p, dq.get(), dk.get(), dv.get(), stream.get());
        }
      }
    };
    for (int i = 0; i < 3; ++i) run();
    cudaEvent_t start = nullptr, stop = nullptr;
    MGT_CUDA_CHECK(cudaEventCreate(&start));
    MGT_CUDA_CHECK(cudaEventCreate(&stop));
    constexpr int kIters = 20;
    MGT_CUDA_CHECK(cudaEventRecord(start, stream.get()));
    for (int i = 0; i < kIters; ++i) run();
    MGT_CUDA_CHECK(cudaEventRecord(stop, stream.get()));
    MGT_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    MGT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return static_cast<double>(ms) / kIters;
  };
  for (const auto& [path, name] : {std::pair{Path::kCudnn, "cudnn bf16"}, std::pair{Path::kFp32, "fp32 kernel"}}) {
    for (const float dropout : {0.0f, 0.1f}) {
      const double fwd_ms = measure(path, dropout, false);
      const double both_ms = measure(path, dropout, true);
      std::printf("attention b8 s1024 h12 d64 %-11s dropout %.1f: forward %.3f ms (%.1f TFLOP/s), "
                  "forward+backward %.3f ms (%.1f TFLOP/s), backward alone %.3f ms (%.1f TFLOP/s)\n",
                  name, dropout, fwd_ms, forward_flop / fwd_ms * 1e-9, both_ms,
                  (forward_flop + backward_flop) / both_ms * 1e-9, both_ms - fwd_ms,
                  backward_flop / (both_ms - fwd_ms) * 1e-9);
    }
  }
}
