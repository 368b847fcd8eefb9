// Opening the files mgt reads. A path naming something other than what the reader can use is
// refused at once with one line naming it: a FIFO, a device, a socket or a directory where a
// regular file is expected (a FIFO would otherwise block the open until some writer came), a
// directory where a stream is read. The open itself never blocks. Standard input is read only
// where a program accepts "-" for it, and that is the caller's business: here "-" is a path.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace mgt {

enum class InputKind {
  kRegularFile,  // mapped, read whole or at offsets: only a regular file will do
  kStream,       // read front to back: a FIFO, a pipe, a terminal or a character device too
};

// A read-only descriptor, closed on destruction.
class InputFile {
public:
  // Throws mgt::Error "cannot open WHAT 'PATH': why" or "WHAT 'PATH' is a FIFO, not a regular
  // file"; `what` ("input", "GPT-2 vocab file", ...) may be empty.
  explicit InputFile(const std::string& path, InputKind kind = InputKind::kRegularFile,
                     std::string_view what = {});
  ~InputFile();
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  bool regular() const { return regular_; }
  std::uint64_t size() const { return size_; }  // of a regular file; 0 otherwise

private:
  void close();
  std::string path_;
  int fd_ = -1;
  bool regular_ = false;
  std::uint64_t size_ = 0;
};

// The whole of a regular file. Errors as InputFile's.
std::string read_input_file(const std::string& path, std::string_view what = {});

// For a file that a library opens by name (HDF5): refuses, as InputFile would, a path that is
// not a regular file, without opening it.
void require_regular_input_file(const std::string& path, std::string_view what = {});

// "a FIFO", "a directory", "a character device", ... for st_mode's file type.
std::string file_type_name(unsigned mode);

}  // namespace mgt
