// A collective started by one of Communicator's start_* calls and not yet waited for: Megatron's
// async_op handles (megatron/core/distributed/param_and_grad_buffer.py), which let a bucket's
// gradient reduction run while the backward computes the next bucket's gradients.
//
// Until wait() returns, the buffer belongs to the transport: the caller neither reads nor writes
// it. The collective watchdog watches the operation from its start until the wait ends, so a peer
// that never starts its half still ends the job. Dropping a pending collective without waiting
// waits for it (a transport must not write into memory its owner has freed).
#pragma once
#include <memory>
#include <optional>

#include "dist/collective_watchdog.hpp"

namespace mgt::dist {

// A transport's operation in flight.
class PendingTransfer {
public:
  PendingTransfer() = default;
  PendingTransfer(const PendingTransfer&) = delete;
  PendingTransfer& operator=(const PendingTransfer&) = delete;
  virtual ~PendingTransfer() = default;
  // Returns once the operation is complete (for a backend's buffers: in the sense of
  // communicator.hpp, ordered before the backend's later work); failures throw mgt::Error.
  virtual void wait() = 0;
};

class PendingCollective {
public:
  // Complete already.
  PendingCollective() = default;
  // `transfer` null: the transport finished the operation inside the start call.
  PendingCollective(std::unique_ptr<PendingTransfer> transfer,
                    std::optional<CollectiveWatchdog::Scope> watch)
      : transfer_(std::move(transfer)), watch_(std::move(watch)) {
    if (!transfer_) watch_.reset();
  }
  PendingCollective(PendingCollective&&) noexcept = default;
  PendingCollective& operator=(PendingCollective&& other) noexcept {
    if (this != &other) {
      finish_quietly();
      transfer_ = std::move(other.transfer_);
      // A watchdog scope moves but does not assign.
      watch_.reset();
      if (other.watch_) watch_.emplace(std::move(*other.watch_));
      other.watch_.reset();
    }
    return *this;
  }
  ~PendingCollective() { finish_quietly(); }

  bool pending() const { return transfer_ != nullptr; }
  // Waits for the operation (nothing to do once complete).
  void wait() {
    if (!transfer_) return;
    std::unique_ptr<PendingTransfer> transfer = std::move(transfer_);
    transfer->wait();
    watch_.reset();
  }

private:
  void finish_quietly() noexcept {
    try {
      wait();
    } catch (...) {
      // A destructor cannot report it; the error that unwound past the owner is the one to see.
    }
    watch_.reset();
  }

  std::unique_ptr<PendingTransfer> transfer_;
  std::optional<CollectiveWatchdog::Scope> watch_;
};

}  // namespace mgt::dist
