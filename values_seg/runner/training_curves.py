"""The trainings' learning curves as rows of ``curves.parquet`` (curve kind ``training``), read
from the checkpoint sidecars (:mod:`values_seg.engine.curves`): one row per combination, training
(``member``: its place in the combination's specs) and epoch, with the mean ``loss``, the
validation ``val_dice`` where measured and the head's ``phase`` ("" outside a named phase)."""

from __future__ import annotations

import pandas as pd

from values_seg.engine import Checkpoints
from values_seg.config.sweep import Combination

KIND = "training"


def training_curve_table(combo: Combination, store: Checkpoints) -> pd.DataFrame | None:
    """The curves of ``combo``'s trainings (None where no sidecar holds one, e.g. older checkpoints)."""
    rows = []
    for member, spec in enumerate(combo.specs):
        curve = (store.meta(spec) or {}).get("curve")
        if not curve:
            continue
        dice = {int(e): float(d) for e, d in curve.get("val_dice", [])}
        for epoch, loss in enumerate(curve["epoch_loss"], start=1):
            phase = next((name for name, first, last in curve.get("phases", []) if first <= epoch <= last), "")
            rows.append({**combo.context, "task": KIND, "curve": KIND, "member": member, "spec_key": spec.key(),
                         "epoch": epoch, "loss": loss, "val_dice": dice.get(epoch, float("nan")), "phase": phase})
    return pd.DataFrame(rows) if rows else None
