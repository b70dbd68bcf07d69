"""The run's cost table (``costs.csv``) as the report reads it: per method, mean over seeds, and the
cost columns the downstream tables show beside the quality (docs/design-rationale.md, "Cost")."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

METHOD = ["dataset", "scenario", "backbone", "prediction_model"]
NUMERIC = ["trainings", "steps", "train_seconds", "forward_passes", "flops_per_case", "inference_seconds_per_case",
           "peak_memory_bytes"]


def method_costs(costs: pd.DataFrame) -> pd.DataFrame:
    """The cost table's rows per method (``METHOD``), mean over seeds (the first seed's devices named)."""
    frame = costs.copy()
    for c in NUMERIC:
        frame[c] = pd.to_numeric(frame.get(c), errors="coerce")
    for c in METHOD + ["train_device", "inference_device"]:
        frame[c] = frame[c].astype(object).fillna("").astype(str) if c in frame else ""
    agg = {c: "mean" for c in NUMERIC}
    agg.update({"train_device": "first", "inference_device": "first", "seed": "nunique"})
    return frame.groupby(METHOD, sort=False, dropna=False).agg(agg).rename(columns={"seed": "seeds"}).reset_index()


@dataclass(frozen=True)
class CostColumn:
    """A cost column of a downstream table: ``key`` of costs.csv, shown × ``scale`` to ``digits``."""

    header: str
    key: str
    scale: float = 1.0
    digits: int = 3

    def text(self, value: float) -> str:
        return "" if not np.isfinite(value) else f"{value * self.scale:.{self.digits}g}"


GROUP = "Cost"
#: beside the quality: the trainings' seconds, and per test case the forward passes, GFLOPs and milliseconds
COLUMNS = (CostColumn("Train s", "train_seconds", digits=4), CostColumn("Passes", "forward_passes"),
           CostColumn("GFLOPs", "flops_per_case", 1e-9), CostColumn("ms", "inference_seconds_per_case", 1e3))
