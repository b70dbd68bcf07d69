"""C1 ``ensemble``: deep ensemble of independently seeded trainings (Lakshminarayanan et al. 2017)."""

from __future__ import annotations

from typing import Annotated

import torch

from values_seg import hookimpl
from values_seg.params import Range
from values_seg.prediction_model import PredictionModel, softmax_probs


class Ensemble(PredictionModel):
    """Deep ensemble: members trained with seeds seed..seed+members-1 (shared with deterministic), one sample each."""

    name = "ensemble"
    label = "Ensemble"
    family = "bayesian"

    def __init__(self, members: Annotated[int, Range(1, 100)] = 5):  # each member is one training
        if members < 1:
            raise ValueError(f"ensemble: members must be >= 1, got {members}")
        self.members = members

    @property
    def num_samples(self) -> int:
        return self.members

    def training_specs(self, base):
        return [base.replace(seed=base.seed + i) for i in range(self.members)]

    def predict(self, networks, image):
        if len(networks) != self.members:
            raise ValueError(f"ensemble: expected {self.members} networks, got {len(networks)}")
        return torch.cat([softmax_probs(net(image[None])) for net in networks])


@hookimpl
def values_seg_prediction_models():
    return [Ensemble]
