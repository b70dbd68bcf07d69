"""Multiple comparisons: adjusted p-values over a family of tests (Benjamini-Hochberg, Holm).

What each controls and when each is picked: docs/design-rationale.md, "Multiple comparisons".
"""

from __future__ import annotations

import numpy as np

__all__ = ["BH", "HOLM", "METHOD_NAMES", "SMALL_FAMILY", "adjust", "family_method"]

BH, HOLM = "bh", "holm"
#: How the output names each method (what it controls).
METHOD_NAMES = {BH: "Benjamini–Hochberg (false discovery rate)", HOLM: "Holm (family-wise error rate)"}
#: Families of at most this many tests are corrected by Holm, larger ones by Benjamini-Hochberg.
SMALL_FAMILY = 10


def family_method(n_tests: int) -> str:
    """:data:`HOLM` for a family of at most :data:`SMALL_FAMILY` tests, else :data:`BH`."""
    return HOLM if n_tests <= SMALL_FAMILY else BH


def adjust(p_values, method: str = BH) -> np.ndarray:
    """Adjusted p-values of one family (``[m]``), in the input's order; NaN entries (no test) stay
    NaN and do not count in the family's size."""
    if method not in METHOD_NAMES:
        raise ValueError(f"adjust: method must be one of {', '.join(METHOD_NAMES)}, got {method!r}")
    p = np.asarray(p_values, dtype=np.float64).reshape(-1)
    tested = ~np.isnan(p)
    if ((p[tested] < 0) | (p[tested] > 1)).any():
        raise ValueError(f"adjust: p-values must lie in [0, 1], got {p[tested][(p[tested] < 0) | (p[tested] > 1)][:3]}")
    out = np.full(p.shape, np.nan)
    q = p[tested]
    m = q.size
    if m == 0:
        return out
    order = np.argsort(q, kind="stable")
    ranked = q[order]
    k = np.arange(1, m + 1)
    if method == BH:  # p_(k) m / k, made monotone from the largest down
        adjusted = np.minimum.accumulate((ranked * m / k)[::-1])[::-1]
    else:  # p_(k) (m - k + 1), made monotone from the smallest up
        adjusted = np.maximum.accumulate(ranked * (m - k + 1))
    back = np.empty(m)
    back[order] = np.minimum(adjusted, 1.0)
    out[tested] = back
    return out
