#include <catch2/catch.hpp>

#include <cmath>
#include <span>
#include <vector>

#include "core/error.hpp"
#include "kernel_testing.hpp"
#include "kernels/backend.hpp"
#include "kernels/bf16.hpp"
#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cpu/adamw.hpp"
#include "kernels/cpu/grad_clip.hpp"
#include "kernels/grad_clip.hpp"

using namespace mgt;
using namespace mgt::kernel_testing;

TEST_CASE("adamw: two steps worked by hand", "[kernels]") {
  // lr 0.1, β1 0.9, β2 0.999, eps 1e-8, wd 0.01; p = 1, gradients 0.5 then −0.25.
  // Step 1: m = 0.1·0.5 = 0.05, v = 0.001·0.25 = 0.00025; m̂ = 0.05/0.1 = 0.5,
  //   v̂ = 0.00025/0.001 = 0.25, √v̂ = 0.5; update = 0.5/(0.5 + 1e-8) + 0.01·1 = 1.00999998;
  //   p = 1 − 0.1·1.00999998 = 0.899000002.
  // Step 2: m = 0.9·0.05 + 0.1·(−0.25) = 0.02, v = 0.999·0.00025 + 0.001·0.0625 = 0.00031225;
  //   m̂ = 0.02/0.19 = 0.105263158, v̂ = 0.00031225/0.001999 = 0.156203102, √v̂ = 0.395225381;
  //   update = 0.105263158/(0.395225381 + 1e-8) + 0.01·0.899000002 = 0.275327033;
  //   p = 0.899000002 − 0.0275327033 = 0.871467299.
  AdamWParams params;
  params.lr = 0.1f;
  params.beta1 = 0.9f;
  params.beta2 = 0.999f;
  params.eps = 1e-8f;
  params.weight_decay = 0.01f;
  float p = 1.0f, m = 0.0f, v = 0.0f;
  float g = 0.5f;
  cpu::adamw_step(&p, &g, &m, &v, 1, params, 1);
  CHECK(m == Approx(0.05).epsilon(1e-6));
  // β2 = 0.999f is 0.999 + 1.3e-8, so the fp32 1 − β2 (as in Apex's kernel) is 1.3e-5 short of
  // 0.001; the bias correction divides the same factor out again, so p is unaffected.
  CHECK(v == Approx(0.00025).epsilon(2e-5));
  CHECK(p == Approx(0.899000002).epsilon(1e-6));
  g = -0.25f;
  cpu::adamw_step(&p, &g, &m, &v, 1, params, 2);
  CHECK(m == Approx(0.02).epsilon(1e-6));
  CHECK(v == Approx(0.00031225).epsilon(2e-5));
  CHECK(p == Approx(0.8714672987).epsilon(1e-6));
}

TEST_CASE("adamw matches an fp64 reference over several steps", "[kernels]") {
  const int64_t n = 64;
  AdamWParams params;
  params.lr = 3e-3f;
  params.beta1 = 0.9f;
  params.beta2 = 0.95f;
  params.eps = 1e-8f;
  params.weight_decay = 0.1f;
  auto p = random_floats(n, 501);
  std::vector<float> m(n, 0.0f), v(n, 0.0f);
  auto pd = to_double(p);
  std::vector<double> md(n, 0.0), vd(n, 0.0);
  const double b1 = params.beta1, b2 = params.beta2;  // the float values, widened
  for (int64_t step = 1; step <= 5; ++step) {
    const auto g = random_floats(n, 510 + static_cast<uint32_t>(step), -0.1f, 0.1f);
    cpu::adamw_step(p.data(), g.data(), m.data(), v.data(), n, params, step);
    for (int64_t i = 0; i < n; ++i) {
      md[i] = b1 * md[i] + (1 - b1) * g[i];
      vd[i] = b2 * vd[i] + (1 - b2) * g[i] * g[i];
      const double mh = md[i] / (1 - std::pow(b1, step));
      const double vh = vd[i] / (1 - std::pow(b2, step));
      pd[i] -= params.lr * (mh / (std::sqrt(vh) + params.eps) + params.weight_decay * pd[i]);
    }
  }
  CHECK(rel_error(p, pd) < 1e-6);
  CHECK(rel_error(m, md) < 1e-5);
  CHECK(rel_error(v, vd) < 1e-5);
  CHECK_THROWS_AS(cpu::adamw_step(p.data(), p.data(), m.data(), v.data(), n, params, 0), Error);
}

TEST_CASE("global gradient norm and clipping", "[kernels]") {
  const auto a = random_floats(100, 601);
  const auto b = random_floats(7, 602, -3.0f, 3.0f);
  const std::vector<float> empty;
  const std::vector<std::span<const float>> buffers = {a, b, empty};
  double want = 0.0;
  for (const float x : a) want += static_cast<double>(x) * x;
  for (const float x : b) want += static_cast<double>(x) * x;
  CHECK(cpu::sum_of_squares(buffers) == Approx(want).epsilon(1e-14));
  const double norm = cpu::global_l2_norm(buffers);
  CHECK(norm == Approx(std::sqrt(want)).epsilon(1e-14));

  // Megatron's coefficient: max_norm / (norm + 1e-6), applied only when below 1.
  CHECK(clip_coefficient(norm, 1.0) == Approx(1.0 / (norm + 1e-6)).epsilon(1e-14));
  CHECK(clip_coefficient(0.5, 1.0) == 1.0);
  CHECK(clip_coefficient(norm, 0.0) == 1.0);

  auto a2 = a;
  auto b2 = b;
  const std::vector<std::span<float>> mutable_buffers = {a2, b2};
  const auto coefficient = static_cast<float>(clip_coefficient(norm, 1.0));
  cpu::scale_buffers(mutable_buffers, coefficient);
  const std::vector<std::span<const float>> clipped = {a2, b2};
  CHECK(cpu::global_l2_norm(clipped) == Approx(1.0).epsilon(1e-5));
  CHECK(a2[3] == a[3] * coefficient);
}

TEST_CASE("adamw_update with bf16 moments: fp32 arithmetic, stored rounded to nearest even", "[kernels]") {
  // The precision-aware optimizer's states as Transformer Engine's FusedAdam keeps bf16 ones: the
  // same step as with fp32 moments holding the bf16 values, its moments then rounded. Past 2^24
  // elements the update goes part by part, so the runs' flags must carry across the cut.
  CpuBackend backend;
  const int64_t n = (int64_t{1} << 24) + 4099;
  const std::vector<int64_t> ends = {1000, (int64_t{1} << 24) - 7, (int64_t{1} << 24) + 2000, n};
  const std::vector<int64_t> flags = {kAdamWDecay, kAdamWDecay | kAdamWDecoupledLr, 0, kAdamWDecay};
  AdamWParams params;
  params.lr = 3e-3f;
  params.beta1 = 0.9f;
  params.beta2 = 0.95f;
  params.weight_decay = 0.1f;
  std::vector<float> p(n), g(n), m(n), v(n);
  for (int64_t i = 0; i < n; ++i) {  // varied, cheap to make for 16M elements
    const float x = static_cast<float>((i * 2654435761u) % 100003) / 100003.0f - 0.5f;
    p[i] = x;
    g[i] = 0.1f * std::sin(static_cast<float>(i));
    m[i] = bf16_to_float(float_to_bf16(0.05f * x));
    v[i] = bf16_to_float(float_to_bf16(1e-3f * (x + 0.6f)));
  }
  DeviceBuffer param32(backend, n), grad(backend, n), m32(backend, n), v32(backend, n);
  DeviceBuffer param16(backend, n), m16(backend, n, FloatType::kBf16), v16(backend, n, FloatType::kBf16);
  DeviceBuffer compute16(backend, n, FloatType::kBf16), compute_ref(backend, n, FloatType::kBf16);
  backend.copy_from_host(p, param32.view());
  backend.copy_from_host(p, param16.view());
  backend.copy_from_host(g, grad.view());
  backend.copy_from_host(m, m32.view());
  backend.copy_from_host(v, v32.view());
  backend.copy_from_host(m, m16.view());  // exact: the values are bf16's
  backend.copy_from_host(v, v16.view());
  backend.adamw_update(param32.view(), grad.view(), m32.view(), v32.view(), ends, flags, params, 7e-3f, 0.5f, 3,
                       compute_ref.view());
  backend.adamw_update(param16.view(), grad.view(), m16.view(), v16.view(), ends, flags, params, 7e-3f, 0.5f, 3,
                       compute16.view());
  const auto host = [&](const DeviceBuffer& b) {
    std::vector<float> out(static_cast<std::size_t>(n));
    backend.copy_to_host(b.view(), std::span<float>(out));
    return out;
  };
  CHECK(host(param16) == host(param32));
  CHECK(host(compute16) == host(compute_ref));
  const std::vector<float> want_m = host(m32), want_v = host(v32), got_m = host(m16), got_v = host(v16);
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i)
    wrong += bf16_to_float(float_to_bf16(want_m[i])) != got_m[i] || bf16_to_float(float_to_bf16(want_v[i])) != got_v[i];
  CHECK(wrong == 0);
  // And the moments did move: not a copy of the inputs.
  CHECK(got_m != m);
  // fp16 moments are not a type of the precision-aware optimizer here.
  DeviceBuffer m_half(backend, n, FloatType::kF16);
  CHECK_THROWS_WITH(backend.adamw_update(param16.view(), grad.view(), m_half.view(), v16.view(), ends, flags, params,
                                         7e-3f, 0.5f, 4, {}),
                    Catch::Contains("moments must be fp32 or bf16"));
}
