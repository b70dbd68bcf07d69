"""What a prediction's inference costs per case: forward passes, FLOPs, seconds, peak memory.

Bookkeeping (in :data:`values_seg.storage.provenance.BOOKKEEPING`): it never enters a key or changes a
sample. What is measured, and why: docs/design-rationale.md, "Cost".
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Iterator, Sequence

import torch
from torch import nn

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


def _resident() -> int | None:
    """This process's resident memory now, in bytes, after resetting its peak (Linux: ``VmRSS`` once
    ``clear_refs`` has set ``VmHWM`` to it); None where the kernel offers neither."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _status("VmRSS")
    except (OSError, ValueError):
        return None


def _status(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise ValueError(f"no {field} in /proc/self/status")


def _resident_peak(before: int | None) -> int | None:
    """The peak resident memory above ``before`` since :func:`_resident` (None without a reading)."""
    if before is None:
        return None
    try:
        return max(_status("VmHWM") - before, 0)
    except (OSError, ValueError):
        return None


class InferenceMeter:
    """The cost of one prediction's cases on ``device`` with ``networks``: the FLOPs of one case,
    counted once (on the first case), then each case's forward passes, seconds and peak memory: on a
    GPU the peak of torch's allocations above what was allocated before, on the CPU the peak of the
    process's resident memory above its level before (Linux; none elsewhere) (:meth:`case`)."""

    def __init__(self, networks: Sequence[nn.Module], device: torch.device):
        self.modules = pass_modules(networks)  # held: their ids stay theirs
        self.device = torch.device(device)
        self.flops: int | None = None
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
        before = None
        if cuda:
            torch.cuda.synchronize(self.device)
            before = torch.cuda.memory_allocated(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        elif self.device.type == "cpu":
            before = _resident()
        self.last = None
        counting, self.counted = not self.counted, True
        counter = FlopCounterMode(display=False) if counting else contextlib.nullcontext()
        with counted_passes(self.modules) as passes:
            start = time.perf_counter()
            with counter:
                yield
            if cuda:
                torch.cuda.synchronize(self.device)
            seconds = time.perf_counter() - start
        if counting:
            try:
                self.flops = int(counter.get_total_flops())
            except Exception as e:  # noqa: BLE001 - bookkeeping: never fails a prediction
                log.debug("FLOPs not counted: %r", e)
        peak = int(torch.cuda.max_memory_allocated(self.device) - before) if cuda else _resident_peak(before)
        # no pass seen: the networks ran other than by a call (a GPU ensemble's stacked copy): unknown
        self.last = {"seconds": None if counting else round(seconds, 6), "forward_passes": passes[0] or None,
                     "flops": self.flops, "peak_memory_bytes": peak, "device": str(self.device)}

    def record(self) -> dict:
        """``{"cost": {...}}`` of the case measured last, for its sidecar (empty where none was)."""
        return {KEY: dict(self.last)} if self.last is not None else {}
