#!/usr/bin/env bash
# End-to-end check that every program's --help follows one set of conventions, so that a user who
# learnt one program reads the others at a glance:
#   - the usage line shows the required flags outside brackets, and those are exactly the flags
#     whose description says "(required" ("(required)", "(required, or --train-samples)", ...);
#     in a second usage line (mgt-tokenize --merge ...) the first flag names the form;
#   - defaults are written one way, "(default: X)": no "default X", "(default)", "Default:" or
#     "defaults", and at most one per flag;
#   - flags of mgt's own (neither in Megatron-LM's pretraining parser, lib/core/megatron_flags.inc,
#     nor in the Megatron script the program stands for, listed below) begin their description
#     with "mgt: ", and no other flag does (--help and --version, which every program has, are
#     neither);
#   - every flag has a description;
#   - each man page marks exactly the flags --help marks, one way: in its OPTIONS section, the
#     description of an option's entry (the text after the tag of .TP and any .TQ) begins with
#     "mgt:" exactly when --help marks the entry's flags; a marked flag has such an entry, and no
#     flag is marked otherwise ("(mgt)");
#   - each man page's SEE ALSO names the five sibling programs.
# Usage: bash tests/e2e/help_conventions.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
source "$src/tests/e2e/lib/common.bash"

programs=(mgt-tokenize mgt-index mgt-train mgt-eval mgt-generate mgt-ckpt-convert)
for program in "${programs[@]}"; do
  expect_status 0 "$bin/$program" --help
  cp "$work/out.txt" "$work/$program.help"
done

python3 - "$work" "$src" "${programs[@]}" <<'PY' || fail "--help does not follow the conventions (above)"
import re
import sys

work, src, programs = sys.argv[1], sys.argv[2], sys.argv[3:]

# The flags of the Megatron-LM script each program stands for, beyond the pretraining parser's.
SCRIPT_FLAGS = {
    # tools/preprocess_data.py (and tools/merge_datasets.py: --input, --output-prefix)
    "mgt-tokenize": {"--input", "--json-keys", "--split-sentences", "--keep-newlines", "--append-eod", "--lang",
                     "--output-prefix", "--workers", "--partitions", "--log-interval",
                     "--keep-sequential-samples"},
    # pretrain_gpt.py builds its indices itself
    "mgt-index": set(),
    # older versions of the pretraining parser than the one megatron_flags.inc lists
    "mgt-train": {"--no-log-learning-rate-to-tensorboard"},
    # tasks/main.py get_tasks_args
    "mgt-eval": {"--task", "--valid-data", "--strict-lambada", "--overlapping-eval"},
    # tools/run_text_generation_server.py add_text_generate_args (v0.13)
    "mgt-generate": {"--port", "--temperature", "--top_k", "--top_p", "--return-log-probs",
                     "--num-tokens-to-generate", "--prompts", "--max-batch-size"},
    # tools/checkpoint/convert.py with its loader_core, loader_llama_mistral and saver_core plugins
    "mgt-ckpt-convert": {"--model-type", "--loader", "--saver", "--load-dir", "--save-dir", "--max-queue-size",
                         "--no-checking", "--true-vocab-size", "--vocab-file", "--megatron-path",
                         "--position-embedding-type", "--loader-transformer-impl",
                         "--target-tensor-parallel-size", "--target-pipeline-parallel-size",
                         "--target-expert-parallel-size", "--saver-transformer-impl", "--checkpoint-type",
                         "--model-size", "--tokenizer-model", "--bf16", "--fp16",
                         "--make-vocab-size-divisible-by"},
}
EVERY_PROGRAM = {"--help", "--version"}

megatron = set(re.findall(r'^\{"(--[^"]+)"', open(f"{src}/lib/core/megatron_flags.inc").read(), re.M))


def parse_help(text):
    """Usage lines and {flag: description} from cxxopts' layout."""
    lines = text.split("\n")
    usage, flags, i = [], {}, 0
    while i < len(lines) and lines[i] != "Usage:":
        i += 1
    i += 1
    while i < len(lines) and lines[i].startswith("  "):
        usage.append(lines[i].strip())
        i += 1
    current = None
    for line in lines[i:]:
        if re.match(r"^ \S.* options:$", line) or line == "":
            current = None if line == "" else current
            continue
        if not line.startswith(" "):
            break  # the paragraphs after the option list
        m = re.match(r"^\s+(?:-\w, )?(--[A-Za-z0-9_-]+)((?: \S+)*)(?:\s{2,}(.*))?$", line)
        if m and not line.startswith(" " * 12):
            current = m.group(1)
            flags[current] = (m.group(3) or "").strip()
        elif current:
            flags[current] = (flags[current] + " " + line.strip()).strip()
    return usage, flags


def man_marks(page):
    """{flag: [marked, ...]} for each option entry of a man page's OPTIONS section: the flags of the
    tag (the line after .TP, and after each .TQ) and whether the description begins with "mgt:"."""
    lines = page.replace("\\-", "-").split("\n")
    marks, in_options, i = {}, False, 0
    while i < len(lines):
        if lines[i].startswith(".SH"):
            in_options = re.match(r'^\.SH +"?OPTIONS', lines[i]) is not None
        if not in_options or lines[i].strip() != ".TP":
            i += 1
            continue
        tags = lines[i + 1:i + 2]
        i += 2
        while i + 1 < len(lines) and lines[i].strip() == ".TQ":
            tags.append(lines[i + 1])
            i += 2
        marked = i < len(lines) and re.match(r"^mgt:(\s|$)", lines[i]) is not None
        for tag in tags:
            for flag in re.findall(r"--[A-Za-z0-9_*-]*[A-Za-z0-9_*]", tag):
                if "*" not in flag:
                    marks.setdefault(flag, []).append(marked)
    return marks


def outside_brackets(usage_line):
    depth, kept = 0, []
    for ch in usage_line:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif depth == 0:
            kept.append(ch)
    return re.findall(r"--[a-z][a-z0-9_-]*", "".join(kept))


problems = []
for program in programs:
    usage, flags = parse_help(open(f"{work}/{program}.help", encoding="utf-8").read())
    if not usage or not flags:
        problems.append(f"{program}: cannot read its --help")
        continue
    # Usage lines and "(required".
    shown = set()
    for n, line in enumerate(usage):
        found = outside_brackets(line)
        if n > 0 and found and line.split()[1:2] == [found[0]]:
            found = found[1:]  # the flag naming a second form
        shown.update(found)
    for flag in sorted(shown):
        if flag not in flags:
            problems.append(f"{program}: the usage line shows {flag}, which --help does not list")
        elif "(required" not in flags[flag]:
            problems.append(f"{program}: the usage line shows {flag} as required, but its description does not "
                            f"say '(required'")
    for flag, text in sorted(flags.items()):
        if "(required" in text and flag not in shown:
            problems.append(f"{program}: {flag} is required but the usage line does not show it")
        if "(required" in text and "(default: " in text:
            problems.append(f"{program}: {flag} is both required and has a default")
    # Descriptions, defaults and marks.
    for flag, text in sorted(flags.items()):
        if not text:
            problems.append(f"{program}: {flag} has no description")
            continue
        defaults = len(re.findall(r"(?i)\bdefault", text))
        written = text.count("(default: ")
        if defaults != written:
            problems.append(f"{program}: {flag} writes a default otherwise than '(default: X)': {text!r}")
        if written > 1:
            problems.append(f"{program}: {flag} gives its default twice: {text!r}")
        if flag in EVERY_PROGRAM:
            continue
        own = flag not in megatron and flag not in SCRIPT_FLAGS[program]
        marked = text.startswith("mgt: ")
        if own and not marked:
            problems.append(f"{program}: {flag} is mgt's own but its description does not begin with 'mgt: '")
        if marked and not own:
            problems.append(f"{program}: {flag} is a Megatron-LM flag but is marked 'mgt: '")
    # The man page marks the flags --help marks, the same way.
    page = open(f"{src}/man/man1/{program}.1", encoding="utf-8").read()
    marks = man_marks(page)
    for flag, text in sorted(flags.items()):
        if flag in EVERY_PROGRAM:
            continue
        in_help = text.startswith("mgt: ")
        if flag not in marks:
            if in_help:  # a Megatron flag may be described in running text; a marked one needs its entry
                problems.append(f"{program}.1: {flag} is marked 'mgt: ' in --help but has no entry (.TP) "
                                f"in OPTIONS to mark")
        elif any(m != in_help for m in marks[flag]):
            problems.append(f"{program}.1: {flag} is " + ("" if in_help else "not ") + "marked 'mgt: ' in --help, "
                            "but its OPTIONS entry " + ("does not begin" if in_help else "begins") +
                            " with 'mgt:'")
    for flag, marked in sorted(marks.items()):
        if flag not in flags and any(marked):
            problems.append(f"{program}.1: {flag}, which --help does not list, is marked 'mgt:'")
    if "(mgt)" in page:
        problems.append(f"{program}.1: marks a flag '(mgt)'; mgt's own flags are marked by an entry "
                        f"that begins with 'mgt:'")
    # SEE ALSO.
    see_also = page.split(".SH SEE ALSO", 1)[1].split("\n.SH", 1)[0] if ".SH SEE ALSO" in page else ""
    for sibling in programs:
        if sibling != program and f".BR {sibling} (1)" not in see_also:
            problems.append(f"{program}.1: SEE ALSO does not name {sibling}")

for p in problems:
    print(p, file=sys.stderr)
if problems:
    sys.exit(1)
print(f"--help follows the conventions for {len(programs)} programs")
PY
echo "help conventions: ok"
