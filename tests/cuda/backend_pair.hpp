// Runs the same Backend operation on the CPU reference and on the CUDA backend, on the same random
// inputs, and compares the results with a relative bound: max |gpu − cpu| / max |cpu|.
#pragma once
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernels/backend_factory.hpp"
#include "kernels/cuda_device.hpp"
#include "../kernels/kernel_testing.hpp"
#include "skipped_tests.hpp"

namespace mgt::cuda_testing {

// True, with the test case marked skipped, when no CUDA device is visible: the caller returns.
inline bool skip_without_gpu() {
  if (cuda::visible_device_count() > 0) return false;
  testing::skip_test("no CUDA device visible");
  return true;
}

enum class Side { kCpu, kGpu };

struct BackendPair {
  std::unique_ptr<Backend> cpu = make_backend("cpu");
  std::unique_ptr<Backend> gpu = make_backend("cuda");
  Backend& on(Side side) { return side == Side::kCpu ? *cpu : *gpu; }
};

// One tensor held by both backends.
template <typename T>
struct Twin {
  DeviceArray<T> cpu;
  DeviceArray<T> gpu;
  DeviceSpan<T> operator()(Side side) { return side == Side::kCpu ? cpu.view() : gpu.view(); }
  int64_t size() const { return cpu.size(); }
};

template <typename T>
Twin<T> twin(BackendPair& pair, const std::vector<T>& values) {
  Twin<T> t{DeviceArray<T>(*pair.cpu, static_cast<int64_t>(values.size())),
            DeviceArray<T>(*pair.gpu, static_cast<int64_t>(values.size()))};
  pair.cpu->copy_from_host<T>(values, t.cpu.view());
  pair.gpu->copy_from_host<T>(values, t.gpu.view());
  return t;
}

// One floating-point tensor held by both backends, of one storage type on both.
struct FloatTwin {
  DeviceBuffer cpu;
  DeviceBuffer gpu;
  FloatView operator()(Side side) { return side == Side::kCpu ? cpu.view() : gpu.view(); }
  int64_t size() const { return cpu.size(); }
};

inline FloatTwin twin(BackendPair& pair, const std::vector<float>& values,
                      FloatType type = FloatType::kF32) {
  const auto n = static_cast<int64_t>(values.size());
  FloatTwin t{DeviceBuffer(*pair.cpu, n, type), DeviceBuffer(*pair.gpu, n, type)};
  pair.cpu->copy_from_host(values, t.cpu.view());
  pair.gpu->copy_from_host(values, t.gpu.view());
  return t;
}

inline FloatTwin random_twin(BackendPair& pair, int64_t n, uint32_t seed, float lo = -1.0f,
                             float hi = 1.0f, FloatType type = FloatType::kF32) {
  return twin(pair, kernel_testing::random_floats(static_cast<size_t>(n), seed, lo, hi), type);
}

template <typename T>
std::vector<T> to_host(Backend& backend, DeviceSpan<T> view) {
  std::vector<T> out(static_cast<size_t>(view.size()));
  backend.copy_to_host(DeviceSpan<const T>(view), std::span<T>(out));
  return out;
}

inline std::vector<float> to_host(Backend& backend, ConstFloatView view) {
  std::vector<float> out(static_cast<size_t>(view.size()));
  backend.copy_to_host(view, std::span<float>(out));
  return out;
}

// max |gpu − cpu| / max |cpu|; the reference must not be all zeros.
inline double relative_error(const std::vector<float>& cpu, const std::vector<float>& gpu) {
  REQUIRE(cpu.size() == gpu.size());
  double scale = 0.0;
  double diff = 0.0;
  for (size_t i = 0; i < cpu.size(); ++i) {
    scale = std::max(scale, static_cast<double>(std::fabs(cpu[i])));
    const double d = std::fabs(static_cast<double>(cpu[i]) - gpu[i]);
    diff = std::isnan(d) ? INFINITY : std::max(diff, d);
  }
  REQUIRE(scale > 0.0);
  return diff / scale;
}

inline void check_close(BackendPair& pair, FloatTwin& t, double bound, const std::string& what) {
  const double err = relative_error(to_host(*pair.cpu, t.cpu.view()), to_host(*pair.gpu, t.gpu.view()));
  INFO(what << ": relative error " << err << " (bound " << bound << ")");
  CHECK(err <= bound);
}

}  // namespace mgt::cuda_testing
