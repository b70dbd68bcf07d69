"""Cityscapes label ids -> the 19 training ids, built from the official table
(docs/design-rationale.md, "GTA5 → Cityscapes", label ids).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

IGNORE_INDEX = 255
NUM_TRAIN_CLASSES = 19
_UNKNOWN = -1  # table entry of a label id that the official table does not define


class UnknownLabelIds(ValueError):
    """Label ids that the official Cityscapes table does not define."""


def official_labels() -> list:
    """The official ``labels`` list of ``cityscapesscripts`` (installed with ``values-seg[gta]``)."""
    try:
        from cityscapesscripts.helpers.labels import labels
    except ImportError as e:  # pragma: no cover - the gta extra installs it
        raise ImportError(
            "GTA5/Cityscapes needs the official Cityscapes label definitions: "
            "pip install 'values-seg[gta]' (the cityscapesscripts package)"
        ) from e
    return list(labels)


@dataclass(frozen=True)
class LabelTable:
    """Lookup tables derived from the official label list."""

    #: ``lut[id + 1]``: training id (0..18, or 255 = ignore) of label id ``id`` in -1..255;
    #: -1 where the table does not define the id
    lut: np.ndarray
    #: names of the training classes 0..18
    train_names: tuple[str, ...]
    #: RGB colour of each training class 0..18 (Cityscapes colours)
    train_colors: np.ndarray
    #: RGB colour of each defined label id >= 0 (the GTA5 palette), ``{id: (r, g, b)}``
    id_colors: dict
    #: name of each defined label id, ``{id: name}``
    id_names: dict

    def train_id(self, label_id: int) -> int:
        """The training id of one label id (255 = ignore); raises for an undefined id."""
        if not -1 <= label_id <= 255 or self.lut[label_id + 1] == _UNKNOWN:
            raise UnknownLabelIds(f"label id {label_id} is not defined in the Cityscapes label table")
        return int(self.lut[label_id + 1])

    @property
    def known_ids(self) -> np.ndarray:
        return np.flatnonzero(self.lut != _UNKNOWN) - 1


@functools.cache
def table() -> LabelTable:
    """The label table (built once per process)."""
    labels = official_labels()
    lut = np.full(257, _UNKNOWN, dtype=np.int16)
    names: dict[int, str] = {}
    colors: dict[int, tuple] = {}
    id_colors, id_names = {}, {}
    for label in labels:
        id_names[label.id] = label.name
        train = label.trainId if 0 <= label.trainId < NUM_TRAIN_CLASSES else IGNORE_INDEX
        lut[label.id + 1] = train
        if label.id >= 0:
            id_colors[label.id] = tuple(label.color)
        if train != IGNORE_INDEX and train not in names:  # the first label of a train id names it
            names[train] = label.name
            colors[train] = tuple(label.color)
    if sorted(names) != list(range(NUM_TRAIN_CLASSES)):
        raise ValueError(f"the Cityscapes label table defines training ids {sorted(names)}, expected 0..18")
    return LabelTable(
        lut=lut,
        train_names=tuple(names[i] for i in range(NUM_TRAIN_CLASSES)),
        train_colors=np.array([colors[i] for i in range(NUM_TRAIN_CLASSES)], dtype=np.uint8),
        id_colors=id_colors,
        id_names=id_names,
    )


def present_ids(label_ids: np.ndarray) -> np.ndarray:
    """The distinct values of an unsigned label map (one bincount, no sort)."""
    if label_ids.dtype not in (np.uint8, np.uint16):
        return np.unique(label_ids)
    return np.flatnonzero(np.bincount(label_ids.ravel(), minlength=1))


def check_known(label_ids: np.ndarray, where: str) -> None:
    """Raise :class:`UnknownLabelIds` naming ``where`` if the map holds an undefined id."""
    ids = present_ids(label_ids)
    lut = table().lut
    unknown = [int(i) for i in ids if not -1 <= i <= 255 or lut[int(i) + 1] == _UNKNOWN]
    if unknown:
        known = table().known_ids
        raise UnknownLabelIds(
            f"{where}: label id(s) {unknown} are not Cityscapes label ids "
            f"(the official table defines {int(known.min())}..{int(known.max())})"
        )


def to_train_ids(label_ids: np.ndarray, where: str = "label map") -> np.ndarray:
    """Label ids -> training ids (uint8: 0..18, 255 = ignore), one table lookup per pixel."""
    check_known(label_ids, where)
    lut = table().lut.astype(np.uint8)  # the check above rules out the -1 (unknown) entries
    return lut[label_ids.astype(np.int16) + 1]


def train_class_names() -> tuple[str, ...]:
    return table().train_names
