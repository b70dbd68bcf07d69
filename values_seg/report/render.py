"""Figure rendering for the report: in parallel worker processes, each figure once, and not at all
when neither its data nor the code that draws it changed since the last build.

A figure's key and when it is kept: docs/design-rationale.md, "Figure rendering".
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import multiprocessing
import os
import pickle
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable, ClassVar

import numpy as np
import pandas as pd

from values_seg.storage import run_directory
from values_seg.storage.artifact import Inputs
from values_seg.storage.atomic import sha256_file
from values_seg.storage.run_files import FIGURES, RENDER_INDEX
from values_seg.runtime.worker_processes import die_with_parent


def argument(value: Any) -> Any:
    """A plot's argument as JSON data for its key: a table (``DataFrame``, ``Series``) by the
    sha256 of its content (:func:`pandas.util.hash_pandas_object`, index included) with its
    columns and dtypes, an array by the sha256 of its bytes, mappings and sequences item by item;
    any other object by the sha256 of its pickle."""
    if isinstance(value, (pd.DataFrame, pd.Series)):
        frame = value.to_frame() if isinstance(value, pd.Series) else value
        try:
            rows = pd.util.hash_pandas_object(frame, index=True).to_numpy().tobytes()
        except TypeError:  # unhashable cells (lists, dicts)
            rows = pickle.dumps(frame, protocol=4)
        header = json.dumps([[str(c), str(t)] for c, t in frame.dtypes.items()])
        return {"table": hashlib.sha256(header.encode() + rows).hexdigest(), "rows": len(frame)}
    if isinstance(value, np.ndarray):
        return {"array": hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest(),
                "dtype": str(value.dtype), "shape": list(value.shape)}
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": repr(value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, os.PathLike):
        return {"path": os.fspath(value)}
    if isinstance(value, dict):
        return {"mapping": [[argument(k), argument(v)] for k, v in value.items()]}
    if isinstance(value, (list, tuple)):
        return {type(value).__name__: [argument(v) for v in value]}
    return {"pickled": hashlib.sha256(pickle.dumps(value, protocol=4)).hexdigest()}


@dataclasses.dataclass(frozen=True)
class FigureInputs(Inputs):
    """What a figure is drawn from: its plotting function (by its code), the file it draws, the
    style, its arguments (:func:`argument`) and the sha256 of the files it reads."""

    stage: ClassVar[str] = "figure"
    plot: Callable = dataclasses.field(metadata={"key": False})  # in the key by its code
    function: str
    file: str
    style: dict
    arguments: Any
    files: tuple[str, ...]

    @classmethod
    def of(cls, plot: Callable, out: Path, args: tuple, kwargs: dict, inputs=()) -> "FigureInputs":
        return cls(plot=plot, function=f"{plot.__module__}.{plot.__qualname__}", file=out.name, style=STYLE,
                   arguments=argument({"args": args, "kwargs": kwargs}),
                   files=tuple(sha256_file(Path(path)) for path in inputs))

    def code(self) -> tuple:
        return (self.plot,)


def _encode(value: Any, run_dir: Path) -> Any:
    """A plot's return value as JSON: None, a path (relative to the run directory), a string, or a
    tuple of those."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Path):
        return {"path": value.relative_to(run_dir).as_posix()}
    if isinstance(value, tuple):
        return {"tuple": [_encode(v, run_dir) for v in value]}
    raise TypeError(f"a plot returned {type(value).__name__}; figures return None, a path, or a tuple of paths and strings")


def _decode(value: Any, run_dir: Path) -> Any:
    if isinstance(value, dict) and "path" in value:
        return run_dir / value["path"]
    if isinstance(value, dict) and "tuple" in value:
        return tuple(_decode(v, run_dir) for v in value["tuple"])
    return value


def _workers() -> int:
    """``VALUES_SEG_REPORT_WORKERS`` where set (1: draw in this process), else one per core, at most 4."""
    requested = os.environ.get("VALUES_SEG_REPORT_WORKERS")
    if requested:
        try:
            return max(1, int(requested))
        except ValueError:
            raise ValueError(f"VALUES_SEG_REPORT_WORKERS must be a whole number, got {requested!r}") from None
    try:
        return max(1, min(4, len(os.sched_getaffinity(0))))
    except AttributeError:  # not on Linux
        return max(1, min(4, os.cpu_count() or 1))


#: Matplotlib settings of every figure (the caller's own settings are left as they were).
#: Unhinted text: matplotlib 3.11 shapes and hints each string through libraqm and FreeType's
#: hinter, which makes text the costliest part of a report figure; unhinted glyphs draw ~1.5x
#: faster and look as on screens that do not hint (measured: benchmarks/bench_quick_study.py).
STYLE = {"text.hinting": "no_hinting"}


def _draw(plot: Callable, args: tuple, kwargs: dict) -> Any:
    """``plot(*args, **kwargs)`` under :data:`STYLE`."""
    import matplotlib

    with matplotlib.rc_context(STYLE):
        return plot(*args, **kwargs)


def _done(value: Any) -> Future:
    f: Future = Future()
    f.set_result(value)
    return f


class Renderer:
    """Renders figures into ``run_dir/figures``; use as a context manager."""

    def __init__(self, run_dir: Path, workers: int | None = None):
        self.run_dir = Path(run_dir)
        self.index_path = self.run_dir / FIGURES / RENDER_INDEX
        self.workers = _workers() if workers is None else workers
        self._pool: Executor | None = None
        self._jobs: dict[Path, tuple[str, Future]] = {}
        self.reused = self.rendered = 0
        try:
            self._index = json.loads(self.index_path.read_text()) if self.index_path.exists() else {}
        except ValueError:
            self._index = {}

    def __enter__(self) -> Renderer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def key(self, plot: Callable, out: Path, args: tuple, kwargs: dict, inputs=()) -> str:
        """The key of the figure's declared inputs (:class:`FigureInputs`)."""
        return FigureInputs.of(plot, out, args, kwargs, inputs).key()

    def submit(self, plot: Callable, out: Path, *args: Any, inputs=(), **kwargs: Any) -> Future:
        """``plot(*args, **kwargs)``'s return value, as a future: from the last build when nothing
        changed, else rendered by a worker. ``out``: the file it draws; ``inputs``: files it reads."""
        out = run_directory.safe_path(self.run_dir, out)  # never drawn through a link
        if out in self._jobs:
            raise ValueError(f"figure {out.name} is drawn twice in one report")
        key = self.key(plot, out, args, kwargs, inputs)
        rel = out.relative_to(self.run_dir).as_posix()
        entry = self._index.get(rel)
        if entry and entry.get("key") == key and (entry.get("value") is None or
                                                  run_directory.intact(self.run_dir, out)):
            self.reused += 1
            future = _done(_decode(entry.get("value"), self.run_dir))
        else:
            self.rendered += 1
            run_directory.keep_users_file(self.run_dir, out)  # a user's file there is moved aside, never drawn over
            future = self._executor().submit(_draw, plot, args, kwargs)
            future.add_done_callback(lambda f, out=out: self._record(out, f))
        self._jobs[out] = (key, future)
        return future

    def _record(self, out: Path, future: Future) -> None:
        """Record a drawn figure in the marker as soon as it is drawn (a killed build leaves none unrecorded)."""
        if not future.cancelled() and future.exception() is None and out.is_file():
            run_directory.record(self.run_dir, [out])

    def compute(self, fn: Callable, *args: Any) -> Future:
        """``fn(*args)`` in a worker (heavy report statistics beside the figures), never cached."""
        return self._executor().submit(fn, *args)

    def kept(self) -> set[Path]:
        """The figure files of this build (drawn or kept)."""
        return {out for out, (_, f) in self._jobs.items() if f.done() and f.exception() is None
                and f.result() is not None and out.exists()}

    def _executor(self) -> Executor:
        if self._pool is None:
            if self.workers <= 1:
                self._pool = _InProcess()
            else:  # fork: the workers start at once and inherit the imports (the plots use no threads);
                # they end with this process, a kill -9 included (values_seg.runtime.worker_processes)
                method = "fork" if "fork" in multiprocessing.get_all_start_methods() else None
                self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context(method),
                                                 initializer=die_with_parent, initargs=(os.getpid(),))
        return self._pool

    def close(self) -> None:
        """Wait for every figure and write the index (only the figures of this build)."""
        index = {}
        for out, (key, future) in self._jobs.items():
            try:
                value = future.result()
            except Exception:  # noqa: BLE001 - the section that asked for it reports the error
                continue
            index[out.relative_to(self.run_dir).as_posix()] = {"key": key, "value": _encode(value, self.run_dir)}
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        if self._jobs:
            run_directory.write_owned(self.run_dir, self.index_path, json.dumps(index, sort_keys=True, indent=1))
            run_directory.record(self.run_dir, [self.index_path])


class _InProcess(Executor):
    """One worker: render right here (no process to start)."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        f: Future = Future()
        try:
            f.set_result(fn(*args, **kwargs))
        except Exception as e:  # noqa: BLE001 - delivered through the future
            f.set_exception(e)
        return f
