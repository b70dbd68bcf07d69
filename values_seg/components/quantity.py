"""Per-case quantities: what the fused evaluation computes from each case for the tasks.

The contract (the kinds, validation splits and fits): docs/design-rationale.md,
"Per-case quantities"; an example: docs/guides/add-component.md, "Add a per-case quantity".
"""

from __future__ import annotations

from typing import Any, Callable, ClassVar, Iterable, Mapping, Sequence

import numpy as np
import torch

from values_seg.components.case_context import CaseContext
from values_seg.components.measure import SampleStatistics
from values_seg.components.settings import EvaluationSettings
from values_seg.components.unchanged import Unchanged, read_only

#: What a quantity may declare in ``needs``: "samples" (the probability samples ``[S, C, *spatial]``,
#: their :class:`~values_seg.components.measure.SampleStatistics` and each sample's labels), "maps" (the
#: measures' maps ``[M, *spatial]`` with their names), "prediction" (the label map of the mean
#: prediction), "references" (the rater masks ``[R, *spatial]`` and the exact reference variance
#: where the data set knows it), "meta" (the case's metadata). Always readable: ``case_id``, the
#: data set's ``num_classes``, ``ignore_index``, ``background`` and the ``evaluation`` ``settings``
#: (:class:`~values_seg.components.settings.EvaluationSettings`, every field set: ``case.settings.n_bins``).
NEEDS = ("samples", "maps", "prediction", "references", "meta")

#: attribute of a :class:`CaseView` -> the needs that give access to it
_ACCESS = {
    "samples": ("samples",), "stats": ("samples",), "sample_labels": ("samples",),
    "maps": ("maps",), "measures": ("maps",),
    "prediction": ("prediction",),
    "raters": ("references",), "reference_variance": ("references",),
    "agreement": ("prediction", "references"),
    "meta": ("meta",),
}


class Quantity:
    """Base class of per-case quantities (see the module docstring)."""

    name: ClassVar[str] = "quantity"
    label: ClassVar[str] = ""
    needs: ClassVar[tuple[str, ...]] = ()
    per_measure: ClassVar[bool] = False
    payload: ClassVar[bool] = False
    #: a run-directory table (file name) built from the stored output by :meth:`table_rows`
    table: ClassVar[str | None] = None
    #: the splits whose cases it is computed on: always "test"; with "val" also every validation case
    #: (in the fit's pass, scored with the fitted aggregations; rows of split "val", payload entries first)
    splits: ClassVar[tuple[str, ...]] = ("test",)

    def compute(self, case: "CaseView", fitted: Any = None) -> Any:
        raise NotImplementedError

    def fit_case(self, case: "CaseView") -> Any:
        """A mergeable summary of one validation case (per measure: a list in ``case.measures`` order)."""
        raise NotImplementedError

    def fit(self, summary: Any) -> Any:
        """The fitted state from the merged summaries (of one measure, for a per-measure quantity)."""
        raise NotImplementedError

    def save(self, entries: list, measures: Sequence[str], settings: EvaluationSettings) -> dict[str, bytes]:
        """The stored output of a payload quantity: file name -> content (kept in the evaluation's folder)."""
        raise NotImplementedError

    def load(self, files: Mapping[str, bytes]) -> Any:
        """What the tasks read (``EvaluationResult.output(name)``) from the files of :meth:`save`."""
        raise NotImplementedError

    def table_rows(self, output: Any) -> list[dict]:
        """Rows of :attr:`table` (each with a ``measure``) from the stored output."""
        return []

    @classmethod
    def check(cls, source: str) -> None:
        """The declaration is valid (the registry calls this on registration); ``ValueError`` saying
        what is wrong otherwise."""
        bad = [n for n in cls.needs if n not in NEEDS]
        if bad:
            raise ValueError(f"{source}: quantity {cls.name!r} needs unknown input(s) {bad}; known: {', '.join(NEEDS)}")
        if cls.payload and not cls.per_measure:
            raise ValueError(f"{source}: quantity {cls.name!r}: a payload quantity must be per_measure")
        if "test" not in cls.splits or set(cls.splits) - {"val", "test"}:
            raise ValueError(f"{source}: quantity {cls.name!r}: splits must be ('test',) or ('val', 'test'), "
                             f"got {cls.splits!r}")
        if "val" in cls.splits and cls.fits():
            raise ValueError(f"{source}: quantity {cls.name!r}: a quantity computed on the validation cases "
                             f"cannot have a validation part (fit) itself")
        if "val" in cls.splits and cls.per_measure and not cls.payload:
            raise ValueError(f"{source}: quantity {cls.name!r}: on the validation split only a per-case value or "
                             f"a payload is kept, not a per-measure column")

    @classmethod
    def fits(cls) -> bool:
        """Whether the quantity has a validation part."""
        return cls.fit is not Quantity.fit


def resolve(names: Iterable[str], who: str = "") -> dict[str, Quantity]:
    """Quantity instances by name, in first-named order; an unknown name is a ``ValueError``
    listing the known ones."""
    from values_seg import registry

    known = registry.names("quantity")
    out: dict[str, Quantity] = {}
    for name in names:
        if name not in known:
            raise ValueError(f"{who or 'the sweep'} consumes unknown quantity {name!r}; "
                             f"known quantities: {', '.join(known)}")
        if name not in out:
            out[name] = registry.create("quantity", name)
    return out


class CaseInputs:
    """Everything of one case a quantity may read, each derived once and shared by all quantities."""

    def __init__(self, context: CaseContext, raters: torch.Tensor, stats: SampleStatistics,
                 prediction: torch.Tensor, maps: torch.Tensor | None, measures: Sequence[str]):
        """``context``: the case, its data set and the typed settings (``num_classes`` ``None``: the
        samples' ``C``); the rest as the fused pass derived them."""
        self.case_id, self.raters, self.stats = context.case_id, raters, stats
        self.prediction, self.maps, self.measures = prediction, maps, list(measures)
        self.meta, self.reference_variance = dict(context.meta), context.reference_variance
        self.num_classes = context.num_classes or stats.shape[1]
        self.ignore_index, self.background = context.ignore_index, context.background
        self.settings: EvaluationSettings = context.settings
        self._agreement = None
        self._sample_labels = None
        self._shared: dict[str, Any] = {}
        self.unchanged = Unchanged()  # what is derived here, shared by the quantities (none may change it)

    @property
    def samples(self) -> torch.Tensor:
        """The probability samples ``[S, C, *spatial]`` (made from the stored values when first asked for)."""
        return self.stats.samples

    @property
    def sample_labels(self) -> np.ndarray:
        """The class label map of each sample, ``[S, *spatial]``."""
        if self._sample_labels is None:
            self._sample_labels = read_only(self.stats.labels.numpy())
        return self._sample_labels

    def shared(self, key: str, derive: Callable[[], Any]) -> Any:
        """``derive()``, once per case under ``key``: what several quantities derive alike (e.g. the
        samples' volumes) is computed by the first that asks, from what its needs allow, and handed
        to the others as it is (NumPy arrays read-only). ``key`` names the derivation and everything
        it depends on beyond the case (a setting, a parameter); each quantity that asks must declare
        the needs the derivation reads."""
        if key not in self._shared:
            value = derive()
            self._shared[key] = read_only(value) if isinstance(value, np.ndarray) else value
        return self._shared[key]

    def agreement(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Per pixel, how many raters agree with the prediction, and how many label it (``None``:
        all of them, no rater marks it ``ignore_index``)."""
        if self._agreement is None:
            counted = torch.uint8 if len(self.raters) < 256 else torch.int64  # a quarter of the int64 sum's time
            n_correct = (self.raters == self.prediction).sum(dim=0, dtype=counted)
            n_valid = None
            if self.ignore_index is not None and bool((self.raters == self.ignore_index).any()):
                n_valid = (self.raters != self.ignore_index).sum(dim=0)
            self._agreement = (n_correct, n_valid)
            self.unchanged.add("agreement", n_correct)
            self.unchanged.add("raters labelling each pixel", n_valid)
        return self._agreement


class CaseView:
    """What one quantity may read of a case: the inputs its ``needs`` declare, plus ``case_id``,
    ``num_classes``, ``ignore_index``, ``background`` and ``settings``."""

    __slots__ = ("_inputs", "_needs", "_name")

    def __init__(self, inputs: CaseInputs, quantity: Quantity):
        self._inputs, self._needs, self._name = inputs, set(quantity.needs), quantity.name

    def __getattr__(self, attr: str):
        required = _ACCESS.get(attr, ())
        missing = [n for n in required if n not in self._needs]
        if missing:
            raise AttributeError(f"quantity {self._name!r} reads {attr!r} without declaring it: "
                                 f"add {missing} to its needs")
        return getattr(self._inputs, attr)
