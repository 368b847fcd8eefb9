#include "train/tensorboard_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "core/error.hpp"
#include "core/file_io.hpp"
#include "core/log.hpp"
#include "core/protobuf_writer.hpp"
#include "core/tfrecord.hpp"

namespace mgt {

namespace {

// Field numbers of event.proto's Event and summary.proto's Summary and Summary.Value.
constexpr int kEventWallTime = 1;     // double
constexpr int kEventStep = 2;         // int64
constexpr int kEventFileVersion = 3;  // string
constexpr int kEventSummary = 5;      // Summary
constexpr int kSummaryValue = 1;      // repeated Value
constexpr int kValueTag = 1;          // string
constexpr int kValueSimpleValue = 2;  // float

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0 || host[0] == '\0') return "localhost";
  return host;
}

}  // namespace

std::string file_version_event(double wall_time) {
  ProtobufWriter event;
  event.double_field(kEventWallTime, wall_time);
  event.bytes_field(kEventFileVersion, "brain.Event:2");
  return event.bytes();
}

std::string scalar_event(double wall_time, std::int64_t step, std::string_view tag, float value) {
  ProtobufWriter scalar;
  scalar.bytes_field(kValueTag, tag);
  scalar.float_field(kValueSimpleValue, value);
  ProtobufWriter summary;
  summary.bytes_field(kSummaryValue, scalar.bytes());
  ProtobufWriter event;
  event.double_field(kEventWallTime, wall_time);
  event.varint_field(kEventStep, static_cast<std::uint64_t>(step));
  event.bytes_field(kEventSummary, summary.bytes());
  return event.bytes();
}

std::string events_file_name(std::int64_t unix_seconds, std::string_view hostname, long pid) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%010lld", static_cast<long long>(unix_seconds));
  return "events.out.tfevents." + std::string(seconds) + "." + std::string(hostname) + "." + std::to_string(pid) +
         ".0";
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir, std::size_t queue_size)
    : queue_size_(queue_size == 0 ? 1 : queue_size) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error("--tensorboard-dir: cannot create '" + dir + "': " + ec.message());
  const double wall_time = now_seconds();
  path_ = (std::filesystem::path(dir) /
           events_file_name(static_cast<std::int64_t>(wall_time), host_name(), static_cast<long>(getpid())))
              .string();
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(system_error_message("--tensorboard-dir: cannot create", path_));
  write_records(tfrecord(file_version_event(wall_time)));
}

TensorBoardWriter::~TensorBoardWriter() {
  try {
    flush();
  } catch (const Error& e) {
    log::warn(e.what());
  }
  if (fd_ >= 0) ::close(fd_);
}

void TensorBoardWriter::add_scalar(std::string_view tag, double value, std::int64_t step) {
  // TensorBoard's scalars are float32, as SummaryWriter.add_scalar stores them.
  queued_ += tfrecord(scalar_event(now_seconds(), step, tag, static_cast<float>(value)));
  if (++queued_events_ >= queue_size_) flush();
}

void TensorBoardWriter::flush() {
  if (queued_.empty()) return;
  std::string records;
  records.swap(queued_);
  queued_events_ = 0;
  write_records(records);
}

void TensorBoardWriter::write_records(const std::string& records) {
  write_all(fd_, records.data(), records.size(), path_, "--tensorboard-dir: cannot write");
}

}  // namespace mgt
