// All-gathers and reduce-scatters that move their data with the GPU's copy engines instead of
// kernels on the multiprocessors.
//
// On H200s, GEMMs running beside an NCCL collective lose about a third of their rate (PyTorch's
// own: BENCHMARKS.md, "Several GPUs", 2026-11-27), and capping NCCL's thread blocks only made
// the collectives longer, not the compute faster: what fits is a cost in multiprocessor time per
// byte moved, whatever the blocks. From NCCL 2.28, a communicator made with the zero-CTA policy
// runs an all-gather or an all-to-all on the copy engines (NCCL's ncclCeAllGather and kin) when
// its ranks share one node and both of its buffers lie in symmetric windows: memory from
// ncclMemAlloc, registered by every rank with ncclCommWindowRegister(NCCL_WIN_COLL_SYMMETRIC) at
// the same offsets. Not yet measured against the kernels.
//
// The caller's buffers are not in such windows. Each all-gather copies this rank's part into a
// send window, gathers into a receive window, and copies the whole out (cudaMemcpyAsync, the copy
// engines again). A reduce-scatter (a sum of fp32, bf16 or fp16) copies the whole in, exchanges
// the chunks with an all-to-all (on the copy engines likewise), and sums the ranks' chunks for its
// own part with one small kernel (kernels/cuda/rank_chunk_sum.hpp). The two windows are this
// communicator's alone, so the offsets are the same on every rank by construction; they grow to
// the largest operation seen, which every rank meets at the same call.
//
// The NCCL 2.28 entry points are looked up at run time (dlsym), so that a process that loaded an
// older NCCL fails with a message naming its version rather than at load.
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>

namespace mgt::dist {

class NcclSymmetricStaging {
public:
  // Throws mgt::Error, naming the version, where the loaded NCCL (or the headers built against)
  // is older than 2.28. Call before making the communicator.
  static void require_supported();
  // Sets the zero-CTA policy in a communicator's configuration.
  static void configure(ncclConfig_t& config);

  // `comm` must have been made with configure()'s policy and outlive this.
  NcclSymmetricStaging(ncclComm_t comm, int ranks) : comm_(comm), ranks_(ranks) {}
  NcclSymmetricStaging(const NcclSymmetricStaging&) = delete;
  NcclSymmetricStaging& operator=(const NcclSymmetricStaging&) = delete;
  // Frees the memory; destroy the communicator first (its windows go with it).
  ~NcclSymmetricStaging();

  // Queues on `stream`: out = the ranks' `in` (bytes each), in rank order. Growing the windows
  // waits for the whole device first (the old windows may still be read), and is collective.
  void all_gather(const void* in, void* out, std::size_t bytes, cudaStream_t stream);

  // Whether reduce_scatter() takes this element type and operation.
  static bool reduces(ncclDataType_t type, ncclRedOp_t op);
  // Queues on `stream`: out[count] = Σ over the ranks of their in[rank · count + i], the ranks in
  // order. Growing the windows as for all_gather().
  void reduce_scatter(const void* in, void* out, std::size_t count, ncclDataType_t type, cudaStream_t stream);

private:
  void reserve(std::size_t bytes);
  void release();

  ncclComm_t comm_;
  int ranks_;
  std::size_t capacity_ = 0;  // bytes per rank's part; each window holds ranks_ of them
  void* send_ = nullptr;
  void* recv_ = nullptr;
  void* send_window_ = nullptr;  // ncclWindow_t, opaque
  void* recv_window_ = nullptr;
};

}  // namespace mgt::dist
