// The order in which data-parallel ranks read a split (train/sample_order.hpp): the cyclic order
// against a reference written from Megatron's MegatronPretrainingRandomSampler and cyclic_iter
// (tools/reference/megatron_random_sampler_reference.py, plain Python), across epochs, from a
// resumed position, with and without data sharding; the single order and its errors.
#include <catch2/catch.hpp>

#include <simdjson.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "test_paths.hpp"
#include "train/sample_order.hpp"

using namespace mgt;

namespace {

struct OrderCase {
  std::int64_t total, micro, ranks;
  bool sharding;
  std::int64_t consumed, micro_batches;
};

void check_against_megatron(const OrderCase& c, int number) {
  INFO("total " << c.total << ", micro " << c.micro << ", ranks " << c.ranks << ", sharding " << c.sharding
                << ", consumed " << c.consumed);
  std::string name = "sample_order_";
  name += std::to_string(number);
  const std::string dir = test::scratch_dir(name);
  std::ofstream(dir + "/in.json") << "{\"total_samples\":" << c.total << ",\"micro_batch_size\":" << c.micro
                                  << ",\"data_parallel_size\":" << c.ranks << ",\"data_sharding\":"
                                  << (c.sharding ? "true" : "false") << ",\"consumed_samples\":" << c.consumed
                                  << ",\"micro_batches\":" << c.micro_batches << "}";
  std::ostringstream command;
  command << "python3 " << MGT_SOURCE_DIR << "/tools/reference/megatron_random_sampler_reference.py " << dir
          << "/in.json " << dir << "/out.json";
  REQUIRE(std::system(command.str().c_str()) == 0);
  simdjson::dom::parser parser;
  const simdjson::padded_string text = simdjson::padded_string::load(dir + "/out.json");
  const simdjson::dom::element want = parser.parse(text);
  for (std::int64_t rank = 0; rank < c.ranks; ++rank) {
    SampleOrderSettings s;
    s.split_samples = c.total;
    s.micro_batch_size = c.micro;
    s.data_parallel_size = c.ranks;
    s.data_parallel_rank = rank;
    s.cyclic = true;
    s.data_sharding = c.sharding;
    SampleOrder order(s);
    const simdjson::dom::array batches = want["ranks"].at(static_cast<std::size_t>(rank));
    std::int64_t consumed = c.consumed;
    for (const simdjson::dom::element batch : batches) {
      std::vector<std::int64_t> expected;
      for (const std::int64_t index : batch.get_array()) expected.push_back(index);
      INFO("rank " << rank << ", consumed " << consumed);
      CHECK(order.micro_batch(consumed) == expected);
      consumed += c.micro * c.ranks;
    }
  }
}

}  // namespace

TEST_CASE("sample order: the cyclic order is Megatron's random sampler, epoch after epoch", "[train]") {
  // 3 epochs and more of each; a remainder the epochs leave out; a resumed position mid-epoch.
  const OrderCase cases[] = {
      {40, 2, 2, true, 0, 35},   {43, 2, 2, true, 8, 35},   {43, 3, 2, false, 12, 30},
      {100, 2, 4, false, 0, 40}, {57, 1, 1, true, 20, 130}, {30, 4, 3, true, 12, 12},
  };
  int number = 0;
  for (const OrderCase& c : cases) check_against_megatron(c, number++);
}

TEST_CASE("sample order: single, its wrap-around and its errors", "[train]") {
  SampleOrderSettings s;
  s.split_samples = 10;
  s.micro_batch_size = 2;
  s.data_parallel_size = 2;
  s.data_parallel_rank = 1;
  s.split_name = "valid";
  SampleOrder order(s);
  CHECK(order.micro_batch(4) == std::vector<std::int64_t>{6, 7});
  CHECK_THROWS_WITH(order.micro_batch(8), "the valid split ran out of samples: sample 10 was asked for and it has 10");
  s.wrap = true;
  CHECK(SampleOrder(s).micro_batch(8) == std::vector<std::int64_t>{0, 1});
  s.cyclic = true;
  s.split_samples = 3;
  CHECK_THROWS_WITH(SampleOrder(s).micro_batch(0),
                    Catch::Contains("fewer than one micro-batch for each data-parallel rank (4)"));
  s.split_samples = 12;
  CHECK_THROWS_WITH(SampleOrder(s).micro_batch(2), Catch::Contains("not a whole number of micro-batches"));
}
