"""One experiment on several executors, back to back, each from a fresh run directory: their wall
times (and the ratio to the first) and whether their tables are byte for byte the same.

Every job runs with the config's ``threads`` CPU threads whatever runs it, so the executors must
agree exactly: ``results.csv``, ``cases.csv``, ``calibration.csv`` and ``results.parquet`` are
compared by sha256.

    python benchmarks/bench_executors.py                                   # toy_quick: processes, then ray
    python benchmarks/bench_executors.py experiments/toy_quick.yaml --executors ray processes
    python benchmarks/bench_executors.py CONFIG --executors local ray --out /shared/bench recipe.epochs=2
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TABLES = ("results.csv", "cases.csv", "calibration.csv", "results.parquet")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "(missing)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default="experiments/toy_quick.yaml")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    parser.add_argument("--executors", nargs="+", default=["processes", "ray"], choices=["local", "processes", "ray"])
    parser.add_argument("--out", help="folder for the run directories (default: a new temporary folder)")
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="bench_executors_"))
    runs = {}
    for executor in args.executors:
        run_dir = out / executor
        if run_dir.exists():
            sys.exit(f"{run_dir} exists: the comparison needs fresh run directories")
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "values_seg.cli", "run", args.config, *args.overrides,
                               "--executor", executor, "--out", str(run_dir), "--no-progress"])
        runs[executor] = (time.perf_counter() - start, done.returncode, {t: sha256(run_dir / t) for t in TABLES})
    first = args.executors[0]
    print(f"\n{args.config} -> {out}")
    print(f"{'executor':<10} {'exit':>4} {'wall s':>8} {'vs ' + first:>10}  results.csv sha256")
    for executor, (seconds, code, digests) in runs.items():
        print(f"{executor:<10} {code:>4} {seconds:8.1f} {seconds / runs[first][0]:9.2f}x  {digests['results.csv']}")
    identical = all(digests == runs[first][2] for _, _, digests in runs.values())
    print(("identical: " if identical else "DIFFERENT: ") + ", ".join(TABLES))
    return 0 if identical and all(code == 0 for _, code, _ in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
