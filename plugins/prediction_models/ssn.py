"""C1 ``ssn``: stochastic segmentation network (Monteiro et al. 2020)."""

from __future__ import annotations

from typing import Literal

from values_seg import hookimpl
from values_seg.engine.networks import SSNNetwork
from values_seg.engine.specs import Head
from values_seg.prediction_model import PredictionModel


class SSN(PredictionModel):
    """Stochastic segmentation network: low-rank Gaussian over the logits, num_samples softmaxed samples.

    Training: the backbone emits the mean, the log-diagonal and a rank-``rank`` factor of the
    covariance; loss ``-logsumexp_m log p(y | eta_m) + log M`` over ``mc_samples`` Monte-Carlo
    samples, after ``pretrain_epochs`` epochs training only the mean. The optimiser parameters
    override the recipe's when set (paper, GTA5/Cityscapes: RMSprop, lr 1e-4, weight decay 5e-4,
    momentum 0.6).
    """

    name = "ssn"
    family = "variability"

    def __init__(
        self,
        rank: int = 5,
        num_samples: int = 10,
        mc_samples: int = 20,
        pretrain_epochs: int = 5,
        optimizer: Literal["adam", "sgd", "rmsprop"] | None = None,
        lr: float | None = None,
        weight_decay: float | None = None,
        momentum: float | None = None,
    ):
        if rank < 1 or num_samples < 1 or mc_samples < 1 or pretrain_epochs < 0:
            raise ValueError("ssn: rank, num_samples, mc_samples >= 1 and pretrain_epochs >= 0 required")
        self.rank = rank
        self.num_samples = num_samples
        self.mc_samples = mc_samples
        self.pretrain_epochs = pretrain_epochs
        self.optimizer = optimizer
        self.lr = lr
        self.weight_decay = weight_decay
        self.momentum = momentum

    def training_specs(self, base):
        overrides = {k: getattr(self, k) for k in ("optimizer", "lr", "weight_decay", "momentum") if getattr(self, k) is not None}
        recipe = base.recipe.replace(loss="ssn", **overrides)
        head = Head.ssn(rank=self.rank, mc_samples=self.mc_samples, pretrain_epochs=self.pretrain_epochs)
        return [base.replace(head=head, recipe=recipe)]

    def predict(self, networks, image):
        net = networks[0]
        if not isinstance(net, SSNNetwork):
            raise TypeError(f"ssn: expected an SSN network, got {type(net).__name__}")
        logits = net.sample_logits(image[None], self.num_samples)[:, 0]  # [S, C, *spatial]
        return logits.float().softmax(dim=1)


@hookimpl
def values_seg_prediction_models():
    return [SSN]
