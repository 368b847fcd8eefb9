// --rampup-batch-size against Megatron's RampupBatchsizeNumMicroBatchesCalculator and
// update_train_iters: the values are tools/reference/rampup_batch_sizes.py's output.
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "data/batch_size_rampup.hpp"

using namespace mgt;

namespace {

void check_sizes(std::int64_t gbs, BatchSizeRampup rampup, const std::vector<std::pair<std::int64_t, std::int64_t>>& expected) {
  const GlobalBatchSizeSchedule schedule(gbs, rampup);
  for (const auto& [consumed, size] : expected) {
    INFO("consumed " << consumed);
    CHECK(schedule.global_batch_size(consumed) == size);
  }
}

std::string error_of(std::int64_t gbs, BatchSizeRampup rampup) {
  try {
    GlobalBatchSizeSchedule schedule(gbs, rampup);
  } catch (const Error& e) {
    CHECK(e.exit_code() == kExitUsage);
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("batch-size ramp-up: Megatron's sizes and iterations", "[data]") {
  check_sizes(16, {4, 4, 24}, {{0, 4}, {7, 4}, {8, 8}, {15, 8}, {16, 12}, {23, 12}, {24, 16}, {25, 16}, {100, 16}});
  CHECK(GlobalBatchSizeSchedule(16, BatchSizeRampup{4, 4, 24}).train_iters(100) == 8);
  check_sizes(96, {32, 32, 1000},
              {{0, 32}, {333, 32}, {334, 32}, {666, 64}, {667, 64}, {999, 64}, {1000, 96}, {1001, 96}});
  CHECK(GlobalBatchSizeSchedule(96, BatchSizeRampup{32, 32, 1000}).train_iters(5000) == 65);
  check_sizes(10, {1, 3, 7}, {{0, 1}, {2, 1}, {3, 4}, {4, 4}, {5, 7}, {6, 7}, {7, 10}, {8, 10}});
  CHECK(GlobalBatchSizeSchedule(10, BatchSizeRampup{1, 3, 7}).train_iters(50) == 8);

  // Without a ramp-up: whole batches of the global size.
  const GlobalBatchSizeSchedule constant(16, std::nullopt);
  CHECK(constant.global_batch_size(12345) == 16);
  CHECK(constant.train_iters(100) == 6);
  CHECK_FALSE(constant.ramps());

  CHECK(GlobalBatchSizeSchedule(16, BatchSizeRampup{4, 4, 24}).batch_sizes_used(8) == std::vector<std::int64_t>{4, 8, 12, 16});
  CHECK(GlobalBatchSizeSchedule(16, BatchSizeRampup{4, 4, 24}).batch_sizes_used(3) == std::vector<std::int64_t>{4, 8});
}

TEST_CASE("batch-size ramp-up: bad values name the flag", "[data]") {
  CHECK(error_of(16, {0, 4, 24}) == "--rampup-batch-size: the start batch size must be positive, not 0");
  CHECK(error_of(16, {4, 0, 24}) == "--rampup-batch-size: the batch size increment must be positive, not 0");
  CHECK(error_of(16, {4, 4, 0}) == "--rampup-batch-size: the ramp-up samples must be positive, not 0");
  CHECK(error_of(16, {32, 4, 24}) == "--rampup-batch-size: the start batch size (32) exceeds --global-batch-size (16)");
  CHECK(error_of(16, {16, 4, 24}) ==
        "--rampup-batch-size: the start batch size equals --global-batch-size (16); there is nothing to ramp up");
  CHECK(error_of(16, {4, 5, 24}) ==
        "--rampup-batch-size: --global-batch-size minus the start batch size (12) is not divisible by the increment (5)");
  CHECK(parse_rampup_batch_size({"4", "4", "24"}).samples == 24);
  CHECK_THROWS_WITH(parse_rampup_batch_size({"4", "4"}),
                    "--rampup-batch-size takes three values, START INCREMENT SAMPLES, not 2");
  CHECK_THROWS_WITH(parse_rampup_batch_size({"4", "x", "24"}), Catch::Contains("--rampup-batch-size"));
}
