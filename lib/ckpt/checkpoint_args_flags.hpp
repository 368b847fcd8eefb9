// --use-checkpoint-args: the model's flags taken from the arguments that the checkpoint --load
// names recorded, as Megatron's load_args_from_checkpoint (megatron/training/checkpointing.py,
// core_v0.13.0) sets them before validate_args, so that a fine-tuning script gives --load and
// leaves the architecture out.
//
// The command line is rewritten before it is parsed: for each argument Megatron takes from the
// checkpoint, the flag that records it (its key in the run description, core/flag_table.hpp) is
// given the recorded value. Sizes that Megatron takes only when the command line leaves them out
// (num_layers, hidden_size, ffn_hidden_size, seq_length, num_attention_heads, kv_channels,
// max_position_embeddings) keep a value given; the architecture's kinds (normalization,
// position embedding, biases, SwiGLU, query groups, dropouts, the MoE layer, the tokenizer type
// and model) replace the command line's, as Megatron forces them. Each one taken is printed as
// "Setting NAME to VALUE from checkpoint", as Megatron prints it. The tokenizer's model file is
// taken unless --no-use-tokenizer-model-from-checkpoint-args; its vocabulary and merge files are
// not (Megatron keeps them out too). With --use-mp-args-from-checkpoint-args the parallel layout
// too: the tensor-, pipeline- and expert-parallel sizes replace the command line's, the layers
// per virtual stage where it leaves them out (Megatron's virtual_pipeline_model_parallel_size is
// derived from those; mgt has no flag of that name).
#pragma once
#include <span>
#include <string>
#include <vector>

#include "core/flag_table.hpp"

namespace mgt {

struct CheckpointArgsCommandLine {
  std::vector<std::string> args;   // without the program's name
  std::vector<std::string> lines;  // what Megatron prints about it (rank 0)
};

// `args` as it is without --use-checkpoint-args; with it, rewritten as above from the checkpoint
// that --load (and --ckpt-step) names. `flags`: the program's table over default options (each
// switch's default says whether giving it sets true or false). Without a checkpoint, or one
// without arguments, `args` stays as it is and a line says so, as in Megatron. UsageError when
// --load is missing; mgt::Error when the checkpoint cannot be read.
CheckpointArgsCommandLine command_line_with_checkpoint_args(const std::vector<std::string>& args,
                                                            std::span<const FlagDefinition> flags);

}  // namespace mgt
