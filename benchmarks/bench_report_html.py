"""What ``report.html`` costs the report build, in one session on a copy of a finished run:

1. the report rebuilt with nothing changed (every figure and the page kept: the page is only keyed);
2. the same build with ``report.html`` removed, so the page is written again (its Markdown
   converted, its tables laid out, its figures embedded): the difference is the page's cost;

alternating, ``--repeat`` times each, best of each; plus the size of the page.

    python benchmarks/bench_report_html.py RUN_DIR [--repeat 3]     # e.g. runs/toy_quick
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from values_seg.report import build_report
from values_seg.run_files import CACHE, REPORT_HTML


def timed_build(run: Path) -> float:
    start = time.perf_counter()
    build_report(run)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench_html_"))
    try:
        run = tmp / "run"
        shutil.copytree(args.run_dir, run, ignore=lambda d, names: [CACHE] if Path(d) == args.run_dir else [])
        first = timed_build(run)  # draws what the copy lacks, writes the page
        kept, written = [], []
        for _ in range(args.repeat):
            kept.append(timed_build(run))
            (run / REPORT_HTML).unlink()
            written.append(timed_build(run))
        size = (run / REPORT_HTML).stat().st_size
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    k, w = min(kept), min(written)
    print(f"first build of the copy:                      {first:6.2f} s")
    print(f"rebuild, nothing changed (page kept):         {k:6.2f} s  (all: {', '.join(f'{t:.2f}' for t in kept)})")
    print(f"rebuild, report.html written again:           {w:6.2f} s  (all: {', '.join(f'{t:.2f}' for t in written)})")
    print(f"the page's cost: {w - k:.2f} s ({w / k:.2f}x the unchanged rebuild); report.html: {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
