"""Job functions: module-level, with picklable arguments, so any executor can run them.

Each job (re)loads the experiment's plugin modules first: a worker process starts with the
built-ins and entry points only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from values_seg import registry
from values_seg.engine import CheckpointStore, PredictionCache, TrainingSpec, ensure_trained, predict_split
from values_seg.runner.evaluate import case_dice, run_evaluation
from values_seg.sweep import Combination


def load_plugins(plugins: Sequence[str]) -> None:
    for module in plugins:
        registry.load(module)


def train_job(spec: TrainingSpec, cache_dir: str, device: str | None, plugins: Sequence[str], progress: bool) -> str:
    """Train ``spec`` unless its checkpoint is already in the store."""
    load_plugins(plugins)
    ensure_trained([spec], CheckpointStore(Path(cache_dir) / "checkpoints"), device=device, progress=progress)
    return spec.key()


def evaluate_job(combo: Combination, cache_dir: str, eval_cfg: dict, stages: Sequence[str], pool_split: str,
                 device: str | None, plugins: Sequence[str], progress: bool) -> str:
    """Predict (what is not cached) and evaluate one combination; returns its output folder."""
    load_plugins(plugins)
    return run_evaluation(combo, Path(cache_dir), eval_cfg, stages, pool_split, device=device, progress=progress)


def second_cycle_dice_job(combo: Combination, specs: Sequence[TrainingSpec], ood_case_ids: Sequence[str], cache_dir: str,
                          eval_cfg: dict, device: str | None, plugins: Sequence[str], progress: bool) -> dict[str, float]:
    """Per OoD test case, the Dice of the prediction model retrained on the queried cases (eq. 9),
    predicted with the run's ``prediction_dtype`` and ``threads`` (``eval_cfg``), as the first cycle."""
    load_plugins(plugins)
    model = combo.model.create()
    dataset = combo.dataset.create()
    store = CheckpointStore(Path(cache_dir) / "checkpoints")
    cache = PredictionCache(Path(cache_dir) / "predictions", dtype=eval_cfg.get("prediction_dtype", "float16"))
    handles = predict_split(model, list(specs), store, combo.dataset, "test", cache, device=device, progress=progress,
                            threads=eval_cfg.get("threads", 1))
    return case_dice(handles, dataset, set(ood_case_ids), dataset.num_classes, dataset.ignore_index)
