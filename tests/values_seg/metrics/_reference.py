"""Independent float64 reference implementations used by the metric tests (plain loops, no vectorisation)."""

import numpy as np


def ref_dice(prediction, reference, ignore_index=None) -> float:
    """Eq. 2, macro average over foreground classes present in either mask, 1.0 if none present."""
    p = np.asarray(prediction).ravel()
    r = np.asarray(reference).ravel()
    if ignore_index is not None:
        keep = r != ignore_index
        p, r = p[keep], r[keep]
    classes = sorted((set(p.tolist()) | set(r.tolist())) - {0})
    scores = []
    for c in classes:
        tp = np.sum((p == c) & (r == c))
        scores.append(2.0 * tp / (np.sum(p == c) + np.sum(r == c)))
    return float(np.mean(scores)) if scores else 1.0
