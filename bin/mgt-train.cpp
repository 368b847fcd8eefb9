// mgt-train: pretrain a GPT model the way Megatron-LM's pretrain_gpt.py does, with its flags, on
// one process or across ranks (mpiexec, srun). All the work is in lib/train (train_launch.hpp).
#include <optional>

#include "core/program_main.hpp"
#include "core/signal_flag.hpp"
#include "train/exit_conditions.hpp"
#include "train/train_launch.hpp"

int main(int argc, char** argv) {
  // A notice to stop (Slurm's --signal before a time limit, a preemption's SIGTERM) may come while
  // the ranks still start MPI and the backend, before the run's exit-signal handler exists. Held
  // from the start, it stops the run at the end of its first iteration, as a later one would,
  // instead of killing the rank (and with it the job, which then is not requeued). It lives
  // until main returns: a held signal the run does not handle acts only after the error message.
  std::optional<mgt::SignalHold> hold;
  return mgt::run_program("mgt-train", argc, argv, [&] {
    hold.emplace(mgt::exit_signal_choices());
    return mgt::run_training_program(argc, argv);
  });
}
