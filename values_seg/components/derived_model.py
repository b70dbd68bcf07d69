"""The contract of a derived prediction model: one whose samples are a transform of another model's
samples, fitted on that model's validation split (a post-hoc recalibration). It trains nothing:
its trainings are the wrapped model's; the engine fits and applies it (:mod:`values_seg.engine.derived`).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch
from torch import nn

from values_seg.components.prediction_model import PredictionModel


class DerivedModel(PredictionModel):
    """Base of a derived model: a subclass builds the model it wraps (:meth:`wrap`) in ``__init__``
    and implements :meth:`fit` and :meth:`transform`. It takes the wrapped model's family, trainings
    (the same specs, so the same checkpoints: nothing is trained twice), number of samples and
    whether it uses the config's backbones; its cache identity is its own parameters but those that
    name the wrapped model, which enters its keys by its prediction key."""

    #: the parameters that name the wrapped model (left out of :meth:`cache_identity`): the first its
    #: registered name, the second (optional) its parameters; the config's checks read them before
    #: building anything (e.g. whether the sweep needs backbones)
    wrapping_params: tuple[str, ...] = ()

    def wrap(self, model: PredictionModel) -> None:
        """Wrap ``model``: its family and its use of the backbones become this model's."""
        if not isinstance(model, PredictionModel):
            raise TypeError(f"{self.name}: can wrap a prediction model, got {type(model).__name__}")
        self.wrapped = model
        self.family = model.family
        self.uses_backbone = model.uses_backbone

    def training_specs(self, base):
        return self.wrapped.training_specs(base)

    @property
    def num_samples_predicted(self) -> int | None:
        return self.wrapped.num_samples_predicted

    def fit(self, cases) -> Any:
        """The fitted state (JSON data) from the validation cases, a
        :class:`values_seg.engine.derived.FitCases`: ``(case id, samples, raters)`` one at a time, with
        the data set's ``num_classes`` and ``ignore_index``. Deterministic; a ``ValueError`` where the
        cases do not determine it (the combination then fails, saying why)."""
        raise NotImplementedError

    def transform(self, samples: torch.Tensor, fitted: Any) -> torch.Tensor:
        """The samples ``[S, C, *spatial]`` of one case from the wrapped model's, with the state of
        :meth:`fit` as its JSON reads back."""
        raise NotImplementedError

    def predict(self, networks: Sequence[nn.Module], image: torch.Tensor) -> torch.Tensor:
        raise TypeError(f"{self.name} predicts from {self.wrapped.name}'s cached samples, not from networks: "
                        "values_seg.engine.predict_split makes its samples")

    def predict_case(self, networks, case, device):
        return self.predict(networks, case.image)

    def cache_identity(self) -> dict[str, Any]:
        return {k: v for k, v in self.params().items() if k not in self.wrapping_params}
