#!/usr/bin/env bash
# End-to-end checks of mgt-train's activation recomputation: --recompute-granularity full with
# --recompute-method uniform and block, and selective (core_attn; layernorm and mlp of
# --recompute-modules, and moe_act of an MoE model), train the same curve bit for bit as no recomputation (dropout on), at one
# rank, over a PP=2 pipeline and (layernorm, mlp) under TP=2 with sequence parallelism; the
# start-up line says what is recomputed; --dry-run prints the activation memory with and without;
# modules mgt cannot recompute are refused by name.
# Usage: bash tests/e2e/mgt_train_recompute.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/parallel_training.bash"

FOUR=("${GPT2[@]}" --num-layers 4)
UNIFORM=(--recompute-granularity full --recompute-method uniform --recompute-num-layers 2)

expect_status 0 "$BIN/mgt-train" "${FOUR[@]}" --metrics-file "$WORK/plain.jsonl"
grep -q '^> activation recomputation' "$WORK/out.txt" && fail "a start-up line on recomputation without it"

expect_status 0 "$BIN/mgt-train" "${FOUR[@]}" "${UNIFORM[@]}" --metrics-file "$WORK/uniform.jsonl"
grep -q '^> activation recomputation: full recomputation, uniform: 2 groups of 2 layers checkpointed (only their inputs kept; each group.s forward rerun before its backward)$' \
  "$WORK/out.txt" || fail "no start-up line for uniform recomputation"
compare_curves "$WORK/plain.jsonl" "$WORK/uniform.jsonl" exact

expect_status 0 "$BIN/mgt-train" "${FOUR[@]}" --recompute-granularity full --recompute-method block \
  --recompute-num-layers 1 --metrics-file "$WORK/block.jsonl"
grep -q '^> activation recomputation: full recomputation, block: the first 1 layer of the stage checkpointed one by one, 3 layers keeping their activations' \
  "$WORK/out.txt" || fail "no start-up line for block recomputation"
compare_curves "$WORK/plain.jsonl" "$WORK/block.jsonl" exact

expect_status 0 "$BIN/mgt-train" "${FOUR[@]}" --recompute-activations --metrics-file "$WORK/selective.jsonl"
grep -q '^> activation recomputation: selective recomputation (core_attn: mgt.s attention kernels keep no softmax probabilities' \
  "$WORK/out.txt" || fail "the selective start-up line does not say the attention keeps no probabilities"
compare_curves "$WORK/plain.jsonl" "$WORK/selective.jsonl" exact

# --recompute-modules layernorm mlp (with core_attn): the norm outputs and the MLP's activations
# rebuilt in the backward, the same bits; Llama's RMSNorm and SwiGLU too.
MODULES=(--recompute-granularity selective --recompute-modules core_attn layernorm mlp)
expect_status 0 "$BIN/mgt-train" "${FOUR[@]}" "${MODULES[@]}" --metrics-file "$WORK/modules.jsonl"
grep -q '^> activation recomputation: selective recomputation (core_attn: .*; layernorm: .*; mlp: .*)$' "$WORK/out.txt" ||
  fail "the start-up line does not name the modules recomputed"
compare_curves "$WORK/plain.jsonl" "$WORK/modules.jsonl" exact
LLAMA_FOUR=("${LLAMA[@]}" --num-layers 4 --train-iters 10)
expect_status 0 "$BIN/mgt-train" "${LLAMA_FOUR[@]}" --metrics-file "$WORK/llama-plain.jsonl"
expect_status 0 "$BIN/mgt-train" "${LLAMA_FOUR[@]}" --recompute-granularity selective --recompute-modules layernorm mlp \
  --metrics-file "$WORK/llama-modules.jsonl"
compare_curves "$WORK/llama-plain.jsonl" "$WORK/llama-modules.jsonl" exact
# Under TP=2 with sequence parallelism the rebuilt norm outputs are all-gathered again.
TP2=(--tensor-model-parallel-size 2 --sequence-parallel --train-iters 10)
expect_status 0 ranks 2 "$BIN/mgt-train" "${FOUR[@]}" "${TP2[@]}" --metrics-file "$WORK/tp2-plain.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${FOUR[@]}" "${TP2[@]}" --recompute-granularity selective \
  --recompute-modules layernorm --metrics-file "$WORK/tp2-layernorm.jsonl"
compare_curves "$WORK/tp2-plain.jsonl" "$WORK/tp2-layernorm.jsonl" exact
expect_status 0 ranks 2 "$BIN/mgt-train" "${FOUR[@]}" "${TP2[@]}" "${MODULES[@]}" --metrics-file "$WORK/tp2-modules.jsonl"
compare_curves "$WORK/tp2-plain.jsonl" "$WORK/tp2-modules.jsonl" exact
# moe_act: the experts' activation outputs recomputed from their fc1 outputs, the same bits.
MOE=("${LLAMA[@]}" --num-layers 4 --train-iters 10 --num-experts 4 --moe-router-topk 2 --moe-ffn-hidden-size 48
     --moe-aux-loss-coeff 1e-2 --moe-layer-freq 1 --moe-token-dispatcher-type alltoall)
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --metrics-file "$WORK/moe-plain.jsonl"
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --recompute-granularity selective --recompute-modules moe_act layernorm \
  --metrics-file "$WORK/moe-act.jsonl"
grep -q '; moe_act: the experts. activation outputs recomputed' "$WORK/out.txt" || fail "no start-up line for moe_act"
compare_curves "$WORK/moe-plain.jsonl" "$WORK/moe-act.jsonl" exact
# --dry-run: what the modules save.
expect_status 0 "$BIN/mgt-train" "${FOUR[@]}" "${MODULES[@]}" --dry-run
python3 - "$WORK/out.txt" <<'PY' || fail "--dry-run JSON with --recompute-modules"
import json, sys
r = json.load(open(sys.argv[1]))
rc = r["recomputation"]
assert rc["granularity"] == "selective" and rc["activations_saved"] > 0, r
PY
grep -q '^activation recomputation (selective): activations .* instead of .* without, .* saved per rank$' "$WORK/err.txt" ||
  fail "--dry-run does not print what the modules save"

# Over a pipeline: two stages of two layers, each one group.
expect_status 0 ranks 2 "$BIN/mgt-train" "${FOUR[@]}" "${UNIFORM[@]}" --pipeline-model-parallel-size 2 \
  --metrics-file "$WORK/uniform-pp2.jsonl"
grep -q '^> activation recomputation: full recomputation, uniform: 1 group of 2 layers checkpointed' "$WORK/out.txt" ||
  fail "PP=2: the start-up line does not describe a stage"
compare_curves "$WORK/plain.jsonl" "$WORK/uniform-pp2.jsonl" same

# --dry-run: the activations with and without recomputation.
expect_status 0 "$BIN/mgt-train" "${FOUR[@]}" "${UNIFORM[@]}" --dry-run
python3 - "$WORK/out.txt" <<'PY' || fail "--dry-run recomputation JSON"
import json, sys
r = json.load(open(sys.argv[1]))
m, rc = r["memory_per_rank_bytes"], r["recomputation"]
assert rc["granularity"] == "full", r
assert rc["activations_without_recomputation"] - m["activations"] == rc["activations_saved"] > 0, r
assert m["total"] == sum(v for k, v in m.items() if k != "total"), r
PY
grep -q '^activation recomputation (full): activations .* instead of .* without, .* saved per rank$' "$WORK/err.txt" ||
  fail "--dry-run does not print what recomputation saves"
expect_status 0 "$BIN/mgt-train" "${FOUR[@]}" --dry-run
python3 - "$WORK/out.txt" <<'PY' || fail "--dry-run JSON without recomputation"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["recomputation"] == {"granularity": None, "activations_without_recomputation":
                              r["memory_per_rank_bytes"]["activations"], "activations_saved": 0}, r
PY

# Refusals, by name and with the reason.
expect_status 2 "$BIN/mgt-train" "${FOUR[@]}" --recompute-granularity selective --recompute-modules core_attn moe
grep -q '^mgt-train: --recompute-modules moe: not supported by mgt-train' "$WORK/err.txt" || fail "moe not refused"
expect_status 2 "$BIN/mgt-train" "${FOUR[@]}" --recompute-granularity selective --recompute-modules mla_up_proj
grep -q '^mgt-train: --recompute-modules mla_up_proj: only with multi-latent attention' "$WORK/err.txt" ||
  fail "mla_up_proj not refused by name"
expect_status 2 "$BIN/mgt-train" "${FOUR[@]}" --recompute-granularity full --recompute-method uniform \
  --recompute-num-layers 3
grep -q 'must divide the layers of each pipeline stage (4)' "$WORK/err.txt" || fail "uneven uniform groups accepted"
echo "mgt_train_recompute: OK"
