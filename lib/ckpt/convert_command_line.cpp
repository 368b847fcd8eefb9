#include "ckpt/convert_command_line.hpp"

#include <map>

#include "core/cxxopts_command_line.hpp"
#include "core/error.hpp"

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
    {"--checkpoint-type", "Meta's Llama checkpoints are not supported; --loader hf reads GPT-2 directories"},
    {"--model-size", "--loader hf reads the architecture from config.json"},
    {"--tokenizer-model", "SentencePiece tokenizers are not supported"},
    {"--bf16", "conversions keep fp32 weights"},
    {"--fp16", "conversions keep fp32 weights"},
};

cxxopts::Options make_options() {
  cxxopts::Options o(kProgram,
                     "Convert GPT checkpoints between mgt's format and Hugging Face GPT-2 (config.json + "
                     "model.safetensors), like Megatron-LM's tools/checkpoint/convert.py.");
  o.custom_help("--model-type GPT --loader mgt|hf --saver mgt|hf --load-dir DIR --save-dir DIR [options]");
  // clang-format off
  o.add_options("convert")
      ("model-type", "Model type; GPT is the only one", cxxopts::value<std::string>(), "GPT")
      ("loader", "Format to read: mgt (aliases core, mcore) or hf", cxxopts::value<std::string>(), "NAME")
      ("saver", "Format to write: mgt (aliases core, mcore) or hf", cxxopts::value<std::string>(), "NAME")
      ("load-dir", "Checkpoint to read: an mgt save or iteration directory, or a Hugging Face model directory",
       cxxopts::value<std::string>(), "DIR")
      ("save-dir", "Directory to write; must not exist or be empty", cxxopts::value<std::string>(), "DIR")
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
      ("seq-length", "--loader hf: sequence length of the model (default: n_positions)",
       cxxopts::value<std::string>(), "N");
  o.add_options("parallelism")
      ("target-tensor-parallel-size", "Only 1: mgt checkpoints hold whole tensors, and mgt-train reshards them on --load",
       cxxopts::value<std::string>()->default_value("1"), "N")
      ("target-pipeline-parallel-size", "Only 1: mgt checkpoints hold whole tensors, and mgt-train reshards them on --load",
       cxxopts::value<std::string>()->default_value("1"), "N")
      ("h,help", "Show this help");
  // clang-format on
  add_version_flag(o, "parallelism");
  return o;
}

// Megatron names its own checkpoints' plugin "core" (and maps the old "mcore" to it); here that
// format is mgt's. "legacy" would name Megatron's torch files, which mgt does not read.
std::string format_of(const char* flag, const std::string& name) {
  if (name == "mgt" || name == "core" || name == "mcore") return "mgt";
  if (name == "hf") return "hf";
  if (name == "legacy")
    throw UsageError(std::string("--") + flag + " legacy: Megatron's torch checkpoints are not supported; mgt "
                     "converts its own checkpoints (mgt) and Hugging Face GPT-2 (hf)");
  throw UsageError(std::string("--") + flag + " '" + name + "' is not a format mgt-ckpt-convert knows (mgt, hf)");
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
  for (const char* flag : {"target-tensor-parallel-size", "target-pipeline-parallel-size"}) {
    const std::int64_t size = f.integer(flag);
    if (size < 1) throw UsageError(std::string("--") + flag + " must be >= 1");
    if (size > 1)
      throw UsageError(std::string("--") + flag + " " + std::to_string(size) +
                       ": mgt checkpoints hold whole tensors whatever layout trained them, and mgt-train "
                       "reshards them on --load (give it --tensor-model-parallel-size / "
                       "--pipeline-model-parallel-size instead)");
  }
  if (f.has("max-queue-size")) positive(f, "max-queue-size");
  ConvertOptions o;
  o.loader = format_of("loader", f.text("loader"));
  o.saver = format_of("saver", f.text("saver"));
  f.set("load-dir", o.load_dir);
  f.set("save-dir", o.save_dir);
  o.true_vocab_size = positive(f, "true-vocab-size");
  o.make_vocab_size_divisible_by = positive(f, "make-vocab-size-divisible-by");
  o.seq_length = positive(f, "seq-length");
  f.set("vocab-file", o.vocab_file);
  f.set("merge-file", o.merge_file);
  return o;
}

}  // namespace

ConvertCommandLine parse_convert_command_line(int argc, const char* const* argv) {
  cxxopts::Options options = make_options();
  // convert.py is not a pretraining script: an unknown flag is just unknown.
  const CommandLineRules rules{declared_flags(options), kRefusedFlags, false};
  const cxxopts::ParseResult result = parse_command_line(options, argc, argv, rules, kProgram).flags;
  ConvertCommandLine command;
  if (result.count("help")) {
    command.show_help = true;
    return command;
  }
  command.options = to_convert_options(FlagValues(result));
  return command;
}

std::string convert_help() {
  return make_options().help({"convert", "vocabulary", "model", "parallelism"}) +
         "\nA JSON summary goes to standard output, diagnostics to standard error.\n"
         "See man mgt-ckpt-convert(1) for the mapping to GPT-2, refusals and exit codes.\n";
}

}  // namespace mgt
