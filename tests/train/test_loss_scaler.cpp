#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "train/loss_scaler.hpp"
#include "train/train_options.hpp"

using namespace mgt;

namespace {

LossScalerSettings dynamic_settings(double initial, std::int64_t window, std::int64_t hysteresis, double min = 1.0) {
  LossScalerSettings s;
  s.initial_scale = initial;
  s.window = window;
  s.hysteresis = hysteresis;
  s.min_scale = min;
  return s;
}

// The scale after each of `overflows` (true: the step's gradients were not finite).
std::vector<float> scales_after(LossScaler& scaler, const std::vector<bool>& overflows) {
  std::vector<float> out;
  for (bool overflow : overflows) {
    scaler.update(overflow);
    out.push_back(scaler.scale());
  }
  return out;
}

}  // namespace

TEST_CASE("loss scaler: Megatron's defaults", "[train][loss_scaler]") {
  LossScaler scaler(LossScalerSettings{});
  CHECK(scaler.dynamic());
  CHECK(scaler.scale() == 4294967296.0f);
  CHECK(scaler.inverse_scale() == 1.0f / 4294967296.0f);
  CHECK(scaler.state().growth_tracker == 0);
  CHECK(scaler.state().hysteresis_tracker == 2);
}

TEST_CASE("loss scaler: backs off once hysteresis overflows are seen, grows after a window", "[train][loss_scaler]") {
  LossScaler scaler(dynamic_settings(1024.0, 3, 2));
  // First overflow: hysteresis 2 → 1, scale kept; the second halves, and so does every further
  // one (the hysteresis count is not restored by good steps, only by growth).
  CHECK(scales_after(scaler, {true, true, true}) == std::vector<float>{1024, 512, 256});
  CHECK(scaler.state().hysteresis_tracker == -1);
  CHECK(scales_after(scaler, {false, false, true}) == std::vector<float>{256, 256, 128});
  CHECK(scaler.state().growth_tracker == 0);
  // Three good steps in a row double it and restore the hysteresis.
  CHECK(scales_after(scaler, {false, false, false}) == std::vector<float>{128, 128, 256});
  CHECK(scaler.state().hysteresis_tracker == 2);
  CHECK(scaler.state().growth_tracker == 0);
  CHECK(scales_after(scaler, {true, false, false, false, true, true}) ==
        std::vector<float>{256, 256, 256, 512, 512, 256});
}

TEST_CASE("loss scaler: never below --min-loss-scale", "[train][loss_scaler]") {
  LossScaler scaler(dynamic_settings(8.0, 1000, 1, 2.0));
  CHECK_FALSE(scaler.at_minimum());
  CHECK(scales_after(scaler, {true, true, true, true}) == std::vector<float>{4, 2, 2, 2});
  CHECK(scaler.at_minimum());
  // A minimum that is not a power of two is reached exactly.
  LossScaler odd(dynamic_settings(100.0, 1000, 1, 30.0));
  CHECK(scales_after(odd, {true, true, true}) == std::vector<float>{50, 30, 30});
}

TEST_CASE("loss scaler: the scale is an fp32 value, as Megatron's tensor", "[train][loss_scaler]") {
  LossScaler scaler(dynamic_settings(0.1, 1, 1, 0.01));
  CHECK(scaler.scale() == 0.1f);
  CHECK(scaler.inverse_scale() == static_cast<float>(1.0 / static_cast<double>(0.1f)));
  scaler.update(false);
  CHECK(scaler.scale() == 0.2f);
}

TEST_CASE("loss scaler: a constant scale never changes", "[train][loss_scaler]") {
  LossScalerSettings s;
  s.constant_scale = 4096.0;
  LossScaler scaler(s);
  CHECK_FALSE(scaler.dynamic());
  CHECK(scales_after(scaler, {true, true, true, false}) == std::vector<float>{4096, 4096, 4096, 4096});
  // Megatron's ConstantGradScaler loads nothing: the flag's scale stays.
  scaler.load_state({8.0f, 3, 1});
  CHECK(scaler.scale() == 4096.0f);
}

TEST_CASE("loss scaler: the state round-trips through its checkpoint JSON", "[train][loss_scaler]") {
  LossScaler scaler(dynamic_settings(3.0e38, 5, 3));
  scales_after(scaler, {true, false, false});
  const std::string json = loss_scaler_state_json(scaler.state());
  CHECK(json == "{\"scale\": 3.0000000054977558e+38, \"growth_tracker\": 2, \"hysteresis_tracker\": 2}");
  LossScaler restored(dynamic_settings(1.0, 5, 3));
  restored.load_state(parse_loss_scaler_state_json(json, "test"));
  CHECK(restored.scale() == scaler.scale());
  CHECK(restored.state().growth_tracker == 2);
  CHECK(restored.state().hysteresis_tracker == 2);
  CHECK_THROWS_WITH(parse_loss_scaler_state_json("{\"scale\": 2.0}", "ckpt: grad_scaler"),
                    Catch::Contains("growth_tracker"));
}

TEST_CASE("loss scaler: which runs scale the loss (Megatron's get_megatron_optimizer)", "[train][loss_scaler]") {
  OptimizationOptions o;
  CHECK_FALSE(loss_scaler_settings(o, false));
  o.loss_scale = 4096.0;
  CHECK_FALSE(loss_scaler_settings(o, false));  // the fp32 optimizer has no scaler
  CHECK(loss_scaler_settings(o, true)->constant_scale == 4096.0);
  o.precision = Precision::Bf16;
  CHECK(loss_scaler_settings(o, false)->constant_scale == 4096.0);
  o.loss_scale.reset();
  CHECK_FALSE(loss_scaler_settings(o, true));  // bf16 without --loss-scale: none
  o.precision = Precision::Fp16;
  o.initial_loss_scale = 65536.0;
  o.min_loss_scale = 2.0;
  o.loss_scale_window = 10;
  o.hysteresis = 3;
  const auto s = loss_scaler_settings(o, false);
  REQUIRE(s);
  CHECK_FALSE(s->constant_scale);
  CHECK(s->initial_scale == 65536.0);
  CHECK(s->min_scale == 2.0);
  CHECK(s->window == 10);
  CHECK(s->hysteresis == 3);
}
