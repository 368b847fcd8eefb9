// The MoE layer in FP8 on the GPU (each expert's rows padded to 16, so that cuBLASLt's FP8 GEMMs
// take every expert's fc1 and fc2) against the CPU's emulation of the same two training passes
// (tests/model/moe_fp8_testing.hpp): the same routing, and the output, the experts' and shared
// experts' weight gradients and the FP8 scales within the bounds of FP8 GEMMs that accumulate
// differently (the forward's fast accumulation) on random inputs.
#include <catch2/catch.hpp>

#include <cstdio>

#include "../model/moe_fp8_testing.hpp"
#include "backend_pair.hpp"

using namespace mgt;
using namespace mgt::cuda_testing;
using namespace mgt::moe_fp8_testing;

TEST_CASE("cuda moe fp8: the FP8 experts on the GPU match the CPU emulation", "[cuda][moe][fp8]") {
  if (skip_without_gpu()) return;
  BackendPair pair;
  const GptConfig c = fp8_moe_config();
  const Inputs in = make_inputs(c, c.seq_length * 2);
  const Result cpu = run_layer(*pair.cpu, c, in, 2);
  const Result gpu = run_layer(*pair.gpu, c, in, 2);
  REQUIRE(gpu.routing_map == cpu.routing_map);
  GptParameters table(c, *pair.cpu);
  const double output = relative_difference(gpu.output, cpu.output);
  const double grads = relative_difference(expert_grads(table, gpu.grads), expert_grads(table, cpu.grads));
  const double scales = relative_difference(gpu.forward_scale, cpu.forward_scale);
  const double grad_scales = relative_difference(gpu.backward_scale, cpu.backward_scale);
  std::printf("  cuda moe fp8: output rel err %.2e, expert gradients %.2e, forward scales %.2e, backward %.2e\n",
              output, grads, scales, grad_scales);
  CHECK(output < 2e-2);
  CHECK(grads < 5e-2);
  CHECK(scales < 1e-2);
  CHECK(grad_scales < 5e-2);
  // The padded layer on the GPU against its own unpadded per-expert linears there too.
  const Result reference = run_reference(*pair.gpu, c, in, gpu, 2);
  CHECK(relative_difference(gpu.output, reference.output) < 2e-2);
}
