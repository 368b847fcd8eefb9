// Where a training run's report goes: Megatron's printed lines (iteration lines, validation
// blocks, checkpoint and datetime lines) to one stream, standard output by default, and with
// --metrics-file the same values as JSON lines appended to that file. Both are flushed line by
// line so that a killed run leaves complete lines behind.
#pragma once
#include <fstream>
#include <optional>
#include <ostream>
#include <string>

namespace mgt {

class RunOutput {
public:
  // Opens (appending: a resumed run continues the file) the metrics file when given; throws
  // mgt::Error naming it when it cannot.
  RunOutput(std::ostream& lines, const std::optional<std::string>& metrics_path);

  void line(const std::string& text);
  void metrics(const std::string& json_object);  // ignored without a metrics file

private:
  std::ostream* lines_;
  std::optional<std::string> metrics_path_;
  std::ofstream metrics_;
};

}  // namespace mgt
