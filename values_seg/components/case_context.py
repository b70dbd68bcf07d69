"""What one case is evaluated in: the case, its data set, the typed evaluation settings and the
device of the fused pass (docs/design-rationale.md, "The case context and the evaluation settings").
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from values_seg.components.settings import EvaluationSettings


@dataclass(frozen=True)
class CaseContext:
    """``num_classes``: the data set's (``None``: the samples' ``C``); ``background``: the class Dice
    and GED leave out (``None``: none); ``ignore_index``: a rater's pixels with this label are left
    out of everything scored against that rater; ``reference_variance``: the exact per-pixel
    variance of the reference labels where the data set knows it
    (:attr:`values_seg.components.dataset.Case.reference_variance`); ``device``: where the sample statistics and
    the measures' maps are computed (``None``: where the samples are)."""

    case_id: str = "case"
    meta: Mapping[str, Any] = field(default_factory=dict)
    num_classes: int | None = None
    ignore_index: int | None = None
    background: int | None = 0
    reference_variance: Any = None
    settings: EvaluationSettings = field(default_factory=EvaluationSettings)
    device: Any = None  # torch.device | str | None

    def __post_init__(self) -> None:
        if not isinstance(self.settings, EvaluationSettings):
            raise TypeError(f"case context: settings must be an EvaluationSettings, got {type(self.settings).__name__} "
                            "(EvaluationSettings.of(mapping) builds one)")

    @classmethod
    def of_dataset(cls, dataset: Any, settings: EvaluationSettings, device: Any = None) -> "CaseContext":
        """The part every case of ``dataset`` (a :class:`values_seg.components.dataset.Dataset`) shares."""
        return cls(num_classes=dataset.num_classes, ignore_index=dataset.ignore_index, background=dataset.background,
                   settings=settings, device=device)

    def for_case(self, case_id: str, case: Any) -> "CaseContext":
        """This context for one loaded case (a :class:`values_seg.components.dataset.Case`)."""
        return replace(self, case_id=case_id, meta=case.meta, reference_variance=case.reference_variance)
