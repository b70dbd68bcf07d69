"""Small synthetic GTA5 and Cityscapes trees in the official layouts, for tests and benchmarks
(docs/design-rationale.md, "GTA5 → Cityscapes", the synthetic trees).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from values_seg_plugins.datasets._gta_cityscapes.labels import table

GTA5_SHAPE = (1052, 1914)  # rows, columns of a GTA5 frame
CITYSCAPES_SHAPE = (1024, 2048)
_CELL = 8  # the scene is drawn on a grid of 8 x 8 pixel cells
# label ids: sky 23, building 11, vegetation 21, sidewalk 8, road 7, car 26, person 24, pole 17,
# static (void) 4, ego vehicle 1, traffic sign 20
_BANDS = ((0.0, 23), (0.25, 11), (0.45, 21), (0.6, 8), (0.7, 7))


def gta5_palette() -> list[int]:
    """The Cityscapes colours indexed by label id, as a flat 768-entry PIL palette."""
    palette = np.zeros((256, 3), dtype=np.uint8)
    for label_id, color in table().id_colors.items():
        palette[label_id] = color
    return palette.ravel().tolist()


def scene(shape: tuple[int, int], rng: np.random.Generator) -> np.ndarray:
    """A uint8 map of Cityscapes label ids of ``shape``."""
    rows, cols = -(-shape[0] // _CELL), -(-shape[1] // _CELL)
    y = np.arange(rows)[:, None] / rows + rng.uniform(-0.04, 0.04, size=(1, cols)).cumsum(axis=1) / cols * 4
    grid = np.zeros((rows, cols), dtype=np.uint8)
    for start, label_id in _BANDS:
        grid[y >= start + rng.uniform(-0.05, 0.05)] = label_id
    objects = ((26, 4, (6, 16)), (24, 5, (10, 3)), (17, 4, (30, 1)), (20, 2, (3, 3)), (4, 3, (5, 8)))
    for label_id, count, (h, w) in objects:  # id, at most this many, cells high x wide
        for _ in range(int(rng.integers(1, count + 1))):
            r, c = int(rng.integers(0, rows - h)), int(rng.integers(0, cols - w))
            grid[r: r + h, c: c + w] = label_id
    grid[-max(2, rows // 12):, :] = 1  # ego vehicle at the bottom (void)
    return np.repeat(np.repeat(grid, _CELL, axis=0), _CELL, axis=1)[: shape[0], : shape[1]]


def image_for(label_ids: np.ndarray, rng: np.random.Generator, shift: bool, noise: float) -> np.ndarray:
    """An RGB frame for a label map: Cityscapes colours (+ a domain shift) + Gaussian noise."""
    colors = np.zeros((256, 3), dtype=np.float32)
    for label_id, color in table().id_colors.items():
        colors[label_id] = color
    colors = np.maximum(colors, 30.0)  # void is dark grey, not black
    if shift:
        colors = colors * np.array([0.6, 0.7, 1.0], dtype=np.float32) + 10.0
    im = Image.fromarray(label_ids, mode="P")
    im.putpalette(np.rint(colors).astype(np.uint8).ravel().tolist())
    img = np.asarray(im.convert("RGB"))  # the palette lookup, in C
    if noise:
        jitter = rng.normal(0.0, noise, size=img.shape).astype(np.float32)
        img = np.clip(img + jitter, 0, 255).astype(np.uint8)
    return img


def _save(im: Image.Image, path: Path, compress_level: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    im.save(path, format="PNG", compress_level=compress_level)


def write_gta5_frame(root: Path, name: str, rng: np.random.Generator, shape=GTA5_SHAPE, noise: float = 4.0,
                     compress_level: int = 1) -> tuple[Path, Path]:
    label_ids = scene(shape, rng)
    image, label = Path(root) / "images" / f"{name}.png", Path(root) / "labels" / f"{name}.png"
    _save(Image.fromarray(image_for(label_ids, rng, False, noise), mode="RGB"), image, compress_level)
    lab = Image.fromarray(label_ids, mode="P")
    lab.putpalette(gta5_palette())
    _save(lab, label, compress_level)
    return image, label


def write_gta5_tree(root: str | Path, n: int, seed: int = 0, shape=GTA5_SHAPE, noise: float = 4.0,
                    compress_level: int = 1) -> list[str]:
    """``n`` frames ``images/00001.png``... and ``labels/00001.png``...; returns their names."""
    rng = np.random.default_rng(seed)
    names = [f"{i:05d}" for i in range(1, n + 1)]
    for name in names:
        write_gta5_frame(Path(root), name, rng, shape, noise, compress_level)
    return names


def write_cityscapes_frame(root: Path, split: str, city: str, index: int, rng: np.random.Generator,
                           shape=CITYSCAPES_SHAPE, noise: float = 4.0, compress_level: int = 1) -> tuple[Path, Path]:
    stem = f"{city}_{index:06d}_000019"
    label_ids = scene(shape, rng)
    image = Path(root) / "leftImg8bit" / split / city / f"{stem}_leftImg8bit.png"
    label = Path(root) / "gtFine" / split / city / f"{stem}_gtFine_labelIds.png"
    _save(Image.fromarray(image_for(label_ids, rng, True, noise), mode="RGB"), image, compress_level)
    _save(Image.fromarray(label_ids, mode="L"), label, compress_level)
    return image, label


def write_cityscapes_tree(root: str | Path, cities: dict[str, dict[str, int]], seed: int = 0,
                          shape=CITYSCAPES_SHAPE, noise: float = 4.0, compress_level: int = 1) -> list[str]:
    """Frames per split and city, e.g. ``{"train": {"aachen": 2}, "val": {"lindau": 1}}``;
    returns their names (``<city>_<seq>_000019``)."""
    rng = np.random.default_rng(seed)
    names = []
    for split, per_city in cities.items():
        for city, count in per_city.items():
            for i in range(count):
                write_cityscapes_frame(Path(root), split, city, i, rng, shape, noise, compress_level)
                names.append(f"{city}_{i:06d}_000019")
    return names


def write_small_trees(root: str | Path, gta5_frames: int = 8, cityscapes_train: int = 2, cityscapes_val: int = 2,
                      seed: int = 0, noise: float = 0.0) -> tuple[Path, Path]:
    """A GTA5 tree (``root/gta5``) and a Cityscapes tree (``root/cityscapes``: train frames split
    over the cities aachen and bochum, val frames in lindau), enough for the Figure 7 splits when
    ``gta5_frames >= cityscapes_train + 4``; returns both roots."""
    root = Path(root)
    write_gta5_tree(root / "gta5", gta5_frames, seed=seed, noise=noise)
    train = {"aachen": cityscapes_train - cityscapes_train // 2, "bochum": cityscapes_train // 2}
    write_cityscapes_tree(root / "cityscapes", {"train": {c: n for c, n in train.items() if n},
                                                "val": {"lindau": cityscapes_val}}, seed=seed + 1, noise=noise)
    return root / "gta5", root / "cityscapes"
