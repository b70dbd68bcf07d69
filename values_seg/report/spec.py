"""What the report knows about metrics, tasks and component names: directions, suitable
uncertainty types, display labels and the canonical (deterministic) orders.

Everything here is a plain table; names not listed fall back to their own spelling and sort
after the listed ones in natural order, so third-party components need no entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HIGHER, LOWER = "higher", "lower"

#: metric -> which direction is better (arrows in table headers, labels of Figure-3 axes).
METRIC_DIRECTION = {
    "dice": HIGHER,
    "auroc": HIGHER,
    "auprc": HIGHER,
    "fpr_at_95_tpr": LOWER,
    "aurc": LOWER,
    "eaurc": LOWER,
    "ace": LOWER,
    "ncc": HIGHER,
    "ged": LOWER,
    "improvement": HIGHER,
    "ncc_au_minus_eu": HIGHER,
    "auroc_eu_minus_au": HIGHER,
}

#: task -> uncertainty types suited to it (paper section 4.5 / Figure 3); other tasks: all types.
SUITED_TYPES = {
    "ood_detection": ("PU", "EU"),
    "active_learning": ("PU", "EU"),
    "ambiguity": ("PU", "AU"),
}
ALL_TYPES = ("PU", "AU", "EU")

SEPARATION_TASK = "separation"


def direction(metric: str) -> str | None:
    return METRIC_DIRECTION.get(metric)


def arrow(metric: str) -> str:
    """"↑" (higher is better), "↓" (lower is better) or "" (unknown metric)."""
    return {HIGHER: "↑", LOWER: "↓"}.get(direction(metric), "")


def suited_types(task: str) -> tuple[str, ...]:
    return SUITED_TYPES.get(task, ALL_TYPES)


# ----------------------------------------------------------------------------- orders and labels

ORDERS = {
    "uncertainty_type": ("PU", "AU", "EU"),
    "prediction_model": ("deterministic", "test_time_dropout", "ensemble", "test_time_augmentation", "ssn", "nnunet"),
    "measure": (
        "max_softmax", "predictive_entropy", "expected_entropy", "mutual_information",
        "epkl", "reverse_mutual_information", "softmax_variance",
    ),
    "aggregation": ("patch", "threshold", "image", "foreground_mean", "boundary_mean", "quantile"),
    "split": ("iid", "ood", "all"),
    "subset": ("iid", "ood"),
}

LABELS = {
    "prediction_model": {
        "deterministic": "Determ.",
        "test_time_dropout": "TTD",
        "ensemble": "Ensemble",
        "test_time_augmentation": "TTA",
        "ssn": "SSN",
        "nnunet": "nnU-Net",
    },
    "measure": {
        "max_softmax": "MSR",
        "predictive_entropy": "PE",
        "expected_entropy": "EE",
        "mutual_information": "MI",
        "epkl": "EPKL",
        "reverse_mutual_information": "RMI",
        "softmax_variance": "SV",
    },
    "aggregation": {
        "patch": "Patch",
        "threshold": "Thresh",
        "image": "Image",
        "foreground_mean": "FG mean",
        "boundary_mean": "Bnd mean",
        "quantile": "Quantile",
    },
    "split": {"iid": "i.i.d.", "ood": "OoD", "all": ""},
    "subset": {"iid": "i.i.d.", "ood": "OoD"},
}

#: column / axis names of the components
COMPONENT_NAMES = {
    "backbone": "Backbone",
    "prediction_model": "Prediction model",
    "measure": "Uncertainty measure",
    "uncertainty_type": "Uncertainty type",
    "aggregation": "Aggregation",
}


def natural_key(value) -> tuple:
    """Sort key that orders "toy_2" before "toy_10" and numbers numerically."""
    parts = re.split(r"(\d+)", str(value))
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts)


def order_key(kind: str, value) -> tuple:
    order = ORDERS.get(kind, ())
    value = "" if value is None else value
    if value in order:
        return (0, order.index(value), ())
    return (1, 0, natural_key(value))


def ordered(kind: str, values) -> list:
    """Unique values in the canonical order of ``kind`` (unknown names after, natural order)."""
    return sorted(set(values), key=lambda v: order_key(kind, v))


def label(kind: str, value) -> str:
    """Short display label (the paper's abbreviations), else the name itself."""
    if value is None:
        return ""
    return LABELS.get(kind, {}).get(value, str(value))


def glossary() -> str:
    """One line that spells out the abbreviations used in tables and figures."""
    parts = []
    for kind in ("prediction_model", "measure", "aggregation"):
        parts += [f"{short} = {name}" for name, short in LABELS[kind].items() if short != name]
    return ", ".join(parts) + "; PU/AU/EU = predictive/aleatoric/epistemic uncertainty."


# ----------------------------------------------------------------------------- table and figure specs


@dataclass(frozen=True)
class MetricSpec:
    group: str  # column group of the downstream table (paper Tables 5-6)
    task: str
    metric: str
    label: str


#: Columns of the downstream table, in the paper's order; the splits found in the data expand each.
DOWNSTREAM_METRICS = (
    MetricSpec("Seg. Performance", "segmentation", "dice", "Dice"),
    MetricSpec("OoD-D", "ood_detection", "auroc", "AUROC"),
    MetricSpec("Failure Detection", "failure_detection", "aurc", "AURC"),
    MetricSpec("Failure Detection", "failure_detection", "eaurc", "E-AURC"),
    MetricSpec("AL", "active_learning", "improvement", "AL Improv."),
    MetricSpec("Calibration", "calibration", "ace", "ACE"),
    MetricSpec("Ambiguity Modeling", "ambiguity", "ncc", "NCC"),
    MetricSpec("Ambiguity Modeling", "ambiguity", "ged", "GED"),
)

#: Task metrics of the per-component deviation plots (paper Figure 3).
FIGURE3_METRICS = (
    MetricSpec("OoD", "ood_detection", "auroc", "OoD-D AUROC"),
    MetricSpec("AL", "active_learning", "improvement", "AL improvement"),
    MetricSpec("FD", "failure_detection", "aurc", "FD AURC"),
    MetricSpec("CALIB", "calibration", "ace", "CALIB ACE"),
    MetricSpec("AM", "ambiguity", "ncc", "AM NCC"),
)

#: Components of Figure 3 (the backbone joins when a scenario has more than one).
FIGURE3_COMPONENTS = ("uncertainty_type", "prediction_model", "aggregation", "backbone")
