"""Find image/label pairs in the official on-disk layouts of GTA5 and Cityscapes
(docs/design-rationale.md, "GTA5 → Cityscapes", the source layouts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

GTA5 = "gta5"
CITYSCAPES = "cityscapes"
SOURCES = (GTA5, CITYSCAPES)
CITYSCAPES_SPLITS = ("train", "val")  # the test split has no public labels
_CS_IMAGE = "_leftImg8bit.png"
_CS_LABEL = "_gtFine_labelIds.png"


class LayoutError(FileNotFoundError):
    """A data set root that does not have the official layout."""


@dataclass(frozen=True)
class SourcePair:
    """One frame of a source data set: its image and label files."""

    source: str  # "gta5" or "cityscapes"
    name: str  # "00001" (GTA5) or "aachen_000000_000019" (Cityscapes)
    image: Path
    label: Path
    source_split: str = ""  # Cityscapes: "train" or "val"
    city: str = ""

    @property
    def case_id(self) -> str:
        return f"{self.source}_{self.name}"


@dataclass
class Layout:
    """The pairs found under a root, and the files that could not be paired."""

    source: str
    root: Path
    pairs: list[SourcePair] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _visible_pngs(folder: Path) -> dict[str, Path]:
    return {p.name: p for p in sorted(folder.iterdir()) if p.suffix.lower() == ".png" and not p.name.startswith(".")}


def _require_dir(path: Path, what: str, expected: str) -> None:
    if not path.is_dir():
        raise LayoutError(f"{what}: no folder {path} (expected {expected})")


def find_gta5(root: str | Path) -> Layout:
    """Pairs ``images/NAME.png`` with ``labels/NAME.png``."""
    root = Path(root).absolute()
    expected = "images/NNNNN.png and labels/NNNNN.png, GTA5's official layout"
    _require_dir(root, "GTA5 root", expected)
    for sub in ("images", "labels"):
        _require_dir(root / sub, "GTA5 root", expected)
    images, labels = _visible_pngs(root / "images"), _visible_pngs(root / "labels")
    if not images:
        raise LayoutError(f"GTA5 root: no PNG images in {root / 'images'} (expected {expected})")
    layout = Layout(GTA5, root)
    for name, image in images.items():
        if name in labels:
            layout.pairs.append(SourcePair(GTA5, Path(name).stem, image, labels[name]))
        else:
            layout.problems.append(f"{image}: no label {root / 'labels' / name}; skipped")
    for name in sorted(set(labels) - set(images)):
        layout.problems.append(f"{labels[name]}: no image {root / 'images' / name}; skipped")
    return layout


def find_cityscapes(root: str | Path) -> Layout:
    """Pairs ``leftImg8bit/<split>/<city>/X_leftImg8bit.png`` with
    ``gtFine/<split>/<city>/X_gtFine_labelIds.png`` for the train and val splits."""
    root = Path(root).absolute()
    expected = "leftImg8bit/{train,val}/<city>/*_leftImg8bit.png and gtFine/{train,val}/<city>/*_gtFine_labelIds.png"
    _require_dir(root, "Cityscapes root", expected)
    for sub in ("leftImg8bit", "gtFine"):
        for split in CITYSCAPES_SPLITS:
            _require_dir(root / sub / split, "Cityscapes root", expected)
    layout = Layout(CITYSCAPES, root)
    for split in CITYSCAPES_SPLITS:
        image_root, label_root = root / "leftImg8bit" / split, root / "gtFine" / split
        cities = sorted({p.name for p in image_root.iterdir() if p.is_dir() and not p.name.startswith(".")}
                        | {p.name for p in label_root.iterdir() if p.is_dir() and not p.name.startswith(".")})
        found = 0
        for city in cities:
            image_dir, label_dir = image_root / city, label_root / city
            images = _visible_pngs(image_dir) if image_dir.is_dir() else {}
            labels = _visible_pngs(label_dir) if label_dir.is_dir() else {}
            image_names = {n[: -len(_CS_IMAGE)]: p for n, p in images.items() if n.endswith(_CS_IMAGE)}
            label_names = {n[: -len(_CS_LABEL)]: p for n, p in labels.items() if n.endswith(_CS_LABEL)}
            for name, image in image_names.items():
                if name in label_names:
                    layout.pairs.append(SourcePair(CITYSCAPES, name, image, label_names[name], split, city))
                    found += 1
                else:
                    layout.problems.append(f"{image}: no label {label_dir / (name + _CS_LABEL)}; skipped")
            for name in sorted(set(label_names) - set(image_names)):
                layout.problems.append(f"{label_names[name]}: no image {image_dir / (name + _CS_IMAGE)}; skipped")
        if not found:
            raise LayoutError(f"Cityscapes root: no image/label pairs in {image_root} and {label_root} "
                              f"(expected {expected})")
    return layout
