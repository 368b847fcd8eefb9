// mgt-train's own configuration flags: --dp-collectives (where the data-parallel collectives run)
// and --profile's options (--profile-gemms, --profile-timeline), parsed, checked and recorded in
// the run description, and the backend options each rank gets from them.
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "train/rank_backend_options.hpp"
#include "train/run_description.hpp"
#include "train/train_options.hpp"

using namespace mgt;

namespace {

const std::vector<std::string> kMinimal = {
    "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
    "--max-position-embeddings", "64", "--micro-batch-size", "2", "--lr", "1e-3", "--train-iters", "10",
    "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "100"};

TrainOptions parse(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"mgt-train"};
  args.insert(args.end(), kMinimal.begin(), kMinimal.end());
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse_train_options(static_cast<int>(argv.size()), argv.data());
}

bool records(const TrainOptions& o, const std::string& line) {
  return train_args_json(o, 128).find(line) != std::string::npos;
}

}  // namespace

TEST_CASE("mgt-train --dp-collectives: copy-engines by default, nccl on request, recorded", "[train]") {
  const TrainOptions plain = parse({});
  CHECK(plain.parallel.dp_collectives == "copy-engines");
  CHECK(records(plain, "\"dp_collectives\": \"copy-engines\","));
  const TrainOptions nccl = parse({"--dp-collectives", "nccl"});
  CHECK(nccl.parallel.dp_collectives == "nccl");
  CHECK(records(nccl, "\"dp_collectives\": \"nccl\","));
  try {
    parse({"--dp-collectives", "kernels"});
    FAIL("--dp-collectives kernels accepted");
  } catch (const Error& e) {
    CHECK(e.exit_code() == kExitUsage);
    CHECK_THAT(e.what(), Catch::Contains("--dp-collectives") && Catch::Contains("kernels"));
  }
}

TEST_CASE("mgt-train --profile's options: recorded, and refused without --profile", "[train]") {
  const TrainOptions plain = parse({});
  CHECK(records(plain, "\"profile_gemms\": false,"));
  CHECK(records(plain, "\"profile_timeline\": null,"));
  const TrainOptions profiled = parse({"--profile", "--profile-gemms", "--profile-timeline", "ops.csv"});
  CHECK(profiled.logging.profile_gemms);
  CHECK(records(profiled, "\"profile\": true,"));
  CHECK(records(profiled, "\"profile_gemms\": true,"));
  CHECK(records(profiled, "\"profile_timeline\": \"ops.csv\","));
  CHECK_THROWS_WITH(parse({"--profile-gemms"}), "--profile-gemms needs --profile");
  CHECK_THROWS_WITH(parse({"--profile-timeline", "ops.csv"}), "--profile-timeline needs --profile");
  CHECK_THROWS_WITH(parse({"--profile", "--profile-timeline", ""}), "--profile-timeline: expected a file name, got ''");
}

TEST_CASE("each rank's backend options: the profile on the ranks of --profile-ranks only", "[train]") {
  const BackendOptions none = rank_backend_options(parse({"--profile-gemms", "--profile"}).logging, 1);
  CHECK_FALSE(none.profile);
  CHECK_FALSE(none.profile_gemms);
  CHECK(rank_backend_options(parse({}).logging, 0).profile == false);

  const LoggingOptions one = parse({"--profile", "--profile-gemms", "--profile-timeline", "t.csv"}).logging;
  const BackendOptions rank0 = rank_backend_options(one, 0);
  CHECK(rank0.profile);
  CHECK(rank0.profile_gemms);
  CHECK(rank0.profile_timeline == "t.csv");

  const LoggingOptions two =
      parse({"--profile", "--profile-ranks", "0", "3", "--profile-timeline", "t.csv"}).logging;
  CHECK(rank_backend_options(two, 3).profile_timeline == "t.csv.rank3");
  CHECK(rank_backend_options(two, 0).profile_timeline == "t.csv.rank0");
  CHECK_FALSE(rank_backend_options(two, 0).profile_gemms);
  CHECK_FALSE(rank_backend_options(two, 1).profile);
  CHECK(rank_backend_options(two, 1).profile_timeline.empty());
}

namespace {

// Parsed only: validated for the world size a launcher would give.
TrainOptions parsed_only(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"mgt-train"};
  args.insert(args.end(), kMinimal.begin(), kMinimal.end());
  args.insert(args.end(), extra.begin(), extra.end());
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return read_train_options(static_cast<int>(argv.size()), argv.data());
}

}  // namespace

TEST_CASE("mgt-train --simulated-nodes: 1 by default, recorded, a divisor of the world size", "[train]") {
  const TrainOptions plain = parse({});
  CHECK(plain.parallel.simulated_nodes == 1);
  CHECK(records(plain, "\"simulated_nodes\": 1,"));
  TrainOptions two = parsed_only({"--simulated-nodes", "2"});
  validate_train_options(two, 4);
  CHECK(two.parallel.simulated_nodes == 2);
  CHECK(records(two, "\"simulated_nodes\": 2,"));
  for (const auto& [flag, world] : std::vector<std::pair<std::string, int>>{{"2", 1}, {"2", 3}, {"0", 4}}) {
    TrainOptions o = parsed_only({"--simulated-nodes", flag});
    try {
      validate_train_options(o, world);
      FAIL("--simulated-nodes " << flag << " accepted for a world of " << world);
    } catch (const Error& e) {
      CHECK(e.exit_code() == kExitUsage);
      CHECK(std::string(e.what()) == "--simulated-nodes " + flag + ": expected a positive divisor of the world size (" +
                                         std::to_string(world) + ")");
    }
  }
}
