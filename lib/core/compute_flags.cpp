#include "core/compute_flags.hpp"

#include "core/cxxopts_command_line.hpp"
#include "core/error.hpp"

namespace mgt {

std::string precision_flag_name(Precision precision) {
  switch (precision) {
    case Precision::Bf16: return "--bf16";
    case Precision::Fp16: return "--fp16";
    case Precision::Fp32: break;
  }
  return "";
}

FlagDefinition device_flag(std::string& device) {
  return store("device", "D", device, "compute device: auto (a GPU when one is visible), cpu, cuda or cuda:N");
}

std::vector<FlagDefinition> precision_flags(Precision& precision) {
  return {
      store_true_as("bf16", precision, Precision::Bf16,
                    "bf16 weights and activations on CUDA; the CPU backend computes in fp32"),
      store_true_as("fp16", precision, Precision::Fp16,
                    "fp16 weights and activations on CUDA (with loss scaling when training); the CPU backend "
                    "computes in fp32"),
  };
}

void check_one_precision_flag(const FlagValues& given) {
  if (given.has("bf16") && given.has("fp16")) throw UsageError("--bf16 and --fp16 are mutually exclusive");
}

}  // namespace mgt
