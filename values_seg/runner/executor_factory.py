"""The executor a run asks for by name: in-process, local processes, or Ray."""

from __future__ import annotations

from typing import Any, Mapping

from values_seg.runner.executors import Executor, LocalExecutor, ProcessExecutor


def make_executor(name: str, workers: int = 2, *, threads: int = 1, device: str | None = "auto",
                  ray: Mapping[str, Any] | None = None) -> Executor:
    """The executor called ``name``. ``workers``: jobs at a time on this machine (worker processes,
    or the CPUs of a local Ray instance: ``workers x threads``); ``threads``: the CPU threads of
    every job; ``device``: the run's device; ``ray``: the config's ``ray`` section (a mapping)."""
    if name == "local":
        return LocalExecutor()
    if name == "processes":
        return ProcessExecutor(workers)
    if name == "ray":
        from values_seg.runner.ray_executor import RayExecutor

        return RayExecutor(ray, threads=threads, device=device, workers=workers)
    raise ValueError(f"unknown executor {name!r}; available: local, processes, ray")
