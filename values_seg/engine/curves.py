"""Learning curves: a training's mean loss per epoch and its validation Dice every few epochs,
recorded in its checkpoint sidecar without changing its weights (docs/design-rationale.md,
"Learning curves").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch


@dataclass(frozen=True)
class CurveSettings:
    """``dice_every``: epochs between two validation-Dice points (0: off; the last epoch always
    gets one); ``dice_cases``: how many cases of ``dice_split`` (evenly spread over its sorted ids)."""

    dice_every: int = 5
    dice_cases: int = 4
    dice_split: str = "val"

    @property
    def on(self) -> bool:
        return self.dice_every > 0 and self.dice_cases > 0


def dice_subset(ds, settings: CurveSettings) -> list:
    """The fixed validation cases (``[]`` when off or the dataset has no such split)."""
    if not settings.on or settings.dice_split not in ds.splits():
        return []
    ids = sorted(ds.case_ids(settings.dice_split))
    if not ids:
        return []
    picks = np.unique(np.linspace(0, len(ids) - 1, min(settings.dice_cases, len(ids))).round().astype(int))
    return [ds.load(ids[i]) for i in picks]


def logits_of(output):
    """The mean logits of a network's output (a head returning a tuple puts them first)."""
    return output if isinstance(output, torch.Tensor) else output[0]


def mean_dice(pred: np.ndarray, raters: np.ndarray, num_classes: int, ignore_index: int | None,
              background: int | None = 0) -> float:
    """Mean over raters and classes (but ``background``) present in the prediction or the rater's mask of
    ``2|P∩R| / (|P|+|R|)`` (pixels labelled ``ignore_index`` left out); NaN without any."""
    scores = []
    for mask in raters:
        keep = np.ones(mask.shape, bool) if ignore_index is None else mask != ignore_index
        for c in (c for c in range(num_classes) if c != background):
            p, r = (pred == c) & keep, (mask == c) & keep
            total = p.sum() + r.sum()
            if total:
                scores.append(2.0 * (p & r).sum() / total)
    return float(np.mean(scores)) if scores else float("nan")


class CurveRecorder:
    """Collects one training's curve: :meth:`loss` per step, :meth:`epoch_end` after each epoch."""

    def __init__(self, spec, settings: CurveSettings | None, ds, arch: dict, steps_per_epoch: int, dev):
        self.settings = settings or CurveSettings(dice_every=0)
        self.steps_per_epoch = steps_per_epoch
        self.sums: dict[int, list[float]] = {}
        self.dice: list[list[float]] = []
        self.arch, self.dev = arch, dev
        self.cases = dice_subset(ds, self.settings)
        self.background = getattr(ds, "background", 0)
        self.epochs = spec.recipe.epochs
        self.phases = spec.head.phases() if spec.head is not None else []

    def loss(self, step: int, value: float) -> None:
        """The loss of step ``step`` (counting from 0)."""
        self.sums.setdefault(step // self.steps_per_epoch, []).append(value)

    def due(self, epoch: int) -> bool:
        """Whether epoch ``epoch`` (from 0, just finished) gets a validation-Dice point."""
        return bool(self.cases) and ((epoch + 1) % self.settings.dice_every == 0 or epoch + 1 == self.epochs)

    @torch.no_grad()
    def epoch_end(self, epoch: int, forward: Callable[[torch.Tensor], object]) -> None:
        """After epoch ``epoch``: the validation Dice if due, with ``forward`` the network in eval mode."""
        if not self.due(epoch):
            return
        scores = []
        for case in self.cases:
            x = torch.from_numpy(np.ascontiguousarray(case.image, dtype=np.float32))[None].to(self.dev)
            pred = logits_of(forward(x))[0].float().argmax(0).cpu().numpy()
            scores.append(mean_dice(pred, case.raters, self.arch["num_classes"], self.arch.get("ignore_index"),
                                    self.background))
        finite = [s for s in scores if np.isfinite(s)]
        self.dice.append([epoch + 1, float(np.mean(finite)) if finite else float("nan")])

    def record(self) -> dict:
        """The sidecar's ``curve``: ``epoch_loss`` (mean loss of epochs 1..E), ``val_dice``
        (``[epoch, Dice]`` pairs), on what, and the head's ``phases`` (``[name, first, last epoch]``)."""
        return {"epoch_loss": [float(np.mean(self.sums[e])) for e in sorted(self.sums)],
                "val_dice": self.dice, "val_split": self.settings.dice_split if self.cases else None,
                "val_cases": len(self.cases), "phases": [list(p) for p in self.phases]}

