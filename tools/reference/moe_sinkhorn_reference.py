#!/usr/bin/env python3
"""Megatron-Core's sinkhorn routing in plain Python, for mgt's tests
(tests/model/test_moe_sinkhorn.cpp).

Written from megatron/core/transformer/moe/moe_utils.py (sinkhorn) and
megatron/core/transformer/moe/router.py (TopKRouter.sinkhorn_load_balancing), core_v0.13.0, with
torch's tensor operations replaced by loops over lists, computed in float64 (torch computes in
float32). torch.topk's choice among equal values is unspecified; here the lower index wins, as in
mgt.

Requirements: python3 only. Usage:
  python3 tools/reference/moe_sinkhorn_reference.py IN.json OUT.json
IN.json: {"tokens", "experts", "topk", "logits": [tokens*experts]}
OUT.json: {"sinkhorn": [tokens*experts], "routing_map": [tokens*experts] (training's choice),
           "probs": [tokens*experts], "eval_routing_map": [tokens*experts]}
"""
import json
import math
import sys


def sinkhorn(cost, tol=0.0001):
    """moe_utils.sinkhorn on a list of rows."""
    cost = [[math.exp(x) for x in row] for row in cost]
    T, E = len(cost), len(cost[0])
    d0 = [1.0] * T
    d1 = [1.0] * E
    eps = 0.00000001
    error = 1e9
    d1_old = d1
    while error > tol:
        d0 = [(1 / T) * 1 / (sum(d1[e] * cost[t][e] for e in range(E)) + eps) for t in range(T)]
        d1 = [(1 / E) * 1 / (sum(d0[t] * cost[t][e] for t in range(T)) + eps) for e in range(E)]
        error = sum(abs(a - b) for a, b in zip(d1_old, d1)) / E
        d1_old = d1
    return [[d1[e] * cost[t][e] * d0[t] for e in range(E)] for t in range(T)]


def topk_map(rows, k):
    out = []
    for row in rows:
        order = sorted(range(len(row)), key=lambda e: (-row[e], e))[:k]
        out.append([1.0 if e in order else 0.0 for e in range(len(row))])
    return out


def activation(logits, topk):
    """sinkhorn_load_balancing's _sinkhorn_activation."""
    if topk == 1:
        return [[1 / (1 + math.exp(-x)) for x in row] for row in logits]
    out = []
    for row in logits:
        m = max(row)
        ex = [math.exp(x - m) for x in row]
        s = sum(ex)
        out.append([x / s for x in ex])
    return out


def main():
    a = json.load(open(sys.argv[1]))
    T, E, k = a["tokens"], a["experts"], a["topk"]
    logits = [a["logits"][t * E:(t + 1) * E] for t in range(T)]
    norm = sinkhorn(logits)
    train_map = topk_map(norm, k)          # self.training: indices from the sinkhorn
    act = activation(logits, k)
    probs = [[act[t][e] * train_map[t][e] for e in range(E)] for t in range(T)]
    eval_map = topk_map(act, k)            # evaluation: indices from the activation
    flat = lambda m: [x for row in m for x in row]
    json.dump({"sinkhorn": flat(norm), "routing_map": flat(train_map), "probs": flat(probs),
               "eval_routing_map": flat(eval_map)}, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
