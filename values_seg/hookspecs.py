"""Hook specifications: one hook per kind of component.

A plugin is any module (or object) with functions marked ``@values_seg.hookimpl`` whose
names match the hooks below. Each hook returns a list of components: plain functions
(measures) or classes/factories (everything else). Name and description come from the
object (``__name__`` / first docstring line) unless set with :func:`values_seg.component`.

A complete third-party measure::

    import torch
    from values_seg import hookimpl

    def foreground_variance(samples: torch.Tensor) -> torch.Tensor:
        \"\"\"Variance of the foreground probability over the samples.\"\"\"
        return samples[:, 1].var(dim=0, unbiased=False)

    @hookimpl
    def values_seg_measures():
        return [foreground_variance]
"""

from __future__ import annotations

import pluggy

PROJECT = "values_seg"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def values_seg_backbones() -> list:
    """C0: factories ``(dims, in_channels, num_classes, dropout=0.0, **params) -> nn.Module``."""


@hookspec
def values_seg_prediction_models() -> list:
    """C1: prediction-model classes (training recipes + inference yielding ``[S, C, *spatial]``)."""


@hookspec
def values_seg_measures() -> list:
    """C2: callables ``samples[S, C, *spatial] -> map[*spatial]``."""


@hookspec
def values_seg_aggregations() -> list:
    """C3: :class:`values_seg.aggregation.Aggregation` subclasses (``fit`` then ``map -> float``)."""


@hookspec
def values_seg_datasets() -> list:
    """Datasets: :class:`values_seg.data.Dataset` subclasses."""


@hookspec
def values_seg_tasks() -> list:
    """Downstream tasks: classes turning per-case records into metric rows."""


#: Factory arguments the engine supplies itself, per kind (not settable from a config).
SUPPLIED_ARGS = {"backbone": ("dims", "in_channels", "num_classes", "dropout")}

#: kind name -> hook name; the order is the order of ``values-seg plugins``.
HOOKS = {
    "backbone": "values_seg_backbones",
    "prediction_model": "values_seg_prediction_models",
    "measure": "values_seg_measures",
    "aggregation": "values_seg_aggregations",
    "dataset": "values_seg_datasets",
    "task": "values_seg_tasks",
}
