// Backend::side_by_side's contract, through its user: the MoE layer's FP8 experts (each lane
// casting into FP8 scratch of its own) run in any order and on any lanes compute what they
// compute in order on one lane, bit for bit, under delayed and current scaling. On the GPU the
// lanes are streams (tests/cuda/test_cuda_moe_fp8.cpp runs them there against the CPU).
#include <catch2/catch.hpp>

#include <functional>
#include <span>

#include "../model/moe_fp8_testing.hpp"
#include "kernels/backend_factory.hpp"
#include "kernels/cpu/cpu_backend.hpp"

using namespace mgt;
using namespace mgt::moe_fp8_testing;

namespace {

// A CPU backend whose side_by_side runs the items last first, each on a lane of its own
// (1, 2, 3, 1, ...): the FP8 experts must not depend on the order or share a lane's scratch.
class ReorderingCpuBackend : public CpuBackend {
public:
  void side_by_side(std::span<const int64_t> weight, const std::function<void(int64_t, int64_t)>& f) override {
    for (std::size_t i = weight.size(); i-- > 0;)
      if (weight[i] > 0) f(static_cast<int64_t>(i % 3 + 1), static_cast<int64_t>(i));
  }
  int64_t side_by_side_lanes() const override { return 4; }
};

}  // namespace

TEST_CASE("moe fp8: the experts side by side, in any order and lane, compute what in order does",
          "[model][moe][fp8]") {
  ReorderingCpuBackend reordering;
  const std::unique_ptr<Backend> plain = make_backend("cpu");
  for (const bool current : {false, true}) {
    GptConfig c = fp8_moe_config();
    c.fp8->current_scaling = current;  // the tensorwise recipe's amaxes and scales are per lane too
    const Inputs in = make_inputs(c, c.seq_length * 2);
    const Result want = run_layer(*plain, c, in, 2);
    const Result got = run_layer(reordering, c, in, 2);
    CHECK(got.output == want.output);
    CHECK(got.grads == want.grads);
    CHECK(got.forward_history == want.forward_history);
    CHECK(got.backward_history == want.backward_history);
    CHECK(got.forward_scale == want.forward_scale);
  }
}
