"""Per-case calibration bins of an evaluation (a payload file of its folder), for the bootstrap of the ACE
over cases and the ACE reference: ``[cases, measures, bins]`` arrays of count, summed confidence
and summed correctness, and which (case, measure) pairs are present."""

from __future__ import annotations

import io

import numpy as np

from values_seg.metrics import CalibrationBins

FIELDS = ("count", "confidence_sum", "correct_sum")


def to_bytes(case_bins: dict[tuple[str, str], CalibrationBins]) -> bytes:
    """The file's content; ``case_bins``: (case id, measure) -> that case's bins (all with the same
    number of bins)."""
    ids = {c: i for i, c in enumerate(sorted({c for c, _ in case_bins}))}
    names = {m: j for j, m in enumerate(sorted({m for _, m in case_bins}))}
    n_bins = next(iter(case_bins.values())).n_bins
    arrays = {f: np.zeros((len(ids), len(names), n_bins)) for f in FIELDS}
    present = np.zeros((len(ids), len(names)), dtype=bool)
    for (c, m), b in case_bins.items():
        i, j = ids[c], names[m]
        present[i, j] = True
        for f in FIELDS:
            arrays[f][i, j] = getattr(b, f)
    buf = io.BytesIO()
    np.savez_compressed(buf, case_ids=np.array(list(ids)), measures=np.array(list(names)), present=present, **arrays)
    return buf.getvalue()


def from_bytes(data: bytes | None) -> dict[str, dict[str, CalibrationBins]]:
    """measure -> case id -> bins; empty without the file (an evaluation without calibration)."""
    if data is None:
        return {}
    with np.load(io.BytesIO(data), allow_pickle=False) as data:
        a = {k: data[k] for k in data.files}  # each access of an npz member decompresses it again
    count = a["count"].astype(np.int64)
    return {m: {c: CalibrationBins(count[i, j], a["confidence_sum"][i, j], a["correct_sum"][i, j])
                for i, c in enumerate(a["case_ids"].tolist()) if a["present"][i, j]}
            for j, m in enumerate(a["measures"].tolist())}
