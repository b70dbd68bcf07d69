"""``values-seg data nnunet-export``: any values-seg dataset in nnU-Net's raw format."""

from __future__ import annotations

import argparse


def add_parser(data_sub) -> None:
    """Register ``nnunet-export`` under the ``values-seg data`` sub-commands."""
    export = data_sub.add_parser("nnunet-export", help="export a values-seg dataset to nnU-Net's raw format")
    export.add_argument("dataset", help="dataset name, e.g. toy")
    export.add_argument("params", nargs="*", metavar="key=value", help="dataset parameters, e.g. scenario=1 dims=2")
    export.add_argument("--out", required=True, help="nnU-Net raw folder (nnUNet_raw)")
    export.add_argument("--dataset-id", type=int, required=True)
    export.add_argument("--name", required=True, help="nnU-Net dataset name, e.g. ToyScenario1")
    export.add_argument("--label-from", default="majority", help="majority (per-pixel vote of the raters), rater<i> or <i>")
    export.add_argument("--overwrite", action="store_true",
                        help="replace an existing, non-empty Dataset<id>_<name> folder (its files are deleted)")
    export.set_defaults(func=export_command)


def export_command(args: argparse.Namespace) -> int:
    from values_seg_plugins._nnunet import export

    params = dict(kv.split("=", 1) for kv in args.params)
    print(export.export_command(args.dataset, params, args.out, args.dataset_id, args.name, args.label_from,
                                overwrite=args.overwrite))
    return 0
