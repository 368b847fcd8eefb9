// Which GPU the layout planner plans for, and how much of its memory: the visible GPU with
// --device cuda (or auto), else (a login node) an H100 80GB, unless --planner-gpu or
// --planner-gpu-memory name another.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "train/gpu_cost_constants.hpp"
#include "train/planner_options.hpp"

namespace mgt {

// The share of each GPU's memory the planner leaves free: the CUDA context, the allocator's
// fragmentation and the communication libraries' buffers are not in the estimate.
inline constexpr double kPlannerMemoryMargin = 0.10;

struct PlannerTarget {
  GpuCostConstants gpu;
  std::int64_t memory_bytes = 0;  // each GPU's
  std::int64_t budget_bytes = 0;  // memory_bytes less the margin: what a layout may take per rank
  std::string description;        // "NVIDIA H200 (visible GPU 0), 139.8 GiB, cost constants of H200 141GB"
};

// A visible device's name and total memory (kernels/cuda_device.hpp's device_memory), or nullopt
// when none is visible.
struct VisibleGpu {
  std::string name;
  std::int64_t total_bytes = 0;
  int index = 0;
};
using VisibleGpuQuery = std::function<std::optional<VisibleGpu>()>;

// The GPU of --device (cuda:N: N; cuda, auto: 0) when one is visible; nullopt with --device cpu.
std::optional<VisibleGpu> query_visible_gpu(const std::string& device);

PlannerTarget choose_planner_target(const PlannerOptions& options, const std::optional<VisibleGpu>& visible);

}  // namespace mgt
