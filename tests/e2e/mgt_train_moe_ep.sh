#!/usr/bin/env bash
# End-to-end checks of expert parallelism (--expert-model-parallel-size, CPU ranks over MPI): a
# model of 8 experts, top-2, with the alltoall dispatcher reproduces the one-rank run's lm loss,
# auxiliary losses and grad norm (20 iterations, within 1e-5 relative; 1e-4 for the norm) with
# EP=2 on 2 ranks, and with EP=2 x expert-data-parallel 2 on 4 ranks with the distributed
# optimizer (whose replicas --check-weight-hash-across-dp-replicas-interval finds equal, the
# experts compared over their expert-data-parallel pairs); a checkpoint saved at EP=2 resumes at EP=1 (and one saved at EP=1 at EP=2) with the
# uninterrupted run's losses, directly and through mgt-ckpt-convert; layouts that cannot hold the
# experts are refused with one line and exit 2.
# The same equivalence holds with the allgather dispatcher (EP=2, and EP=2 x TP=2), with tensor
# parallelism (TP=2 with --sequence-parallel, the experts' weights split over the tensor-parallel
# ranks, Megatron's default --expert-tensor-parallel-size), with pipeline parallelism (PP=2, the
# MoE layer on the second stage; interleaved, MoE layers on both ranks) and with EP=2 x TP=2 on 4
# ranks, whose checkpoint resumes on one rank. With a capacity under sequence parallelism, padding
# the experts' rows changes nothing. With --expert-tensor-parallel-size 1 (whole experts on each
# tensor-parallel rank) TP=2 reproduces it too, and its checkpoint resumes on one rank (with expert
# parallelism as well: mgt_train_moe_etp.sh). TP without sequence parallelism is refused with one
# line. In FP8 (the experts' GEMMs too) EP=2 agrees with one rank, and the experts' FP8 state
# moves with them from EP=2 to EP=1 to EP=4 checkpoints; --fp8-param-gather (the experts' codes
# over the expert-data-parallel group) reproduces the run without it bit for bit.
# --moe-shared-expert-overlap (the shared experts beside the token exchange, started) reproduces
# EP=2 and EP=2 x TP=2 bit for bit, with --moe-shared-expert-gate too (its forward beside it), in
# FP8 and with --recompute-modules moe. --delay-wgrad-compute (the grouped experts' weight
# gradients beside their input gradients' exchange back) reproduces EP=2, EP=2 x TP=2, EP=2 with
# the activation recomputed and EP=2 x DP=2 with the reduction overlapped, bit for bit. Top-1
# routing with --moe-apply-probs-on-input agrees with one rank at EP=2 (both dispatchers) and
# EP=2 x TP=2, and so does routing by random logits (--moe-router-force-load-balancing), and
# Sinkhorn routing at EP=2.
# Usage: bash tests/e2e/mgt_train_moe_ep.sh BIN_DIR SOURCE_DIR
set -euo pipefail

BIN="$1"
SRC="$2"
source "$SRC/tests/e2e/lib/common.bash"
source "$SRC/tests/e2e/lib/mpi_ranks.bash"
source "$SRC/tests/e2e/lib/moe_equivalence.bash"

expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --metrics-file "$WORK/one.jsonl"

# EP=2 on 2 ranks: each rank holds 4 experts; the groups are printed as Megatron lays them out.
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" --expert-model-parallel-size 2 --metrics-file "$WORK/ep2.jsonl" \
  --save "$WORK/ck-ep2" --save-interval 10
grep -q "> expert-model-parallel groups: \[0, 1\] (mpi), 4 of the 8 experts per rank" "$WORK/out.txt" ||
  fail "no expert-model-parallel groups line"
compare "$WORK/one.jsonl" "$WORK/ep2.jsonl"

# EP=2 x expert-data-parallel 2 on 4 ranks, the distributed optimizer sharding both regions,
# --log-params-norm counting each expert once.
expect_status 0 ranks 4 "$BIN/mgt-train" "${MOE[@]}" --expert-model-parallel-size 2 --use-distributed-optimizer \
  --metrics-file "$WORK/ep2dp2.jsonl" --save "$WORK/ck-ep2dp2" --save-interval 10 \
  --check-weight-hash-across-dp-replicas-interval 10
grep -q "> expert-data-parallel groups (the experts' gradients): \[0, 2\] \[1, 3\]" "$WORK/out.txt" ||
  fail "no expert-data-parallel groups line"
# The replicas compared as Megatron groups them: the dense tensors over the 4 data-parallel
# ranks, each rank's experts over its expert-data-parallel pair.
[[ $(grep -c '^>>> Weight hashes match after \(0\|10\|20\) iterations\.\.\.$' "$WORK/out.txt") == 3 ]] ||
  fail "weight hash lines: $(grep '^>>> Weight' "$WORK/out.txt")"
compare "$WORK/one.jsonl" "$WORK/ep2dp2.jsonl"
# The same with --overlap-grad-reduce: the dense parameters' buckets reduced beside the backward,
# the experts' region over its own group after it.
expect_status 0 ranks 4 "$BIN/mgt-train" "${MOE[@]}" --expert-model-parallel-size 2 --use-distributed-optimizer \
  --overlap-grad-reduce --ddp-bucket-size 20000 --metrics-file "$WORK/ep2dp2-overlap.jsonl"
grep -q "> overlapping the data-parallel reduce-scatter" "$WORK/out.txt" || fail "no overlap line"
compare "$WORK/one.jsonl" "$WORK/ep2dp2-overlap.jsonl"

# The checkpoints of iteration 10 (the runs above saved 10 and 20; 20 is set aside) name each
# expert by its global number; they resume at EP=1, the optimizer's state of both regions included.
for ck in "$WORK/ck-ep2" "$WORK/ck-ep2dp2"; do
  rm -r "$ck/iter_0000020"
  echo 10 >"$ck/latest_checkpointed_iteration.txt"
done
# Rank 0 stores experts 0-3 with the rest of the model, rank 1 experts 4-7 in its own file.
CK10="$WORK/ck-ep2/iter_0000010"
grep -aq "local_experts.3.linear_fc1.weight" "$CK10/mp_rank_00.h5" || fail "experts 0-3 not in mp_rank_00.h5"
grep -aq "local_experts.7.linear_fc1.weight" "$CK10/mp_rank_00_dp_001.h5" ||
  fail "experts 4-7 not in mp_rank_00_dp_001.h5"
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --load "$WORK/ck-ep2" --metrics-file "$WORK/resumed-ep1.jsonl"
compare "$WORK/one.jsonl" "$WORK/resumed-ep1.jsonl" 11
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --load "$WORK/ck-ep2dp2" --metrics-file "$WORK/resumed-dist.jsonl"
compare "$WORK/one.jsonl" "$WORK/resumed-dist.jsonl" 11

# Converted (mgt to mgt, the source's layout) it still resumes; and an EP=1 checkpoint resumes at EP=2.
expect_status 0 "$BIN/mgt-ckpt-convert" --model-type GPT --loader mgt --saver mgt --load-dir "$WORK/ck-ep2" \
  --save-dir "$WORK/ck-converted"
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" --expert-model-parallel-size 2 --load "$WORK/ck-converted" \
  --metrics-file "$WORK/resumed-ep2.jsonl"
compare "$WORK/one.jsonl" "$WORK/resumed-ep2.jsonl" 11

# The allgather dispatcher (Megatron's MoEAllGatherTokenDispatcher): every rank gathers the
# group's tokens, runs its experts on theirs and reduce-scatters the outputs back.
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" --expert-model-parallel-size 2 --moe-token-dispatcher-type allgather \
  --metrics-file "$WORK/ep2-allgather.jsonl"
compare "$WORK/one.jsonl" "$WORK/ep2-allgather.jsonl"

# Tensor parallelism: every rank gathers the sequence-parallel tokens, routes all of them and runs
# its slices of the experts. Pipeline parallelism: the MoE layer on the second stage, whose
# auxiliary losses reach rank 0's log.
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" --tensor-model-parallel-size 2 --sequence-parallel \
  --metrics-file "$WORK/tp2sp.jsonl"
compare "$WORK/one.jsonl" "$WORK/tp2sp.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" --pipeline-model-parallel-size 2 --metrics-file "$WORK/pp2.jsonl"
compare "$WORK/one.jsonl" "$WORK/pp2.jsonl"

# Interleaved (two virtual stages per rank): rank 0 runs layer 0 (MoE) and layer 2 (dense), rank 1
# layer 1 (dense) and layer 3 (MoE).
VIRTUAL=(--num-layers 4 --moe-layer-freq "[1,0,0,1]")
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" "${VIRTUAL[@]}" --metrics-file "$WORK/one4.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${VIRTUAL[@]}" --pipeline-model-parallel-size 2 \
  --num-layers-per-virtual-pipeline-stage 1 --metrics-file "$WORK/vpp2.jsonl"
compare "$WORK/one4.jsonl" "$WORK/vpp2.jsonl"

# With a capacity, each sequence-parallel rank's tokens are routed with their own capacity (as
# Megatron's router sees them; tests/model/test_moe_layer.cpp); padding each expert's rows to it
# changes nothing.
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" --tensor-model-parallel-size 2 --sequence-parallel \
  --moe-expert-capacity-factor 1.0 --metrics-file "$WORK/tp2-capacity.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" --tensor-model-parallel-size 2 --sequence-parallel \
  --moe-expert-capacity-factor 1.0 --moe-pad-expert-input-to-capacity --metrics-file "$WORK/tp2-padded.jsonl"
compare "$WORK/tp2-capacity.jsonl" "$WORK/tp2-padded.jsonl"

# --expert-tensor-parallel-size 1 under TP=2: every expert whole on both ranks, each running its
# part of the sequence through them; saved, it resumes on one rank.
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" --tensor-model-parallel-size 2 --sequence-parallel \
  --expert-tensor-parallel-size 1 --metrics-file "$WORK/tp2-etp1.jsonl" --save "$WORK/ck-etp1" --save-interval 10
compare "$WORK/one.jsonl" "$WORK/tp2-etp1.jsonl"
rm -r "$WORK/ck-etp1/iter_0000020"
echo 10 >"$WORK/ck-etp1/latest_checkpointed_iteration.txt"
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --load "$WORK/ck-etp1" --metrics-file "$WORK/resumed-etp1.jsonl"
compare "$WORK/one.jsonl" "$WORK/resumed-etp1.jsonl" 11

# EP=2 x TP=2 on 4 ranks: Megatron's expert grid (expert-tensor = TP, then EP) makes the
# expert-parallel groups of the ranks with the same tensor-parallel rank. Saved, it resumes on one rank.
expect_status 0 ranks 4 "$BIN/mgt-train" "${MOE[@]}" --tensor-model-parallel-size 2 --sequence-parallel \
  --expert-model-parallel-size 2 --metrics-file "$WORK/ep2tp2.jsonl" --save "$WORK/ck-ep2tp2" --save-interval 10
grep -q "> expert-model-parallel groups: \[0, 2\] \[1, 3\] (mpi)" "$WORK/out.txt" ||
  fail "no expert-model-parallel groups line for EP=2 x TP=2"
compare "$WORK/one.jsonl" "$WORK/ep2tp2.jsonl"
expect_status 0 ranks 4 "$BIN/mgt-train" "${MOE[@]}" --tensor-model-parallel-size 2 --sequence-parallel \
  --expert-model-parallel-size 2 --moe-token-dispatcher-type allgather --metrics-file "$WORK/ep2tp2-allgather.jsonl"
grep -q "4 of the 8 experts per rank, tokens by all-gather and reduce-scatter" "$WORK/out.txt" ||
  fail "no allgather dispatcher in the expert-model-parallel groups line"
compare "$WORK/one.jsonl" "$WORK/ep2tp2-allgather.jsonl"
rm -r "$WORK/ck-ep2tp2/iter_0000020"
echo 10 >"$WORK/ck-ep2tp2/latest_checkpointed_iteration.txt"
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --load "$WORK/ck-ep2tp2" --metrics-file "$WORK/resumed-tp1.jsonl"
compare "$WORK/one.jsonl" "$WORK/resumed-tp1.jsonl" 11

# FP8 (--fp8-format hybrid, delayed scaling; the CPU emulates the casts): every expert's fc1 and
# fc2 in FP8 with scales of their own, each expert's rows padded to 16 with zero rows. An expert's
# amaxes are reduced over the ranks that hold it, so EP=2 reproduces the same two ranks without
# expert parallelism (the reference: delayed scaling sees each data-parallel rank's micro-batches
# at once, so that the data-parallel size, not the expert layout, decides the scales): over the
# first 8 iterations within the bf16 bounds (measured: equal losses, grad norms within 4e-8;
# Transformer Engine's reduction, position by position over the data-parallel ranks, misses them
# by 1e-4 from iteration 3 on, which FP8 amplifies to 1e-3 by iteration 6), over all 20 within
# 1e-3. The layouts cannot agree bit for bit: an expert's weight gradient sums both ranks' rows in
# one GEMM at EP=2 and in two GEMMs and a reduction at DP=2, and once that last-bit difference
# moves an FP8 code the runs drift apart (measured on AVX-512 OpenBLAS: 2.2e-4 in the
# load-balancing loss by iteration 20, from iteration 9 on). The checkpoint keeps each expert's FP8 state under
# its global number (rank 1's experts in rank 1's file): resumed at EP=2 it continues bit for bit,
# at EP=1 (two ranks) within 1e-5, and saved there it resumes at EP=4 on four ranks within 1e-3
# (four data-parallel ranks group the micro-batches' amaxes otherwise; measured 1.2e-4).
FP8=(--bf16 --fp8-format hybrid --fp8-amax-history-len 4 --fp8-amax-compute-algo max --deterministic-mode)
fp8_agree() {  # fp8_agree REFERENCE RUN FIRST BOUND [LAST]: RUN's iterations FIRST..LAST (0: bit for bit)
  python3 - "$@" <<'PY' || fail "$2 does not agree with $1"
import json, sys
def load(path):
    return {j["iteration"]: j for j in map(json.loads, open(path)) if j["event"] == "train"}
ref, run, first, bound = load(sys.argv[1]), load(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
last = int(sys.argv[5]) if len(sys.argv) > 5 else max(run)
assert min(run) == first and len(run) >= 5 and all(k in ref for k in run), (sorted(run), first)
worst = 0.0
for k in sorted(k for k in run if k <= last):
    for field in ("lm_loss", "load_balancing_loss", "grad_norm"):
        a, b = ref[k][field], run[k][field]
        assert (a == b) if bound == 0 else abs(a - b) <= bound * abs(a), f"{k} {field}: {a!r} vs {b!r}"
        worst = max(worst, abs(a - b) / abs(a))
print(f"{sys.argv[2].rsplit('/', 1)[-1]}: {len([k for k in run if k <= last])} iterations, largest relative difference {worst:.2e}")
PY
}
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${FP8[@]}" --metrics-file "$WORK/fp8-dp2.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${FP8[@]}" --expert-model-parallel-size 2 \
  --metrics-file "$WORK/fp8-ep2.jsonl" --save "$WORK/ck-fp8" --save-interval 10
fp8_agree "$WORK/fp8-dp2.jsonl" "$WORK/fp8-ep2.jsonl" 1 1e-5 8
fp8_agree "$WORK/fp8-dp2.jsonl" "$WORK/fp8-ep2.jsonl" 1 1e-3
rm -r "$WORK/ck-fp8/iter_0000020"
echo 10 >"$WORK/ck-fp8/latest_checkpointed_iteration.txt"
grep -aq "forward_amax_history" "$WORK/ck-fp8/iter_0000010/mp_rank_00_dp_001.h5" ||
  fail "experts 4-7's FP8 state not in mp_rank_00_dp_001.h5"
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${FP8[@]}" --expert-model-parallel-size 2 --load "$WORK/ck-fp8" \
  --exit-interval 15 --metrics-file "$WORK/fp8-resumed-ep2.jsonl"
fp8_agree "$WORK/fp8-ep2.jsonl" "$WORK/fp8-resumed-ep2.jsonl" 11 0
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${FP8[@]}" --load "$WORK/ck-fp8" --exit-interval 15 \
  --metrics-file "$WORK/fp8-resumed-ep1.jsonl" --save "$WORK/ck-fp8-ep1" --save-interval 15
! grep -q "holds no FP8 state" "$WORK/err.txt" "$WORK/out.txt" || fail "FP8 state missing at EP=1"
fp8_agree "$WORK/fp8-ep2.jsonl" "$WORK/fp8-resumed-ep1.jsonl" 11 1e-5
expect_status 0 ranks 4 "$BIN/mgt-train" "${MOE[@]}" "${FP8[@]}" --expert-model-parallel-size 4 \
  --load "$WORK/ck-fp8-ep1" --metrics-file "$WORK/fp8-resumed-ep4.jsonl"
! grep -q "holds no FP8 state" "$WORK/err.txt" "$WORK/out.txt" || fail "FP8 state missing at EP=4"
fp8_agree "$WORK/fp8-ep2.jsonl" "$WORK/fp8-resumed-ep4.jsonl" 16 1e-3

# --fp8-param-gather: the distributed optimizer casts each rank's shard of the FP8 weights and
# all-gathers the codes, the routed experts' over the expert-data-parallel group. At EP=2 x
# expert-data-parallel 2 on 4 ranks (10 iterations) it reproduces the run without the flag bit
# for bit, under delayed scaling in the step's gather (saving at iteration 5) and resumed there
# with --overlap-param-gather (the experts' codes in their region's gather beside the dense
# buckets'), and under current (tensorwise) scaling overlapped from the start. Without expert
# parallelism (two ranks) the experts' weights lie among the others and travel with them, bit for
# bit as well.
PG=("${FP8[@]}" --expert-model-parallel-size 2 --use-distributed-optimizer --train-iters 10)
OVERLAP=(--overlap-grad-reduce --overlap-param-gather --ddp-bucket-size 5000)
expect_status 0 ranks 4 "$BIN/mgt-train" "${MOE[@]}" "${PG[@]}" --metrics-file "$WORK/fp8-ep2dp2.jsonl"
expect_status 0 ranks 4 "$BIN/mgt-train" "${MOE[@]}" "${PG[@]}" --fp8-param-gather --save "$WORK/ck-pg" \
  --save-interval 5 --metrics-file "$WORK/fp8-ep2dp2-pg.jsonl"
# Each rank's 4 experts' fc1 [96, 32] and fc2 [32, 48], as FP8 codes only.
grep -q "> --fp8-param-gather: the weights of 8 routed experts' FP8 linear layers (18432 elements) are \
all-gathered as FP8 codes: 18432 bytes per step over the expert-data-parallel group instead of 73728" \
  "$WORK/out.txt" || fail "no --fp8-param-gather line for the experts"
fp8_agree "$WORK/fp8-ep2dp2.jsonl" "$WORK/fp8-ep2dp2-pg.jsonl" 1 0
rm -r "$WORK/ck-pg/iter_0000010"
echo 5 >"$WORK/ck-pg/latest_checkpointed_iteration.txt"
expect_status 0 ranks 4 "$BIN/mgt-train" "${MOE[@]}" "${PG[@]}" --fp8-param-gather "${OVERLAP[@]}" \
  --load "$WORK/ck-pg" --metrics-file "$WORK/fp8-ep2dp2-pg-overlap-resumed.jsonl"
fp8_agree "$WORK/fp8-ep2dp2.jsonl" "$WORK/fp8-ep2dp2-pg-overlap-resumed.jsonl" 6 0
expect_status 0 ranks 4 "$BIN/mgt-train" "${MOE[@]}" "${PG[@]}" --fp8-recipe tensorwise \
  --metrics-file "$WORK/fp8-tw-ep2dp2.jsonl"
expect_status 0 ranks 4 "$BIN/mgt-train" "${MOE[@]}" "${PG[@]}" --fp8-recipe tensorwise --fp8-param-gather \
  "${OVERLAP[@]}" --metrics-file "$WORK/fp8-tw-ep2dp2-pg-overlap.jsonl"
fp8_agree "$WORK/fp8-tw-ep2dp2.jsonl" "$WORK/fp8-tw-ep2dp2-pg-overlap.jsonl" 1 0
EP1=("${FP8[@]}" --use-distributed-optimizer --train-iters 10)
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${EP1[@]}" --metrics-file "$WORK/fp8-dp2-distopt.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${EP1[@]}" --fp8-param-gather "${OVERLAP[@]}" \
  --metrics-file "$WORK/fp8-dp2-pg-overlap.jsonl"
grep -q "> --fp8-param-gather: the weights of 24 FP8 linear layers" "$WORK/out.txt" ||
  fail "without expert parallelism the experts' FP8 weights are not gathered with the others"
! grep -q "routed experts' FP8 linear layers" "$WORK/out.txt" || fail "an experts' region without expert parallelism"
fp8_agree "$WORK/fp8-dp2-distopt.jsonl" "$WORK/fp8-dp2-pg-overlap.jsonl" 1 0

# --moe-shared-expert-overlap: the shared experts' forward beside the tokens' exchange to the
# experts, their backward beside the output gradients' (the exchange started on the
# communicator; MPI's completes in the start, so on CPU ranks this checks the schedule's results:
# the shared experts' output and input gradient added where they were before). Bit for bit.
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" --expert-model-parallel-size 2 --moe-shared-expert-overlap \
  --metrics-file "$WORK/ep2-shared-overlap.jsonl"
fp8_agree "$WORK/ep2.jsonl" "$WORK/ep2-shared-overlap.jsonl" 1 0
expect_status 0 ranks 4 "$BIN/mgt-train" "${MOE[@]}" --tensor-model-parallel-size 2 --sequence-parallel \
  --expert-model-parallel-size 2 --moe-shared-expert-overlap --metrics-file "$WORK/ep2tp2-shared-overlap.jsonl"
fp8_agree "$WORK/ep2tp2.jsonl" "$WORK/ep2tp2-shared-overlap.jsonl" 1 0
GATE=(--expert-model-parallel-size 2 --moe-shared-expert-gate --train-iters 10)
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${GATE[@]}" --metrics-file "$WORK/ep2-gate.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${GATE[@]}" --moe-shared-expert-overlap \
  --metrics-file "$WORK/ep2-gate-overlap.jsonl"
fp8_agree "$WORK/ep2-gate.jsonl" "$WORK/ep2-gate-overlap.jsonl" 1 0
# In FP8 (the shared experts' casts and amaxes among the routed experts'), and with the MoE layers
# rerun from their inputs before their backward (--recompute-modules moe), bit for bit as well.
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${FP8[@]}" --expert-model-parallel-size 2 \
  --moe-shared-expert-overlap --metrics-file "$WORK/fp8-ep2-shared-overlap.jsonl"
fp8_agree "$WORK/fp8-ep2.jsonl" "$WORK/fp8-ep2-shared-overlap.jsonl" 1 0
RECOMPUTE=(--expert-model-parallel-size 2 --recompute-granularity selective --recompute-modules moe --train-iters 10)
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${RECOMPUTE[@]}" --metrics-file "$WORK/ep2-recompute.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${RECOMPUTE[@]}" --moe-shared-expert-overlap \
  --metrics-file "$WORK/ep2-recompute-overlap.jsonl"
fp8_agree "$WORK/ep2-recompute.jsonl" "$WORK/ep2-recompute-overlap.jsonl" 1 0

# --delay-wgrad-compute: the grouped experts' input gradients first, their weight gradients
# beside the input gradients' exchange back (started; on CPU ranks MPI's completes first, so this
# checks the schedule's results). Bit for bit, also under EP=2 x TP=2 with sequence parallelism
# (the experts split over the tensor-parallel ranks, their partial sums exchanged) and with the
# experts' activation recomputed before their backward (--recompute-modules moe_act), and with
# EP=2 x expert-data-parallel 2 reducing the gradients beside the backward (the delayed weight
# gradients written before their layer's reduction starts), with the shared experts' overlap too.
for layout in ep2 ep2tp2 ep2act ep2dp2; do
  case $layout in
    ep2) flags=(--expert-model-parallel-size 2); n=2 ;;
    ep2dp2) flags=(--expert-model-parallel-size 2 --use-distributed-optimizer --overlap-grad-reduce
                   --ddp-bucket-size 20000 --moe-shared-expert-overlap); n=4 ;;
    ep2tp2) flags=(--tensor-model-parallel-size 2 --sequence-parallel --expert-model-parallel-size 2); n=4 ;;
    ep2act) flags=(--expert-model-parallel-size 2 --recompute-granularity selective --recompute-modules moe_act); n=2 ;;
  esac
  GROUPED=("${flags[@]}" --bf16 --moe-grouped-gemm --train-iters 10)
  expect_status 0 ranks $n "$BIN/mgt-train" "${MOE[@]}" "${GROUPED[@]}" --metrics-file "$WORK/$layout-grouped.jsonl"
  expect_status 0 ranks $n "$BIN/mgt-train" "${MOE[@]}" "${GROUPED[@]}" --delay-wgrad-compute \
    --metrics-file "$WORK/$layout-grouped-delayed.jsonl"
  fp8_agree "$WORK/$layout-grouped.jsonl" "$WORK/$layout-grouped-delayed.jsonl" 1 0
done
expect_status 2 "$BIN/mgt-train" "${MOE[@]}" --bf16 --moe-grouped-gemm --delay-wgrad-compute
one_line "--delay-wgrad-compute needs --num-experts with --expert-model-parallel-size > 1, --moe-token-dispatcher-type alltoall and --moe-grouped-gemm, without --fp8-format (mgt delays the grouped experts' weight gradients beside the all-to-all)"

# --moe-apply-probs-on-input (top-1, sigmoid scores: Llama 4's experts, each reading its token's
# input times the probability): EP=2 with either dispatcher and TP=2 x EP=2 with the experts split
# reproduce one rank; other top-k are refused.
TOP1=(--moe-router-topk 1 --moe-router-score-function sigmoid --moe-apply-probs-on-input)
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" "${TOP1[@]}" --metrics-file "$WORK/top1.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${TOP1[@]}" --expert-model-parallel-size 2 \
  --metrics-file "$WORK/top1-ep2.jsonl"
compare "$WORK/top1.jsonl" "$WORK/top1-ep2.jsonl"
expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${TOP1[@]}" --expert-model-parallel-size 2 \
  --moe-token-dispatcher-type allgather --metrics-file "$WORK/top1-ep2-ag.jsonl"
compare "$WORK/top1.jsonl" "$WORK/top1-ep2-ag.jsonl"
expect_status 0 ranks 4 "$BIN/mgt-train" "${MOE[@]}" "${TOP1[@]}" --tensor-model-parallel-size 2 --sequence-parallel \
  --expert-model-parallel-size 2 --metrics-file "$WORK/top1-ep2tp2.jsonl"
compare "$WORK/top1.jsonl" "$WORK/top1-ep2tp2.jsonl"
# --moe-router-force-load-balancing: the random logits are drawn from the seed, the micro-batch and
# the layer, the same in every layout.
expect_status 0 "$BIN/mgt-train" "${MOE[@]}" --moe-router-force-load-balancing --metrics-file "$WORK/forced.jsonl"
expect_status 0 ranks 4 "$BIN/mgt-train" "${MOE[@]}" --moe-router-force-load-balancing --tensor-model-parallel-size 2 \
  --sequence-parallel --expert-model-parallel-size 2 --metrics-file "$WORK/forced-ep2tp2.jsonl"
compare "$WORK/forced.jsonl" "$WORK/forced-ep2tp2.jsonl"
# Sinkhorn routing (top-1 and top-2): each micro-batch's tokens balanced by themselves, on one rank
# as on the two of EP=2.
for k in 1 2; do
  SINKHORN=(--moe-router-load-balancing-type sinkhorn --moe-aux-loss-coeff 0 --moe-router-topk $k)
  expect_status 0 "$BIN/mgt-train" "${MOE[@]}" "${SINKHORN[@]}" --metrics-file "$WORK/sinkhorn$k.jsonl"
  expect_status 0 ranks 2 "$BIN/mgt-train" "${MOE[@]}" "${SINKHORN[@]}" --expert-model-parallel-size 2 \
    --metrics-file "$WORK/sinkhorn$k-ep2.jsonl"
  compare "$WORK/sinkhorn$k.jsonl" "$WORK/sinkhorn$k-ep2.jsonl"
done
expect_status 2 "$BIN/mgt-train" "${MOE[@]}" --moe-apply-probs-on-input
one_line "--moe-apply-probs-on-input needs --moe-router-topk 1 (Megatron's experts: it only works with one expert per token)"

# Layouts that cannot hold the experts: one line, exit 2.
expect_status 2 "$BIN/mgt-train" "${MOE[@]}" --expert-model-parallel-size 3
one_line "--num-experts (8) must be a multiple of --expert-model-parallel-size (3)"
expect_status 2 "$BIN/mgt-train" "${MOE[@]}" --expert-model-parallel-size 2
one_line "--expert-model-parallel-size (2) must divide the data-parallel size (1)"
expect_status 2 "$BIN/mgt-train" "${MOE[@]}" --expert-tensor-parallel-size 2
one_line "world size (1) is not divisible by --expert-tensor-parallel-size (2) x --expert-model-parallel-size (1) x --pipeline-model-parallel-size (1), the expert_tensor_model_pipeline_parallel size (2)"
expect_status 2 ranks 2 "$BIN/mgt-train" "${MOE[@]}" --tensor-model-parallel-size 2
one_line "--num-experts with --tensor-model-parallel-size 2 needs --sequence-parallel"
echo "ok"
