// A file written under a temporary name in its final directory and renamed into place only by
// commit(): readers never see a half-written file. Without commit() the temporary is removed.
// The temporary is created exclusively under an unpredictable name (core/temporary_file.hpp), so
// nothing planted in the directory beforehand is written through; rename(2) then replaces
// whatever is at the final path, a symlink included, without following it.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace mgt {

class AtomicFile {
public:
  explicit AtomicFile(std::string final_path);
  ~AtomicFile();  // removes the temporary if not committed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, std::size_t size);  // buffered
  void write(std::string_view s) { write(s.data(), s.size()); }
  std::size_t bytes_written() const { return written_; }
  const std::string& path() const { return final_path_; }
  const std::string& temp_path() const { return temp_path_; }

  // Flush, fsync, rename over the final path, fsync the directory.
  void commit();

private:
  void flush_buffer();
  std::string final_path_;
  std::string temp_path_;
  int fd_ = -1;
  std::string buffer_;
  std::size_t written_ = 0;
  bool committed_ = false;
};

// Writes a whole file atomically.
void write_file_atomically(const std::string& path, std::string_view contents);

// Refuses, before the work that produces it, a file AtomicFile could not publish at `path`: its
// directory missing or not writable, or a directory at the path itself. `what` names the flag
// ("--output").
void check_atomic_destination(const std::string& path, const std::string& what);

// fsync a directory so a rename inside it is durable.
void sync_directory(const std::string& dir);

// The directory part of a path ("." when there is none).
std::string parent_directory(const std::string& path);

}  // namespace mgt
