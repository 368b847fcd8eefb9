#include "core/mapped_file.hpp"

#include <sys/mman.h>

#include <utility>

#include "core/error.hpp"
#include "core/input_file.hpp"

namespace mgt {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const InputFile file(path);  // a regular file, or a one-line refusal naming the path
  size_ = static_cast<std::size_t>(file.size());
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, file.fd(), 0);
    if (p == MAP_FAILED) throw Error(system_error_message("cannot map", path));
    data_ = static_cast<const std::uint8_t*>(p);
  }
}

MappedFile::~MappedFile() { release(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void MappedFile::release() {
  if (data_) ::munmap(const_cast<std::uint8_t*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace mgt
