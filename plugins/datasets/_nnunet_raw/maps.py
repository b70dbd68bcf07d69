"""Uncertainty maps as NIfTI in each case's own geometry, to open over the image in ITK-SNAP or 3D Slicer.

A step after the run, from the cached samples (nothing cached is predicted again); the files it writes:
docs/design-rationale.md, "A data set in nnU-Net's raw layout".
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import pandas as pd

from values_seg.storage.run_files import MAPS_INDEX
from values_seg.storage.run_files import UNCERTAINTY_MAPS as MAPS_DIR
from values_seg_plugins.datasets._nnunet_raw.geometry import write_image
from values_seg.runtime.progress import counted

if TYPE_CHECKING:
    from values_seg.config.experiment import Experiment


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(name)).strip("._") or "x"


def combination_folder(combo) -> str:
    parts = [combo.scenario, combo.model.label] + ([combo.backbone.label] if combo.backbone is not None else []) + [f"seed{combo.seed}"]
    return "__".join(_safe(p) for p in parts)


def _geometry(dataset, case_id: str, spatial: tuple[int, ...]) -> dict:
    meta = dataset.meta(case_id) if hasattr(dataset, "meta") else dataset.load(case_id).meta
    if "spacing" in meta:
        return meta
    dims = len(spatial)
    return {**meta, "spacing": [1.0] * dims, "origin": [0.0] * dims,
            "direction": [float(i == j) for i in range(dims) for j in range(dims)]}


def check_measures(cfg: Experiment, measures: Sequence[str] | None) -> list[str]:
    """The measure labels to write (all of the config's when ``measures`` is empty); unknown ones
    are an error that lists the config's."""
    available = [m.label for m in cfg.measures]
    if not measures:
        return available
    unknown = [m for m in measures if m not in available]
    if unknown:
        raise ValueError(f"--save-maps: unknown measure(s) {', '.join(unknown)}; this run has {', '.join(available)}")
    return list(dict.fromkeys(measures))


def save_maps(cfg: Experiment, run_dir: str | Path, measures: Sequence[str] | None = None,
              splits: Sequence[str] = ("test",), device: str | None = None, progress: bool = True) -> Path:
    """Write the maps of ``measures`` (labels in ``cfg.measures``; default all) for the cases of
    ``splits`` of every combination of ``cfg`` evaluated in ``run_dir``; returns ``index.csv``."""
    import torch

    from values_seg.storage import run_directory
    from values_seg.engine import Checkpoints, PredictionCache, predict_split
    from values_seg.storage.cache_store import CacheStore
    from values_seg.numerics.labels import class_argmax
    from values_seg.config.sweep import expand

    run_dir = Path(run_dir)
    wanted = check_measures(cfg, measures)
    cache_dir = run_directory.cache_dir(run_dir, cfg.cache_dir)
    store = Checkpoints.of(CacheStore(cache_dir))
    cache = PredictionCache.of(CacheStore(cache_dir), cfg.evaluation.prediction_dtype)
    root = run_dir / MAPS_DIR
    device = None if device in (None, "auto") else device
    rows = []
    for combo in expand(cfg):
        chosen = {m.label: m.create() for m, _ in combo.measures if m.label in wanted}
        if not chosen:
            continue
        model = combo.model.create()
        dataset = combo.dataset.create()
        for split in splits:
            if split not in dataset.splits():
                continue
            handles = predict_split(model, combo.specs, store, combo.dataset, split, cache, device=device,
                                    progress=progress, threads=int(cfg.threads))
            for handle in counted(handles, len(handles), f"maps {combo.name} {split}", progress):
                samples = handle.load()
                meta = _geometry(dataset, handle.case_id, tuple(samples.shape[2:]))
                folder = root / combination_folder(combo) / _safe(handle.case_id)
                folder.mkdir(parents=True, exist_ok=True)
                row = {**combo.context, "split": split, "case_id": handle.case_id, "ood": bool(meta.get("ood", False)),
                       "shift": meta.get("shift", "none"), "folder": folder.relative_to(root).as_posix()}
                if hasattr(dataset, "files"):
                    row["image_files"] = ";".join(dataset.files(handle.case_id)["images"])
                prediction = class_argmax(samples.mean(dim=0), dim=0)
                write_image(prediction.numpy(), folder / "prediction.nii.gz", meta)
                with torch.inference_mode():
                    for label, measure in chosen.items():
                        umap = measure(samples).float().numpy()
                        write_image(umap, folder / f"{_safe(label)}.nii.gz", meta)
                        row[label] = f"{row['folder']}/{_safe(label)}.nii.gz"
                rows.append(row)
    root.mkdir(parents=True, exist_ok=True)
    index = root / MAPS_INDEX
    run_directory.write_owned(run_dir, index, lambda tmp: pd.DataFrame(rows).to_csv(tmp, index=False))
    run_directory.record(run_dir, [index])  # values-seg's, replaced by the next --save-maps without a word
    return index
