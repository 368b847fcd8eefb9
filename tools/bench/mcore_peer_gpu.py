#!/usr/bin/env python3
"""The Megatron-Core peer: Megatron-Core's own GPTModel, pipeline schedules and distributed optimizer
trained on mock tokens at mgt's shapes and layouts, for the rates beside mgt-train's.

On the GPU machine Megatron-Core comes as a carried wheel (it needs only torch, numpy and packaging,
which the image has):
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
  NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 \
    python3 -m torch.distributed.run --standalone --nproc-per-node 4 tools/bench/mcore_peer_gpu.py \
    --preset llama3-8b --tp 4 --micro-batch 1 --global-batch 8 --iters 10 --warmup 3 --bf16
(tools/gpu/scale_peers.sh does both, for TP=4 and TP=2 x PP=2.) The Mixture-of-Experts model of
tools/gpu/moe_speed.sh on one GPU (moe_speed.sh --peer runs it after mgt's runs):
    python3 -m torch.distributed.run --standalone --nproc-per-node 1 tools/bench/mcore_peer_gpu.py \
    --preset mixtral-small --micro-batch 1 --global-batch 32 --iters 6 --warmup 3 --bf16

What runs, as Megatron's pretrain_gpt.py with --transformer-impl local would build it:
  - GPTModel with get_gpt_layer_local_spec(normalization="RMSNorm"): Megatron-Core's own
    ColumnParallelLinear/RowParallelLinear, torch.nn.RMSNorm (apex is absent: Megatron's
    WrappedTorchNorm), rotary embeddings (base 500000) unfused (the fused RoPE kernel is
    Transformer Engine's), SwiGLU through Megatron's fused bias-SwiGLU (bias_activation_fusion,
    torch.compile'd), bias-dropout-add fusion, Megatron's fused vocab-parallel cross entropy
    (cross_entropy_loss_fusion, impl "native"), untied embeddings, no biases, bf16 parameters
    (Megatron's Float16Module), no dropout.
  - Core attention: the local spec's DotProductAttention materialises the whole
    [batch x heads, seq, seq] score matrix (baddbmm, softmax in fp32, bmm): at seq 8192 with 8
    heads per rank (TP=4) 537M scores per layer and micro-batch, 1 GiB in bf16 (2 GiB as the fp32
    softmax), the probabilities kept for the backward in every layer. With --attention sdpa
    (the default) the spec's core_attention submodule is replaced by SdpaCoreAttention below:
    torch.nn.functional.scaled_dot_product_attention, causal, with grouped-query attention
    native (enable_gqa), which on Hopper runs PyTorch's FlashAttention-2 or cuDNN kernel
    (--sdpa-backend picks; auto times cuDNN, flash and memory-efficient at the model's shape on
    rank 0 and every rank runs the fastest, see choose_sdpa). --attention local runs Megatron's.
  - Sequence parallelism (on with TP > 1 unless --no-sequence-parallel): the local spec's
    WrappedTorchNorm refuses it, so with it the norms are torch.nn.RMSNorm with the weight marked
    sequence_parallel (SequenceParallelRMSNorm below), whose gradients finalize_model_grads
    all-reduces across the tensor-parallel group, as with apex's and TE's norms.
  - Gradient accumulation fusion off (it needs apex's fused_weight_gradient_mlp_cuda); masked
    softmax fusion off (its CUDA extension is not in the wheel; unused with SDPA).
  - Megatron-Core's DistributedDataParallel (contiguous gradient buffers in fp32, as Megatron
    accumulates and reduces them with --bf16 unless --grad-reduce-in-bf16 is given) with the
    overlap of Megatron's --overlap-grad-reduce and --overlap-param-gather (no NaN check of the
    gradients), and its DistributedOptimizer: fp32 main weights, Adam from torch.optim (what
    Megatron falls back to without TE/apex), switched to torch's fused AdamW kernel, the nearest
    to TE's FusedAdam (--no-fused-adam keeps torch's default foreach one). Megatron's apex-less
    gradient-norm and scale helpers (megatron.core.utils.local_multi_tensor_*) loop over the
    tensors, the norm with a host sync per tensor; they are replaced by torch._foreach_norm /
    _foreach_mul_ equivalents of apex's multi_tensor kernels (--no-foreach-helpers keeps them).
  - Not available without Transformer Engine, so not used: tensor-parallel communication overlap
    (--tp-comm-overlap, TE's userbuffers), fused RoPE, context parallelism, FP8.
  - get_forward_backward_func(): no pipelining, 1F1B, or the interleaved schedule with --vp V
    (V model chunks per stage, overlapped p2p), each micro-batch of --micro-batch sequences, as
    many micro-batches as global batch / (micro-batch x data-parallel size).
  - Mixture of experts (--num-experts, or the presets mixtral-small and tiny-moe), as
    pretrain_gpt.py's model provider with --transformer-impl local --num-experts N builds it:
    get_gpt_layer_local_spec(num_experts=N, moe_grouped_gemm=...), every layer's MLP a MoELayer:
    TopKRouter (Megatron's defaults beyond the flags here: softmax after the top-k, router in the
    input dtype, no capacity factor so no token dropping, no z-loss, no expert bias), the
    alltoall or allgather token dispatcher, and the local experts as SequentialMLP: one MLP per
    expert (ColumnParallelLinear/RowParallelLinear over the experts' tensor-parallel group, which
    is --tp as Megatron's --expert-tensor-parallel-size defaults), run one after another on the
    expert's share of the permuted tokens, its SwiGLU weighted by the routing probabilities
    through Megatron's fused weighted bias-SwiGLU. --ep E spreads the experts over E ranks taken
    from the data-parallel ones (Megatron's order tp-cp-ep-dp-pp); DistributedDataParallel reduces
    the experts' gradients over the expert-data-parallel group and get_megatron_optimizer shards
    their optimizer state there (its chained optimizers), the gradient norm over all parameters.
    The load-balancing loss (--moe-router-load-balancing-type aux_loss or seq_aux_loss, times
    --moe-aux-loss-coeff) reaches the gradients as in Megatron's training loop: the router attaches
    it to the layer's activations through MoEAuxLossAutoScaler, and the schedule
    (forward_step_calc_loss) sets its backward scale to the loss scale / micro-batches, the LM
    loss's own scaling. The loss function gives what pretrain_gpt.py's does once the schedule has
    divided its sum by the token count: the masked mean of the token losses.
    Its value is tracked each iteration as training_log does (track_moe_metrics: the routers'
    sums over micro-batches / micro-batches, averaged over the layers) and printed as Megatron
    names it (load_balancing_loss).
    Megatron-Core 0.16.1's router gating tests a name (te_general_gemm) that exists only with
    Transformer Engine; it is bound to None here, which selects the torch.mm path that the test
    means for TE-less runs.
    Not available without Transformer Engine: TEGroupedMLP (the TE spec's grouped GEMM), the
    fused permutation and router (--moe-permute-fusion, --moe-router-fusion), the flex/DeepEP
    dispatcher, FP8 experts. --moe-grouped-gemm selects the local spec's legacy GroupedMLP, which
    needs the grouped_gemm package: without it (as on the GPU machine's image) the flag is
    refused with a message; the default is SequentialMLP.
  - Mock data: uniform random token ids drawn afresh for every micro-batch, labels the next
    token, every position in the loss: the loss stays near ln(vocab) (11.76 for Llama 3's).
  - The training step of Megatron's train_step(): zero the gradient buffers, forward/backward
    of all micro-batches, finalize_model_grads, optimizer.step() with gradient clipping at 1.0.

Reported (rank 0, stdout): seconds per iteration over --iters timed iterations after --warmup
untimed ones (CUDA synchronised and all ranks at a barrier at both ends), tokens/s per GPU, model
TFLOP/s per GPU by Megatron's num_floating_point_operations (for dense models mgt-train's formula,
lib/train/flops.hpp: 12 L h f (3/2 with SwiGLU) + 12 L h^2 (1 + g/n + s/2h)(k n / h) + 6 h V, times
global batch x seq, V the vocabulary padded to a multiple of 128 x TP as Megatron pads it; for MoE
models f is what a token passes through, expert ffn x top-k + the shared expert's ffn: the active
parameters), the largest torch.cuda.max_memory_allocated of any rank, the losses of every
iteration (and the load-balancing loss with MoE); then one JSON line (also appended to --json FILE).

--device cpu (with --backend gloo) runs the same program on CPU processes through
mcore_cpu_shim.py, to check it without a GPU; its rates mean nothing.
"""
import argparse
import importlib.util
import itertools
import json
import math
import os
import sys
import time

# NVLink multicast stays off on the shared GPU machines, also in processes started with their own
# environment: set before torch and NCCL read them.
os.environ["NCCL_NVLS_ENABLE"] = "0"
os.environ["TORCH_SYMM_MEM_DISABLE_MULTICAST"] = "1"
os.environ["NVSHMEM_DISABLE_NVLS"] = "1"
# Megatron's scripts export this so that the tensor-parallel collectives queued on the one
# connection keep their order beside the compute (sequence parallelism relies on it).
os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "1")

# name: layers, hidden, ffn, heads, query groups, vocab, seq, rotary base; the MoE presets add
# their experts: count, router top-k, expert ffn, aux-loss coefficient, token dispatcher.
PRESETS = {
    "llama3-8b": dict(layers=32, hidden=4096, ffn=14336, heads=32, groups=8, vocab=128256, seq=8192,
                      rotary_base=500000),
    # tools/gpu/moe_speed.sh's Mixtral-style model (no --rotary-base there: Megatron's 10000).
    "mixtral-small": dict(layers=16, hidden=2048, ffn=5632, heads=16, groups=8, vocab=32000, seq=4096,
                          rotary_base=10000,
                          moe=dict(experts=8, topk=2, ffn=5632, aux_loss_coeff=1e-2, dispatcher="alltoall")),
    # For trying the program on CPU ranks: the Llama block (GQA, SwiGLU, RMSNorm, RoPE) in small.
    "tiny": dict(layers=4, hidden=64, ffn=176, heads=8, groups=4, vocab=1000, seq=64, rotary_base=500000),
    "tiny-moe": dict(layers=2, hidden=64, ffn=176, heads=8, groups=4, vocab=1000, seq=64, rotary_base=10000,
                     moe=dict(experts=4, topk=2, ffn=176, aux_loss_coeff=1e-2, dispatcher="alltoall")),
}
# Megatron's --moe-router-load-balancing-type values run here, and the name each one's loss is
# tracked and logged under (megatron/core/transformer/moe/router.py, training.py training_log).
LOAD_BALANCING_LOSS_NAMES = {"aux_loss": "load_balancing_loss", "seq_aux_loss": "seq_load_balancing_loss",
                             "none": None}
MAKE_VOCAB_SIZE_DIVISIBLE_BY = 128  # Megatron's default


def padded_vocab_size(vocab, tp):
    """Megatron's _vocab_size_with_padding: a multiple of 128 x TP."""
    multiple = MAKE_VOCAB_SIZE_DIVISIBLE_BY * tp
    return int(math.ceil(vocab / multiple) * multiple)


def flops_per_iteration(shape, global_batch, vocab, moe=None):
    """megatron/training/training.py num_floating_point_operations (SwiGLU, GQA), as mgt.

    Per token: 3 passes x 2 FLOPs per multiply-add over the GEMMs. The MLP of each layer is
    h x 3f (SwiGLU's h->2f and f->h), of a MoE layer the experts a token is routed to,
    h x 3 x (expert ffn x top-k + shared-expert ffn): the active parameters, not all experts.
    """
    L, h, f, n, g, s = (shape[k] for k in ("layers", "hidden", "ffn", "heads", "groups", "seq"))
    k = h // n
    if moe is not None:
        f = moe["ffn"] * moe["topk"] + (moe["shared_ffn"] or 0)
    mlp = 12.0 * L * h * f * 1.5
    attention = 12.0 * L * h * h * ((1.0 + g / n + s / (2.0 * h)) * (k * n / h))
    logits = 6.0 * h * vocab
    return global_batch * s * (mlp + attention + logits)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="llama3-8b", choices=sorted(PRESETS))
    ap.add_argument("--num-layers", type=int, help="override the preset's layer count")
    ap.add_argument("--seq-length", type=int, help="override the preset's sequence length")
    ap.add_argument("--vocab-size", type=int, help="override the preset's vocabulary size (before padding)")
    ap.add_argument("--tp", type=int, default=1, help="tensor-parallel size")
    ap.add_argument("--pp", type=int, default=1, help="pipeline-parallel size")
    ap.add_argument("--vp", type=int, default=None,
                    help="virtual pipeline stages per pipeline rank (interleaved schedule; needs --pp > 1)")
    ap.add_argument("--cp", type=int, default=1,
                    help="context-parallel size: only 1 (Megatron-Core's context parallelism needs "
                         "Transformer Engine's attention)")
    moe = ap.add_argument_group("mixture of experts (Megatron's flags; the MoE presets set their own)")
    moe.add_argument("--num-experts", type=int, help="experts per MoE layer (every layer; default: the preset's, "
                                                      "none for the dense presets)")
    moe.add_argument("--moe-router-topk", type=int, help="experts per token (default: the preset's, else 2)")
    moe.add_argument("--moe-ffn-hidden-size", type=int,
                     help="each expert's ffn (default: the preset's, else the model's ffn)")
    moe.add_argument("--moe-shared-expert-intermediate-size", type=int, help="a shared expert of this ffn")
    moe.add_argument("--moe-router-load-balancing-type", choices=sorted(LOAD_BALANCING_LOSS_NAMES),
                     default="aux_loss")
    moe.add_argument("--moe-aux-loss-coeff", type=float,
                     help="default: the preset's, else 0.0 (Megatron's)")
    moe.add_argument("--moe-token-dispatcher-type", choices=("allgather", "alltoall"),
                     help="default: the preset's, else allgather (Megatron's)")
    moe.add_argument("--moe-grouped-gemm", action="store_true",
                     help="the local experts as GroupedMLP (needs the grouped_gemm package without "
                          "Transformer Engine); default SequentialMLP, one MLP per expert")
    moe.add_argument("--ep", "--expert-model-parallel-size", dest="ep", type=int, default=1,
                     help="expert-model-parallel size (the experts' tensor-parallel size is --tp, Megatron's "
                          "default for --expert-tensor-parallel-size)")
    ap.add_argument("--micro-batch", type=int, default=1)
    ap.add_argument("--global-batch", type=int, default=8)
    ap.add_argument("--iters", type=int, default=10, help="timed iterations")
    ap.add_argument("--warmup", type=int, default=3, help="untimed iterations before them")
    prec = ap.add_mutually_exclusive_group()
    prec.add_argument("--bf16", dest="precision", action="store_const", const="bf16",
                      help="bf16 parameters and compute, fp32 main weights (the default)")
    prec.add_argument("--fp32", dest="precision", action="store_const", const="fp32",
                      help="fp32 throughout (for CPU checks)")
    ap.set_defaults(precision="bf16")
    ap.add_argument("--attention", choices=("sdpa", "local"), default="sdpa",
                    help="core attention: torch SDPA (flash/cuDNN) or the local spec's DotProductAttention")
    ap.add_argument("--sdpa-backend", choices=("auto",) + SDPA_BACKENDS, default="auto",
                    help="auto: the fastest fused kernel at the model's shape (timed at start-up)")
    ap.add_argument("--no-sequence-parallel", dest="sequence_parallel", action="store_false")
    ap.add_argument("--no-distributed-optimizer", dest="distributed_optimizer", action="store_false")
    ap.add_argument("--no-overlap", dest="overlap", action="store_false",
                    help="no overlapped gradient reduce / param gather / pipeline p2p")
    ap.add_argument("--grad-reduce-in-bf16", action="store_true",
                    help="bf16 gradient buffers and reduction (Megatron's flag; default fp32 with --bf16)")
    ap.add_argument("--no-fused-adam", dest="fused_adam", action="store_false",
                    help="keep torch.optim.AdamW's default (foreach) implementation")
    ap.add_argument("--no-foreach-helpers", dest="foreach_helpers", action="store_false",
                    help="keep Megatron-Core's per-tensor local multi_tensor_l2norm/scale")
    ap.add_argument("--cpu-init", action="store_true",
                    help="initialise weights on the CPU (Megatron's --use-cpu-initialization); default: on the GPU")
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cpu: run on CPU processes through mcore_cpu_shim.py (checking only)")
    ap.add_argument("--backend", choices=("nccl", "gloo"), help="default: nccl on cuda, gloo on cpu")
    ap.add_argument("--json", help="append the result line to this file")
    args = ap.parse_args(argv)
    args.backend = args.backend or ("nccl" if args.device == "cuda" else "gloo")
    shape = dict(PRESETS[args.preset])
    if args.num_layers:
        shape["layers"] = args.num_layers
    if args.seq_length:
        shape["seq"] = args.seq_length
    if args.vocab_size:
        shape["vocab"] = args.vocab_size
    args.shape = shape

    def fail(msg):
        ap.error(msg)

    # The MoE settings: the flags, else the preset's, else Megatron's defaults.
    preset_moe = PRESETS[args.preset].get("moe", {})
    experts = args.num_experts if args.num_experts is not None else preset_moe.get("experts")
    if experts is None:
        given = [flag for flag, value in (("--moe-router-topk", args.moe_router_topk),
                                          ("--moe-ffn-hidden-size", args.moe_ffn_hidden_size),
                                          ("--moe-shared-expert-intermediate-size",
                                           args.moe_shared_expert_intermediate_size),
                                          ("--moe-aux-loss-coeff", args.moe_aux_loss_coeff),
                                          ("--moe-token-dispatcher-type", args.moe_token_dispatcher_type),
                                          ("--moe-grouped-gemm", args.moe_grouped_gemm or None),
                                          ("--ep", args.ep if args.ep != 1 else None)) if value is not None]
        if given:
            fail(f"{', '.join(given)} {'needs' if len(given) == 1 else 'need'} --num-experts "
                 f"(the preset {args.preset} is dense)")
        args.moe = None
    else:
        args.moe = dict(
            experts=experts,
            topk=args.moe_router_topk if args.moe_router_topk is not None else preset_moe.get("topk", 2),
            ffn=args.moe_ffn_hidden_size if args.moe_ffn_hidden_size is not None else preset_moe.get("ffn", shape["ffn"]),
            shared_ffn=args.moe_shared_expert_intermediate_size,
            load_balancing=args.moe_router_load_balancing_type,
            aux_loss_coeff=args.moe_aux_loss_coeff if args.moe_aux_loss_coeff is not None
            else preset_moe.get("aux_loss_coeff", 0.0),
            dispatcher=args.moe_token_dispatcher_type or preset_moe.get("dispatcher", "allgather"),
            grouped_gemm=args.moe_grouped_gemm)
        m = args.moe
        if m["experts"] < 1:
            fail("--num-experts must be positive")
        if not 1 <= m["topk"] <= m["experts"]:
            fail(f"--moe-router-topk {m['topk']} must be between 1 and --num-experts {m['experts']}")
        if m["ffn"] < 1 or (m["shared_ffn"] is not None and m["shared_ffn"] < 1):
            fail("--moe-ffn-hidden-size and --moe-shared-expert-intermediate-size must be positive")
        if m["aux_loss_coeff"] < 0:
            fail("--moe-aux-loss-coeff must be >= 0")
        if args.ep < 1 or m["experts"] % args.ep:
            fail(f"--ep {args.ep} must divide --num-experts {m['experts']}")
        if m["ffn"] % args.tp or (m["shared_ffn"] or 0) % args.tp:
            fail(f"--tp {args.tp} (the experts' tensor-parallel size) must divide the expert ffn {m['ffn']}"
                 + (f" and the shared expert's {m['shared_ffn']}" if m["shared_ffn"] else ""))
        if args.tp > 1 and not args.sequence_parallel:
            fail("MoE with --tp > 1 needs sequence parallelism (Megatron-Core's MoELayer refuses to train without it)")
        if m["grouped_gemm"] and importlib.util.find_spec("grouped_gemm") is None:
            fail("--moe-grouped-gemm is not available: without Transformer Engine (TEGroupedMLP) Megatron-Core's "
                 "grouped experts are its legacy GroupedMLP, which needs the grouped_gemm package, not importable "
                 "here; leave the flag out to run the experts as SequentialMLP (one MLP per expert)")

    for name in ("tp", "pp", "cp", "micro_batch", "global_batch", "iters", "num_layers", "seq_length", "vocab_size"):
        if getattr(args, name) is None:
            continue
        if getattr(args, name) < 1:
            fail(f"--{name.replace('_', '-')} must be positive")
    if args.warmup < 0:
        fail("--warmup must be >= 0")
    if args.cp != 1:
        fail("--cp > 1 is not available: Megatron-Core's context parallelism needs Transformer Engine's "
             "attention (TEDotProductAttention), absent here")
    if args.vp is not None:
        if args.vp < 2:
            fail("--vp must be >= 2 (it counts model chunks per pipeline rank)")
        if args.pp < 2:
            fail("--vp needs --pp > 1")
        if shape["layers"] % (args.pp * args.vp):
            fail(f"--num-layers {shape['layers']} is not divisible by pp x vp = {args.pp * args.vp}")
    elif shape["layers"] % args.pp:
        fail(f"--num-layers {shape['layers']} is not divisible by --pp {args.pp}")
    if shape["heads"] % args.tp or shape["groups"] % args.tp:
        fail(f"--tp {args.tp} must divide the heads ({shape['heads']}) and query groups ({shape['groups']})")
    if args.sequence_parallel and shape["seq"] % args.tp:
        fail(f"sequence parallelism needs --tp {args.tp} to divide the sequence length {shape['seq']}")
    if args.device == "cpu" and args.backend != "gloo":
        fail("--device cpu needs --backend gloo")
    if args.device == "cpu" and args.precision == "bf16" and args.attention == "local":
        pass  # allowed: CPU baddbmm/softmax work in bf16
    return args


def world_layout(args, world):
    model_parallel = args.tp * args.pp * args.cp
    if world % model_parallel:
        raise SystemExit(f"mcore_peer_gpu.py: world size {world} is not divisible by tp x pp x cp = {model_parallel}")
    dp = world // model_parallel
    if args.moe is not None and dp % args.ep:
        # Megatron's expert layout (tp-cp-ep-dp-pp): the expert-parallel ranks come out of the
        # data-parallel ones (expert tensor-parallel size = --tp).
        raise SystemExit(f"mcore_peer_gpu.py: --ep {args.ep} must divide the data-parallel size {dp} "
                         f"(world {world} / tp x pp x cp {model_parallel})")
    if args.global_batch % (args.micro_batch * dp):
        raise SystemExit(f"mcore_peer_gpu.py: --global-batch {args.global_batch} is not divisible by "
                         f"micro-batch x data-parallel size = {args.micro_batch} x {dp}")
    microbatches = args.global_batch // (args.micro_batch * dp)
    if args.vp is not None and microbatches % args.pp:
        raise SystemExit(f"mcore_peer_gpu.py: the interleaved schedule needs the micro-batch count "
                         f"({microbatches}) to be a multiple of --pp {args.pp}")
    return dp, microbatches


SDPA_BACKENDS = ("cudnn", "flash", "efficient", "math")


def choose_sdpa(args, config, device):
    """Which SDPA kernel runs, and whether it takes grouped-query K/V as they are.

    --sdpa-backend auto on the GPU times a forward and backward of each fused kernel (cuDNN,
    FlashAttention-2, memory-efficient) at the model's per-rank attention shape, each with GQA
    passed natively (enable_gqa) and, where a kernel refuses that, with K/V expanded to all heads
    (as DotProductAttention does), and keeps the fastest; the math backend, which materialises the
    score matrix, is never chosen by auto. On the CPU auto leaves the choice to PyTorch.
    Returns (backend name or None for PyTorch's choice, native_gqa, description).
    """
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel
    kinds = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
             "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}
    heads = config.num_attention_heads // args.tp
    groups = config.num_query_groups // args.tp
    if args.device != "cuda":
        if args.sdpa_backend == "auto":
            return None, True, "PyTorch's choice"
        return args.sdpa_backend, True, args.sdpa_backend
    dtype = config.params_dtype
    b, s, d = args.micro_batch, args.shape["seq"], config.kv_channels
    # The layouts SelfAttention hands over: Q and K fresh from the rotary embedding ([s, b, heads,
    # d], contiguous), V a slice of the fused QKV projection's output; all permuted as in forward.
    q = torch.randn(s, b, heads, d, device=device, dtype=dtype, requires_grad=True)
    k = torch.randn(s, b, groups, d, device=device, dtype=dtype, requires_grad=True)
    qkv = torch.randn(s, b, groups, (heads // groups + 2) * d, device=device, dtype=dtype, requires_grad=True)

    def run(kind, native):
        v = qkv[..., (heads // groups + 1) * d:]
        qq, kk, vv = (t.permute(1, 2, 0, 3) for t in (q, k, v))
        if not native:
            kk, vv = (t.repeat_interleave(heads // groups, 1) for t in (kk, vv))
        with sdpa_kernel(kinds[kind]):
            out = F.scaled_dot_product_attention(qq, kk, vv, is_causal=True, enable_gqa=native and heads != groups)
        out.backward(torch.ones_like(out))

    candidates = [args.sdpa_backend] if args.sdpa_backend != "auto" else ["cudnn", "flash", "efficient"]
    timings = {}
    for kind in candidates:
        for native in (True, False):
            try:
                run(kind, native)
                torch.cuda.synchronize()
                start = time.perf_counter()
                for _ in range(3):
                    run(kind, native)
                torch.cuda.synchronize()
                timings[(kind, native)] = (time.perf_counter() - start) / 3
                break
            except RuntimeError:
                continue
    if not timings:
        raise SystemExit(f"mcore_peer_gpu.py: no SDPA kernel among {candidates} runs this attention shape")
    (kind, native), best = min(timings.items(), key=lambda kv: kv[1])
    measured = ", ".join(f"{k}{'' if n else ' (K/V expanded)'} {t * 1e3:.2f} ms" for (k, n), t in timings.items())
    return kind, native, f"{kind}{'' if native else ' with K/V expanded to all heads'} (fwd+bwd per layer: {measured})"


def make_sdpa_core_attention(backend, native_gqa):
    """A core_attention submodule for SelfAttention with DotProductAttention's interface, on torch SDPA."""
    import torch.nn.functional as F
    from megatron.core.transformer.enums import AttnMaskType
    from megatron.core.transformer.module import MegatronModule
    from torch.nn.attention import SDPBackend, sdpa_kernel
    kinds = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
             "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}

    class SdpaCoreAttention(MegatronModule):
        def __init__(self, config, layer_number, attn_mask_type, attention_type, attention_dropout=None,
                     softmax_scale=None, cp_comm_type=None, pg_collection=None, **unused):
            super().__init__(config=config)
            if config.context_parallel_size != 1:
                raise ValueError("SdpaCoreAttention has no context parallelism")
            if config.apply_query_key_layer_scaling:
                raise ValueError("SdpaCoreAttention does not scale by the layer number")
            if attn_mask_type != AttnMaskType.causal:
                raise ValueError(f"SdpaCoreAttention is causal only, not {attn_mask_type}")
            self.dropout = config.attention_dropout if attention_dropout is None else attention_dropout
            self.softmax_scale = softmax_scale  # None: 1/sqrt(head dim), as DotProductAttention

        def forward(self, query, key, value, attention_mask, attn_mask_type=None, attention_bias=None,
                    packed_seq_params=None, **unused):
            if packed_seq_params is not None or attention_bias is not None:
                raise ValueError("SdpaCoreAttention takes no packed sequences or attention bias")
            # Megatron's layout [seq, batch, heads, head dim] -> SDPA's [batch, heads, seq, head dim];
            # the causal mask is SDPA's own (the mock batches carry no mask).
            q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))
            grouped = q.size(1) != k.size(1)
            if grouped and not native_gqa:
                k, v = (t.repeat_interleave(q.size(1) // t.size(1), 1) for t in (k, v))
            kwargs = dict(is_causal=True, dropout_p=self.dropout if self.training else 0.0,
                          scale=self.softmax_scale, enable_gqa=grouped and native_gqa)
            if backend is None:
                out = F.scaled_dot_product_attention(q, k, v, **kwargs)
            else:
                with sdpa_kernel(kinds[backend]):
                    out = F.scaled_dot_product_attention(q, k, v, **kwargs)
            # -> [seq, batch, heads x head dim], what linear_proj takes.
            return out.permute(2, 0, 1, 3).reshape(out.size(2), out.size(0), -1)

    return SdpaCoreAttention


def make_sequence_parallel_rms_norm():
    """torch.nn.RMSNorm built from Megatron's norm arguments, its weight marked sequence_parallel.

    With sequence parallelism each tensor-parallel rank normalises its own slice of the sequence,
    so the weight's gradient is partial: finalize_model_grads all-reduces the gradients of weights
    so marked across the tensor-parallel group (as for apex's FusedLayerNorm and TE's norms).
    """
    import torch

    class SequenceParallelRMSNorm(torch.nn.RMSNorm):
        def __init__(self, config, hidden_size, eps=1e-5, **unused):
            if config.normalization != "RMSNorm" or config.layernorm_zero_centered_gamma:
                raise ValueError("SequenceParallelRMSNorm is a plain RMSNorm")
            super().__init__(hidden_size, eps=eps)
            setattr(self.weight, "sequence_parallel", config.sequence_parallel)

    return SequenceParallelRMSNorm


def install_foreach_helpers():
    """apex's multi_tensor_l2norm / multi_tensor_scale as torch._foreach kernels.

    Without apex and TE, Megatron-Core falls back to megatron.core.utils.local_multi_tensor_l2_norm,
    which takes torch.norm of each gradient and copies every norm to the host one by one, and to a
    per-tensor local_multi_tensor_scale. These keep the same signatures and results.
    """
    import torch
    from megatron.core.optimizer import clip_grads, optimizer

    def l2_norm(chunk_size, noop_flag, tensor_lists, per_tensor, *unused):
        tensors = [t for tl in tensor_lists for t in tl]
        norms = torch._foreach_norm(tensors, 2.0)
        total = torch.linalg.vector_norm(torch.stack([n.float() for n in norms]), 2.0)
        return total.reshape(1), None

    def scale(chunk_size, noop_flag, tensor_lists, factor):
        src, dst = tensor_lists[0], tensor_lists[1]
        if all(s is d for s, d in zip(src, dst)):
            torch._foreach_mul_(dst, factor)
        else:
            torch._foreach_copy_(dst, torch._foreach_mul(src, factor))

    def applier(op, noop_flag_buffer, tensor_lists, *args):
        return op(2048 * 32, noop_flag_buffer, tensor_lists, *args)

    if getattr(clip_grads, "multi_tensor_applier", None) is not None and \
            getattr(clip_grads.multi_tensor_applier, "__module__", "").startswith("megatron"):
        clip_grads.multi_tensor_applier = applier
        clip_grads.l2_norm_impl = l2_norm
        clip_grads.multi_tensor_scale_impl = scale
    if getattr(optimizer, "multi_tensor_applier", None) is not None and \
            getattr(optimizer.multi_tensor_applier, "__module__", "").startswith("megatron"):
        optimizer.multi_tensor_applier = applier
        optimizer.multi_tensor_scale_impl = scale


def worker(args):
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    import warnings
    warnings.filterwarnings("ignore", message=".*(Apex|Transformer Engine).*")
    import torch
    if args.device == "cpu":
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
        import mcore_cpu_shim
        mcore_cpu_shim.install()
    else:
        torch.cuda.set_device(local_rank)
    import torch.distributed as dist

    import megatron.core
    from megatron.core import parallel_state
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.distributed.finalize_model_grads import finalize_model_grads
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.pipeline_parallel.schedules import get_forward_backward_func
    from megatron.core.tensor_parallel.random import model_parallel_cuda_manual_seed
    from megatron.core.transformer.enums import ModelType
    from megatron.core.transformer.module import Float16Module
    from megatron.core.transformer.transformer_config import TransformerConfig

    dp, microbatches = world_layout(args, world)
    shape = args.shape
    dist.init_process_group(args.backend, rank=rank, world_size=world,
                            device_id=torch.device("cuda", local_rank) if args.device == "cuda" else None)
    parallel_state.initialize_model_parallel(
        tensor_model_parallel_size=args.tp, pipeline_model_parallel_size=args.pp,
        virtual_pipeline_model_parallel_size=args.vp, context_parallel_size=args.cp,
        expert_model_parallel_size=args.ep, expert_tensor_parallel_size=args.tp)
    model_parallel_cuda_manual_seed(args.seed)
    if args.foreach_helpers:
        install_foreach_helpers()

    dtype = torch.bfloat16 if args.precision == "bf16" else torch.float32
    device = torch.device("cuda", local_rank) if args.device == "cuda" else torch.device("cpu")
    sequence_parallel = args.sequence_parallel and args.tp > 1
    overlap_p2p = args.overlap and args.vp is not None
    moe = args.moe
    moe_config = {}
    if moe is not None:
        # As Megatron's core_transformer_config_from_args with the MoE flags of moe_speed.sh; the
        # rest at Megatron's defaults (softmax scores after the top-k, router in the input dtype,
        # no capacity factor: no token dropping, no z-loss, no expert bias).
        moe_config = dict(
            num_moe_experts=moe["experts"], moe_router_topk=moe["topk"], moe_ffn_hidden_size=moe["ffn"],
            moe_shared_expert_intermediate_size=moe["shared_ffn"],
            moe_router_load_balancing_type=moe["load_balancing"], moe_aux_loss_coeff=moe["aux_loss_coeff"],
            moe_token_dispatcher_type=moe["dispatcher"], moe_grouped_gemm=moe["grouped_gemm"],
            expert_model_parallel_size=args.ep, expert_tensor_parallel_size=args.tp)
    config = TransformerConfig(
        num_layers=shape["layers"], hidden_size=shape["hidden"], ffn_hidden_size=shape["ffn"],
        num_attention_heads=shape["heads"], num_query_groups=shape["groups"],
        kv_channels=shape["hidden"] // shape["heads"],
        normalization="RMSNorm", layernorm_epsilon=1e-5, gated_linear_unit=True,
        activation_func=torch.nn.functional.silu, add_bias_linear=False, add_qkv_bias=False,
        hidden_dropout=0.0, attention_dropout=0.0, init_method_std=0.02,
        bf16=args.precision == "bf16", params_dtype=dtype, pipeline_dtype=dtype, autocast_dtype=dtype,
        tensor_model_parallel_size=args.tp, pipeline_model_parallel_size=args.pp,
        virtual_pipeline_model_parallel_size=args.vp, context_parallel_size=args.cp,
        sequence_parallel=sequence_parallel,
        bias_activation_fusion=True, bias_dropout_fusion=True, masked_softmax_fusion=False,
        apply_rope_fusion=False, gradient_accumulation_fusion=False,
        cross_entropy_loss_fusion=True, cross_entropy_fusion_impl="native",
        attention_softmax_in_fp32=True, use_cpu_initialization=args.cpu_init or args.device == "cpu",
        perform_initialization=True, deallocate_pipeline_outputs=True,
        overlap_p2p_comm=overlap_p2p, batch_p2p_comm=not overlap_p2p,
        **moe_config,
    )
    # As pretrain_gpt.py's model provider with --transformer-impl local (and --num-experts):
    # every layer's MLP a MoELayer whose local experts are SequentialMLP, or GroupedMLP with
    # --moe-grouped-gemm (TE's TEGroupedMLP is the TE spec's).
    experts_impl = None
    if moe is not None:
        from megatron.core.transformer.moe import grouped_gemm_util
        if moe["grouped_gemm"] and not grouped_gemm_util.grouped_gemm_is_available():
            raise SystemExit("mcore_peer_gpu.py: --moe-grouped-gemm: the grouped_gemm package does not import "
                             "(Megatron-Core's GroupedMLP needs it without Transformer Engine)")
        layer_spec = get_gpt_layer_local_spec(num_experts=moe["experts"], moe_grouped_gemm=moe["grouped_gemm"],
                                              normalization="RMSNorm")
        # Megatron-Core 0.16.1's router gating (moe_utils.RouterGatingLinearFunction) tests
        # `te_general_gemm is not None`, a name bound only when Transformer Engine imports: without
        # TE it raises NameError. None is what the test means, taking its torch.mm branch.
        from megatron.core.transformer.moe import moe_utils
        if not hasattr(moe_utils, "te_general_gemm"):
            moe_utils.te_general_gemm = None
        experts_impl = ("GroupedMLP (grouped_gemm's grouped GEMM)" if moe["grouped_gemm"]
                        else "SequentialMLP (one MLP of ColumnParallelLinear/RowParallelLinear per expert)")
        experts_impl = (f"{moe['experts']} experts, top-{moe['topk']}, ffn {moe['ffn']}"
                        + (f", shared expert ffn {moe['shared_ffn']}" if moe["shared_ffn"] else "")
                        + f", {moe['dispatcher']} dispatcher, {moe['load_balancing']} "
                        f"(coefficient {moe['aux_loss_coeff']:g}), EP={args.ep}: {experts_impl}")
    else:
        layer_spec = get_gpt_layer_local_spec(normalization="RMSNorm")
    attention_impl = "megatron.core DotProductAttention (local spec, full score matrix)"
    if args.attention == "sdpa":
        choice = list(choose_sdpa(args, config, device))
        dist.broadcast_object_list(choice, src=0)  # every rank runs rank 0's pick
        backend, native_gqa, chosen = choice
        layer_spec.submodules.self_attention.submodules.core_attention = make_sdpa_core_attention(backend, native_gqa)
        attention_impl = f"torch scaled_dot_product_attention, causal: {chosen}"
    norm_impl = "torch.nn.RMSNorm (the local spec's WrappedTorchNorm)"
    if sequence_parallel:
        # The local spec's WrappedTorchNorm refuses sequence parallelism (its weight is not marked
        # for the tensor-parallel gradient all-reduce); the same torch.nn.RMSNorm, marked as apex's
        # and TE's norms mark theirs, in the layers and as the block's final norm.
        norm = make_sequence_parallel_rms_norm()
        layer_spec.submodules.input_layernorm = norm
        layer_spec.submodules.pre_mlp_layernorm = norm
        import megatron.core.transformer.transformer_block as transformer_block
        transformer_block.LayerNormImpl = norm
        norm_impl = "torch.nn.RMSNorm, weights marked sequence_parallel"
    vocab = padded_vocab_size(shape["vocab"], args.tp)

    def build_chunk(vp_stage):
        pre = parallel_state.is_pipeline_first_stage(ignore_virtual=False, vp_stage=vp_stage)
        post = parallel_state.is_pipeline_last_stage(ignore_virtual=False, vp_stage=vp_stage)
        model = GPTModel(config=config, transformer_layer_spec=layer_spec, vocab_size=vocab,
                         max_sequence_length=shape["seq"], pre_process=pre, post_process=post,
                         share_embeddings_and_output_weights=False, position_embedding_type="rope",
                         rotary_base=shape["rotary_base"], vp_stage=vp_stage)
        model.model_type = ModelType.encoder_or_decoder
        return model

    init_start = time.perf_counter()
    chunks = [build_chunk(i if args.vp else None) for i in range(args.vp or 1)]
    for chunk in chunks:  # as Megatron's get_model (the torch norms are built on the CPU)
        chunk.to(device)
    if config.bf16:
        # As Megatron's get_model: every parameter in bf16 (the norms' weights too), bf16 inputs on
        # the first stage, fp32 logits' losses on the last.
        chunks = [Float16Module(config, chunk) for chunk in chunks]
    ddp_config = DistributedDataParallelConfig(
        grad_reduce_in_fp32=args.precision == "bf16" and not args.grad_reduce_in_bf16, overlap_grad_reduce=args.overlap,
        overlap_param_gather=args.overlap and args.distributed_optimizer,
        align_param_gather=args.overlap and args.distributed_optimizer and args.vp is not None,
        use_distributed_optimizer=args.distributed_optimizer, check_for_nan_in_grad=False)
    # As Megatron's get_model: one bucket layout per chunk, bucketing only in the first.
    model = [DistributedDataParallel(config=config, ddp_config=ddp_config, module=chunk,
                                     disable_bucketing=(i > 0)) for i, chunk in enumerate(chunks)]
    for m in model:
        m.broadcast_params()
    optimizer = get_megatron_optimizer(
        OptimizerConfig(optimizer="adam", lr=args.lr, weight_decay=0.1, adam_beta1=0.9, adam_beta2=0.95,
                        adam_eps=1e-8, clip_grad=1.0, bf16=args.precision == "bf16", params_dtype=dtype,
                        use_distributed_optimizer=args.distributed_optimizer),
        model)
    adam_impl = "torch.optim.AdamW (Megatron-Core's fallback without TE/apex)"
    if args.fused_adam:
        # torch's AdamW reads these per group at every step; the fused kernel updates all of the
        # group's tensors at once, as TE's FusedAdam does.
        for opt in getattr(optimizer, "chained_optimizers", [optimizer]):
            for group in opt.optimizer.param_groups:
                group["fused"], group["foreach"] = True, False
        adam_impl += ", fused=True"
    # Megatron's train(): the model's sync hooks for the schedules.
    config.no_sync_func = [m.no_sync for m in model]
    config.grad_scale_func = optimizer.scale_loss
    config.finalize_model_grads_func = finalize_model_grads
    if args.overlap:
        config.grad_sync_func = [m.start_grad_sync for m in model]
    if ddp_config.overlap_param_gather and ddp_config.align_param_gather:
        config.param_sync_func = [m.start_param_sync for m in model]
    if len(model) == 1:
        config.no_sync_func = config.no_sync_func[0]
        if config.grad_sync_func is not None:
            config.grad_sync_func = config.grad_sync_func[0]
        if config.param_sync_func is not None:
            config.param_sync_func = config.param_sync_func[0]
    if args.device == "cuda":
        torch.cuda.synchronize()
    dist.barrier()
    init_seconds = time.perf_counter() - init_start

    # Mock data: fresh uniform token ids for every micro-batch of every iteration (a repeated batch
    # is memorised within a few steps at this width), the same on the ranks of one model replica
    # (each chunk's iterator draws micro-batch j of iteration i from seed (i, j)), different per
    # data-parallel rank.
    seq, mbs = shape["seq"], args.micro_batch
    data_seed = (args.seed + 1) * 1_000_003 + parallel_state.get_data_parallel_rank() * 10_007
    position_ids = torch.arange(seq, device=device).unsqueeze(0).expand(mbs, seq)
    loss_mask = torch.ones(mbs, seq, device=device, dtype=torch.float32)

    def batches():
        generator = torch.Generator(device=device)
        for iteration in itertools.count():
            for micro in range(microbatches):
                generator.manual_seed(data_seed + iteration * microbatches + micro)
                sample = torch.randint(0, shape["vocab"], (mbs, seq + 1), device=device, generator=generator)
                yield sample[:, :-1], sample[:, 1:]

    def loss_func(output_tensor):
        loss = torch.sum(output_tensor.float().view(-1) * loss_mask.view(-1)) / loss_mask.sum()
        # A copy: the schedule divides the returned loss by the micro-batch count in place.
        return loss, {"lm loss": loss.detach().clone()}

    def forward_step(data_iterator, chunk):
        tokens, labels = next(data_iterator)
        output = chunk(tokens, position_ids, None, labels=labels)
        return output, loss_func

    forward_backward = get_forward_backward_func()
    iterators = [batches() for _ in model]

    # As Megatron's train(): the first iteration runs without the param-gather pre-hooks.
    param_sync_func = config.param_sync_func
    prehook_off = ddp_config.overlap_param_gather
    if prehook_off:
        for m in model:
            m.disable_forward_pre_hook(param_sync=False)
        config.param_sync_func = None

    def train_step():
        for m in model:
            m.zero_grad_buffer()
        optimizer.zero_grad()
        reduced = forward_backward(forward_step_func=forward_step,
                                   data_iterator=iterators if len(model) > 1 else iterators[0],
                                   model=model if len(model) > 1 else model[0], num_microbatches=microbatches,
                                   seq_length=seq, micro_batch_size=mbs, decoder_seq_length=seq, forward_only=False)
        ok, grad_norm, _ = optimizer.step()
        if not ok:
            raise SystemExit("mcore_peer_gpu.py: the optimizer step was skipped (non-finite gradients)")
        if reduced:  # the last pipeline stage: the mean of the micro-batches' losses
            return torch.stack([r["lm loss"] for r in reduced]).mean()
        return None

    # As Megatron's training_log at every iteration: the load-balancing loss (without its
    # coefficient) that each layer's router added up over the micro-batches, scaled by
    # 1/micro-batches, reduced over the ranks and averaged over the layers; the tracker cleared.
    # Kept as tensors until the timing ends (Megatron reads them at its log interval).
    balance_name = LOAD_BALANCING_LOSS_NAMES[moe["load_balancing"]] if moe is not None else None

    def load_balancing_loss(iteration):
        from megatron.core.transformer.moe.moe_utils import track_moe_metrics
        totals = {}
        track_moe_metrics(loss_scale=1.0 / microbatches, iteration=iteration, total_loss_dict=totals,
                          per_layer_logging=False, force_initialize=True, track_names=[balance_name],
                          num_layers=shape["layers"], moe_layer_freq=1)
        return totals[balance_name].detach().clone()

    losses, balance_losses = [], []
    if args.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    for it in range(args.warmup + args.iters):
        if it == args.warmup:
            if args.device == "cuda":
                torch.cuda.synchronize()
            dist.barrier()
            start = time.perf_counter()
        loss = train_step()
        losses.append(loss)
        if balance_name is not None:
            balance_losses.append(load_balancing_loss(it + 1))
        if it == 0 and prehook_off:
            for m in model:
                m.enable_forward_pre_hook()
            config.param_sync_func = param_sync_func
    if args.device == "cuda":
        torch.cuda.synchronize()
    dist.barrier()
    seconds = (time.perf_counter() - start) / args.iters

    # Losses: the last stage's, averaged over data-parallel replicas, gathered to rank 0 once.
    last_stage = parallel_state.is_pipeline_last_stage(ignore_virtual=True)
    per_iter = torch.stack([l.float() if l is not None else torch.zeros((), device=device) for l in losses]) \
        if last_stage else torch.zeros(len(losses), device=device)
    dist.all_reduce(per_iter)
    per_iter /= args.tp * dp * args.cp  # every rank of the last stage holds its replica's loss
    peak = torch.tensor([torch.cuda.max_memory_allocated() / 2**20 if args.device == "cuda" else 0.0],
                        device=device)
    dist.all_reduce(peak, op=dist.ReduceOp.MAX)

    flops = flops_per_iteration(shape, args.global_batch, vocab, moe)
    tokens_per_gpu = args.global_batch * seq / seconds / world
    result = {
        "peer": "megatron-core", "megatron_core": megatron.core.__version__, "torch": torch.__version__,
        "device": args.device, "preset": args.preset, "num_layers": shape["layers"], "seq_length": seq,
        "vocab_size": shape["vocab"],
        "gpus": world, "tp": args.tp, "pp": args.pp, "vp": args.vp, "cp": args.cp, "dp": dp,
        "micro_batch": mbs, "global_batch": args.global_batch, "microbatches": microbatches,
        "precision": args.precision, "sequence_parallel": sequence_parallel,
        "distributed_optimizer": args.distributed_optimizer, "overlap": args.overlap,
        "grad_reduce_in_fp32": ddp_config.grad_reduce_in_fp32,
        "attention": attention_impl, "norm": norm_impl, "adam": adam_impl, "foreach_helpers": args.foreach_helpers,
        "padded_vocab": vocab, "warmup_iters": args.warmup, "timed_iters": args.iters,
        "init_seconds": round(init_seconds, 2), "seconds_per_iteration": seconds,
        "tokens_per_second": args.global_batch * seq / seconds, "tokens_per_second_per_gpu": tokens_per_gpu,
        "flops_per_iteration": flops, "tflops_per_gpu": flops / seconds / world / 1e12,
        "max_allocated_mib": float(peak.item()), "losses": [round(float(x), 5) for x in per_iter.tolist()],
        "moe": moe, "ep": args.ep, "experts": experts_impl,
        "load_balancing_loss_name": balance_name,
        "load_balancing_losses": [round(float(x), 5) for x in balance_losses],
    }
    if rank == 0:
        print(f"megatron-core {result['megatron_core']} torch {result['torch']}: {args.preset} "
              f"({shape['layers']} layers, seq {seq}) on {world} {args.device} ranks, TP={args.tp} PP={args.pp}"
              f"{' VP=' + str(args.vp) if args.vp else ''}{' EP=' + str(args.ep) if moe else ''} DP={dp}, micro-batch {mbs}, global batch "
              f"{args.global_batch} ({microbatches} micro-batches), {args.precision}", flush=True)
        print(f"  attention: {attention_impl}; norm: {norm_impl}; optimizer: {adam_impl}; initialisation {init_seconds:.1f} s",
              flush=True)
        if experts_impl:
            print(f"  experts: {experts_impl}", flush=True)
        for i, l in enumerate(result["losses"]):
            balance = (f" | {balance_name} {result['load_balancing_losses'][i]:.5f}"
                       if balance_name is not None else "")
            print(f"  iteration {i + 1:3d}{' (warm-up)' if i < args.warmup else '          '} lm loss {l:.5f}{balance}",
                  flush=True)
        print(f"  {seconds * 1000:.1f} ms per iteration | {tokens_per_gpu:,.0f} tokens/s per GPU | "
              f"{result['tflops_per_gpu']:.1f} TFLOP/s per GPU | max allocated {result['max_allocated_mib']:,.0f} MiB",
              flush=True)
        print(json.dumps(result), flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(result) + "\n")
    dist.barrier()
    parallel_state.destroy_model_parallel()
    dist.destroy_process_group()
    return 0


def main():
    args = parse_args()
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        sys.exit("mcore_peer_gpu.py: start it with torchrun: python3 -m torch.distributed.run "
                 "--standalone --nproc-per-node N tools/bench/mcore_peer_gpu.py ...")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    return worker(args)


if __name__ == "__main__":
    sys.exit(main())
