#!/usr/bin/env bash
# mgt-tokenize stopped by SIGINT, SIGTERM or SIGHUP while it waits for more input (or for a
# writer to open its input FIFO): exit status 128 + the signal, one message, and nothing left in
# the output directory (no dataset, no temporary file).
# Usage: bash tests/e2e/mgt_tokenize_signal.sh BIN_DIR SOURCE_DIR
set -euo pipefail
# Job control: without it a script's background jobs start with SIGINT ignored, and mgt-tokenize
# (rightly, as under nohup) leaves a signal ignored at its start ignored.
set -m

BIN="$1/mgt-tokenize"
SRC="$2"
WORK="$(mktemp -d)"
trap 'exec 3>&-; rm -rf "$WORK"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# Whether this script was started with signal number $1 ignored (nohup does that for SIGHUP):
# mgt-tokenize inherits it and then rightly does not stop.
ignored_at_start() {
  local mask
  mask=$(awk '/^SigIgn:/ {print $2}' "/proc/$$/status")
  (( (16#$mask >> ($1 - 1)) & 1 ))
}

GPT2=(--tokenizer-type GPT2BPETokenizer --vocab-file "$SRC/datasets/gpt2-vocab.json"
      --merge-file "$SRC/datasets/gpt2-merges.txt")

# stop_and_check SIG PID OUT_DIR WHAT: waits until the run has temporary outputs in OUT_DIR, sends
# SIG, and checks how the run ended.
stop_and_check() {
  local sig=$1 pid=$2 out=$3 what=$4 num status
  num=$(kill -l "$sig")
  for _ in $(seq 200); do  # running: its temporary outputs exist
    [[ -n "$(ls -A "$out")" ]] && break
    kill -0 "$pid" 2>/dev/null || { cat "$WORK/stderr" >&2; fail "$what: mgt-tokenize ended early"; }
    sleep 0.1
  done
  [[ -n "$(ls -A "$out")" ]] || fail "$what: no temporary output appeared"
  sleep 0.5  # what input there is tokenized; now it waits

  kill -"$sig" "$pid"
  for _ in $(seq 300); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid"
    fail "$what: mgt-tokenize did not stop within 30 s of SIG$sig"
  fi
  set +e
  wait "$pid"
  status=$?
  set -e

  [[ $status == $((128 + num)) ]] ||
    { cat "$WORK/stderr" >&2; fail "$what: exit status $status, expected $((128 + num))"; }
  grep -q "^mgt-tokenize: interrupted by SIG$sig; no output written$" "$WORK/stderr" ||
    { cat "$WORK/stderr" >&2; fail "$what: no 'interrupted by SIG$sig' message"; }
  [[ -z "$(ls -A "$out")" ]] || fail "$what: files left behind: $(ls -A "$out")"
  [[ ! -s "$WORK/stdout" ]] || fail "$what: a summary was printed"
  echo "$what: exit status $status, output directory empty"
}

for sig in INT TERM HUP; do
  if ignored_at_start "$(kill -l "$sig")"; then
    echo "SIG$sig: skipped, ignored by whoever started this test"
    continue
  fi
  out="$WORK/out-$sig"
  fifo="$WORK/in-$sig"
  mkdir "$out"
  mkfifo "$fifo"
  # Held open for reading and writing: opening it does not block, and the input never ends.
  exec 3<>"$fifo"
  if [[ $sig == INT ]]; then  # the FIFO named as an input file, or standard input
    "$BIN" --input "$fifo" --output-prefix "$out/data" "${GPT2[@]}" --workers 2 \
      >"$WORK/stdout" 2>"$WORK/stderr" &
  else
    "$BIN" --input - --output-prefix "$out/data" "${GPT2[@]}" --workers 2 \
      <"$fifo" >"$WORK/stdout" 2>"$WORK/stderr" &
  fi
  pid=$!
  head -n 300 "$SRC/datasets/corpus-tinyshakespeare.jsonl" >&3  # less than a pipe buffer
  stop_and_check "$sig" "$pid" "$out" "SIG$sig"
  exec 3>&-
done

# A FIFO that no writer ever opens.
if ! ignored_at_start "$(kill -l TERM)"; then
  mkdir "$WORK/out-lonely"
  mkfifo "$WORK/lonely"
  "$BIN" --input "$WORK/lonely" --output-prefix "$WORK/out-lonely/data" "${GPT2[@]}" \
    >"$WORK/stdout" 2>"$WORK/stderr" &
  stop_and_check TERM $! "$WORK/out-lonely" "SIGTERM waiting for a writer"
fi

echo "mgt-tokenize signal e2e: all checks passed"
