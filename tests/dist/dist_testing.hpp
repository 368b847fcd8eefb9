// Helpers for the distributed tests. Every rank runs every test case in the same order, so a
// collective inside a test meets its peers; checks use CHECK (not REQUIRE) around collectives
// so that a failing rank stays in step with the others.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "dist/comm_buffer.hpp"
#include "dist/communicator.hpp"
#include "dist/distributed_runtime.hpp"
#include "dist/memory_mover.hpp"

namespace mgt::dist_test {

// The process's runtime, started by the test main.
dist::DistributedRuntime& runtime();
void set_runtime(dist::DistributedRuntime* runtime);
// 0, 1, …, world size − 1: the ranks of a group spanning the world.
std::vector<int> all_ranks();

// Where test buffers live and how their contents are written and read.
class TestMemory {
public:
  virtual ~TestMemory() = default;
  virtual const char* name() const = 0;
  virtual dist::MemorySpace space() const = 0;
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* data) = 0;
  virtual void upload(void* dst, const void* host, size_t bytes) = 0;
  virtual void download(void* host, const void* src, size_t bytes) = 0;
};

// Plain host memory.
class HostMemory : public TestMemory {
public:
  const char* name() const override { return "host"; }
  dist::MemorySpace space() const override { return dist::MemorySpace::Host; }
  void* allocate(size_t bytes) override;
  void release(void* data) override { blocks_.erase(data); }
  void upload(void* dst, const void* host, size_t bytes) override {
    if (bytes) std::memcpy(dst, host, bytes);
  }
  void download(void* host, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(host, src, bytes);
  }

protected:
  std::map<void*, std::unique_ptr<std::byte[]>> blocks_;
};

// Stand-in device memory: host memory holding every byte inverted, so a communicator that read
// or wrote it directly instead of staging through its MemoryMover would get wrong results.
class FakeDeviceMemory final : public HostMemory, public dist::MemoryMover {
public:
  const char* name() const override { return "fake device"; }
  dist::MemorySpace space() const override { return dist::MemorySpace::Backend; }
  void upload(void* dst, const void* host, size_t bytes) override;
  void download(void* host, const void* src, size_t bytes) override;
  void copy_to_host(void* host, const void* device, size_t bytes) override {
    download(host, device, bytes);
    ++moves;
  }
  void copy_from_host(void* device, const void* host, size_t bytes) override {
    upload(device, host, bytes);
    ++moves;
  }
  int64_t moves = 0;
};

// A typed array in a TestMemory.
template <dist::CommElement T>
class TestArray {
public:
  TestArray(TestMemory& memory, const std::vector<T>& values)
      : memory_(memory), count_(static_cast<int64_t>(values.size())) {
    data_ = memory_.allocate(std::max<size_t>(1, values.size()) * sizeof(T));
    memory_.upload(data_, values.data(), values.size() * sizeof(T));
  }
  TestArray(const TestArray&) = delete;
  TestArray& operator=(const TestArray&) = delete;
  ~TestArray() { memory_.release(data_); }

  std::vector<T> read() const {
    std::vector<T> values(static_cast<size_t>(count_));
    memory_.download(values.data(), data_, values.size() * sizeof(T));
    return values;
  }
  dist::RecvBuffer buffer() const { return slice(0, count_); }
  dist::RecvBuffer slice(int64_t offset, int64_t count) const {
    return {static_cast<T*>(data_) + offset, count, dist::element_type_of<T>(), memory_.space()};
  }

private:
  TestMemory& memory_;
  void* data_;
  int64_t count_;
};

// Runs every operation of `comm` on float, double and int64 buffers of several sizes (0, 1,
// sizes not divisible by the group size, several thousand) in `memory`, checking the results.
// Collective over the group.
void check_all_operations(dist::Communicator& comm, TestMemory& memory);

// The first index where two arrays differ, or -1.
template <typename T>
int64_t first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  return -1;
}

}  // namespace mgt::dist_test
