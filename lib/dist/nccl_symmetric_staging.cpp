#include "dist/nccl_symmetric_staging.hpp"

#include <dlfcn.h>

#include <string>

#include "core/error.hpp"
#include "dist/nccl_check.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/rank_chunk_sum.hpp"

namespace mgt::dist {
namespace {

std::string loaded_version() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess) return "of unknown version";
  // NCCL_VERSION(X, Y, Z) = X * 10000 + Y * 100 + Z from 2.9 on.
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
}

}  // namespace

bool NcclSymmetricStaging::reduces(ncclDataType_t type, ncclRedOp_t op) {
  return op == ncclSum && (type == ncclFloat32 || type == ncclBfloat16 || type == ncclFloat16);
}

#if defined(NCCL_WIN_COLL_SYMMETRIC) && defined(NCCL_CTA_POLICY_ZERO)

namespace {

// NCCL 2.28's entry points, looked up once (require_supported() checks them).
struct WindowApi {
  template <class F>
  static F entry(const char* name) {
    return reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
  }
  decltype(&ncclMemAlloc) mem_alloc = entry<decltype(&ncclMemAlloc)>("ncclMemAlloc");
  decltype(&ncclMemFree) mem_free = entry<decltype(&ncclMemFree)>("ncclMemFree");
  decltype(&ncclCommWindowRegister) register_window =
      entry<decltype(&ncclCommWindowRegister)>("ncclCommWindowRegister");
  decltype(&ncclCommWindowDeregister) deregister_window =
      entry<decltype(&ncclCommWindowDeregister)>("ncclCommWindowDeregister");
  decltype(&ncclAlltoAll) all_to_all = entry<decltype(&ncclAlltoAll)>("ncclAlltoAll");

  bool complete() const { return mem_alloc && mem_free && register_window && deregister_window && all_to_all; }
};

const WindowApi& api() {
  static const WindowApi loaded;
  return loaded;
}

}  // namespace

void NcclSymmetricStaging::configure(ncclConfig_t& config) { config.CTAPolicy = NCCL_CTA_POLICY_ZERO; }

void NcclSymmetricStaging::require_supported() {
  int code = 0;
  MGT_NCCL_CHECK(ncclGetVersion(&code));
  if (code < 22800 || !api().complete())
    throw Error("copy-engine collectives (MGT_NCCL_COPY_ENGINE=1) need NCCL 2.28 or later; this process loaded NCCL " +
                loaded_version());
}

NcclSymmetricStaging::~NcclSymmetricStaging() {
  // The windows went with the communicator (deregistering is collective, and a rank unwinding
  // from an error must not wait for the others); the memory is this rank's own to free.
  if (capacity_ == 0) return;
  cudaDeviceSynchronize();
  for (void* buffer : {send_, recv_}) api().mem_free(buffer);
}

// Deregisters (collectively: every rank grows at the same call) and frees the windows.
void NcclSymmetricStaging::release() {
  for (void* window : {send_window_, recv_window_})
    if (window) MGT_NCCL_CHECK(api().deregister_window(comm_, static_cast<ncclWindow_t>(window)));
  for (void* buffer : {send_, recv_})
    if (buffer) MGT_NCCL_CHECK(api().mem_free(buffer));
  send_ = recv_ = send_window_ = recv_window_ = nullptr;
  capacity_ = 0;
}

void NcclSymmetricStaging::reserve(std::size_t bytes) {
  if (bytes <= capacity_) return;
  // Work queued on any stream may still read the old windows.
  MGT_CUDA_CHECK(cudaDeviceSynchronize());
  release();
  // Twice what is asked, so that a few growing sizes at the start do not each re-register.
  const std::size_t capacity = 2 * bytes;
  const std::size_t window = capacity * static_cast<std::size_t>(ranks_);
  MGT_NCCL_CHECK(api().mem_alloc(&send_, window));
  MGT_NCCL_CHECK(api().mem_alloc(&recv_, window));
  ncclWindow_t send_window = nullptr, recv_window = nullptr;
  MGT_NCCL_CHECK(api().register_window(comm_, send_, window, &send_window, NCCL_WIN_COLL_SYMMETRIC));
  send_window_ = send_window;
  MGT_NCCL_CHECK(api().register_window(comm_, recv_, window, &recv_window, NCCL_WIN_COLL_SYMMETRIC));
  recv_window_ = recv_window;
  capacity_ = capacity;
}

void NcclSymmetricStaging::all_gather(const void* in, void* out, std::size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return;
  reserve(bytes);
  MGT_CUDA_CHECK(cudaMemcpyAsync(send_, in, bytes, cudaMemcpyDeviceToDevice, stream));
  MGT_NCCL_CHECK(ncclAllGather(send_, recv_, bytes, ncclInt8, comm_, stream));
  // The receive window holds each rank's part at a stride of `bytes`: the parts are contiguous.
  MGT_CUDA_CHECK(cudaMemcpyAsync(out, recv_, bytes * static_cast<std::size_t>(ranks_), cudaMemcpyDeviceToDevice,
                                 stream));
}

void NcclSymmetricStaging::reduce_scatter(const void* in, void* out, std::size_t count, ncclDataType_t type,
                                          cudaStream_t stream) {
  if (count == 0) return;
  if (!reduces(type, ncclSum)) throw Error("copy-engine reduce-scatter: only sums of fp32, bf16 or fp16");
  const std::size_t bytes = count * (type == ncclFloat32 ? 4 : 2);
  reserve(bytes);
  MGT_CUDA_CHECK(cudaMemcpyAsync(send_, in, bytes * static_cast<std::size_t>(ranks_), cudaMemcpyDeviceToDevice,
                                 stream));
  // Chunk r of the send window goes to rank r; chunk r of the receive window came from rank r.
  MGT_NCCL_CHECK(api().all_to_all(send_, recv_, count, type, comm_, stream));
  const cuda::ChunkType chunk = type == ncclFloat32    ? cuda::ChunkType::kF32
                                : type == ncclBfloat16 ? cuda::ChunkType::kBf16
                                                       : cuda::ChunkType::kF16;
  cuda::sum_rank_chunks(recv_, ranks_, static_cast<int64_t>(count), chunk, out, stream);
}

#else  // NCCL headers before 2.28: refused when asked for; nothing else is reached.

void NcclSymmetricStaging::configure(ncclConfig_t& /*config*/) {}

void NcclSymmetricStaging::require_supported() {
  throw Error("copy-engine collectives (MGT_NCCL_COPY_ENGINE=1) need NCCL 2.28 or later; this mgt was built with "
              "older NCCL headers and loaded NCCL " + loaded_version());
}

NcclSymmetricStaging::~NcclSymmetricStaging() = default;
void NcclSymmetricStaging::release() {}
void NcclSymmetricStaging::reserve(std::size_t /*bytes*/) {}
void NcclSymmetricStaging::all_gather(const void*, void*, std::size_t, cudaStream_t) { require_supported(); }
void NcclSymmetricStaging::reduce_scatter(const void*, void*, std::size_t, ncclDataType_t, cudaStream_t) {
  require_supported();
}

#endif

}  // namespace mgt::dist
