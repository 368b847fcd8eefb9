// A TensorBoard event file of scalars, as torch.utils.tensorboard.SummaryWriter (what Megatron's
// --tensorboard-dir uses) writes it: TFRecord-framed Event protocol buffers
// (tensorboard/compat/proto/event.proto, summary.proto), the first one naming the file version
// "brain.Event:2", then one Event per scalar with Summary.Value{tag, simple_value}.
//
// The file is opened for appending and only whole records are written, each batch with one
// write(2): a run killed at any point leaves a file TensorBoard reads up to its last whole record
// (a kill during a write can cut that write short at a page boundary; TensorBoard's loader stops
// before a record cut short, as it does before one still being written).
// Events are held in memory until `queue_size` of them wait, or until flush().
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mgt {

// The Event records (framing excluded), for tests and the writer.
std::string file_version_event(double wall_time);
std::string scalar_event(double wall_time, std::int64_t step, std::string_view tag, float value);

// "events.out.tfevents.0001700000000.HOST.PID.0": SummaryWriter's name, which TensorBoard finds
// by its "tfevents" part; the process id keeps runs started in the same second apart.
std::string events_file_name(std::int64_t unix_seconds, std::string_view hostname, long pid);

class TensorBoardWriter {
public:
  // Creates `dir` (and its parents) when missing and a new events file in it, and writes the
  // file-version record at once. Throws mgt::Error naming --tensorboard-dir on failure.
  TensorBoardWriter(const std::string& dir, std::size_t queue_size);
  ~TensorBoardWriter();  // writes what is queued; errors there are reported, not thrown
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // A scalar at `step`, stamped with the current time.
  void add_scalar(std::string_view tag, double value, std::int64_t step);
  // Writes the queued events. Throws mgt::Error naming the file when the write fails.
  void flush();

  const std::string& path() const { return path_; }

private:
  void write_records(const std::string& records);

  std::string path_;
  int fd_ = -1;
  std::size_t queue_size_;
  std::size_t queued_events_ = 0;
  std::string queued_;  // framed records not yet written
};

}  // namespace mgt
