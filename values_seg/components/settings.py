"""The evaluation settings: one frozen value with every default in one place
(docs/design-rationale.md, "The case context and the evaluation settings").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Iterator

#: when a predicted lesion is a TP: its largest IoU above ``lesion_iou`` ("above") or at least at it ("at_least")
LESION_IOU_RULES = ("above", "at_least")


@dataclass(frozen=True)
class EvaluationSettings(Mapping):
    """``n_bins``: ACE bins (appendix A.5); ``montage_cases``: cases per subset (i.i.d. and OoD) and
    combination kept for the montage figure; ``prediction_dtype``: the dtype the prediction cache
    stores samples in (``float16`` or ``float32``); ``ndsc_r``: the reference lesion load of the nDSC
    (Shifts 2.0) for the retention curves; ``lesion_connectivity`` (face, edge or vertex) and
    ``lesion_iou``: what a lesion is and when a predicted one is found (Shifts 2.0, C.2.2);
    ``lesion_iou_rule``: a lesion at IoU exactly ``lesion_iou`` is a TP under ``at_least`` (IoU ≥,
    the Shifts authors' code), an FP (and the reference lesion an FN) under ``above`` (IoU >);
    ``threads``: CPU threads of every job (CPU results depend on it)."""

    n_bins: int = 20
    montage_cases: int = 3
    prediction_dtype: str = "float16"
    ndsc_r: float = 0.001
    lesion_connectivity: str = "face"
    lesion_iou: float = 0.5
    lesion_iou_rule: str = "above"
    threads: int = 1

    @classmethod
    def of(cls, settings: Mapping[str, Any] | None = None) -> "EvaluationSettings":
        """From a mapping (e.g. the config section, or an older ``dict``); missing keys (and keys
        set to ``None``) take the defaults, unknown keys are an error that names the valid ones."""
        if isinstance(settings, cls):
            return settings
        given = {k: v for k, v in dict(settings or {}).items() if v is not None}
        names = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise ValueError(f"evaluation settings: unknown key(s) {unknown}; valid keys: {', '.join(names)}")
        types = {f.name: type(f.default) for f in dataclasses.fields(cls)}
        return cls(**{k: types[k](v) for k, v in given.items()})

    def __getitem__(self, key: str) -> Any:
        if key not in self._names():
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    @classmethod
    def _names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
