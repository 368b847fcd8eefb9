// The ranks' command lines compared: the arguments that must agree and the difference named.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "train/command_line_agreement.hpp"

using namespace mgt;
using Arguments = std::vector<std::string>;

TEST_CASE("ranks' command lines: the launcher's --local-rank is left out of the comparison", "[train]") {
  const char* argv[] = {"mgt-train", "--num-layers", "2", "--local-rank", "3", "--lr", "1e-3", "--local_rank=1"};
  CHECK(rank_independent_arguments(8, argv) == Arguments{"--num-layers", "2", "--lr", "1e-3"});
  const char* alone[] = {"mgt-train"};
  CHECK(rank_independent_arguments(1, alone).empty());
}

TEST_CASE("ranks' command lines: the first difference is named", "[train]") {
  const Arguments reference = {"--num-layers", "2", "--lr", "1e-3"};
  CHECK(command_line_difference(reference, reference).empty());
  CHECK(command_line_difference({"--num-layers", "4", "--lr", "1e-3"}, reference) ==
        "argument 2 is '4' there and '2' on rank 0");
  CHECK(command_line_difference({"--num-layers", "2"}, reference) ==
        "argument 3 is nothing there and '--lr' on rank 0");
  CHECK(command_line_difference({"--num-layers", "2", "--lr", "1e-3", "--bf16"}, reference) ==
        "argument 5 is '--bf16' there and nothing on rank 0");
}
