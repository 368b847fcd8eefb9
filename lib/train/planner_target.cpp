#include "train/planner_target.hpp"

#include <cmath>
#include <exception>
#include <string>

#include "core/available_memory.hpp"
#include "core/error.hpp"
#include "kernels/cuda_device.hpp"

namespace mgt {

std::optional<VisibleGpu> query_visible_gpu(const std::string& device) {
  if (device == "cpu") return std::nullopt;
  const int count = cuda::visible_device_count();
  int index = 0;
  if (device.rfind("cuda:", 0) == 0) {
    try {
      index = std::stoi(device.substr(5));
    } catch (const std::exception&) {
      return std::nullopt;  // the backend factory says what is wrong with the name
    }
  }
  if (count <= index) return std::nullopt;
  const cuda::DeviceMemory memory = cuda::device_memory(index);
  return VisibleGpu{memory.name, memory.total_bytes, index};
}

PlannerTarget choose_planner_target(const PlannerOptions& options, const std::optional<VisibleGpu>& visible) {
  PlannerTarget target;
  std::string what;
  if (options.gpu) {
    const std::optional<GpuCostConstants> named = find_gpu_cost_constants(*options.gpu);
    if (!named) throw UsageError("--planner-gpu: expected h100 or h200, got '" + *options.gpu + "'");
    target.gpu = *named;
    target.memory_bytes = named->memory_bytes;
    what = std::string(named->name) + " (--planner-gpu " + *options.gpu + ")";
  } else if (visible) {
    bool matched = false;
    target.gpu = gpu_cost_constants_for_device(visible->name, &matched);
    target.memory_bytes = visible->total_bytes;
    what = visible->name + " (visible GPU " + std::to_string(visible->index) + ")" +
           (matched ? "" : ", no cost table of its own: " + std::string(target.gpu.name) + "'s constants");
  } else {
    target.gpu = *find_gpu_cost_constants("h100");
    target.memory_bytes = target.gpu.memory_bytes;
    what = std::string(target.gpu.name) + " (no GPU visible: the default)";
  }
  if (options.gpu_memory_gib) {
    target.memory_bytes = static_cast<std::int64_t>(std::llround(*options.gpu_memory_gib * 1024.0 * 1024.0 * 1024.0));
    what += ", memory from --planner-gpu-memory";
  }
  target.budget_bytes = static_cast<std::int64_t>(static_cast<double>(target.memory_bytes) * (1 - kPlannerMemoryMargin));
  target.description = what + ": " + format_bytes(static_cast<double>(target.memory_bytes)) + " per GPU, " +
                       format_bytes(static_cast<double>(target.budget_bytes)) + " planned for (" +
                       std::to_string(static_cast<int>(kPlannerMemoryMargin * 100)) + "% kept free)";
  return target;
}

}  // namespace mgt
