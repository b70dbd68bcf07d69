"""What the trustworthy-comparison features cost the quick toy study (issue 14): the whole first
run (``values-seg run``: training, evaluation, scoring, report) with every statistic on, against
the same run with them off, in one session.

Training does not depend on the statistics (its cache keys do not contain them), and its wall time
varies by several seconds from run to run, more than the statistics cost. So the networks are
trained once (the first run, statistics on, timed as a whole), and the A/B runs, alternating so
that drifting load hits both sides alike, start from a copy of its checkpoints and do everything
else afresh (prediction, evaluation, active learning, scoring, report). The growth of the whole
first run is (on - off) / (training + off), training = first run - median of the "on" runs.

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


def run_once(config: str, out: Path, overrides: list[str], checkpoints: Path | None = None) -> float:
    """Wall seconds of one run into the fresh ``out`` (its cache seeded with ``checkpoints``)."""
    cache = out.parent / f"{out.name}_cache"
    if checkpoints is not None:
        shutil.copytree(checkpoints, cache / "checkpoints")
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "values_seg.cli", "run", config, *overrides, f"cache_dir={cache}",
                    "--out", str(out), "--no-progress"], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="experiments/toy_quick.yaml")
    parser.add_argument("--repeats", type=int, default=3, help="runs per side after the first (alternating)")
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
        first = run_once(args.config, tmp / "first", [])
        print(f"first run, statistics on, training included: {first:6.1f} s", flush=True)
        checkpoints = tmp / "first_cache" / "checkpoints"
        for repeat in range(args.repeats):
            for side, overrides in sides.items():
                out = tmp / f"{side.replace(' ', '_')}_{repeat}"
                walls[side].append(run_once(args.config, out, overrides, checkpoints))
                print(f"{side:15s} run {repeat + 1} (trained networks reused): {walls[side][-1]:6.1f} s", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    off, on = (float(np.median(walls[side])) for side in sides)
    training = first - on
    print(f"median without training, statistics off: {off:6.1f} s")
    print(f"median without training, statistics on:  {on:6.1f} s  (+{on - off:.1f} s)")
    print(f"training (first run - median on):         {training:6.1f} s")
    print(f"whole first run, statistics off -> on:    {training + off:6.1f} s -> {training + on:6.1f} s "
          f"({100 * (on - off) / (training + off):+.1f} %)")


if __name__ == "__main__":
    main()
