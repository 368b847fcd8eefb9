// The NCCL communicator's collectives over registered buffers (Communicator::register_buffer: the
// gradients and the weights; under sequence parallelism the whole-sequence activations) when its
// ranks share one node: the bytes move on the GPUs' copy engines, reading the peers' buffers
// directly (CUDA IPC), instead of in NCCL's kernels.
//
// Why: a GEMM running beside an NCCL kernel loses about a third of its rate (BENCHMARKS.md,
// "Several GPUs"). The data-parallel reduction of the gradients runs beside the whole backward,
// and sequence parallelism's all-gathers and reduce-scatters beside the GEMMs of every layer. A
// copy engine needs no multiprocessor; only the additions of a reduction run as a kernel, one
// pass over this rank's share.
//
// How the ranks keep in step without the host: each rank holds one word per peer, which that
// peer writes through its mapping (cuStreamWriteValue64) and this rank's stream waits on
// (cuStreamWaitValue64; the GPU's front end executes both, no multiprocessor waits). A barrier
// writes the next sequence number to every peer and waits until every peer has written it here.
// Every operation of one communicator runs on one stream, so the numbers only rise.
//
// all_reduce_sum: a barrier (every rank's data is final); each rank sums its own chunk, copying
// the peers' copies of it into a scratch piece by piece (the sum of one piece on a stream of its
// own while the next piece is copied, two scratch slots per peer) and copying each summed piece
// out to every peer's buffer (a third stream: the links carry both directions at once); a
// barrier (every chunk summed and everywhere; nobody reads this rank's buffer any more, so it may
// be written after the operation). Each element is summed by the rank that owns
// it, in rank order r = 0, 1, … in fp32: every rank ends with the same bits, and with two ranks
// the same bits as NCCL's sum. With more than two ranks the copies from (and to) the different
// peers run at once, each peer's on a stream of its own: one copy engine moves one copy at a
// time, and a GPU has several. reduce_scatter_chunks_sum: the same without the copies out
// (reduce_scatter_sum: the sums into another buffer). all_gather_chunks: a barrier, the copies
// in, a barrier. fetch (a two-rank swap): a barrier, the copy of the peer's part, a barrier.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "dist/communicator.hpp"

namespace mgt::dist {

class PeerCopyCollectives {
public:
  // Collective over `bootstrap` (host memory; its ranks are the communicator's). Null on every
  // rank unless `wanted` on every rank, all ranks run on one node (`one_node`, alike on every
  // rank: node_membership.hpp), there are at most 8 of them, and every rank can map the others'
  // memory.
  static std::unique_ptr<PeerCopyCollectives> create(Communicator& bootstrap, int device, bool wanted, bool one_node);

  PeerCopyCollectives(const PeerCopyCollectives&) = delete;
  PeerCopyCollectives& operator=(const PeerCopyCollectives&) = delete;
  // Unmaps the peers' memory and frees this rank's; the caller has drained the stream.
  ~PeerCopyCollectives();

  // Collective over `group` (the communicator itself, host memory): maps every peer's buffer of
  // `bytes` (`data` null where this rank's buffer is not device memory it can share). Returns
  // whether every rank mapped every peer's, alike on every rank.
  bool register_buffer(Communicator& group, void* data, std::size_t bytes);
  // Whether [data, data + bytes) lies in a registered buffer.
  bool covers(const void* data, std::size_t bytes) const;
  // The element types the reductions take: fp32, bf16, fp16.
  static bool sums(ElementType type);

  // Queued on `stream`, which must be the same stream for every operation of the communicator.
  // `data` lies in a registered buffer (covers()).
  void all_reduce_sum(void* data, std::int64_t count, ElementType type, cudaStream_t stream);
  // Chunk r of `data` (counts[r] elements, in order) on rank r receives the sum of everyone's.
  void reduce_scatter_chunks_sum(void* data, std::span<const std::int64_t> counts, ElementType type,
                                 cudaStream_t stream);
  // Every rank's chunk r becomes rank r's.
  void all_gather_chunks(void* data, std::span<const std::int64_t> counts, ElementType type, cudaStream_t stream);
  // Chunk rank() of `send` (`count` elements each rank) summed over the ranks into `out` (this
  // rank's memory, anywhere, possibly that chunk itself); the rest of `send` stays as it was.
  void reduce_scatter_sum(const void* send, std::int64_t count, ElementType type, void* out, cudaStream_t stream);
  // `data` becomes rank `from`'s copy of the same bytes of the registered buffer.
  void fetch(void* data, std::size_t bytes, int from, cudaStream_t stream);
  // Unmaps the peers' copies of the buffer registered at `data` (its first byte); the caller has
  // drained the streams, and no operation may use the buffer afterwards. Nothing where none was.
  void unregister_buffer(const void* data);

private:
  struct Region {
    std::byte* mine = nullptr;
    std::size_t bytes = 0;
    std::vector<std::byte*> peers;  // the same buffer on each rank, mapped here (null for this rank)
    std::vector<void*> mappings;    // the peers' allocations mapped for it, unmapped with it
  };
  // `mappings`: the peers' flags mapped here, which the destructor unmaps.
  PeerCopyCollectives(int rank, int ranks, std::uint64_t* flags, std::vector<std::uint64_t*> peer_flags,
                      std::vector<void*> mappings);

  const Region& region_of(const void* data) const;
  std::byte* peer_address(const Region& region, int peer, const void* data) const;
  void barrier(cudaStream_t stream);
  // Sums chunk [begin, end) of `data` (elements) over the ranks into this rank's copy, or into
  // `out` where given (without `push`); with `push`, copies each summed piece into every peer's
  // copy too.
  void reduce_own_chunk(const Region& region, std::byte* data, std::int64_t begin, std::int64_t end,
                        ElementType type, bool push, cudaStream_t stream, std::byte* out = nullptr);
  // Copies chunk [begin, end) of `data` from rank `owner`'s copy into this rank's.
  void copy_from(const Region& region, int owner, std::byte* data, std::int64_t begin, std::int64_t end,
                 std::size_t element, cudaStream_t stream);
  // The streams that copy from and to `peer`.
  cudaStream_t fetch_stream(int peer) const;
  cudaStream_t push_stream(int peer) const;
  // Makes every peer's fetch stream wait for the work queued on `stream` so far.
  void start_fetches(cudaStream_t stream);
  // The streams beside the communicator's (the copies from and to the peers, the sums; null
  // before the first registration), and a wait for everything queued on them.
  std::vector<cudaStream_t> side_streams() const;
  void drain() const;

  int rank_;
  int ranks_;
  std::uint64_t* flags_;                   // this rank's words, one per peer (device memory)
  std::vector<std::uint64_t*> peer_flags_;  // each peer's words, mapped here
  std::vector<void*> mappings_;  // the peers' flags
  std::vector<Region> regions_;
  std::uint64_t sequence_ = 0;
  // Made at the first registration: two pieces per peer, the stream that sums them, a stream per
  // peer that copies from it and one that copies the sums out to it, and the events that hand a
  // slot between the streams (per peer: indexed by rank, null for this rank).
  std::byte* scratch_ = nullptr;
  cudaStream_t sum_stream_ = nullptr;
  std::vector<cudaStream_t> fetch_streams_;
  std::vector<cudaStream_t> push_streams_;
  cudaEvent_t started_ = nullptr;
  std::vector<cudaEvent_t> pushed_;
  std::vector<cudaEvent_t> copied_[2];
  cudaEvent_t summed_[2] = {};
};

}  // namespace mgt::dist
