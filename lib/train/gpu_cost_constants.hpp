// The constants of the layout planner's cost model (train/step_cost_model.hpp), one table per GPU
// kind, each figure with where it comes from: the GPU's data sheet for peaks, mgt's own
// measurements (BENCHMARKS.md) for the rates its kernels and collectives reach.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace mgt {

struct GpuCostConstants {
  std::string_view key;   // --planner-gpu's name: "h100"
  std::string_view name;  // "H100 80GB"
  std::int64_t memory_bytes = 0;  // the total CUDA reports (cudaMemGetInfo)
  double dense_bf16_flops = 0;    // tensor-core peak, dense bf16, FLOP/s
  double hbm_bytes_per_s = 0;     // memory bandwidth, data sheet
  // Shares of the peaks mgt's kernels reach (fitted; the sources below).
  double gemm_efficiency = 0;         // bf16 GEMMs of the linear layers, of dense_bf16_flops
  double attention_efficiency = 0;   // flash attention forward and backward, of dense_bf16_flops
  double elementwise_efficiency = 0; // memory-bound passes (norms, activations, AdamW), of HBM
  double fp8_gemm_speedup = 0;       // bf16 GEMM time / FP8 GEMM time
  double fp8_cast_bytes_per_width = 0;  // bytes cast per token per linear input/output width
  double fp8_cast_efficiency = 0;       // the casts' share of HBM bandwidth
  // Per direction between GPUs of one node: tensor-parallel all-gathers / reduce-scatters of a
  // layer's activations (tens of MiB: NCCL's bus bandwidth there), and bulk transfers (gradient
  // buckets, pipeline and ring sends).
  double tensor_parallel_bytes_per_s = 0;
  double link_bytes_per_s = 0;
  // Under --overlap-grad-reduce: the data-parallel reduction's rate beside computation, and the
  // share of it left exposed however long the backward beside it.
  double overlapped_reduction_bytes_per_s = 0;
  double overlapped_reduction_exposed = 0;
  // Context parallelism's ring: its bytes per second of exposed time (what attention does not
  // hide, as a rate).
  double context_parallel_exposed_bytes_per_s = 0;
  // A mixture of experts: the rows per expert at which the routed experts' GEMMs run at half the
  // dense layers' rate (at r rows: r / (r + this)), and the all-to-alls' bytes per second (each
  // rank's bytes to the others, waits for them included).
  double grouped_gemm_half_rate_rows = 0;
  double expert_parallel_bytes_per_s = 0;
  std::string_view source;  // where the figures come from, for --dry-run's JSON
};

// H100 80GB and H200 141GB (SXM, NVLink 4).
std::span<const GpuCostConstants> gpu_cost_tables();

// The table of --planner-gpu's KIND ("h100", "h200"); nullopt for another name.
std::optional<GpuCostConstants> find_gpu_cost_constants(std::string_view key);

// The table for a visible device by its name ("NVIDIA H200" → h200); another GPU gets H100's
// constants (the planner says so), which is what `matched` reports.
GpuCostConstants gpu_cost_constants_for_device(std::string_view device_name, bool* matched = nullptr);

}  // namespace mgt
