"""The files of an nnU-Net v2 raw data set folder: cases, channels, raters, checked from headers.

The layout, the raters convention and what is checked or skipped: docs/design-rationale.md,
"A data set in nnU-Net's raw layout".
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from values_seg.storage.input_files import file_digest, note
from values_seg_plugins.datasets._nnunet_raw.dataset_json import DatasetInfo, LayoutError, read_dataset_json
from values_seg_plugins.datasets._nnunet_raw.geometry import Geometry, read_geometry

PARTS = ("Tr", "Ts")
_RATER_DIR = re.compile(r"^labels(Tr|Ts)_rater(\d+)$")
_SHOWN = 5  # names listed in a message before "..."


@dataclass(frozen=True)
class RawCase:
    """One case of the folder: its channel files, its rater label files and its geometry."""

    ident: str  # nnU-Net case identifier
    part: str  # "Tr" or "Ts"
    images: tuple[Path, ...]  # one file per channel, in channel order
    raters: tuple[Path, ...]  # one label file per rater
    geometry: Geometry


@dataclass
class RawFolder:
    folder: Path
    info: DatasetInfo
    cases: dict[str, RawCase]  # identifier -> case; imagesTr first, then imagesTs, sorted
    rater_folders: dict[str, list[str]]  # part -> the folders the raters come from
    skipped: dict[str, str] = field(default_factory=dict)  # "<part>/<identifier>" -> why
    fingerprint: str = ""  # sha256 over (relative path, size, mtime) of every file read
    files: tuple[Path, ...] = ()  # every file of the data set (dataset.json, images, labels)

    @property
    def dims(self) -> int:
        return next(iter(self.cases.values())).geometry.dims

    def part(self, part: str) -> list[RawCase]:
        return [c for c in self.cases.values() if c.part == part]


def _names(items) -> str:
    items = sorted(items)
    return ", ".join(items[:_SHOWN]) + (f", ... ({len(items)} in all)" if len(items) > _SHOWN else "")


def _files(folder: Path, ending: str) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.name.endswith(ending) and not p.name.startswith("."))


def _image_cases(folder: Path, info: DatasetInfo) -> dict[str, list[Path]]:
    """identifier -> channel files, with every channel present exactly once."""
    ending = info.file_ending
    pattern = re.compile(r"^(.+)_(\d{4})" + re.escape(ending) + "$")
    channels: dict[str, dict[int, Path]] = {}
    found_files = _files(folder, ending)
    others = sorted(p.name for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    if others and not found_files:
        raise LayoutError(f"{folder}: no file ends with the file_ending {ending!r} that {info.path} declares "
                          f"(found {_names(others)}); set file_ending to the files' ending")
    for path in found_files:
        match = pattern.match(path.name)
        if not match:
            raise LayoutError(f"{path}: image files must be named <case>_<4-digit channel>{ending}, "
                              f"e.g. case_001_0000{ending}")
        channels.setdefault(match.group(1), {})[int(match.group(2))] = path
    out = {}
    for ident, found in sorted(channels.items()):
        extra = sorted(c for c in found if c >= info.in_channels)
        if extra:
            raise LayoutError(f"{found[extra[0]]}: channel {extra[0]} but {info.path} declares "
                              f"{info.in_channels} channel(s) ({', '.join(info.channel_names)})")
        missing = [c for c in range(info.in_channels) if c not in found]
        if missing:
            expected = folder / f"{ident}_{missing[0]:04d}{ending}"
            raise LayoutError(f"{expected} is missing: case {ident!r} needs one file per channel of {info.path} "
                              f"({', '.join(f'_{c:04d}' for c in range(info.in_channels))})")
        out[ident] = [found[c] for c in range(info.in_channels)]
    return out


def _label_files(folder: Path, ending: str) -> dict[str, Path]:
    return {p.name[: -len(ending)]: p for p in _files(folder, ending)}


def _rater_dirs(root: Path, part: str) -> list[Path]:
    found = []
    for p in root.iterdir():
        match = _RATER_DIR.match(p.name)
        if p.is_dir() and match and match.group(1) == part:
            found.append((int(match.group(2)), p))
    return [p for _, p in sorted(found)]


def _labels_of_part(root: Path, part: str, images: dict[str, list[Path]], info: DatasetInfo, training: bool
                    ) -> tuple[dict[str, list[Path]], list[str]]:
    """identifier -> rater label files for the labelled cases of ``part``; the folders used."""
    ending = info.file_ending
    main = root / f"labels{part}"
    raters = _rater_dirs(root, part)
    folders = ([main] if main.is_dir() else []) + raters
    if part == "Tr" and training and not main.is_dir():
        raise LayoutError(f"{main} is missing: nnU-Net's raw layout needs labelsTr/ beside imagesTr/")
    labels = {f: _label_files(f, ending) for f in folders}
    for folder, files in labels.items():
        orphans = sorted(set(files) - set(images))
        if orphans:
            raise LayoutError(f"{files[orphans[0]]}: a label without images (no {root / f'images{part}'}/"
                              f"{orphans[0]}_0000{ending}); {len(orphans)} such file(s) in {folder.name}/")
    if part == "Tr" and training:
        unlabelled = sorted(set(images) - set(labels[main]))
        if unlabelled:
            raise LayoutError(f"{images[unlabelled[0]][0]}: training image without a label {main / (unlabelled[0] + ending)}"
                              f" ({len(unlabelled)} such case(s): {_names(unlabelled)})")
    if len(folders) > 1:
        reference = folders[0]
        for folder in folders[1:]:
            a, b = set(labels[reference]), set(labels[folder])
            if a != b:
                parts = []
                if a - b:
                    parts.append(f"missing {_names(a - b)}")
                if b - a:
                    parts.append(f"extra {_names(b - a)}")
                raise LayoutError(f"{folder}: rater folders must hold the same case names as {reference.name}/; "
                                  f"{folder.name}/ has {'; '.join(parts)}")
    sources = raters or folders
    labelled = sorted(set(labels[sources[0]])) if sources else []
    return {ident: [labels[f][ident] for f in sources] for ident in labelled}, [f.name for f in sources]


def _check_case(images: list[Path], raters: list[Path], dims: list) -> tuple[Geometry, str | None]:
    """Geometry of the case's first channel and why it is skipped (``None``: it is fine)."""
    reference, problem = None, None
    for path in images + raters:
        geometry, components = read_geometry(path)
        if components != 1:
            raise LayoutError(f"{path}: {components} components per pixel; values-seg reads one value per pixel "
                              "(store colour or multi-channel images as separate _0000, _0001 files)")
        if geometry.dims not in (2, 3):
            raise LayoutError(f"{path}: a {geometry.dims}D image; values-seg reads 2D and 3D images "
                              "(one file per channel)")
        if not dims:
            dims.append((geometry.dims, path))
        elif geometry.dims != dims[0][0]:
            raise LayoutError(f"{path}: a {geometry.dims}D image, but {dims[0][1]} is {dims[0][0]}D; all images of a "
                              "data set must have the same number of dimensions")
        if reference is None:
            reference = geometry
        elif problem is None:
            diff = geometry.mismatch(reference)
            if diff:
                problem = f"{path.parent.name}/{path.name} disagrees with {images[0].name} in {diff}"
    return reference, problem


#: how a data set's files are fingerprinted: ``stat`` (names, sizes, modification times: cheap,
#: the default) or ``content`` (sha256 of every byte: immune to copies and touched files, reads all)
FINGERPRINT_MODES = ("stat", "content")


def stat_fingerprint(paths, root: Path | None = None) -> str:
    """sha256 over (name, size, modification time in ns) of the files, names relative to ``root``
    where given: changes whenever one of them does."""
    digest = hashlib.sha256()
    paths = sorted(paths, key=str)
    note(paths)  # the no-op rerun checks them as this fingerprint does
    for path in paths:
        st = os.stat(path)
        name = Path(path).relative_to(root).as_posix() if root is not None else str(path)
        digest.update(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def content_fingerprint(paths, root: Path | None = None) -> str:
    """sha256 over (name, sha256 of the bytes) of the files, names relative to ``root`` where given
    (each file hashed once per process while its size and modification time stay)."""
    digest = hashlib.sha256()
    for path in sorted(paths, key=str):
        name = Path(path).relative_to(root).as_posix() if root is not None else str(path)
        digest.update(f"{name}\0{file_digest(path)}\n".encode())
    return digest.hexdigest()


_SCANS: dict[tuple[str, str], RawFolder] = {}


def scan_folder(folder: str | Path, training: bool = True) -> RawFolder:
    """Find and check the cases of a raw data set folder (headers only; cached per process while
    no file changes). ``training=False`` (an OoD data set, used for testing only): ``imagesTr/`` and
    ``labelsTr/`` are optional and training images may lack labels (those cases are skipped)."""
    root = Path(folder).expanduser().resolve()
    info = read_dataset_json(root)
    images = {}
    for part in PARTS:
        d = root / f"images{part}"
        if part == "Tr" and training and not d.is_dir():
            raise LayoutError(f"{d} is missing: nnU-Net's raw layout needs imagesTr/ beside {info.path.name}")
        images[part] = _image_cases(d, info) if d.is_dir() else {}
    both = sorted(set(images["Tr"]) & set(images["Ts"]))
    if both:
        raise LayoutError(f"{images['Ts'][both[0]][0]}: case {both[0]!r} is both in imagesTr/ and imagesTs/; "
                          "case names must be unique")
    labels, sources = {}, {}
    for part in PARTS:
        needed = images[part] or (part == "Tr" and training)
        labels[part], sources[part] = _labels_of_part(root, part, images[part], info, training) if needed else ({}, [])
    if training and len(images["Tr"]) != info.num_training:
        raise LayoutError(f"{info.path}: numTraining is {info.num_training} but imagesTr/ holds "
                          f"{len(images['Tr'])} case(s)")
    files = [info.path] + [p for part in PARTS for paths in images[part].values() for p in paths] + \
        [p for part in PARTS for paths in labels[part].values() for p in paths]
    for part in PARTS:  # labels<Tr|Ts>/ beside rater folders: not read, yet part of the data set
        main = root / f"labels{part}"
        if main.is_dir() and sources[part] and sources[part][0] != main.name:
            files += list(_label_files(main, info.file_ending).values())
    key = (f"{root}|{training}", stat_fingerprint(files, root))
    if key in _SCANS:
        return _SCANS[key]

    cases, skipped, dims = {}, {}, []
    for part in PARTS:
        for ident, paths in images[part].items():
            if ident not in labels[part]:
                skipped[f"{part}/{ident}"] = f"images{part}/{ident}: no label in {', '.join(sources[part]) or f'labels{part}/'}"
                continue
            geometry, problem = _check_case(paths, labels[part][ident], dims)
            if problem:
                skipped[f"{part}/{ident}"] = f"geometry: {problem}"
                continue
            cases[ident] = RawCase(ident, part, tuple(paths), tuple(labels[part][ident]), geometry)
    if not cases:
        raise LayoutError(f"{root}: no usable case (skipped: {_names(f'{k} ({v})' for k, v in skipped.items())})")
    scan = RawFolder(root, info, cases, sources, skipped, key[1], tuple(sorted(files)))
    _SCANS[key] = scan
    return scan


def data_fingerprint(folder: str | Path, ood_folder: str | Path | None = None, extra_files=(),
                     mode: str = "stat") -> str:
    """16 hex digits identifying the state of every file a data set reads: its folder, its OoD
    folder and ``extra_files`` (the cases CSV, ``splits_final.json``); ``mode`` is one of
    :data:`FINGERPRINT_MODES`."""
    if mode not in FINGERPRINT_MODES:
        raise ValueError(f"fingerprint_mode must be one of {', '.join(FINGERPRINT_MODES)}, got {mode!r}")
    scans = [scan_folder(folder)] + ([scan_folder(ood_folder, training=False)] if ood_folder else [])
    extra = [Path(f) for f in extra_files]
    if mode == "stat":
        parts = [s.fingerprint for s in scans] + [stat_fingerprint(extra)]
    else:
        parts = [content_fingerprint(s.files, s.folder) for s in scans] + [content_fingerprint(extra)]
    return hashlib.sha256(f"{mode}|{'|'.join(parts)}".encode()).hexdigest()[:16]
