"""The console summary of ``values-seg run``: what ran, what was reused, what is missing and why."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from values_seg.storage import run_files


@dataclass
class RunSummary:
    run_dir: Path
    combinations: int = 0
    trainings: int = 0
    trained: int = 0
    evaluated: int = 0  # combinations with an evaluation, run now or reused
    reused: int = 0  # of those, evaluations the cache already held complete
    rows: int = 0
    tables_reused: bool = False  # nothing changed: the tables were not rewritten
    seconds: float = 0.0
    failures: list[dict] = field(default_factory=list)
    measure_gaps: dict[str, dict[str, str]] = field(default_factory=dict)  # measure -> {model: family} without rows
    left_out: list[str] = field(default_factory=list)  # prediction models without a measure where one is needed
    gaps: dict[tuple, int] = field(default_factory=dict)  # (task, metric, split, why) -> evaluations without a value
    unsupported: int = 0  # result rows the data cannot support (values_seg.runner.support)
    cache_files: dict[str, list[int]] = field(default_factory=dict)  # cache files used: path -> [size, mtime_ns]
    workers_started: int | None = None  # worker processes the executor started (None: not counted)

    @property
    def ok(self) -> bool:
        return not self.failures

    def describe(self) -> str:
        rows = f"{self.rows} result rows" + (" (unchanged)" if self.tables_reused else "")
        text = (f"{self.combinations} combinations, {self.trainings} distinct trainings ({self.trained} run now), "
                f"{self.evaluated} evaluations ({self.evaluated - self.reused} run now), {rows} in "
                f"{self.seconds:.0f} s" + (f" ({self.workers_started} worker processes started)"
                                           if self.workers_started is not None else "") + f" -> {self.run_dir}")
        if self.measure_gaps or self.left_out:  # each said in full at the start: named here once, in short
            text += "\nNot run (said at the start): " + "; ".join(
                [f"{', '.join(self.measure_gaps)} (no uncertainty type for a model's family)"] * bool(self.measure_gaps)
                + [line.split(" left out:")[0] + " left out" for line in self.left_out])
        gaps: dict[tuple, dict] = {}  # (why, evaluations) -> (task, split) -> metrics without a value
        for (task, metric, split, why), n in self.gaps.items():
            gaps.setdefault((why, n), {}).setdefault((task, split), []).append(metric)
        text += "".join(f"\nNo value in {n} of {self.evaluated} evaluation(s), {why}: "
                        + "; ".join(f"{task} {', '.join(ms)} ({split})" for (task, split), ms in found.items())
                        for (why, n), found in gaps.items())
        if self.unsupported:
            text += (f"\n{self.unsupported} of {self.rows} result rows are not supported by the data (too few cases, "
                     f"tied scores; supported = False in {run_files.RESULTS_CSV}, why in its support_note)")
        if self.failures:
            stages = sorted({f["stage"] for f in self.failures})
            text += f"\n{len(self.failures)} job(s) FAILED (stages: {', '.join(stages)}); see {self.run_dir / run_files.FAILURES}"
            for f in self.failures[:5]:
                text += f"\n  - {f['stage']}: {f['job']}: {f['cause']}"
        return text
