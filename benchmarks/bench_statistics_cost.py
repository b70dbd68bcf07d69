"""What the trustworthy-comparison features cost the quick toy study (issue 14): the whole first
run (``values-seg run``: training, evaluation, scoring, report) with every statistic on, against
the same run with them off, in one session, alternating A/B so that drifting load hits both alike.

"Off" is ``statistics.n_resamples=0`` (no bootstrap intervals, paired comparisons or rank
statistics) and the task list without ``ndsc_retention`` and ``dice_retention``. AUGRC/E-AUGRC and
the calibration reference values are part of their tasks and stay on in both (they are computed
from the per-case values and histograms the fused evaluation keeps anyway).

    python benchmarks/bench_statistics_cost.py [--config experiments/toy_quick.yaml] [--repeats 2]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[1]
STATISTICS_TASKS = ("ndsc_retention", "dice_retention")


def run_once(config: str, out: Path, overrides: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "values_seg.cli", "run", config, *overrides, "--out", str(out),
                    "--no-progress"], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="experiments/toy_quick.yaml")
    parser.add_argument("--repeats", type=int, default=2, help="fresh runs per side (alternating)")
    args = parser.parse_args()
    tasks = [t if isinstance(t, str) else t["name"] for t in OmegaConf.load(ROOT / args.config).tasks]
    plain = [t for t in tasks if t not in STATISTICS_TASKS]
    sides = {
        "statistics off": ["statistics.n_resamples=0", f"tasks=[{','.join(plain)}]"],
        "statistics on": [],
    }
    walls: dict[str, list[float]] = {side: [] for side in sides}
    tmp = Path(tempfile.mkdtemp(prefix="bench_stats_"))
    try:
        for repeat in range(args.repeats):
            for side, overrides in sides.items():
                out = tmp / f"{side.replace(' ', '_')}_{repeat}"
                walls[side].append(run_once(args.config, out, overrides))
                print(f"{side:15s} run {repeat + 1}: {walls[side][-1]:6.1f} s", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    off, on = (float(np.median(walls[side])) for side in sides)
    print(f"median wall time, statistics off: {off:6.1f} s")
    print(f"median wall time, statistics on:  {on:6.1f} s  ({100 * (on / off - 1):+.1f} %)")


if __name__ == "__main__":
    main()
