"""Built-in C2 uncertainty measures (paper section 2.1, eq. 1; appendices D, E; Shifts baselines).

The conventions (natural logarithms, ``0 log 0 = 0``, shared statistics): docs/design-rationale.md,
"Measures".
"""

from __future__ import annotations

import torch

from values_seg import hookimpl
from values_seg.families import ALL_PU, AU_LIKE, EU_LIKE
from values_seg.components.measure import SampleStatistics, measure


@measure(ALL_PU, label="PE")
def predictive_entropy(stats: SampleStatistics) -> torch.Tensor:
    """Entropy of the mean prediction H(Y|x): predictive uncertainty (eq. 1)."""
    return stats.entropy_of_mean


@measure(AU_LIKE, label="EE")
def expected_entropy(stats: SampleStatistics) -> torch.Tensor:
    """Mean entropy of the samples E[H(Y|w,x)]: AU (Bayesian, TTA) or EU (SSN) (eq. 1, 17, 19)."""
    return stats.mean_entropy


@measure(EU_LIKE, label="MI")
def mutual_information(stats: SampleStatistics) -> torch.Tensor:
    """H(Y|x) - E[H(Y|w,x)]: EU (Bayesian, TTA) or AU (SSN) (eq. 1, 16, 20); clamped at 0."""
    return (stats.entropy_of_mean - stats.mean_entropy).clamp_min(0)


@measure({"deterministic": "PU"}, label="MSR")
def max_softmax(stats: SampleStatistics) -> torch.Tensor:
    """1 - maximum softmax response of the mean prediction (MSR, section 4.2)."""
    return 1 - stats.mean.amax(dim=0)


@measure(EU_LIKE, label="EPKL")
def epkl(stats: SampleStatistics) -> torch.Tensor:
    """Expected pairwise KL divergence between samples (Malinin 2019; Shifts baselines)."""
    return (stats.cross_entropy_to_samples - stats.mean_entropy).clamp_min(0)


@measure(EU_LIKE, label="RMI")
def reverse_mutual_information(stats: SampleStatistics) -> torch.Tensor:
    """E_s[KL(pbar || p_s)] = EPKL - MI (Malinin et al. 2021; Shifts baselines)."""
    return (stats.cross_entropy_to_samples - stats.entropy_of_mean).clamp_min(0)


@measure(EU_LIKE, label="SV")
def softmax_variance(stats: SampleStatistics) -> torch.Tensor:
    """Variance of the class probabilities over samples, averaged over classes."""
    return stats.samples.var(dim=0, unbiased=False).mean(dim=0)


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
