#include "ckpt/convert_command_line.hpp"

#include <map>
#include <optional>

#include "ckpt/hf_directory_files.hpp"
#include "ckpt/safetensors_model_files.hpp"
#include "core/cxxopts_command_line.hpp"
#include "core/error.hpp"
#include "core/flag_table.hpp"
#include "core/megatron_compatibility.hpp"

namespace mgt {

namespace {

constexpr const char* kProgram = "mgt-ckpt-convert";

// convert.py (and its plugins') flags that mgt does not implement, with the reason.
const std::map<std::string, std::string> kRefusedFlags = {
    {"--megatron-path", "mgt needs no Megatron-LM source tree"},
    {"--loader-transformer-impl", "mgt checkpoints have one layout (Megatron's local spec names)"},
    {"--saver-transformer-impl", "mgt checkpoints have one layout (Megatron's local spec names)"},
    {"--position-embedding-type", "the position embedding is read from the checkpoint"},
    {"--target-expert-parallel-size",
     "mgt checkpoints name experts by their global number and load at any --expert-model-parallel-size: there is "
     "nothing to reshard"},
    {"--bf16", "mgt checkpoints keep fp32 weights; --hf-dtype bf16 writes a Hugging Face export in bf16"},
    {"--fp16", "mgt checkpoints keep fp32 weights; --hf-dtype fp16 writes a Hugging Face export in fp16"},
};

// The flags convert.py's llama_mistral loader requires (mixtral_hf's --tokenizer-model too):
// accepted, so that its command lines run unchanged, and named on one line, since the hf loader
// takes all they say from config.json.
const std::map<std::string, IgnoredFlag>& llama_mistral_loader_flags() {
  static const std::map<std::string, IgnoredFlag> flags = {
      {"--checkpoint-type",
       {FlagArity::One, "the hf loader reads Hugging Face directories", {"meta", "hf"}, false,
        {{"meta", "Meta's original Llama checkpoints are not read; convert them to Hugging Face format first"}}}},
      {"--model-size", {FlagArity::One, "the architecture is read from config.json", {}, false, {}}},
      {"--tokenizer-model",
       {FlagArity::One, "a conversion records no tokenizer model; give it to mgt-train, mgt-eval and mgt-generate",
        {}, false, {}}},
  };
  return flags;
}

// The values of the flags as given; to_convert_options resolves the aliases and the pairs.
struct ConvertFlagFields {
  ConvertOptions options;
  std::string model_type;
  std::string loader;
  std::string saver;
  std::optional<std::int64_t> max_queue_size;
  bool no_checking = false;
  std::optional<std::string> hf_model_type;
  std::optional<std::string> hf_dtype;
  std::optional<std::string> max_shard_size;
  std::optional<std::int64_t> target_tensor_parallel_size;
  std::optional<std::int64_t> target_pipeline_parallel_size;
  std::optional<std::int64_t> target_data_parallel_size;
  bool target_use_distributed_optimizer = false;
  bool target_no_distributed_optimizer = false;
};

// convert.py's flags (and its core loader's and saver's) are Megatron's though not its pretraining
// parser's, hence megatron_flag(). Ranges of numbers: core/flag_ranges.cpp.
// clang-format off
std::vector<FlagDefinition> convert_flags(ConvertFlagFields& f) {
  ConvertOptions& o = f.options;
  return flag_groups({
    {"convert", {
      store("model-type", "GPT", f.model_type, "Model type; GPT is the only one").required("GPT").megatron_flag(),
      store("loader", "NAME", f.loader, "Format to read: mgt (aliases core, legacy, mcore, megatron) or hf (aliases llama_mistral, mixtral_hf)")
          .required("mgt or hf").megatron_flag(),
      store("saver", "NAME", f.saver, "Format to write: mgt (aliases core, legacy, mcore, megatron) or hf")
          .required("mgt or hf").megatron_flag(),
      store("load-dir", "DIR", o.load_dir, "Checkpoint to read: an mgt save or iteration directory, or a Hugging Face model directory")
          .required().megatron_flag(),
      store("save-dir", "DIR", o.save_dir, "Directory to write; must not exist or be empty").required().megatron_flag(),
      store("max-queue-size", "N", f.max_queue_size, "Accepted for convert.py compatibility; mgt converts in one process")
          .megatron_flag(),
      store_true("no-checking", f.no_checking, "Accepted for convert.py compatibility; tensors are always checked").megatron_flag(),
    }},
    {"vocabulary", {
      store("true-vocab-size", "N", o.true_vocab_size, "Keep only the first N rows of the word embedding")
          .default_text("keep every padded row, so that logits match exactly").megatron_flag(),
      store("make-vocab-size-divisible-by", "N", o.make_vocab_size_divisible_by, "Pad the word embedding with zero rows to a multiple of N")
          .default_text("no padding"),
      store("vocab-file", "FILE", o.vocab_file, "--saver mgt: GPT-2 vocabulary file of the tokenizer to record"),
      store("merge-file", "FILE", o.merge_file, "--saver mgt: GPT-2 merges file of the tokenizer to record"),
    }},
    {"model", {
      store("seq-length", "N", o.seq_length, "--loader hf: sequence length of the model")
          .default_text("n_positions or max_position_embeddings"),
    }},
    {"hugging face", {
      store("hf-model-type", "TYPE", f.hf_model_type, "with --saver hf, the architecture to write: gpt2, llama, mistral, mixtral, qwen2_moe, qwen3 or qwen3_moe")
          .default_text("the one read, else qwen3 (qwen3_moe for a mixture of experts) for query and key norms, "
                        "qwen2_moe for a mixture of experts with a gated shared expert, mixtral "
                        "for another, gpt2 for learned positions and llama for rotary ones"),
      store("hf-dtype", "DTYPE", f.hf_dtype, "with --saver hf, the dtype of the exported weights: fp32, bf16 or fp16")
          .default_text("fp32"),
      store("max-shard-size", "SIZE", f.max_shard_size, "with --saver hf, the largest safetensors file before the weights "
            "are split into shards with model.safetensors.index.json, like save_pretrained; also in MB, GiB, ...")
          .default_text("5GB"),
    }},
    {"parallelism", {
      store("target-tensor-parallel-size", "N", f.target_tensor_parallel_size, "--saver mgt: tensor-parallel size to write")
          .default_text("the source's; 1 from Hugging Face").megatron_flag(),
      store("target-pipeline-parallel-size", "N", f.target_pipeline_parallel_size, "--saver mgt: pipeline-parallel size to write")
          .default_text("the source's; 1 from Hugging Face").megatron_flag(),
      store("target-data-parallel-size", "N", f.target_data_parallel_size, "with --saver mgt, the data-parallel size whose "
            "ranks get a distributed-optimizer shard each").default_text("the source's"),
      store_true("target-use-distributed-optimizer", f.target_use_distributed_optimizer, "with --saver mgt, store the "
                 "optimizer state per data-parallel rank (default: as the source)"),
      store_true("target-no-distributed-optimizer", f.target_no_distributed_optimizer, "with --saver mgt, store the "
                 "optimizer state with the weights, one copy per model-parallel rank"),
    }},
  });
}
// clang-format on

const std::vector<std::string> kHelpGroups = {"convert", "vocabulary", "model", "hugging face", "parallelism"};

cxxopts::Options make_options() {
  cxxopts::Options o(kProgram,
                     "Convert GPT checkpoints between mgt's format and Hugging Face GPT-2, Llama, Mistral, Mixtral and Qwen2-MoE "
                     "(config.json + safetensors), like Megatron-LM's tools/checkpoint/convert.py.");
  o.custom_help("--model-type GPT --loader mgt|hf --saver mgt|hf --load-dir DIR --save-dir DIR [options]");
  ConvertFlagFields defaults;  // --help describes the defaults
  declare_flags(o, convert_flags(defaults));
  o.add_options("parallelism")("h,help", "Show this help");
  add_version_flag(o, "parallelism");
  return o;
}

// convert.py is not a pretraining script: an unknown flag is just unknown.
CommandLineRules command_line_rules() {
  ConvertFlagFields defaults;
  CommandLineRules rules{flag_arities(convert_flags(defaults)), kRefusedFlags, false, llama_mistral_loader_flags()};
  rules.known["--version"] = FlagArity::None;  // answered before parsing (core/program_main.hpp)
  return rules;
}

// convert.py's plugin names, so that its command lines run unchanged. Its own checkpoint
// plugins (core, legacy, and the older names mcore and megatron) stand for Megatron's checkpoint
// format, which mgt's takes the place of: a script converting Megatron checkpoints converts mgt's.
// Its llama_mistral and mixtral_hf loaders read Hugging Face Llama, Mistral and Mixtral
// directories, as hf does; it has no savers of those names.
std::string format_of(const char* flag, const std::string& name) {
  if (name == "mgt" || name == "core" || name == "mcore" || name == "legacy" || name == "megatron") return "mgt";
  if (name == "hf") return "hf";
  if (name == "llama_mistral" || name == "mixtral_hf") {
    if (std::string(flag) == "loader") return "hf";
    throw UsageError("--saver " + name + ": convert.py has no saver of that name; --saver hf --hf-model-type "
                     "llama|mistral|mixtral writes Hugging Face Llama, Mistral and Mixtral");
  }
  throw UsageError(std::string("--") + flag + " '" + name + "' is not a format mgt-ckpt-convert knows (mgt, hf; "
                   "convert.py's core, legacy, mcore, megatron, llama_mistral and mixtral_hf)");
}

// A rank count of the layout to write: at most 2^20 ranks.
std::optional<int> rank_count(const char* flag, const std::optional<std::int64_t>& value) {
  if (!value) return std::nullopt;
  if (*value < 1 || *value > 1 << 20)
    throw UsageError(std::string("--") + flag + " must be between 1 and " + std::to_string(1 << 20) + ", got " +
                     std::to_string(*value));
  return static_cast<int>(*value);
}

// What the values of single flags cannot tell: the aliases, the pairs, the parsed sizes.
ConvertOptions to_convert_options(const ConvertFlagFields& f) {
  if (f.model_type != "GPT")
    throw UsageError("--model-type " + f.model_type + ": mgt-ckpt-convert converts GPT models only");
  ConvertOptions o = f.options;
  o.target_tensor_parallel_size = rank_count("target-tensor-parallel-size", f.target_tensor_parallel_size);
  o.target_pipeline_parallel_size = rank_count("target-pipeline-parallel-size", f.target_pipeline_parallel_size);
  o.target_data_parallel_size = rank_count("target-data-parallel-size", f.target_data_parallel_size);
  if (f.target_use_distributed_optimizer && f.target_no_distributed_optimizer)
    throw UsageError("--target-use-distributed-optimizer and --target-no-distributed-optimizer exclude each other");
  if (f.target_use_distributed_optimizer) o.target_distributed_optimizer = true;
  if (f.target_no_distributed_optimizer) o.target_distributed_optimizer = false;
  o.loader = format_of("loader", f.loader);
  o.saver = format_of("saver", f.saver);
  if (f.hf_model_type) {
    if (f.hf_model_type->empty()) throw UsageError("--hf-model-type needs a value");
    o.hf_model_type = *f.hf_model_type;
  }
  if (f.hf_dtype) o.hf_dtype = parse_hf_dtype(*f.hf_dtype);
  if (f.max_shard_size) o.max_shard_bytes = ckpt::parse_shard_size(*f.max_shard_size, "--max-shard-size");
  return o;
}

}  // namespace

ConvertCommandLine parse_convert_command_line(int argc, const char* const* argv) {
  cxxopts::Options options = make_options();
  ParsedCommandLine parsed = parse_command_line(options, argc, argv, command_line_rules(), kProgram);
  ConvertCommandLine command;
  if (parsed.flags.count("help")) {
    command.show_help = true;
    return command;
  }
  ConvertFlagFields fields;
  read_flags(convert_flags(fields), FlagValues(parsed.flags), kProgram);
  command.options = to_convert_options(fields);
  command.ignored = std::move(parsed.ignored);
  return command;
}

std::string convert_help() {
  return make_options().help(kHelpGroups) + "\n" + ignored_flags_help(command_line_rules()) +
         "\nA JSON summary goes to standard output, diagnostics to standard error.\n"
         "See man mgt-ckpt-convert(1) for the mappings to GPT-2 and Llama, refusals and exit codes.\n";
}

}  // namespace mgt
