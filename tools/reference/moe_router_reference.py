#!/usr/bin/env python3
"""Megatron-Core's MoE routing in NumPy, for mgt's tests (tests/model/test_moe_router_reference.cpp).

Written from megatron/core/transformer/moe/moe_utils.py (topk_softmax_with_capacity,
group_limited_topk, get_capacity, switch_load_balancing_loss_func,
sequence_load_balancing_loss_func, z_loss_func) and megatron/core/transformer/moe/router.py
(TopKRouter.routing, compute_routing_scores_for_aux_loss), core_v0.13.0, with torch's operations
replaced by NumPy's. torch.topk's choice among equal values is unspecified; here the lower index
wins, as in mgt. Computed in float64.

The gradient of the logits is that of the scalar
    L = sum(d_probs * probs) + aux_grad * aux_statistic + z_grad * z_statistic
by central differences (the top-k choice is constant near random logits), an estimate
independent of any hand-written backward.

Requirements: numpy. Usage:
  python3 tools/reference/moe_router_reference.py IN.json OUT.json
IN.json: {"tokens", "experts", "topk", "score_function": "softmax"|"sigmoid", "pre_softmax",
          "num_groups", "group_topk" (0: none), "scaling_factor" (0: none), "capacity_factor"
          (null: dropless), "drop_policy": "probs"|"position", "pad_to_capacity",
          "load_balancing": "aux_loss"|"seq_aux_loss"|"none", "batch", "z_loss",
          "logits": [tokens*experts], "d_probs": [tokens*experts], "aux_grad", "z_grad"}
OUT.json: {"gates", "probs", "routing_map", "megatron_routing_map", "tokens_per_expert",
           "aux_statistic", "z_statistic", "d_logits"}
"""
import json
import math
import sys

import numpy as np


def topk_indices(scores, k):
    """torch.topk(scores, k, dim=1) indices, ties to the lower index."""
    order = np.argsort(-scores, axis=1, kind="stable")
    return order[:, :k]


def softmax(x):
    m = x.max(axis=-1, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(axis=-1, keepdims=True)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def group_limited_topk(scores, topk, num_tokens, num_experts, num_groups, group_topk):
    per_group = num_experts // num_groups
    grouped = scores.reshape(num_tokens, num_groups, per_group)
    take = topk // group_topk
    group_scores = -np.sort(-grouped, axis=-1, kind="stable")[:, :, :take].sum(axis=-1)
    group_idx = topk_indices(group_scores, group_topk)
    group_mask = np.zeros_like(group_scores)
    np.put_along_axis(group_mask, group_idx, 1, axis=1)
    score_mask = np.repeat(group_mask, per_group, axis=1)
    masked = np.where(score_mask > 0, scores, -np.inf)
    idx = topk_indices(masked, topk)
    return np.take_along_axis(masked, idx, axis=1), idx


def get_capacity(num_tokens, num_experts, capacity_factor):
    return math.ceil((num_tokens / num_experts) * capacity_factor)


def topk_softmax_with_capacity(logits, c):
    num_tokens, num_experts = logits.shape
    topk = c["topk"]

    def compute_topk(scores):
        if c["group_topk"]:
            return group_limited_topk(scores, topk, num_tokens, num_experts, c["num_groups"], c["group_topk"])
        idx = topk_indices(scores, topk)
        return np.take_along_axis(scores, idx, axis=1), idx

    if c["score_function"] == "softmax":
        if c["pre_softmax"]:
            scores = softmax(logits)
            probs, top_indices = compute_topk(scores)
        else:
            scores, top_indices = compute_topk(logits)
            probs = softmax(scores)
    else:
        scores = sigmoid(logits)
        scores, top_indices = compute_topk(scores)
        probs = scores / (scores.sum(axis=-1, keepdims=True) + 1e-20) if topk > 1 else scores
    if c["scaling_factor"]:
        probs = probs * c["scaling_factor"]
    gates = np.zeros_like(logits)
    np.put_along_axis(gates, top_indices, probs, axis=1)
    topk_map = np.zeros(logits.shape, dtype=bool)
    np.put_along_axis(topk_map, top_indices, True, axis=1)
    if c["capacity_factor"] is None:
        return gates, gates.copy(), topk_map, topk_map
    capacity = get_capacity(num_tokens * topk, num_experts, c["capacity_factor"])
    capacity = min(capacity, num_tokens)  # torch.topk would fail beyond; mgt keeps every token
    key = gates if c["drop_policy"] == "probs" else topk_map.astype(np.int64)
    order = np.argsort(-key, axis=0, kind="stable")[:capacity, :]
    capacity_mask = np.zeros(logits.shape, dtype=bool)
    np.put_along_axis(capacity_mask, order, True, axis=0)
    kept = np.logical_and(topk_map, capacity_mask)
    megatron_map = capacity_mask if c["pad_to_capacity"] else kept
    return gates, gates * megatron_map, kept, megatron_map


def aux_scores(logits, c):
    if c["score_function"] == "softmax":
        scores = softmax(logits)
    else:
        scores = sigmoid(logits)
        scores = scores / (scores.sum(axis=-1, keepdims=True) + 1e-20)
    idx = topk_indices(scores, c["topk"])
    topk_map = np.zeros(logits.shape, dtype=bool)
    np.put_along_axis(topk_map, idx, True, axis=1)
    return scores, topk_map


def aux_statistic(logits, c):
    """The load-balancing loss divided by its coefficient (Megatron logs aux_loss / coeff)."""
    if c["load_balancing"] == "none":
        return 0.0, np.zeros((0, logits.shape[1]))
    scores, topk_map = aux_scores(logits, c)
    num_tokens, num_experts = logits.shape
    if c["load_balancing"] == "aux_loss":
        tokens_per_expert = topk_map.sum(axis=0).astype(np.float64)
        loss = np.sum(scores.sum(axis=0) * tokens_per_expert) * (num_experts / (num_tokens * num_tokens * c["topk"]))
        return loss, tokens_per_expert[None, :]
    batch = c["batch"]
    seq = num_tokens // batch
    probs = scores.reshape(seq, batch, -1)
    routing_map = topk_map.reshape(seq, batch, -1)
    cost_coeff = routing_map.sum(axis=0).astype(np.float64) / (seq * c["topk"] / num_experts)
    loss = (cost_coeff * probs.mean(axis=0)).sum(axis=1).mean()
    return loss, routing_map.sum(axis=0).astype(np.float64)


def z_statistic(logits, c):
    if not c["z_loss"]:
        return 0.0
    m = logits.max(axis=-1)
    lse = m + np.log(np.exp(logits - m[:, None]).sum(axis=-1))
    return np.mean(np.square(lse))


def objective(logits, c, d_probs):
    _, probs, _, _ = topk_softmax_with_capacity(logits, c)
    return (np.sum(d_probs * probs) + c["aux_grad"] * aux_statistic(logits, c)[0] +
            c["z_grad"] * z_statistic(logits, c))


def main():
    with open(sys.argv[1]) as f:
        c = json.load(f)
    shape = (c["tokens"], c["experts"])
    logits = np.array(c["logits"], dtype=np.float64).reshape(shape)
    d_probs = np.array(c["d_probs"], dtype=np.float64).reshape(shape)
    gates, probs, kept, megatron_map = topk_softmax_with_capacity(logits, c)
    aux, tokens_per_expert = aux_statistic(logits, c)
    d_logits = np.zeros_like(logits)
    eps = 1e-6
    for i in range(shape[0]):
        for j in range(shape[1]):
            up = logits.copy()
            up[i, j] += eps
            down = logits.copy()
            down[i, j] -= eps
            d_logits[i, j] = (objective(up, c, d_probs) - objective(down, c, d_probs)) / (2 * eps)
    out = {
        "gates": gates.ravel().tolist(),
        "probs": probs.ravel().tolist(),
        "routing_map": kept.astype(np.float64).ravel().tolist(),
        "megatron_routing_map": megatron_map.astype(np.float64).ravel().tolist(),
        "tokens_per_expert": tokens_per_expert.ravel().tolist(),
        "aux_statistic": float(aux),
        "z_statistic": float(z_statistic(logits, c)),
        "d_logits": d_logits.ravel().tolist(),
    }
    with open(sys.argv[2], "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main()
