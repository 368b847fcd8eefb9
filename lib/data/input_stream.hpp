// Reading corpus input: files, standard input ("-"), gzip and zstd decompressed on the fly
// (recognised by their magic bytes, not by their names), several files as one sequence of lines.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mgt {

// The name standing for standard input on a command line, and how messages call it.
inline constexpr std::string_view kStdinPath = "-";
inline constexpr std::string_view kStdinName = "<stdin>";

// Expands command-line inputs in order: "-" stays, a pattern with glob characters (* ? [)
// becomes its matches in sorted order (no match is an error), anything else is a path.
std::vector<std::string> expand_input_paths(const std::vector<std::string>& patterns);

// Sum of the sizes of the inputs as stored, or 0 when one of them is not a regular file (a pipe,
// standard input): progress then shows no percentage.
std::uint64_t total_input_size(const std::vector<std::string>& paths);

enum class Compression { None, Gzip, Zstd };
std::string compression_name(Compression c);

// The bytes of one input, decompressed. Concatenated gzip members and zstd frames are read as
// one stream, as gzip -d and zstd -d do. Errors name the file.
class InputStream {
public:
  // kStdinPath reads standard input. cancel: as set_cancel_flag(), already for the first bytes
  // read to recognise the format, and for the wait for a writer to open a FIFO.
  explicit InputStream(const std::string& path, const std::atomic<bool>* cancel = nullptr);
  ~InputStream();
  InputStream(const InputStream&) = delete;
  InputStream& operator=(const InputStream&) = delete;

  // Up to `capacity` bytes into `out`; 0 only at the end of the input.
  std::size_t read(char* out, std::size_t capacity);

  // When set and raised, a read waiting on a pipe or terminal gives up with an mgt::Error, so a
  // failing run is not held open by a silent writer.
  void set_cancel_flag(const std::atomic<bool>* flag);

  const std::string& name() const;  // the path, or kStdinName
  Compression compression() const;
  std::uint64_t stored_bytes_read() const;  // consumed from the file as stored (compressed)

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One line of input: its bytes without the terminator, where it came from, and how many bytes
// it took in the decompressed stream (terminator included).
struct InputLine {
  std::string_view text;
  std::uint32_t file_index = 0;  // into InputLines::paths()
  std::uint64_t number = 0;      // 1-based, per file
  std::size_t stream_bytes = 0;
};

// The longest line InputLines reads (1 GiB).
inline constexpr std::size_t kLongestLine = std::size_t{1} << 30;

// The lines of several inputs in order. Terminators are those of Python's universal-newline text
// mode, which Megatron's preprocess_data.py reads with: "\n", "\r\n" and a lone "\r" all end a
// line, so line numbers agree with Python's. A last line without terminator still counts; the
// next file never continues it. A UTF-8 byte order mark at the start of a file is dropped.
// Lines may be up to `longest_line` bytes long: the buffer grows to hold the longest one and is
// reused; a longer one is an error naming its file and line.
class InputLines {
public:
  explicit InputLines(std::vector<std::string> paths, std::size_t buffer_size = 4 << 20,
                      std::size_t longest_line = kLongestLine);
  ~InputLines();
  InputLines(const InputLines&) = delete;
  InputLines& operator=(const InputLines&) = delete;

  // The next line; its text stays valid until the following call. False at the end of the last
  // input.
  bool next(InputLine& line);

  void set_cancel_flag(const std::atomic<bool>* flag);

  const std::vector<std::string>& paths() const { return paths_; }
  // How messages name input i ("<stdin>" for "-").
  const std::string& display_name(std::size_t i) const { return names_.at(i); }
  // Bytes consumed from the inputs as stored, over all files so far: for progress against
  // total_input_size().
  std::uint64_t stored_bytes_read() const;

private:
  bool open_next_file();
  bool fill();  // reads more into the buffer; false at the end of the current file
  std::vector<std::string> paths_;
  std::vector<std::string> names_;
  std::unique_ptr<InputStream> stream_;
  std::size_t file_ = 0;  // index of the open file + 1 (0 before the first)
  std::uint64_t finished_files_bytes_ = 0;
  std::vector<char> buffer_;
  std::size_t begin_ = 0, end_ = 0, scan_ = 0;
  bool eof_ = true;
  bool at_file_start_ = false;
  std::uint64_t line_number_ = 0;
  const std::atomic<bool>* cancel_ = nullptr;
  std::size_t longest_line_;
};

}  // namespace mgt
