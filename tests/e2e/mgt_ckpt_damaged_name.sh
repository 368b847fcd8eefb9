#!/usr/bin/env bash
# End-to-end check that a checkpoint whose HDF5 link name is damaged (bytes of the tensor name
# decoder.layers.0.input_layernorm.bias flipped inside mp_rank_00.h5) is refused the same way by
# every program that reads it: exit status 1 and one line naming the file and the checksum
# failure, never an abort. mgt-train is tried with and without the optimizer state, on one rank
# and, where mpiexec is present, on two tensor-parallel ranks.
# Usage: bash tests/e2e/mgt_ckpt_damaged_name.sh BIN_DIR SOURCE_DIR
set -euo pipefail
BIN=$1
SRC=$2
source "$SRC/tests/e2e/lib/common.bash"

GPT2=(--tokenizer-type GPT2BPETokenizer --vocab-file "$SRC/datasets/gpt2-vocab.json"
      --merge-file "$SRC/datasets/gpt2-merges.txt")
MODEL=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
       --micro-batch-size 2 --lr 1e-3 --log-interval 1 --eval-iters 0 --mock-data "${GPT2[@]}")
"$BIN/mgt-train" "${MODEL[@]}" --train-iters 2 --save "$WORK/ckpt" --save-interval 2 >/dev/null 2>&1 ||
  fail "could not train the checkpoint"
SHARD="$WORK/ckpt/iter_0000002/mp_rank_00.h5"
python3 - "$SHARD" <<'PY'
import sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
name = b"decoder.layers.0.input_layernorm.bias"
at = data.find(name)
assert at >= 0, "the name is not in the file"
while at >= 0:
    data[at + 3] ^= 0x55
    data[at + 10] ^= 0x55
    at = data.find(name, at + 1)
open(path, "wb").write(bytes(data))
PY

checksum_error() {  # one line "PROGRAM: ... 'SHARD' ... checksum ..."
  local program=$1 line
  line="$(grep "^$program: " "$WORK/err.txt")" || fail "$program printed no error line: $(tail -5 "$WORK/err.txt")"
  [[ $(wc -l <<<"$line") == 1 ]] || fail "$program's error is not one line: $line"
  grep -qF "$SHARD" <<<"$line" || fail "$program's error does not name the file: $line"
  grep -q "checksum" <<<"$line" || fail "$program's error does not name the checksum failure: $line"
}

for optim in "" --no-load-optim; do
  expect_status 1 "$BIN/mgt-train" "${MODEL[@]}" --train-iters 4 --load "$WORK/ckpt" $optim
  checksum_error mgt-train
done
head -n 2 "$SRC/datasets/lambada_test.jsonl" >"$WORK/lambada.jsonl"
expect_status 1 "$BIN/mgt-eval" --task LAMBADA --valid-data "$WORK/lambada.jsonl" --load "$WORK/ckpt"
checksum_error mgt-eval
echo '{"prompt": "Hello"}' >"$WORK/prompts.jsonl"
expect_status 1 "$BIN/mgt-generate" --load "$WORK/ckpt" --prompts "$WORK/prompts.jsonl" --max-new-tokens 2
checksum_error mgt-generate
expect_status 1 "$BIN/mgt-ckpt-convert" --model-type GPT --loader mgt --saver hf --load-dir "$WORK/ckpt" \
  --save-dir "$WORK/hf"
checksum_error mgt-ckpt-convert

if MPIEXEC="$(command -v mpiexec)"; then
  LAUNCHER=()
  # Hydra's fork launcher keeps the ranks on this machine even inside a Slurm allocation.
  if "$MPIEXEC" --version 2>/dev/null | grep -q HYDRA; then LAUNCHER=(-launcher fork); fi
  export OPENBLAS_NUM_THREADS=1 MGT_NUM_THREADS=1
  expect_status 1 env -u SLURM_NTASKS -u SLURM_NPROCS -u SLURM_STEP_NUM_TASKS "$MPIEXEC" -n 2 "${LAUNCHER[@]}" \
    "$BIN/mgt-train" "${MODEL[@]}" --train-iters 4 --load "$WORK/ckpt" --tensor-model-parallel-size 2
  grep -q "checksum" "$WORK/err.txt" || fail "TP=2: no checksum failure reported: $(tail -5 "$WORK/err.txt")"
  ! grep -q "free(): invalid pointer\|Aborted\|core dumped" "$WORK/err.txt" || fail "TP=2 aborted"
fi
echo "damaged link name e2e: all checks passed"
