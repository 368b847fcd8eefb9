// mgt-train's entry point: the flags, the ranks, then the training.
//
//   mgt-train FLAGS                        one process, no MPI (a world of one)
//   mpiexec -n N mgt-train FLAGS           N ranks (MPICH's hydra, Open MPI)
//   srun --mpi=pmi2 mgt-train FLAGS        the job step's tasks (Slurm)
//
// The ranks are started with lib/dist (dist/distributed_runtime.hpp) before the flags are
// validated, because the data-parallel size is the world size divided by the model-parallel
// sizes. Every rank computes (tensor-parallel ranks their shards of each layer); world rank 0
// alone prints Megatron's lines, writes --metrics-file and the checkpoints, and the other ranks
// log warnings and errors only (rank-prefixed). A usage error is printed by rank 0 alone; all
// ranks exit with its status. On GPUs each rank of a machine takes
// its own device (--device auto or cuda; see device_of_rank in train_launch.cpp), and the groups
// communicate over NCCL, queued on the backend's stream, where dist/transport_choice.hpp allows
// (--distributed-backend nccl, one GPU per rank), over MPI otherwise; rank 0 says which.
//
// Built into mgt-train-launch, not into mgt: it starts MPI, which only the programs that run
// distributed link.
#pragma once

namespace mgt {

// Returns the exit code; throws mgt::Error (UsageError for bad flags) as the program reports them.
int run_training_program(int argc, const char* const* argv);

}  // namespace mgt
