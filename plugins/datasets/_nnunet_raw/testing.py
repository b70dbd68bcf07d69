"""A small multi-rater data set written in nnU-Net v2's raw layout (for tests and examples), written
independently of this package's readers (docs/design-rationale.md,
"A data set in nnU-Net's raw layout").
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class WrittenCase:
    ident: str
    part: str  # "Tr" or "Ts"
    image: np.ndarray  # float32 [C, *spatial] as written
    raters: np.ndarray  # uint8 [R, *spatial] as written
    spacing: tuple[float, ...]  # SimpleITK order
    origin: tuple[float, ...]
    direction: tuple[float, ...]


def rotation(dims: int, degrees: float) -> tuple[float, ...]:
    """A direction matrix (row-major): rotation by ``degrees`` in the first two axes."""
    c, s = math.cos(math.radians(degrees)), math.sin(math.radians(degrees))
    m = np.eye(dims)
    m[:2, :2] = [[c, -s], [s, c]]
    return tuple(float(v) for v in m.ravel())


def _write(array: np.ndarray, path: Path, spacing, origin, direction) -> None:
    import SimpleITK as sitk

    image = sitk.GetImageFromArray(np.ascontiguousarray(array))
    image.SetSpacing([float(v) for v in spacing])
    image.SetOrigin([float(v) for v in origin])
    image.SetDirection([float(v) for v in direction])
    sitk.WriteImage(image, str(path), useCompression=True)


def _case(rng: np.random.Generator, shape: tuple[int, ...], channels: int, raters: int, offset: float):
    grid = np.indices(shape).astype(np.float32)
    centre = rng.uniform(0.4, 0.6, size=len(shape)) * np.asarray(shape)
    distance = np.sqrt(sum((g - c) ** 2 for g, c in zip(grid, centre)))
    radius = 0.25 * min(shape)
    image = rng.normal(0.0, 0.3, size=(channels, *shape)).astype(np.float32)
    image += (distance < radius).astype(np.float32) * np.arange(1, channels + 1, dtype=np.float32).reshape(
        (channels,) + (1,) * len(shape)) + offset
    masks = np.stack([(distance < radius * (0.8 + 0.2 * k)).astype(np.uint8) for k in range(raters)])
    return image, masks


def write_raw_dataset(
    folder: str | Path,
    dims: int = 2,
    shape: tuple[int, ...] | None = None,
    channels: int = 1,
    raters: int = 3,
    train: int = 6,
    test: int = 3,
    test_raters: int | None = None,
    offset: float = 0.0,
    seed: int = 0,
    name: str = "Tiny",
    prefix: str = "case",
    file_ending: str = ".nii.gz",
) -> dict[str, WrittenCase]:
    """Write ``folder`` (``dataset.json``, ``imagesTr``, ``labelsTr``, ``labelsTr_rater<k>``,
    ``imagesTs``, ``labelsTs``, ``labelsTs_rater<k>``); return what was written per case.

    ``raters=1`` writes no rater folders (the single label is the rater); ``offset`` shifts every
    intensity (an OoD data set).
    """
    from values_seg_plugins._nnunet.export import majority_vote

    folder = Path(folder)
    shape = tuple(shape or ((32, 32) if dims == 2 else (12, 16, 16)))
    if len(shape) != dims:
        raise ValueError(f"shape {shape} is not {dims}D")
    rng = np.random.default_rng(seed)
    written = {}
    plan = [("Tr", i, raters) for i in range(train)] + [("Ts", i, test_raters or raters) for i in range(test)]
    for part, i, n_raters in plan:
        ident = f"{prefix}_{part.lower()}{i:03d}"
        image, masks = _case(rng, shape, channels, n_raters, offset)
        spacing = tuple(round(0.5 + 0.25 * a + 0.05 * i, 4) for a in range(dims))
        origin = tuple(round(-10.0 + 3.0 * a + i, 4) for a in range(dims))
        direction = rotation(dims, 15.0 * (i % 3))
        for sub in (f"images{part}", f"labels{part}"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        for c in range(channels):
            _write(image[c], folder / f"images{part}" / f"{ident}_{c:04d}{file_ending}", spacing, origin, direction)
        _write(majority_vote(masks, 2).astype(np.uint8), folder / f"labels{part}" / f"{ident}{file_ending}", spacing,
               origin, direction)
        if n_raters > 1:
            for k in range(n_raters):
                (folder / f"labels{part}_rater{k}").mkdir(exist_ok=True)
                _write(masks[k], folder / f"labels{part}_rater{k}" / f"{ident}{file_ending}", spacing, origin, direction)
        written[ident] = WrittenCase(ident, part, image, masks, spacing, origin, direction)
    dataset_json = {
        "channel_names": {str(c): f"MR{c}" for c in range(channels)},
        "labels": {"background": 0, "object": 1},
        "numTraining": train,
        "file_ending": file_ending,
        "name": name,
    }
    (folder / "dataset.json").write_text(json.dumps(dataset_json, indent=2))
    return written
