"""The ``values-seg`` command line (DESIGN.md, "Command line")."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from values_seg import __version__


def _plugins(args: argparse.Namespace) -> int:
    from values_seg import registry

    for module in args.plugin or []:
        registry.load(module)
    kinds = [args.kind] if args.kind else list(registry.KINDS)
    for kind in kinds:
        comps = registry.components(kind)
        print(f"{kind} ({len(comps)})")
        for c in comps:
            print(f"  {c.name:<28} {c.description}")
            print(f"  {'':<28} source: {c.source}")
            if c.params:
                print(f"  {'':<28} params: {', '.join(p.describe() for p in c.params)}")
            for key, value in sorted(c.meta.items()):
                if isinstance(value, dict):
                    value = ", ".join(f"{k}={v}" for k, v in value.items())
                print(f"  {'':<28} {key}: {value}")
        print()
    return 0


def _toy_generate(args: argparse.Namespace) -> int:
    from toy_data_generator.cli import generate_command

    return generate_command(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="values-seg",
        description="Systematic validation of uncertainty estimation for semantic segmentation.",
    )
    parser.add_argument("--version", action="version", version=f"values-seg {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    plugins = sub.add_parser("plugins", help="list every registered component by kind")
    plugins.add_argument("--kind", choices=None, help="only this kind (backbone, prediction_model, measure, ...)")
    plugins.add_argument("--plugin", action="append", metavar="MODULE", help="also load this plugin module")
    plugins.set_defaults(func=_plugins)

    toy = sub.add_parser("toy", help="the controlled toy data (paper appendix B.1)")
    toy_sub = toy.add_subparsers(dest="toy_command", required=True)
    generate = toy_sub.add_parser("generate", help="write a toy scenario as NIfTI + manifest + preview")
    try:
        from toy_data_generator.cli import configure_parser
    except ImportError:  # pragma: no cover - the generator ships with the package
        configure_parser = None
    if configure_parser is not None:
        configure_parser(generate)
    generate.set_defaults(func=_toy_generate)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ValueError as e:  # configuration and input errors: a clear message, no traceback
        print(f"values-seg: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
