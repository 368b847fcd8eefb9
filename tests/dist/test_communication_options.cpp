// The typed communication options the programs build from their flags (nccl_communicator.hpp).
#include <catch2/catch.hpp>

#include "core/error.hpp"
#include "dist/nccl_communicator.hpp"

using namespace mgt;
using namespace mgt::dist;

TEST_CASE("--dp-collectives names the data-parallel collectives' route", "[dist]") {
  CHECK(parse_data_parallel_collectives("copy-engines") == DataParallelCollectives::kCopyEngines);
  CHECK(parse_data_parallel_collectives("nccl") == DataParallelCollectives::kNccl);
  CHECK(CommunicationOptions{}.data_parallel == DataParallelCollectives::kCopyEngines);
  CHECK_THROWS_WITH(parse_data_parallel_collectives("NCCL"), "--dp-collectives: expected copy-engines or nccl, got 'NCCL'");
  CHECK_THROWS_WITH(parse_data_parallel_collectives(""), "--dp-collectives: expected copy-engines or nccl, got ''");
}
