#include "train/scheduler_state_json.hpp"

#include "core/json_scalars.hpp"
#include "core/json_text.hpp"

namespace mgt {

std::string scheduler_state_json(const LrSchedulerState& s) {
  auto real = [](double v) { return json_float(v); };
  return "{\"max_lr\": " + real(s.max_lr) + ", \"lr_warmup_steps\": " + real(s.lr_warmup_steps) +
         ", \"num_steps\": " + std::to_string(s.num_steps) + ", \"lr_decay_style\": " + json_quote(s.lr_decay_style) +
         ", \"lr_decay_steps\": " + std::to_string(s.lr_decay_steps) + ", \"min_lr\": " + real(s.min_lr) +
         ", \"start_wd\": " + real(s.start_wd) + ", \"end_wd\": " + real(s.end_wd) +
         ", \"wd_incr_style\": " + json_quote(s.wd_incr_style) + ", \"wd_incr_steps\": " +
         std::to_string(s.wd_incr_steps) + "}";
}

LrSchedulerState parse_scheduler_state_json(const std::string& text, const std::string& what) {
  JsonScalars j(text, what);
  LrSchedulerState s;
  s.max_lr = j.real("max_lr");
  s.lr_warmup_steps = j.real("lr_warmup_steps");
  s.num_steps = j.integer("num_steps");
  s.lr_decay_style = j.text("lr_decay_style");
  s.lr_decay_steps = j.integer("lr_decay_steps");
  s.min_lr = j.real("min_lr");
  s.start_wd = j.real("start_wd");
  s.end_wd = j.real("end_wd");
  s.wd_incr_style = j.text("wd_incr_style");
  s.wd_incr_steps = j.integer("wd_incr_steps");
  return s;
}

}  // namespace mgt
