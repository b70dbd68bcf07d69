"""C1 ``test_time_dropout``: Monte-Carlo dropout (Gal & Ghahramani 2016)."""

from __future__ import annotations

from typing import Annotated

from values_seg import hookimpl
from values_seg.params import Range
from values_seg.components.prediction_model import PredictionModel, batched_forward, enable_dropout, softmax_probs


class TestTimeDropout(PredictionModel):
    """Test-time (Monte-Carlo) dropout: dropout p after every conv block, kept on for num_samples passes."""

    name = "test_time_dropout"
    label = "TTD"
    family = "bayesian"
    __test__ = False  # not a pytest class

    def __init__(self, p: float = 0.5, num_samples: Annotated[int, Range(1, 1000)] = 10):
        if not 0.0 < p < 1.0:
            raise ValueError(f"test_time_dropout: p must lie in (0, 1), got {p}")
        if num_samples < 1:
            raise ValueError(f"test_time_dropout: num_samples must be >= 1, got {num_samples}")
        self.p = p
        self.num_samples = num_samples

    def training_specs(self, base):
        return [base.replace(dropout=self.p)]

    def predict(self, networks, image):
        net = networks[0]
        was_training = net.training
        net.eval()
        if enable_dropout(net) == 0:
            raise ValueError("test_time_dropout: the network has no dropout layers")
        try:
            x = image[None].expand(self.num_samples, *image.shape)
            return softmax_probs(batched_forward(net, x, self.max_batch))
        finally:
            net.train(was_training)  # back to all-eval (or all-train) mode


@hookimpl
def values_seg_prediction_models():
    return [TestTimeDropout]
