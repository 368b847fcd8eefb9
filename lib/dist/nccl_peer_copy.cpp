#include "dist/nccl_peer_copy.hpp"

#include <cuda.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "core/error.hpp"
#include "kernels/cuda_check.hpp"
#include "kernels/rank_chunk_sum.hpp"

namespace mgt::dist {
namespace {

// A scratch piece per peer: the peers' copies of this rank's chunk are summed in pieces of this
// many bytes.
constexpr std::size_t kPieceBytes = std::size_t{32} << 20;

// The driver's stream memory operations and address ranges, looked up through the runtime so that
// the programs load where no driver is installed (CI builds without a GPU).
struct DriverCalls {
  using WriteValue = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
  using WaitValue = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
  using AddressRange = CUresult (*)(CUdeviceptr*, std::size_t*, CUdeviceptr);
  WriteValue write_value = nullptr;
  WaitValue wait_value = nullptr;
  AddressRange address_range = nullptr;
  bool complete() const { return write_value && wait_value && address_range; }
};

const DriverCalls& driver() {
  static const DriverCalls calls = [] {
    DriverCalls c;
    const auto find = [](const char* symbol, auto& function) {
      void* address = nullptr;
      cudaDriverEntryPointQueryResult found{};
      if (cudaGetDriverEntryPointByVersion(symbol, &address, 12000, cudaEnableDefault, &found) == cudaSuccess &&
          found == cudaDriverEntryPointSuccess)
        function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(address);
      cudaGetLastError();
    };
    find("cuStreamWriteValue64", c.write_value);
    find("cuStreamWaitValue64", c.wait_value);
    find("cuMemGetAddressRange", c.address_range);
    return c;
  }();
  return calls;
}

void check_driver(CUresult result, const char* call) {
  if (result != CUDA_SUCCESS)
    throw Error(std::string("copy-engine collectives: ") + call + " failed (CUresult " + std::to_string(result) + ")");
}

cuda::ChunkType chunk_type(ElementType type) {
  return type == ElementType::BFloat16 ? cuda::ChunkType::kBf16
         : type == ElementType::Float16 ? cuda::ChunkType::kF16
                                        : cuda::ChunkType::kF32;
}

// What a rank tells the others of a buffer it shares: whether it can, its IPC handle, where the
// buffer starts in the handle's allocation, and its size. As int64 words, for Communicator.
constexpr std::size_t kHandleWords = sizeof(cudaIpcMemHandle_t) / sizeof(std::int64_t);
static_assert(sizeof(cudaIpcMemHandle_t) % sizeof(std::int64_t) == 0);
constexpr std::size_t kRecordWords = 3 + kHandleWords;

struct SharedRecord {
  bool ok = false;
  cudaIpcMemHandle_t handle{};
  std::int64_t offset = 0;
  std::int64_t bytes = 0;
};

// `data` null: nothing to share (ok false). Otherwise its allocation's handle.
SharedRecord describe(void* data, std::size_t bytes) {
  SharedRecord r;
  if (data == nullptr) return r;
  CUdeviceptr base = 0;
  std::size_t range = 0;
  if (driver().address_range(&base, &range, reinterpret_cast<CUdeviceptr>(data)) != CUDA_SUCCESS) return r;
  if (cudaIpcGetMemHandle(&r.handle, reinterpret_cast<void*>(base)) != cudaSuccess) {
    cudaGetLastError();  // memory of the stream-ordered pool: not shareable this way
    return r;
  }
  r.ok = true;
  r.offset = static_cast<std::int64_t>(reinterpret_cast<CUdeviceptr>(data) - base);
  r.bytes = static_cast<std::int64_t>(bytes);
  return r;
}

std::vector<SharedRecord> exchange(Communicator& group, const SharedRecord& mine) {
  std::vector<std::int64_t> words(kRecordWords, 0);
  words[0] = mine.ok ? 1 : 0;
  std::memcpy(&words[1], &mine.handle, sizeof mine.handle);
  words[1 + kHandleWords] = mine.offset;
  words[2 + kHandleWords] = mine.bytes;
  std::vector<std::int64_t> all(kRecordWords * static_cast<std::size_t>(group.size()));
  group.all_gather(std::span<const std::int64_t>(words), std::span<std::int64_t>(all));
  std::vector<SharedRecord> records(static_cast<std::size_t>(group.size()));
  for (std::size_t r = 0; r < records.size(); ++r) {
    const std::int64_t* w = &all[r * kRecordWords];
    records[r].ok = w[0] == 1;
    std::memcpy(&records[r].handle, &w[1], sizeof records[r].handle);
    records[r].offset = w[1 + kHandleWords];
    records[r].bytes = w[2 + kHandleWords];
  }
  return records;
}

// Whether every rank says yes (host memory, over `group`).
bool all_agree(Communicator& group, bool yes) {
  std::array<std::int64_t, 1> mine{yes ? 1 : 0};
  std::vector<std::int64_t> all(static_cast<std::size_t>(group.size()));
  group.all_gather(std::span<const std::int64_t>(mine), std::span<std::int64_t>(all));
  return std::all_of(all.begin(), all.end(), [](std::int64_t v) { return v == 1; });
}

// Maps every peer's allocation; on any failure unmaps what it mapped and returns false.
bool open_peers(const std::vector<SharedRecord>& records, int rank, std::vector<void*>& bases) {
  bases.assign(records.size(), nullptr);
  for (std::size_t r = 0; r < records.size(); ++r) {
    if (static_cast<int>(r) == rank) continue;
    if (cudaIpcOpenMemHandle(&bases[r], records[r].handle, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) {
      cudaGetLastError();
      bases[r] = nullptr;
      for (void* base : bases)
        if (base) cudaIpcCloseMemHandle(base);
      bases.assign(records.size(), nullptr);
      return false;
    }
  }
  return true;
}

}  // namespace

std::unique_ptr<PeerCopyCollectives> PeerCopyCollectives::create(Communicator& bootstrap, int device, bool wanted,
                                                                 bool one_node) {
  const int ranks = bootstrap.size();
  if (ranks == 1) return nullptr;
  if (!all_agree(bootstrap, wanted && one_node && ranks <= cuda::kMaxRankPieces && driver().complete()))
    return nullptr;

  MGT_CUDA_CHECK(cudaSetDevice(device));
  std::uint64_t* flags = nullptr;
  const std::size_t flag_bytes = static_cast<std::size_t>(ranks) * sizeof(std::uint64_t);
  MGT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&flags), flag_bytes));
  MGT_CUDA_CHECK(cudaMemset(flags, 0, flag_bytes));
  MGT_CUDA_CHECK(cudaDeviceSynchronize());  // zeroed before any peer can write
  const std::vector<SharedRecord> records = exchange(bootstrap, describe(flags, flag_bytes));
  std::vector<void*> bases;
  const bool described = std::all_of(records.begin(), records.end(), [](const SharedRecord& r) { return r.ok; });
  const bool opened = described && open_peers(records, bootstrap.rank(), bases);
  if (!all_agree(bootstrap, opened)) {
    for (void* base : bases)
      if (base) cudaIpcCloseMemHandle(base);
    cudaFree(flags);
    return nullptr;
  }
  std::vector<std::uint64_t*> peer_flags(static_cast<std::size_t>(ranks), nullptr);
  std::vector<void*> mappings;
  for (std::size_t r = 0; r < bases.size(); ++r) {
    if (!bases[r]) continue;
    peer_flags[r] = reinterpret_cast<std::uint64_t*>(static_cast<std::byte*>(bases[r]) + records[r].offset);
    mappings.push_back(bases[r]);
  }
  return std::unique_ptr<PeerCopyCollectives>(
      new PeerCopyCollectives(bootstrap.rank(), ranks, flags, std::move(peer_flags), std::move(mappings)));
}

PeerCopyCollectives::PeerCopyCollectives(int rank, int ranks, std::uint64_t* flags,
                                         std::vector<std::uint64_t*> peer_flags, std::vector<void*> mappings)
    : rank_(rank),
      ranks_(ranks),
      flags_(flags),
      peer_flags_(std::move(peer_flags)),
      mappings_(std::move(mappings)) {}

PeerCopyCollectives::~PeerCopyCollectives() {
  const std::vector<cudaStream_t> streams = side_streams();
  // The copies out write through the peers' mappings: they finish before those are closed.
  for (cudaStream_t stream : streams)
    if (stream) cudaStreamSynchronize(stream);
  for (void* base : mappings_) cudaIpcCloseMemHandle(base);
  for (const Region& region : regions_)
    for (void* base : region.mappings) cudaIpcCloseMemHandle(base);
  std::vector<cudaEvent_t> events = pushed_;
  events.insert(events.end(), copied_[0].begin(), copied_[0].end());
  events.insert(events.end(), copied_[1].begin(), copied_[1].end());
  events.insert(events.end(), {started_, summed_[0], summed_[1]});
  for (cudaEvent_t event : events)
    if (event) cudaEventDestroy(event);
  for (cudaStream_t stream : streams)
    if (stream) cudaStreamDestroy(stream);
  cudaFree(scratch_);
  cudaFree(flags_);
}

bool PeerCopyCollectives::sums(ElementType type) {
  return type == ElementType::Float32 || type == ElementType::BFloat16 || type == ElementType::Float16;
}

bool PeerCopyCollectives::register_buffer(Communicator& group, void* data, std::size_t bytes) {
  // A buffer registered before (on every rank, as registering is collective) needs no new mapping.
  const bool known = data && covers(data, bytes);
  if (all_agree(group, known)) return true;
  const std::vector<SharedRecord> records = exchange(group, describe(data, bytes));
  const bool usable = std::all_of(records.begin(), records.end(), [&](const SharedRecord& r) {
    return r.ok && r.bytes == static_cast<std::int64_t>(bytes);
  });
  std::vector<void*> bases;
  const bool opened = usable && open_peers(records, rank_, bases);
  if (!all_agree(group, opened)) {
    for (void* base : bases)
      if (base) cudaIpcCloseMemHandle(base);
    return false;
  }
  Region region;
  region.mine = static_cast<std::byte*>(data);
  region.bytes = bytes;
  region.peers.assign(static_cast<std::size_t>(ranks_), nullptr);
  for (std::size_t r = 0; r < bases.size(); ++r) {
    if (!bases[r]) continue;
    region.peers[r] = static_cast<std::byte*>(bases[r]) + records[r].offset;
    region.mappings.push_back(bases[r]);
  }
  regions_.push_back(std::move(region));
  if (!scratch_) {
    MGT_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&scratch_), 2 * kPieceBytes * static_cast<std::size_t>(ranks_ - 1)));
    int least = 0, greatest = 0;
    MGT_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    // The highest priority, as the side stream's: the sums' blocks go ahead of the compute's
    // waiting ones, so that the copies keep moving (the compute's priority measured the same).
    const auto new_stream = [&] {
      cudaStream_t made = nullptr;
      MGT_CUDA_CHECK(cudaStreamCreateWithPriority(&made, cudaStreamNonBlocking, greatest));
      return made;
    };
    const auto new_event = [] {
      cudaEvent_t made = nullptr;
      MGT_CUDA_CHECK(cudaEventCreateWithFlags(&made, cudaEventDisableTiming));
      return made;
    };
    sum_stream_ = new_stream();
    started_ = new_event();
    summed_[0] = new_event();
    summed_[1] = new_event();
    const auto peers = static_cast<std::size_t>(ranks_);
    for (auto* per_peer : {&fetch_streams_, &push_streams_}) per_peer->assign(peers, nullptr);
    for (auto* per_peer : {&pushed_, &copied_[0], &copied_[1]}) per_peer->assign(peers, nullptr);
    for (std::size_t r = 0; r < peers; ++r) {
      if (static_cast<int>(r) == rank_) continue;
      fetch_streams_[r] = new_stream();
      push_streams_[r] = new_stream();
      for (auto* per_peer : {&pushed_, &copied_[0], &copied_[1]}) (*per_peer)[r] = new_event();
    }
  }
  return true;
}

bool PeerCopyCollectives::covers(const void* data, std::size_t bytes) const {
  const auto* p = static_cast<const std::byte*>(data);
  return std::any_of(regions_.begin(), regions_.end(),
                     [&](const Region& r) { return p >= r.mine && p + bytes <= r.mine + r.bytes; });
}

const PeerCopyCollectives::Region& PeerCopyCollectives::region_of(const void* data) const {
  const auto* p = static_cast<const std::byte*>(data);
  for (const Region& r : regions_)
    if (p >= r.mine && p < r.mine + r.bytes) return r;
  throw Error("internal error: a copy-engine collective on a buffer that was not registered");
}

std::byte* PeerCopyCollectives::peer_address(const Region& region, int peer, const void* data) const {
  return region.peers[static_cast<std::size_t>(peer)] + (static_cast<const std::byte*>(data) - region.mine);
}

void PeerCopyCollectives::barrier(cudaStream_t stream) {
  ++sequence_;
  for (int p = 0; p < ranks_; ++p) {
    if (p == rank_) continue;
    // Default flags: the write follows a memory barrier, so a peer that sees it sees this rank's
    // writes before it.
    check_driver(driver().write_value(stream, reinterpret_cast<CUdeviceptr>(peer_flags_[static_cast<std::size_t>(p)] + rank_),
                                      sequence_, CU_STREAM_WRITE_VALUE_DEFAULT),
                 "cuStreamWriteValue64");
  }
  for (int p = 0; p < ranks_; ++p) {
    if (p == rank_) continue;
    check_driver(driver().wait_value(stream, reinterpret_cast<CUdeviceptr>(flags_ + p), sequence_,
                                     CU_STREAM_WAIT_VALUE_GEQ),
                 "cuStreamWaitValue64");
  }
}

void PeerCopyCollectives::unregister_buffer(const void* data) {
  const auto found = std::find_if(regions_.begin(), regions_.end(), [&](const Region& r) { return r.mine == data; });
  if (found == regions_.end()) return;
  drain();
  for (void* base : found->mappings) MGT_CUDA_CHECK(cudaIpcCloseMemHandle(base));
  regions_.erase(found);
}

void PeerCopyCollectives::reduce_own_chunk(const Region& region, std::byte* data, std::int64_t begin,
                                           std::int64_t end, ElementType type, bool push, cudaStream_t stream,
                                           std::byte* out) {
  const std::size_t element = element_size(type);
  const std::int64_t piece = static_cast<std::int64_t>(kPieceBytes / element);
  const std::size_t slot_bytes = kPieceBytes * static_cast<std::size_t>(ranks_ - 1);
  start_fetches(stream);
  int index = 0;
  for (std::int64_t at = begin; at < end; at += piece, ++index) {
    const int slot = index % 2;
    const std::int64_t n = std::min(piece, end - at);
    std::byte* own = data + static_cast<std::size_t>(at) * element;
    std::byte* sum = out ? out + static_cast<std::size_t>(at - begin) * element : own;
    cuda::RankPieces pieces;
    std::byte* copy = scratch_ + static_cast<std::size_t>(slot) * slot_bytes;
    for (int r = 0; r < ranks_; ++r) {
      if (r == rank_) {
        pieces.piece[r] = own;
        continue;
      }
      const cudaStream_t fetch = fetch_stream(r);
      cudaEvent_t copied = copied_[slot][static_cast<std::size_t>(r)];
      // The slot's previous piece has been summed before its copies are overwritten.
      if (index >= 2) MGT_CUDA_CHECK(cudaStreamWaitEvent(fetch, summed_[slot], 0));
      MGT_CUDA_CHECK(cudaMemcpyAsync(copy, peer_address(region, r, own), static_cast<std::size_t>(n) * element,
                                     cudaMemcpyDefault, fetch));
      MGT_CUDA_CHECK(cudaEventRecord(copied, fetch));
      MGT_CUDA_CHECK(cudaStreamWaitEvent(sum_stream_, copied, 0));
      pieces.piece[r] = copy;
      copy += kPieceBytes;
    }
    cuda::sum_rank_pieces(pieces, ranks_, n, chunk_type(type), sum, sum_stream_);
    MGT_CUDA_CHECK(cudaEventRecord(summed_[slot], sum_stream_));
    if (!push) continue;
    // The summed piece goes out to every peer's copy of the buffer at once, while the next piece
    // comes in: only this rank reads the peers' copies of its chunk, and it has read this piece.
    for (int r = 0; r < ranks_; ++r) {
      if (r == rank_) continue;
      MGT_CUDA_CHECK(cudaStreamWaitEvent(push_stream(r), summed_[slot], 0));
      MGT_CUDA_CHECK(cudaMemcpyAsync(peer_address(region, r, own), own, static_cast<std::size_t>(n) * element,
                                     cudaMemcpyDefault, push_stream(r)));
    }
  }
  // What follows on `stream` (the barrier that says the chunk is summed, or pushed) waits for the
  // last sum, which comes after every other on the summing stream, and the last push.
  if (index == 0) return;
  MGT_CUDA_CHECK(cudaStreamWaitEvent(stream, summed_[(index - 1) % 2], 0));
  if (!push) return;
  for (int r = 0; r < ranks_; ++r) {
    if (r == rank_) continue;
    MGT_CUDA_CHECK(cudaEventRecord(pushed_[static_cast<std::size_t>(r)], push_stream(r)));
    MGT_CUDA_CHECK(cudaStreamWaitEvent(stream, pushed_[static_cast<std::size_t>(r)], 0));
  }
}

std::vector<cudaStream_t> PeerCopyCollectives::side_streams() const {
  std::vector<cudaStream_t> streams = fetch_streams_;
  streams.insert(streams.end(), push_streams_.begin(), push_streams_.end());
  streams.push_back(sum_stream_);
  return streams;
}

void PeerCopyCollectives::drain() const {
  for (cudaStream_t stream : side_streams())
    if (stream) MGT_CUDA_CHECK(cudaStreamSynchronize(stream));
}

cudaStream_t PeerCopyCollectives::fetch_stream(int peer) const {
  return fetch_streams_[static_cast<std::size_t>(peer)];
}

cudaStream_t PeerCopyCollectives::push_stream(int peer) const {
  return push_streams_[static_cast<std::size_t>(peer)];
}

void PeerCopyCollectives::start_fetches(cudaStream_t stream) {
  MGT_CUDA_CHECK(cudaEventRecord(started_, stream));
  for (int r = 0; r < ranks_; ++r)
    if (r != rank_) MGT_CUDA_CHECK(cudaStreamWaitEvent(fetch_streams_[static_cast<std::size_t>(r)], started_, 0));
}

void PeerCopyCollectives::copy_from(const Region& region, int owner, std::byte* data, std::int64_t begin,
                                    std::int64_t end, std::size_t element, cudaStream_t stream) {
  if (end <= begin) return;
  std::byte* at = data + static_cast<std::size_t>(begin) * element;
  MGT_CUDA_CHECK(cudaMemcpyAsync(at, peer_address(region, owner, at), static_cast<std::size_t>(end - begin) * element,
                                 cudaMemcpyDefault, stream));
}

void PeerCopyCollectives::all_reduce_sum(void* data, std::int64_t count, ElementType type, cudaStream_t stream) {
  if (count == 0) return;
  const Region& region = region_of(data);
  auto* bytes = static_cast<std::byte*>(data);
  const std::int64_t per_rank = (count + ranks_ - 1) / ranks_;
  const auto begin = [&](int r) { return std::min<std::int64_t>(count, r * per_rank); };
  barrier(stream);
  reduce_own_chunk(region, bytes, begin(rank_), begin(rank_ + 1), type, /*push=*/true, stream);
  // Every rank's chunk summed and in every copy; nobody reads this rank's buffer any more.
  barrier(stream);
}

void PeerCopyCollectives::reduce_scatter_chunks_sum(void* data, std::span<const std::int64_t> counts,
                                                    ElementType type, cudaStream_t stream) {
  const Region& region = region_of(data);
  std::int64_t begin = 0;
  for (int r = 0; r < rank_; ++r) begin += counts[static_cast<std::size_t>(r)];
  barrier(stream);
  reduce_own_chunk(region, static_cast<std::byte*>(data), begin, begin + counts[static_cast<std::size_t>(rank_)], type,
                   /*push=*/false, stream);
  // The peers have read their chunks of this rank's buffer: the caller may write it.
  barrier(stream);
}

void PeerCopyCollectives::all_gather_chunks(void* data, std::span<const std::int64_t> counts, ElementType type,
                                            cudaStream_t stream) {
  const Region& region = region_of(data);
  barrier(stream);
  start_fetches(stream);
  std::int64_t begin = 0;
  for (int r = 0; r < ranks_; ++r) {
    const std::int64_t end = begin + counts[static_cast<std::size_t>(r)];
    if (r != rank_) {
      const cudaStream_t fetch = fetch_stream(r);
      copy_from(region, r, static_cast<std::byte*>(data), begin, end, element_size(type), fetch);
      MGT_CUDA_CHECK(cudaEventRecord(copied_[0][static_cast<std::size_t>(r)], fetch));
    }
    begin = end;
  }
  for (int r = 0; r < ranks_; ++r)
    if (r != rank_) MGT_CUDA_CHECK(cudaStreamWaitEvent(stream, copied_[0][static_cast<std::size_t>(r)], 0));
  barrier(stream);
}

void PeerCopyCollectives::reduce_scatter_sum(const void* send, std::int64_t count, ElementType type, void* out,
                                            cudaStream_t stream) {
  auto* data = static_cast<std::byte*>(const_cast<void*>(send));  // read only: `out` takes the sum
  const Region& region = region_of(data);
  barrier(stream);
  reduce_own_chunk(region, data, rank_ * count, (rank_ + 1) * count, type, /*push=*/false, stream,
                   static_cast<std::byte*>(out));
  // The peers have read their chunks of this rank's buffer: the caller may write it.
  barrier(stream);
}

void PeerCopyCollectives::fetch(void* data, std::size_t bytes, int from, cudaStream_t stream) {
  const Region& region = region_of(data);
  barrier(stream);
  MGT_CUDA_CHECK(cudaMemcpyAsync(data, peer_address(region, from, data), bytes, cudaMemcpyDefault, stream));
  barrier(stream);
}

}  // namespace mgt::dist
