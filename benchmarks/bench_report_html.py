"""What ``report.html`` costs the report build, in one session on a copy of a finished run:

1. the report rebuilt with nothing changed (every figure and the page kept: the page is only keyed);
2. the same build with ``report.html`` removed, so the page is written again (its Markdown
   converted, its tables laid out, its figures embedded): the difference is the page's cost;

alternating, ``--repeat`` times each, best of each, in wall-clock time and in CPU time (this
process and its figure workers: less disturbed by other load on the machine); plus the size of
the page.

    python benchmarks/bench_report_html.py RUN_DIR [--repeat 3]     # e.g. runs/toy_quick
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
from pathlib import Path

from values_seg.report import build_report
from values_seg.storage.run_files import CACHE, REPORT_HTML


def _cpu() -> float:
    return sum(getattr(resource.getrusage(who), f) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for f in ("ru_utime", "ru_stime"))


def timed_build(run: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one report build."""
    start, cpu = time.perf_counter(), _cpu()
    build_report(run)
    return time.perf_counter() - start, _cpu() - cpu


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
    print(f"first build of the copy: {first[0]:.2f} s")
    for i, what in enumerate(("wall", "CPU")):
        k, w = min(t[i] for t in kept), min(t[i] for t in written)
        print(f"{what:4}: rebuild, nothing changed (page kept): {k:6.2f} s; report.html written again: {w:6.2f} s; "
              f"the page's cost {w - k:+.2f} s ({w / k:.2f}x)  "
              f"(all: {', '.join(f'{t[i]:.2f}' for t in kept)} / {', '.join(f'{t[i]:.2f}' for t in written)})")
    print(f"report.html: {size / 1e6:.2f} MB")

if __name__ == "__main__":
    main()
