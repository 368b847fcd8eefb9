#!/usr/bin/env bash
# End-to-end check of mgt-train --dry-run's layout planner on a machine without a GPU (a login
# node): the Llama 3 8B shape planned for 4 GPUs with --device cuda lists the layouts that fit an
# H100 80GB (the default without a GPU), best first, one row each, the flags' own layout marked
# and its estimate on a line of its own; the JSON on stdout holds the same plan; a mixture of
# experts is planned with its expert-parallel sizes. --world-size 0
# and --world-size without --dry-run are usage errors on one line.
# Usage: bash tests/e2e/mgt_train_layout_planner.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"

LLAMA_8B=(--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32
  --group-query-attention --num-query-groups 8 --swiglu --normalization RMSNorm
  --position-embedding-type rope --disable-bias-linear --untie-embeddings-and-output-weights
  --seq-length 8192 --max-position-embeddings 8192 --micro-batch-size 1 --global-batch-size 8 --bf16
  --tokenizer-type NullTokenizer --vocab-size 128255 --mock-data --train-iters 100 --lr 3e-4)

# A GPU here would be planned for instead of the default this checks.
[[ -n $(command -v nvidia-smi) ]] && nvidia-smi -L >/dev/null 2>&1 &&
  { echo "a GPU is visible: the no-GPU default is not checked here"; exit 77; }

expect_status 0 "$BIN/mgt-train" "${LLAMA_8B[@]}" --device cuda --dry-run --world-size 4 \
  --tensor-model-parallel-size 4 --sequence-parallel --use-distributed-optimizer
# The dry run's own summary for the layout given stays, the plan follows it.
grep -q "^memory per rank: " "$WORK/err.txt" || fail "the dry run's summary is missing"
grep -q "^layout plan for 4 GPUs: H100 80GB (no GPU visible: the default): 79.1 GiB per GPU, 71.2 GiB planned for (10% kept free)$" \
  "$WORK/err.txt" || fail "not planned for an H100 80GB: $(grep '^layout plan' "$WORK/err.txt")"
header='^   #  TP  PP  VP  CP  DP  dist-opt recompute  mem/rank GiB     step s  tokens/s/GPU    MFU$'
grep -q "$header" "$WORK/err.txt" || fail "no table header"
rows=$(grep -cE '^ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+  (on |off) +(none|selective|full) +[0-9.]+ +[0-9.]+ +[0-9]+ +[0-9.]+%' "$WORK/err.txt")
(( rows >= 5 )) || fail "only $rows layout rows"
[[ $(grep -c '<- flags given$' "$WORK/err.txt") == 1 ]] || fail "the layout given is not marked once"
grep -qE '^estimated step: [0-9.]+ s \([0-9]+ tokens/s per GPU, MFU [0-9.]+%\) for the flags given$' \
  "$WORK/err.txt" || fail "no estimated step line"
grep -q '^best: --' "$WORK/err.txt" || fail "no flags of the best layout"

python3 - "$WORK/out.txt" "$WORK/err.txt" <<'PY' || fail "the JSON plan"
import json, re, sys
r = json.load(open(sys.argv[1]))
assert r["layout"]["tensor_model_parallel_size"] == 4 and r["layout"]["world_size"] == 4, r["layout"]
plan = r["layout_plan"]
assert plan["world_size"] == 4 and plan["gpu"]["kind"] == "h100", plan["gpu"]
budget = plan["gpu"]["budget_bytes"]
assert budget == int(plan["gpu"]["memory_bytes"] * 0.9), plan["gpu"]
layouts = plan["layouts"]
assert len(layouts) >= 5 and plan["considered"] == plan["refused_by_validation"] + plan["beyond_memory"] + len(layouts)
steps = [l["step_seconds"] for l in layouts]
assert steps == sorted(steps), steps
for l in layouts:
    tp, pp, vp, cp, dp = (l[k] for k in ("tensor_model_parallel_size", "pipeline_model_parallel_size",
                                         "virtual_pipeline_model_parallel_size", "context_parallel_size",
                                         "data_parallel_size"))
    assert tp * pp * cp * dp == 4 and 8 % tp == 0 and 32 % (pp * vp) == 0 and 8192 % (2 * cp) == 0, l
    assert l["memory_per_rank_bytes"] <= budget and l["fits"], l
    assert abs(l["tokens_per_second_per_gpu"] * 4 * l["step_seconds"] - 8 * 8192) < 1, l
given = plan["given_layout"]
assert given["tensor_model_parallel_size"] == 4 and given["given"], given
assert sum(l["given"] for l in layouts) == 1
line = re.search(r"^estimated step: ([0-9.]+) s", open(sys.argv[2]).read(), re.M)
assert abs(float(line.group(1)) / given["step_seconds"] - 1) < 1e-3, (line.group(1), given["step_seconds"])
PY

# No layout flags: the planner alone says what to take; 48 GiB GPUs fit fewer layouts.
expect_status 0 "$BIN/mgt-train" "${LLAMA_8B[@]}" --device cuda --dry-run --world-size 4 --planner-gpu-memory 48
grep -q "memory from --planner-gpu-memory: 48.0 GiB per GPU" "$WORK/err.txt" || fail "--planner-gpu-memory not used"
python3 - "$WORK/out.txt" <<'PY' || fail "--planner-gpu-memory 48: a layout beyond 90% of it"
import json, sys
plan = json.load(open(sys.argv[1]))["layout_plan"]
assert plan["beyond_memory"] > 0 and all(l["memory_per_rank_bytes"] <= 48 * 0.9 * 2**30 for l in plan["layouts"]), plan
PY

# A mixture of experts: the expert-parallel sizes are planned too, in a column of their own.
expect_status 0 "$BIN/mgt-train" --num-layers 16 --hidden-size 2048 --num-attention-heads 16 --swiglu \
  --seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 128 --bf16 \
  --tokenizer-type NullTokenizer --vocab-size 32000 --mock-data --train-iters 10 --lr 3e-4 --num-experts 8 \
  --moe-router-topk 2 --moe-ffn-hidden-size 5632 --moe-grouped-gemm --moe-token-dispatcher-type alltoall --disable-bias-linear \
  --expert-model-parallel-size 4 --device cuda --dry-run --world-size 4
grep -q '^   #  TP  PP  VP  CP  DP  EP  dist-opt' "$WORK/err.txt" || fail "no EP column for a mixture of experts"
python3 - "$WORK/out.txt" <<'PY' || fail "the mixture of experts' plan"
import json, sys
plan = json.load(open(sys.argv[1]))["layout_plan"]
sizes = {l["expert_model_parallel_size"] for l in plan["layouts"]}
assert sizes == {1, 2, 4}, sizes
assert plan["given_layout"]["expert_model_parallel_size"] == 4 and plan["given_layout"]["given"], plan["given_layout"]
assert plan["given_layout"]["step_seconds_by_part"]["expert_parallel"] > 0, plan["given_layout"]
PY

expect_status 2 "$BIN/mgt-train" "${LLAMA_8B[@]}" --device cuda --dry-run --world-size 0
[[ $(wc -l <"$WORK/err.txt") == 1 ]] && grep -q '^mgt-train: --world-size' "$WORK/err.txt" ||
  fail "--world-size 0: $(cat "$WORK/err.txt")"
expect_status 2 "$BIN/mgt-train" "${LLAMA_8B[@]}" --world-size 4
[[ $(wc -l <"$WORK/err.txt") == 1 ]] && grep -q '^mgt-train: --world-size plans a layout: it needs --dry-run' "$WORK/err.txt" ||
  fail "--world-size without --dry-run: $(cat "$WORK/err.txt")"
echo "ok"
