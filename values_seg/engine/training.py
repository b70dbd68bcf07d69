"""Training: one :class:`~values_seg.engine.specs.TrainingSpec` -> one state dict.

:func:`train` trains for real on the resolved device; :func:`ensure_trained` trains each
distinct missing spec once and stores it; :func:`load_network` rebuilds a trained network.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections import OrderedDict
from pathlib import Path
from typing import Iterable

import numpy as np
import torch
from torch import nn

from values_seg.engine import augment, losses
from values_seg.engine.device import fixed_threads, resolve
from values_seg.engine.networks import arch_info, build_network
from values_seg.engine.specs import TrainingSpec, unique_specs
from values_seg.engine.store import CheckpointStore

log = logging.getLogger("values_seg.engine")


def seed_everything(seed: int) -> None:
    """Seed Python's, NumPy's and torch's (all devices) global RNGs."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def training_case_ids(spec: TrainingSpec, dataset) -> list[str]:
    """``dataset.case_ids(spec.train_split)`` followed by the extra cases, without repeats."""
    dataset.check_split(spec.train_split)
    ids = list(dict.fromkeys(dataset.case_ids(spec.train_split)))
    seen = set(ids)
    for split, cid in spec.extra_cases:
        dataset.check_split(split)
        if cid not in seen:
            ids.append(cid)
            seen.add(cid)
    if not ids:
        raise ValueError(f"spec {spec.describe()}: no training cases in split {spec.train_split!r}")
    return ids


class _CaseCache:
    """Loads training cases on demand; keeps up to ``max_bytes`` of them in memory (LRU)."""

    def __init__(self, dataset, case_ids: list[str], arch: dict, max_bytes: int):
        self.dataset, self.case_ids, self.arch, self.max_bytes = dataset, case_ids, arch, max_bytes
        self._cache: OrderedDict[int, tuple[np.ndarray, np.ndarray]] = OrderedDict()
        self._bytes = 0

    def get(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        if index in self._cache:
            self._cache.move_to_end(index)
            return self._cache[index]
        case = self.dataset.load(self.case_ids[index])
        a = self.arch
        case.validate(a["dims"], a["in_channels"], a["num_classes"], a["ignore_index"])
        if case.raters.shape[0] == 0:
            raise ValueError(f"case {case.case_id!r} has no rater masks; it cannot be used for training")
        item = (np.ascontiguousarray(case.image, dtype=np.float32), np.ascontiguousarray(case.raters))
        size = item[0].nbytes + item[1].nbytes
        self._cache[index] = item
        self._bytes += size
        while self._bytes > self.max_bytes and len(self._cache) > 1:
            _, (img, rat) = self._cache.popitem(last=False)
            self._bytes -= img.nbytes + rat.nbytes
        return item


def _optimizer(spec: TrainingSpec, params) -> torch.optim.Optimizer:
    r = spec.recipe
    if r.optimizer == "adam":
        return torch.optim.Adam(params, lr=r.lr, weight_decay=r.weight_decay)
    if r.optimizer == "sgd":
        return torch.optim.SGD(params, lr=r.lr, weight_decay=r.weight_decay, momentum=r.momentum, nesterov=False)
    if r.optimizer == "rmsprop":
        return torch.optim.RMSprop(params, lr=r.lr, weight_decay=r.weight_decay, momentum=r.momentum)
    raise ValueError(f"unknown optimizer {r.optimizer!r}")


def _loss_function(spec: TrainingSpec, ignore_index: int | None):
    """``(output, target, epoch) -> loss``: the head's own loss, else the recipe's."""
    head, recipe = spec.head, spec.recipe
    if head is None:
        base = losses.recipe_loss(recipe)
        return lambda output, target, epoch: base(output, target, ignore_index)
    return lambda output, target, epoch: head.loss(output, target, ignore_index=ignore_index, epoch=epoch, recipe=recipe)


def _index_stream(rng: np.random.Generator, n: int):
    """Case indices: concatenated random permutations (every case once per pass)."""
    while True:
        yield from rng.permutation(n).tolist()


def train(
    spec: TrainingSpec,
    device: str | torch.device | None = None,
    progress: bool = True,
    dataset=None,
    max_cache_bytes: int = 4 << 30,
) -> dict[str, torch.Tensor]:
    """Train ``spec`` and return its state dict (CPU tensors).

    ``dataset``: an already built instance of ``spec.dataset`` (else it is rebuilt through the
    registry). Reproducible: the same spec on the CPU gives identical weights; it trains with
    ``spec.threads`` CPU threads (part of its key), whatever process runs it.
    """
    state, _ = _train(spec, device, progress, dataset, max_cache_bytes)
    return state


def _train(spec, device, progress, dataset, max_cache_bytes) -> tuple[dict, dict]:
    with fixed_threads(spec.threads):
        return _train_loop(spec, device, progress, dataset, max_cache_bytes)


def _train_loop(spec, device, progress, dataset, max_cache_bytes) -> tuple[dict, dict]:
    dev = resolve(device)
    t0 = time.time()
    ds = dataset if dataset is not None else spec.dataset.create()
    arch = arch_info(ds)
    ids = training_case_ids(spec, ds)
    r = spec.recipe
    dims = arch["dims"]
    augment.resolve_axes(r.flip_axes, dims)  # validate early

    seed_everything(spec.seed)
    net = build_network(spec, arch).to(dev)
    opt = _optimizer(spec, net.parameters())
    rng = np.random.default_rng(spec.seed)
    gen = torch.Generator(device=dev)
    gen.manual_seed(spec.seed)
    cases = _CaseCache(ds, ids, arch, max_cache_bytes)
    stream = _index_stream(rng, len(ids))

    steps_per_epoch = r.steps_per_epoch or math.ceil(len(ids) / r.batch_size)
    total = r.epochs * steps_per_epoch
    sched = None
    if r.lr_schedule == "poly" and total > 0:
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(1 - s / total, 0.0) ** 0.9)
    ignore = arch["ignore_index"]
    fill = ignore if ignore is not None else 0
    loss_fn = _loss_function(spec, ignore)

    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, desc=f"train {spec.describe()}", unit="step", dynamic_ncols=True, leave=False)
    net.train()
    step, running, pending = 0, None, []
    sync_every = 1 if dev.type == "cpu" else 10
    try:
        for epoch in range(r.epochs):
            for _ in range(steps_per_epoch):
                plans = [augment.draw_plan(rng, next(stream), r, dims) for _ in range(r.batch_size)]
                images, labels = [], []
                for p in plans:
                    img, raters = cases.get(p.case_index)
                    images.append(img)
                    labels.append(ds.training_label(raters, p.rater_u))
                shapes = {im.shape for im in images}
                if len(shapes) > 1:
                    raise ValueError(f"spec {spec.describe()}: training images differ in shape {sorted(shapes)}; batching needs one shape")
                x = torch.from_numpy(np.stack(images)).to(dev)
                y = torch.from_numpy(np.stack(labels).astype(np.int64)).to(dev)
                x, y = augment.apply(x, y, plans, r, gen, fill_label=fill)

                loss = loss_fn(net(x), y, epoch)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                if sched is not None:
                    sched.step()
                step += 1
                pending.append(loss.detach())
                if len(pending) >= sync_every or step == total:  # on a GPU, sync only now and then
                    for value in torch.stack(pending).tolist():
                        if not math.isfinite(value):
                            raise FloatingPointError(f"spec {spec.describe()}: loss became {value} near step {step} (epoch {epoch})")
                        running = value if running is None else 0.9 * running + 0.1 * value
                    if bar is not None:
                        bar.update(len(pending))
                        bar.set_postfix(epoch=epoch, loss=f"{running:.4f}")
                    pending.clear()
    finally:
        if bar is not None:
            bar.close()
    state = {k: v.detach().cpu().clone() for k, v in net.state_dict().items()}
    info = {
        "arch": arch,
        "steps": step,
        "final_loss": running,
        "train_seconds": round(time.time() - t0, 3),
        "device": str(dev),
        "num_train_cases": len(ids),
    }
    log.info("trained %s: %d steps in %.1fs, loss %.4f", spec.describe(), step, info["train_seconds"], running or float("nan"))
    return state, info


def ensure_trained(
    specs: Iterable[TrainingSpec],
    store: CheckpointStore,
    device: str | torch.device | None = None,
    progress: bool = True,
    datasets: dict | None = None,
) -> dict[str, Path]:
    """Train every distinct spec (by key) that has no intact checkpoint; ``{key: path}`` for all.

    Each missing spec is trained exactly once per call and saved atomically; a corrupt
    checkpoint counts as missing. ``datasets``: optional ``{ComponentRef: instance}`` of already
    built datasets; datasets built here are added to it, so specs sharing one build it once."""
    out = {}
    todo = unique_specs(specs)
    missing = [s for s in todo.values() if not store.has(s)]
    if missing:
        log.info("training %d of %d distinct specs (%d found in %s)", len(missing), len(todo), len(todo) - len(missing), store.root)
    datasets = {} if datasets is None else datasets
    for spec in missing:
        if spec.dataset not in datasets:
            datasets[spec.dataset] = spec.dataset.create()
        # looked up as a module attribute on purpose (tests count trainings by patching it)
        state, info = train_with_info(spec, device=device, progress=progress, dataset=datasets[spec.dataset])
        store.save(spec, state, info.pop("arch"), **info)
    for key, spec in todo.items():
        out[key] = store.path(spec)
    return out


def train_with_info(spec: TrainingSpec, device=None, progress: bool = True, dataset=None, max_cache_bytes: int = 4 << 30):
    """Like :func:`train`, returning ``(state_dict, info)`` (info: arch, steps, final loss, time)."""
    return _train(spec, device, progress, dataset, max_cache_bytes)


def load_network(spec: TrainingSpec, store: CheckpointStore, device: str | torch.device | None = None) -> nn.Module:
    """The trained network of ``spec`` on ``device``, in eval mode."""
    dev = resolve(device)
    payload = store.load(spec)
    net = build_network(spec, payload["arch"])
    net.load_state_dict(payload["state_dict"])
    return net.to(dev).eval()
