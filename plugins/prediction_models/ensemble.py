"""C1 ``ensemble``: deep ensemble of independently seeded trainings (Lakshminarayanan et al. 2017).

How its members are seeded: docs/statistics.md, "Comparisons you can trust" (how ensembles are seeded).
"""

from __future__ import annotations

from typing import Annotated

import torch

from values_seg import hookimpl
from values_seg.params import Range
from values_seg.components.prediction_model import PredictionModel, members_forward, softmax_probs


class Ensemble(PredictionModel):
    """Deep ensemble: members trained with seeds seed*members .. seed*members+members-1, one sample each."""

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
        return [base.replace(seed=seed) for seed in member_seeds(base.seed, self.members)]

    def predict(self, networks, image):
        if len(networks) != self.members:
            raise ValueError(f"ensemble: expected {self.members} networks, got {len(networks)}")
        return softmax_probs(members_forward(networks, image[None]))  # one vectorised forward


def member_seeds(seed: int, members: int) -> list[int]:
    """Training seeds of the ensemble of run seed ``seed``: its own block ``seed*members + i``."""
    return [seed * members + i for i in range(members)]


@hookimpl
def values_seg_prediction_models():
    return [Ensemble]
