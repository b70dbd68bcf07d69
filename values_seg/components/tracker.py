"""Experiment trackers (the hook ``values_seg_trackers``): where a sweep's trainings and results are
logged besides the run directory (MLflow, TensorBoard; a W&B or Aim sink is one outside module).

The contract: docs/design-rationale.md, "Experiment trackers"; using one: docs/guides/tracking.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar


@dataclass
class Record:
    """One tracker run: ``kind`` ("training" or "combination"), a display ``name``, its cache
    ``key``, ``params`` (flat ``{name: text}``), ``tags``, ``series`` (``{metric: [(step, value)]}``,
    e.g. the loss per epoch), ``metrics`` (``{metric: value}``) and ``artifacts`` (files)."""

    kind: str
    name: str
    key: str
    params: dict[str, str] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)
    series: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    artifacts: list[Path] = field(default_factory=list)


class Tracker:
    """Subclass it (class attributes ``name``, ``extra``: the pip extra that installs its package)."""

    name: ClassVar[str] = ""
    extra: ClassVar[str] = ""

    def check(self) -> None:
        """Raise ``ImportError`` when the tracker's package is missing (called before any work)."""

    def open(self, sweep: Record) -> None:
        """Start (or resume: the same ``sweep.key``) the sweep's parent record."""
        raise NotImplementedError

    def has(self, record: Record) -> bool:
        """Whether this sweep already holds a record with ``record.key`` (then it is not logged again)."""
        raise NotImplementedError

    def log(self, record: Record) -> None:
        """Log one record, nested under the sweep."""
        raise NotImplementedError

    def attach(self, files: list[Path], folder: str) -> None:
        """Attach files (the report) to the sweep's record, under ``folder``."""

    def close(self) -> None:
        """Finish the sweep's record."""
