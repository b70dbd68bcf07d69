"""Downstream-task metrics of ValUES (paper appendix A): plain functions on numpy arrays or tensors.

Scalars come back as Python floats, curves and maps as numpy arrays. Each module cites the paper's
equation or the source it follows; the map of the modules: docs/design-rationale.md, "Metrics".
"""

from values_seg.metrics.active_learning import al_improvement
from values_seg.metrics.ambiguity import ged, ncc, ncc_many, rater_variance
from values_seg.metrics.calibration import (
    MIN_BIN_MASS,
    CalibrationBins,
    ReliabilityDiagram,
    ace,
    ace_bin_groups,
    ace_from_bins,
    calibration_bins,
    platt_apply,
    platt_fit,
    reliability_diagram,
)
from values_seg.metrics.calibration_reference import (
    CalibrationReference,
    ace_reference,
    coarsen_bins,
    zeta_score,
)
from values_seg.metrics.conformal import (
    crc_threshold,
    fnr,
    hoeffding_bentkus_p_value,
    ltt_multi_risk,
    ltt_selection_threshold,
    min_accepted_cases,
    min_calibration_cases,
    crc_effective_level,
)
from values_seg.metrics.lesion import LesionCounts, crps_empirical, lesion_counts, lesion_f1_retention
from values_seg.metrics.ranking import auprc, auroc, fpr_at_95_tpr
from values_seg.metrics.retention import (
    RetentionCurve,
    class_ndsc,
    class_ndsc_rauc_many,
    dice_retention_curve,
    ndsc,
    ndsc_rauc,
    ndsc_rauc_many,
    ndsc_retention_curve,
    retention_fractions,
    retention_rauc,
)
from values_seg.metrics.segmentation import (
    dice,
    dice_over_raters,
    dice_per_class,
    mean_dice_over_raters,
    pairwise_dice,
)
from values_seg.metrics.selective import (
    augrc,
    aurc,
    eaugrc,
    eaurc,
    generalized_risk_coverage_curve,
    risk_coverage_curve,
)

__all__ = [
    "dice",
    "dice_per_class",
    "dice_over_raters",
    "mean_dice_over_raters",
    "pairwise_dice",
    "ndsc",
    "retention_fractions",
    "ndsc_retention_curve",
    "ndsc_rauc",
    "ndsc_rauc_many",
    "class_ndsc",
    "class_ndsc_rauc_many",
    "retention_rauc",
    "RetentionCurve",
    "dice_retention_curve",
    "auroc",
    "auprc",
    "fpr_at_95_tpr",
    "risk_coverage_curve",
    "aurc",
    "eaurc",
    "generalized_risk_coverage_curve",
    "augrc",
    "eaugrc",
    "platt_fit",
    "platt_apply",
    "CalibrationBins",
    "calibration_bins",
    "ace",
    "ace_from_bins",
    "ace_bin_groups",
    "MIN_BIN_MASS",
    "ReliabilityDiagram",
    "reliability_diagram",
    "coarsen_bins",
    "CalibrationReference",
    "ace_reference",
    "zeta_score",
    "rater_variance",
    "ncc",
    "ncc_many",
    "ged",
    "al_improvement",
    "crc_threshold",
    "fnr",
    "min_calibration_cases",
    "crc_effective_level",
    "hoeffding_bentkus_p_value",
    "min_accepted_cases",
    "ltt_multi_risk",
    "ltt_selection_threshold",
    "LesionCounts",
    "lesion_counts",
    "lesion_f1_retention",
    "crps_empirical",
]
