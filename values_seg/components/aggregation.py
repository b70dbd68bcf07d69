"""The C3 contract: per-pixel uncertainty map -> one score per image (paper section 2, appendix F).

Its conventions: docs/design-rationale.md, "Aggregations"; how it is called, with a complete plugin:
docs/guides/add-component.md.
"""

from __future__ import annotations

import functools
import inspect
from typing import Sequence

import torch

from values_seg.orientation import HIGHER_IS_UNCERTAIN
from values_seg.params import params_of, validate

#: The measure column of a sample-based aggregation's rows (``reads_samples``).
SAMPLES = "samples"


class Aggregation:
    needs_prediction: bool = False
    #: fitted or scored on the foreground (the classes but a background): runs only on datasets
    #: that have a background class (:attr:`values_seg.components.dataset.Dataset.background`; rule
    #: ``rules.aggregation_needs_background``)
    needs_background: bool = False
    #: scores the samples ``[S, C, *spatial]`` (``agg(samples)``), not a measure's map; needs at
    #: least two samples (the sweep leaves it out for a model that predicts one); not fitted
    reads_samples: bool = False
    #: what ``fit`` needs besides the validation maps and predictions, passed as keywords of the
    #: same names: ``"risks"`` (each validation case's failure risk, 1 - its Dice, eq. 4),
    #: ``"ood"`` (each validation case's OoD flag), ``"scores"`` (each validation case's scores of
    #: the measure's map aggregations that learn nothing beyond the maps, ``(names, array [N, A])``;
    #: at test time it picks the same names from the case's scores); an aggregation that fits on
    #: scores is a meta-aggregation, also called with the case's scores:
    #: ``agg(umap, prediction=labels, scores={name: score})``
    fit_needs: tuple[str, ...] = ()
    #: which way the score orders the cases (:mod:`values_seg.orientation`): higher = more
    #: uncertain (the default), or ``LOWER_IS_UNCERTAIN`` (inverted)
    orientation: str = HIGHER_IS_UNCERTAIN

    def __init_subclass__(cls, **kwargs) -> None:
        """Parameters are validated and coerced to their annotated types however the class is built
        (through the registry or directly): ``PatchAggregation(size="ten")`` is a clear ``ValueError``."""
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None or getattr(init, "__values_seg_checked__", False):
            return
        signature = inspect.signature(init)

        @functools.wraps(init)
        def checked(self, *args, **kw):
            given = dict(signature.bind(self, *args, **kw).arguments)
            given.pop(next(iter(signature.parameters)))  # self
            owner = f"aggregation {getattr(cls, 'name', cls.__name__)!r}"
            init(self, **validate(owner, params_of(cls), given))

        checked.__values_seg_checked__ = True
        cls.__init__ = checked

    def fit(self, maps: Sequence[torch.Tensor], predictions: Sequence[torch.Tensor]) -> "Aggregation":
        return self

    def __call__(self, umap: torch.Tensor, prediction: torch.Tensor | None = None) -> float:
        raise NotImplementedError

    @classmethod
    def score_many(cls, instances: Sequence["Aggregation"], maps: torch.Tensor, prediction=None) -> list[float]:
        """Score ``maps[i]`` (a stack ``[M, *spatial]``, one map per measure) with ``instances[i]``.

        The fused evaluation calls this once per aggregation and case; override it to vectorise
        over the stack. The default calls each instance on its map.
        """
        return [aggregate(inst, m, prediction) for inst, m in zip(instances, maps)]

    def state(self) -> dict:
        """Fitted state (attributes ending in ``_``), for saving with results."""
        return {k: v for k, v in vars(self).items() if k.endswith("_") and not k.startswith("_")}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.endswith("_") and not k.startswith("_"))
        return f"{type(self).__name__}({args})"


def reads_samples(agg) -> bool:
    """Whether an aggregation (class or instance) scores the samples instead of a map."""
    return bool(getattr(agg, "reads_samples", False))


def reads_scores(agg) -> bool:
    """Whether an aggregation (class or instance) scores the other aggregations' scores (a meta-aggregation)."""
    return "scores" in tuple(getattr(agg, "fit_needs", ()))


def aggregate(agg, umap: torch.Tensor, prediction: torch.Tensor | None = None) -> float:
    """``agg(umap)``, with the predicted label map for aggregations that declare ``needs_prediction``."""
    if getattr(agg, "needs_prediction", False):
        return agg(umap, prediction=prediction)
    return agg(umap)


def as_map(umap, where: str = "aggregation") -> torch.Tensor:
    """A floating-point tensor view of an uncertainty map, rejecting empty or non-finite input."""
    t = torch.as_tensor(umap)
    if not t.is_floating_point():
        t = t.to(torch.float32)
    if t.ndim not in (2, 3) or t.numel() == 0:
        raise ValueError(f"{where}: uncertainty map must be a non-empty 2D or 3D map, got shape {tuple(t.shape)}")
    if not bool(torch.isfinite(t.sum())) and not bool(torch.isfinite(t).all()):  # fast path: a finite sum
        raise ValueError(f"{where}: uncertainty map contains NaN or infinite values")
    return t


def as_prediction(prediction, shape: tuple[int, ...], where: str) -> torch.Tensor:
    """The predicted label map for an aggregation that needs one, checked against the map's shape."""
    if prediction is None:
        raise ValueError(f"{where}: needs the predicted segmentation: call it as agg(umap, prediction=labels)")
    p = torch.as_tensor(prediction)
    if tuple(p.shape) != tuple(shape):
        raise ValueError(f"{where}: prediction shape {tuple(p.shape)} does not match map shape {tuple(shape)}")
    return p


def region_mean(u: torch.Tensor, region: torch.Tensor, empty_value: float | None) -> float:
    """Mean of ``u`` over the boolean ``region``; for an empty region the image mean, or
    ``empty_value`` when one is set (the defined value of region-based aggregations)."""
    if bool(region.any()):
        return float(u[region].mean())
    return float(u.mean()) if empty_value is None else float(empty_value)
