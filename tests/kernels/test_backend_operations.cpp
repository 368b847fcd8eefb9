// Every operation of the backend interface (kernels/backend_operations.inc), on every backend
// present (the CPU always, CUDA device 0 where one is visible), with fp32, bf16 and fp16 storage,
// against the CPU backend in fp32 on the same inputs.
//
// Each case draws random non-zero inputs, rounds them to the storage type (so that the backend
// under test and the reference read the same values), runs the operation on both and bounds
// max |result − reference| / max |reference| for each output by the bound of its kind and
// storage type (Bounds below). Operands whose type an operation fixes (the statistics of norms,
// attention and cross-entropy, AdamW's master weights and moments) are fp32 on both sides, and so
// are those the model always keeps in fp32 whatever the storage of its activations: the
// parameter gradients the backward operations accumulate into (fp32 main gradients, as
// Megatron's) and the per-token losses with their mask.
//
// The table of cases is generated from the list of operations: an operation added to the list
// without a case_NAME function here does not compile.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.hpp"
#include "kernels/backend_factory.hpp"
#include "kernels/cuda_device.hpp"
#include "skipped_tests.hpp"

using namespace mgt;

namespace {

// Relative error bounds, per storage type of the operands.
struct Bounds {
  double f32;
  double bf16;
  double f16;
  double of(FloatType type) const {
    return type == FloatType::kF32 ? f32 : type == FloatType::kBf16 ? bf16 : f16;
  }
};
// Data movement: the values themselves.
constexpr Bounds kExact{0.0, 0.0, 0.0};
// One result per element, computed in fp32 and rounded once to the storage type (bf16 keeps 8
// significant bits, fp16 11): a few units in the last place.
constexpr Bounds kElementwise{1e-5, 8e-3, 1e-3};
// Sums over rows or columns, and operations made of several rounded steps (fused ones included).
constexpr Bounds kReduction{1e-4, 2e-2, 4e-3};
// Attention: softmax probabilities rounded to the storage type before their product with V (as
// cuDNN does under bf16 / fp16 precision).
constexpr Bounds kAttention{1e-4, 3e-2, 6e-3};

enum class Side { kTest, kReference };

// One floating-point tensor on the backend under test and on the reference, with the same
// values where it is an input.
struct Tensor {
  DeviceBuffer test;
  DeviceBuffer reference;
  FloatView operator()(Side side) { return side == Side::kTest ? test.view() : reference.view(); }
};

struct Indices {
  DeviceIndexBuffer test;
  DeviceIndexBuffer reference;
  IndexView operator()(Side side) { return side == Side::kTest ? test.view() : reference.view(); }
};

// FP8 codes on both sides.
struct Codes {
  DeviceArray<uint8_t> test;
  DeviceArray<uint8_t> reference;
  DeviceSpan<uint8_t> operator()(Side side) { return side == Side::kTest ? test.view() : reference.view(); }
};

std::vector<float> read(Backend& backend, ConstFloatView view) {
  std::vector<float> host(static_cast<size_t>(view.size()));
  backend.copy_to_host(view, std::span<float>(host));
  return host;
}

// One operation's run on the backend under test with operands of `type`, and on the reference.
class OpRun {
public:
  OpRun(Backend& test, Backend& reference, FloatType type) : test_(test), reference_(reference), type_(type) {}

  FloatType type() const { return type_; }
  int checks() const { return checks_; }
  Backend& backend() const { return test_; }

  // Random values of magnitude in [magnitude / 10, magnitude] and random sign, never zero.
  std::vector<float> random(int64_t n, float magnitude = 1.0f, bool positive = false) {
    std::mt19937 rng(seed_++);
    std::uniform_real_distribution<float> size(0.1f * magnitude, magnitude);
    std::bernoulli_distribution negative(positive ? 0.0 : 0.5);
    std::vector<float> values(static_cast<size_t>(n));
    for (float& v : values) v = negative(rng) ? -size(rng) : size(rng);
    return values;
  }

  // An input of the storage type (fixed: of that type whatever the case's), random or given.
  Tensor input(int64_t n, float magnitude = 1.0f) { return values(random(n, magnitude), type_); }
  Tensor input_fp32(int64_t n, float magnitude = 1.0f) { return values(random(n, magnitude), FloatType::kF32); }
  Tensor positive_input(int64_t n, float magnitude = 1.0f) { return values(random(n, magnitude, true), type_); }
  Tensor values(const std::vector<float>& host, FloatType type) {
    const auto n = static_cast<int64_t>(host.size());
    Tensor t{DeviceBuffer(test_, n, type), DeviceBuffer(reference_, n)};
    test_.copy_from_host(host, t.test.view());
    // The reference reads the values as the backend under test holds them, rounded to its type.
    const std::vector<float> rounded = read(test_, t.test.view());
    reference_.copy_from_host(rounded, t.reference.view());
    return t;
  }
  // The reference's values of `t` (an earlier operation's results) as an input of `type`.
  Tensor reference_values(Tensor& t, FloatType type) { return values(read(reference_, t.reference.view()), type); }
  Tensor output(int64_t n) { return output_as(n, type_); }
  Tensor output_fp32(int64_t n) { return output_as(n, FloatType::kF32); }
  Indices indices(const std::vector<int64_t>& host) {
    const auto n = static_cast<int64_t>(host.size());
    Indices t{DeviceIndexBuffer(test_, n), DeviceIndexBuffer(reference_, n)};
    test_.copy_from_host<int64_t>(host, t.test.view());
    reference_.copy_from_host<int64_t>(host, t.reference.view());
    return t;
  }

  // n FP8 codes; `host` given: those codes on both sides.
  Codes codes(int64_t n, const std::vector<uint8_t>& host = {}) {
    Codes t{DeviceArray<uint8_t>(test_, n), DeviceArray<uint8_t>(reference_, n)};
    if (!host.empty()) {
      test_.copy_from_host<uint8_t>(host, t.test.view());
      reference_.copy_from_host<uint8_t>(host, t.reference.view());
    }
    return t;
  }
  // The codes on the backend under test (first) and on the reference.
  std::pair<std::vector<uint8_t>, std::vector<uint8_t>> read_codes(Codes& t) {
    std::vector<uint8_t> got(static_cast<size_t>(t.test.size()));
    std::vector<uint8_t> want(got.size());
    test_.copy_to_host(DeviceSpan<const uint8_t>(t.test.view()), std::span<uint8_t>(got));
    reference_.copy_to_host(DeviceSpan<const uint8_t>(t.reference.view()), std::span<uint8_t>(want));
    return {got, want};
  }

  void check(Codes& t, const char* what) {
    const auto [got, want] = read_codes(t);
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += got[i] != want[i];
    INFO(what << ": " << differ << " of " << got.size() << " codes differ");
    CHECK(differ == 0);
    ++checks_;
  }

  // Codes equal or neighbours (one step apart in magnitude, same sign): where the values cast
  // were rounded differently on the two sides first.
  void check_near(Codes& t, const char* what) {
    const auto [got, want] = read_codes(t);
    size_t far = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const int step = std::abs((got[i] & 0x7f) - (want[i] & 0x7f));
      far += step > 1 || (step > 0 && (got[i] & 0x80) != (want[i] & 0x80));
    }
    INFO(what << ": " << far << " of " << got.size() << " codes more than a neighbour apart");
    CHECK(far == 0);
    ++checks_;
  }

  // op(backend, side) on the backend under test, then on the reference.
  void run(const std::function<void(Backend&, Side)>& op) {
    op(test_, Side::kTest);
    op(reference_, Side::kReference);
  }

  void check(Tensor& t, Bounds bounds, const char* what) {
    const std::vector<float> got = read(test_, t.test.view());
    const std::vector<float> want = read(reference_, t.reference.view());
    double scale = 0.0;
    double diff = 0.0;
    for (size_t i = 0; i < want.size(); ++i) {
      scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
      const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
      diff = std::isnan(d) ? INFINITY : std::max(diff, d);
    }
    INFO(what << ": relative error " << diff / scale << ", bound " << bounds.of(type_));
    REQUIRE(scale > 0.0);
    CHECK(diff / scale <= bounds.of(type_));
    ++checks_;
  }
  void check(double got, double want, Bounds bounds, const char* what) {
    INFO(what << ": " << got << " against " << want << ", bound " << bounds.of(type_));
    REQUIRE(want != 0.0);
    CHECK(std::fabs(got - want) / std::fabs(want) <= bounds.of(type_));
    ++checks_;
  }
  void check(Indices& t, const char* what) {
    std::vector<int64_t> got(static_cast<size_t>(t.test.size()));
    std::vector<int64_t> want(got.size());
    test_.copy_to_host(DeviceSpan<const int64_t>(t.test.view()), std::span<int64_t>(got));
    reference_.copy_to_host(DeviceSpan<const int64_t>(t.reference.view()), std::span<int64_t>(want));
    INFO(what);
    CHECK(got == want);
    ++checks_;
  }

private:
  Tensor output_as(int64_t n, FloatType type) { return {DeviceBuffer(test_, n, type), DeviceBuffer(reference_, n)}; }

  Backend& test_;
  Backend& reference_;
  FloatType type_;
  uint32_t seed_ = 1;
  int checks_ = 0;
};

// ---- shapes shared by the cases ----
// Element-wise operations over more than one GPU block, of a length that is no multiple of 8
// (the vector paths' remainder); SwiGLU over rows of an odd width, and of whole 8-element vectors.
constexpr int64_t kRows = 6, kIn = 40, kOut = 24, kHidden = 48, kN = 2053, kFfn = 257, kFfnVectors = 264;
constexpr float kEps = 1e-5f;
// Grouped-query attention, sequence-major; the fused QKV layout needs groups == heads.
constexpr AttentionShape kAttentionShape{2, 8, 8, 4, 2, 16, SeqLayout::kSeqMajor};
constexpr AttentionShape kFusedShape{2, 8, 8, 4, 4, 16, SeqLayout::kSeqMajor};
AttentionParams attention_params() {
  AttentionParams p;
  p.softmax_scale = 0.25f;
  return p;
}

// ---- copies and conversions ----
void case_copy(OpRun& r) {
  Tensor x = r.input(kN), y = r.output(kN);
  r.run([&](Backend& b, Side s) { b.copy(x(s), y(s)); });
  r.check(y, kExact, "dst");
}

void case_copy_ranges(OpRun& r) {
  Tensor src = r.input(64), dst = r.input(64);
  // Destinations apart: overlapping ones would be written in no set order.
  const std::vector<CopyRange> ranges = {{0, 10, 5}, {20, 40, 7}, {50, 3, 7}};
  r.run([&](Backend& b, Side s) { b.copy_ranges(src(s), dst(s), ranges); });
  r.check(dst, kExact, "dst");
}

void case_convert(OpRun& r) {
  Tensor narrow = r.input(kN), wide = r.output_fp32(kN);
  Tensor from = r.input_fp32(kN), to = r.output(kN);
  r.run([&](Backend& b, Side s) {
    b.convert(narrow(s), wide(s));
    b.convert(from(s), to(s));
  });
  r.check(wide, kExact, "to fp32");
  r.check(to, kElementwise, "from fp32");
}

void case_fill(OpRun& r) {
  Tensor x = r.output(kN);
  r.run([&](Backend& b, Side s) { b.fill(x(s), 0.375f); });
  r.check(x, kExact, "x");
}

// ---- linear layers ----
void case_linear_forward(OpRun& r) {
  Tensor x = r.input(kRows * kIn), w = r.input(kOut * kIn), bias = r.input(kOut), y = r.output(kRows * kOut);
  r.run([&](Backend& b, Side s) { b.linear_forward(x(s), w(s), bias(s), kRows, kIn, kOut, y(s)); });
  r.check(y, kReduction, "y");
}

void case_linear_backward_input(OpRun& r) {
  Tensor dy = r.input(kRows * kOut), w = r.input(kOut * kIn), dx = r.output(kRows * kIn);
  r.run([&](Backend& b, Side s) { b.linear_backward_input(dy(s), w(s), kRows, kIn, kOut, dx(s)); });
  r.check(dx, kReduction, "dx");
}

// The parameter gradients' overwriting forms (an iteration's first write) are checked against the
// reference adding to zeros: over random values on the backend under test, the reference's zeroed.
bool zeroed_on_reference(Backend& b, Side s, std::initializer_list<FloatView> outputs) {
  if (s != Side::kReference) return false;
  for (const FloatView& v : outputs)
    if (!v.empty()) b.fill(v, 0.0f);
  return true;
}

void case_linear_backward_weight(OpRun& r) {
  Tensor dy = r.input(kRows * kOut), x = r.input(kRows * kIn), dw = r.input(kOut * kIn);
  Tensor dw_over = r.input_fp32(kOut * kIn), dw_none = r.input_fp32(kOut * kIn);
  r.run([&](Backend& b, Side s) {
    b.linear_backward_weight(dy(s), x(s), kRows, kIn, kOut, dw(s));
    const bool add = zeroed_on_reference(b, s, {dw_over(s)});
    b.linear_backward_weight(dy(s), x(s), kRows, kIn, kOut, dw_over(s), add);
    // No rows: written over, zero.
    b.linear_backward_weight(dy(s).first(0), x(s).first(0), 0, kIn, kOut, dw_none(s), false);
  });
  r.check(dw, kReduction, "dw (accumulated)");
  r.check(dw_over, kReduction, "dw (written over)");
  const std::vector<float> none = read(r.backend(), dw_none.test.view());
  CHECK(std::all_of(none.begin(), none.end(), [](float v) { return v == 0.0f; }));
}

void case_bias_backward(OpRun& r) {
  Tensor dy = r.input(kRows * kOut), dbias = r.input_fp32(kOut), dbias_over = r.input_fp32(kOut);
  r.run([&](Backend& b, Side s) {
    b.bias_backward(dy(s), kRows, kOut, dbias(s));
    const bool add = zeroed_on_reference(b, s, {dbias_over(s)});
    b.bias_backward(dy(s), kRows, kOut, dbias_over(s), add);
  });
  r.check(dbias, kReduction, "dbias (accumulated)");
  r.check(dbias_over, kReduction, "dbias (written over)");
}

void case_linear_gelu_tanh_forward(OpRun& r) {
  Tensor x = r.input(kRows * kIn), w = r.input(kOut * kIn), bias = r.input(kOut);
  Tensor pre = r.output(kRows * kOut), y = r.output(kRows * kOut);
  r.run([&](Backend& b, Side s) { b.linear_gelu_tanh_forward(x(s), w(s), bias(s), kRows, kIn, kOut, pre(s), y(s)); });
  r.check(pre, kReduction, "pre");
  r.check(y, kReduction, "y");
}

void case_linear_backward_input_gelu_tanh(OpRun& r) {
  Tensor dy = r.input(kRows * kOut), w = r.input(kOut * kIn), pre = r.input(kRows * kIn, 3.0f);
  Tensor dpre = r.output(kRows * kIn);
  r.run([&](Backend& b, Side s) { b.linear_backward_input_gelu_tanh(dy(s), w(s), pre(s), kRows, kIn, kOut, dpre(s)); });
  r.check(dpre, kReduction, "dpre");
}

// ---- the router's gating linear layer in fp64 ----
// Against the CPU's fp64 sums; a result rounded once to fp32 (or the storage type) on both sides.
void case_linear_forward_fp64(OpRun& r) {
  Tensor x = r.input(kRows * kIn), w = r.input(kOut * kIn), y = r.output(kRows * kOut);
  r.run([&](Backend& b, Side s) { b.linear_forward_fp64(x(s), w(s), kRows, kIn, kOut, y(s)); });
  r.check(y, kElementwise, "y");
}

void case_linear_backward_fp64(OpRun& r) {
  // More rows than one partial sum of the weight gradient takes on a GPU.
  constexpr int64_t kRowsMany = 300;
  Tensor dy = r.input(kRowsMany * kOut), x = r.input(kRowsMany * kIn), w = r.input(kOut * kIn);
  Tensor dx = r.output(kRowsMany * kIn), dw = r.input_fp32(kOut * kIn), dw_over = r.input_fp32(kOut * kIn);
  Tensor dw_none = r.input_fp32(kOut * kIn);
  r.run([&](Backend& b, Side s) {
    b.linear_backward_fp64(dy(s), x(s), w(s), kRowsMany, kIn, kOut, dx(s), dw(s));
    const bool add = zeroed_on_reference(b, s, {dw_over(s)});
    b.linear_backward_fp64(dy(s), x(s), w(s), kRowsMany, kIn, kOut, {}, dw_over(s), add);
    b.linear_backward_fp64(dy(s).first(0), x(s).first(0), w(s), 0, kIn, kOut, {}, dw_none(s), false);
  });
  r.check(dx, kElementwise, "dx");
  r.check(dw, kElementwise, "dw (accumulated)");
  r.check(dw_over, kElementwise, "dw (written over)");
  const std::vector<float> none = read(r.backend(), dw_none.test.view());
  CHECK(std::all_of(none.begin(), none.end(), [](float v) { return v == 0.0f; }));
}

// ---- grouped linear layers ----
// Unequal groups, one without rows, each with its own weight: the grouped operation on the
// backend under test against one plain linear operation per group on the reference.
const std::vector<int64_t> kGroupRows = {5, 0, 2, 7};
constexpr int64_t kGroupedRows = 14;

std::vector<Tensor> per_group(int64_t n, const std::function<Tensor(int64_t)>& make) {
  std::vector<Tensor> tensors;
  for (size_t g = 0; g < kGroupRows.size(); ++g) tensors.push_back(make(n));
  return tensors;
}

template <typename View>
std::vector<View> views_of(std::vector<Tensor>& tensors, Side side) {
  std::vector<View> views;
  for (Tensor& t : tensors) views.push_back(t(side));
  return views;
}

// fn(g, first row, rows) for each group with rows.
void for_each_group(const std::function<void(size_t, int64_t, int64_t)>& fn) {
  int64_t first = 0;
  for (size_t g = 0; g < kGroupRows.size(); ++g) {
    if (kGroupRows[g] > 0) fn(g, first, kGroupRows[g]);
    first += kGroupRows[g];
  }
}

void case_grouped_linear_forward(OpRun& r) {
  Tensor x = r.input(kGroupedRows * kIn), y = r.output(kGroupedRows * kOut), plain = r.output(kGroupedRows * kOut);
  std::vector<Tensor> w = per_group(kOut * kIn, [&](int64_t n) { return r.input(n); });
  std::vector<Tensor> bias = per_group(kOut, [&](int64_t n) { return r.input(n); });
  r.run([&](Backend& b, Side s) {
    if (s == Side::kTest) {
      b.grouped_linear_forward(x(s), views_of<ConstFloatView>(w, s), views_of<ConstFloatView>(bias, s), kGroupRows,
                               kIn, kOut, y(s));
      b.grouped_linear_forward(x(s), views_of<ConstFloatView>(w, s), {}, kGroupRows, kIn, kOut, plain(s));
      return;
    }
    for_each_group([&](size_t g, int64_t first, int64_t rows) {
      const ConstFloatView xg = x(s).subspan(first * kIn, rows * kIn);
      b.linear_forward(xg, w[g](s), bias[g](s), rows, kIn, kOut, y(s).subspan(first * kOut, rows * kOut));
      b.linear_forward(xg, w[g](s), {}, rows, kIn, kOut, plain(s).subspan(first * kOut, rows * kOut));
    });
  });
  r.check(y, kReduction, "y");
  r.check(plain, kReduction, "y without bias");
}

void case_grouped_linear_backward_input(OpRun& r) {
  Tensor dy = r.input(kGroupedRows * kOut), dx = r.output(kGroupedRows * kIn);
  std::vector<Tensor> w = per_group(kOut * kIn, [&](int64_t n) { return r.input(n); });
  r.run([&](Backend& b, Side s) {
    if (s == Side::kTest) {
      b.grouped_linear_backward_input(dy(s), views_of<ConstFloatView>(w, s), kGroupRows, kIn, kOut, dx(s));
      return;
    }
    for_each_group([&](size_t g, int64_t first, int64_t rows) {
      b.linear_backward_input(dy(s).subspan(first * kOut, rows * kOut), w[g](s), rows, kIn, kOut,
                              dx(s).subspan(first * kIn, rows * kIn));
    });
  });
  r.check(dx, kReduction, "dx");
}

void case_grouped_linear_backward_weight(OpRun& r) {
  // Into fp32 main gradients (the model's), and into gradients of the storage type.
  Tensor dy = r.input(kGroupedRows * kOut), x = r.input(kGroupedRows * kIn);
  std::vector<Tensor> main_grads = per_group(kOut * kIn, [&](int64_t n) { return r.input_fp32(n); });
  std::vector<Tensor> stored = per_group(kOut * kIn, [&](int64_t n) { return r.input(n); });
  std::vector<Tensor> written = per_group(kOut * kIn, [&](int64_t n) { return r.input_fp32(n); });
  r.run([&](Backend& b, Side s) {
    if (s == Side::kTest) {
      b.grouped_linear_backward_weight(dy(s), x(s), kGroupRows, kIn, kOut, views_of<FloatView>(main_grads, s));
      b.grouped_linear_backward_weight(dy(s), x(s), kGroupRows, kIn, kOut, views_of<FloatView>(stored, s));
      b.grouped_linear_backward_weight(dy(s), x(s), kGroupRows, kIn, kOut, views_of<FloatView>(written, s), false);
      return;
    }
    for (Tensor& t : written) b.fill(t(s), 0.0f);
    for_each_group([&](size_t g, int64_t first, int64_t rows) {
      const ConstFloatView dyg = dy(s).subspan(first * kOut, rows * kOut), xg = x(s).subspan(first * kIn, rows * kIn);
      b.linear_backward_weight(dyg, xg, rows, kIn, kOut, main_grads[g](s));
      b.linear_backward_weight(dyg, xg, rows, kIn, kOut, stored[g](s));
      b.linear_backward_weight(dyg, xg, rows, kIn, kOut, written[g](s));
    });
  });
  for (size_t g = 0; g < kGroupRows.size(); ++g) {
    INFO("group " << g << " of " << kGroupRows[g] << " rows");
    r.check(main_grads[g], kReduction, "dw (fp32, accumulated)");
    r.check(stored[g], kReduction, "dw (accumulated)");
    if (kGroupRows[g] > 0) {
      r.check(written[g], kReduction, "dw (fp32, written over)");
    } else {
      const std::vector<float> zero = read(r.backend(), written[g].test.view());
      CHECK(std::all_of(zero.begin(), zero.end(), [](float v) { return v == 0.0f; }));
    }
  }
}

// ---- FP8 linear layers ----
// Codes of random values of either format, for GEMM operands that both sides read alike.
std::vector<uint8_t> random_codes(OpRun& r, int64_t n, Fp8Format format, float magnitude) {
  std::vector<uint8_t> codes;
  for (const float v : r.random(n, magnitude)) codes.push_back(fp8_encode(v, format));
  return codes;
}

void case_fp8_quantize(OpRun& r) {
  // Delayed scaling: a given scale, some values beyond the largest finite E4M3 value (they
  // saturate), the amax recorded over what was there; then current scaling into E5M2.
  Tensor x = r.input(kRows * kIn, 8.0f);
  Tensor scale = r.values({60.0f}, FloatType::kF32), amax = r.values({3.0f}, FloatType::kF32);
  Tensor current_scale = r.output_fp32(1), current_amax = r.output_fp32(1);
  Tensor inv_rows = r.output_fp32(1), inv_cols = r.output_fp32(1), inv_current = r.output_fp32(1);
  Codes rowwise = r.codes(kRows * kIn), transposed = r.codes(kRows * kIn), e5m2 = r.codes(kRows * kIn);
  r.run([&](Backend& b, Side s) {
    b.fp8_quantize(x(s), kRows, kIn, {scale(s), amax(s), false}, {rowwise(s), Fp8Format::kE4M3, inv_rows(s)},
                   {transposed(s), Fp8Format::kE4M3, inv_cols(s)});
    b.fp8_quantize(x(s), kRows, kIn, {current_scale(s), current_amax(s), true}, {},
                   {e5m2(s), Fp8Format::kE5M2, inv_current(s)});
  });
  r.check(rowwise, "rowwise codes");
  r.check(transposed, "transposed codes");
  r.check(e5m2, "current-scaling E5M2 codes");
  r.check(amax, kExact, "amax (delayed)");
  r.check(inv_rows, kExact, "rowwise scale_inv");
  r.check(inv_cols, kExact, "transposed scale_inv");
  r.check(current_amax, kExact, "amax (current)");
  r.check(current_scale, kExact, "scale (current)");
  r.check(inv_current, kExact, "scale_inv (current)");
}

void case_fp8_quantize_gradient(OpRun& r) {
  // A shape the CUDA backend casts in one pass (rows a multiple of 16, columns of 8). dy alone:
  // the codes as fp8_quantize's, the bias gradient summed. Through the GELU, into E5M2 as
  // --fp8-format hybrid's backward: the GELU's gradient (dpre, in place) rounds to the storage
  // type before the cast on the backend under test, to fp32 on the reference, so codes may be a
  // neighbour apart where that rounding crosses a code's boundary.
  constexpr int64_t rows = 32, cols = 48;
  Tensor dy = r.input(rows * cols, 8.0f), d = r.input(rows * cols, 8.0f), pre = r.input(rows * cols, 3.0f);
  Tensor dbias = r.input_fp32(cols), dbias_gelu = r.input_fp32(cols), dbias_over = r.input_fp32(cols);
  Tensor scale = r.values({60.0f}, FloatType::kF32), amax = r.values({3.0f}, FloatType::kF32);
  Tensor scale_gelu = r.values({2000.0f}, FloatType::kF32), amax_gelu = r.values({3.0f}, FloatType::kF32);
  Tensor inv = r.output_fp32(2), inv_gelu = r.output_fp32(2);
  Codes rowwise = r.codes(rows * cols), transposed = r.codes(rows * cols);
  Codes rowwise_gelu = r.codes(rows * cols), transposed_gelu = r.codes(rows * cols);
  r.run([&](Backend& b, Side s) {
    b.fp8_quantize_gradient(dy(s), {}, rows, cols, {scale(s), amax(s), false},
                            {rowwise(s), Fp8Format::kE4M3, inv(s).subspan(0, 1)},
                            {transposed(s), Fp8Format::kE4M3, inv(s).subspan(1, 1)}, dbias(s), {});
    b.fp8_quantize_gradient(d(s), pre(s), rows, cols, {scale_gelu(s), amax_gelu(s), false},
                            {rowwise_gelu(s), Fp8Format::kE5M2, inv_gelu(s).subspan(0, 1)},
                            {transposed_gelu(s), Fp8Format::kE5M2, inv_gelu(s).subspan(1, 1)}, dbias_gelu(s), d(s));
    // dy's cast again (the same codes and amax) with the bias gradient written over.
    const bool add = zeroed_on_reference(b, s, {dbias_over(s)});
    b.fp8_quantize_gradient(dy(s), {}, rows, cols, {scale(s), amax(s), false},
                            {rowwise(s), Fp8Format::kE4M3, inv(s).subspan(0, 1)},
                            {transposed(s), Fp8Format::kE4M3, inv(s).subspan(1, 1)}, dbias_over(s), {}, add);
  });
  r.check(rowwise, "rowwise codes");
  r.check(transposed, "transposed codes");
  r.check(amax, kExact, "amax");
  r.check(inv, kExact, "scale_inv");
  r.check(dbias, kReduction, "dbias");
  r.check(d, kElementwise, "dpre");
  r.check_near(rowwise_gelu, "rowwise codes through the GELU");
  r.check_near(transposed_gelu, "transposed codes through the GELU");
  r.check(amax_gelu, kElementwise, "amax through the GELU");
  r.check(dbias_gelu, kReduction, "dbias through the GELU");
  r.check(dbias_over, kReduction, "dbias (written over)");
}

void case_fp8_quantize_gelu_tanh(OpRun& r) {
  // The forward cast of an MLP's activation from the GELU's input, in a shape the CUDA backend
  // casts in one pass (delayed scaling, both layouts) and under current scaling (composed). The
  // GELU's output rounds to the storage type before the cast on the backend under test, to fp32 on
  // the reference, so codes may be a neighbour apart where that rounding crosses a code's boundary.
  constexpr int64_t rows = 32, cols = 48;
  Tensor pre = r.input(rows * cols, 4.0f);
  Tensor scale = r.values({60.0f}, FloatType::kF32), amax = r.values({0.5f}, FloatType::kF32);
  Tensor current_scale = r.output_fp32(1), current_amax = r.output_fp32(1);
  Tensor inv = r.output_fp32(2), inv_current = r.output_fp32(1);
  Codes rowwise = r.codes(rows * cols), transposed = r.codes(rows * cols), current = r.codes(rows * cols);
  r.run([&](Backend& b, Side s) {
    b.fp8_quantize_gelu_tanh(pre(s), rows, cols, {scale(s), amax(s), false},
                             {rowwise(s), Fp8Format::kE4M3, inv(s).subspan(0, 1)},
                             {transposed(s), Fp8Format::kE4M3, inv(s).subspan(1, 1)});
    b.fp8_quantize_gelu_tanh(pre(s), rows, cols, {current_scale(s), current_amax(s), true},
                             {current(s), Fp8Format::kE4M3, inv_current(s)}, {});
  });
  r.check_near(rowwise, "rowwise codes of the GELU's output");
  r.check_near(transposed, "transposed codes of the GELU's output");
  r.check_near(current, "current-scaling codes of the GELU's output");
  r.check(amax, kElementwise, "amax of the GELU's output");
  r.check(inv, kExact, "scale_inv");
  r.check(current_amax, kElementwise, "amax (current)");
  r.check(inv_current, kElementwise, "scale_inv (current)");
}

void case_fp8_linear(OpRun& r) {
  // The forward's shape (E4M3 · E4M3 with a bias, into the storage type) and a weight gradient's
  // (E5M2 · E4M3 accumulated into fp32). Dimensions that are multiples of 16, as FP8 tensor
  // cores need.
  constexpr int64_t rows = 32, in = 48, out = 64;
  Codes x = r.codes(rows * in, random_codes(r, rows * in, Fp8Format::kE4M3, 300.0f));
  Codes w = r.codes(out * in, random_codes(r, out * in, Fp8Format::kE4M3, 300.0f));
  Codes dy = r.codes(rows * in, random_codes(r, rows * in, Fp8Format::kE5M2, 3000.0f));
  Tensor sx = r.values({0.0078125f}, FloatType::kF32), sw = r.values({0.003f}, FloatType::kF32);
  Tensor sd = r.values({1.0f / 4096.0f}, FloatType::kF32);
  Tensor bias = r.input(out), y = r.output(rows * out), acc = r.input_fp32(out * rows);
  Tensor over = r.input_fp32(out * rows), none = r.input_fp32(out * rows);
  r.run([&](Backend& b, Side s) {
    b.fp8_linear({x(s), Fp8Format::kE4M3, sx(s)}, {w(s), Fp8Format::kE4M3, sw(s)}, bias(s), rows, in, out, y(s),
                 false, Fp8GemmRole::kForward);
    // [out, rows] += dy-like [out, in] · x-like [rows, in]ᵀ
    b.fp8_linear({w(s), Fp8Format::kE4M3, sw(s)}, {dy(s).first(rows * in), Fp8Format::kE5M2, sd(s)}, {}, out, in,
                 rows, acc(s), true, Fp8GemmRole::kWeightGradient);
    // The same product written over fp32 (an iteration's first weight gradient), and over no
    // rows (an expert no token chose): zero.
    const bool add = zeroed_on_reference(b, s, {over(s)});
    b.fp8_linear({w(s), Fp8Format::kE4M3, sw(s)}, {dy(s).first(rows * in), Fp8Format::kE5M2, sd(s)}, {}, out, in,
                 rows, over(s), add, Fp8GemmRole::kWeightGradient);
    b.fp8_linear({w(s).first(0), Fp8Format::kE4M3, sw(s)}, {dy(s).first(0), Fp8Format::kE5M2, sd(s)}, {}, out, 0,
                 rows, none(s), false, Fp8GemmRole::kWeightGradient);
  });
  r.check(y, kReduction, "y");
  r.check(acc, kReduction, "accumulated fp32 product");
  r.check(over, kReduction, "fp32 product written over");
  const std::vector<float> zero = read(r.backend(), none.test.view());
  CHECK(std::all_of(zero.begin(), zero.end(), [](float v) { return v == 0.0f; }));
}

void case_fp8_linear_gelu_tanh_forward(OpRun& r) {
  // With a bias and without (the two epilogues), at a shape FP8 tensor cores take.
  constexpr int64_t rows = 32, in = 48, out = 64;
  Codes x = r.codes(rows * in, random_codes(r, rows * in, Fp8Format::kE4M3, 300.0f));
  Codes w = r.codes(out * in, random_codes(r, out * in, Fp8Format::kE4M3, 300.0f));
  Tensor sx = r.values({0.0078125f}, FloatType::kF32), sw = r.values({0.003f}, FloatType::kF32);
  Tensor bias = r.input(out), pre = r.output(rows * out), y = r.output(rows * out);
  Tensor pre_nb = r.output(rows * out), y_nb = r.output(rows * out);
  r.run([&](Backend& b, Side s) {
    b.fp8_linear_gelu_tanh_forward({x(s), Fp8Format::kE4M3, sx(s)}, {w(s), Fp8Format::kE4M3, sw(s)}, bias(s), rows,
                                   in, out, pre(s), y(s));
    b.fp8_linear_gelu_tanh_forward({x(s), Fp8Format::kE4M3, sx(s)}, {w(s), Fp8Format::kE4M3, sw(s)}, {}, rows, in,
                                   out, pre_nb(s), y_nb(s));
  });
  r.check(pre, kReduction, "pre");
  r.check(y, kReduction, "y");
  r.check(pre_nb, kReduction, "pre without a bias");
  r.check(y_nb, kReduction, "y without a bias");
}

void case_fp8_scaling_update(OpRun& r) {
  constexpr int64_t tensors = 5, length = 4;
  std::vector<float> history = r.random(tensors * length, 100.0f, true);
  history[3] = 0.0f;                                       // a tensor with no amax this step
  history[2 * tensors + 3] = 0.0f;
  Tensor h_max = r.values(history, FloatType::kF32), h_recent = r.values(history, FloatType::kF32);
  Tensor s_max = r.input_fp32(tensors), s_recent = r.input_fp32(tensors);
  r.run([&](Backend& b, Side s) {
    b.fp8_scaling_update(h_max(s), s_max(s), tensors, length, Fp8AmaxAlgo::kMax, fp8_scaled_max(Fp8Format::kE4M3, 0));
    b.fp8_scaling_update(h_recent(s), s_recent(s), tensors, length, Fp8AmaxAlgo::kMostRecent,
                         fp8_scaled_max(Fp8Format::kE5M2, 1));
  });
  r.check(h_max, kExact, "history (max)");
  r.check(s_max, kExact, "scale (max)");
  r.check(h_recent, kExact, "history (most recent)");
  r.check(s_recent, kExact, "scale (most recent)");
}

void case_fp8_transpose(OpRun& r) {
  // A weight's codes as --fp8-param-gather all-gathers them (a shape no tile divides), and a
  // norm's FP8 output of whole 64×64 tiles (the GPU's four-byte path): the transposed copy, and
  // both factors 1/scale as fp8_quantize writes them.
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{37, 70}, {128, 192}}) {
    const std::vector<uint8_t> host = random_codes(r, rows * cols, Fp8Format::kE4M3, 100.0f);
    Codes codes = r.codes(rows * cols, host), transposed = r.codes(rows * cols);
    Tensor scale = r.values({3.0f}, FloatType::kF32);
    Tensor inv_rows = r.output_fp32(1), inv_cols = r.output_fp32(1);
    r.run([&](Backend& b, Side s) {
      b.fp8_transpose({codes(s), Fp8Format::kE4M3, inv_rows(s)}, rows, cols, scale(s),
                      {transposed(s), Fp8Format::kE4M3, inv_cols(s)});
    });
    r.check(transposed, "transposed codes");
    r.check(inv_rows, kExact, "rowwise scale_inv");
    r.check(inv_cols, kExact, "transposed scale_inv");
  }
}

void case_fp8_norm_forward(OpRun& r) {
  // The norm before an FP8 linear layer with its output cast: LayerNorm after the residual add
  // (three addends) into E4M3 under delayed scaling, and RMSNorm of x alone into E5M2 under current
  // scaling. The norm's output rounds to the storage type before the cast on the backend under
  // test, to fp32 on the reference, so codes may be a neighbour apart; after the add the sum is
  // rounded too, which moves a centred value near zero by more than a code of its own: those
  // codes are compared by value, against the largest (one E4M3 step is 2^-3 of a value).
  const int64_t n = kRows * kHidden;
  Tensor a = r.input(n), b2 = r.input(n), c = r.input(n), weight = r.input(kHidden), bias = r.input(kHidden);
  Tensor sum = r.output(n), mean = r.output_fp32(kRows), rstd = r.output_fp32(kRows);
  Tensor rms_rstd = r.output_fp32(kRows);
  Tensor scale = r.values({60.0f}, FloatType::kF32), amax = r.values({0.5f}, FloatType::kF32);
  Tensor current_scale = r.output_fp32(1), current_amax = r.output_fp32(1);
  Tensor inv = r.output_fp32(1), inv_current = r.output_fp32(1);
  Codes codes = r.codes(n), rms_codes = r.codes(n);
  r.run([&](Backend& b, Side s) {
    b.fp8_norm_forward(a(s), b2(s), sum(s), weight(s), bias(s), kRows, kHidden, kEps, {scale(s), amax(s), false},
                       {codes(s), Fp8Format::kE4M3, inv(s)}, mean(s), rstd(s), c(s));
    b.fp8_norm_forward(a(s), {}, {}, weight(s), {}, kRows, kHidden, kEps,
                       {current_scale(s), current_amax(s), true}, {rms_codes(s), Fp8Format::kE5M2, inv_current(s)},
                       {}, rms_rstd(s));
  });
  r.check(sum, kElementwise, "LayerNorm: a + b + c");
  {
    const auto [got, want] = r.read_codes(codes);
    double largest = 0.0, diff = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double g = fp8_decode(got[i], Fp8Format::kE4M3), w = fp8_decode(want[i], Fp8Format::kE4M3);
      largest = std::max(largest, std::fabs(w));
      diff = std::max(diff, std::fabs(g - w));
    }
    INFO("LayerNorm: codes' values relative error " << diff / largest);
    CHECK(diff / largest <= 0.15);
  }
  r.check(mean, kReduction, "LayerNorm: mean");
  r.check(rstd, kReduction, "LayerNorm: rstd");
  r.check(amax, kReduction, "LayerNorm: amax");
  r.check(inv, kExact, "LayerNorm: scale_inv");
  r.check_near(rms_codes, "RMSNorm: codes (current scaling)");
  r.check(rms_rstd, kReduction, "RMSNorm: rstd");
  r.check(current_amax, kReduction, "RMSNorm: amax (current)");
  r.check(inv_current, kReduction, "RMSNorm: scale_inv (current)");
}

// ---- normalisation ----
// The norms' shapes: a few rows of the hidden size, and rows as narrow as one attention head's
// (--qk-layernorm's query and key norms), more than a decode step's, which the GPU packs several
// to a warp (128 fills sixteen lanes a row, 40 five of eight).
struct NormShape {
  int64_t rows, hidden;
};
constexpr NormShape kNormShapes[] = {{kRows, kHidden}, {300, 128}, {300, 40}};

void case_layer_norm_forward(OpRun& r) {
  for (const auto [rows, h] : kNormShapes) {
    INFO(rows << " rows of " << h);
    Tensor x = r.input(rows * h), weight = r.input(h), bias = r.input(h);
    Tensor y = r.output(rows * h), mean = r.output_fp32(rows), rstd = r.output_fp32(rows);
    r.run([&](Backend& b, Side s) { b.layer_norm_forward(x(s), weight(s), bias(s), rows, h, kEps, y(s), mean(s), rstd(s)); });
    r.check(y, kReduction, "y");
    r.check(mean, kReduction, "mean");
    r.check(rstd, kReduction, "rstd");
  }
}

void case_layer_norm_backward(OpRun& r) {
  for (const auto [rows, h] : kNormShapes) {
    INFO(rows << " rows of " << h);
    const int64_t n = rows * h;
    Tensor x = r.input(n), weight = r.input(h), bias = r.input(h);
    Tensor y = r.output(n), mean0 = r.output_fp32(rows), rstd0 = r.output_fp32(rows);
    r.run([&](Backend& b, Side s) { b.layer_norm_forward(x(s), weight(s), bias(s), rows, h, kEps, y(s), mean0(s), rstd0(s)); });
    Tensor mean = r.reference_values(mean0, FloatType::kF32), rstd = r.reference_values(rstd0, FloatType::kF32);
    Tensor dy = r.input(n), dx = r.output(n), dx_sum = r.input(n);
    Tensor dweight = r.input_fp32(h), dbias = r.input_fp32(h);
    Tensor dx_over = r.output(n), dweight_over = r.input_fp32(h), dbias_over = r.input_fp32(h);
    r.run([&](Backend& b, Side s) {
      b.layer_norm_backward(dy(s), x(s), weight(s), mean(s), rstd(s), rows, h, dx(s), dweight(s), dbias(s));
      b.layer_norm_backward(dy(s), x(s), weight(s), mean(s), rstd(s), rows, h, dx_sum(s), dweight(s), {}, true);
      const bool add = zeroed_on_reference(b, s, {dweight_over(s), dbias_over(s)});
      b.layer_norm_backward(dy(s), x(s), weight(s), mean(s), rstd(s), rows, h, dx_over(s), dweight_over(s),
                            dbias_over(s), false, add);
    });
    r.check(dx, kReduction, "dx");
    r.check(dx_sum, kReduction, "dx added to the residual's gradient");
    r.check(dweight, kReduction, "dweight (accumulated twice)");
    r.check(dbias, kReduction, "dbias (accumulated)");
    r.check(dweight_over, kReduction, "dweight (written over)");
    r.check(dbias_over, kReduction, "dbias (written over)");
  }
}

void case_add_norm_forward(OpRun& r) {
  const int64_t n = kRows * kHidden;
  Tensor a = r.input(n), b2 = r.input(n), c = r.input(n), weight = r.input(kHidden), bias = r.input(kHidden);
  Tensor sum = r.output(n), y = r.output(n), mean = r.output_fp32(kRows), rstd = r.output_fp32(kRows);
  Tensor rms_sum = r.output(n), rms_y = r.output(n), rms_rstd = r.output_fp32(kRows);
  r.run([&](Backend& b, Side s) {
    b.add_norm_forward(a(s), b2(s), sum(s), weight(s), bias(s), kRows, kHidden, kEps, y(s), mean(s), rstd(s), c(s));
    b.add_norm_forward(a(s), b2(s), rms_sum(s), weight(s), {}, kRows, kHidden, kEps, rms_y(s), {}, rms_rstd(s));
  });
  r.check(sum, kElementwise, "LayerNorm: a + b + c");
  r.check(y, kReduction, "LayerNorm: y");
  r.check(mean, kReduction, "LayerNorm: mean");
  r.check(rstd, kReduction, "LayerNorm: rstd");
  r.check(rms_sum, kElementwise, "RMSNorm: a + b");
  r.check(rms_y, kReduction, "RMSNorm: y");
  r.check(rms_rstd, kReduction, "RMSNorm: rstd");
}

void case_rms_norm_forward(OpRun& r) {
  for (const auto [rows, h] : kNormShapes) {
    INFO(rows << " rows of " << h);
    Tensor x = r.input(rows * h), weight = r.input(h);
    Tensor y = r.output(rows * h), rstd = r.output_fp32(rows);
    r.run([&](Backend& b, Side s) { b.rms_norm_forward(x(s), weight(s), rows, h, kEps, y(s), rstd(s)); });
    r.check(y, kReduction, "y");
    r.check(rstd, kReduction, "rstd");
  }
}

void case_rms_norm_backward(OpRun& r) {
  for (const auto [rows, h] : kNormShapes) {
    INFO(rows << " rows of " << h);
    const int64_t n = rows * h;
    Tensor x = r.input(n), weight = r.input(h);
    Tensor y = r.output(n), rstd0 = r.output_fp32(rows);
    r.run([&](Backend& b, Side s) { b.rms_norm_forward(x(s), weight(s), rows, h, kEps, y(s), rstd0(s)); });
    Tensor rstd = r.reference_values(rstd0, FloatType::kF32);
    Tensor dy = r.input(n), dx = r.output(n), dx_sum = r.input(n);
    Tensor dweight = r.input_fp32(h);
    Tensor dx_over = r.output(n), dweight_over = r.input_fp32(h);
    r.run([&](Backend& b, Side s) {
      b.rms_norm_backward(dy(s), x(s), weight(s), rstd(s), rows, h, dx(s), dweight(s));
      b.rms_norm_backward(dy(s), x(s), weight(s), rstd(s), rows, h, dx_sum(s), dweight(s), true);
      const bool add = zeroed_on_reference(b, s, {dweight_over(s)});
      b.rms_norm_backward(dy(s), x(s), weight(s), rstd(s), rows, h, dx_over(s), dweight_over(s), false, add);
    });
    r.check(dx, kReduction, "dx");
    r.check(dx_sum, kReduction, "dx added to the residual's gradient");
    r.check(dweight, kReduction, "dweight (accumulated twice)");
    r.check(dweight_over, kReduction, "dweight (written over)");
  }
}

// ---- activations ----
void case_gelu_forward(OpRun& r) {
  Tensor x = r.input(kN, 3.0f), y = r.output(kN);
  r.run([&](Backend& b, Side s) { b.gelu_forward(x(s), y(s)); });
  r.check(y, kElementwise, "y");
}

void case_gelu_backward(OpRun& r) {
  Tensor dy = r.input(kN), x = r.input(kN, 3.0f), dx = r.output(kN);
  r.run([&](Backend& b, Side s) { b.gelu_backward(dy(s), x(s), dx(s)); });
  r.check(dx, kElementwise, "dx");
}

void case_gelu_tanh_forward(OpRun& r) {
  Tensor x = r.input(kN, 3.0f), y = r.output(kN);
  r.run([&](Backend& b, Side s) { b.gelu_tanh_forward(x(s), y(s)); });
  r.check(y, kElementwise, "y");
}

void case_gelu_tanh_backward(OpRun& r) {
  Tensor dy = r.input(kN), x = r.input(kN, 3.0f), dx = r.output(kN);
  r.run([&](Backend& b, Side s) { b.gelu_tanh_backward(dy(s), x(s), dx(s)); });
  r.check(dx, kElementwise, "dx");
}

// Both signs, so that both branches of the ReLU are taken.
void case_squared_relu_forward(OpRun& r) {
  Tensor x = r.input(kN, 3.0f), y = r.output(kN);
  r.run([&](Backend& b, Side s) { b.squared_relu_forward(x(s), y(s)); });
  r.check(y, kElementwise, "y");
}

void case_squared_relu_backward(OpRun& r) {
  Tensor dy = r.input(kN), x = r.input(kN, 3.0f), dx = r.output(kN);
  r.run([&](Backend& b, Side s) { b.squared_relu_backward(dy(s), x(s), dx(s)); });
  r.check(dx, kElementwise, "dx");
}

// SwiGLU over rows of an odd width (element by element) and of a multiple of 8 (a GPU's vector
// path).
void case_swiglu_forward(OpRun& r) {
  for (const int64_t ffn : {kFfn, kFfnVectors}) {
    Tensor x = r.input(kRows * 2 * ffn, 3.0f), y = r.output(kRows * ffn);
    r.run([&](Backend& b, Side s) { b.swiglu_forward(x(s), kRows, ffn, y(s)); });
    r.check(y, kElementwise, ffn == kFfn ? "y" : "y, rows of whole vectors");
  }
}

void case_swiglu_backward(OpRun& r) {
  for (const int64_t ffn : {kFfn, kFfnVectors}) {
    Tensor dy = r.input(kRows * ffn), x = r.input(kRows * 2 * ffn, 3.0f), dx = r.output(kRows * 2 * ffn);
    r.run([&](Backend& b, Side s) { b.swiglu_backward(dy(s), x(s), kRows, ffn, dx(s)); });
    r.check(dx, kElementwise, ffn == kFfn ? "dx" : "dx, rows of whole vectors");
  }
}

// ---- dropout: the same Philox masks on every backend; an offset that is no multiple of 4 ----
constexpr DropoutKey kDropoutKey{1234, 7, 11};

void case_dropout_forward(OpRun& r) {
  Tensor x = r.input(kN), y = r.output(kN);
  r.run([&](Backend& b, Side s) { b.dropout_forward(x(s), 0.3f, kDropoutKey, y(s)); });
  r.check(y, kElementwise, "y");
}

void case_dropout_backward(OpRun& r) {
  Tensor dy = r.input(kN), dx = r.output(kN);
  r.run([&](Backend& b, Side s) { b.dropout_backward(dy(s), 0.3f, kDropoutKey, dx(s)); });
  r.check(dx, kElementwise, "dx");
}

void case_uniform_jitter(OpRun& r) {
  Tensor x = r.input(kN), y = r.output(kN);
  r.run([&](Backend& b, Side s) { b.uniform_jitter(x(s), 0.25f, kDropoutKey, y(s)); });
  r.check(y, kElementwise, "y");
}

void case_standard_normal(OpRun& r) {
  Tensor y = r.output(kN);
  r.run([&](Backend& b, Side s) { b.standard_normal(kDropoutKey, y(s)); });
  r.check(y, kElementwise, "y");
}

// ---- embedding: rows [100, 600) of a vocabulary of 700 split between ranks; the ids of other
// ranks' rows read zeros, and repeated ids sum their gradients ----
constexpr int64_t kTokens = 300, kVocabStart = 100, kTableRows = 500, kEmbeddingHidden = 96;

std::vector<int64_t> embedding_ids() {
  std::mt19937 rng(51);
  std::uniform_int_distribution<int64_t> id(0, 699);
  std::vector<int64_t> ids(kTokens);
  for (int64_t& i : ids) i = id(rng);
  return ids;
}

void case_embedding_forward(OpRun& r) {
  Indices ids = r.indices(embedding_ids());
  Tensor table = r.input(kTableRows * kEmbeddingHidden), out = r.output(kTokens * kEmbeddingHidden);
  r.run([&](Backend& b, Side s) { b.embedding_forward(ids(s), table(s), kVocabStart, kEmbeddingHidden, out(s)); });
  r.check(out, kExact, "out");
}

void case_embedding_backward(OpRun& r) {
  Indices ids = r.indices(embedding_ids());
  Tensor dout = r.input(kTokens * kEmbeddingHidden), dtable = r.input_fp32(kTableRows * kEmbeddingHidden);
  r.run([&](Backend& b, Side s) { b.embedding_backward(ids(s), dout(s), kVocabStart, kEmbeddingHidden, dtable(s)); });
  r.check(dtable, kReduction, "dtable (accumulated)");
}

// ---- rotary: part of each head rotated, both layouts; plain, and with Llama 3.1's frequency
// scaling at positions where it matters ----
constexpr RotaryParams kRotaries[] = {{48, 10000.0, 7, 0.0}, {48, 500000.0, 9000, 8.0}};
constexpr SeqLayout kLayouts[] = {SeqLayout::kSeqMajor, SeqLayout::kBatchMajor};

// A few positions (a thread per row on the GPU), and enough that each GPU thread rotates its
// pair in a group of rows (40 rows: two groups of 16 and one of 8).
std::vector<HeadTensor> rotary_shapes(SeqLayout layout) {
  return {HeadTensor{50, 3, 4, 64, layout}, HeadTensor{300, 2, 20, 64, layout}};
}

void case_rotary_forward(OpRun& r) {
  for (const RotaryParams& params : kRotaries)
    for (const SeqLayout layout : kLayouts)
    for (const HeadTensor shape : rotary_shapes(layout)) {
      Tensor x = r.input(shape.elements()), y = r.output(shape.elements());
      r.run([&](Backend& b, Side s) { b.rotary_forward(x(s), shape, params, y(s)); });
      INFO("base " << params.base << ", " << (layout == SeqLayout::kSeqMajor ? "seq-major" : "batch-major"));
      r.check(y, kElementwise, "y");
    }
}

void case_rotary_backward(OpRun& r) {
  for (const RotaryParams& params : kRotaries)
    for (const SeqLayout layout : kLayouts)
    for (const HeadTensor shape : rotary_shapes(layout)) {
      Tensor dy = r.input(shape.elements()), dx = r.output(shape.elements());
      r.run([&](Backend& b, Side s) { b.rotary_backward(dy(s), shape, params, dx(s)); });
      INFO("base " << params.base << ", " << (layout == SeqLayout::kSeqMajor ? "seq-major" : "batch-major"));
      r.check(dx, kElementwise, "dx");
    }
}

// ---- attention ----
int64_t lse_size(const AttentionShape& shape) { return shape.batch * shape.heads * shape.seq_q; }

// Without the causal mask (ring attention's blocks off the diagonal), fewer keys than queries.
constexpr AttentionShape kUnmaskedShape{2, 8, 5, 4, 2, 16, SeqLayout::kSeqMajor};
AttentionParams unmasked_params() {
  AttentionParams p = attention_params();
  p.causal = false;
  return p;
}

// The unmasked blocks of a ring at lengths a GPU's fused attention takes (multiples of 128): all
// queries to half the keys, and half the queries to all keys.
constexpr AttentionShape kRingEarlierShape{1, 256, 128, 4, 2, 64, SeqLayout::kSeqMajor};
constexpr AttentionShape kRingLaterShape{1, 128, 256, 4, 2, 64, SeqLayout::kSeqMajor};
struct AttentionCase {
  const char* name;
  AttentionShape shape;
  bool causal;
};
constexpr AttentionCase kAttentionCases[] = {{"causal", kAttentionShape, true},
                                             {"unmasked", kUnmaskedShape, false},
                                             {"unmasked, half the keys", kRingEarlierShape, false},
                                             {"unmasked, half the queries", kRingLaterShape, false}};

void case_attention_forward(OpRun& r) {
  for (const AttentionCase& c : kAttentionCases) {
    const AttentionShape& shape = c.shape;
    const AttentionParams params = c.causal ? attention_params() : unmasked_params();
    Tensor q = r.input(shape.query().elements()), k = r.input(shape.key_value().elements());
    Tensor v = r.input(shape.key_value().elements());
    Tensor out = r.output(shape.query().elements()), lse = r.output_fp32(lse_size(shape));
    r.run([&](Backend& b, Side s) { b.attention_forward(q(s), k(s), v(s), shape, params, out(s), lse(s)); });
    INFO(c.name);
    r.check(out, kAttention, "out");
    r.check(lse, kAttention, "lse");
  }
}

void case_attention_backward(OpRun& r) {
  for (const AttentionCase& c : kAttentionCases) {
    const AttentionShape& shape = c.shape;
    const AttentionParams params = c.causal ? attention_params() : unmasked_params();
    const int64_t nq = shape.query().elements(), nkv = shape.key_value().elements();
    Tensor q = r.input(nq), k = r.input(nkv), v = r.input(nkv);
    Tensor out0 = r.output(nq), lse0 = r.output_fp32(lse_size(shape));
    r.run([&](Backend& b, Side s) { b.attention_forward(q(s), k(s), v(s), shape, params, out0(s), lse0(s)); });
    // The forward's results as the reference computed them, so that both sides read the same.
    Tensor out = r.reference_values(out0, r.type()), lse = r.reference_values(lse0, FloatType::kF32);
    Tensor dout = r.input(nq), dq = r.output(nq), dk = r.output(nkv), dv = r.output(nkv);
    r.run([&](Backend& b, Side s) {
      b.attention_backward(q(s), k(s), v(s), out(s), dout(s), lse(s), shape, params, dq(s), dk(s), dv(s));
    });
    INFO(c.name);
    r.check(dq, kAttention, "dq");
    r.check(dk, kAttention, "dk");
    r.check(dv, kAttention, "dv");
  }
}

// Rows 3…9 of a [12, 2, 4, 16] attention take in another part's: both layouts.
void case_attention_merge(OpRun& r) {
  for (const SeqLayout layout : kLayouts) {
    const HeadTensor whole{12, 2, 4, 16, layout};
    HeadTensor part = whole;
    part.seq = 7;
    Tensor out = r.input(whole.elements()), lse = r.input_fp32(whole.batch * whole.heads * whole.seq, 3.0f);
    Tensor part_out = r.input(part.elements()), part_lse = r.input_fp32(part.batch * part.heads * part.seq, 3.0f);
    r.run([&](Backend& b, Side s) { b.attention_merge(part_out(s), part_lse(s), whole, 3, part.seq, out(s), lse(s)); });
    INFO((layout == SeqLayout::kSeqMajor ? "seq-major" : "batch-major"));
    r.check(out, kElementwise, "out");
    r.check(lse, kElementwise, "lse");
  }
}

void case_attention_forward_fused_qkv(OpRun& r) {
  const AttentionShape& shape = kFusedShape;
  const int64_t nq = shape.query().elements();
  Tensor mixed = r.input(3 * nq), out = r.output(nq), lse = r.output_fp32(lse_size(shape));
  r.run([&](Backend& b, Side s) { b.attention_forward_fused_qkv(mixed(s), shape, attention_params(), out(s), lse(s)); });
  r.check(out, kAttention, "out");
  r.check(lse, kAttention, "lse");
}

void case_attention_backward_fused_qkv(OpRun& r) {
  const AttentionShape& shape = kFusedShape;
  const int64_t nq = shape.query().elements();
  Tensor mixed = r.input(3 * nq), out0 = r.output(nq), lse0 = r.output_fp32(lse_size(shape));
  r.run([&](Backend& b, Side s) { b.attention_forward_fused_qkv(mixed(s), shape, attention_params(), out0(s), lse0(s)); });
  Tensor out = r.reference_values(out0, r.type()), lse = r.reference_values(lse0, FloatType::kF32);
  Tensor dout = r.input(nq), d_mixed = r.output(3 * nq);
  r.run([&](Backend& b, Side s) {
    b.attention_backward_fused_qkv(mixed(s), out(s), dout(s), lse(s), shape, attention_params(), d_mixed(s));
  });
  r.check(d_mixed, kAttention, "d_mixed");
}

void case_cached_attention(OpRun& r) {
  // Two new positions after five cached ones, in a cache of twelve; rotary on q and k.
  const AttentionShape shape{2, 2, 12, 4, 2, 16, SeqLayout::kSeqMajor};
  const RotaryParams rotary{16, 10000.0, 0, 0.0};
  const int64_t new_kv = shape.seq_q * shape.batch * shape.groups * shape.head_dim;
  Tensor q = r.input(shape.query().elements()), k = r.input(new_kv), v = r.input(new_kv);
  Tensor key_cache = r.input(shape.key_value().elements()), value_cache = r.input(shape.key_value().elements());
  Indices length = r.indices({5});
  Tensor out = r.output(shape.query().elements());
  r.run([&](Backend& b, Side s) {
    b.cached_attention(q(s), k(s), v(s), key_cache(s), value_cache(s), length(s), shape, &rotary, 0.25f, out(s));
  });
  r.check(out, kAttention, "out");
  r.check(q, kElementwise, "q, rotated in place");
  r.check(key_cache, kElementwise, "key cache, the new keys rotated");
  r.check(value_cache, kExact, "value cache");
}

// ---- Megatron's per-group QKV layout: 8 query heads in 2 groups ----
constexpr int64_t kQkvTokens = 40, kHeads = 8, kGroups = 2, kUnit = 16;

void case_qkv_split(OpRun& r) {
  const int64_t t = kQkvTokens;
  Tensor mixed = r.input(t * (kHeads + 2 * kGroups) * kUnit);
  Tensor q = r.output(t * kHeads * kUnit), k = r.output(t * kGroups * kUnit), v = r.output(t * kGroups * kUnit);
  r.run([&](Backend& b, Side s) { b.qkv_split(mixed(s), t, kHeads, kGroups, kUnit, q(s), k(s), v(s)); });
  r.check(q, kExact, "q");
  r.check(k, kExact, "k");
  r.check(v, kExact, "v");
}

void case_qkv_merge(OpRun& r) {
  const int64_t t = kQkvTokens;
  Tensor q = r.input(t * kHeads * kUnit), k = r.input(t * kGroups * kUnit), v = r.input(t * kGroups * kUnit);
  Tensor mixed = r.output(t * (kHeads + 2 * kGroups) * kUnit);
  r.run([&](Backend& b, Side s) { b.qkv_merge(q(s), k(s), v(s), t, kHeads, kGroups, kUnit, mixed(s)); });
  r.check(mixed, kExact, "mixed");
}

// ---- loss: 6 rows over a vocabulary of 40; the slice of a rank holds entries [8, 40) ----
constexpr int64_t kVocab = 40;
const std::vector<int64_t> kTargets = {3, 39, 17, 8, 0, 25};

void case_cross_entropy_shard_statistics(OpRun& r) {
  const int64_t slice = kVocab - 8;
  Indices targets = r.indices(kTargets);
  Tensor logits = r.input(kRows * slice, 4.0f), statistics = r.output_fp32(3 * kRows);
  r.run([&](Backend& b, Side s) { b.cross_entropy_shard_statistics(logits(s), targets(s), kRows, slice, 8, statistics(s)); });
  r.check(statistics, kReduction, "statistics");
}

void case_cross_entropy_combine(OpRun& r) {
  // Two ranks' statistics: maxima, positive sums of exponentials, target logits.
  std::vector<float> statistics;
  for (int rank = 0; rank < 2; ++rank) {
    for (const bool positive : {false, true, false}) {
      const std::vector<float> part = r.random(kRows, positive ? 5.0f : 3.0f, positive);
      statistics.insert(statistics.end(), part.begin(), part.end());
    }
  }
  Tensor stats = r.values(statistics, r.type());
  Tensor loss = r.output(kRows), row_max = r.output(kRows), sum_exp = r.output(kRows);
  r.run([&](Backend& b, Side s) { b.cross_entropy_combine(stats(s), 2, kRows, loss(s), row_max(s), sum_exp(s)); });
  r.check(loss, kReduction, "loss");
  r.check(row_max, kExact, "row_max");
  r.check(sum_exp, kReduction, "sum_exp");
}

void case_cross_entropy_forward(OpRun& r) {
  Indices targets = r.indices(kTargets);
  Tensor logits = r.input(kRows * kVocab, 4.0f);
  Tensor loss = r.output_fp32(kRows), row_max = r.output_fp32(kRows), sum_exp = r.output_fp32(kRows);
  r.run([&](Backend& b, Side s) { b.cross_entropy_forward(logits(s), targets(s), kRows, kVocab, loss(s), row_max(s), sum_exp(s)); });
  r.check(loss, kReduction, "loss");
  r.check(row_max, kExact, "row_max");
  r.check(sum_exp, kReduction, "sum_exp");
}

void case_cross_entropy_backward(OpRun& r) {
  Indices targets = r.indices(kTargets);
  Tensor logits = r.input(kRows * kVocab, 4.0f);
  Tensor loss = r.output_fp32(kRows), max0 = r.output_fp32(kRows), sum0 = r.output_fp32(kRows);
  r.run([&](Backend& b, Side s) { b.cross_entropy_forward(logits(s), targets(s), kRows, kVocab, loss(s), max0(s), sum0(s)); });
  Tensor row_max = r.reference_values(max0, FloatType::kF32), sum_exp = r.reference_values(sum0, FloatType::kF32);
  Tensor dloss = r.input_fp32(kRows), dlogits = r.output(kRows * kVocab);
  r.run([&](Backend& b, Side s) {
    b.cross_entropy_backward(logits(s), targets(s), row_max(s), sum_exp(s), dloss(s), kRows, kVocab, 0, dlogits(s));
  });
  r.check(dlogits, kReduction, "dlogits");
}

void case_cross_entropy_forward_backward(OpRun& r) {
  Indices targets = r.indices(kTargets);
  Tensor logits = r.input(kRows * kVocab, 4.0f), dloss = r.input_fp32(kRows), loss = r.output_fp32(kRows);
  r.run([&](Backend& b, Side s) { b.cross_entropy_forward_backward(logits(s), targets(s), dloss(s), kRows, kVocab, loss(s)); });
  r.check(loss, kReduction, "loss");
  r.check(logits, kReduction, "logits overwritten by their gradient");
}

std::vector<float> loss_mask() { return {1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 1, 0, 1}; }

void case_masked_loss_sum(OpRun& r) {
  Tensor loss = r.positive_input(15, 8.0f), mask = r.values(loss_mask(), r.type());
  MaskedLossSum sums[2];
  r.run([&](Backend& b, Side s) { sums[s == Side::kTest ? 0 : 1] = b.masked_loss_sum(loss(s), mask(s)); });
  r.check(sums[0].loss_sum, sums[1].loss_sum, kReduction, "Σ loss·mask");
  r.check(sums[0].tokens, sums[1].tokens, kExact, "Σ mask");
}

void case_masked_loss_sum_on_device(OpRun& r) {
  // The per-token losses and their mask, as the model keeps them: fp32 (model/activation_memory.cpp).
  Tensor loss = r.values(r.random(15, 8.0f, true), FloatType::kF32), mask = r.values(loss_mask(), FloatType::kF32);
  const std::vector<double> start = {1.5, 2.0};
  double sums[2][2] = {};
  r.run([&](Backend& b, Side s) {
    DeviceArray<double> on_device(b, 2);
    b.copy_from_host<double>(start, on_device.view());
    b.masked_loss_sum_on_device(loss(s), mask(s), on_device.view(), true);
    b.copy_to_host(DeviceSpan<const double>(on_device.view()), std::span<double>(sums[s == Side::kTest ? 0 : 1]));
  });
  r.check(sums[0][0], sums[1][0], kReduction, "1.5 + Σ loss·mask");
  r.check(sums[0][1], sums[1][1], kExact, "2 + Σ mask");
}

void case_masked_loss_grad(OpRun& r) {
  Tensor mask = r.values(loss_mask(), r.type()), dloss = r.output(15);
  r.run([&](Backend& b, Side s) { b.masked_loss_grad(mask(s), 0.125f, dloss(s)); });
  r.check(dloss, kExact, "dloss");
}

void case_row_argmax(OpRun& r) {
  // 6 rows of a padded vocabulary: the first 33 of 40 columns count.
  Tensor x = r.input(kRows * kVocab, 4.0f);
  Indices out = r.indices(std::vector<int64_t>(kRows, -1));
  r.run([&](Backend& b, Side s) { b.row_argmax(x(s), kRows, 33, out(s), kVocab); });
  r.check(out, "argmax");
}

// ---- mixture of experts ----
// 16 tokens [s = 8, b = 2] over 6 experts, top-2: softmax after the choice with a capacity of 4
// dropping by probability and the per-sequence auxiliary loss; pre-softmax with a scaling factor
// and group-limited routing (3 groups, 2 chosen) dropping by position; sigmoid scores with the
// micro-batch's auxiliary loss; and 1,000 tokens over 8 experts with the micro-batch's auxiliary
// loss and the z-loss (more tokens than a reduction block's threads, not a multiple of them);
// 1,539 tokens in 3 sequences with the per-sequence auxiliary loss (each sequence's 513 tokens
// summed over two blocks); and
// the per-sequence auxiliary loss of a micro-batch split over 2 context-parallel ranks (both
// passes of moe_route, the second against the first's counts, and the backward's normalisation).
std::vector<MoeRoutingParams> moe_routings() {
  MoeRoutingParams post{16, 6, 2};
  post.capacity = 4;
  post.aux_groups = 2;
  post.z_loss = true;
  MoeRoutingParams pre = post;
  pre.pre_softmax = true;
  pre.scaling_factor = 2.5f;
  pre.num_groups = 3;
  pre.group_topk = 2;
  pre.drop_by_position = true;
  pre.aux_groups = 1;
  MoeRoutingParams sig{16, 6, 3};
  sig.sigmoid = true;
  sig.aux_groups = 1;
  MoeRoutingParams many{1000, 8, 2};
  many.aux_groups = 1;
  many.z_loss = true;
  MoeRoutingParams sequences{1539, 8, 2};
  sequences.aux_groups = 3;
  MoeRoutingParams split{16, 6, 2};
  split.aux_groups = 2;
  split.aux_partitions = 2;
  split.z_loss = true;
  return {post, pre, sig, many, sequences, split};
}

// The sigmoid routing is run again with an expert bias (--moe-router-enable-expert-bias) in each
// backend's memory, large enough to change the choice.
std::vector<float> moe_expert_bias(int64_t experts) {
  std::vector<float> bias(static_cast<std::size_t>(experts));
  for (int64_t e = 0; e < experts; ++e) bias[static_cast<std::size_t>(e)] = 0.15f * static_cast<float>(e % 3) - 0.1f;
  return bias;
}

// p, with the bias of moe_expert_bias copied into `bias` when `biased`.
MoeRoutingParams with_expert_bias(Backend& b, MoeRoutingParams p, bool biased, DeviceArray<float>& bias) {
  if (!biased) return p;
  bias = DeviceArray<float>(b, p.experts);
  b.copy_from_host<float>(moe_expert_bias(p.experts), bias.view());
  p.expert_bias = bias.view().data();
  return p;
}

void case_moe_route(OpRun& r) {
  for (const MoeRoutingParams& p : moe_routings())
  for (const bool biased : {false, true}) {
    if (biased && !p.sigmoid) continue;
    const int64_t n = p.tokens * p.experts;
    Tensor logits = r.values(r.random(n, 3.0f), FloatType::kF32);
    Tensor gates = r.output(n), probs = r.output(n), map = r.output(n), counts = r.output_fp32(p.aux_groups * p.experts);
    double statistics[2][2] = {};
    r.run([&](Backend& b, Side s) {
      DeviceArray<double> on_device(b, 2);
      const std::vector<double> start = {0.25, 0.5};
      b.copy_from_host<double>(start, on_device.view());
      DeviceArray<float> bias;
      const MoeRoutingParams q = with_expert_bias(b, p, biased, bias);
      b.moe_route(logits(s), q, gates(s), probs(s), map(s), counts(s), on_device.view(), true);
      if (q.aux_partitions > 1) {
        MoeRoutingParams second = q;
        second.aux_from_counts = true;
        b.moe_route(logits(s), second, gates(s), probs(s), map(s), counts(s), on_device.view(), true);
      }
      b.copy_to_host(DeviceSpan<const double>(on_device.view()), std::span<double>(statistics[s == Side::kTest ? 0 : 1]));
    });
    r.check(gates, kElementwise, "gates");
    r.check(probs, kElementwise, "probs");
    r.check(map, kExact, "routing_map");
    r.check(counts, kExact, "aux_counts");
    r.check(statistics[0][0], statistics[1][0], kReduction, "0.25 + aux statistic");
    r.check(statistics[0][1], statistics[1][1], kReduction, "0.5 + z statistic");
  }
}

void case_moe_route_backward(OpRun& r) {
  for (const MoeRoutingParams& p : moe_routings())
  for (const bool biased : {false, true}) {
    if (biased && !p.sigmoid) continue;
    const int64_t n = p.tokens * p.experts;
    Tensor logits = r.values(r.random(n, 3.0f), FloatType::kF32), d_probs = r.input(n);
    Tensor gates = r.output_fp32(n), probs = r.output_fp32(n), map = r.output_fp32(n);
    Tensor counts = r.output_fp32(p.aux_groups * p.experts), d_logits = r.output(n);
    r.run([&](Backend& b, Side s) {
      DeviceArray<double> statistics(b, 2);
      DeviceArray<float> bias;
      const MoeRoutingParams q = with_expert_bias(b, p, biased, bias);
      b.moe_route(logits(s), q, gates(s), probs(s), map(s), counts(s), statistics.view(), false);
      b.moe_route_backward(logits(s), q, d_probs(s), map(s), counts(s), 0.3f, 0.2f, d_logits(s));
    });
    r.check(d_logits, kReduction, "d_logits");
  }
}

// Megatron's sinkhorn of random logits: 300 tokens over 8 experts and 70 over 40 (two passes of
// the GPU's column sums); then sinkhorn routing, top-1 (sigmoid gates) and top-3 (softmax over all
// experts), choosing by given scores as in training, and its backward (the choice from the map).
void case_moe_sinkhorn(OpRun& r) {
  for (const auto& [tokens, experts] : {std::pair<int64_t, int64_t>{300, 8}, {70, 40}}) {
    const int64_t n = tokens * experts;
    Tensor logits = r.values(r.random(n, 3.0f), FloatType::kF32), out = r.output_fp32(n);
    r.run([&](Backend& b, Side s) { b.moe_sinkhorn(logits(s), tokens, experts, out(s)); });
    r.check(out, kReduction, "sinkhorn");
  }
  for (const int64_t topk : {1, 3}) {
    MoeRoutingParams p{40, 6, topk};
    p.sinkhorn = true;
    p.sigmoid = topk == 1;
    p.pre_softmax = topk > 1;
    p.z_loss = true;
    const int64_t n = p.tokens * p.experts;
    Tensor logits = r.values(r.random(n, 3.0f), FloatType::kF32), choice = r.values(r.random(n, 1.0f), FloatType::kF32);
    Tensor d_probs = r.input(n), gates = r.output_fp32(n), probs = r.output_fp32(n), map = r.output_fp32(n);
    Tensor counts = r.output_fp32(0), d_logits = r.output(n);
    r.run([&](Backend& b, Side s) {
      DeviceArray<double> statistics(b, 2);
      MoeRoutingParams q = p;
      q.choice_scores = choice(s).data();
      b.moe_route(logits(s), q, gates(s), probs(s), map(s), counts(s), statistics.view(), false);
      b.moe_route_backward(logits(s), p, d_probs(s), map(s), counts(s), 0.0f, 0.2f, d_logits(s));
    });
    r.check(map, kExact, "sinkhorn routing_map");
    r.check(probs, kElementwise, "sinkhorn probs");
    r.check(d_logits, kReduction, "sinkhorn d_logits");
  }
}

void case_moe_permutation(OpRun& r) {
  // 9 tokens over 6 experts, top-2: over every expert without padding; over experts 1…4 with a
  // capacity of 3 and rows padded to multiples of 4; and top-1 on the same map (two experts for
  // one token: the status says so). The tables are longer than the rows (their tail is empty).
  constexpr int64_t kTokens = 9, kExperts = 6;
  std::vector<float> map(kTokens * kExperts, 0.0f);
  const int64_t chosen[kTokens][2] = {{0, 3}, {1, 2}, {3, 5}, {0, 1}, {2, 4}, {3, 4}, {1, 5}, {0, 2}, {3, 4}};
  for (int64_t t = 0; t < kTokens; ++t)
    for (const int64_t e : chosen[t]) map[static_cast<size_t>(t * kExperts + e)] = 1.0f;
  Tensor routing = r.values(map, FloatType::kF32);
  const MoePermutation cases[] = {{kTokens, kExperts, 0, kExperts, 2, -1, 1},
                                  {kTokens, kExperts, 1, 4, 2, 3, 4},
                                  {kTokens, kExperts, 0, kExperts, 1, -1, 1}};
  for (const MoePermutation& p : cases) {
    constexpr int64_t kMaxRows = 40;
    Indices row_token = r.indices(std::vector<int64_t>(kMaxRows, 7)), row_slot = r.indices(std::vector<int64_t>(kMaxRows, 7));
    Indices token_rows = r.indices(std::vector<int64_t>(kTokens * p.topk, 7));
    Indices slot_row = r.indices(std::vector<int64_t>(kTokens * kExperts, 7));
    Indices expert_rows = r.indices(std::vector<int64_t>(p.count + 1, 7));
    r.run([&](Backend& b, Side s) {
      b.moe_permutation(routing(s), p, row_token(s), row_slot(s), token_rows(s), slot_row(s), expert_rows(s));
    });
    r.check(row_token, "row_token");
    r.check(row_slot, "row_slot");
    r.check(token_rows, "token_rows");
    r.check(slot_row, "slot_row");
    r.check(expert_rows, "expert_rows and status");
  }
}

void case_gather_rows(OpRun& r) {
  // 7 rows out of 5, one of them empty (index −1), with and without weights; and rows of 7
  // elements (a GPU copies rows of whole 16-byte units at once, others element by element).
  Tensor in = r.input(5 * kOut), weights = r.input(7), plain = r.output(7 * kOut), weighted = r.output(7 * kOut);
  Tensor narrow_in = r.input(5 * 7), narrow = r.output(7 * 7), narrow_weighted = r.output(7 * 7);
  Indices index = r.indices({3, -1, 0, 4, 4, 1, 2});
  r.run([&](Backend& b, Side s) {
    b.gather_rows(in(s), 5, kOut, index(s), {}, plain(s));
    b.gather_rows(in(s), 5, kOut, index(s), weights(s), weighted(s));
    b.gather_rows(narrow_in(s), 5, 7, index(s), {}, narrow(s));
    b.gather_rows(narrow_in(s), 5, 7, index(s), weights(s), narrow_weighted(s));
  });
  r.check(plain, kExact, "rows");
  r.check(narrow, kExact, "rows of 7");
  r.check(weighted, kElementwise, "weighted rows");
  r.check(narrow_weighted, kElementwise, "weighted rows of 7");
}

void case_gather_sum_rows(OpRun& r) {
  // 4 tokens from 6 expert rows, up to 2 each; rows of whole 8-element vectors (a GPU's vector
  // path) and of 7 elements.
  Tensor in = r.input(6 * kOut), weights = r.input(6), plain = r.output(4 * kOut), weighted = r.output(4 * kOut);
  Tensor narrow_in = r.input(6 * 7), narrow = r.output(4 * 7);
  Indices index = r.indices({0, 3, -1, 5, 1, 2, 4, -1});
  r.run([&](Backend& b, Side s) {
    b.gather_sum_rows(in(s), 6, kOut, index(s), 2, {}, plain(s));
    b.gather_sum_rows(in(s), 6, kOut, index(s), 2, weights(s), weighted(s));
    b.gather_sum_rows(narrow_in(s), 6, 7, index(s), 2, weights(s), narrow(s));
  });
  r.check(plain, kElementwise, "sums");
  r.check(weighted, kElementwise, "weighted sums");
  r.check(narrow, kElementwise, "weighted sums of rows of 7");
}

void case_row_dot(OpRun& r) {
  // Rows of whole 8-element vectors (a GPU's vector path) and of an odd width.
  for (const int64_t cols : {kHidden, kFfn}) {
    Tensor a = r.input(kRows * cols), b2 = r.input(kRows * cols), out = r.output(kRows);
    r.run([&](Backend& b, Side s) { b.row_dot(a(s), b2(s), kRows, cols, out(s)); });
    r.check(out, kReduction, cols == kHidden ? "dots" : "dots of rows of an odd width");
  }
}

void case_scale_rows(OpRun& r) {
  Tensor x = r.input(kRows * kHidden), factors = r.input(kRows), out = r.output(kRows * kHidden);
  r.run([&](Backend& b, Side s) { b.scale_rows(x(s), factors(s), kRows, kHidden, out(s)); });
  r.check(out, kElementwise, "scaled rows");
}

// ---- element-wise ----
void case_add_bias(OpRun& r) {
  Tensor y = r.input(kRows * kOut), bias = r.input(kOut);
  r.run([&](Backend& b, Side s) { b.add_bias(y(s), bias(s), kRows, kOut); });
  r.check(y, kElementwise, "y");
}

void case_add(OpRun& r) {
  Tensor a = r.input(kN), b2 = r.input(kN), c = r.input(kN), two = r.output(kN), three = r.output(kN);
  r.run([&](Backend& b, Side s) {
    b.add(a(s), b2(s), two(s));
    b.add(a(s), b2(s), three(s), c(s));
  });
  r.check(two, kElementwise, "a + b");
  r.check(three, kElementwise, "a + b + c");
}

void case_accumulate(OpRun& r) {
  Tensor y = r.input(kN), x = r.input(kN);
  r.run([&](Backend& b, Side s) { b.accumulate(y(s), x(s)); });
  r.check(y, kElementwise, "y");
}

void case_scale(OpRun& r) {
  Tensor x = r.input(kN);
  r.run([&](Backend& b, Side s) { b.scale(x(s), 0.7f); });
  r.check(x, kElementwise, "x");
}

// ---- optimizer support ----
constexpr AdamWParams kAdamW{1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f};

void case_adamw_step(OpRun& r) {
  Tensor param = r.input(kN), grad = r.input(kN, 0.1f), exp_avg = r.input(kN, 0.1f);
  Tensor exp_avg_sq = r.positive_input(kN, 0.01f);
  r.run([&](Backend& b, Side s) { b.adamw_step(param(s), grad(s), exp_avg(s), exp_avg_sq(s), kAdamW, 3); });
  r.check(param, kElementwise, "param");
  r.check(exp_avg, kElementwise, "exp_avg");
  r.check(exp_avg_sq, kElementwise, "exp_avg_sq");
}

void case_adamw_update(OpRun& r) {
  // Master weights, gradients and moments are fp32; the compute copy has the storage type.
  const int64_t n = 64;
  Tensor param = r.input_fp32(n), grad = r.input_fp32(n, 0.1f), exp_avg = r.input_fp32(n, 0.1f);
  Tensor exp_avg_sq = r.values(r.random(n, 0.01f, true), FloatType::kF32), compute = r.output(n);
  const std::vector<int64_t> ends = {30, 50, 64};
  const std::vector<int64_t> flags = {kAdamWDecay, 0, kAdamWDecay | kAdamWDecoupledLr};
  r.run([&](Backend& b, Side s) {
    b.adamw_update(param(s), grad(s), exp_avg(s), exp_avg_sq(s), ends, flags, kAdamW, 5e-3f, 0.625f, 4, compute(s));
  });
  r.check(param, kElementwise, "param");
  r.check(exp_avg, kElementwise, "exp_avg");
  r.check(exp_avg_sq, kElementwise, "exp_avg_sq");
  r.check(compute, kElementwise, "the compute copy");
  // The precision-aware optimizer's bf16 moments.
  Tensor param2 = r.input_fp32(n), exp_avg16 = r.values(r.random(n, 0.1f), FloatType::kBf16);
  Tensor exp_avg_sq16 = r.values(r.random(n, 0.01f, true), FloatType::kBf16);
  r.run([&](Backend& b, Side s) {
    b.adamw_update(param2(s), grad(s), exp_avg16(s), exp_avg_sq16(s), ends, flags, kAdamW, 5e-3f, 0.625f, 4, {});
  });
  // The reference keeps them in fp32: they differ by bf16's rounding whatever the storage type.
  constexpr Bounds kBf16Rounded{8e-3, 8e-3, 8e-3};
  r.check(param2, kElementwise, "param (bf16 moments)");
  r.check(exp_avg16, kBf16Rounded, "bf16 exp_avg");
  r.check(exp_avg_sq16, kBf16Rounded, "bf16 exp_avg_sq");
}

void case_sum_of_squares(OpRun& r) {
  Tensor x = r.input(kN);
  const std::vector<ElementRange> ranges = {{0, 10}, {40, 0}, {57, 74}};
  double whole[2] = {}, parts[2] = {};
  r.run([&](Backend& b, Side s) {
    const int i = s == Side::kTest ? 0 : 1;
    whole[i] = b.sum_of_squares(x(s));
    parts[i] = b.sum_of_squares(x(s), ranges);
  });
  r.check(whole[0], whole[1], kReduction, "Σ x²");
  r.check(parts[0], parts[1], kReduction, "Σ x² over ranges");
}

// ---- the table: one case per operation of the list, in its order ----
struct OpCase {
  BackendOp op;
  void (*run)(OpRun&);
};

constexpr OpCase kCases[] = {
#define MGT_BACKEND_OP(name) {BackendOp::name, &case_##name},
#include "kernels/backend_operations.inc"
#undef MGT_BACKEND_OP
};
static_assert(std::size(kCases) == kBackendOpCount);

constexpr FloatType kTypes[] = {FloatType::kF32, FloatType::kBf16, FloatType::kF16};

// Every case on the backend `device` names, fresh for each storage type, against a fresh CPU.
void check_every_operation(const std::string& device) {
  for (const FloatType type : kTypes) {
    const std::unique_ptr<Backend> test = make_backend(device);
    const std::unique_ptr<Backend> reference = make_backend("cpu");
    // As a --bf16 / --fp16 run sets it (the CPU has no such arithmetic and declines).
    test->set_matmul_precision(type == FloatType::kF32    ? Backend::MatmulPrecision::kFp32
                               : type == FloatType::kBf16 ? Backend::MatmulPrecision::kBf16
                                                          : Backend::MatmulPrecision::kFp16);
    for (const OpCase& c : kCases) {
      INFO(device << ", " << float_type_name(type) << " storage, " << backend_op_name(c.op)
                  << (test->takes_natively(c.op, type) ? " (native)" : " (on fp32 copies)"));
      OpRun run(*test, *reference, type);
      CHECK_NOTHROW(c.run(run));
      CHECK(run.checks() > 0);
    }
  }
}

}  // namespace

TEST_CASE("backend operations: the list names each operation once, and each has a case", "[kernels][backend]") {
  std::set<std::string> names;
  const std::unique_ptr<Backend> cpu = make_backend("cpu");
  for (size_t i = 0; i < kBackendOpCount; ++i) {
    INFO(backend_op_name(kBackendOps[i]));
    CHECK(names.insert(backend_op_name(kBackendOps[i])).second);
    CHECK(kCases[i].op == kBackendOps[i]);
    CHECK(static_cast<size_t>(kBackendOps[i]) == i);
    // The CPU's kernels read fp32 only: 2-byte operands reach them as fp32 copies.
    CHECK(cpu->takes_natively(kBackendOps[i], FloatType::kF32));
    CHECK_FALSE(cpu->takes_natively(kBackendOps[i], FloatType::kBf16));
    CHECK_FALSE(cpu->takes_natively(kBackendOps[i], FloatType::kF16));
  }
  CHECK(std::string(backend_op_name(BackendOp::linear_forward)) == "linear_forward");
}

TEST_CASE("backend operations on the CPU, fp32, bf16 and fp16 storage, against fp32", "[kernels][backend]") {
  check_every_operation("cpu");
}

TEST_CASE("backend operations on CUDA, fp32, bf16 and fp16 storage, against the CPU in fp32",
          "[kernels][backend][cuda]") {
  if (cuda::visible_device_count() == 0) {
    testing::skip_test("no CUDA device visible");
    return;
  }
  check_every_operation("cuda");
}
