"""values-seg: systematic validation of uncertainty estimation for semantic segmentation.

This package's top is its public face: ``from values_seg import hookimpl, component, Task, ...``
gives a plugin author every contract (docs/architecture.md, "The public face"). The contracts load
on first use, so importing values-seg loads no torch. Reference: Kahl, Lüth et al., "ValUES", ICLR 2024.
"""

# pyarrow before torch: with torch loaded first, pyarrow's parquet reader can crash sporadically
# (apache/arrow#2637, pytorch/pytorch#22447; seen here as a segfault in read_parquet under load).
import importlib
import pyarrow.parquet  # noqa: F401  (import order only)

from values_seg.hookspecs import hookimpl

__version__ = "0.1.0"

#: name -> the module that defines it: what a plugin imports from ``values_seg``
FACE = {
    "component": "values_seg.registry",
    "PredictionModel": "values_seg.components.prediction_model",
    "Head": "values_seg.engine.head",
    "SampleStatistics": "values_seg.components.measure",
    "measure": "values_seg.components.measure",
    "Aggregation": "values_seg.components.aggregation",
    "as_map": "values_seg.components.aggregation",
    "LesionAggregation": "values_seg.components.lesion_scale",
    "Case": "values_seg.components.dataset",
    "Dataset": "values_seg.components.dataset",
    "Task": "values_seg.components.task",
    "Metric": "values_seg.components.task",
    "Support": "values_seg.components.task",
    "Reading": "values_seg.components.task",
    "row": "values_seg.components.task",
    "EvaluationResult": "values_seg.components.task",
    "CaseStatistic": "values_seg.components.task",
    "CaseStatisticTask": "values_seg.components.task",
    "Quantity": "values_seg.components.quantity",
    "Tracker": "values_seg.components.tracker",
    "Stage": "values_seg.components.stage",
    "ReportSection": "values_seg.report.section",
}

__all__ = ["hookimpl", "__version__", *FACE]


def __getattr__(name: str):
    if name in FACE:
        value = getattr(importlib.import_module(FACE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'values_seg' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(FACE))
