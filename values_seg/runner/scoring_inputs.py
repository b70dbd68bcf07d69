"""The scoring stage's declared inputs: what the results tables are computed from. A rerun whose
:class:`ScoringInputs` key matches the one remembered in the run directory (and whose tables are
intact) writes nothing (:mod:`values_seg.artifact`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from values_seg.artifact import Inputs, plain
from values_seg.canonical import sha256_json
from values_seg.registry import ComponentRef


@dataclass(frozen=True)
class ScoringInputs(Inputs):
    """``evaluations``: per combination (name, its evaluation folder's key, a digest of its stages'
    results); ``tasks``: the configured tasks (with labels); ``statistics`` and ``rules``: the
    config's sections (bootstrap settings; the exclude rules that drop rows)."""

    stage = "scoring"

    evaluations: tuple[tuple[str, str, str | None], ...]
    tasks: tuple[ComponentRef, ...]
    statistics: Any
    rules: Any

    def code(self) -> tuple:
        return tuple(t.component().obj for t in self.tasks)


def stages_digest(results: dict | None) -> str | None:
    """A digest of one combination's stage results (dataclasses or JSON-like)."""
    if not results:
        return None
    return sha256_json({name: plain(result) for name, result in sorted(results.items())})
