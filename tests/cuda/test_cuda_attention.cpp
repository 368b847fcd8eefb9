// The CUDA attention kernels against the CPU ones on random inputs: forward out and lse, backward
// dq, dk and dv, over lengths that straddle tiles, key/value caches longer than the queries,
// grouped-query heads, both layouts, several head sizes, and attention dropout.
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "../kernels/kernel_testing.hpp"
#include "core/error.hpp"
#include "kernels/cpu/attention.hpp"
#include "kernels/cuda/attention.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/cuda_device.hpp"
#include "skipped_tests.hpp"

using namespace mgt;
using namespace mgt::kernel_testing;

namespace {

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

// max |got − want| / max |want|, or max |got − want| where want is rounding noise around an
// exact zero: with a single visible key the softmax is constant, so dq and dk vanish.
double error(const std::vector<float>& got, const std::vector<float>& want) {
  const std::vector<double> ref = to_double(want);
  double scale = 0.0;
  for (const double x : ref) scale = std::max(scale, std::abs(x));
  if (scale >= 1e-5) return max_rel_error(got, ref);
  double diff = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) diff = std::max(diff, std::abs(got[i] - ref[i]));
  return diff;
}

struct Case {
  AttentionShape shape;
  float dropout;
  DropoutKey key;
  // A tensor-parallel rank's heads: the whole attention's head count and this call's first head.
  int64_t dropout_heads = 0;
  int64_t dropout_first_head = 0;
};

}  // namespace

TEST_CASE("CUDA attention matches the CPU kernels (GQA, caches, dropout, both layouts)",
          "[cuda]") {
  if (cuda::visible_device_count() == 0) {
    testing::skip_test("no CUDA device visible");
    return;
  }
  const DropoutKey key = {77, 3, 1000};
  // An offset near 2³⁴ makes the Philox block counter carry into its high word mid-tensor.
  const DropoutKey far_key = {0x123456789ull, 5, (uint64_t{1} << 34) - 3};
  const Case cases[] = {
      {{2, 1, 1, 4, 4, 64, SeqLayout::kSeqMajor}, 0.0f, key},
      {{2, 77, 77, 4, 2, 64, SeqLayout::kBatchMajor}, 0.1f, key},
      {{2, 64, 64, 4, 2, 128, SeqLayout::kSeqMajor}, 0.0f, key},  // whole tiles only
      {{1, 300, 300, 4, 1, 128, SeqLayout::kSeqMajor}, 0.1f, far_key},
      {{2, 130, 130, 4, 4, 128, SeqLayout::kBatchMajor}, 0.0f, key},
      {{1, 5, 300, 4, 2, 128, SeqLayout::kSeqMajor}, 0.1f, key},  // a few queries after a cache
      {{2, 1, 200, 4, 1, 64, SeqLayout::kBatchMajor}, 0.1f, key},  // one-token decode
      {{2, 65, 100, 4, 2, 32, SeqLayout::kSeqMajor}, 0.1f, key},
      {{1, 150, 150, 4, 2, 80, SeqLayout::kBatchMajor}, 0.1f, far_key},
      {{1, 70, 90, 4, 2, 256, SeqLayout::kSeqMajor}, 0.1f, key},
      {{1, 33, 47, 4, 4, 37, SeqLayout::kBatchMajor}, 0.0f, key},  // head_dim not a multiple of 4
      {{1, 0, 20, 4, 2, 64, SeqLayout::kSeqMajor}, 0.0f, key},  // no queries: dk, dv still zeroed
      // Heads 4…7 and 8…11 of 12: dropout numbered by the global head.
      {{2, 77, 77, 4, 2, 64, SeqLayout::kSeqMajor}, 0.1f, key, 12, 4},
      {{3, 40, 60, 4, 1, 32, SeqLayout::kBatchMajor}, 0.1f, far_key, 12, 8},
  };
  cudaStream_t stream = nullptr;
  MGT_CUDA_CHECK(cudaStreamCreate(&stream));
  uint32_t seed = 900;
  for (const Case& c : cases) {
    const AttentionShape& s = c.shape;
    AttentionParams p;
    p.softmax_scale = 1.0f / std::sqrt(static_cast<float>(s.head_dim));
    p.dropout_p = c.dropout;
    p.dropout_key = c.key;
    p.dropout_heads = c.dropout_heads;
    p.dropout_first_head = c.dropout_first_head;
    INFO("batch " << s.batch << " seq_q " << s.seq_q << " seq_kv " << s.seq_kv << " heads "
                  << s.heads << " groups " << s.groups << " head_dim " << s.head_dim
                  << (s.layout == SeqLayout::kSeqMajor ? " seq-major" : " batch-major")
                  << " dropout " << c.dropout << " heads " << c.dropout_first_head << " of "
                  << c.dropout_heads);

    const auto q_size = static_cast<size_t>(s.query().elements());
    const auto kv_size = static_cast<size_t>(s.key_value().elements());
    const auto q = random_floats(q_size, seed++, -2.0f, 2.0f);
    const auto k = random_floats(kv_size, seed++, -2.0f, 2.0f);
    const auto v = random_floats(kv_size, seed++);
    const auto dout = random_floats(q_size, seed++);
    const auto lse_size = static_cast<size_t>(s.batch * s.heads * s.seq_q);

    std::vector<float> out(q_size), lse(lse_size);
    cpu::attention_forward(q.data(), k.data(), v.data(), s, p, out.data(), lse.data());
    std::vector<float> dq(q_size), dk(kv_size), dv(kv_size);
    cpu::attention_backward(q.data(), k.data(), v.data(), out.data(), dout.data(), lse.data(), s,
                            p, dq.data(), dk.data(), dv.data());

    // Garbage in every output: the kernels must overwrite (dk, dv are sums, so must clear).
    const std::vector<float> q_garbage(q_size, 9.0f), kv_garbage(kv_size, 9.0f);
    const DeviceVector d_q(q), d_k(k), d_v(v), d_dout(dout);
    const DeviceVector d_out(q_garbage), d_lse(std::vector<float>(lse_size, 9.0f));
    const DeviceVector d_dq(q_garbage), d_dk(kv_garbage), d_dv(kv_garbage);
    cuda::attention_forward(d_q.get(), d_k.get(), d_v.get(), s, p, d_out.get(), d_lse.get(),
                            stream);
    MGT_CUDA_CHECK(cudaStreamSynchronize(stream));
    CHECK(error(d_out.to_host(), out) < 1e-4);
    CHECK(error(d_lse.to_host(), lse) < 1e-4);

    // The backward reads the GPU's own forward output, as it would in training.
    cuda::attention_backward(d_q.get(), d_k.get(), d_v.get(), d_out.get(), d_dout.get(),
                             d_lse.get(), s, p, d_dq.get(), d_dk.get(), d_dv.get(), stream);
    MGT_CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto got_dq = d_dq.to_host(), got_dk = d_dk.to_host(), got_dv = d_dv.to_host();
    CHECK(error(got_dq, dq) < 1e-4);
    CHECK(error(got_dk, dk) < 1e-4);
    CHECK(error(got_dv, dv) < 1e-4);

    // No atomics: a second run reproduces every bit.
    cuda::attention_backward(d_q.get(), d_k.get(), d_v.get(), d_out.get(), d_dout.get(),
                             d_lse.get(), s, p, d_dq.get(), d_dk.get(), d_dv.get(), stream);
    MGT_CUDA_CHECK(cudaStreamSynchronize(stream));
    CHECK(d_dq.to_host() == got_dq);
    CHECK(d_dk.to_host() == got_dk);
    CHECK(d_dv.to_host() == got_dv);
  }
  MGT_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_CASE("CUDA attention refuses shapes it cannot run before touching the device", "[cuda]") {
  AttentionShape s{1, 4, 4, 2, 2, 300, SeqLayout::kSeqMajor};
  AttentionParams p;
  p.softmax_scale = 0.5f;
  CHECK_THROWS_AS(cuda::attention_forward(nullptr, nullptr, nullptr, s, p, nullptr, nullptr,
                                          nullptr),
                  Error);
  s.head_dim = 64;
  s.groups = 3;
  CHECK_THROWS_AS(cuda::attention_backward(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                           s, p, nullptr, nullptr, nullptr, nullptr),
                  Error);
}
