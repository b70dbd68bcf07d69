"""Job functions: module-level, with picklable arguments, so any executor can run them.

Each job (re)loads the experiment's plugin modules first: a worker process starts with the
built-ins and entry points only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Sequence

from values_seg import registry
from values_seg.engine import CheckpointStore, TrainingSpec, ensure_trained
from values_seg.run_files import CHECKPOINTS
from values_seg.runner.evaluate import run_evaluation
from values_seg.sweep import Combination


def load_plugins(plugins: Sequence[str]) -> None:
    for module in plugins:
        registry.load(module)


def train_job(spec: TrainingSpec, cache_dir: str, device: str | None, plugins: Sequence[str], progress: bool,
              loader_workers: int | None = None) -> str:
    """Train ``spec`` unless its checkpoint is already in the store."""
    load_plugins(plugins)
    ensure_trained([spec], CheckpointStore(Path(cache_dir) / CHECKPOINTS), device=device, progress=progress,
                   loader_workers=loader_workers)
    return spec.key()


def evaluate_job(combo: Combination, cache_dir: str, eval_cfg: dict, quantities: Sequence[str], splits: Sequence[str],
                 device: str | None, plugins: Sequence[str], progress: bool) -> str:
    """Predict (what is not cached) and evaluate one combination; returns its output folder."""
    load_plugins(plugins)
    return run_evaluation(combo, Path(cache_dir), eval_cfg, quantities, splits, device=device, progress=progress)


def stage_job(function: Callable, plugins: Sequence[str], args: tuple):
    """A stage's job: ``function(*args)`` once the experiment's plugins are loaded."""
    load_plugins(plugins)
    return function(*args)
