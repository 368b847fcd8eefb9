// The flags that say where and in what precision a program computes, the same in every program
// that runs a model (mgt-train, mgt-eval, mgt-generate): --device, --bf16 and --fp16.
#pragma once
#include <string>
#include <vector>

#include "core/flag_table.hpp"

namespace mgt {

class FlagValues;

// --bf16 / --fp16 choose the CUDA backend's reduced-precision compute (fp32 master weights and
// optimizer state when training). The CPU backend always computes in fp32 whatever is asked.
enum class Precision { Fp32, Bf16, Fp16 };

// "--bf16", "--fp16"; "" for Fp32, which no flag names.
std::string precision_flag_name(Precision precision);

// --device D: the backend's name as kernels/backend_factory.hpp reads it (checked there).
FlagDefinition device_flag(std::string& device);

// --bf16 and --fp16, each setting `precision`.
std::vector<FlagDefinition> precision_flags(Precision& precision);

// Megatron's argparse lets the later switch win; giving both is a mistake worth naming.
void check_one_precision_flag(const FlagValues& given);

}  // namespace mgt
