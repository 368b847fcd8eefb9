// mgt-train: pretrain a GPT model the way Megatron-LM's pretrain_gpt.py does, with its flags, on
// one process or across ranks (mpiexec, srun). All the work is in lib/train (train_launch.hpp).
#include "core/program_main.hpp"
#include "train/train_launch.hpp"

int main(int argc, char** argv) {
  return mgt::run_program("mgt-train", argc, argv, [&] { return mgt::run_training_program(argc, argv); });
}
