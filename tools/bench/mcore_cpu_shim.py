"""Runs Megatron-Core's CUDA-only code paths on CPU processes, for trying mcore_peer_gpu.py without a GPU.

Megatron-Core 0.16 asks for the GPU by name in many places (torch.cuda.current_device(),
device="cuda" in its gradient buffers, pipeline schedules and p2p shape exchange, CUDA streams,
events and RNG states). install() maps each of those onto the CPU:
  - a TorchFunctionMode rewrites every `device=` naming CUDA (a string, a torch.device or an
    index) to the CPU, and turns Tensor.cuda() / .to("cuda") into CPU no-ops;
  - torch.cuda's current_device, synchronize, streams, events, RNG state, memory statistics and
    NVTX ranges become CPU stand-ins (streams run in order, events time nothing);
  - Tensor.type() names the CUDA tensor types that Megatron's optimizers check for;
  - the MoE all-to-all dispatcher's device-to-host copy of its split sizes
    (moe_utils.maybe_move_tensor_to_cpu, which copies only CUDA tensors) hands over host
    arrays from CPU tensors too, as it does from the GPU's.
Only for checking the peer's logic (model build, schedules, data-parallel buffers, the optimizer,
the reported numbers) on gloo ranks: nothing here says anything about speed.
"""
import contextlib

import torch
from torch.overrides import TorchFunctionMode


def _is_cuda(device):
    if isinstance(device, bool):
        return False
    if isinstance(device, int):
        return True  # torch.cuda.current_device() returns an index, meaning cuda:N
    if isinstance(device, torch.device):
        return device.type == "cuda"
    return isinstance(device, str) and device.startswith("cuda")


class _CudaToCpu(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if _is_cuda(kwargs.get("device")):
            kwargs["device"] = "cpu"
        name = getattr(func, "__name__", "")
        if name == "cuda":  # Tensor.cuda(...)
            return args[0]
        if name == "to" and len(args) > 1 and _is_cuda(args[1]):  # Tensor.to(device, ...)
            args = (args[0], "cpu") + tuple(args[2:])
        if name == "type" and len(args) == 1 and not kwargs:  # Megatron checks 'torch.cuda.BFloat16Tensor'
            return func(*args).replace("torch.", "torch.cuda.", 1)
        if name in ("pin_memory", "is_pinned"):
            return args[0] if name == "pin_memory" else False
        return func(*args, **kwargs)


class _Stream:
    def __init__(self, *args, **kwargs):
        pass

    def wait_stream(self, *args):
        pass

    def wait_event(self, *args):
        pass

    def synchronize(self):
        pass

    def record_event(self, event=None):
        return event or _Event()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Event:
    def __init__(self, *args, **kwargs):
        pass

    def record(self, *args):
        pass

    def wait(self, *args):
        pass

    def synchronize(self):
        pass

    def query(self):
        return True

    def elapsed_time(self, other):
        return 0.0


def install():
    """Maps Megatron-Core's CUDA requests onto the CPU for the rest of the process."""
    cuda = torch.cuda
    _default_stream = _Stream()
    cuda.current_device = lambda: 0
    cuda.set_device = lambda *a, **k: None
    cuda.device_count = lambda: 1
    cuda.synchronize = lambda *a, **k: None
    cuda.Stream = _Stream
    cuda.Event = _Event
    cuda.current_stream = lambda *a, **k: _default_stream
    cuda.default_stream = lambda *a, **k: _default_stream
    cuda.stream = lambda s=None: contextlib.nullcontext()
    cuda.get_rng_state = lambda *a, **k: torch.get_rng_state()
    cuda.set_rng_state = lambda state, *a, **k: torch.set_rng_state(state)
    # torch.manual_seed calls cuda.manual_seed_all: seed only the CPU generator, without recursion.
    cuda.manual_seed = lambda seed: torch.default_generator.manual_seed(int(seed))
    cuda.manual_seed_all = lambda seed: None
    cuda.max_memory_allocated = lambda *a, **k: 0
    cuda.memory_allocated = lambda *a, **k: 0
    cuda.reset_peak_memory_stats = lambda *a, **k: None
    cuda.empty_cache = lambda: None
    cuda.nvtx.range_push = lambda *a, **k: None
    cuda.nvtx.range_pop = lambda *a, **k: None
    # Megatron-Core's RNG tracker reads and writes the CUDA generator through these helpers.
    from megatron.core.tensor_parallel import random as mcore_random
    mcore_random._get_cuda_rng_state = lambda *a, **k: torch.get_rng_state()
    mcore_random._set_cuda_rng_state = lambda state, *a, **k: torch.set_rng_state(state)
    # The alltoall token dispatcher passes the split sizes it copied to the host (NumPy arrays) to
    # all_to_all_single; a CPU tensor would stay a tensor, which the collective refuses.
    from megatron.core.transformer.moe import moe_utils, token_dispatcher

    def to_host(tensor, as_numpy=False, record_stream=False):
        if torch.is_tensor(tensor) and as_numpy:
            return tensor.detach().numpy()
        return tensor

    moe_utils.maybe_move_tensor_to_cpu = to_host
    token_dispatcher.maybe_move_tensor_to_cpu = to_host
    mode = _CudaToCpu()
    mode.__enter__()  # for the rest of the process
    return mode
