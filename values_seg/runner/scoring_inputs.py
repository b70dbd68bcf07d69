"""The scoring and report stages' declared inputs: what the results tables and the report are
computed from. A rerun whose :class:`ScoringInputs` key matches the one remembered in the run
directory (and whose tables are intact) writes nothing, nor does one whose :class:`ReportInputs`
key matches the report's (:mod:`values_seg.storage.artifact`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from values_seg.storage.artifact import Inputs, plain
from values_seg.storage.canonical import sha256_json
from values_seg.storage.atomic import sha256_file
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


@dataclass(frozen=True)
class ReportInputs(Inputs):
    """``files``: each file of the run directory the report is built from, by name and sha256
    (``None``: absent); ``sections``: the modules of the report sections it is built with (built-in
    and plugins'); the report's code is theirs and its stage's (:data:`values_seg.storage.provenance.STAGE_MODULES`)."""

    stage = "report"

    files: tuple[tuple[str, str | None], ...]
    sections: tuple[str, ...] = ()

    @classmethod
    def of(cls, paths, sections=()) -> "ReportInputs":
        return cls(tuple((p.name, sha256_file(p) if p.exists() else None) for p in paths), tuple(sorted(set(sections))))

    def code(self) -> tuple:
        return self.sections


def stages_digest(results: dict | None) -> str | None:
    """A digest of one combination's stage results (dataclasses or JSON-like)."""
    if not results:
        return None
    return sha256_json({name: plain(result) for name, result in sorted(results.items())})
