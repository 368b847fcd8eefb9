#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "core/error.hpp"
#include "dist/launch_environment.hpp"

using namespace mgt::dist;

namespace {

LaunchEnvironment launch_with(const std::map<std::string, std::string>& variables) {
  return read_launch_environment([&](const char* name) -> const char* {
    const auto it = variables.find(name);
    return it == variables.end() ? nullptr : it->second.c_str();
  });
}

std::string launch_error(const LaunchEnvironment& launch, int world_size) {
  try {
    check_launch(launch, world_size);
  } catch (const mgt::Error& e) {
    CHECK(e.exit_code() == mgt::kExitUsage);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a process with no launcher variables is a world of one", "[dist][launch]") {
  const LaunchEnvironment launch = launch_with({});
  CHECK_FALSE(launch.has_process_manager);
  CHECK(launch.expected_world_size == 1);
  CHECK(launch_error(launch, 1).empty());
}

TEST_CASE("process manager variables mean MPI must start", "[dist][launch]") {
  CHECK(launch_with({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"PMI_FD", "6"}}).has_process_manager);
  CHECK(launch_with({{"PMI_PORT", "host:1234"}}).has_process_manager);
  CHECK(launch_with({{"PMIX_RANK", "3"}}).has_process_manager);
  CHECK(launch_with({{"OMPI_COMM_WORLD_SIZE", "4"}}).has_process_manager);
  // Slurm's own variables alone are no process manager: srun without --mpi=pmi2.
  CHECK_FALSE(launch_with({{"SLURM_NTASKS", "4"}, {"SLURM_PROCID", "1"}}).has_process_manager);
}

TEST_CASE("N processes that would each be rank 0 of 1 are refused", "[dist][launch]") {
  const LaunchEnvironment slurm = launch_with({{"SLURM_NTASKS", "4"}});
  CHECK(slurm.expected_world_size == 4);
  const std::string message = launch_error(slurm, 1);
  CHECK_THAT(message, Catch::Contains("SLURM_NTASKS=4"));
  CHECK_THAT(message, Catch::Contains("srun --mpi=pmi2 -n 4"));
  CHECK_THAT(message, Catch::Contains("mpiexec -n 4"));
  CHECK(message.find('\n') == std::string::npos);

  CHECK_THAT(launch_error(launch_with({{"SLURM_NPROCS", "2"}}), 1),
             Catch::Contains("SLURM_NPROCS=2"));
  CHECK_THAT(launch_error(launch_with({{"OMPI_COMM_WORLD_SIZE", "3"}}), 1),
             Catch::Contains("OMPI_COMM_WORLD_SIZE=3"));
  CHECK_THAT(launch_error(launch_with({{"PMI_SIZE", "8"}, {"PMI_RANK", "0"}}), 1),
             Catch::Contains("PMI_SIZE=8"));
  // The world that formed is what the launcher announced: fine.
  CHECK(launch_error(slurm, 4).empty());
  CHECK(launch_error(launch_with({{"SLURM_NTASKS", "1"}}), 1).empty());
}

TEST_CASE("inside a job step the step's task count applies", "[dist][launch]") {
  // `srun -n 1 PROGRAM` in an allocation of 8 tasks.
  const LaunchEnvironment step =
      launch_with({{"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_NTASKS", "8"}});
  CHECK(step.expected_world_size == 1);
  CHECK(launch_error(step, 1).empty());
  // Garbage counts are ignored rather than trusted.
  CHECK(launch_with({{"SLURM_NTASKS", "four"}}).expected_world_size == 1);
}

TEST_CASE("a PMIx launch that MPI did not join says so", "[dist][launch]") {
  // srun --mpi=pmix -n 2 with an MPI library that speaks PMI-2 only: each process is a singleton.
  const LaunchEnvironment pmix = launch_with(
      {{"SLURM_MPI_TYPE", "pmix_v4"}, {"PMIX_RANK", "1"}, {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_NTASKS", "2"}});
  CHECK(pmix.has_process_manager);
  CHECK(pmix.pmix_from == "SLURM_MPI_TYPE=pmix_v4");
  const std::string message = launch_error(pmix, 1);
  CHECK_THAT(message, Catch::Contains("PMIx (SLURM_MPI_TYPE=pmix_v4)"));
  CHECK_THAT(message, Catch::Contains("srun --mpi=pmi2 -n 2"));
  CHECK(message.find('\n') == std::string::npos);
  CHECK(launch_with({{"PMIX_RANK", "0"}, {"SLURM_NTASKS", "4"}}).pmix_from == "PMIX_RANK");
  // One task under PMIx is a world of one, as asked; pmi2 is no PMIx.
  CHECK(launch_error(launch_with({{"SLURM_MPI_TYPE", "pmix"}, {"SLURM_STEP_NUM_TASKS", "1"}}), 1).empty());
  CHECK(launch_with({{"SLURM_MPI_TYPE", "pmi2"}, {"PMI_RANK", "0"}}).pmix_from.empty());
}

TEST_CASE("the launcher's rank is known before MPI starts", "[dist][launch]") {
  CHECK(launch_with({}).launcher_rank == 0);
  CHECK(launch_with({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}}).launcher_rank == 1);
  CHECK(launch_with({{"PMIX_RANK", "3"}}).launcher_rank == 3);
  CHECK(launch_with({{"OMPI_COMM_WORLD_RANK", "2"}}).launcher_rank == 2);
  CHECK(launch_with({{"SLURM_PROCID", "5"}}).launcher_rank == 5);
  // The process manager's own numbering first; a value that is not a rank is passed over.
  CHECK(launch_with({{"PMI_RANK", "1"}, {"SLURM_PROCID", "0"}}).launcher_rank == 1);
  CHECK(launch_with({{"PMI_RANK", "x"}, {"SLURM_PROCID", "4"}}).launcher_rank == 4);
  CHECK(launch_with({{"PMI_RANK", "-1"}}).launcher_rank == 0);
}
