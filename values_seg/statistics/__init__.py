"""Statistics to trust a comparison: bootstrap intervals over test cases, paired differences,
ranking stability.

Modules: :mod:`.bootstrap` (seeded, optionally stratified resampling indices, percentile
intervals, the paired bootstrap with its p-value), :mod:`.batched` (the task metrics on many
resamples at once: ``batched.aurc(indices, risks, confidences)`` etc.), :mod:`.rank_stability`
(rank histograms, Kendall's τ), :mod:`.multiple` (p-values adjusted over a family of tests:
Benjamini-Hochberg, Holm), :mod:`.resamples` (the resamples of one data set's test cases
that every method shares, and the two-level bootstrap over seeds).

    from functools import partial
    from values_seg.statistics import batched, bootstrap, paired_bootstrap
    ci = bootstrap(partial(batched.aurc, risks=r, confidences=c), len(r))
    cmp = paired_bootstrap(partial(batched.auroc, is_ood=y, uncertainty=s1),
                           partial(batched.auroc, is_ood=y, uncertainty=s2), len(y), strata=y)
"""

from values_seg.statistics import batched
from values_seg.statistics.bootstrap import (
    BootstrapResult,
    PairedBootstrapResult,
    bootstrap,
    bootstrap_indices,
    paired_bootstrap,
    paired_p_value,
    paired_result,
    percentile_interval,
    resample_counts,
)
from values_seg.statistics.multiple import adjust, family_method
from values_seg.statistics.rank_stability import RankStability, kendall_tau, rank_stability, ranks
from values_seg.statistics.resamples import CaseResamples, mean_over_seeds, seed_indices

__all__ = [
    "batched",
    "bootstrap_indices",
    "resample_counts",
    "percentile_interval",
    "BootstrapResult",
    "bootstrap",
    "PairedBootstrapResult",
    "paired_bootstrap",
    "paired_p_value",
    "paired_result",
    "adjust",
    "family_method",
    "CaseResamples",
    "seed_indices",
    "mean_over_seeds",
    "ranks",
    "RankStability",
    "rank_stability",
    "kendall_tau",
]
