"""The training data path: seeded sample plans -> batches, loaded by a
:class:`torch.utils.data.DataLoader`.

Every random choice is drawn in the training process, so the weights do not depend on the number of
workers: docs/design-rationale.md, "The training data path".
"""

from __future__ import annotations

import os
import random
from collections import OrderedDict
from typing import Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from values_seg.engine import augment
from values_seg.engine.specs import Recipe


def default_workers(device: torch.device) -> int:
    """``auto`` loader workers: none on the CPU (the cores train), else up to 4 of the CPUs."""
    return 0 if device.type == "cpu" else max(0, min(4, (os.cpu_count() or 1) - 1))


class CaseCache:
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

    def warm(self) -> None:
        """Load every case that fits, so that forked workers share them instead of each loading them."""
        for index in range(len(self.case_ids)):
            self.get(index)
            if self._bytes > self.max_bytes:
                break


def plan_batches(rng: np.random.Generator, n_cases: int, recipe: Recipe, dims: int, steps: int) -> Iterator[tuple]:
    """The sample plans of ``steps`` batches: case indices from concatenated random permutations
    (every case once per pass), each sample's augmentation drawn right after its case, from ``rng``."""
    order: list[int] = []
    for _ in range(steps):
        plans = []
        for _ in range(recipe.batch_size):
            if not order:
                order = rng.permutation(n_cases).tolist()[::-1]
            plans.append(augment.draw_plan(rng, order.pop(), recipe, dims))
        yield tuple(plans)


class _PlanSampler(Sampler):
    """Yields the plans of each step (drawn lazily, in the training process)."""

    def __init__(self, plans: Iterator[tuple], steps: int):
        self.plans, self.steps = plans, steps

    def __len__(self) -> int:
        return self.steps

    def __iter__(self):
        return self.plans


class _Batches(Dataset):
    """``batches[plans]`` -> ``(images [B, Cin, *sp] float32, labels [B, *sp] int64, plans)``."""

    def __init__(self, cases: CaseCache, dataset, describe: str):
        self.cases, self.dataset, self.describe = cases, dataset, describe

    def __getitem__(self, plans: Sequence[augment.SamplePlan]):
        images, labels = [], []
        for p in plans:
            img, raters = self.cases.get(p.case_index)
            images.append(img)
            labels.append(self.dataset.training_label(raters, p.rater_u))
        shapes = {im.shape for im in images}
        if len(shapes) > 1:
            raise ValueError(f"spec {self.describe}: training images differ in shape {sorted(shapes)}; batching needs one shape")
        return torch.from_numpy(np.stack(images)), torch.from_numpy(np.stack(labels).astype(np.int64)), tuple(plans)


def seed_worker(worker_id: int) -> None:
    """Seed a loader worker's Python, NumPy and torch generators from the loader's seed and its id."""
    seed = torch.initial_seed() % 2**32  # the DataLoader's base seed + worker id
    random.seed(seed)
    np.random.seed(seed)


def training_batches(cases: CaseCache, dataset, plans: Iterator[tuple], steps: int, describe: str,
                     device: torch.device, workers: int, prefetch: int = 2, seed: int = 0) -> DataLoader:
    """A loader over ``steps`` batches of ``plans``, read by ``workers`` processes (0: in this one)."""
    if workers > 0:
        cases.warm()
    gen = torch.Generator()
    gen.manual_seed(seed)
    options = dict(num_workers=workers, worker_init_fn=seed_worker, generator=gen,
                   pin_memory=device.type == "cuda")
    if workers > 0:
        options["prefetch_factor"] = prefetch
    return DataLoader(_Batches(cases, dataset, describe), batch_size=None, sampler=_PlanSampler(plans, steps),
                      **options)
