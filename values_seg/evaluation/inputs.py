"""The evaluation stage's declared inputs: one combination, the evaluation settings, the per-case
quantities computed and the extra splits scored. Its cache key and folder follow from them
(:mod:`values_seg.storage.artifact`): the combination with every label that names its outputs, the
settings (``threads`` and ``prediction_dtype`` included), the key of the samples it reads, and
the code of its dataset, measures, aggregations, quantities and of the evaluation stage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from values_seg.storage.artifact import Inputs
from values_seg.components.quantity import resolve
from values_seg.storage.run_files import EVALUATIONS
from values_seg.components.settings import EvaluationSettings
from values_seg.config.sweep import Combination

EVALUATION_VERSION = 8  # bump when the stored evaluation changes (8: case meta "exchangeable"; no in-sample val scores)


@dataclass(frozen=True)
class EvaluationInputs(Inputs):
    """What one combination's evaluation is computed from."""

    stage = "evaluation"
    version = EVALUATION_VERSION
    folder = EVALUATIONS

    combination: Combination
    settings: EvaluationSettings
    quantities: tuple[str, ...]  # sorted, distinct
    splits: tuple[str, ...] = ()  # extra splits scored (e.g. active learning's pool), sorted, distinct

    @classmethod
    def of(cls, combination: Combination, settings: Mapping | None, quantities: Iterable[str],
           splits: Iterable[str] = ()) -> "EvaluationInputs":
        return cls(combination, EvaluationSettings.of(settings), tuple(sorted(set(quantities))),
                   tuple(sorted(set(splits))))

    def derived(self) -> dict:
        from values_seg.engine import prediction_key

        c = self.combination
        return {"prediction": prediction_key(c.model.create(), c.specs, self.settings.threads)}

    def code(self) -> tuple:
        c = self.combination
        return (c.dataset.component().obj, *(m.component().obj for m, _ in c.measures),
                *(a.component().obj for a in c.aggregations),
                *(type(q) for q in resolve(self.quantities).values()))
