"""The quick toy study as a user runs it, timed end to end in one session (wall clock, the
``values-seg`` command including its start-up):

1. the first run into a fresh directory (training, evaluation, scoring, report);
2. a rerun with nothing to do;
3. the report built from scratch, figures drawn by parallel workers (the default), against the
   same build with one process (``VALUES_SEG_REPORT_WORKERS=1``) in this run: the ratio;
4. the report rebuilt with nothing changed (every figure kept).

    python benchmarks/bench_quick_study.py [--config experiments/toy_quick.yaml] [--out DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(*args: str, env: dict | None = None) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "values_seg.cli", *args], check=True, cwd=ROOT,
                   stdout=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    return time.perf_counter() - start


def fresh_report(run: Path, workers: str | None = None) -> float:
    """Build the report of ``run`` with no figure to keep (the figure index removed)."""
    (run / "figures" / "render.json").unlink(missing_ok=True)
    return timed("report", str(run), env={"VALUES_SEG_REPORT_WORKERS": workers} if workers else None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="experiments/toy_quick.yaml")
    parser.add_argument("--out", type=Path, help="run directory (default: a temporary one, removed at the end)")
    args = parser.parse_args()
    tmp = None if args.out else tempfile.mkdtemp(prefix="bench_quick_")
    run = args.out or Path(tmp) / "run"
    try:
        first = timed("run", args.config, "--out", str(run), "--no-progress")
        rerun = timed("run", args.config, "--out", str(run), "--no-progress")
        parallel = fresh_report(run)
        serial = fresh_report(run, workers="1")
        parallel_again = fresh_report(run)
        kept = timed("report", str(run))
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    best_parallel = min(parallel, parallel_again)
    print(f"first run (train, evaluate, score, report): {first:7.1f} s")
    print(f"rerun with nothing to do:                   {rerun:7.1f} s  ({first / rerun:.0f}x faster than the first run)")
    print(f"report from scratch, one process:           {serial:7.1f} s")
    print(f"report from scratch, parallel figures:      {best_parallel:7.1f} s  ({serial / best_parallel:.1f}x)")
    print(f"report rebuilt, nothing changed:            {kept:7.1f} s  ({serial / kept:.1f}x)")


if __name__ == "__main__":
    main()
