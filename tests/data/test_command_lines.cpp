#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/command_line.hpp"
#include "core/error.hpp"
#include "core/flag_table.hpp"
#include "data/index_command_line.hpp"
#include "data/tokenize_command_line.hpp"

using namespace mgt;

namespace {

using Args = std::vector<std::string>;

template <class Parse>
auto parse_with(Parse parse, const char* program, Args args) {
  args.insert(args.begin(), program);
  std::vector<const char*> argv;
  for (const auto& a : args) argv.push_back(a.c_str());
  return parse(static_cast<int>(argv.size()), argv.data());
}

TokenizeCommandLine tokenize(Args args) {
  return parse_with(parse_tokenize_command_line, "mgt-tokenize", std::move(args));
}
IndexCommandLine index(Args args) { return parse_with(parse_index_command_line, "mgt-index", std::move(args)); }

template <class Fn>
std::string usage_error(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    CHECK(e.exit_code() == kExitUsage);
    return e.what();
  }
  FAIL("no error");
  return {};
}

}  // namespace

TEST_CASE("tokenize command line: flags into options", "[data][command_line]") {
  const TokenizeOptions defaults = tokenize({}).options;
  CHECK(defaults.inputs.empty());
  CHECK(defaults.json_keys == Args{"text"});
  CHECK(defaults.workers == 0);
  CHECK(defaults.partitions == 1);
  CHECK(defaults.log_interval == 1000);
  CHECK(defaults.lang == "english");

  const TokenizeOptions o =
      tokenize({"--input", "a.jsonl", "-", "--input", "b*.jsonl", "--json-keys", "text", "title",
                "--output-prefix", "out/x", "--tokenizer-type", "NullTokenizer", "--vocab-size", "100",
                "--workers", "3", "--partitions=2", "--append-eod", "--quiet", "--skip-bad-lines"})
          .options;
  CHECK(o.inputs == Args{"a.jsonl", "-", "b*.jsonl"});  // repeated --input adds
  CHECK(o.json_keys == Args{"text", "title"});
  CHECK(o.output_prefix == "out/x");
  CHECK(o.tokenizer.type == "NullTokenizer");
  CHECK(o.tokenizer.vocab_size == 100);
  CHECK(o.workers == 3);
  CHECK(o.partitions == 2);
  CHECK(o.append_eod);
  CHECK(o.quiet);
  CHECK(o.skip_bad_lines);
  CHECK_FALSE(o.merge);
  CHECK(tokenize({"--merge", "--input", "d"}).options.merge);
  // merge_datasets.py's flags alone: a tokenizing flag would do nothing there.
  CHECK(usage_error([] { tokenize({"--merge", "--input", "d", "--output-prefix", "o", "--append-eod", "--workers", "2"}); }) ==
        "--append-eod, --workers: tokenizing flags mean nothing with --merge, which concatenates datasets as "
        "merge_datasets.py does (--input and --output-prefix alone)");
}

TEST_CASE("tokenize command line: help and usage errors", "[data][command_line]") {
  CHECK(tokenize({"--help"}).show_help);
  CHECK(tokenize({"-h"}).show_help);
  const std::string help = tokenize_help();
  for (const char* flag : {"--input", "--json-keys", "--append-eod", "--workers", "--merge", "man mgt-tokenize(1)"})
    CHECK(help.find(flag) != std::string::npos);

  CHECK(usage_error([] { tokenize({"--no-such-flag"}); }) == "unknown flag --no-such-flag (see --help)");
  CHECK(usage_error([] { tokenize({"--trust-remote-code"}); }) ==
        "--trust-remote-code is not supported by mgt-tokenize: HuggingFaceTokenizer reads tokenizer.json only "
        "and runs no remote code");
  const TokenizeOptions tiktoken =
      tokenize({"--tokenizer-type", "TikTokenizer", "--tokenizer-model", "m.json", "--tiktoken-pattern", "v2",
                "--tiktoken-num-special-tokens", "12", "--tiktoken-special-tokens", "<unk>", "<s>", "</s>",
                "--vocab-size", "700"})
          .options;
  CHECK(tiktoken.tokenizer.tokenizer_model == "m.json");
  CHECK(tiktoken.tokenizer.tiktoken_pattern == "v2");
  CHECK(tiktoken.tokenizer.tiktoken_num_special_tokens == 12);
  CHECK(tiktoken.tokenizer.tiktoken_special_tokens == std::vector<std::string>{"<unk>", "<s>", "</s>"});
  CHECK(tokenize({}).options.tokenizer.tiktoken_num_special_tokens == 1000);
  CHECK_FALSE(tokenize({}).options.tokenizer.tiktoken_special_tokens.has_value());
  // preprocess_data.py is not the pretraining parser: its flags are the reference.
  CHECK(usage_error([] { tokenize({"--num-layers", "2"}); }) == "unknown flag --num-layers (see --help)");
  CHECK(usage_error([] { tokenize({"--workers", "zero"}); }) == "--workers: 'zero' is not an integer");
  CHECK(usage_error([] { tokenize({"--workers", "0"}); }) == "--workers must be at least 1, got 0");
  CHECK(usage_error([] { tokenize({"--log-interval", "-1"}); }) == "--log-interval must be at least 1, got -1");
  CHECK(usage_error([] { tokenize({"--vocab-extra-ids", "99999999999"}); }).find("--vocab-extra-ids") == 0);
  CHECK(usage_error([] { tokenize({"--input"}); }) == "--input needs at least one value");
  CHECK(usage_error([] { tokenize({"--quiet=yes"}); }) == "--quiet takes no value");
}

TEST_CASE("index command line: flags into options", "[data][command_line]") {
  const IndexOptions defaults = index({}).options;
  CHECK(defaults.eval_iters == 100);
  CHECK(defaults.eval_interval == 1000);
  CHECK(defaults.seed == 1234);
  CHECK(defaults.mid_level_dataset_surplus == 0.005);
  CHECK(defaults.dump_count == 16);
  CHECK_FALSE(defaults.seq_length);

  const IndexOptions o =
      index({"--data-path", "0.3", "a", "0.7", "b", "--split", "98,1,1", "--seq-length", "128", "--train-iters",
             "10", "--global-batch-size=8", "--seed", "7", "--tokenizer-type", "GPT2BPETokenizer",
             "--vocab-extra-ids", "2", "--eod-mask-loss", "--dump-samples", "s.jsonl", "--dump-count", "4"})
          .options;
  CHECK(o.data_path == Args{"0.3", "a", "0.7", "b"});
  CHECK(o.split == "98,1,1");
  CHECK(o.seq_length == 128);
  CHECK(o.train_iters == 10);
  CHECK(o.global_batch_size == 8);
  CHECK(o.seed == 7);
  CHECK(o.tokenizer.type == "GPT2BPETokenizer");
  CHECK(o.tokenizer.vocab_extra_ids == 2);
  CHECK(o.eod_mask_loss);
  CHECK(o.dump_samples_path == "s.jsonl");
  CHECK(o.dump_count == 4);
}

TEST_CASE("index command line: help and usage errors", "[data][command_line]") {
  CHECK(index({"--help"}).show_help);
  const std::string help = index_help();
  for (const char* flag : {"--data-path", "--seq-length", "--dump-samples", "man mgt-index(1)"})
    CHECK(help.find(flag) != std::string::npos);

  CHECK(usage_error([] { index({"--bogus-flag"}); }) == "unknown flag --bogus-flag (see --help)");
  CHECK(usage_error([] { index({"--mock-data"}); }) == "--mock-data is not supported by mgt-index: mock data has no index to cache");
  CHECK(usage_error([] { index({"--seq-length", "1e3"}); }) == "--seq-length: '1e3' is not an integer");
  CHECK(usage_error([] { index({"--mid-level-dataset-surplus", "x"}); }) ==
        "--mid-level-dataset-surplus: 'x' is not a number");
  CHECK(usage_error([] { index({"--vocab-extra-ids", "-1"}); }) == "--vocab-extra-ids must be between 0 and 1000000, got -1");
}

TEST_CASE("tokenize command line: preprocess_data.py's flags until 2023", "[data][command_line]") {
  const TokenizeCommandLine old = tokenize({"--input", "a.jsonl", "--dataset-impl", "mmap", "--chunk-size", "25",
                                            "--workers", "2"});
  CHECK(old.options.inputs == Args{"a.jsonl"});
  CHECK(old.options.workers == 2);
  const std::string line = ignored_flags_line("mgt-tokenize", old.ignored);
  CHECK(line.rfind("mgt-tokenize: ignored flags (they change nothing here): --dataset-impl mmap (", 0) == 0);
  CHECK(line.find("; --chunk-size 25 (") != std::string::npos);
  CHECK(tokenize({"--input", "a.jsonl"}).ignored.empty());
  // The old IndexedDataset formats are refused by name; other values as argparse refuses them.
  CHECK(usage_error([] { tokenize({"--dataset-impl", "lazy"}); }).rfind(
            "--dataset-impl lazy is not supported by mgt-tokenize: the old IndexedDataset format", 0) == 0);
  CHECK(usage_error([] { tokenize({"--dataset-impl", "cached"}); }).rfind("--dataset-impl cached is not supported", 0) == 0);
  CHECK(usage_error([] { tokenize({"--dataset-impl", "fast"}); }) == "--dataset-impl: invalid choice 'fast' (choose from mmap)");
  CHECK(usage_error([] { tokenize({"--chunk-size", "many"}); }) == "--chunk-size: 'many' is not an integer");
  CHECK(tokenize_help().find("--dataset-impl") != std::string::npos);
}

TEST_CASE("tokenize command line: argparse's abbreviations, as preprocess_data.py's parser takes them",
          "[data][command_line]") {
  const TokenizeOptions o = tokenize({"--inp", "a.jsonl", "--output", "out/x", "--tokenizer-t", "GPT2BPETokenizer",
                                      "--vocab", "v.json", "--merge-f=m.txt", "--append", "--json", "text", "title",
                                      "--work", "3", "--dataset", "mmap"})
                                .options;
  CHECK(o.inputs == Args{"a.jsonl"});
  CHECK(o.output_prefix == "out/x");
  CHECK(o.tokenizer.type == "GPT2BPETokenizer");
  CHECK(o.tokenizer.vocab_file == "v.json");  // --vocab: --vocab-file's prefix alone until 2023
  CHECK(o.tokenizer.merge_file == "m.txt");
  CHECK(o.append_eod);
  CHECK(o.json_keys == Args{"text", "title"});
  CHECK(o.workers == 3);  // --workers, not the refused --workers-to-check of later versions
  CHECK(tokenize({"--vocab-s", "100"}).options.tokenizer.vocab_size == 100);
  CHECK(tokenize({"--he"}).show_help);
  // An exact flag is never an abbreviation: --merge is mgt's own switch.
  CHECK(tokenize({"--merge", "--input", "d"}).options.merge);
  // A prefix of several flags is refused as argparse refuses it, naming them.
  CHECK(usage_error([] { tokenize({"--to", "GPT2BPETokenizer"}); }) ==
        "ambiguous option: --to could match --tokenizer-hf-no-include-special-tokens, --tokenizer-hf-no-use-fast, "
        "--tokenizer-metadata, --tokenizer-model, --tokenizer-special-tokens, --tokenizer-type");
  CHECK(usage_error([] { tokenize({"--ti=x"}); }) ==
        "ambiguous option: --ti could match --tiktoken-num-special-tokens, --tiktoken-pattern, --tiktoken-special-tokens");
  // A refused flag stays refused when abbreviated.
  CHECK(usage_error([] { tokenize({"--trust"}); }).rfind("--trust-remote-code is not supported by mgt-tokenize", 0) == 0);
}

TEST_CASE("index command line: the flag table", "[data][command_line]") {
  IndexOptions defaults;
  const std::vector<FlagDefinition> flags = index_flags(defaults);
  // A repeated list keeps its last values, as pretrain_gpt.py's argparse and mgt-train do.
  CHECK(find_flag(flags, "data-path").arity() == FlagArity::Many);
  CHECK(index({"--data-path", "a", "c", "--data-path", "b"}).options.data_path == Args{"b"});
  CHECK(index_help().find("--seed N") != std::string::npos);
  CHECK(index_help().find("(default: 1234)") != std::string::npos);
  // The rest of a pretrain_gpt.py command line is accepted and named as ignored (GPU features
  // too); flags that would change the datasets, and unknown ones, are refused.
  const IndexCommandLine training = index({"--data-path", "a", "--num-layers", "2", "--bf16", "--fp8-format", "hybrid",
                                            "--lr", "1e-4", "--seq-length", "8"});
  CHECK(training.options.data_path == Args{"a"});
  CHECK(ignored_flags_line("mgt-index", training.ignored) ==
        "mgt-index: ignored flags (they change nothing here): --num-layers 2, --bf16, --fp8-format hybrid, --lr 1e-4 "
        "(no effect on the indices)");
  // A fine-tuning or evaluation job's flags build the same caches (Megatron builds every split's
  // dataset whatever the data loader or --skip-train).
  const IndexCommandLine evaluation = index({"--data-path", "a", "--skip-train", "--dataloader-type", "cyclic",
                                              "--iterations-to-skip", "3", "11", "--seq-length", "8"});
  CHECK(ignored_flags_line("mgt-index", evaluation.ignored) ==
        "mgt-index: ignored flags (they change nothing here): --skip-train, --dataloader-type cyclic, "
        "--iterations-to-skip 3 11 (no effect on the indices)");
  CHECK(usage_error([] { index({"--sft"}); }) ==
        "--sft is not supported by mgt-index: supervised fine-tuning datasets are not indexed");
  CHECK(usage_error([] { index({"--no-such-flag"}); }) == "unknown flag --no-such-flag (see --help)");
  // mgt-index's flags need no abbreviation: pretrain_gpt.py's parser turns them off.
  CHECK(usage_error([] { index({"--seq", "8"}); }) == "unknown flag --seq (see --help)");
}
