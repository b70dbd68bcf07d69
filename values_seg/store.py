"""The cache: one folder whose layout is known here and nowhere else.

A :class:`Store` over a run's cache folder (``RUN_DIR/cache`` or the config's ``cache_dir``)
holds one sub-folder per stage kind (:data:`KINDS`): ``checkpoints/`` (trained weights, one file
per training key), ``predictions/`` (each case's samples, per prediction key), ``evaluations/``
(one folder per evaluation key, with the scores) and ``data_checks/`` (a record per passed check
of a dataset's files); a plugin's stage declares its own. Every key is the digest of a stage's declared
inputs (:class:`values_seg.artifact.Inputs`); a stage, plugins included, asks the store for its
path (:meth:`Store.path`, :meth:`Store.outputs`) or the engine's typed view of its kind
(``CheckpointStore.of(store)``, ``PredictionCache.of(store, dtype)``) and never joins
``cache_dir / ...`` itself.

Writes are atomic and every stored file carries the one integrity record ``{"sha256", "size"}``
(:mod:`values_seg.checked_files`); a damaged entry is set aside as ``*.corrupt``
(:func:`values_seg.checked_files.set_aside`) and recomputed.

The cache marker (:data:`~values_seg.run_files.CACHE_MARKER`) records the :data:`LAYOUT` it was
written with. A cache of an older layout (keys derived another way) is recomputed once: its stage
folders are set aside as ``<kind>.layout-v<N>`` (kept, never deleted: remove them by hand), the
run prints one line saying so, and the marker is updated (:meth:`Store.upgrade`).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from pathlib import Path

from values_seg import safe_paths
from values_seg.run_files import CACHE_MARKER, CHECKPOINTS, CODE_DIGESTS, DATA_CHECKS, EVALUATIONS, PREDICTIONS

#: The core stages' kinds, each in the folder of that name; a plugin's stage declares its own
#: (:attr:`values_seg.artifact.Inputs.folder`).
KINDS = (CHECKPOINTS, PREDICTIONS, EVALUATIONS, DATA_CHECKS)

#: The cache layout: bumped when the keys or folders change, so an older cache is recomputed once.
#: 1: training and prediction keys of their own; 2: every key from declared ``Inputs``.
LAYOUT = 2

_KEY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_LAYOUT_LOCK = ".layout.lock"


class Store:
    """A run's cache folder; see the module docstring."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"Store({str(self.root)!r})"

    def folder(self, kind: str) -> Path:
        """The folder of one stage kind (:data:`KINDS`, or a plugin stage's own)."""
        if not _KEY.match(kind) or kind in (CACHE_MARKER, CODE_DIGESTS, _LAYOUT_LOCK) or ".layout-v" in kind:
            raise ValueError(f"unusable cache kind {kind!r}: a folder name of letters, digits, '.', '_' and '-' "
                             f"(the core stages': {', '.join(KINDS)})")
        return self.root / kind

    def path(self, kind: str, key: str) -> Path:
        """Where the entry ``key`` of ``kind`` is (or will be) stored."""
        if not _KEY.match(key):
            raise ValueError(f"unusable cache key {key!r} for {kind}: letters, digits, '.', '_' and '-' only")
        return self.folder(kind) / key

    def outputs(self, inputs) -> Path:
        """The folder of a stage's outputs (:class:`values_seg.artifact.Inputs`): its kind
        (``inputs.folder``), its key (``inputs.key()``)."""
        return self.path(inputs.folder, inputs.key())

    @property
    def code_digests(self) -> Path:
        """The source files' code digests kept between runs (:mod:`values_seg.provenance`)."""
        return self.root / CODE_DIGESTS

    # ------------------------------------------------------------------------- the layout

    def layout(self) -> int:
        """The layout recorded in the cache marker (1: a marker from before layouts were recorded)."""
        try:
            return int(json.loads((self.root / CACHE_MARKER).read_text()).get("layout", 1))
        except (OSError, ValueError, TypeError, AttributeError):
            return LAYOUT  # no marker yet: a new cache, written in this layout

    def upgrade(self) -> str | None:
        """Bring an older layout's cache to :data:`LAYOUT` (see the module docstring); returns the
        line that says so, or ``None`` when the cache is current. One process at a time."""
        marker = self.root / CACHE_MARKER
        if not marker.exists() or self.layout() >= LAYOUT:
            return None
        with open(safe_paths.safe_path(self.root, self.root / _LAYOUT_LOCK), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            old = self.layout()
            if old >= LAYOUT:  # another process upgraded it meanwhile
                return None
            kept = []
            for kind in KINDS:
                if self.folder(kind).exists():
                    target = self.root / f"{kind}.layout-v{old}"
                    if target.exists():
                        raise FileExistsError(f"cannot set aside {self.folder(kind)}: {target} exists; "
                                              f"move or remove it")
                    os.replace(self.folder(kind), target)
                    kept.append(target.name)
            data = json.loads(marker.read_text())
            data["layout"] = LAYOUT
            safe_paths.write_text(self.root, marker, json.dumps(data, indent=1, sort_keys=True))
        where = f"; its files are kept in {', '.join(kept)} (remove them by hand)" if kept else ""
        return (f"cache at {self.root} was written by an older layout (v{old}, keys derived another way); "
                f"recomputing once in layout v{LAYOUT}{where}")
