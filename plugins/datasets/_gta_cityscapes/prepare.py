"""``values-seg data gta-cityscapes prepare``: GTA5 + Cityscapes -> 256 x 478 frames, manifest, splits.

Each frame decoded, cropped, rescaled, relabelled and journalled as it is done, so a killed run resumes and
an unusable frame is skipped: docs/design-rationale.md, "GTA5 → Cityscapes".
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import multiprocessing
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from PIL import Image

from values_seg.storage.atomic import is_temporary
from values_seg.storage import atomic
from values_seg_plugins.datasets._gta_cityscapes import labels as cs_labels
from values_seg_plugins.datasets._gta_cityscapes import manifest as mf
from values_seg_plugins.datasets._gta_cityscapes import reading, transform
from values_seg_plugins.datasets._gta_cityscapes.layout import CITYSCAPES, GTA5, SOURCES, SourcePair, find_cityscapes, find_gta5
from values_seg_plugins.datasets._gta_cityscapes.splits import DEFAULT_SEED, figure7_splits
from values_seg.runtime.progress import meter

#: GTA5 frames whose image and label sizes differ in the official download
KNOWN_BROKEN_GTA5 = ("15188", "17705")


@dataclass
class PrepareSummary:
    out: Path
    prepared: int = 0  # frames processed in this run
    kept: int = 0  # frames kept from an earlier run
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0
    counts: dict = field(default_factory=dict)  # split part -> number of frames

    @property
    def images_per_second(self) -> float:
        return self.prepared / self.seconds if self.seconds > 0 else float("nan")

    def describe(self) -> str:
        text = (f"{self.prepared + self.kept} frames in {self.out} ({self.prepared} prepared now, {self.kept} kept) "
                f"in {self.seconds:.1f} s")
        if self.prepared:
            text += f", {self.images_per_second:.2f} frames/s"
        if self.counts:
            text += "\nsplits: " + ", ".join(f"{k} {v}" for k, v in self.counts.items())
        if self.problems:
            text += f"\n{len(self.problems)} file(s) skipped, see {self.out / mf.PROBLEMS}:"
            text += "".join(f"\n  - {p}" for p in self.problems[:10])
            if len(self.problems) > 10:
                text += f"\n  ... and {len(self.problems) - 10} more"
        return text


def output_paths(pair: SourcePair) -> dict[str, str]:
    """Output files of a frame, relative to the prepared folder."""
    return {"image": f"{pair.source}/images/{pair.name}.png", "label": f"{pair.source}/labels/{pair.name}.png"}


def _png_bytes(im: Image.Image) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format="PNG", compress_level=6)
    return buf.getvalue()


def label_png(train_ids: np.ndarray) -> Image.Image:
    """A training-id map as a palette PNG (indices = training ids, Cityscapes colours, 255 black)."""
    im = Image.fromarray(train_ids, mode="P")
    palette = np.zeros((256, 3), dtype=np.uint8)
    palette[: cs_labels.NUM_TRAIN_CLASSES] = cs_labels.table().train_colors
    im.putpalette(palette.ravel().tolist())
    return im


def process_pair(pair: SourcePair, out: Path) -> dict:
    """Prepare one frame and write its outputs; returns its manifest entry.

    Raises :class:`reading.SourceFileError` (or :class:`transform.CropError`) naming the file
    when the frame cannot be used."""
    image_bytes, image_rec = reading.read_bytes(pair.image)
    label_bytes, label_rec = reading.read_bytes(pair.label)
    image = reading.decode_image(image_bytes, pair.image)
    decode = reading.decode_gta5_label if pair.source == GTA5 else reading.decode_cityscapes_label
    label_ids = decode(label_bytes, pair.label)
    if image.shape[:2] != label_ids.shape:
        known = " (a known broken GTA5 frame)" if pair.source == GTA5 and pair.name in KNOWN_BROKEN_GTA5 else ""
        raise reading.SourceFileError(
            f"{pair.image}: image is {image.shape[1]} x {image.shape[0]} but its label {pair.label} is "
            f"{label_ids.shape[1]} x {label_ids.shape[0]}{known}"
        )
    small_image = transform.downscale_image(transform.center_crop(image, str(pair.image)))
    small_ids = transform.downscale_labels(transform.center_crop(label_ids, str(pair.label)))
    train_ids = cs_labels.to_train_ids(small_ids, str(pair.label))
    paths = output_paths(pair)
    outputs = {}
    for key, im in (("image", Image.fromarray(small_image, mode="RGB")), ("label", label_png(train_ids))):
        data = _png_bytes(im)
        target = out / paths[key]
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic.write(target, data, fsync=True)
        outputs[key] = {"path": paths[key], "size": len(data), "sha256": _sha256(data)}
    return {
        "case_id": pair.case_id, "source": pair.source, "name": pair.name,
        "source_split": pair.source_split, "city": pair.city,
        "source_shape": list(image.shape[:2]),
        "sources": {"image": image_rec.to_dict(), "label": label_rec.to_dict()},
        "outputs": outputs,
    }


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _job(args: tuple) -> tuple[str, dict | str]:
    """Worker: keep an intact earlier entry, or prepare the frame. ``("kept" | "done", entry)`` or
    ``("problem", message)``; never raises, so one bad frame cannot stop the others."""
    pair, out, previous = args
    try:
        if previous is not None and mf.sources_unchanged(previous, pair.image, pair.label) \
                and mf.outputs_intact(previous, out):
            return "kept", previous
        return "done", process_pair(pair, out)
    except (reading.SourceFileError, transform.CropError, cs_labels.UnknownLabelIds) as e:
        return "problem", f"{e}; skipped"
    except Exception as e:  # noqa: BLE001 - report anything else with the frame and go on
        return "problem", f"{pair.image}: {type(e).__name__}: {e}; skipped"


def _claim(out: Path) -> None:
    """Refuse to write into a non-empty folder that holds no preparation of ours."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a folder")
    if out.exists() and any(p.name != ".lock" for p in out.iterdir()) and not mf.is_ours(out):
        raise ValueError(f"--out {out} is not empty and holds no GTA5/Cityscapes preparation of values-seg; "
                         "choose an empty or new folder (nothing was written)")
    out.mkdir(parents=True, exist_ok=True)


def _remove_stale_tmp(out: Path) -> None:
    """Temporary files of our own that a killed run left behind."""
    for p in out.iterdir():
        if p.is_file() and is_temporary(p):
            p.unlink(missing_ok=True)
    for source in SOURCES:
        for sub in ("images", "labels"):
            folder = out / source / sub
            if folder.is_dir():
                for p in folder.iterdir():
                    if is_temporary(p):
                        p.unlink(missing_ok=True)


def check_roots(gta_root, cityscapes_root) -> None:
    """Both data sets are needed; say which one is missing and why."""
    missing = [name for name, root in (("--gta-root (GTA5: the i.i.d. training and test data)", gta_root),
                                        ("--cityscapes-root (Cityscapes: the OoD test set and pool)", cityscapes_root))
               if not root]
    if missing:
        raise ValueError("GTA5 -> Cityscapes needs local copies of both data sets; missing: " + " and ".join(missing))


def prepare(
    gta_root: str | Path | None,
    cityscapes_root: str | Path | None,
    out: str | Path,
    workers: int = 1,
    split_seed: int = DEFAULT_SEED,
    progress: bool = True,
) -> PrepareSummary:
    """Prepare (or resume preparing) both data sets into ``out``; see the module docstring."""
    check_roots(gta_root, cityscapes_root)
    if workers < 1:
        raise ValueError(f"--workers must be >= 1, got {workers}")
    start = time.time()
    layouts = [find_gta5(gta_root), find_cityscapes(cityscapes_root)]
    out = Path(out)
    _claim(out)
    lock = open(out / ".lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise ValueError(f"another preparation is writing to {out}; wait for it to finish") from None
    try:
        return _prepare_locked(layouts, out, workers, split_seed, progress, start)
    finally:
        lock.close()


def _prepare_locked(layouts, out: Path, workers: int, split_seed: int, progress: bool, start: float):
    key = mf.preprocessing_key()
    previous = mf.previous_entries(out, key)
    journal_path = out / mf.JOURNAL
    if mf.journal_key(journal_path) not in (None, key):
        journal_path.unlink()  # our journal of another preprocessing: nothing in it can be kept
    _remove_stale_tmp(out)
    summary = PrepareSummary(out)
    pairs = [p for layout in layouts for p in layout.pairs]
    for layout in layouts:
        summary.problems += layout.problems
    jobs = [(p, out, previous.get(p.case_id)) for p in pairs]
    entries: dict[str, dict] = {}
    journal = mf.Journal(journal_path, key)
    try:
        with meter(len(jobs), "prepare GTA5/Cityscapes", progress, unit="frame", leave=True) as bar:
            for status, value in _run_jobs(jobs, workers):
                if status == "problem":
                    summary.problems.append(value)
                else:
                    entries[value["case_id"]] = value
                    if status == "done":
                        journal.add(value)
                        summary.prepared += 1
                    else:
                        summary.kept += 1
                bar.advance()
    finally:
        journal.close()
    summary.seconds = time.time() - start
    ordered = {cid: entries[cid] for cid in sorted(entries)}
    mf.write_json_atomic(out / mf.MANIFEST, {
        "kind": mf.KIND, "format": mf.FORMAT, "preprocessing_key": key,
        "crop": list(transform.CROP), "size": list(transform.SIZE),
        "roots": {layout.source: str(layout.root) for layout in layouts},
        "cases": ordered,
    })
    journal_path.unlink(missing_ok=True)
    atomic.write(out / mf.PROBLEMS, "".join(f"{p}\n" for p in summary.problems).encode(), fsync=True)
    _write_splits(out, ordered, split_seed, summary)
    from values_seg_plugins.datasets._gta_cityscapes.preview import write_preview

    write_preview(out)
    return summary


def _run_jobs(jobs: list, workers: int):
    if workers == 1 or len(jobs) <= 1:
        yield from map(_job, jobs)
        return
    ctx = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads
    with ctx.Pool(workers) as pool:
        yield from pool.imap_unordered(_job, jobs, chunksize=2)


def _write_splits(out: Path, entries: dict, seed: int, summary: PrepareSummary) -> None:
    by_part = {
        GTA5: [cid for cid, e in entries.items() if e["source"] == GTA5],
        "train": [cid for cid, e in entries.items() if e["source"] == CITYSCAPES and e["source_split"] == "train"],
        "val": [cid for cid, e in entries.items() if e["source"] == CITYSCAPES and e["source_split"] == "val"],
    }
    if not by_part[GTA5]:
        raise ValueError(f"no usable GTA5 frames were prepared (see {out / mf.PROBLEMS}); cannot draw the splits")
    if not by_part["train"] or not by_part["val"]:
        raise ValueError(f"no usable Cityscapes {'train' if not by_part['train'] else 'val'} frames were prepared "
                         f"(see {out / mf.PROBLEMS}); cannot draw the splits")
    parts = figure7_splits(by_part[GTA5], by_part["train"], by_part["val"], seed)
    summary.counts = {k: len(v) for k, v in parts.items()}
    mf.write_json_atomic(out / mf.SPLITS, {"seed": seed, "counts": summary.counts, "splits": parts})
