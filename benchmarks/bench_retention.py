"""Voxel-level nDSC retention in the fused evaluation: one sort per map for every rater
(``metrics.ndsc_rauc_many``) against one ``metrics.ndsc_rauc`` call per (map, rater), in one run.

Workload per case: 4 uncertainty maps, 3 raters, a binary prediction; 2D 32x32 (the quick toy
study), 2D 256x256, 3D 64^3 (the paper's toy and LIDC crops). Both are checked to agree first.
Prints the median time of each and the ratio.

    python benchmarks/bench_retention.py [--repeats 5]
"""

from __future__ import annotations

import argparse

import numpy as np

from values_seg import metrics
from _timing import median_time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'case':12s} {'many ms':>9s} {'loop ms':>9s} {'loop/many':>10s}")
    for shape in ((32, 32), (256, 256), (64, 64, 64)):
        prediction = rng.random(shape) < 0.3
        raters = np.stack([rng.random(shape) < 0.3 for _ in range(3)])
        maps = rng.random((4, *shape)).astype(np.float32)

        def many():
            return metrics.ndsc_rauc_many(prediction, raters, maps)

        def loop():
            return np.array([[metrics.ndsc_rauc(prediction, g, u) for g in raters] for u in maps])

        np.testing.assert_allclose(many(), loop(), atol=1e-12)
        repeats = args.repeats if np.prod(shape) < 100_000 else max(1, args.repeats // 2)
        tm, tl = median_time(many, repeats), median_time(loop, repeats)
        print(f"{'x'.join(map(str, shape)):12s} {tm * 1e3:9.1f} {tl * 1e3:9.1f} {tl / tm:9.1f}x")


if __name__ == "__main__":
    main()
