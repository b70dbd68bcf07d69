"""The ``values-seg`` command line (docs/architecture.md, "Command line")."""

from __future__ import annotations

import argparse
import errno
import gc
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from values_seg import __version__
from values_seg.runtime.console import one_line_warnings
from values_seg.storage.redaction import redact
from values_seg.storage.run_lock import UNWRITABLE, RunDirectoryBusy
from values_seg.storage.run_files import BOOTSTRAP, REPORT, REPORT_HTML, RESULTS_CSV, RESULTS_PARQUET

if TYPE_CHECKING:
    from omegaconf import DictConfig

#: The core's own commands; every other one comes from a plugin (hook ``values_seg_cli``).
CORE_COMMANDS = ("run", "report", "compare", "plugins")


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
            if c.label != c.name:
                print(f"  {'':<28} label: {c.label}")
            print(f"  {'':<28} source: {c.source}")
            if c.params:
                print(f"  {'':<28} params: {', '.join(p.describe() for p in c.params)}")
            for key, value in sorted(c.meta.items()):
                if isinstance(value, dict):
                    value = ", ".join(f"{k}={v}" for k, v in value.items())
                print(f"  {'':<28} {key}: {value}")
        print()
    return 0


def _run(args: argparse.Namespace) -> int:
    from values_seg.config.loading import resolved_config, typed

    executor = [f"executor={args.executor}"] if args.executor else []  # validated (and recorded) with the config
    raw = resolved_config(args.config, list(args.overrides) + executor)
    if _nothing_to_do(args, raw):  # decided before torch or a plugin is imported
        return 0
    from values_seg.runner import run_experiment

    cfg = typed(raw)
    run_dir = Path(args.out) if args.out else Path("runs") / cfg.name
    # the run checks the experiment (pre-flight) and claims the directory before it says it writes there
    summary = run_experiment(cfg, run_dir, progress=not args.no_progress, announce=True)
    print(summary.describe())
    if (run_dir / REPORT).exists():
        print(f"report: {run_dir / REPORT}")
        _page_line(run_dir)
    return 0 if summary.ok else 1


def _nothing_to_do(args: argparse.Namespace, raw: DictConfig) -> bool:
    """A rerun of a finished run whose config, code and files are unchanged
    (:mod:`values_seg.runner.run_record`): says what the run said, and that is all."""
    import logging
    import time

    from values_seg.storage import provenance, run_directory, run_files, run_lock
    from values_seg.runner import run_record
    from values_seg.storage.atomic import RefusedWrite
    from values_seg.storage.cache_store import CacheStore

    start = time.time()
    try:
        run_dir = Path(args.out) if args.out else Path("runs") / run_directory.check_name(raw.name)
        if not (run_dir / run_files.MARKER).is_file():
            return False
        run_directory.check(run_dir)  # not ours: no lock file is made there; the full way says why
        cache = run_directory.cache_dir(run_dir, raw.cache_dir)
        provenance.read_digest_file(CacheStore(cache).code_digests)  # the run's digests: nothing is parsed again
        with run_lock.reading(run_dir):  # busy: the full way says so; a read-only run is read
            record = run_record.finished(run_dir, cache, raw)
    except RefusedWrite:
        return False
    if record is None:
        return False
    print(f"values-seg run {raw.name}: writing to {run_dir}", flush=True)
    for message in record["warnings"]:
        logging.getLogger("values_seg.runner").warning("%s", message)
    print(run_record.summary_of(run_dir, record, time.time() - start).describe())
    if (run_dir / REPORT).exists():
        print(f"report: {run_dir / REPORT}")
        _page_line(run_dir)
    return True


def _page_line(run_dir: Path) -> None:
    if (run_dir / REPORT_HTML).exists():
        print(f"report to explore in a browser: {run_dir / REPORT_HTML}")


def _report(args: argparse.Namespace) -> int:
    from values_seg.report import build_report

    from values_seg.storage.run_directory import check

    run_dir = Path(args.run_dir)
    check(run_dir)  # values-seg's run directory (its marker), before anything is written
    if not (run_dir / RESULTS_CSV).exists():
        raise ValueError(f"{run_dir} is not a run directory (no {RESULTS_CSV}); run 'values-seg run CONFIG' first")
    try:
        path = build_report(run_dir)
    except OSError as e:
        if e.errno not in UNWRITABLE:
            raise
        print(f"values-seg report: cannot write {e.filename or run_dir} ({e.strerror}): the report is written into the "
              f"run directory; copy {run_dir} where you may write and run values-seg report there", file=sys.stderr)
        return 1
    print(f"report: {path}")
    _page_line(run_dir)
    return 0


def _compare(args: argparse.Namespace) -> int:
    """Compare the choices of one component: everything is read (under a shared lock: a read-only run
    is read) and printed first; the lock of a writer is taken only to save the CSV files."""
    from values_seg.report import comparisons, verdict
    from values_seg.report.rundir import load_run
    from values_seg.storage.run_directory import check
    from values_seg.storage.run_lock import locked, reading

    run_dir = Path(args.run_dir)
    check(run_dir)  # values-seg's run directory: compare reads only what a run wrote, writes only its CSVs
    if not (run_dir / RESULTS_CSV).exists() and not (run_dir / RESULTS_PARQUET).exists():
        raise ValueError(f"{run_dir} is not a run directory (no {RESULTS_CSV}); run 'values-seg run CONFIG' first")
    with reading(run_dir):  # a run that writes it meanwhile: refused, never half read
        run = load_run(run_dir)
    if run.distributions is None:
        print(f"values-seg compare: no bootstrap distributions in {run_dir} ({BOOTSTRAP}; statistics.n_resamples "
              "was 0 or the run predates them): the values are compared without significance", file=sys.stderr)
    pairs = comparisons.compare(run, args.vary, args.task)
    summary = comparisons.wins(pairs, run, args.vary)
    level = run.distributions.level if run.distributions is not None else 0.95
    print(f"{run.name}: which {args.vary.replace('_', ' ')} wins, per metric and split "
          f"(sets of methods that differ in the {args.vary.replace('_', ' ')} only; a choice wins significantly "
          f"where it is significantly better than every other choice).\n"
          f"{comparisons.significance_note(level, run.spec, args.vary)}\n")
    print(comparisons.describe(summary, pairs, run, args.vary))
    if left_out := comparisons.left_out(run, args.vary, args.task):
        print(left_out)
    if args.details and not pairs.empty:
        print()
        print(comparisons.details(pairs, run, args.vary))
    found = None
    if args.vary == "aggregation":  # the "Which aggregation?" verdict: mean ranks, winners, flips
        found = verdict.verdict(run, task=args.task)
        print()
        print(verdict.describe(found, run))
    suffix = f"_{args.task}" if args.task else ""
    saved = found is not None and not found.empty
    files = [*comparisons.files(run_dir, args.vary + suffix), *(verdict.files(run_dir, suffix) if saved else [])]
    try:  # everything is printed already: a run directory we cannot write to loses only the CSV files
        with locked(run_dir):  # one writer at a time
            detail, wins = comparisons.write(pairs, summary, run_dir, args.vary + suffix)
            ranks = verdict.write(found, run_dir, suffix) if saved else None
    except (OSError, RunDirectoryBusy) as e:
        why = e if isinstance(e, RunDirectoryBusy) else e.strerror or e
        print(f"values-seg compare: could not save {', '.join(p.relative_to(run_dir).as_posix() for p in files)} "
              f"in {run_dir} ({why}); the result above is complete", file=sys.stderr)
        return 1
    print(f"\nevery pair: {detail}\nsummary: {wins}" + (f"\nmean ranks: {ranks}" if ranks else ""))
    return 0


def build_parser(plugin_commands: bool = True) -> argparse.ArgumentParser:
    """The parser: the core's commands, and with ``plugin_commands`` those the plugins add."""
    parser = argparse.ArgumentParser(
        prog="values-seg",
        description="Systematic validation of uncertainty estimation for semantic segmentation.",
    )
    parser.add_argument("--version", action="version", version=f"values-seg {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run (or resume) an experiment: train, evaluate, score, report")
    run.add_argument("config", help="experiment YAML, e.g. experiments/toy_quick.yaml")
    run.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides, e.g. recipe.epochs=2")
    run.add_argument("--out", help="run directory (default: runs/<experiment name>)")
    run.add_argument("--executor", choices=["local", "processes", "ray"], help="where jobs run (default: the config's)")
    run.add_argument("--no-progress", action="store_true", help="no progress bars")
    run.set_defaults(func=_run)

    report = sub.add_parser("report", help=f"rebuild {REPORT}, figures and LaTeX tables of a run directory")
    report.add_argument("run_dir")
    report.set_defaults(func=_report)

    compare = sub.add_parser("compare", help="paired, significance-tested comparison of the choices of one component")
    compare.add_argument("run_dir")
    compare.add_argument("--vary", required=True, choices=["aggregation", "measure", "prediction_model"],
                         help="the component whose choices are compared, everything else equal")
    compare.add_argument("--task", help="only this task (its label in the results, e.g. ood_detection)")
    compare.add_argument("--details", action="store_true", help="also print every compared pair")
    compare.set_defaults(func=_compare)

    data = sub.add_parser("data", help="data set utilities (from the dataset plugins)")
    data_sub = data.add_subparsers(dest="data_command", required=True)

    plugins = sub.add_parser("plugins", help="list every registered component by kind")
    plugins.add_argument("--kind", choices=None, help="only this kind (backbone, prediction_model, measure, ...)")
    plugins.add_argument("--plugin", action="append", metavar="MODULE", help="also load this plugin module")
    plugins.set_defaults(func=_plugins)
    if plugin_commands:
        from values_seg import registry

        registry.default().add_commands(commands=sub, data_commands=data_sub)
    return parser


def plugin_commands_needed(argv: Sequence[str]) -> bool:
    """Whether the plugins must be imported (about 2 s) to parse ``argv``: for their commands
    and the full help, not for the core's commands or ``--version``."""
    first = next((a for a in argv if not a.startswith("-")), None)
    return first not in CORE_COMMANDS and not (first is None and "--version" in argv)


def main(argv: Sequence[str] | None = None) -> int:
    one_line_warnings()
    program = argv is None
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = build_parser(plugin_commands_needed(argv))
    except ValueError as e:  # a plugin that cannot be loaded, or a command name taken twice
        print(f"values-seg: error: {redact(str(e))}", file=sys.stderr)
        return 2
    args, extra = parser.parse_known_args(argv)
    if extra:  # key=value overrides may follow options: values-seg run C.yaml --out D a=1
        if getattr(args, "overrides", None) is None or any(e.startswith("-") or "=" not in e for e in extra):
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        args.overrides = list(args.overrides) + extra
    try:
        status = int(args.func(args) or 0)
        sys.stdout.flush()  # a reader that went away shows here, not at interpreter exit
        if program:  # the process ends now: no final collection over torch's objects (0.5 s)
            gc.freeze()
        return status
    except BrokenPipeError:  # the output's reader is gone (values-seg ... | head): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing more to flush into the pipe
        print("values-seg: stopped: the output was closed (broken pipe); finished work is kept", file=sys.stderr)
        return 141  # 128 + SIGPIPE, as a shell reports a command ended by its closed pipe
    except (ValueError, FileNotFoundError) as e:  # configuration and input errors: a clear message
        print(f"values-seg: error: {redact(str(e))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("values-seg: interrupted; finished work (checkpoints, predictions, evaluations) is kept: "
              "run the same command again to resume", file=sys.stderr)
        return 130
    except OSError as e:  # the storage: one line saying what to do, never a traceback
        print(f"values-seg: error: {redact(storage_message(e))}", file=sys.stderr)
        return 1


def storage_message(error: OSError) -> str:
    """One line for an operating-system error: what failed, on which path, and what to do."""
    where = f" {error.filename}" if error.filename else ""
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return (f"no space left on the device (writing{where or ' the output'}); free some space, or write elsewhere "
                f"(--out, cache_dir), and run the same command again: finished work is kept")
    if error.errno == errno.EROFS:
        return f"cannot write{where}: the file system is read-only; write elsewhere (values-seg run: --out, cache_dir)"
    if error.errno in (errno.EACCES, errno.EPERM):
        return f"permission denied:{where}; write where you may (values-seg run: --out, cache_dir) or fix its permissions"
    if error.errno == errno.EEXIST and error.filename:
        what = "" if error.strerror in (None, os.strerror(errno.EEXIST)) else f"{error.strerror}: "
        return f"{what}{error.filename} already exists; move or remove it, then run the same command again"
    message = error.strerror or str(error) or f"an operating-system error ({type(error).__name__})"
    return f"{message}:{where}" if where else message


if __name__ == "__main__":
    sys.exit(main())
