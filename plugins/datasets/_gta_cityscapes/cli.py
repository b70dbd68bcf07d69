"""``values-seg data gta-cityscapes prepare``: the command line of :mod:`prepare`."""

from __future__ import annotations

import argparse
import sys


def add_parser(data_sub) -> None:
    """Register ``gta-cityscapes`` under the ``values-seg data`` sub-commands."""
    gta = data_sub.add_parser("gta-cityscapes", help="GTA5 (i.i.d.) -> Cityscapes (OoD), paper appendix B.3")
    gta_sub = gta.add_subparsers(dest="gta_cityscapes_command", required=True)
    prep = gta_sub.add_parser(
        "prepare",
        help="crop, rescale and relabel local copies of GTA5 and Cityscapes; write a manifest and the splits",
        description="Centre-crop every frame to 1024 x 1912, rescale to 256 x 478 (images bilinear, labels "
                    "nearest), map label ids to the 19 Cityscapes training ids, and draw the paper's Figure 7 "
                    "splits. Resumable: rerun the same command after an interruption.",
    )
    prep.add_argument("--gta-root", help="GTA5 folder holding images/NNNNN.png and labels/NNNNN.png")
    prep.add_argument("--cityscapes-root",
                      help="Cityscapes folder holding leftImg8bit/{train,val}/<city>/ and gtFine/{train,val}/<city>/")
    prep.add_argument("--out", required=True, help="output folder (new, empty, or an earlier preparation to resume)")
    prep.add_argument("--workers", type=int, default=1, help="worker processes (default 1)")
    prep.add_argument("--split-seed", type=int, default=123, help="seed of the Figure 7 splits (default 123)")
    prep.add_argument("--no-progress", action="store_true", help="no progress bar")
    prep.set_defaults(func=prepare_command)


def prepare_command(args: argparse.Namespace) -> int:
    from values_seg_plugins.datasets._gta_cityscapes.prepare import prepare

    summary = prepare(args.gta_root, args.cityscapes_root, args.out, workers=args.workers,
                      split_seed=args.split_seed, progress=not args.no_progress)
    print(summary.describe(), file=sys.stdout)
    return 0
