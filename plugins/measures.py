"""Built-in C2 uncertainty measures (paper section 2.1, eq. 1; appendices D, E; Shifts baselines).

Each maps probability samples ``[S, C, *spatial]`` to a map ``[*spatial]``, batched over samples
and classes. Natural logarithms, ``0 log 0 = 0``. The decorator declares which uncertainty type
a measure stands for under each prediction-model family (DESIGN.md's table).
"""

from __future__ import annotations

import torch

from values_seg import hookimpl
from values_seg.measure import as_compute_dtype, entropy, measure

ALL_PU = {f: "PU" for f in ("deterministic", "bayesian", "augmentation", "variability")}
#: Epistemic under a Bayesian/TTA reading, aleatoric for a variability variable (eq. 1, 15, 18).
EU_LIKE = {"bayesian": "EU", "augmentation": "EU", "variability": "AU"}
AU_LIKE = {"bayesian": "AU", "augmentation": "AU", "variability": "EU"}
#: Floor inside log for the KL-based measures, as in the Shifts baselines; otherwise +inf.
LOG_FLOOR = 1e-10


@measure(ALL_PU)
def predictive_entropy(samples: torch.Tensor) -> torch.Tensor:
    """Entropy of the mean prediction H(Y|x): predictive uncertainty (eq. 1)."""
    return entropy(as_compute_dtype(samples).mean(dim=0), dim=0)


@measure(AU_LIKE)
def expected_entropy(samples: torch.Tensor) -> torch.Tensor:
    """Mean entropy of the samples E[H(Y|w,x)]: AU (Bayesian, TTA) or EU (SSN) (eq. 1, 17, 19)."""
    return entropy(as_compute_dtype(samples), dim=1).mean(dim=0)


@measure(EU_LIKE)
def mutual_information(samples: torch.Tensor) -> torch.Tensor:
    """H(Y|x) - E[H(Y|w,x)]: EU (Bayesian, TTA) or AU (SSN) (eq. 1, 16, 20); clamped at 0."""
    p = as_compute_dtype(samples)
    return (entropy(p.mean(dim=0), dim=0) - entropy(p, dim=1).mean(dim=0)).clamp_min(0)


@measure({"deterministic": "PU"})
def max_softmax(samples: torch.Tensor) -> torch.Tensor:
    """1 - maximum softmax response of the mean prediction (MSR, section 4.2)."""
    return 1 - as_compute_dtype(samples).mean(dim=0).amax(dim=0)


def _mean_log(p: torch.Tensor) -> torch.Tensor:
    return torch.log(p.clamp_min(LOG_FLOOR)).mean(dim=0)


@measure(EU_LIKE)
def epkl(samples: torch.Tensor) -> torch.Tensor:
    """Expected pairwise KL divergence between samples (Malinin 2019; Shifts baselines)."""
    p = as_compute_dtype(samples)
    mean = p.mean(dim=0)
    cross = -(mean * _mean_log(p)).sum(dim=0)  # -sum_c pbar_c E_s[log p_sc]
    return (cross - entropy(p, dim=1).mean(dim=0)).clamp_min(0)


@measure(EU_LIKE)
def reverse_mutual_information(samples: torch.Tensor) -> torch.Tensor:
    """E_s[KL(pbar || p_s)] = EPKL - MI (Malinin et al. 2021; Shifts baselines)."""
    p = as_compute_dtype(samples)
    mean = p.mean(dim=0)
    cross = -(mean * _mean_log(p)).sum(dim=0)
    return (cross - entropy(mean, dim=0)).clamp_min(0)


@measure(EU_LIKE)
def softmax_variance(samples: torch.Tensor) -> torch.Tensor:
    """Variance of the class probabilities over samples, averaged over classes."""
    return as_compute_dtype(samples).var(dim=0, unbiased=False).mean(dim=0)


@hookimpl
def values_seg_measures():
    return [
        predictive_entropy,
        expected_entropy,
        mutual_information,
        max_softmax,
        epkl,
        reverse_mutual_information,
        softmax_variance,
    ]
