"""Command line: ``values-seg toy generate ...`` and ``python -m toy_data_generator generate ...``.

``configure_parser`` adds the options to a ``generate`` sub-parser; ``generate_command`` runs it
and returns the exit status (0 on success, 2 for bad parameters, 1 when the output folder is taken).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from toy_data_generator import scenarios as sc


def configure_parser(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``toy generate`` to ``parser``."""
    parser.description = (
        "Generate a toy scenario of the ValUES paper (appendix B.1, Table 1) as NIfTI files with a "
        "manifest.csv and a preview.png montage."
    )
    parser.add_argument(
        "--scenario",
        required=True,
        metavar="{" + ",".join(sc.SCENARIOS) + "}",
        help="Table 1 scenario: " + "; ".join(f"{k}: {v.description}" for k, v in sc.SCENARIOS.items()),
    )
    parser.add_argument("--out", required=True, help="output folder (created if missing)")
    parser.add_argument("--dims", type=int, default=2, help="2 (circles/squares) or 3 (spheres/cubes); default 2")
    parser.add_argument("--size", type=int, default=64, help="image size in voxels per axis (paper: 64); default 64")
    parser.add_argument(
        "--seed", type=int, default=0, help="random seed; the same seed gives byte-identical files; default 0"
    )
    parser.add_argument(
        "--train-cases", type=int, default=None, help="override Table 1's 200 training cases (blur mix kept)"
    )
    parser.add_argument(
        "--val-cases", type=int, default=None, help="validation cases (default: 20%% of the training cases)"
    )
    parser.add_argument("--pool-iid", type=int, default=0, help="i.i.d. cases of an active-learning pool; default 0")
    parser.add_argument("--pool-ood", type=int, default=0, help="OoD cases of an active-learning pool; default 0")
    parser.add_argument(
        "--workers",
        type=int,
        default=min(2, os.cpu_count() or 1),
        help="processes writing cases in parallel; default min(2, CPUs)",
    )
    parser.add_argument(
        "--preview", action=argparse.BooleanOptionalAction, default=True, help="write preview.png (default: yes)"
    )
    parser.add_argument(
        "--preview-cases", type=int, default=6, help="example cases per split in the preview; default 6"
    )
    parser.add_argument("--overwrite", action="store_true", help="replace toy data already in --out")
    parser.set_defaults(handler=generate_command)


def generate_command(args: argparse.Namespace) -> int:
    """Run ``toy generate`` with parsed ``args``; print a summary; return the exit status."""
    from toy_data_generator.io import write_dataset

    started = time.perf_counter()
    try:
        written = write_dataset(
            args.out,
            scenario=args.scenario,
            dims=args.dims,
            size=args.size,
            seed=args.seed,
            train_cases=args.train_cases,
            val_cases=args.val_cases,
            pool_iid=args.pool_iid,
            pool_ood=args.pool_ood,
            workers=args.workers,
            preview=args.preview,
            preview_cases=args.preview_cases,
            overwrite=args.overwrite,
        )
    except ValueError as e:
        print(f"values-seg toy generate: error: {e}", file=sys.stderr)
        return 2
    except FileExistsError as e:
        print(f"values-seg toy generate: error: {e}", file=sys.stderr)
        return 1
    print(
        f"toy scenario {sc.get_scenario(args.scenario).name}, {args.dims}D, size {args.size}, seed {args.seed} "
        f"({time.perf_counter() - started:.1f} s)"
    )
    print(written.summary())
    return 0


def build_parser(prog: str = "python -m toy_data_generator") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description="ValUES toy data generator (paper appendix B.1)")
    commands = parser.add_subparsers(dest="command", required=True)
    configure_parser(commands.add_parser("generate", help="generate a toy scenario to a folder"))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)
