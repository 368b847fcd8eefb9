#!/usr/bin/env python3
"""Megatron-Core's upcycling of a dense MLP into experts, in plain Python, for mgt's tests
(tests/model/test_moe_upcycling.cpp).

Written from megatron/core/transformer/moe/upcycling_utils.py (core_v0.13.0): _get_config's
granularity and expansion rate, _get_moe_activation_scale, _get_weight_scale,
_process_fc1_weight_param (SwiGLU's halves sliced alike), _process_fc2_weight_param and
_process_router_param, with torch's tensor_split, chunk, repeat and cat replaced by list slicing.
torch multiplies a float32 tensor by a Python float in float32: the product of two float32 values
is exact in a double, so rounding it to float32 gives torch's result.

Requirements: python3 only. Usage:
  python3 tools/reference/moe_upcycling_reference.py IN.json OUT.json
IN.json: {"hidden", "dense_ffn", "expert_ffn", "experts", "topk", "pre_softmax", "gated",
          "fc1": [rows*hidden], "fc2": [hidden*dense_ffn], "router": [experts*hidden]}
OUT.json: {"granularity", "expansion_rate", "scale", "fc1": [per expert [rows*hidden]],
           "fc2": [per expert [hidden*expert_ffn]], "router": [experts*hidden]}
"""
import json
import struct
import sys


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def rows(flat, width):
    return [flat[i:i + width] for i in range(0, len(flat), width)]


def tensor_split(items, parts):
    """torch.tensor_split along the first dimension, for a length divisible by parts."""
    step = len(items) // parts
    return [items[i * step:(i + 1) * step] for i in range(parts)]


def main():
    a = json.load(open(sys.argv[1]))
    hidden, dense_ffn, expert_ffn = a["hidden"], a["dense_ffn"], a["expert_ffn"]
    experts, topk, pre_softmax, gated = a["experts"], a["topk"], a["pre_softmax"], a["gated"]

    # _get_config
    assert dense_ffn % expert_ffn == 0
    granularity = dense_ffn // expert_ffn
    assert experts % granularity == 0
    expansion_rate = experts // granularity

    # _get_moe_activation_scale, _get_weight_scale
    if pre_softmax:
        activation_scale = (expansion_rate * granularity * granularity) / topk
    else:
        activation_scale = granularity
    scale = activation_scale ** (1 / 3) if gated else activation_scale ** (1 / 2)
    scale32 = f32(scale)

    def scaled(matrix):
        # The inputs arrive as decimal text: each is the float32 value it names.
        return [[f32(f32(x) * scale32) for x in row] for row in matrix]

    # _process_fc1_weight_param
    fc1 = scaled(rows(a["fc1"], hidden))
    if gated:
        half = len(fc1) // 2
        params_1 = tensor_split(fc1[:half], granularity)
        params_2 = tensor_split(fc1[half:], granularity)
        fc1_params = [params_1[i] + params_2[i] for i in range(granularity)]
    else:
        fc1_params = tensor_split(fc1, granularity)
    fc1_params = fc1_params * expansion_rate

    # _process_fc2_weight_param: tensor_split along dim 1
    fc2 = scaled(rows(a["fc2"], dense_ffn))
    step = dense_ffn // granularity
    fc2_params = [[row[i * step:(i + 1) * step] for row in fc2] for i in range(granularity)]
    fc2_params = fc2_params * expansion_rate

    # _process_router_param: the first of granularity chunks, each row repeated granularity times
    router = rows([f32(x) for x in a["router"]], hidden)
    first = tensor_split(router, granularity)[0]
    new_router = [list(t) for t in first for _ in range(granularity)]

    flat = lambda m: [x for row in m for x in row]
    json.dump({"granularity": granularity, "expansion_rate": expansion_rate, "scale": scale32,
               "fc1": [flat(p) for p in fc1_params], "fc2": [flat(p) for p in fc2_params],
               "router": flat(new_router)}, open(sys.argv[2], "w"))


if __name__ == "__main__":
    main()
