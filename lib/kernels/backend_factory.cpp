#include "kernels/backend_factory.hpp"

#include <charconv>

#include "core/error.hpp"
#include "kernels/cpu/cpu_backend.hpp"
#include "kernels/cuda_device.hpp"

namespace mgt {
namespace {

// -1: not a CUDA name; otherwise the device index ("cuda" is device 0).
int parse_cuda_index(const std::string& device) {
  if (device == "cuda") return 0;
  if (device.rfind("cuda:", 0) != 0 || device.size() == 5) return -1;
  int index = -1;
  const char* begin = device.data() + 5;
  const char* end = device.data() + device.size();
  const auto [ptr, ec] = std::from_chars(begin, end, index);
  if (ec != std::errc() || ptr != end || index < 0) return -1;
  return index;
}

std::unique_ptr<Backend> make_cpu_backend(const BackendOptions& options) {
  auto backend = std::make_unique<CpuBackend>();
  if (options.profile) backend->start_profile(options.profile_timeline);
  return backend;
}

}  // namespace

void check_device_name(const std::string& device) {
  if (device != "cpu" && device != "auto" && parse_cuda_index(device) < 0) {
    throw UsageError("--device: expected auto, cpu, cuda or cuda:N, got '" + device + "'");
  }
}

std::unique_ptr<Backend> make_backend(const std::string& device, const BackendOptions& options) {
  if (device == "cpu") return make_cpu_backend(options);
  if (device == "auto") {
    if (cuda::visible_device_count() > 0) return make_cuda_backend(0, options);
    return make_cpu_backend(options);
  }
  check_device_name(device);
  const int index = parse_cuda_index(device);
#ifndef MGT_HAVE_CUDA
  return make_cuda_backend(index, options);  // explains that this build has no CUDA
#endif
  const int count = cuda::visible_device_count();
  if (index >= count) {
    throw Error("--device " + device + ": " +
                (count == 0 ? std::string("no CUDA device is visible")
                            : std::to_string(count) + " CUDA device(s) visible"));
  }
  return make_cuda_backend(index, options);
}

}  // namespace mgt
