#include "train/gpu_cost_constants.hpp"

#include <array>

namespace mgt {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// What is common to both kinds: the same Hopper tensor cores (989 TFLOP/s dense bf16) and NVLink
// 4, and the shares mgt's kernels reach, measured on H100 and H200 alike (BENCHMARKS.md):
//  - GEMMs 0.70: GPT 1.3B, micro-batch 4 × 2048 tokens on one H200, --profile: the transformer
//    layers' GEMMs took 85 ms of a 133.5 ms iteration for 5.9e13 FLOPs, 699 TFLOP/s.
//  - attention 0.50, memory-bound passes 0.60 of HBM, tensor-parallel collectives 180 GB/s:
//    fitted so that the model gives the measured steps of GPT 1.3B on one H200 (61,853 tokens/s,
//    53% of the dense peak by Megatron's FLOP formula; the model: 59,812) and of the Llama 3 8B
//    shape (seq 8192, micro-batch 1, global batch 8) on 4 × H200: TP=4 with sequence parallelism
//    and the distributed optimizer 8,092 tokens/s per GPU (the model: 7,989), TP=2 × PP=2 with
//    sequence parallelism 8,645 (the model: 8,627). On one H100 the 1.3B step measured 58,334
//    (the model, with the H100's lower HBM bandwidth: 54,028, 7% under). The interleaved
//    schedule needed nothing more: PP=4 at the 8B shape measured 2.17 s a step, 1.97 s with two
//    chunks per GPU (the model: 2.28 and 1.98). AdamW alone, 1.3B parameters in 12.0 ms on
//    one H200, is 68% of HBM; the tensor-parallel all-gathers and reduce-scatters of 32 MiB alone
//    reached 134–138 GB/s bus bandwidth between two H200s.
//  - FP8: its GEMMs 1.9× faster than bf16's and its casts 20.2 ms of the 1.3B step (15% of bf16's
//    133.5 ms) at about 40% of HBM bandwidth: 6.0 bytes per token per unit of linear input and
//    output width (the model: 70,336 tokens/s at 1.3B against 70,612 measured).
//  - links 350 GB/s per direction: NCCL's all-reduce of the 1.3B fp32 gradient reached 343 GB/s,
//    copy-engine copies between two H200s 372–393 GB/s.
//  - the data-parallel reduction overlapped with the backward (--overlap-grad-reduce, and
//    --overlap-param-gather with the distributed optimizer) costs at least 10% of its time: DP=4
//    at 98.2–98.8% of one GPU's rate at 1.3B, a 17 ms reduction on a 133 ms step. Beside the
//    computation it runs at 67 GB/s: CP=4 at the 8B shape, the distributed optimizer's
//    reduce-scatter of 24 GB took 362 ms per step by CUDA events (211 ms of it after the
//    backward), its gather 128 ms (7 exposed).
//  - context parallelism's ring: what attention does not hide of it took the time of its bytes at
//    210 GB/s in all three runs measured (GPT 1.3B CP=2 at 32k: 41 ms exposed, CP=4 at 64k: 112 ms;
//    the 8B shape CP=4 at 8k: 102 ms per step); with it the steps come out 2–8% under those
//    measured (0.675, 1.065 and 2.03 s).
//  - a mixture of experts (tools/gpu/moe_speed.sh's model: 8 experts of 5632, top-2, sequence
//    4096, on H200s): the routed experts' GEMMs at r / (r + 256) of the dense rate for r rows per
//    expert, and the all-to-alls at 130 GB/s, give one GPU 2.48 s a step (2.65 measured; the
//    dense equivalent 2.07 against 2.23), EP=2 2.57 (2.85) and EP=4 2.61 (2.83, its all-to-alls
//    374 ms by CUDA events against the model's 397): within the 7–10% the dense steps of that
//    shape are estimated short. The grouped GEMMs' own rates alone: 500–730 TFLOP/s at 1,000 rows
//    per expert, the weight gradients slowest.
constexpr GpuCostConstants hopper(std::string_view key, std::string_view name, double memory_gib, double hbm,
                                  std::string_view source) {
  GpuCostConstants c;
  c.key = key;
  c.name = name;
  c.memory_bytes = static_cast<std::int64_t>(memory_gib * kGiB);
  c.dense_bf16_flops = 989e12;
  c.hbm_bytes_per_s = hbm;
  c.gemm_efficiency = 0.70;
  c.attention_efficiency = 0.50;
  c.elementwise_efficiency = 0.60;
  c.fp8_gemm_speedup = 1.9;
  c.fp8_cast_bytes_per_width = 6.0;
  c.fp8_cast_efficiency = 0.40;
  c.tensor_parallel_bytes_per_s = 180e9;
  c.link_bytes_per_s = 350e9;
  c.overlapped_reduction_bytes_per_s = 67e9;
  c.overlapped_reduction_exposed = 0.10;
  c.context_parallel_exposed_bytes_per_s = 210e9;
  c.grouped_gemm_half_rate_rows = 256;
  c.expert_parallel_bytes_per_s = 130e9;
  c.source = source;
  return c;
}

// Memory: the total cudaMemGetInfo reports (an H200: 150,109,880,320 bytes, 139.8 GiB; an H100
// 80GB HBM3: 79.1 GiB). HBM: data sheets (H100 SXM 3.35 TB/s, H200 4.8 TB/s).
const std::array<GpuCostConstants, 2> kTables = {
    hopper("h100", "H100 80GB", 79.1, 3.35e12,
           "H100 SXM data sheet (989 TFLOP/s dense bf16, 3.35 TB/s); kernel and link rates measured by mgt on "
           "H100 and H200 (BENCHMARKS.md: GPT 1.3B on one GPU, the Llama 3 8B shape on 4 x H200)"),
    hopper("h200", "H200 141GB", 139.8, 4.8e12,
           "H200 SXM data sheet (989 TFLOP/s dense bf16, 4.8 TB/s); kernel and link rates measured by mgt on "
           "H200 (BENCHMARKS.md: GPT 1.3B on one GPU, the Llama 3 8B shape on 4 x H200)"),
};

}  // namespace

std::span<const GpuCostConstants> gpu_cost_tables() { return kTables; }

std::optional<GpuCostConstants> find_gpu_cost_constants(std::string_view key) {
  for (const GpuCostConstants& c : kTables)
    if (c.key == key) return c;
  return std::nullopt;
}

GpuCostConstants gpu_cost_constants_for_device(std::string_view device_name, bool* matched) {
  const bool h200 = device_name.find("H200") != std::string_view::npos;
  const bool h100 = device_name.find("H100") != std::string_view::npos;
  if (matched) *matched = h200 || h100;
  return kTables[h200 ? 1 : 0];
}

}  // namespace mgt
