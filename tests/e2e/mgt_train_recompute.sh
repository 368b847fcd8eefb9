#!/usr/bin/env bash
# End-to-end checks of mgt-train's activation recomputation: --recompute-granularity full with
# --recompute-method uniform and block, and selective (core_attn; layernorm and mlp of
# --recompute-modules, and moe_act and moe of an MoE model, moe also at EP=2, at PP=2 and through
# --moe-layer-recompute), train the same curve bit for bit as no recomputation (dropout on), at one
# rank, over a PP=2 pipeline and (layernorm, mlp) under TP=2 with sequence parallelism, and in FP8
# (full, mlp, moe); the
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
# moe (and --moe-layer-recompute, which adds it): each MoE layer rerun from its input before its
# backward, its auxiliary losses counted once; at EP=2 the rerun's all-to-all again. The same bits.
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --recompute-granularity selective --recompute-modules moe layernorm \
  --metrics-file "$WORK/moe-layers.jsonl"
grep -q '; moe: each MoE layer.s router, token dispatch and experts rerun' "$WORK/out.txt" ||
  fail "no start-up line for moe"
compare_curves "$WORK/moe-plain.jsonl" "$WORK/moe-layers.jsonl" exact
python3 - "$WORK/moe-plain.jsonl" "$WORK/moe-layers.jsonl" <<'PY' || fail "the rerun MoE layers counted their losses again"
import json, sys
plain, rerun = ([j["load_balancing_loss"] for j in map(json.loads, open(p)) if j["event"] == "train"]
                for p in sys.argv[1:])
assert plain == rerun and len(plain) >= 10, (plain, rerun)
PY
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --moe-layer-recompute --metrics-file "$WORK/moe-layer-recompute.jsonl"
grep -q '^> activation recomputation: selective recomputation (core_attn: .*; moe: ' "$WORK/out.txt" ||
  fail "--moe-layer-recompute does not recompute the MoE layers"
compare_curves "$WORK/moe-plain.jsonl" "$WORK/moe-layer-recompute.jsonl" exact
EP2=(--expert-model-parallel-size 2)
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${EP2[@]}" --metrics-file "$WORK/moe-ep2.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${EP2[@]}" --recompute-granularity selective \
  --recompute-modules moe --metrics-file "$WORK/moe-ep2-recomputed.jsonl"
compare_curves "$WORK/moe-ep2.jsonl" "$WORK/moe-ep2-recomputed.jsonl" exact
# Under TP=2 with sequence parallelism the rerun layer all-gathers the rebuilt norm output itself.
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${TP2[@]}" --metrics-file "$WORK/moe-tp2.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${TP2[@]}" --recompute-granularity selective \
  --recompute-modules moe layernorm --metrics-file "$WORK/moe-tp2-recomputed.jsonl"
compare_curves "$WORK/moe-tp2.jsonl" "$WORK/moe-tp2-recomputed.jsonl" exact
# Over a PP=2 pipeline (1F1B, with 4 micro-batches two in flight, each its own MoE set).
PP2=(--pipeline-model-parallel-size 2 --micro-batch-size 2)
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${PP2[@]}" --metrics-file "$WORK/moe-pp2.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${PP2[@]}" --moe-layer-recompute \
  --metrics-file "$WORK/moe-pp2-recomputed.jsonl"
compare_curves "$WORK/moe-pp2.jsonl" "$WORK/moe-pp2-recomputed.jsonl" exact
# --dry-run: one set of MoE activations for the four MoE layers saves more than moe_act's buffer.
saved() {
  expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --recompute-granularity selective --recompute-modules "$1" --dry-run
  python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['recomputation']['activations_saved'])" \
    "$WORK/out.txt"
}
moe_act_saved=$(saved moe_act)
moe_saved=$(saved moe)
((moe_saved > moe_act_saved && moe_act_saved > 0)) || fail "--dry-run: moe saves $moe_saved, moe_act $moe_act_saved"

# FP8 (delayed scaling): a forward rerun by recomputation casts with its first run's scales and
# records no amax (the history has moved on to the next forward's entry since), so full, mlp and
# moe recomputation train the FP8 curve bit for bit as without.
FP8=(--bf16 --fp8-format hybrid --fp8-amax-history-len 4 --fp8-amax-compute-algo max)
expect_status 0 "$BIN/mgt-train" "${FOUR[@]}" "${FP8[@]}" --train-iters 10 --metrics-file "$WORK/fp8-plain.jsonl"
expect_status 0 "$BIN/mgt-train" "${FOUR[@]}" "${FP8[@]}" --train-iters 10 "${UNIFORM[@]}" \
  --metrics-file "$WORK/fp8-uniform.jsonl"
compare_curves "$WORK/fp8-plain.jsonl" "$WORK/fp8-uniform.jsonl" exact
expect_status 0 "$BIN/mgt-train" "${FOUR[@]}" "${FP8[@]}" --train-iters 10 --recompute-granularity selective \
  --recompute-modules mlp --metrics-file "$WORK/fp8-mlp.jsonl"
compare_curves "$WORK/fp8-plain.jsonl" "$WORK/fp8-mlp.jsonl" exact
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" "${FP8[@]}" --metrics-file "$WORK/fp8-moe-plain.jsonl"
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" "${FP8[@]}" --moe-layer-recompute --metrics-file "$WORK/fp8-moe-layers.jsonl"
compare_curves "$WORK/fp8-moe-plain.jsonl" "$WORK/fp8-moe-layers.jsonl" exact
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
expect_status 2 "$BIN/mgt-train" "${FOUR[@]}" --recompute-granularity selective --recompute-modules mla_up_proj
grep -q '^mgt-train: --recompute-modules mla_up_proj: only with multi-latent attention' "$WORK/err.txt" ||
  fail "mla_up_proj not refused by name"
expect_status 2 "$BIN/mgt-train" "${FOUR[@]}" --recompute-granularity full --recompute-method uniform \
  --recompute-num-layers 3
grep -q 'must divide the layers of each pipeline stage (4)' "$WORK/err.txt" || fail "uneven uniform groups accepted"
echo "mgt_train_recompute: OK"
