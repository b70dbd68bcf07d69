"""Dataset contract: cases with an image, one or more rater masks and metadata, in splits.

The splits, the metadata every case carries and exchangeability: docs/design-rationale.md,
"Datasets"; an example: docs/guides/add-component.md.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from values_seg.storage.artifact import Inputs
from values_seg.storage.run_files import DATA_CHECKS

log = logging.getLogger("values_seg.components.dataset")

#: the parameter through which a dataset that reads files takes its data's fingerprint
#: (:meth:`Dataset.fingerprint`): given, changed files are refused; left ``None``, the runner sets
#: it to the current value (:func:`pin_fingerprint`), so every cache key changes with the data
FINGERPRINT = "fingerprint"


@dataclass
class Case:
    case_id: str
    image: np.ndarray  # float32 [in_channels, *spatial]
    raters: np.ndarray  # integer label maps [R, *spatial], 0 = background
    meta: dict = field(default_factory=dict)
    #: the exact per-pixel variance of the reference label distribution, where a dataset knows it
    #: (e.g. synthetic label switches); ``None``: the raters' variance (eq. 13) is used for NCC
    reference_variance: np.ndarray | None = None

    @property
    def spatial_shape(self) -> tuple[int, ...]:
        return tuple(self.image.shape[1:])

    def validate(self, dims: int, in_channels: int, num_classes: int, ignore_index: int | None = None) -> "Case":
        """Raise ``ValueError`` naming the case if shapes, dtypes or labels are inconsistent."""
        where = f"case {self.case_id!r}"
        if self.image.ndim != dims + 1 or self.image.shape[0] != in_channels:
            raise ValueError(f"{where}: image must be [{in_channels}, *{dims}D spatial], got {self.image.shape}")
        if not np.isfinite(self.image).all():
            raise ValueError(f"{where}: image contains NaN or infinite values")
        if self.raters.ndim != dims + 1 or tuple(self.raters.shape[1:]) != self.spatial_shape:
            raise ValueError(f"{where}: raters must be [R, *{self.spatial_shape}], got {self.raters.shape}")
        if self.raters.size and not np.issubdtype(self.raters.dtype, np.integer):
            raise ValueError(f"{where}: rater masks must be integer label maps, got {self.raters.dtype}")
        labels = self.raters if ignore_index is None else self.raters[self.raters != ignore_index]
        if labels.size and (labels.min() < 0 or labels.max() >= num_classes):
            raise ValueError(f"{where}: labels must lie in [0, {num_classes}), found {labels.min()}..{labels.max()}")
        v = self.reference_variance
        if v is not None and (tuple(v.shape) != self.spatial_shape or not np.isfinite(v).all() or (v < 0).any()):
            raise ValueError(f"{where}: reference_variance must be a finite, non-negative map of shape "
                             f"{self.spatial_shape}, got shape {tuple(v.shape)}")
        return self


class Dataset:
    """Base class of dataset plugins. Subclasses set the class attributes and implement
    :meth:`case_ids` and :meth:`load`; parameters go in ``__init__``."""

    dims: int = 2
    in_channels: int = 1
    num_classes: int = 2
    ignore_index: int | None = None
    #: the class Dice and GED leave out (foreground classes only, appendix A.1); ``None`` when every
    #: class is a real class (e.g. Cityscapes, whose class 0 is road)
    background: int | None = 0
    class_names: tuple[str, ...] = ("background", "foreground")

    def splits(self) -> list[str]:
        return ["train", "val", "test"]

    def training_label(self, raters: np.ndarray, u: float) -> np.ndarray:
        """The label map a training step uses for a case with masks ``raters`` ``[R, *spatial]``;
        ``u`` is uniform on [0, 1), drawn per sample and step from the training seed.

        Default: one rater at random (the paper trains on a random rater per sample). Override it
        to draw targets another way, e.g. random label switches redrawn at every load.
        """
        n = raters.shape[0]
        return raters[min(int(u * n), n - 1)]

    def fingerprint(self) -> str | None:
        """The current state of the files the dataset reads, or ``None`` when its parameters alone
        determine its data (e.g. generated data). A dataset that returns one declares a
        ``fingerprint`` parameter (:data:`FINGERPRINT`), refuses a given value that differs
        (:func:`check_fingerprint`), and the runner keys every cache by it."""
        return None

    def check_files(self, splits: Iterable[str] | None = None, progress: bool = True) -> int:
        """Read the files of the cases of ``splits`` (``None``: every split) once and raise one
        ``ValueError`` naming every unusable file (e.g. NaN or infinite image values), before any
        training. Returns the number of files read; default: nothing to check (0)."""
        return 0

    def case_ids(self, split: str) -> list[str]:
        raise NotImplementedError

    def load(self, case_id: str) -> Case:
        raise NotImplementedError

    def cases(self, split: str) -> Iterator[Case]:
        """Stream the cases of a split, one at a time."""
        for case_id in self.case_ids(split):
            yield self.load(case_id)

    def check_split(self, split: str) -> None:
        if split not in self.splits():
            raise ValueError(f"{type(self).__name__}: unknown split {split!r}; available: {', '.join(self.splits())}")


def check_fingerprint(where: str, given: str | None, current: str, hint: str = "") -> None:
    """Refuse data whose files changed since the fingerprint ``given`` was taken."""
    if given is not None and given != current:
        raise ValueError(f"{where}: the data changed since fingerprint {given} was taken (now {current}); cached "
                         f"results of the old files must not be reused: set fingerprint: {current}, or null to "
                         f"have the changed data recomputed{hint}")


def files_fingerprint(*paths: str | Path) -> str:
    """16 hex digits of the sha256 of the files' names and bytes: the fingerprint of a data set
    whose manifest records (and whose reader verifies) the sha256 of every other file."""
    from values_seg.storage.input_files import file_digest

    parts = [f"{Path(p).name}\0{file_digest(p)}" for p in paths]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def pin_fingerprint(ref):
    """``ref`` (a dataset :class:`~values_seg.registry.ComponentRef`) with its data's current
    fingerprint as its ``fingerprint`` parameter where it reads files and none is given, so that
    the keys of trainings, predictions and evaluations change whenever the files do. A fingerprint
    that notes the files it reads (:mod:`values_seg.storage.input_files`) lets the no-op rerun check them."""
    from values_seg.registry import ComponentRef

    from values_seg.storage import input_files

    params = dict(ref.kwargs)
    if FINGERPRINT not in params or params[FINGERPRINT] is not None:
        return ref
    with input_files.recording() as read:
        current = ref.create().fingerprint()
    if current is None:
        return ref
    if not read.stamps:  # its files are not known: a rerun cannot tell that they changed
        input_files.unnoted(f"dataset {ref.label} noted none of the files its fingerprint reads")
    return ComponentRef(ref.kind, ref.name, {**params, FINGERPRINT: current}, ref.label)


@dataclass(frozen=True)
class DataCheckInputs(Inputs):
    """A passed check of a dataset's files (:func:`check_data`): the dataset's key (its
    fingerprint included) and the splits checked (``None``: all)."""

    stage = "data_check"
    folder = DATA_CHECKS

    dataset: str
    splits: tuple[str, ...] | None


def check_data(refs, cache_dir: str | Path, progress: bool = True, splits: Iterable[str] | None = None) -> None:
    """:meth:`Dataset.check_files` (of ``splits``; ``None``: all) for every dataset of ``refs``
    (pinned ones: see :func:`pin_fingerprint`) whose files have not been checked in this state
    yet; a check that passed is remembered in the cache under the key of its
    :class:`DataCheckInputs` (the dataset's key holds the fingerprint), so a rerun on unchanged
    files reads nothing."""
    from values_seg.storage import cache_store
    from values_seg.storage.cache_store import CacheStore

    chosen = None if splits is None else sorted(set(splits))
    for ref in dict.fromkeys(refs):
        if dict(ref.kwargs).get(FINGERPRINT) is None:
            continue  # generated data: nothing on disk to check
        marker = CacheStore(cache_dir).outputs(DataCheckInputs(ref.key(), None if chosen is None else tuple(chosen)))
        if cache_store.check(marker, "data check record") is not None:
            continue
        n = ref.create().check_files(chosen, progress)
        log.info("dataset %s: %d files checked", ref.label, n)
        record = {"dataset": ref.to_dict(), "splits": chosen, "files": n}
        cache_store.write_verified(marker, json.dumps(record).encode(), {"what": "data check"})
