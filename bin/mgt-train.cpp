// mgt-train: pretrain a GPT model the way Megatron-LM's pretrain_gpt.py does, with its flags.
// Flags → TrainOptions (lib/train/train_options); all the work is in lib/train/trainer.
#include <cstdio>
#include <exception>

#include "core/error.hpp"
#include "train/train_options.hpp"
#include "train/trainer.hpp"

namespace {
constexpr const char* kProgram = "mgt-train";
}

int main(int argc, char** argv) {
  try {
    return mgt::run_training(mgt::parse_train_options(argc, argv));
  } catch (const mgt::Error& e) {
    std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", kProgram, e.what());
    return mgt::kExitFailure;
  }
}
