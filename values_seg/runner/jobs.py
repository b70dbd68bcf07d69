"""Job functions: module-level, with picklable arguments, so any executor can run them.

Each job gets the run's :class:`~values_seg.components.run_context.RunContext` and (re)loads the
experiment's plugin modules first: a worker process starts with the built-ins and entry points
only.
"""

from __future__ import annotations

from typing import Callable, Sequence

from values_seg.engine import Checkpoints, TrainingSpec, ensure_trained
from values_seg.engine.training import train_fused
from values_seg.components.run_context import RunContext
from values_seg.evaluation.combination import run_evaluation
from values_seg.components.settings import EvaluationSettings
from values_seg.config.sweep import Combination


def train_job(spec: TrainingSpec, context: RunContext) -> str:
    """Train ``spec`` unless its checkpoint is already in the store."""
    context.load_plugins()
    ensure_trained([spec], Checkpoints.of(context.store), device=context.device,
                   progress=context.progress, loader_workers=context.loader_workers, curves=context.curves)
    return spec.key()


def train_group_job(specs: tuple[TrainingSpec, ...], context: RunContext) -> dict[str, str | None]:
    """Train the fused ``specs`` the store lacks as one job (:func:`values_seg.engine.training.
    train_fused`); ``{key: None (saved) or the error of a member that failed alone}``."""
    context.load_plugins()
    return train_fused(list(specs), Checkpoints.of(context.store), device=context.device,
                       progress=context.progress, loader_workers=context.loader_workers, curves=context.curves)


def evaluate_job(combo: Combination, context: RunContext, settings: EvaluationSettings, quantities: Sequence[str],
                 splits: Sequence[str]) -> str:
    """Predict (what is not cached) and evaluate one combination; returns its output folder."""
    context.load_plugins()
    return run_evaluation(combo, context.cache, settings, quantities, splits, device=context.device,
                          progress=context.progress)


def stage_job(function: Callable, context: RunContext, args: tuple):
    """A stage's job: ``function(*args)`` once the experiment's plugins are loaded."""
    context.load_plugins()
    return function(*args)
