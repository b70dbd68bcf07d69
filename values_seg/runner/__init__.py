"""The runner: sweeps every combination of a config through train -> evaluate -> score -> report.

See :mod:`values_seg.runner.run` for the job graph, :mod:`.executors` for where jobs run,
:mod:`.evaluate` for the per-combination evaluation stage and :mod:`.results` for the tables.
"""

from values_seg.runner.run import Runner, run_experiment
from values_seg.runner.summary import RunSummary

__all__ = ["RunSummary", "Runner", "run_experiment"]
