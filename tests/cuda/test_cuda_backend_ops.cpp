// Backend operations on the CUDA backend against the CPU reference at the sizes and in the forms
// that take the CUDA kernels' other paths (vector widths, many launches, long rows, fused
// epilogues), on random inputs (never zeros), with a relative bound per operation family. Every
// operation in every storage type is checked by tests/kernels/test_backend_operations.cpp.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backend_pair.hpp"

using namespace mgt;
using namespace mgt::cuda_testing;

namespace {

constexpr double kExact = 1e-6;      // element-wise maps: a few ulps
constexpr double kReduction = 1e-5;  // sums over a row or a column
constexpr Side kSides[] = {Side::kCpu, Side::kGpu};

std::vector<int64_t> random_ids(int64_t n, int64_t lo, int64_t hi, uint32_t seed) {
  const std::vector<float> u = kernel_testing::random_floats(static_cast<size_t>(n), seed, 0.0f, 1.0f);
  std::vector<int64_t> ids(u.size());
  for (size_t i = 0; i < u.size(); ++i) {
    ids[i] = lo + std::min<int64_t>(hi - lo - 1, static_cast<int64_t>(u[i] * static_cast<float>(hi - lo)));
  }
  return ids;
}

}  // namespace

TEST_CASE("cuda ops: copy, fill, add, accumulate, scale, bias", "[cuda]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  const int64_t rows = 37, cols = 129;
  auto a = random_twin(pair, rows * cols, 1);
  auto b = random_twin(pair, rows * cols, 2);
  auto bias = random_twin(pair, cols, 3);
  auto out = random_twin(pair, rows * cols, 4);
  auto dbias = random_twin(pair, cols, 5);
  for (Side s : kSides) {
    Backend& be = pair.on(s);
    be.add(a(s), b(s), out(s));
    be.accumulate(out(s), a(s));
    be.scale(out(s), 0.75f);
    be.add_bias(out(s), bias(s), rows, cols);
    be.bias_backward(out(s), rows, cols, dbias(s));
  }
  check_close(pair, out, kExact, "add/accumulate/scale/add_bias");
  check_close(pair, dbias, kReduction, "bias_backward");
  // Rows of a multiple of 8 take the eight-element path, in every storage type.
  for (const FloatType type : {FloatType::kF32, FloatType::kBf16, FloatType::kF16}) {
    const int64_t vrows = 33, vcols = 136;
    auto vy = random_twin(pair, vrows * vcols, 8, -1.0f, 1.0f, type);
    auto vbias = random_twin(pair, vcols, 9, -1.0f, 1.0f, type);
    auto va = random_twin(pair, vrows * vcols, 10, -1.0f, 1.0f, type);
    auto vc = random_twin(pair, vrows * vcols, 11, -1.0f, 1.0f, type);
    auto vsum = random_twin(pair, vrows * vcols, 12, -1.0f, 1.0f, type);
    auto odd_sum = random_twin(pair, rows * cols, 13, -1.0f, 1.0f, type);
    auto odd_a = random_twin(pair, rows * cols, 14, -1.0f, 1.0f, type);
    auto odd_c = random_twin(pair, rows * cols, 15, -1.0f, 1.0f, type);
    for (Side s : kSides) {
      pair.on(s).add_bias(vy(s), vbias(s), vrows, vcols);
      // Three addends, eight elements per access and one at a time.
      pair.on(s).add(va(s), vy(s), vsum(s), vc(s));
      pair.on(s).add(odd_a(s), odd_a(s), odd_sum(s), odd_c(s));
    }
    INFO(float_type_name(type));
    // The same sum on both sides, rounded once to the storage type.
    check_close(pair, vy, type == FloatType::kF32 ? kExact : 0.0, "add_bias, eight elements per access");
    check_close(pair, vsum, type == FloatType::kF32 ? kExact : 0.0, "add of three, eight elements per access");
    check_close(pair, odd_sum, type == FloatType::kF32 ? kExact : 0.0, "add of three");
  }
  auto filled = random_twin(pair, 1000, 6);
  auto copied = random_twin(pair, 1000, 7);
  for (Side s : kSides) {
    pair.on(s).copy(a(s).first(1000), copied(s));
    pair.on(s).fill(filled(s).first(500), 2.5f);
  }
  check_close(pair, copied, 0.0, "copy");
  check_close(pair, filled, 0.0, "fill");
  // Batched copies: more ranges than one launch takes (128), of varied lengths, some empty.
  for (const FloatType type : {FloatType::kF32, FloatType::kBf16}) {
    std::vector<CopyRange> ranges;
    int64_t packed = 0;
    for (int64_t i = 0; i < 300; ++i) {
      const int64_t count = (i * 37) % 300;
      ranges.push_back({(i * 53) % 700, packed, count});
      packed += count;
    }
    auto from = random_twin(pair, 1000, 10, -1.0f, 1.0f, type);
    auto to = random_twin(pair, packed, 11, -1.0f, 1.0f, type);
    for (Side s : kSides) pair.on(s).copy_ranges(from(s), to(s), ranges);
    INFO(float_type_name(type));
    check_close(pair, to, 0.0, "copy_ranges");
  }
}

TEST_CASE("cuda ops: linear forward and backward", "[cuda]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  for (const auto& [rows, in, out_dim] : {std::tuple<int64_t, int64_t, int64_t>{1, 64, 96},
                                          {77, 130, 65}, {256, 768, 2304}}) {
    auto x = random_twin(pair, rows * in, 11);
    auto w = random_twin(pair, out_dim * in, 12);
    auto bias = random_twin(pair, out_dim, 13);
    auto dy = random_twin(pair, rows * out_dim, 14);
    auto y = random_twin(pair, rows * out_dim, 15);
    auto dx = random_twin(pair, rows * in, 16);
    auto dw = random_twin(pair, out_dim * in, 17);
    for (Side s : kSides) {
      Backend& be = pair.on(s);
      be.linear_forward(x(s), w(s), bias(s), rows, in, out_dim, y(s));
      be.linear_backward_input(dy(s), w(s), rows, in, out_dim, dx(s));
      be.linear_backward_weight(dy(s), x(s), rows, in, out_dim, dw(s));
    }
    INFO("rows " << rows << " in " << in << " out " << out_dim);
    check_close(pair, y, kReduction, "linear_forward");
    check_close(pair, dx, kReduction, "linear_backward_input");
    check_close(pair, dw, kReduction, "linear_backward_weight");
  }
}

TEST_CASE("cuda ops: layer norm and RMS norm", "[cuda]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  // 1001: rows that are not whole 16-byte vectors, the kernels' scalar path. 3 rows: a decode
  // step's norms (a block per row, from registers); 4096: several vectors per thread there.
  // fp32 rows above 1024 (2048, 4096, 4104): the backward's column sums and input gradient are
  // two passes.
  for (const auto& [rows, hidden] : {std::pair<int64_t, int64_t>{300, 64}, {300, 768}, {300, 1000}, {300, 1001},
                                     {3, 768}, {3, 4096}, {300, 2048}, {37, 4104}}) {
    INFO("rows " << rows << " hidden " << hidden);
    // An offset mean: the two-pass variance must not cancel.
    auto x = random_twin(pair, rows * hidden, 21, 2.0f, 4.0f);
    auto weight = random_twin(pair, hidden, 22, 0.5f, 1.5f);
    auto bias = random_twin(pair, hidden, 23);
    auto dy = random_twin(pair, rows * hidden, 24);
    auto y = random_twin(pair, rows * hidden, 25);
    auto mean = random_twin(pair, rows, 26);
    auto rstd = random_twin(pair, rows, 27);
    auto dx = random_twin(pair, rows * hidden, 28);
    auto dweight = random_twin(pair, hidden, 29);
    auto dbias = random_twin(pair, hidden, 30);
    auto ry = random_twin(pair, rows * hidden, 31);
    auto rrstd = random_twin(pair, rows, 32);
    auto rdx = random_twin(pair, rows * hidden, 33);
    auto rdweight = random_twin(pair, hidden, 34);
    // Input gradients added to a residual's gradient instead of overwriting.
    auto adx = random_twin(pair, rows * hidden, 35);
    auto ardx = random_twin(pair, rows * hidden, 36);
    for (Side s : kSides) {
      Backend& be = pair.on(s);
      be.layer_norm_forward(x(s), weight(s), bias(s), rows, hidden, 1e-5f, y(s), mean(s), rstd(s));
      be.layer_norm_backward(dy(s), x(s), weight(s), mean(s), rstd(s), rows, hidden, dx(s),
                             dweight(s), dbias(s));
      be.layer_norm_backward(dy(s), x(s), weight(s), mean(s), rstd(s), rows, hidden, adx(s),
                             dweight(s), dbias(s), /*accumulate_dx=*/true);
      be.rms_norm_forward(x(s), weight(s), rows, hidden, 1e-5f, ry(s), rrstd(s));
      be.rms_norm_backward(dy(s), x(s), weight(s), rrstd(s), rows, hidden, rdx(s), rdweight(s));
      be.rms_norm_backward(dy(s), x(s), weight(s), rrstd(s), rows, hidden, ardx(s), rdweight(s),
                           /*accumulate_dx=*/true);
    }
    INFO("hidden " << hidden);
    check_close(pair, y, kReduction, "layer_norm_forward y");
    check_close(pair, mean, kReduction, "layer_norm_forward mean");
    check_close(pair, rstd, kReduction, "layer_norm_forward rstd");
    check_close(pair, dx, 1e-4, "layer_norm_backward dx");
    check_close(pair, adx, 1e-4, "layer_norm_backward dx accumulated");
    check_close(pair, ardx, 1e-4, "rms_norm_backward dx accumulated");
    check_close(pair, dweight, kReduction, "layer_norm_backward dweight");
    check_close(pair, dbias, kReduction, "layer_norm_backward dbias");
    check_close(pair, ry, kReduction, "rms_norm_forward");
    check_close(pair, rrstd, kReduction, "rms_norm rstd");
    check_close(pair, rdx, 1e-4, "rms_norm_backward dx");
    check_close(pair, rdweight, kReduction, "rms_norm_backward dweight");
  }
}

TEST_CASE("cuda ops: bf16 and fp16 norms and column sums, 16-byte vector paths", "[cuda]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  for (const FloatType kBf16 : {FloatType::kBf16, FloatType::kF16})
  // 2048 rows: many row chunks in the column reduction; 1000 × 2048: the 1.3B model's rows. From
  // 1,025 to 4,096 columns the backward's one pass with two or four warps a row: 1032 (two warps
  // of 65 and 64 groups of eight), 1800 (a partial fourth group per lane), 4100 rows (32 per
  // block, 129 blocks), 2304 (four warps a row), 4096 (four of 128 groups each). 4104: two passes.
  for (const auto& [rows, hidden] : {std::pair<int64_t, int64_t>{2048, 768}, {333, 2304}, {5, 2304}, {1000, 2048},
                                     {301, 1032}, {77, 1800}, {4100, 1536}, {300, 4096}, {37, 4104}}) {
    auto x = random_twin(pair, rows * hidden, 121, 2.0f, 4.0f, kBf16);
    auto weight = random_twin(pair, hidden, 122, 0.5f, 1.5f, kBf16);
    auto bias = random_twin(pair, hidden, 123, -1.0f, 1.0f, kBf16);
    auto dy = random_twin(pair, rows * hidden, 124, -1.0f, 1.0f, kBf16);
    auto y = random_twin(pair, rows * hidden, 125, -1.0f, 1.0f, kBf16);
    auto mean = random_twin(pair, rows, 126);
    auto rstd = random_twin(pair, rows, 127);
    auto dx = random_twin(pair, rows * hidden, 128, -1.0f, 1.0f, kBf16);
    auto dweight = random_twin(pair, hidden, 129);
    auto dbias = random_twin(pair, hidden, 130);
    auto ry = random_twin(pair, rows * hidden, 131, -1.0f, 1.0f, kBf16);
    auto rrstd = random_twin(pair, rows, 132);
    auto rdx = random_twin(pair, rows * hidden, 133, -1.0f, 1.0f, kBf16);
    auto rdweight = random_twin(pair, hidden, 134);
    // Input gradients added to a residual's gradient.
    auto adx = random_twin(pair, rows * hidden, 135, -1.0f, 1.0f, kBf16);
    auto ardx = random_twin(pair, rows * hidden, 136, -1.0f, 1.0f, kBf16);
    for (Side s : kSides) {
      Backend& be = pair.on(s);
      be.layer_norm_forward(x(s), weight(s), bias(s), rows, hidden, 1e-5f, y(s), mean(s), rstd(s));
      be.layer_norm_backward(dy(s), x(s), weight(s), mean(s), rstd(s), rows, hidden, dx(s),
                             dweight(s), dbias(s));
      be.layer_norm_backward(dy(s), x(s), weight(s), mean(s), rstd(s), rows, hidden, adx(s), dweight(s), dbias(s),
                             /*accumulate_dx=*/true);
      be.rms_norm_forward(x(s), weight(s), rows, hidden, 1e-5f, ry(s), rrstd(s));
      be.rms_norm_backward(dy(s), x(s), weight(s), rrstd(s), rows, hidden, rdx(s), rdweight(s));
      be.rms_norm_backward(dy(s), x(s), weight(s), rrstd(s), rows, hidden, ardx(s), rdweight(s),
                           /*accumulate_dx=*/true);
      be.bias_backward(dy(s), rows, hidden, dbias(s));
    }
    INFO(float_type_name(kBf16) << " rows " << rows << " hidden " << hidden);
    // 2-byte outputs: the same value on both sides may round to neighbouring numbers. The
    // statistics and the fp32 gradient sums see the same 2-byte inputs on both sides.
    check_close(pair, y, 1e-2, "bf16 layer_norm_forward y");
    check_close(pair, mean, kReduction, "bf16 layer_norm_forward mean");
    check_close(pair, rstd, kReduction, "bf16 layer_norm_forward rstd");
    check_close(pair, dx, 1e-2, "bf16 layer_norm_backward dx");
    check_close(pair, adx, 1e-2, "bf16 layer_norm_backward dx accumulated");
    check_close(pair, ardx, 1e-2, "bf16 rms_norm_backward dx accumulated");
    check_close(pair, dweight, kReduction, "bf16 layer_norm_backward dweight");
    check_close(pair, dbias, kReduction, "bf16 layer_norm_backward dbias + bias_backward");
    check_close(pair, ry, 1e-2, "bf16 rms_norm_forward");
    check_close(pair, rrstd, kReduction, "bf16 rms_norm rstd");
    check_close(pair, rdx, 1e-2, "bf16 rms_norm_backward dx");
    check_close(pair, rdweight, kReduction, "bf16 rms_norm_backward dweight");
  }
}

TEST_CASE("cuda ops: residual add fused into LayerNorm and RMSNorm", "[cuda]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  // 768: the fused vector kernel; 100: rows that cannot be read eight at a time (add, then norm).
  for (const FloatType type : {FloatType::kF32, FloatType::kBf16, FloatType::kF16})
  for (const int64_t hidden : {int64_t{768}, int64_t{100}})
  for (const int64_t rows : {int64_t{333}, int64_t{2}}) {  // 2: a decode step's rows
    INFO(float_type_name(type) << " hidden " << hidden << " rows " << rows);
    auto a = random_twin(pair, rows * hidden, 161, -2.0f, 2.0f, type);
    auto b = random_twin(pair, rows * hidden, 162, 1.0f, 3.0f, type);
    auto weight = random_twin(pair, hidden, 163, 0.5f, 1.5f, type);
    auto bias = random_twin(pair, hidden, 164, -1.0f, 1.0f, type);
    auto sum = random_twin(pair, rows * hidden, 165, -1.0f, 1.0f, type);
    auto y = random_twin(pair, rows * hidden, 166, -1.0f, 1.0f, type);
    auto mean = random_twin(pair, rows, 167);
    auto rstd = random_twin(pair, rows, 168);
    auto rsum = random_twin(pair, rows * hidden, 169, -1.0f, 1.0f, type);
    auto ry = random_twin(pair, rows * hidden, 170, -1.0f, 1.0f, type);
    auto rrstd = random_twin(pair, rows, 171);
    // A third addend: the sum rounded once.
    auto c = random_twin(pair, rows * hidden, 172, -1.0f, 1.0f, type);
    auto csum = random_twin(pair, rows * hidden, 173, -1.0f, 1.0f, type);
    auto cy = random_twin(pair, rows * hidden, 174, -1.0f, 1.0f, type);
    auto cmean = random_twin(pair, rows, 175);
    auto crstd = random_twin(pair, rows, 176);
    for (Side s : kSides) {
      Backend& be = pair.on(s);
      be.add_norm_forward(a(s), b(s), sum(s), weight(s), bias(s), rows, hidden, 1e-5f, y(s), mean(s), rstd(s));
      be.add_norm_forward(a(s), b(s), rsum(s), weight(s), {}, rows, hidden, 1e-5f, ry(s), {}, rrstd(s));
      be.add_norm_forward(a(s), b(s), csum(s), weight(s), bias(s), rows, hidden, 1e-5f, cy(s), cmean(s), crstd(s),
                          c(s));
    }
    // The sums are one rounding of the same two numbers; 2-byte normalised outputs may round to
    // neighbouring numbers.
    const double bound = type == FloatType::kF32 ? 1e-5 : 1e-2;
    check_close(pair, sum, kExact, "add_norm_forward sum");
    check_close(pair, y, bound, "add_norm_forward LayerNorm y");
    check_close(pair, mean, kReduction, "add_norm_forward mean");
    check_close(pair, rstd, kReduction, "add_norm_forward rstd");
    check_close(pair, rsum, kExact, "add_norm_forward RMSNorm sum");
    check_close(pair, ry, bound, "add_norm_forward RMSNorm y");
    check_close(pair, rrstd, kReduction, "add_norm_forward RMSNorm rstd");
    check_close(pair, csum, kExact, "add_norm_forward sum of three");
    check_close(pair, cy, bound, "add_norm_forward of three, y");
    check_close(pair, cmean, kReduction, "add_norm_forward of three, mean");
    check_close(pair, crstd, kReduction, "add_norm_forward of three, rstd");
  }
}

TEST_CASE("cuda ops: cross-entropy, masked loss, argmax", "[cuda]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  const int64_t rows = 70, vocab = 5003;
  auto logits = random_twin(pair, rows * vocab, 71, -8.0f, 8.0f);
  auto targets = twin(pair, random_ids(rows, 0, vocab, 72));
  auto loss = random_twin(pair, rows, 73), row_max = random_twin(pair, rows, 74);
  auto sum_exp = random_twin(pair, rows, 75), dloss = random_twin(pair, rows, 76);
  auto dlogits = random_twin(pair, rows * vocab, 77);
  auto mask = random_twin(pair, rows, 78, 0.0f, 1.0f);
  auto argmax = twin(pair, std::vector<int64_t>(static_cast<size_t>(rows), -1));
  MaskedLossSum sums[2];
  for (Side s : kSides) {
    Backend& be = pair.on(s);
    be.cross_entropy_forward(logits(s), targets(s), rows, vocab, loss(s), row_max(s), sum_exp(s));
    be.masked_loss_grad(mask(s), 0.25f, dloss(s));
    be.cross_entropy_backward(logits(s), targets(s), row_max(s), sum_exp(s), dloss(s), rows, vocab,
                              0, dlogits(s));
    sums[s == Side::kGpu] = be.masked_loss_sum(loss(s), mask(s));
    be.row_argmax(logits(s), rows, vocab, argmax(s));
  }
  check_close(pair, loss, kReduction, "cross_entropy_forward loss");
  check_close(pair, row_max, 0.0, "row_max");
  check_close(pair, sum_exp, kReduction, "sum_exp");
  check_close(pair, dlogits, kReduction, "cross_entropy_backward");
  CHECK(sums[1].tokens == Approx(sums[0].tokens).epsilon(1e-12));
  CHECK(sums[1].loss_sum == Approx(sums[0].loss_sum).epsilon(1e-6));
  // The same sums left on the device, then a second micro-batch's added to them: the GPU's
  // reduction, twice, in double.
  DeviceArray<double> on_device(*pair.gpu, 2);
  pair.gpu->masked_loss_sum_on_device(loss(Side::kGpu), mask(Side::kGpu), on_device.view(), false);
  pair.gpu->masked_loss_sum_on_device(loss(Side::kGpu), mask(Side::kGpu), on_device.view(), true);
  std::vector<double> accumulated(2);
  pair.gpu->copy_to_host(DeviceSpan<const double>(on_device.view()), std::span<double>(accumulated));
  CHECK(accumulated[0] == sums[1].loss_sum + sums[1].loss_sum);
  CHECK(accumulated[1] == sums[1].tokens + sums[1].tokens);
  CHECK(to_host(*pair.cpu, argmax.cpu.view()) == to_host(*pair.gpu, argmax.gpu.view()));
  // bf16 logits, rows read eight at a time from their first 16-byte boundary: with 128 values in
  // [0.5, 1) the maximum is tied, and the first one must win. Strides that keep rows aligned and
  // that do not.
  for (const int64_t padded : {int64_t{5008}, int64_t{5005}}) {
    INFO("row stride " << padded);
    const int64_t used = 5003;
    auto narrow = random_twin(pair, 3 * padded, 79, -1.0f, 1.0f, FloatType::kBf16);
    auto narrow_argmax = twin(pair, std::vector<int64_t>(3, -1));
    for (Side s : kSides) pair.on(s).row_argmax(narrow(s), 3, used, narrow_argmax(s), padded);
    CHECK(to_host(*pair.cpu, narrow_argmax.cpu.view()) == to_host(*pair.gpu, narrow_argmax.gpu.view()));
  }
}

TEST_CASE("cuda ops: AdamW and sum of squares", "[cuda]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  const int64_t n = 100003;
  auto param = random_twin(pair, n, 91);
  auto grad = random_twin(pair, n, 92);
  auto m = random_twin(pair, n, 93, -0.1f, 0.1f);
  auto v = random_twin(pair, n, 94, 0.0f, 0.01f);
  const AdamWParams params{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
  double norms[2];
  for (Side s : kSides) {
    pair.on(s).adamw_step(param(s), grad(s), m(s), v(s), params, 7);
    norms[s == Side::kGpu] = pair.on(s).sum_of_squares(grad(s));
  }
  check_close(pair, param, kExact, "adamw param");
  check_close(pair, m, kExact, "adamw exp_avg");
  check_close(pair, v, kExact, "adamw exp_avg_sq");
  CHECK(norms[1] == Approx(norms[0]).epsilon(1e-12));
  // Over 300 ranges of uneven lengths (more than one launch's 128), gaps between them: the same
  // bits as one sum per range added on the host, and close to the CPU's.
  std::vector<ElementRange> ranges;
  for (int64_t begin = 5, k = 0; begin < n; ++k) {
    const int64_t count = std::min<int64_t>(n - begin, 1 + (k * 7919) % 600);
    ranges.push_back({begin, count});
    begin += count + k % 3;
  }
  REQUIRE(ranges.size() > 300);
  double looped = 0.0;
  for (const ElementRange& r : ranges) looped += pair.gpu->sum_of_squares(ConstFloatView(grad.gpu.view()).subspan(r.begin, r.count));
  const double batched = pair.gpu->sum_of_squares(grad.gpu.view(), ranges);
  CHECK(batched == looped);
  CHECK(batched == Approx(pair.cpu->sum_of_squares(grad.cpu.view(), ranges)).epsilon(1e-12));
}

TEST_CASE("cuda ops: cross-entropy forward and backward in one pass, fp32, bf16 and fp16 logits", "[cuda]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  const int64_t rows = 70;
  // 5008: whole 16-byte vectors of bf16 or fp16 per row, the kernel's vector path.
  for (const auto& [type, vocab] : {std::pair{FloatType::kF32, int64_t{5003}},
                                    std::pair{FloatType::kBf16, int64_t{5003}},
                                    std::pair{FloatType::kBf16, int64_t{5008}},
                                    std::pair{FloatType::kF16, int64_t{5003}},
                                    std::pair{FloatType::kF16, int64_t{5008}}}) {
    auto logits = random_twin(pair, rows * vocab, 84, -8.0f, 8.0f, type);
    auto targets = twin(pair, random_ids(rows, 0, vocab, 85));
    auto dloss = random_twin(pair, rows, 86, 0.0f, 1.0f);
    auto loss = random_twin(pair, rows, 87);
    for (Side s : kSides) {
      pair.on(s).cross_entropy_forward_backward(logits(s), targets(s), dloss(s), rows, vocab, loss(s));
    }
    const bool narrow = type != FloatType::kF32;
    INFO(float_type_name(type) << " logits, vocabulary " << vocab);
    check_close(pair, loss, kReduction, "fused loss");
    // 2-byte gradients: the same value on both sides may round to neighbouring numbers.
    check_close(pair, logits, narrow ? 1e-2 : kReduction, "fused gradient");
  }
}

TEST_CASE("cuda ops: vocab-parallel cross-entropy, statistics of two slices combined, and the backward", "[cuda]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  const int64_t rows = 70;
  // 2000 columns a slice: whole 16-byte vectors, the kernels' vector path; 2003: the plain one.
  for (const auto& [type, shard] : {std::pair{FloatType::kF32, int64_t{2000}},
                                    std::pair{FloatType::kF32, int64_t{2003}},
                                    std::pair{FloatType::kBf16, int64_t{2000}},
                                    std::pair{FloatType::kBf16, int64_t{2003}}}) {
    INFO(float_type_name(type) << " logits, slices of " << shard);
    auto logits = random_twin(pair, 2 * rows * shard, 91, -8.0f, 8.0f, type);
    auto targets = twin(pair, random_ids(rows, 0, 2 * shard, 92));
    auto statistics = random_twin(pair, 2 * 3 * rows, 93);
    auto loss = random_twin(pair, rows, 94), row_max = random_twin(pair, rows, 95);
    auto sum_exp = random_twin(pair, rows, 96), dloss = random_twin(pair, rows, 97, 0.0f, 1.0f);
    auto dlogits = random_twin(pair, 2 * rows * shard, 98, -1.0f, 1.0f, type);
    auto whole_loss = random_twin(pair, rows, 99), whole_max = random_twin(pair, rows, 100);
    auto whole_sum = random_twin(pair, rows, 101);
    for (Side s : kSides) {
      Backend& be = pair.on(s);
      // The same logits as one [rows, 2·shard] vocabulary, unsharded.
      be.cross_entropy_forward(logits(s), targets(s), rows, 2 * shard, whole_loss(s), whole_max(s), whole_sum(s));
      // Rank k's slice is the k-th [rows, shard] block, vocabulary entries [k·shard, (k+1)·shard).
      for (int64_t k = 0; k < 2; ++k) {
        be.cross_entropy_shard_statistics(logits(s).subspan(k * rows * shard, rows * shard), targets(s),
                                          rows, shard, k * shard,
                                          statistics(s).subspan(k * 3 * rows, 3 * rows));
      }
      be.cross_entropy_combine(statistics(s), 2, rows, loss(s), row_max(s), sum_exp(s));
      for (int64_t k = 0; k < 2; ++k) {
        be.cross_entropy_backward(logits(s).subspan(k * rows * shard, rows * shard), targets(s), row_max(s),
                                  sum_exp(s), dloss(s), rows, shard, k * shard,
                                  dlogits(s).subspan(k * rows * shard, rows * shard));
      }
    }
    check_close(pair, statistics, kReduction, "slice statistics");
    check_close(pair, row_max, 0.0, "combined row_max");
    check_close(pair, sum_exp, kReduction, "combined sum_exp");
    check_close(pair, loss, kReduction, "combined loss");
    check_close(pair, dlogits, type == FloatType::kF32 ? kReduction : 1e-2, "vocab-parallel backward");
    check_close(pair, whole_loss, kReduction, "unsharded loss");
    check_close(pair, whole_max, 0.0, "unsharded row_max");
    check_close(pair, whole_sum, kReduction, "unsharded sum_exp");
  }
}

TEST_CASE("cuda ops: one-launch AdamW over segments with clipping and a bf16 or fp16 weight copy", "[cuda]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  // The copy at an element's offset into its buffer: not 8-byte aligned, so its four elements a
  // thread are stored one at a time instead of in one store (and fp32 copies in one 16-byte one).
  for (const FloatType copy_type : {FloatType::kBf16, FloatType::kF16, FloatType::kF32})
  for (const int64_t offset : {int64_t{0}, int64_t{1}}) {
  INFO(float_type_name(copy_type) << " copy at offset " << offset);
  const int64_t n = 100003;
  auto param = random_twin(pair, n, 95);
  auto grad = random_twin(pair, n, 96);
  auto m = random_twin(pair, n, 97, -0.1f, 0.1f);
  auto v = random_twin(pair, n, 98, 0.0f, 0.01f);
  auto copy = random_twin(pair, offset + n, 99, -1.0f, 1.0f, copy_type);
  const std::vector<int64_t> ends{1000, 1001, 50000, 77777, n};
  const std::vector<int64_t> flags{kAdamWDecay, 0, kAdamWDecay | kAdamWDecoupledLr,
                                   kAdamWDecoupledLr, kAdamWDecay};
  const AdamWParams params{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
  for (Side s : kSides) {
    pair.on(s).adamw_update(param(s), grad(s), m(s), v(s), ends, flags, params, 1e-3f, 0.625f, 7,
                            copy(s).subspan(offset, n));
  }
  check_close(pair, param, kExact, "adamw_update param");
  check_close(pair, m, kExact, "adamw_update exp_avg");
  check_close(pair, v, kExact, "adamw_update exp_avg_sq");
  // The same fp32 values rounded to nearest even on both sides (the conversions test checks bits).
  check_close(pair, copy, kExact, "adamw_update copy");
  }
}

TEST_CASE("cuda ops: AdamW with bf16 moments read and stored by the update itself", "[cuda]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  // The precision-aware optimizer's moments: the GPU's update reads and writes them in its kernel
  // (8-byte accesses, or one at a time at an odd offset), the CPU's on fp32 copies. Their fp32
  // arithmetic agrees within its last bit (the GPU fuses multiply-adds), which the rounding to
  // bf16 can turn into one bf16 unit for an element near a tie (seen once at offset 0: 8.0e-4 of
  // the largest moment), so the moments are checked within one unit, 2^-8.
  for (const int64_t offset : {int64_t{0}, int64_t{1}}) {
    INFO("moments at offset " << offset);
    const int64_t n = 100003;
    auto param = random_twin(pair, n, 85);
    auto grad = random_twin(pair, n, 86);
    auto m = random_twin(pair, offset + n, 87, -0.1f, 0.1f, FloatType::kBf16);
    auto v = random_twin(pair, offset + n, 88, 0.0f, 0.01f, FloatType::kBf16);
    auto copy = random_twin(pair, n, 89, -1.0f, 1.0f, FloatType::kBf16);
    const std::vector<int64_t> ends{1000, 50001, n};
    const std::vector<int64_t> flags{kAdamWDecay, kAdamWDecay | kAdamWDecoupledLr, 0};
    const AdamWParams params{3e-3f, 0.9f, 0.95f, 1e-8f, 0.1f};
    for (Side s : kSides) {
      pair.on(s).adamw_update(param(s), grad(s), m(s).subspan(offset, n), v(s).subspan(offset, n), ends, flags,
                              params, 1e-3f, 0.625f, 5, copy(s));
    }
    check_close(pair, param, kExact, "param");
    check_close(pair, m, 4e-3, "bf16 exp_avg");
    check_close(pair, v, 4e-3, "bf16 exp_avg_sq");
    check_close(pair, copy, kExact, "copy");
  }
}

TEST_CASE("cuda ops: attention forward and backward", "[cuda]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  for (const auto& [seq_q, seq_kv, heads, groups, head_dim, p] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, float>{128, 128, 4, 4, 64, 0.0f},
        {100, 100, 8, 2, 64, 0.1f}, {1, 70, 4, 1, 128, 0.0f}, {65, 65, 2, 2, 128, 0.0f}}) {
    const AttentionShape shape{2, seq_q, seq_kv, heads, groups, head_dim, SeqLayout::kSeqMajor};
    AttentionParams params;
    params.softmax_scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    params.dropout_p = p;
    params.dropout_key = DropoutKey{42, 3, 0};
    auto q = random_twin(pair, shape.query().elements(), 101);
    auto k = random_twin(pair, shape.key_value().elements(), 102);
    auto v = random_twin(pair, shape.key_value().elements(), 103);
    auto dout = random_twin(pair, shape.query().elements(), 104);
    auto out = random_twin(pair, shape.query().elements(), 105);
    auto lse = random_twin(pair, shape.batch * heads * seq_q, 106);
    auto dq = random_twin(pair, q.size(), 107);
    auto dk = random_twin(pair, k.size(), 108);
    auto dv = random_twin(pair, v.size(), 109);
    for (Side s : kSides) {
      pair.on(s).attention_forward(q(s), k(s), v(s), shape, params, out(s), lse(s));
      pair.on(s).attention_backward(q(s), k(s), v(s), out(s), dout(s), lse(s), shape, params, dq(s),
                                    dk(s), dv(s));
    }
    INFO("seq " << seq_q << "/" << seq_kv << " heads " << heads << "/" << groups << " dim "
                << head_dim << " dropout " << p);
    check_close(pair, out, 1e-5, "attention out");
    check_close(pair, lse, 1e-5, "attention lse");
    check_close(pair, dq, 1e-4, "attention dq");
    check_close(pair, dk, 1e-4, "attention dk");
    check_close(pair, dv, 1e-4, "attention dv");
  }
}

TEST_CASE("cuda ops: bf16 and fp16 GEMMs round the inputs and accumulate in fp32", "[cuda]") {
  if (skip_without_gpu()) return;
  for (const auto precision : {Backend::MatmulPrecision::kBf16, Backend::MatmulPrecision::kFp16}) {
  BackendPair pair;
  REQUIRE(pair.gpu->set_matmul_precision(precision));
  INFO((precision == Backend::MatmulPrecision::kBf16 ? "bf16" : "fp16"));
  const int64_t rows = 512, in = 768, out_dim = 1024;
  auto x = random_twin(pair, rows * in, 111);
  auto w = random_twin(pair, out_dim * in, 112, -0.05f, 0.05f);
  auto dy = random_twin(pair, rows * out_dim, 113);
  auto y = random_twin(pair, rows * out_dim, 114);
  auto dx = random_twin(pair, rows * in, 115);
  auto dw = random_twin(pair, out_dim * in, 116);
  for (Side s : kSides) {
    Backend& be = pair.on(s);
    be.linear_forward(x(s), w(s), {}, rows, in, out_dim, y(s));
    be.linear_backward_input(dy(s), w(s), rows, in, out_dim, dx(s));
    be.linear_backward_weight(dy(s), x(s), rows, in, out_dim, dw(s));
  }
  // bf16 keeps 8 significant bits: each product is off by up to 2⁻⁸ relative, and the errors of
  // a long dot product partly cancel.
  check_close(pair, y, 1e-2, "bf16 linear_forward");
  check_close(pair, dx, 1e-2, "bf16 linear_backward_input");
  check_close(pair, dw, 1e-2, "bf16 linear_backward_weight");
  }
}

TEST_CASE("cuda ops: linear layers with Megatron's fused bias-GELU in the GEMM epilogue", "[cuda]") {
  if (skip_without_gpu()) return;
  for (const FloatType kBf16 : {FloatType::kBf16, FloatType::kF16}) {
  BackendPair pair;
  REQUIRE(pair.gpu->set_matmul_precision(kBf16 == FloatType::kBf16 ? Backend::MatmulPrecision::kBf16
                                                                   : Backend::MatmulPrecision::kFp16));
  INFO(float_type_name(kBf16) << " operands");
  const int64_t rows = 96, in = 256, out = 512;
  // bf16 operands; pre-activations spread over about [-5, 5], where the erf and tanh GELUs differ.
  auto x = random_twin(pair, rows * in, 141, -1.0f, 1.0f, kBf16);
  auto w = random_twin(pair, out * in, 142, -0.25f, 0.25f, kBf16);
  auto w2 = random_twin(pair, in * out, 144, -0.25f, 0.25f, kBf16);  // the next layer, out → in
  auto dy = random_twin(pair, rows * in, 145, -1.0f, 1.0f, kBf16);
  for (const FloatType type : {FloatType::kF32, kBf16}) {
    auto bias = random_twin(pair, out, 143, -0.5f, 0.5f, type);  // the epilogue's bias is of the output's type
    auto pre = random_twin(pair, rows * out, 146, -1.0f, 1.0f, type);
    auto y = random_twin(pair, rows * out, 147, -1.0f, 1.0f, type);
    auto dpre = random_twin(pair, rows * out, 148, -1.0f, 1.0f, type);
    for (Side s : kSides) {
      Backend& be = pair.on(s);
      be.linear_gelu_tanh_forward(x(s), w(s), bias(s), rows, in, out, pre(s), y(s));
      be.linear_backward_input_gelu_tanh(dy(s), w2(s), pre(s), rows, out, in, dpre(s));
    }
    const bool fp32 = type == FloatType::kF32;
    INFO(float_type_name(type) << " outputs");
    // fp32 outputs of exact bf16 products: the fused results must be the tanh form, far closer to
    // it than to the erf form.
    const double bound = fp32 ? 1e-4 : 1e-2;
    check_close(pair, pre, bound, "fused linear, pre-activation");
    check_close(pair, y, bound, "fused linear + GELU");
    check_close(pair, dpre, bound, "fused input gradient through GELU");
    if (fp32) {
      Backend& cpu = *pair.cpu;
      auto erf_y = random_twin(pair, rows * out, 149);
      auto erf_dpre = random_twin(pair, rows * out, 150);
      cpu.gelu_forward(pre(Side::kCpu), erf_y.cpu.view());
      cpu.linear_backward_input(dy(Side::kCpu), w2(Side::kCpu), rows, out, in, erf_dpre.cpu.view());
      cpu.gelu_backward(erf_dpre.cpu.view(), pre(Side::kCpu), erf_dpre.cpu.view());
      const auto gpu_y = to_host(*pair.gpu, y.gpu.view());
      const auto gpu_dpre = to_host(*pair.gpu, dpre.gpu.view());
      const double tanh_error = relative_error(to_host(cpu, y.cpu.view()), gpu_y);
      const double erf_error = relative_error(to_host(cpu, erf_y.cpu.view()), gpu_y);
      INFO("GELU: off the tanh form by " << tanh_error << ", off the erf form by " << erf_error);
      CHECK(tanh_error * 4 < erf_error);
      const double tanh_grad_error = relative_error(to_host(cpu, dpre.cpu.view()), gpu_dpre);
      const double erf_grad_error = relative_error(to_host(cpu, erf_dpre.cpu.view()), gpu_dpre);
      INFO("GELU gradient: off the tanh form by " << tanh_grad_error << ", off the erf form by " << erf_grad_error);
      CHECK(tanh_grad_error * 4 < erf_grad_error);
    }
  }
  }
}

TEST_CASE("cuda ops: fp16 and bf16 conversions give the CPU's bits", "[cuda]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  // Random values over fp16's whole range, ties, subnormals, overflow and signed zeros.
  std::vector<float> values = kernel_testing::random_floats(4099, 151, -70000.0f, 70000.0f);
  for (const float v : kernel_testing::random_floats(4099, 152, -1e-3f, 1e-3f)) values.push_back(v);
  for (const float v : {0.0f, -0.0f, 1.0f + std::ldexp(1.0f, -11), 65504.0f, 65519.0f, 65520.0f, 1e10f,
                        std::ldexp(1.0f, -24), std::ldexp(1.0f, -25), std::ldexp(1023.5f, -24), -3.0e-6f}) {
    values.push_back(v);
  }
  for (const FloatType type : {FloatType::kF16, FloatType::kBf16}) {
    INFO(float_type_name(type));
    auto t = twin(pair, values, type);  // converted by each backend
    const std::vector<float> cpu = to_host(*pair.cpu, t.cpu.view());
    const std::vector<float> gpu = to_host(*pair.gpu, t.gpu.view());
    int mismatches = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      if (std::memcmp(&cpu[i], &gpu[i], sizeof(float)) != 0) ++mismatches;
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("cuda backend reports the device's free memory for the memory check", "[cuda]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  const auto memory = pair.gpu->available_memory();
  REQUIRE(memory.has_value());
  CHECK(memory->bytes > (int64_t{1} << 30));
  CHECK(memory->source.find("cuda:0") != std::string::npos);
}
