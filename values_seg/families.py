"""C1 families and the uncertainty types a C2 measure can stand for, both vocabularies in one place.

A prediction model declares its ``family``; a measure declares, per family, the type it stands for
(``{"bayesian": "EU", ...}``). The table: docs/concepts.md (paper eq. 1, appendices D and E).
"""

from __future__ import annotations

from typing import Mapping

#: C1 families: what a set of probability samples is a sample of.
FAMILIES = ("deterministic", "bayesian", "augmentation", "variability")
#: Predictive, aleatoric and epistemic uncertainty.
UNCERTAINTY_TYPES = ("PU", "AU", "EU")

#: The entropy family's rows of the table above, for measures to reuse.
ALL_PU = {f: "PU" for f in FAMILIES}
AU_LIKE = {"bayesian": "AU", "augmentation": "AU", "variability": "EU"}  # expected entropy
EU_LIKE = {"bayesian": "EU", "augmentation": "EU", "variability": "AU"}  # mutual information


def check_family(family: str, where: str) -> str:
    if family not in FAMILIES:
        raise ValueError(f"{where}: family must be one of {', '.join(FAMILIES)}, got {family!r}")
    return family


def check_types(mapping: Mapping[str, str], where: str) -> dict[str, str]:
    """A validated ``family -> uncertainty type`` mapping (a measure's declaration)."""
    if not isinstance(mapping, Mapping):
        raise ValueError(f"{where}: uncertainty_types must map a C1 family to PU/AU/EU, got {mapping!r}")
    for family, utype in mapping.items():
        check_family(family, where)
        if utype not in UNCERTAINTY_TYPES:
            raise ValueError(f"{where}: uncertainty type for {family!r} must be one of "
                             f"{', '.join(UNCERTAINTY_TYPES)}, got {utype!r}")
    return dict(mapping)
