import torch

from values_seg import hookimpl, component


@component(label="FV", uncertainty_types={"bayesian": "EU", "augmentation": "EU", "variability": "AU"})
def foreground_variance(samples: torch.Tensor) -> torch.Tensor:
    """Variance of the foreground probabilities over the samples, summed over the classes."""
    return samples[:, 1:].var(dim=0, unbiased=False).sum(dim=0)


@hookimpl
def values_seg_measures():
    return [foreground_variance]
