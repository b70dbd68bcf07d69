"""Statistics to trust a comparison: bootstrap intervals over test cases, paired differences,
ranking stability.

How the runner and the report use them, with an example: docs/statistics.md; the modules:
docs/design-rationale.md, "Statistics".
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
