"""Which way an aggregation's score orders the cases (:attr:`values_seg.components.aggregation.Aggregation.orientation`).

The C3 contract's score is higher where the map is more uncertain; a statistic that is naturally
the other way round (Geary's C: 0 for a clustered map, 1 for a random one) declares itself
inverted, and the report reads it as such. Rationale: docs/statistics.md, "The aggregation verdict".
"""

from __future__ import annotations

HIGHER_IS_UNCERTAIN = "higher_is_uncertain"
LOWER_IS_UNCERTAIN = "lower_is_uncertain"
ORIENTATIONS = (HIGHER_IS_UNCERTAIN, LOWER_IS_UNCERTAIN)


def orientation(agg, where: str = "aggregation") -> str:
    """The declared orientation of an aggregation (class, instance or function; the usual
    :data:`HIGHER_IS_UNCERTAIN` where it declares none); ``ValueError`` for any other value."""
    value = getattr(agg, "orientation", HIGHER_IS_UNCERTAIN)
    if value not in ORIENTATIONS:
        raise ValueError(f"{where}: orientation must be one of {', '.join(map(repr, ORIENTATIONS))}, got {value!r}")
    return value
