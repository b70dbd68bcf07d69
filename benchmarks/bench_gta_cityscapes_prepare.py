"""Throughput of ``values-seg data gta-cityscapes prepare`` on synthetic full-size frames.

Writes synthetic GTA5 (1914 x 1052) and Cityscapes (2048 x 1024) trees in the official layouts
(textured with Gaussian noise so the PNGs are not trivially compressible), then prepares them
with 1 and 2 worker processes (fresh output folder each time; the whole call: layout, decoding,
checks, crop, rescale, label mapping, PNG writes, hashes, journal, manifest, splits, preview).
Baseline, run beside it: the bare per-frame work in one process (decode, crop, rescale, map,
encode) without checks, hashes, atomic writes or records. Prints frames/second (best of
``--repeats`` runs each, steadier on a shared machine), the ratios, and the CPU seconds per
frame of all processes (what a machine with free cores divides by its worker count).

    python benchmarks/bench_gta_cityscapes_prepare.py                 # 24 GTA5 + 8 Cityscapes frames
    python benchmarks/bench_gta_cityscapes_prepare.py --gta5 48 --workers 1 2 4
"""

from __future__ import annotations

import argparse
import io
import resource
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

from values_seg_plugins.datasets._gta_cityscapes import labels, synthetic, transform
from values_seg_plugins.datasets._gta_cityscapes.layout import find_cityscapes, find_gta5
from values_seg_plugins.datasets._gta_cityscapes.prepare import prepare


def bare(pairs) -> float:
    """Seconds for the bare per-frame work over ``pairs``, one process."""
    lut = labels.table().lut.astype(np.uint8)
    start = time.perf_counter()
    for pair in pairs:
        image = np.asarray(Image.open(pair.image).convert("RGB"))
        ids = np.asarray(Image.open(pair.label))
        small = transform.downscale_image(transform.center_crop(image))
        train = lut[transform.downscale_labels(transform.center_crop(ids)).astype(np.int16) + 1]
        for arr in (small, train):
            Image.fromarray(arr).save(io.BytesIO(), format="PNG")
    return time.perf_counter() - start


def cpu_seconds() -> float:
    """CPU time of this process and its finished children (the worker processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gta5", type=int, default=24, help="GTA5 frames (default 24)")
    parser.add_argument("--cityscapes", type=int, default=8, help="Cityscapes frames, half train, half val (default 8)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--noise", type=float, default=6.0, help="std of the image texture (grey levels)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per setting; the best counts (default 2)")
    args = parser.parse_args()
    if args.gta5 < args.cityscapes // 2 + 4:
        parser.error("--gta5 must be at least half of --cityscapes + 4 (the Figure 7 splits)")
    with tempfile.TemporaryDirectory(prefix="bench_gta_cs_") as tmp:
        tmp = Path(tmp)
        t = time.perf_counter()
        gta, cs = synthetic.write_small_trees(tmp / "src", args.gta5, args.cityscapes - args.cityscapes // 2,
                                              args.cityscapes // 2, noise=args.noise)
        n = args.gta5 + args.cityscapes
        size = sum(p.stat().st_size for p in (tmp / "src").rglob("*.png")) / n / 2**20
        print(f"{n} synthetic frames ({args.gta5} GTA5 1914x1052, {args.cityscapes} Cityscapes 2048x1024; "
              f"{size:.1f} MiB per image + label) written in {time.perf_counter() - t:.0f} s")
        pairs = find_gta5(gta).pairs + find_cityscapes(cs).pairs
        bare(pairs[:2])  # warm the page cache and imports
        c = cpu_seconds()
        base = max(n / bare(pairs) for _ in range(args.repeats))
        cpu = (cpu_seconds() - c) / args.repeats / n
        print(f"bare per-frame work, 1 process:  {base:6.2f} frames/s               {cpu:.3f} CPU s/frame")
        for workers in args.workers:
            rate, c = 0.0, cpu_seconds()
            for _ in range(args.repeats):
                out = tmp / f"out{workers}"
                t = time.perf_counter()
                summary = prepare(gta, cs, out, workers=workers, progress=False)
                rate = max(rate, n / (time.perf_counter() - t))
                assert summary.prepared == n and not summary.problems, summary.describe()
                shutil.rmtree(out)
            cpu = (cpu_seconds() - c) / args.repeats / n
            print(f"prepare --workers {workers}:        {rate:6.2f} frames/s  ({rate / base:.2f} x bare)  "
                  f"{cpu:.3f} CPU s/frame")


if __name__ == "__main__":
    main()
