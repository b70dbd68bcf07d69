"""Aggregations that rank the cases identically on a run: one entry, named together, in the verdict.

Decided from the run's per-case scores (the same ranks in every combination), never from the names
(docs/design-rationale.md, "Equivalent aggregations").
"""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd

#: The columns of ``cases.csv`` that identify one combination's scores of the cases.
COMBINATION = ["dataset", "scenario", "seed", "backbone", "prediction_model", "measure"]


def equivalent_groups(cases: pd.DataFrame | None) -> list[list[str]]:
    """The groups (two or more, each in order of first appearance) of aggregations whose per-case
    score ranks agree in every combination of ``cases`` (see the module docstring); [] without scores."""
    from scipy.stats import rankdata  # here, not at import: a no-op rerun imports no scipy.stats

    need = COMBINATION + ["aggregation", "case_id", "score"]
    if cases is None or cases.empty or any(c not in cases.columns for c in need):
        return []
    rows = cases[need].copy()
    rows = rows[rows["aggregation"].astype(str) != ""]
    for c in COMBINATION + ["case_id"]:
        rows[c] = rows[c].astype(str)
    rows = rows.sort_values(COMBINATION + ["aggregation", "case_id"], kind="stable")
    signature: dict[str, list] = {}
    for key, g in rows.groupby(COMBINATION + ["aggregation"], sort=False):
        score = g["score"].to_numpy(dtype=float)
        ranks = np.where(np.isnan(score), -1, rankdata(np.nan_to_num(score, nan=0.0), method="dense"))
        digest = hashlib.sha256("\x1f".join(g["case_id"]).encode() + ranks.astype(np.int64).tobytes()).hexdigest()
        signature.setdefault(key[-1], []).append((key[:-1], digest))
    groups: dict[tuple, list[str]] = {}
    for aggregation in dict.fromkeys(cases["aggregation"].astype(str)):
        if aggregation in signature:
            groups.setdefault(tuple(sorted(signature[aggregation])), []).append(aggregation)
    return [g for g in groups.values() if len(g) >= 2]


def confirmed(groups: list[list[str]], panels: list[pd.DataFrame]) -> list[list[str]]:
    """The ``groups`` whose members also have the same value in every method (backbone, model,
    measure) of every panel (its methods: a frame with ``aggregation`` and ``value``)."""
    out = []
    for group in groups:
        same = True
        for methods in panels:
            part = methods[methods["aggregation"].isin(group)]
            wide = part.pivot_table(index=["backbone", "prediction_model", "measure"], columns="aggregation",
                                    values="value", aggfunc="mean")
            same &= bool(np.isclose(wide.to_numpy(), wide.to_numpy()[:, :1], rtol=1e-9, atol=1e-12,
                                    equal_nan=True).all())
        if same:
            out.append(group)
    return out
