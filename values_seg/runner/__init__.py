"""The runner: sweeps every combination of a config through train -> evaluate -> score -> report.

See :mod:`values_seg.runner.run` for the job graph, :mod:`.executors` for where jobs run,
:mod:`values_seg.evaluation.combination` for the per-combination evaluation stage and
:mod:`.results` for the tables.
"""

from values_seg.runner.summary import RunSummary


def __getattr__(name: str):
    """:class:`Runner` and :func:`run_experiment` on first use (PEP 562): the runner's submodules
    (e.g. the pre-flight step) are importable without the job graph and torch."""
    if name in ("Runner", "run_experiment"):
        from values_seg.runner import run

        return getattr(run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["RunSummary", "Runner", "run_experiment"]
