"""Extra stages: work a task needs between the evaluation and the scoring (e.g. active learning's
second training cycle), declared by the task (``stages = (MyStage,)``) in its own plugin.

When the runner runs one and what it declares and returns: docs/design-rationale.md, "Extra stages";
a complete example: docs/guides/add-component.md, "Add a stage".
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping, Sequence

from values_seg.components.run_context import RunContext

#: the typed experiment (:class:`values_seg.config.experiment.Experiment`, a floor above the contracts)
Experiment = Any


@dataclass(frozen=True)
class StageContext:
    """What a stage may use of a run.

    ``combinations``: the evaluated combinations; ``folders``: combination name -> its evaluation
    folder; ``load(combination)``: its :class:`~values_seg.components.task.EvaluationResult`;
    ``config``: the typed :class:`~values_seg.config.experiment.Experiment` (frozen); ``train(specs, stage)``:
    trains what the checkpoint store lacks, returns the keys of the specs now available;
    ``map(stage, {job id: (function, args)})``: runs module-level functions with picklable
    arguments on the run's executor (the experiment's plugins loaded first), returns
    ``{job id: value}`` of those that succeeded (the others are recorded as failed);
    ``fail(job, error)``: records a failed job of this stage (the run goes on and exits non-zero);
    ``count_trainings(n)``: adds ``n`` distinct trainings to the run's summary; ``run``: the
    run's :class:`~values_seg.components.run_context.RunContext` (cache, device, threads, plugins, progress)
    for the stage's jobs (``cache_dir``, ``device``, ``threads`` and ``progress`` repeat it).
    """

    combinations: Sequence[Any]
    folders: Mapping[str, str]
    load: Callable[[Any], Any]
    config: Experiment
    train: Callable[..., set]
    map: Callable[[str, dict], dict]
    fail: Callable[[str, str], None]
    count_trainings: Callable[[int], None]
    cache_dir: Path
    device: str | None
    threads: int
    progress: bool
    run: RunContext | None = None


class Stage:
    """Base class of stages (see the module docstring)."""

    name: ClassVar[str] = "stage"
    consumes: ClassVar[tuple[str, ...]] = ()

    def splits(self, config: Experiment) -> tuple[str, ...]:
        """Extra splits the evaluation scores for this stage (default: none)."""
        return ()

    def run(self, context: StageContext, tasks: Mapping[str, Any]) -> dict[str, Any]:
        """``{combination name: result}``; ``tasks``: the declaring tasks by label."""
        raise NotImplementedError


def stages_of(tasks: Mapping[str, Any]) -> dict[type, dict[str, Any]]:
    """Each stage class the tasks declare -> the declaring tasks by label (in first-declared order)."""
    out: dict[type, dict[str, Any]] = {}
    for label, task in tasks.items():
        for stage in getattr(task, "stages", ()):
            if not (isinstance(stage, type) and issubclass(stage, Stage)):
                raise ValueError(f"task {label!r}: stages must be values_seg.components.stage.Stage subclasses, got {stage!r}")
            out.setdefault(stage, {})[label] = task
    return out
