"""The set-up of a training, shared by the one-by-one loop (:mod:`values_seg.engine.training`) and
fused groups (:mod:`values_seg.engine.fused`): seeding, the training cases, the optimiser, the loss,
and :func:`prepare` (a spec's network, batches and generators, drawn in the order the loop has
always drawn them), and :func:`check_finite_weights`, the check of what a training returns."""

from __future__ import annotations

import math
import os
import random
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from values_seg.engine import augment, losses
from values_seg.engine.loader import CaseCache, default_workers, plan_batches, training_batches
from values_seg.engine.networks import arch_info, build_network
from values_seg.engine.optimizers import eager
from values_seg.engine.specs import TrainingSpec


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


def _optimizer(spec: TrainingSpec, params) -> torch.optim.Optimizer:
    r = spec.recipe  # torch's optimisers, without their import of torch._dynamo (values_seg.engine.optimizers)
    if r.optimizer == "adam":
        return eager(torch.optim.Adam)(params, lr=r.lr, weight_decay=r.weight_decay)
    if r.optimizer == "sgd":
        return eager(torch.optim.SGD)(params, lr=r.lr, weight_decay=r.weight_decay, momentum=r.momentum, nesterov=False)
    if r.optimizer == "rmsprop":
        return eager(torch.optim.RMSprop)(params, lr=r.lr, weight_decay=r.weight_decay, momentum=r.momentum)
    raise ValueError(f"unknown optimizer {r.optimizer!r}")


def _loss_function(spec: TrainingSpec, ignore_index: int | None):
    """``(output, target, epoch) -> loss``: the head's own loss, else the recipe's."""
    head, recipe = spec.head, spec.recipe
    if head is None:
        base = losses.recipe_loss(recipe)
        return lambda output, target, epoch: base(output, target, ignore_index)
    return lambda output, target, epoch: head.loss(output, target, ignore_index=ignore_index, epoch=epoch, recipe=recipe)


def training_inputs(spec: TrainingSpec, target: torch.Tensor) -> tuple:
    """The network's inputs after the image in a training step (:meth:`Head.training_inputs`;
    none without a head)."""
    return () if spec.head is None else tuple(spec.head.training_inputs(target))


def deterministic_cuda() -> None:
    """cuDNN without autotuning and with deterministic algorithms (the seed contract: a spec trained
    twice on one GPU gives the same weights), and cuBLAS with a fixed workspace."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True


@dataclass
class Prepared:
    """One spec's training, set up: its network (initialised from ``seed``), its batches (plans
    from its own generator), its augmentation noise generator and its loss."""

    spec: TrainingSpec
    arch: dict
    ids: list
    net: nn.Module
    gen: torch.Generator
    steps_per_epoch: int
    total: int
    fill: int
    loss_fn: object
    batches: object


def prepare(spec: TrainingSpec, dev: torch.device, ds, max_cache_bytes: int, loader_workers=None) -> Prepared:
    """Everything of ``spec``'s training but the optimiser, drawn in the order the loop has always drawn it."""
    arch = arch_info(ds)
    ids = training_case_ids(spec, ds)
    r = spec.recipe
    dims = arch["dims"]
    augment.resolve_axes(r.flip_axes, dims)  # validate early

    seed_everything(spec.seed)
    net = build_network(spec, arch).to(dev)
    rng = np.random.default_rng(spec.seed)
    gen = torch.Generator(device=dev)
    gen.manual_seed(spec.seed)
    cases = CaseCache(ds, ids, arch, max_cache_bytes)

    steps_per_epoch = r.steps_per_epoch or math.ceil(len(ids) / r.batch_size)
    total = r.epochs * steps_per_epoch
    ignore = arch["ignore_index"]
    fill = ignore if ignore is not None else 0
    workers = default_workers(dev) if loader_workers is None else int(loader_workers)
    batches = training_batches(cases, ds, plan_batches(rng, len(ids), r, dims, total), total, spec.describe(),
                               dev, workers, seed=spec.seed)
    return Prepared(spec, arch, ids, net, gen, steps_per_epoch, total, fill, _loss_function(spec, ignore), batches)


def non_finite(state: dict[str, torch.Tensor]) -> str | None:
    """The first floating-point tensor of ``state`` with a NaN or infinite value, described (its
    name and how many of its values); ``None`` where every one is finite."""
    for name, tensor in state.items():
        if torch.is_tensor(tensor) and tensor.is_floating_point():
            bad = int((~torch.isfinite(tensor)).sum())
            if bad:
                return f"{name!r} ({bad} of {tensor.numel()} values)"
    return None


def check_finite_weights(spec: TrainingSpec, state: dict[str, torch.Tensor], steps: int) -> None:
    """``FloatingPointError`` naming ``spec`` and its first non-finite tensor where an update made
    the weights NaN or infinite (its last loss may still have been finite): never saved as trained."""
    where = non_finite(state)
    if where is not None:
        raise FloatingPointError(f"spec {spec.describe()}: weights became non-finite after step {steps}, "
                                 f"first in {where}")
