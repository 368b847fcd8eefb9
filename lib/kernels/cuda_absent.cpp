// The CUDA entry points of a build without the CUDA toolkit: no device is ever visible, and
// asking for one says why.
#include "core/error.hpp"
#include "kernels/backend_factory.hpp"
#include "kernels/cuda_device.hpp"

namespace mgt {

namespace cuda {

int visible_device_count() { return 0; }

std::string device_description(int /*device*/) { return "none (built without CUDA)"; }

DeviceMemory device_memory(int /*device*/) { throw Error("this mgt was built without CUDA support"); }

std::string device_uuid(int /*device*/) { throw Error("this mgt was built without CUDA support"); }

}  // namespace cuda

std::unique_ptr<Backend> make_cuda_backend(int /*device*/, const BackendOptions& /*options*/) {
  throw Error("this mgt was built without CUDA support (no nvcc at build time); use --device cpu");
}

}  // namespace mgt
