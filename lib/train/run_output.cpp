#include "train/run_output.hpp"

#include "core/error.hpp"

namespace mgt {

RunOutput::RunOutput(std::ostream& lines, const std::optional<std::string>& metrics_path)
    : lines_(&lines), metrics_path_(metrics_path) {
  if (!metrics_path_) return;
  metrics_.open(*metrics_path_, std::ios::out | std::ios::app);
  if (!metrics_) throw Error(system_error_message("--metrics-file: cannot open", *metrics_path_));
}

void RunOutput::line(const std::string& text) {
  *lines_ << text << '\n';
  lines_->flush();
}

void RunOutput::metrics(const std::string& json_object) {
  if (!metrics_path_) return;
  metrics_ << json_object << '\n';
  metrics_.flush();
  if (!metrics_) throw Error(system_error_message("--metrics-file: cannot write", *metrics_path_));
}

}  // namespace mgt
