#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "train/lr_schedule.hpp"
#include "train/train_options.hpp"

using namespace mgt;

namespace {

LrScheduleConfig base_config(const std::string& style) {
  LrScheduleConfig c;
  c.max_lr = 1.0;
  c.min_lr = 0.1;
  c.lr_warmup_steps = 10;
  c.lr_decay_steps = 110;
  c.lr_decay_style = style;
  c.start_wd = c.end_wd = 0.01;
  c.wd_incr_steps = 110;
  return c;
}

double lr_at(OptimizerParamScheduler& s, std::int64_t steps) {
  s.step(steps - s.num_steps());
  return s.lr();
}

}  // namespace

TEST_CASE("lr schedule: linear warm-up then linear decay to min lr", "[train]") {
  OptimizerParamScheduler s(base_config("linear"));
  CHECK(s.lr() == 0.0);  // step 0 is inside the warm-up: init_lr
  CHECK(lr_at(s, 5) == Approx(0.5));
  CHECK(lr_at(s, 10) == 1.0);                   // end of warm-up: max lr exactly
  CHECK(lr_at(s, 60) == 0.55);                  // ratio 50/100: 0.1 + 0.5 × 0.9
  CHECK(lr_at(s, 85) == Approx(0.1 + 0.25 * 0.9));
  CHECK(lr_at(s, 110) == Approx(0.1));          // end of decay
  CHECK(lr_at(s, 111) == 0.1);                  // past it: min lr
  CHECK(lr_at(s, 100000) == 0.1);
}

TEST_CASE("lr schedule: warm-up starts at lr-warmup-init", "[train]") {
  auto c = base_config("linear");
  c.init_lr = 0.2;
  OptimizerParamScheduler s(c);
  CHECK(s.lr() == 0.2);
  // 0.2 + (1 − 0.2) × 5 / 10, in Megatron's order of operations (Python gives the same double).
  CHECK(lr_at(s, 5) == 0.6000000000000001);
}

TEST_CASE("lr schedule: cosine decay", "[train]") {
  OptimizerParamScheduler s(base_config("cosine"));
  CHECK(lr_at(s, 10) == 1.0);
  // ratio 0.25: 0.1 + 0.5 (cos(π/4) + 1) × 0.9 = 0.868198052; Python: 0.8681980515339464.
  CHECK(lr_at(s, 35) == 0.8681980515339464);
  CHECK(lr_at(s, 60) == Approx(0.55));
  CHECK(lr_at(s, 110) == Approx(0.1));
  CHECK(lr_at(s, 200) == 0.1);
}

TEST_CASE("lr schedule: constant keeps max lr even past the decay", "[train]") {
  OptimizerParamScheduler s(base_config("constant"));
  CHECK(lr_at(s, 5) == Approx(0.5));  // the warm-up still applies
  CHECK(lr_at(s, 11) == 1.0);
  CHECK(lr_at(s, 500) == 1.0);
}

TEST_CASE("lr schedule: inverse square root", "[train]") {
  auto c = base_config("inverse-square-root");
  c.max_lr = 3e-4;
  c.min_lr = 2e-5;
  c.lr_warmup_steps = 16;
  c.lr_decay_steps = 10000;
  OptimizerParamScheduler s(c);
  CHECK(lr_at(s, 8) == Approx(1.5e-4));
  CHECK(lr_at(s, 64) == 0.00015);         // 3e-4 × √16 / √64
  CHECK(lr_at(s, 1600) == Approx(3e-5));  // 3e-4 × 4 / 40
  CHECK(lr_at(s, 9000) == 2e-5);          // 3e-4 × 4 / 94.9 = 1.26e-5, held at min lr
  CHECK(lr_at(s, 10001) == 2e-5);

  c.lr_warmup_steps = 0;  // the warm-up term is max(warmup, 1)
  OptimizerParamScheduler t(c);
  CHECK(t.lr() == 3e-4);  // step max(0, 1) = 1
  CHECK(lr_at(t, 4) == Approx(1.5e-4));
}

TEST_CASE("lr schedule: WSD stays at max lr then anneals in every style", "[train]") {
  auto c = base_config("WSD");
  c.min_lr = 0.0;
  c.lr_warmup_steps = 0;
  c.lr_decay_steps = 100;
  c.wsd_decay_steps = 20;  // annealing from step 80
  struct Case {
    const char* style;
    double at90;
  };
  // r = 0.5 at step 90: linear 1 − r; cosine 0.5 (cos πr + 1); exponential 2·0.5^r − 1;
  // minus_sqrt 1 − √r. Python evaluates the last two to 0.41421356237309515 and 0.2928932188134524.
  for (Case k : {Case{"linear", 0.5}, Case{"cosine", 0.5}, Case{"exponential", 0.41421356237309515},
                 Case{"minus_sqrt", 0.2928932188134524}}) {
    INFO(k.style);
    c.lr_wsd_decay_style = k.style;
    OptimizerParamScheduler s(c);
    CHECK(s.lr() == 1.0);
    CHECK(lr_at(s, 50) == 1.0);
    CHECK(lr_at(s, 80) == 1.0);  // the anneal starts after step decay − wsd
    CHECK(lr_at(s, 90) == Approx(k.at90).margin(1e-15));
    CHECK(lr_at(s, 100) == Approx(0.0).margin(1e-15));
    CHECK(lr_at(s, 101) == 0.0);
  }
  c.lr_wsd_decay_style = "linear";
  c.min_lr = 0.1;
  OptimizerParamScheduler s(c);
  CHECK(lr_at(s, 95) == Approx(0.1 + 0.25 * 0.9));
}

TEST_CASE("lr schedule: fractional warm-up from --lr-warmup-fraction", "[train]") {
  auto c = base_config("linear");
  c.min_lr = 0.0;
  c.lr_decay_steps = 25;
  c.lr_warmup_steps = 0.1 * 25;  // 2.5 samples, kept fractional as in Megatron
  OptimizerParamScheduler s(c);
  CHECK(lr_at(s, 2) == Approx(0.8));
  CHECK(lr_at(s, 3) == 0.9777777777777777);  // 1 − 0.5 / 22.5
}

TEST_CASE("lr schedule: per-group max and min lr", "[train]") {
  OptimizerParamScheduler s(base_config("linear"));
  s.step(60);
  CHECK(s.lr(2.0, 0.0) == Approx(1.0));
  CHECK(s.lr() == 0.55);
}

TEST_CASE("weight decay: constant, linear and cosine increments", "[train]") {
  auto c = base_config("linear");
  OptimizerParamScheduler constant(c);
  CHECK(constant.weight_decay() == 0.01);
  constant.step(1000);
  CHECK(constant.weight_decay() == 0.01);

  c.start_wd = 0.0;
  c.end_wd = 0.1;
  c.wd_incr_steps = 100;
  c.wd_incr_style = "linear";
  OptimizerParamScheduler linear(c);
  CHECK(linear.weight_decay() == 0.0);
  linear.step(25);
  CHECK(linear.weight_decay() == Approx(0.025));
  linear.step(75);
  CHECK(linear.weight_decay() == Approx(0.1));
  linear.step(1);
  CHECK(linear.weight_decay() == 0.1);  // past the increment: end_wd

  c.wd_incr_style = "cosine";
  OptimizerParamScheduler cosine(c);
  CHECK(cosine.weight_decay() == Approx(0.0).margin(1e-18));
  cosine.step(25);
  // 0.5 (cos(π·0.75) + 1) × 0.1 = 0.0146446609; Python: 0.014644660940672627.
  CHECK(cosine.weight_decay() == 0.014644660940672627);
  cosine.step(25);
  CHECK(cosine.weight_decay() == Approx(0.05));
  cosine.step(50);
  CHECK(cosine.weight_decay() == Approx(0.1));
}

TEST_CASE("lr schedule: Megatron's constructor checks", "[train]") {
  auto c = base_config("linear");
  c.lr_warmup_steps = 110;
  CHECK_THROWS_AS(OptimizerParamScheduler(c), Error);
  c = base_config("linear");
  c.min_lr = 2.0;
  CHECK_THROWS_AS(OptimizerParamScheduler(c), Error);
  c = base_config("WSD");
  CHECK_THROWS_AS(OptimizerParamScheduler(c), Error);  // no wsd_decay_steps
  c = base_config("linear");
  c.init_lr = 1.5;
  CHECK_THROWS_AS(OptimizerParamScheduler(c), Error);
  c = base_config("linear");
  c.end_wd = 0.02;  // constant style with different start and end
  CHECK_THROWS_AS(OptimizerParamScheduler(c), Error);
}

TEST_CASE("lr schedule: state round trip and resume policies", "[train]") {
  auto c = base_config("cosine");
  OptimizerParamScheduler a(c);
  a.step(40);
  const LrSchedulerState st = a.state();
  CHECK(st.num_steps == 40);
  CHECK(st.max_lr == 1.0);
  CHECK(st.lr_warmup_steps == 10.0);
  CHECK(st.lr_decay_steps == 110);
  CHECK(st.lr_decay_style == "cosine");
  CHECK(st.min_lr == 0.1);
  CHECK(st.wd_incr_style == "constant");
  CHECK(st.wd_incr_steps == 110);

  OptimizerParamScheduler b(c);
  b.load_state(st, SchedulerResume::RequireMatch);
  CHECK(b.num_steps() == 40);
  CHECK(b.lr() == a.lr());

  auto changed = c;
  changed.max_lr = 2.0;
  OptimizerParamScheduler strict(changed);
  CHECK_THROWS_AS(strict.load_state(st, SchedulerResume::RequireMatch), Error);

  OptimizerParamScheduler from_checkpoint(changed);
  from_checkpoint.load_state(st, SchedulerResume::UseCheckpoint);
  CHECK(from_checkpoint.config().max_lr == 1.0);
  CHECK(from_checkpoint.lr() == a.lr());

  OptimizerParamScheduler from_flags(changed);
  from_flags.load_state(st, SchedulerResume::Override);
  CHECK(from_flags.config().max_lr == 2.0);
  CHECK(from_flags.num_steps() == 40);
}

namespace {

TrainOptions schedule_options(std::vector<std::string> extra) {
  std::vector<std::string> args = {"mgt-train", "--num-layers", "2", "--hidden-size", "64",
                                   "--num-attention-heads", "4", "--seq-length", "32",
                                   "--max-position-embeddings", "64", "--micro-batch-size", "2",
                                   "--global-batch-size", "8", "--lr", "1e-3", "--mock-data",
                                   "--tokenizer-type", "NullTokenizer", "--vocab-size", "100"};
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_train_options(static_cast<int>(argv.size()), argv.data());
}

}  // namespace

TEST_CASE("lr schedule config: iteration-based flags become samples", "[train]") {
  auto c = lr_schedule_config(schedule_options({"--train-iters", "100", "--lr-warmup-iters", "10"}));
  CHECK(c.max_lr == 1e-3);
  CHECK(c.lr_decay_steps == 800);  // --lr-decay-iters defaults to --train-iters; × gbs 8
  CHECK(c.lr_warmup_steps == 80.0);
  CHECK(c.wd_incr_steps == 800);
  CHECK_FALSE(c.wsd_decay_steps);
  CHECK(c.start_wd == 0.01);
  CHECK(c.end_wd == 0.01);

  c = lr_schedule_config(schedule_options({"--train-iters", "100", "--lr-decay-iters", "50",
                                           "--lr-warmup-fraction", "0.01", "--lr-decay-style", "WSD",
                                           "--lr-wsd-decay-iters", "20", "--min-lr", "1e-4"}));
  CHECK(c.lr_decay_steps == 400);
  CHECK(c.lr_warmup_steps == 4.0);  // a fraction of the decay steps, not of the run
  CHECK(c.wd_incr_steps == 800);
  CHECK(c.wsd_decay_steps == 160);
  CHECK(c.min_lr == 1e-4);
  CHECK(c.lr_decay_style == "WSD");
}

TEST_CASE("lr schedule config: sample-based flags are used as they are", "[train]") {
  auto o = schedule_options({"--train-samples", "1000", "--lr-warmup-samples", "100", "--lr-wsd-decay-samples",
                             "200", "--weight-decay-incr-style", "linear", "--start-weight-decay", "0.0",
                             "--end-weight-decay", "0.1", "--lr-warmup-init", "1e-5"});
  CHECK(o.total_train_iters() == 125);
  auto c = lr_schedule_config(o);
  CHECK(c.lr_decay_steps == 1000);
  CHECK(c.lr_warmup_steps == 100.0);
  CHECK(c.wd_incr_steps == 1000);
  CHECK(c.wsd_decay_steps == 200);
  CHECK(c.init_lr == 1e-5);
  CHECK(c.start_wd == 0.0);
  CHECK(c.end_wd == 0.1);
  CHECK(c.wd_incr_style == "linear");
  OptimizerParamScheduler s(c);
  s.step(50);
  CHECK(s.lr() == Approx(1e-5 + (1e-3 - 1e-5) * 0.5));
}

TEST_CASE("lr schedule config: resume policy flags", "[train]") {
  CHECK(scheduler_resume(schedule_options({"--train-iters", "10"})) == SchedulerResume::RequireMatch);
  CHECK(scheduler_resume(schedule_options({"--train-iters", "10", "--override-opt_param-scheduler"})) ==
        SchedulerResume::Override);
  CHECK(scheduler_resume(schedule_options({"--train-iters", "10", "--use-checkpoint-opt_param-scheduler"})) ==
        SchedulerResume::UseCheckpoint);
  CHECK_THROWS_AS(schedule_options({"--train-iters", "10", "--override-opt_param-scheduler",
                                    "--use-checkpoint-opt_param-scheduler"}),
                  Error);
}
