"""Active learning (paper appendix A.4, eq. 9-10)."""

from __future__ import annotations

import numpy as np

__all__ = ["al_improvement"]


def al_improvement(dice_first, dice_method, dice_random) -> float:
    """Relative improvement over random querying: ``C_method - C_random`` (eq. 10).

    ``C = (Dice_t2 - Dice_t1) / Dice_t1`` (eq. 9) with ``Dice_t1 = dice_first`` (the first cycle)
    and ``Dice_t2`` the next cycle after querying with the method (``dice_method``) or at random
    (``dice_random``); all on the OoD test set.
    """
    values = []
    for name, v in (("dice_first", dice_first), ("dice_method", dice_method), ("dice_random", dice_random)):
        try:
            f = float(np.asarray(v, dtype=np.float64).item())
        except (TypeError, ValueError):
            raise ValueError(f"al_improvement: {name} must be a single number, got {v!r}") from None
        if not np.isfinite(f):
            raise ValueError(f"al_improvement: {name} must be finite, got {f}")
        values.append(f)
    df, dm, dr = values
    if df == 0:
        raise ValueError("al_improvement: dice_first is 0, the relative change (eq. 9) is undefined")
    return (dm - df) / df - (dr - df) / df
