"""C1 ``deterministic``: one softmax prediction of one trained network."""

from __future__ import annotations

from values_seg import hookimpl
from values_seg.components.prediction_model import PredictionModel, softmax_probs


class Deterministic(PredictionModel):
    """Deterministic softmax network: one sample per case (predictive uncertainty only)."""

    name = "deterministic"
    label = "Determ."
    family = "deterministic"
    num_samples = 1

    def predict(self, networks, image):
        return softmax_probs(networks[0](image[None]))


@hookimpl
def values_seg_prediction_models():
    return [Deterministic]
