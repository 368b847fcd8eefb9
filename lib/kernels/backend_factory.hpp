// Chooses a backend by name, so that no code above the kernels layer names a concrete backend.
//   "cpu"            the reference backend (host memory, fp32, OpenBLAS)
//   "cuda", "cuda:N" the CUDA backend on device N (0 by default)
//   "auto"           CUDA device 0 when one is visible, the CPU otherwise
#pragma once
#include <memory>
#include <string>

#include "kernels/backend.hpp"

namespace mgt {

// Throws a usage error for an unknown name, and mgt::Error when CUDA is asked for but this build
// has no CUDA or the machine no such device.
std::unique_ptr<Backend> make_backend(const std::string& device);

// Checks the syntax of a --device value without creating anything: a usage error naming the flag.
void check_device_name(const std::string& device);

// The CUDA backend on `device`; defined by the CUDA build (or its absence).
std::unique_ptr<Backend> make_cuda_backend(int device);

}  // namespace mgt
