#!/usr/bin/env bash
# End-to-end check of --per-split-data-args-path: mgt-train given the per-split lists in Megatron's
# JSON file (a list, a string of words, null) trains exactly as with --train-data-path and
# --valid-data-path, and mgt-index prints the same indices for both.
# Usage: bash tests/e2e/mgt_train_per_split_data.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/parallel_training.bash"

# COMMON without --data-path and --split.
RUN=()
skip=0
for a in "${COMMON[@]}"; do
  if (( skip > 0 )); then skip=$((skip - 1)); continue; fi
  case $a in
    --data-path|--split) skip=1 ;;
    *) RUN+=("$a") ;;
  esac
done
RUN+=(--train-iters 6 --eval-interval 3)
data="$WORK/pat_text_document"

expect_status 0 "$BIN/mgt-train" "${RUN[@]}" --train-data-path 0.6 "$data" 0.4 "$data" --valid-data-path "$data" \
  --metrics-file "$WORK/flags.jsonl"
printf '{"train": ["0.6", "%s", "0.4", "%s"],\n "valid": "  %s\\n", "test": null}\n' "$data" "$data" "$data" \
  >"$WORK/splits.json"
expect_status 0 "$BIN/mgt-train" "${RUN[@]}" --per-split-data-args-path "$WORK/splits.json" \
  --metrics-file "$WORK/file.jsonl"
python3 - "$WORK/flags.jsonl" "$WORK/file.jsonl" <<'PY' || fail "the JSON file's run differs from the flags' run"
import json, sys
keys = ("event", "iteration", "lm_loss", "grad_norm", "consumed_samples")
a, b = ([{k: r.get(k) for k in keys} for r in map(json.loads, open(p))] for p in sys.argv[1:])
assert a == b and len(a) == 9, (a, b)
PY

INDEX=(--seq-length 64 --global-batch-size 8 --train-iters 6 --eval-interval 3 --eval-iters 2
       --tokenizer-type NullTokenizer --vocab-size 127 --data-cache-path "$WORK/cache")
expect_status 0 "$BIN/mgt-index" "${INDEX[@]}" --train-data-path 0.6 "$data" 0.4 "$data" --valid-data-path "$data"
cp "$WORK/out.txt" "$WORK/index-flags.json"
expect_status 0 "$BIN/mgt-index" "${INDEX[@]}" --per-split-data-args-path "$WORK/splits.json"
cmp -s "$WORK/index-flags.json" "$WORK/out.txt" || fail "mgt-index's indices differ between the flags and the file"

# Megatron's rules: no key missing, nothing empty, not beside the per-split flags.
echo '{"train": ["'"$data"'"], "valid": []}' >"$WORK/bad.json"
expect_status 2 "$BIN/mgt-train" "${RUN[@]}" --per-split-data-args-path "$WORK/bad.json"
grep -q "^mgt-train: --per-split-data-args-path $WORK/bad.json: \"valid\" is empty" "$WORK/err.txt" ||
  fail "empty list: $(cat "$WORK/err.txt")"
expect_status 2 "$BIN/mgt-index" "${INDEX[@]}" --per-split-data-args-path "$WORK/splits.json" --test-data-path "$data"
grep -q "mutually exclusive" "$WORK/err.txt" || fail "beside --test-data-path: $(cat "$WORK/err.txt")"
echo "--per-split-data-args-path: the same run and the same indices as the per-split flags"
