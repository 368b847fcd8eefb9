#include "data/input_stream.hpp"

#include <fcntl.h>
#include <glob.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "core/input_file.hpp"

namespace mgt {
namespace {

constexpr std::size_t kStoredBufferSize = 1 << 20;

bool has_glob_characters(const std::string& s) {
  return s.find_first_of("*?[") != std::string::npos;
}

std::string display_name_of(const std::string& path) {
  return path == kStdinPath ? std::string(kStdinName) : path;
}

// The file descriptor as stored on disk, with a read-ahead buffer that also serves magic-byte
// detection and the decompressors' input.
class StoredFile {
public:
  StoredFile(const std::string& path, const std::atomic<bool>* cancel)
      : name_(display_name_of(path)), cancel_(cancel) {
    if (path == kStdinPath) {
      fd_ = STDIN_FILENO;
      struct stat st {};
      regular_ = ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode);
    } else {
      // A FIFO is opened without waiting for its writer (core/input_file.hpp); the wait moves to
      // wait_readable, which watches the cancel flag. A directory is refused here, naming it.
      file_ = std::make_unique<InputFile>(path, InputKind::kStream, "input");
      fd_ = file_->fd();
      regular_ = file_->regular();
      if (regular_) ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
    }
    buffer_.resize(kStoredBufferSize);
  }
  StoredFile(const StoredFile&) = delete;
  StoredFile& operator=(const StoredFile&) = delete;

  const std::string& name() const { return name_; }
  std::uint64_t bytes_read() const { return bytes_read_; }
  void set_cancel_flag(const std::atomic<bool>* flag) { cancel_ = flag; }

  // Buffered bytes not consumed yet.
  const unsigned char* data() const { return buffer_.data() + begin_; }
  std::size_t available() const { return end_ - begin_; }
  void consume(std::size_t n) { begin_ += n; }

  // Makes at least `n` bytes available unless the file ends first. Returns available().
  std::size_t ensure(std::size_t n) {
    while (available() < n && !eof_) {
      if (begin_ > 0) {
        std::memmove(buffer_.data(), buffer_.data() + begin_, available());
        end_ -= begin_;
        begin_ = 0;
      }
      std::size_t got = raw_read(buffer_.data() + end_, buffer_.size() - end_);
      if (got == 0) eof_ = true;
      end_ += got;
    }
    return available();
  }
  // Refills when empty; returns available() (0 at the end of the file).
  std::size_t refill() { return available() > 0 ? available() : ensure(1); }

  // Reads straight into `out` once the buffer is drained, avoiding a copy for plain input.
  std::size_t read_into(char* out, std::size_t capacity) {
    if (available() > 0) {
      std::size_t n = std::min(capacity, available());
      std::memcpy(out, data(), n);
      consume(n);
      return n;
    }
    if (eof_) return 0;
    std::size_t got = raw_read(out, capacity);
    if (got == 0) eof_ = true;
    return got;
  }

private:
  std::size_t raw_read(void* out, std::size_t capacity) {
    for (;;) {
      if (!regular_) wait_readable();
      ssize_t n = ::read(fd_, out, capacity);
      if (n >= 0) {
        bytes_read_ += static_cast<std::uint64_t>(n);
        return static_cast<std::size_t>(n);
      }
      if (errno == EINTR || errno == EAGAIN) continue;
      throw Error(system_error_message("cannot read", name_));
    }
  }
  // A FIFO opened before its writer reads as ended until the writer comes: poll(2) waits for
  // it (or for data), and checks the cancel flag every 200 ms meanwhile.
  void wait_readable() {
    for (;;) {
      if (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed))
        throw Error(name_ + ": reading cancelled");
      pollfd p{fd_, POLLIN, 0};
      int r = ::poll(&p, 1, 200);
      if (r > 0 || (r < 0 && errno != EINTR)) return;  // readable, closed, or let read() report
    }
  }

  std::string name_;
  std::unique_ptr<InputFile> file_;  // null for standard input, which is not ours to close
  int fd_ = -1;
  bool regular_ = false;
  bool eof_ = false;
  std::vector<unsigned char> buffer_;
  std::size_t begin_ = 0, end_ = 0;
  std::uint64_t bytes_read_ = 0;
  const std::atomic<bool>* cancel_;
};

class Decoder {
public:
  virtual ~Decoder() = default;
  virtual std::size_t read(char* out, std::size_t capacity) = 0;
};

class PlainDecoder final : public Decoder {
public:
  explicit PlainDecoder(StoredFile& file) : file_(file) {}
  std::size_t read(char* out, std::size_t capacity) override { return file_.read_into(out, capacity); }

private:
  StoredFile& file_;
};

// gzip members back to back (as `cat a.gz b.gz` makes) form one stream. Zero bytes after a
// member are padding, as gzip and Python's gzip module accept.
class GzipDecoder final : public Decoder {
public:
  explicit GzipDecoder(StoredFile& file) : file_(file) {
    std::memset(&zs_, 0, sizeof zs_);
    if (inflateInit2(&zs_, 15 + 16) != Z_OK) throw Error(file_.name() + ": cannot initialise zlib");
  }
  ~GzipDecoder() override { inflateEnd(&zs_); }

  std::size_t read(char* out, std::size_t capacity) override {
    const std::size_t want = std::min<std::size_t>(capacity, 1u << 30);
    zs_.next_out = reinterpret_cast<Bytef*>(out);
    zs_.avail_out = static_cast<uInt>(want);
    while (zs_.avail_out > 0) {
      if (between_members_) {
        if (!start_next_member()) break;
        continue;
      }
      // At the end of the file inflate may still hold output: call it with no input to drain.
      bool have = file_.refill() > 0;
      zs_.next_in = have ? const_cast<Bytef*>(file_.data()) : nullptr;
      zs_.avail_in = have ? static_cast<uInt>(std::min<std::size_t>(file_.available(), 1u << 30)) : 0;
      const std::size_t in_before = zs_.avail_in;
      const uInt out_before = zs_.avail_out;
      int rc = inflate(&zs_, Z_NO_FLUSH);
      file_.consume(in_before - zs_.avail_in);
      if (rc == Z_STREAM_END) {
        between_members_ = true;
      } else if (rc == Z_OK || rc == Z_BUF_ERROR) {
        if (!have && zs_.avail_out == out_before)
          throw Error(file_.name() + ": truncated gzip data (the file ends inside a gzip member)");
      } else {
        throw Error(file_.name() + ": corrupt gzip data (" +
                    (zs_.msg != nullptr ? std::string(zs_.msg) : "zlib error " + std::to_string(rc)) +
                    ")");
      }
      // Return what we have rather than blocking for more input on a pipe.
      if (have && zs_.avail_out < want && file_.available() == 0) break;
    }
    return want - zs_.avail_out;
  }

private:
  // After a member: skip zero padding; more data must be another member.
  bool start_next_member() {
    while (file_.refill() > 0) {
      const unsigned char* p = file_.data();
      std::size_t n = file_.available(), zeros = 0;
      while (zeros < n && p[zeros] == 0) ++zeros;
      file_.consume(zeros);
      if (zeros < n) {
        if (inflateReset(&zs_) != Z_OK) throw Error(file_.name() + ": cannot reset zlib");
        between_members_ = false;
        return true;
      }
    }
    return false;
  }

  StoredFile& file_;
  z_stream zs_;
  bool between_members_ = false;
};

class ZstdDecoder final : public Decoder {
public:
  explicit ZstdDecoder(StoredFile& file) : file_(file), ctx_(ZSTD_createDCtx()) {
    if (ctx_ == nullptr) throw Error(file_.name() + ": cannot initialise zstd");
  }
  ~ZstdDecoder() override { ZSTD_freeDCtx(ctx_); }

  std::size_t read(char* out, std::size_t capacity) override {
    ZSTD_outBuffer output{out, capacity, 0};
    while (output.pos < output.size) {
      // At the end of the file the decoder may still hold output: call it with no input to drain.
      bool have = file_.refill() > 0;
      if (!have && !frame_open_) break;
      ZSTD_inBuffer input{have ? file_.data() : nullptr, have ? file_.available() : 0, 0};
      const std::size_t out_before = output.pos;
      std::size_t rc = ZSTD_decompressStream(ctx_, &output, &input);
      file_.consume(input.pos);
      if (ZSTD_isError(rc))
        throw Error(file_.name() + ": corrupt zstd data (" + ZSTD_getErrorName(rc) + ")");
      frame_open_ = rc != 0;
      if (!have && output.pos == out_before) {
        if (frame_open_)
          throw Error(file_.name() + ": truncated zstd data (the file ends inside a frame)");
        break;
      }
      if (have && output.pos > 0 && file_.available() == 0) break;
    }
    return output.pos;
  }

private:
  StoredFile& file_;
  ZSTD_DCtx* ctx_;
  bool frame_open_ = false;
};

}  // namespace

std::string compression_name(Compression c) {
  switch (c) {
    case Compression::Gzip: return "gzip";
    case Compression::Zstd: return "zstd";
    default: return "none";
  }
}

std::vector<std::string> expand_input_paths(const std::vector<std::string>& patterns) {
  std::vector<std::string> out;
  for (const auto& pattern : patterns) {
    if (pattern.empty()) throw UsageError("empty input path");
    if (pattern == kStdinPath || !has_glob_characters(pattern)) {
      out.push_back(pattern);
      continue;
    }
    glob_t g{};
    int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &g);
    if (rc == GLOB_NOMATCH) {
      ::globfree(&g);
      throw Error("no input file matches '" + pattern + "'");
    }
    if (rc != 0) {
      ::globfree(&g);
      throw Error("cannot expand input pattern '" + pattern + "'");
    }
    for (std::size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);  // sorted
    ::globfree(&g);
  }
  return out;
}

std::uint64_t total_input_size(const std::vector<std::string>& paths) {
  std::uint64_t total = 0;
  for (const auto& p : paths) {
    struct stat st {};
    if (p == kStdinPath) {
      if (::fstat(STDIN_FILENO, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    } else if (::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      return 0;
    }
    total += static_cast<std::uint64_t>(st.st_size);
  }
  return total;
}

// ---------------------------------------------------------------------------------------------

struct InputStream::Impl {
  StoredFile file;
  Compression compression = Compression::None;
  std::unique_ptr<Decoder> decoder;
  Impl(const std::string& path, const std::atomic<bool>* cancel) : file(path, cancel) {}
};

InputStream::InputStream(const std::string& path, const std::atomic<bool>* cancel)
    : impl_(std::make_unique<Impl>(path, cancel)) {
  auto& f = impl_->file;
  f.ensure(4);
  const unsigned char* p = f.data();
  std::size_t n = f.available();
  if (n >= 2 && p[0] == 0x1F && p[1] == 0x8B) {
    impl_->compression = Compression::Gzip;
    impl_->decoder = std::make_unique<GzipDecoder>(f);
  } else if (n >= 4 && p[0] == 0x28 && p[1] == 0xB5 && p[2] == 0x2F && p[3] == 0xFD) {
    impl_->compression = Compression::Zstd;
    impl_->decoder = std::make_unique<ZstdDecoder>(f);
  } else {
    impl_->decoder = std::make_unique<PlainDecoder>(f);
  }
}

InputStream::~InputStream() = default;

std::size_t InputStream::read(char* out, std::size_t capacity) {
  if (capacity == 0) return 0;
  return impl_->decoder->read(out, capacity);
}

void InputStream::set_cancel_flag(const std::atomic<bool>* flag) { impl_->file.set_cancel_flag(flag); }
const std::string& InputStream::name() const { return impl_->file.name(); }
Compression InputStream::compression() const { return impl_->compression; }
std::uint64_t InputStream::stored_bytes_read() const { return impl_->file.bytes_read(); }

// ---------------------------------------------------------------------------------------------

InputLines::InputLines(std::vector<std::string> paths, std::size_t buffer_size, std::size_t longest_line)
    : paths_(std::move(paths)), longest_line_(longest_line) {
  for (const auto& p : paths_) names_.push_back(display_name_of(p));
  buffer_.resize(std::max<std::size_t>(buffer_size, 4096));
}

InputLines::~InputLines() = default;

void InputLines::set_cancel_flag(const std::atomic<bool>* flag) {
  cancel_ = flag;
  if (stream_) stream_->set_cancel_flag(flag);
}

std::uint64_t InputLines::stored_bytes_read() const {
  return finished_files_bytes_ + (stream_ ? stream_->stored_bytes_read() : 0);
}

bool InputLines::open_next_file() {
  if (stream_) finished_files_bytes_ += stream_->stored_bytes_read();
  stream_.reset();
  if (file_ >= paths_.size()) return false;
  stream_ = std::make_unique<InputStream>(paths_[file_], cancel_);
  ++file_;
  begin_ = end_ = scan_ = 0;
  eof_ = false;
  at_file_start_ = true;
  line_number_ = 0;
  return true;
}

bool InputLines::fill() {
  if (eof_) return false;
  if (begin_ > 0) {
    std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    scan_ -= begin_;
    begin_ = 0;
  }
  if (end_ == buffer_.size()) buffer_.resize(buffer_.size() * 2);  // a line longer than the buffer
  std::size_t got = stream_->read(buffer_.data() + end_, buffer_.size() - end_);
  if (got == 0) {
    eof_ = true;
    return false;
  }
  end_ += got;
  return true;
}

bool InputLines::next(InputLine& line) {
  for (;;) {
    if (!stream_ || (eof_ && begin_ == end_)) {
      if (!open_next_file()) return false;
      continue;
    }
    if (at_file_start_) {
      while (end_ - begin_ < 3 && fill()) {
      }
      if (end_ - begin_ >= 3 && std::memcmp(buffer_.data() + begin_, "\xEF\xBB\xBF", 3) == 0) {
        begin_ += 3;
        scan_ = begin_;
      }
      at_file_start_ = false;
      if (begin_ == end_) continue;
    }
    const char* base = buffer_.data();  // pointers are valid until the next fill()
    const char* scan = base + scan_;
    const char* end = base + end_;
    const char* nl = static_cast<const char*>(std::memchr(scan, '\n', end - scan));
    const char* stop = nl != nullptr ? nl : end;
    const char* cr = static_cast<const char*>(std::memchr(scan, '\r', stop - scan));
    const char* term = nullptr;
    std::size_t term_len = 1;
    if (cr != nullptr) {
      if (cr + 1 < end) {
        term = cr;
        term_len = cr[1] == '\n' ? 2 : 1;
      } else if (eof_) {
        term = cr;
      } else {
        // "\r" at the end of the buffer: whether "\n" follows decides the terminator's length.
        scan_ = static_cast<std::size_t>(cr - base);
        fill();
        continue;
      }
    } else if (nl != nullptr) {
      term = nl;
    }
    if (term == nullptr) {
      scan_ = end_;
      // A line past this has no line break in sight (a device such as /dev/zero, a binary file):
      // refused before it takes all memory. Real corpora's longest documents are megabytes.
      if (end_ - begin_ > longest_line_)
        throw Error(names_.at(file_ - 1) + ":" + std::to_string(line_number_ + 1) + ": no line break in " +
                    std::to_string(longest_line_) + " bytes: not a file of JSON lines");
      if (fill()) continue;
      if (begin_ == end_) continue;  // the file ended right after a terminator
      // The last line of the file, without terminator. fill() may have moved the buffer.
      base = buffer_.data();
      term = base + end_;
      term_len = 0;
    }
    std::size_t start = begin_;
    std::size_t stop_at = static_cast<std::size_t>(term - base);
    line.text = std::string_view(base + start, stop_at - start);
    line.file_index = static_cast<std::uint32_t>(file_ - 1);
    line.number = ++line_number_;
    line.stream_bytes = stop_at - start + term_len;
    begin_ = scan_ = stop_at + term_len;
    return true;
  }
}

}  // namespace mgt
