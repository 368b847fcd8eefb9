#include "ckpt/convert_command_line.hpp"

#include <map>

#include "ckpt/hf_directory_files.hpp"
#include "ckpt/safetensors_model_files.hpp"
#include "core/cxxopts_command_line.hpp"
#include "core/error.hpp"
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
    {"--target-expert-parallel-size", "mgt has no mixture-of-experts layers"},
    {"--bf16", "mgt checkpoints keep fp32 weights; --hf-dtype bf16 writes a Hugging Face export in bf16"},
    {"--fp16", "mgt checkpoints keep fp32 weights; --hf-dtype fp16 writes a Hugging Face export in fp16"},
};

// The flags convert.py's llama_mistral loader requires: accepted, so that its command lines run
// unchanged, and named on one line, since the hf loader takes all they say from config.json.
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

cxxopts::Options make_options() {
  cxxopts::Options o(kProgram,
                     "Convert GPT checkpoints between mgt's format and Hugging Face GPT-2, Llama and Mistral "
                     "(config.json + safetensors), like Megatron-LM's tools/checkpoint/convert.py.");
  o.custom_help("--model-type GPT --loader mgt|hf --saver mgt|hf --load-dir DIR --save-dir DIR [options]");
  // clang-format off
  o.add_options("convert")
      ("model-type", "Model type; GPT is the only one (required)", cxxopts::value<std::string>(), "GPT")
      ("loader", "Format to read: mgt (aliases core, legacy, mcore, megatron) or hf (alias llama_mistral) "
                 "(required)",
       cxxopts::value<std::string>(), "NAME")
      ("saver", "Format to write: mgt (aliases core, legacy, mcore, megatron) or hf (required)",
       cxxopts::value<std::string>(), "NAME")
      ("load-dir", "Checkpoint to read: an mgt save or iteration directory, or a Hugging Face model directory "
                   "(required)",
       cxxopts::value<std::string>(), "DIR")
      ("save-dir", "Directory to write; must not exist or be empty (required)", cxxopts::value<std::string>(),
       "DIR")
      ("max-queue-size", "Accepted for convert.py compatibility; mgt converts in one process",
       cxxopts::value<std::string>(), "N")
      ("no-checking", "Accepted for convert.py compatibility; tensors are always checked");
  o.add_options("vocabulary")
      ("true-vocab-size", "Keep only the first N rows of the word embedding (default: keep every padded row, "
                          "so that logits match exactly)", cxxopts::value<std::string>(), "N")
      ("make-vocab-size-divisible-by", "Pad the word embedding with zero rows to a multiple of N "
                                       "(default: no padding)", cxxopts::value<std::string>(), "N")
      ("vocab-file", "--saver mgt: GPT-2 vocabulary file of the tokenizer to record",
       cxxopts::value<std::string>(), "FILE")
      ("merge-file", "--saver mgt: GPT-2 merges file of the tokenizer to record",
       cxxopts::value<std::string>(), "FILE");
  o.add_options("model")
      ("seq-length", "--loader hf: sequence length of the model (default: n_positions or "
                     "max_position_embeddings)", cxxopts::value<std::string>(), "N");
  o.add_options("hugging face")
      ("hf-model-type", "mgt: with --saver hf, the architecture to write: gpt2, llama or mistral (default: the one read, "
                        "else gpt2 for learned positions and llama for rotary ones)",
       cxxopts::value<std::string>(), "TYPE")
      ("hf-dtype", "mgt: with --saver hf, the dtype of the exported weights: fp32, bf16 or fp16 (default: fp32)",
       cxxopts::value<std::string>(), "DTYPE")
      ("max-shard-size", "mgt: with --saver hf, the largest safetensors file before the weights are split into "
                         "shards with model.safetensors.index.json, like save_pretrained; also in MB, GiB, ... "
                         "(default: 5GB)",
       cxxopts::value<std::string>(), "SIZE");
  o.add_options("parallelism")
      ("target-tensor-parallel-size", "--saver mgt: tensor-parallel size to write (default: the source's; 1 from "
                                      "Hugging Face)", cxxopts::value<std::string>(), "N")
      ("target-pipeline-parallel-size", "--saver mgt: pipeline-parallel size to write (default: the source's; 1 "
                                        "from Hugging Face)", cxxopts::value<std::string>(), "N")
      ("target-data-parallel-size", "mgt: with --saver mgt, the data-parallel size whose ranks get a distributed-optimizer "
                                    "shard each (default: the source's)", cxxopts::value<std::string>(), "N")
      ("target-use-distributed-optimizer", "mgt: with --saver mgt, store the optimizer state per data-parallel rank "
                                           "(default: as the source)")
      ("target-no-distributed-optimizer", "mgt: with --saver mgt, store the optimizer state with the weights, one copy "
                                          "per model-parallel rank")
      ("h,help", "Show this help");
  // clang-format on
  add_version_flag(o, "parallelism");
  return o;
}

// convert.py's plugin names, so that its command lines run unchanged. Its own checkpoint
// plugins (core, legacy, and the older names mcore and megatron) stand for Megatron's checkpoint
// format, which mgt's takes the place of: a script converting Megatron checkpoints converts mgt's.
// Its llama_mistral loader reads Hugging Face Llama and Mistral directories, as hf does; it has no
// saver of that name.
std::string format_of(const char* flag, const std::string& name) {
  if (name == "mgt" || name == "core" || name == "mcore" || name == "legacy" || name == "megatron") return "mgt";
  if (name == "hf") return "hf";
  if (name == "llama_mistral") {
    if (std::string(flag) == "loader") return "hf";
    throw UsageError("--saver llama_mistral: convert.py has no saver of that name; --saver hf --hf-model-type "
                     "llama|mistral writes Hugging Face Llama and Mistral");
  }
  throw UsageError(std::string("--") + flag + " '" + name + "' is not a format mgt-ckpt-convert knows (mgt, hf; "
                   "convert.py's core, legacy, mcore, megatron and llama_mistral)");
}

std::optional<std::int64_t> positive(const FlagValues& f, const char* name) {
  if (!f.has(name)) return std::nullopt;
  const std::int64_t v = f.integer(name);
  if (v < 1) throw UsageError(std::string("--") + name + " must be >= 1 (got " + std::to_string(v) + ")");
  return v;
}

ConvertOptions to_convert_options(const FlagValues& f) {
  if (!f.has("model-type")) throw UsageError("--model-type is required (GPT)");
  if (f.text("model-type") != "GPT")
    throw UsageError("--model-type " + f.text("model-type") + ": mgt-ckpt-convert converts GPT models only");
  if (!f.has("loader")) throw UsageError("--loader is required (mgt or hf)");
  if (!f.has("saver")) throw UsageError("--saver is required (mgt or hf)");
  if (f.has("max-queue-size")) positive(f, "max-queue-size");
  ConvertOptions o;
  auto size_flag = [&](const char* flag, std::optional<int>& into) {
    if (auto v = positive(f, flag)) {
      if (*v > 1 << 20) throw UsageError(std::string("--") + flag + " " + std::to_string(*v) + " is too large");
      into = static_cast<int>(*v);
    }
  };
  size_flag("target-tensor-parallel-size", o.target_tensor_parallel_size);
  size_flag("target-pipeline-parallel-size", o.target_pipeline_parallel_size);
  size_flag("target-data-parallel-size", o.target_data_parallel_size);
  if (f.has("target-use-distributed-optimizer") && f.has("target-no-distributed-optimizer"))
    throw UsageError("--target-use-distributed-optimizer and --target-no-distributed-optimizer exclude each other");
  if (f.has("target-use-distributed-optimizer")) o.target_distributed_optimizer = true;
  if (f.has("target-no-distributed-optimizer")) o.target_distributed_optimizer = false;
  o.loader = format_of("loader", f.text("loader"));
  o.saver = format_of("saver", f.text("saver"));
  f.set("load-dir", o.load_dir);
  f.set("save-dir", o.save_dir);
  o.true_vocab_size = positive(f, "true-vocab-size");
  o.make_vocab_size_divisible_by = positive(f, "make-vocab-size-divisible-by");
  o.seq_length = positive(f, "seq-length");
  f.set("vocab-file", o.vocab_file);
  f.set("merge-file", o.merge_file);
  f.set("hf-model-type", o.hf_model_type);
  if (f.has("hf-model-type") && o.hf_model_type.empty()) throw UsageError("--hf-model-type needs a value");
  if (f.has("hf-dtype")) o.hf_dtype = parse_hf_dtype(f.text("hf-dtype"));
  if (f.has("max-shard-size")) o.max_shard_bytes = ckpt::parse_shard_size(f.text("max-shard-size"), "--max-shard-size");
  return o;
}

}  // namespace

ConvertCommandLine parse_convert_command_line(int argc, const char* const* argv) {
  cxxopts::Options options = make_options();
  // convert.py is not a pretraining script: an unknown flag is just unknown.
  const CommandLineRules rules{declared_flags(options), kRefusedFlags, false, llama_mistral_loader_flags()};
  ParsedCommandLine parsed = parse_command_line(options, argc, argv, rules, kProgram);
  ConvertCommandLine command;
  if (parsed.flags.count("help")) {
    command.show_help = true;
    return command;
  }
  command.options = to_convert_options(FlagValues(parsed.flags));
  command.ignored = std::move(parsed.ignored);
  return command;
}

std::string convert_help() {
  return make_options().help({"convert", "vocabulary", "model", "hugging face", "parallelism"}) + "\n" +
         ignored_flags_help(CommandLineRules{{}, {}, false, llama_mistral_loader_flags()}) +
         "\nA JSON summary goes to standard output, diagnostics to standard error.\n"
         "See man mgt-ckpt-convert(1) for the mappings to GPT-2 and Llama, refusals and exit codes.\n";
}

}  // namespace mgt
