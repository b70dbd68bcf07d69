"""What every job of a run shares: one frozen, picklable value instead of five to eight pass-through
arguments (docs/design-rationale.md, "The run context").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from values_seg.engine.curves import CurveSettings
from values_seg.storage.cache_store import CacheStore


@dataclass(frozen=True)
class RunContext:
    """``cache_dir``: the run's cache (absolute); ``device``: ``None`` for automatic;
    ``threads``: CPU threads of every job; ``plugins``: modules the experiment loads (a worker
    loads them first); ``progress``: per-job bars; ``loader_workers``: data-loader processes of a
    training (``None``: the engine's default)."""

    cache_dir: str
    device: str | None = None
    threads: int = 1
    plugins: tuple[str, ...] = ()
    progress: bool = False
    loader_workers: int | None = None
    curves: CurveSettings | None = None  # the trainings' validation Dice (values_seg.engine.curves)

    @property
    def cache(self) -> Path:
        return Path(self.cache_dir)

    @property
    def store(self) -> CacheStore:
        """The run's cache, whose layout only it knows (:class:`values_seg.storage.cache_store.CacheStore`)."""
        return CacheStore(self.cache_dir)

    def load_plugins(self) -> None:
        """Load the experiment's plugin modules (a worker process starts with the built-ins and
        entry points only)."""
        from values_seg import registry

        for module in self.plugins:
            registry.load(module)
