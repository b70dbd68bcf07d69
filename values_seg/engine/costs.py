"""What a prediction's inference costs per case: forward passes, FLOPs, seconds, peak memory.

Bookkeeping (in :data:`values_seg.storage.provenance.BOOKKEEPING`): it never enters a key or changes a
sample. What is measured, and why: docs/design-rationale.md, "Cost".
"""

from __future__ import annotations

import contextlib
import logging
import time
import weakref
from typing import Iterator, Sequence

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

log = logging.getLogger("values_seg.engine")

#: the key of a prediction sidecar's cost record (:meth:`InferenceMeter.record`)
KEY = "cost"


def pass_modules(networks: Sequence[nn.Module]) -> list[nn.Module]:
    """What one forward pass runs through, per network: its ``backbone`` where it has one (a head's
    network, e.g. the SSN's or the Probabilistic U-Net's), else the network itself."""
    out = []
    for net in networks:
        inner = getattr(net, "backbone", None)
        out.append(inner if isinstance(inner, nn.Module) else net)
    return out


@contextlib.contextmanager
def counted_passes(modules: Sequence[nn.Module]) -> Iterator[list[int]]:
    """Count the images that go through ``modules`` while the block runs: ``[n]``, each call adding
    the batch size of its first tensor argument (a batch of S samples is S passes)."""
    targets = {id(m) for m in modules}
    count = [0]

    def hook(module, args):
        if id(module) in targets:
            first = next((a for a in args if isinstance(a, torch.Tensor)), None)
            count[0] += int(first.shape[0]) if first is not None and first.ndim > 0 else 1

    handle = nn.modules.module.register_module_forward_pre_hook(hook)
    try:
        yield count
    finally:
        handle.remove()


class LiveTensors(TorchDispatchMode):
    """While active (a torch dispatch mode), the peak bytes of the CPU tensors that ops create and that
    are alive at once, counted per storage (views share theirs; a tensor made before is never counted,
    nor its views): what the case's tensors need on top of what was allocated before, as
    ``torch.cuda.max_memory_allocated`` measures it on a GPU. Work buffers inside a kernel are not seen."""

    def __init__(self):
        super().__init__()
        self.live: dict[int, list[int]] = {}  # storage -> [bytes, tensors alive]
        self.level = self.peak = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        inputs = {_storage(t) for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)}
        out = func(*args, **(kwargs or {}))
        try:
            for t in tree_leaves(out):
                if isinstance(t, torch.Tensor) and t.device.type == "cpu":
                    self._made(t, inputs)
        except Exception as e:  # noqa: BLE001 - bookkeeping: never fails a prediction
            log.debug("tensor memory not counted: %r", e)
        return out

    def _made(self, tensor: torch.Tensor, inputs: set[int]) -> None:
        key = _storage(tensor)
        if key in inputs and key not in self.live:
            return  # an input or a view of one: allocated before
        entry = self.live.get(key)
        if entry is None:
            entry = self.live[key] = [int(tensor.untyped_storage().nbytes()), 0]
            self.level += entry[0]
            self.peak = max(self.peak, self.level)
        entry[1] += 1
        weakref.finalize(tensor, self._freed, key)

    def _freed(self, key: int) -> None:
        entry = self.live.get(key)
        if entry is not None:
            entry[1] -= 1
            if entry[1] <= 0:
                del self.live[key]
                self.level -= entry[0]


def _storage(tensor: torch.Tensor) -> int:
    try:
        return int(tensor.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError):  # a tensor without storage (e.g. a wrapper subclass)
        return -id(tensor)


class InferenceMeter:
    """The cost of one prediction's cases on ``device`` with ``networks``: the FLOPs of one case,
    counted once (on the first case), then each case's forward passes, seconds and peak memory: on a
    GPU the peak of torch's allocations above what was allocated before, each case; on the CPU (where
    torch's allocator keeps no statistics) the peak of the tensors the first case's ops create
    (:class:`LiveTensors`), counted with its FLOPs (:meth:`case`)."""

    def __init__(self, networks: Sequence[nn.Module], device: torch.device):
        self.modules = pass_modules(networks)  # held: their ids stay theirs
        self.device = torch.device(device)
        self.flops: int | None = None
        self.cpu_peak: int | None = None  # the first case's tensor peak on the CPU (:class:`LiveTensors`)
        self.counted = False
        self.last: dict | None = None

    @contextlib.contextmanager
    def case(self) -> Iterator[None]:
        """Measure the prediction of one case in the block (its samples back on the CPU at its end):
        :meth:`record` then holds its cost. The first case is the one whose FLOPs are counted (under
        the counter, so its seconds are left out: the other cases time the prediction); the model
        runs once per case either way."""
        from torch.utils.flop_counter import FlopCounterMode

        cuda = self.device.type == "cuda"
        before = 0
        if cuda:
            torch.cuda.synchronize(self.device)
            before = torch.cuda.memory_allocated(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        self.last = None
        counting, self.counted = not self.counted, True
        counter = FlopCounterMode(display=False) if counting else contextlib.nullcontext()
        live = LiveTensors() if counting and self.device.type == "cpu" else contextlib.nullcontext()
        with counted_passes(self.modules) as passes:
            start = time.perf_counter()
            with counter, live:
                yield
            if cuda:
                torch.cuda.synchronize(self.device)
            seconds = time.perf_counter() - start
        if counting:
            try:
                self.flops = int(counter.get_total_flops())
            except Exception as e:  # noqa: BLE001 - bookkeeping: never fails a prediction
                log.debug("FLOPs not counted: %r", e)
        if isinstance(live, LiveTensors):
            self.cpu_peak = int(live.peak)
        peak = int(torch.cuda.max_memory_allocated(self.device) - before) if cuda else self.cpu_peak
        # no pass seen: the networks ran other than by a call (a GPU ensemble's stacked copy): unknown
        self.last = {"seconds": None if counting else round(seconds, 6), "forward_passes": passes[0] or None,
                     "flops": self.flops, "peak_memory_bytes": peak, "device": str(self.device)}

    def record(self) -> dict:
        """``{"cost": {...}}`` of the case measured last, for its sidecar (empty where none was)."""
        return {KEY: dict(self.last)} if self.last is not None else {}
