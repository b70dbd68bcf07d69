"""Fused training: specs that share one architecture train as one vectorised job (on the CPU;
one by one on a GPU). Why, and why a member's weights never depend on its group:
docs/design-rationale.md, "Fused training"."""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import os
import time
import traceback
from typing import Iterable, Iterator

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap
from torch.nn.modules.dropout import _DropoutNd

from values_seg.engine.curves import CurveRecorder, CurveSettings
from values_seg.engine.device import fixed_threads, resolve
from values_seg.engine.networks import build_network
from values_seg.engine.precision import autocast
from values_seg.engine.head import Head
from values_seg.engine.specs import TrainingSpec
from values_seg.storage.canonical import canonical_json
from values_seg.engine import augment
from values_seg.engine import training_setup as training
from values_seg.engine.networks import arch_info
from values_seg.runtime.progress import meter

log = logging.getLogger("values_seg.engine")

#: The narrowest group: a group of one would run other convolution kernels than a group of two or more.
MIN_SLOTS = 2


def job_key(spec: TrainingSpec) -> str | None:
    """What specs must share to train in one job, as far as the spec itself says (the data's
    shapes are checked in the job); ``None``: the spec trains on its own."""
    if not spec.fused:
        return None
    return canonical_json({"backbone": spec.backbone.to_dict(), "recipe": spec.recipe.to_dict(),
                           "head": Head.describe(spec.head), "threads": spec.threads})


def job_groups(specs: Iterable[TrainingSpec]) -> list[list[TrainingSpec]]:
    """``specs`` (distinct) partitioned into jobs: fused specs by :func:`job_key`, others alone."""
    groups: dict = {}
    out: list[list[TrainingSpec]] = []
    for s in specs:
        key = job_key(s)
        if key is None:
            out.append([s])
        elif key in groups:
            groups[key].append(s)
        else:
            groups[key] = [s]
            out.append(groups[key])
    return out


def spread(groups: list[list[TrainingSpec]], jobs: int) -> list[list[TrainingSpec]]:
    """``groups`` with the largest fused ones halved until there are at least ``jobs`` of them and
    none holds more than its share of the trainings (for parallel workers; a member's weights do
    not depend on its group, so this changes no number)."""
    out = [list(g) for g in groups]
    share = math.ceil(sum(map(len, out)) / max(jobs, 1))
    while out:
        largest = max(out, key=len)
        if (len(out) >= jobs and len(largest) <= share) or not largest[0].fused or len(largest) < 2 * MIN_SLOTS:
            break
        out.remove(largest)
        half = (len(largest) + 1) // 2
        out += [largest[:half], largest[half:]]
    return out


class _SlotDropout(nn.Module):
    """A dropout layer of the fused network: multiplies by the member's own mask (``mask``, a buffer
    fed per step through :func:`functional_call`; ones for a member without dropout)."""

    def __init__(self, like: _DropoutNd):
        super().__init__()
        self.channel = type(like) is not nn.Dropout  # Dropout1d/2d/3d drop whole feature maps
        self.register_buffer("mask", torch.empty(0), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.mask.to(x.dtype)


def _skeleton(net: nn.Module) -> tuple[nn.Module, dict[str, bool]]:
    """A structural copy of ``net`` on the meta device with every dropout layer replaced by a
    :class:`_SlotDropout`; ``{mask buffer name: channel-wise}``."""
    skel = copy.deepcopy(net).to("meta")
    slots = {}
    for name, module in list(skel.named_modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, _DropoutNd):
                slot = _SlotDropout(child)
                module._modules[child_name] = slot
                full = f"{name}.{child_name}" if name else child_name
                slots[f"{full}.mask"] = slot.channel
    return skel, slots


def _dropout_shapes(net: nn.Module, x: torch.Tensor) -> list[tuple[int, ...]]:
    """The input shapes of ``net``'s dropout layers (module order) on the batch ``x``."""
    shapes, hooks = [], []
    for m in net.modules():
        if isinstance(m, _DropoutNd):
            hooks.append(m.register_forward_pre_hook(lambda mod, args: shapes.append(tuple(args[0].shape))))
    try:
        with torch.no_grad():
            net.eval()
            net(x)
    finally:
        for h in hooks:
            h.remove()
        net.train()
    return shapes


class _Member:
    """One spec of a group: its prepared training, its own torch random state, its progress."""

    def __init__(self, spec: TrainingSpec, dev: torch.device, ds, max_cache_bytes: int, loader_workers, shadow=False):
        self.spec, self.shadow = spec, shadow
        self.prepared = training.prepare(spec, dev, ds, max_cache_bytes, loader_workers)
        self.dev = dev
        self.cpu_state = torch.get_rng_state()  # after seeding and initialisation, as a training of its own
        self.cuda_state = torch.cuda.get_rng_state(dev) if dev.type == "cuda" else None
        self.batches = iter(self.prepared.batches)
        self.running: float | None = None
        self.error: str | None = None

    @contextlib.contextmanager
    def rng(self):
        """The global torch generators in this member's state (its dropout masks, its loss's draws)."""
        torch.set_rng_state(self.cpu_state)
        if self.cuda_state is not None:
            torch.cuda.set_rng_state(self.cuda_state, self.dev)
        try:
            yield
        finally:
            self.cpu_state = torch.get_rng_state()
            if self.cuda_state is not None:
                self.cuda_state = torch.cuda.get_rng_state(self.dev)

    def masks(self, slots: dict[str, bool], shapes: list[tuple[int, ...]]) -> list[torch.Tensor]:
        p = self.spec.dropout
        out = []
        for channel, shape in zip(slots.values(), shapes):
            shape = shape[:2] + (1,) * (len(shape) - 2) if channel else shape
            if p == 0:
                out.append(torch.ones(shape, device=self.dev))
            else:
                out.append(torch.empty(shape, device=self.dev).bernoulli_(1 - p).div_(1 - p))
        return out


def member_bytes(net: nn.Module, x: torch.Tensor) -> int:
    """An estimate of one member's memory in a fused step: weights, gradients and Adam's two moments
    (4 copies), and three times the outputs of every module on the batch ``x`` (kept for backward,
    their gradients, workspace)."""
    outputs = []
    hooks = [m.register_forward_hook(lambda mod, a, out: outputs.append(out.numel() * out.element_size())
                                     if isinstance(out, torch.Tensor) else None)
             for m in net.modules() if not list(m.children())]
    try:
        with torch.no_grad():
            net(x)
    finally:
        for h in hooks:
            h.remove()
    weights = sum(p.numel() * p.element_size() for p in net.parameters())
    return 4 * weights + 3 * sum(outputs)


def memory_budget(dev: torch.device) -> int:
    """Bytes a fused group may use: 80 % of the free GPU memory, or half the available RAM."""
    if dev.type == "cuda":
        free, _ = torch.cuda.mem_get_info(dev)
        return int(0.8 * free)
    try:
        with open("/proc/meminfo") as f:
            info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f}
        return info.get("MemAvailable", 4 << 30) // 2
    except OSError:
        return (os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")) // 2


def split(members: list, per_member: int, budget: int) -> list[list]:
    """``members`` in as few groups as fit ``budget``, of near-equal sizes (at least :data:`MIN_SLOTS`
    slots each, whatever the budget)."""
    most = max(MIN_SLOTS, budget // max(per_member, 1))
    n = math.ceil(len(members) / most)
    size = math.ceil(len(members) / n)
    return [members[i:i + size] for i in range(0, len(members), size)]


def vectorises(device) -> bool:
    """Whether fused specs train as one vectorised job on ``device``: on the CPU only (the
    module's docstring says what was measured on a GPU). A device this process lacks (a Ray
    cluster's GPU, named by a driver without one) is not the CPU."""
    try:
        return resolve(device).type == "cpu"
    except ValueError:
        return False


def missing(specs: list[TrainingSpec], store, errors: dict) -> Iterator[TrainingSpec]:
    """The fused ``specs`` that ``store`` lacks; each it has is noted in ``errors`` as done (``None``)."""
    for spec in specs:
        if not spec.fused:
            raise ValueError(f"spec {spec.describe()} is not a fused training")
        if store.has(spec):
            errors[spec.key()] = None
        else:
            yield spec


def train_group(specs: list[TrainingSpec], store, device=None, progress: bool = True, datasets: dict | None = None,
                loader_workers: int | None = None, max_cache_bytes: int = 4 << 30,
                budget: int | None = None, curves: CurveSettings | None = None) -> dict[str, str | None]:
    """Train the fused ``specs`` that ``store`` lacks as vectorised groups, on any device (the
    engine uses it on the CPU: :func:`values_seg.engine.training.train_fused`), and save each;
    ``{key: None (saved) or the error}``. Members whose data differ in shape or step count form
    groups of their own; a group larger than the memory ``budget`` (bytes; default :func:`memory_budget`) is
    split. ``loader_workers``: per member (default 0: the members' batches are read in this
    process). ``curves``: each member's learning curve (:mod:`values_seg.engine.curves`; the weights
    do not depend on it)."""
    dev = resolve(device)
    datasets = {} if datasets is None else datasets
    errors: dict[str, str | None] = {}
    by_shape: dict = {}
    with fixed_threads(specs[0].threads):
        for spec in missing(specs, store, errors):
            try:  # a member whose data cannot be read fails alone
                if spec.dataset not in datasets:
                    datasets[spec.dataset] = spec.dataset.create()
                ds = datasets[spec.dataset]
                arch = arch_info(ds)
                ids = training.training_case_ids(spec, ds)
                shape = tuple(ds.load(ids[0]).image.shape)
            except Exception:  # noqa: BLE001 - recorded as that member's failure
                errors[spec.key()] = traceback.format_exc()
                continue
            r = spec.recipe
            steps = r.epochs * (r.steps_per_epoch or math.ceil(len(ids) / r.batch_size))
            by_shape.setdefault((repr(arch), shape, steps), []).append(spec)
        for (_, shape, _), group in by_shape.items():
            probe = group[0]
            training.seed_everything(probe.seed)
            net = build_network(probe, arch_info(datasets[probe.dataset])).to(dev)
            per = member_bytes(net, torch.zeros((probe.recipe.batch_size, *shape), device=dev))
            del net
            for part in split(group, per, memory_budget(dev) if budget is None else budget):
                errors.update(_train_fused(part, shape, store, dev, progress, datasets, loader_workers, max_cache_bytes,
                                           curves))
    return errors


def _train_fused(specs, shape, store, dev, progress, datasets, loader_workers, max_cache_bytes,
                 curves=None) -> dict[str, str | None]:
    if dev.type == "cuda":
        training.deterministic_cuda()
    t0 = time.time()
    # each member's loader in this process unless asked for (K members x 4 workers would swamp the CPUs);
    # the weights do not depend on it
    loader_workers = 0 if loader_workers is None else loader_workers
    members = [_Member(s, dev, datasets[s.dataset], max_cache_bytes, loader_workers) for s in specs]
    while len(members) < MIN_SLOTS:  # a shadow: the same spec again, trained and discarded
        members.append(_Member(specs[0], dev, datasets[specs[0].dataset], max_cache_bytes, loader_workers, shadow=True))
    for m in members:
        m.curve = CurveRecorder(m.spec, None if m.shadow else curves, datasets[m.spec.dataset], m.prepared.arch,
                                m.prepared.steps_per_epoch, dev)
    first = members[0].prepared
    r, total, steps_per_epoch = specs[0].recipe, first.total, first.steps_per_epoch
    carrier = max(members, key=lambda m: m.spec.dropout).prepared.net  # the structure: with dropout layers if any member has them
    skeleton, slots = _skeleton(carrier)
    shapes = _dropout_shapes(carrier, torch.zeros((r.batch_size, *shape), device=dev)) if slots else []
    params, buffers = stack_module_state([m.prepared.net for m in members])
    params = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
    state_keys = _state_names(members[0].prepared.net)
    for m in members:
        m.prepared.net = None  # the stacked copy is the one that trains
    opt = training._optimizer(specs[0], params.values())
    sched = None
    if r.lr_schedule == "poly" and total > 0:
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(1 - s / total, 0.0) ** 0.9)

    def forward(p, b, masks, x, *extra):
        return functional_call(skeleton, {**p, **b, **dict(zip(slots, masks))}, (x, *extra))

    def member_network(k):  # member k alone, for its validation Dice (no dropout: eval mode)
        ones = {name: torch.ones((), device=dev) for name in slots}
        return lambda x: functional_call(skeleton, {**{n: v[k] for n, v in params.items()},
                                                    **{n: v[k] for n, v in buffers.items()}, **ones}, (x,))

    batched = vmap(forward, randomness="error")
    pending, sync_every = [], 1 if dev.type == "cpu" else 10
    label = f"train fused x{len(specs)} {specs[0].describe()}"
    with meter(total, label, progress, unit="step") as bar:
        for step in range(total):
            epoch = step // steps_per_epoch
            xs, ys = [], []
            for m in members:
                x, y, plans = next(m.batches)
                x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
                x, y = augment.apply(x, y, plans, r, m.prepared.gen, fill_label=m.prepared.fill)
                xs.append(x)
                ys.append(y)
            masks, extras = [], []
            for m, y in zip(members, ys):
                with m.rng():  # its dropout masks, then what its head draws for its inputs
                    masks.append(m.masks(slots, shapes))
                    extras.append(training.training_inputs(m.spec, y))
            stacked_masks = [torch.stack([mk[i] for mk in masks]) for i in range(len(slots))]
            stacked_extras = [torch.stack(column) for column in zip(*extras)]
            with autocast(r.precision, dev):
                out = batched(params, buffers, stacked_masks, torch.stack(xs), *stacked_extras)
            losses = []
            for k, m in enumerate(members):
                with m.rng(), autocast(r.precision, dev):
                    losses.append(m.prepared.loss_fn(_member(out, k), ys[k], epoch))
            live = [loss for loss, m in zip(losses, members) if m.error is None]
            opt.zero_grad(set_to_none=True)
            torch.stack(live).sum().backward()
            opt.step()
            if sched is not None:
                sched.step()
            pending.append(torch.stack([loss.detach().float() for loss in losses]))
            if (step + 1) % steps_per_epoch == 0 and any(m.curve.due(epoch) for m in members):
                skeleton.eval()
                for k, m in enumerate(members):
                    if not m.shadow and m.error is None:
                        m.curve.epoch_end(epoch, member_network(k))
                skeleton.train()
            if len(pending) < sync_every and step + 1 < total:  # on a GPU, sync only now and then
                continue
            rows = torch.stack(pending).tolist()
            for i, row in enumerate(rows):
                at = step + 1 - len(rows) + i  # (a dead member's NaN in the summed loss leaves the others' gradients alone)
                for value, m in zip(row, members):
                    if m.error is not None:
                        continue
                    if not math.isfinite(value):
                        m.error = (f"FloatingPointError: spec {m.spec.describe()}: loss became {value} near step {at + 1} "
                                   f"(epoch {at // steps_per_epoch})")
                        log.error("%s (fused group: the other members go on)", m.error)
                    else:
                        m.running = value if m.running is None else 0.9 * m.running + 0.1 * value
                        m.curve.loss(at, value)
            bar.advance(len(rows))
            pending.clear()
            if all(m.error is not None for m in members if not m.shadow):
                break
    seconds = round(time.time() - t0, 3)
    errors: dict[str, str | None] = {}
    for k, m in enumerate(members):
        if m.shadow:
            continue
        if m.error is not None:
            errors[m.spec.key()] = m.error
            continue
        merged = {**params, **buffers}
        state = {key: merged[name][k].detach().cpu().clone() for key, name in state_keys.items()}
        try:
            training.check_finite_weights(m.spec, state, total)
        except FloatingPointError as e:  # its last update: named as a training of its own names it
            errors[m.spec.key()] = f"FloatingPointError: {e}"
            log.error("%s (fused group: the other members go on)", errors[m.spec.key()])
            continue
        info = {"steps": total, "final_loss": m.running, "train_seconds": seconds, "device": str(dev),
                "num_train_cases": len(m.prepared.ids), "fused_group": len(specs), "curve": m.curve.record()}
        store.save(m.spec, state, m.prepared.arch, **info)
        errors[m.spec.key()] = None
        log.info("trained %s (fused x%d): %d steps in %.1fs, loss %.4f", m.spec.describe(), len(specs), total, seconds,
                 m.running)
    return errors


def _state_names(net: nn.Module) -> dict[str, str]:
    """``{state-dict key: the name stack_module_state gave its tensor}`` (a module reached by two
    paths lists its tensors under both in the state dict, once among the parameters)."""
    names = {id(t): n for n, t in [*net.named_parameters(), *net.named_buffers()]}
    return {key: names[id(t)] for key, t in net.state_dict(keep_vars=True).items()}


def _member(out, k: int):
    """Member ``k``'s part of the batched output (a tensor or a tuple of them)."""
    if isinstance(out, torch.Tensor):
        return out[k]
    return type(out)(_member(o, k) for o in out)
