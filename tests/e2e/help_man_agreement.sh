#!/usr/bin/env bash
# End-to-end check that every program's --help and its man page agree, both ways: each flag
# --help names is documented in man/man1/PROGRAM.1, and each flag the man page sets in bold or
# bold-italic at the start of a line (.B, .BR, .BI, the forms its option lists use) is one --help
# names, or one the program refuses by name with its reason, as the page says. A Megatron user reads one and types what the other accepts, so a gap either way is a bug.
# (help_conventions.sh checks the conventions of --help itself, and each page's SEE ALSO.)
# Usage: bash tests/e2e/help_man_agreement.sh BIN_DIR SOURCE_DIR
set -euo pipefail
bin=$1
src=$2
source "$src/tests/e2e/lib/common.bash"

programs=(mgt-tokenize mgt-index mgt-train mgt-eval mgt-generate mgt-ckpt-convert)

# Flags a page sets in bold that belong to something else than its program, with the reason.
declare -A elsewhere=(
  # srun's option (--mpi=pmi2), in the part of the page on launching under Slurm.
  [mgt-train:--mpi]=1
)

flags_in_help() {  # flags_in_help FILE: every --flag token, once each
  grep -oE -- '--[a-z][a-z0-9_-]*[a-z0-9_]' "$1" | sort -u
}

# Flags a page documents: every flag of an option's tag (the line after .TP), and in the OPTIONS
# section the flag opening any other .B, .BR or .BI line, with roff's escaped hyphens (\-) read as
# hyphens. Elsewhere such lines may name other programs' flags (what mgt-train needs to write a
# checkpoint that converts). A pattern such as --no-*-fusion names a family, not a flag, and is
# left out.
flags_in_man() {  # flags_in_man PAGE
  sed -e 's/\\-/-/g' "$1" | awk '
    /^\.SH/ { in_options = /^\.SH +"?OPTIONS/ }
    after_tp && /^\.(B|BR|BI|IR|I) / { print; after_tp = 0; next }
    { after_tp = /^\.TP/ }
    in_options && /^\.(B|BR|BI) +"?--/ {
      sub(/^\.(B|BR|BI) +"?/, ""); match($0, /^--[a-z0-9_*-]+/); print substr($0, 1, RLENGTH) }' |
    grep -oE -- '--[a-z][a-z0-9_*-]*[a-z0-9_*]' | grep -v '\*' | sort -u || true
}

refused_by_name() {  # refused_by_name PROGRAM FLAG: the program names the flag and why it refuses it
  set +e
  "$bin/$1" "$2" >/dev/null 2>"$work/refusal.txt"
  local status=$?
  set -e
  [[ $status == 2 ]] && grep -qE -- "^$1: $2( [^ ]+)? is not supported by $1: " "$work/refusal.txt"
}

problems=()
for program in "${programs[@]}"; do
  page="$src/man/man1/$program.1"
  [[ -f $page ]] || { problems+=("$program has no man page"); continue; }
  expect_status 0 "$bin/$program" --help
  cp "$work/out.txt" "$work/$program.help"
  documented=$(sed -e 's/\\-/-/g' "$page")
  for flag in $(flags_in_help "$work/$program.help"); do
    grep -qE -- "${flag}([^a-z0-9_-]|\$)" <<<"$documented" ||
      problems+=("$flag is in $program --help but not in $program.1")
  done
  for flag in $(flags_in_man "$page"); do
    [[ -n ${elsewhere[$program:$flag]:-} ]] && continue
    grep -qE -- "${flag}([^a-z0-9_-]|\$)" "$work/$program.help" && continue
    refused_by_name "$program" "$flag" ||
      problems+=("$flag is documented in $program.1 but neither in $program --help nor refused by name")
  done
done

if ((${#problems[@]})); then
  printf '%s\n' "${problems[@]}" >&2
  fail "${#problems[@]} disagreements between --help and the man pages"
fi
echo "--help and man pages agree for ${#programs[@]} programs"
