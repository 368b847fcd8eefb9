// An anonymous temporary file (unlinked at creation, so nothing is left behind even after a
// crash) used to spill append-only arrays that would otherwise grow in memory with the input.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mgt {

class ScratchFile {
public:
  explicit ScratchFile(const std::string& directory);
  ~ScratchFile();
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  void append(const void* data, std::size_t size);  // buffered
  std::size_t size() const { return size_; }
  // Reads [offset, offset + size) into out; flushes pending appends first.
  void read(std::size_t offset, void* out, std::size_t size);

private:
  void flush();
  int fd_ = -1;
  std::string directory_;
  std::vector<char> buffer_;
  std::size_t size_ = 0;
};

}  // namespace mgt
