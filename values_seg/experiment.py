"""One typed experiment: what :func:`values_seg.config.load_config` returns.

Built once from the validated config: every component reference resolved
(:class:`~values_seg.registry.ComponentRef`, parameters normalised against the registry), the
engine :class:`~values_seg.engine.specs.Recipe` built, the evaluation settings typed
(:class:`~values_seg.settings.EvaluationSettings`, with the run's ``threads``), the run's own
settings typed. It is frozen, and its ``config`` (the resolved config, for ``config.yaml``) is
read-only.

The sections that are plain data (``rules``, ``active_learning``, ``statistics``, ``ray``) are
read from the config (``experiment.rules.exclude``); during the transition any other config key
reads through too (``experiment.name``, ``experiment["datasets"]``), so code written for the
``DictConfig`` keeps working.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from omegaconf import DictConfig

from values_seg.engine.specs import Recipe
from values_seg.registry import ComponentRef
from values_seg.settings import EvaluationSettings


@dataclass(frozen=True, eq=False)
class Experiment:
    """A validated experiment (see the module docstring); compared by identity."""

    config: DictConfig
    components: Mapping[str, tuple[ComponentRef, ...]]  # config list ("measures", ...) -> its references
    recipe: Recipe
    evaluation: EvaluationSettings
    name: str
    seeds: tuple[int, ...]
    device: str
    executor: str
    workers: int
    threads: int
    loader_workers: int | None
    cache_dir: str | None
    plugins: tuple[str, ...]

    def refs(self, key: str) -> list[ComponentRef]:
        """The component references of one list of the config (e.g. ``"measures"``), in order."""
        return list(self.components[key])

    def __getattr__(self, name: str) -> Any:  # the config's plain-data sections, and older call sites
        if name.startswith("__") or name == "config":
            raise AttributeError(name)
        try:
            return getattr(self.config, name)
        except Exception as e:  # noqa: BLE001 - omegaconf's own error types
            raise AttributeError(f"experiment has no {name!r}") from e

    def __getitem__(self, key: str) -> Any:
        return self.config[key]
