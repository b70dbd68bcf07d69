"""Dataset contract: cases with an image, one or more rater masks and metadata, in splits.

Split names: ``train``, ``val`` (fits thresholds and Platt scaling), ``test`` and, for active
learning, ``pool`` (unlabeled: its masks are revealed only to a query). Every case's ``meta``
says at least ``ood`` (bool: shifted relative to training) and ``shift`` (str, "none" for
i.i.d. cases); datasets add what they know (``blurred``, ``scenario``, patient ids, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np


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
