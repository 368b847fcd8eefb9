// Chooses a backend by name, so that no code above the kernels layer names a concrete backend.
//   "cpu"            the reference backend (host memory, fp32, OpenBLAS)
//   "cuda", "cuda:N" the CUDA backend on device N (0 by default)
//   "auto"           CUDA device 0 when one is visible, the CPU otherwise
#pragma once
#include <memory>
#include <string>

#include "kernels/backend.hpp"

namespace mgt {

// What a program asks of its backend besides the device, from its flags (mgt-train's --profile
// family; the other programs take the defaults). The library reads no environment variable to
// change a backend's behaviour: everything it is told comes through here.
struct BackendOptions {
  // --profile on this rank: time every operation and print the time per operation family on
  // standard error when the backend is destroyed. Counting starts on; Backend::set_profiling
  // narrows it to a window of steps.
  bool profile = false;
  // --profile-gemms: the CUDA backend prints each GEMM shape it plans and, where it times the
  // algorithms, the fastest one's time (standard error). Nothing on the CPU, which plans none.
  bool profile_gemms = false;
  // --profile-timeline FILE (with `profile`): every counted operation as a line of CSV, written
  // with the table. Empty: none.
  std::string profile_timeline;
};

// Throws a usage error for an unknown name, and mgt::Error when CUDA is asked for but this build
// has no CUDA or the machine no such device.
std::unique_ptr<Backend> make_backend(const std::string& device, const BackendOptions& options = {});

// Checks the syntax of a --device value without creating anything: a usage error naming the flag.
void check_device_name(const std::string& device);

// The CUDA backend on `device`; defined by the CUDA build (or its absence).
std::unique_ptr<Backend> make_cuda_backend(int device, const BackendOptions& options = {});

}  // namespace mgt
