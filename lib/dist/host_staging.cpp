#include "dist/host_staging.hpp"

namespace mgt::dist {

HostStaging::HostStaging(MemoryMover* mover, const void* data, std::size_t bytes,
                         MemorySpace space, bool load)
    : mover_(space == MemorySpace::Backend && bytes > 0 ? mover : nullptr),
      // The buffer is written back only through RecvBuffer constructors; SendBuffers are read.
      original_(const_cast<void*>(data)),
      bytes_(bytes) {
  if (!mover_) {
    host_ = original_;
    return;
  }
  staging_ = std::make_unique_for_overwrite<std::byte[]>(bytes);
  host_ = staging_.get();
  if (load) mover_->copy_to_host(host_, data, bytes);
}

void HostStaging::store() const {
  if (mover_) mover_->copy_from_host(original_, host_, bytes_);
}

}  // namespace mgt::dist
