"""Every Aggrigator-named aggregation against the ``aggrigator`` package (0.1.0rc1, the test
extra) to 1e-6, on 2D maps of several shapes and class layouts."""

import warnings
import zlib

import numpy as np
import pytest
import torch
from aggrigator.methods import AggregationMethods as A
from aggrigator.spatial_decomposition import spatial_decomposition
from aggrigator.uncertainty_maps import UncertaintyMap

from values_seg import registry

SHAPES = [(8, 8), (13, 21), (32, 17)]


def layout(kind: str, shape, rng) -> np.ndarray:
    """Predicted label maps: blobs of three classes, background only, a thin line, random noise."""
    h, w = shape
    m = np.zeros(shape, dtype=np.int64)
    if kind == "blobs":
        m[h // 5: 3 * h // 4, w // 6: 2 * w // 3] = 1
        m[h // 2:, w // 2:] = 2
    elif kind == "line":
        m[:, w // 2] = 1
    elif kind == "noise":
        m = rng.integers(0, 3, shape)
    return m


def maps(shape, rng):
    """Uniform values, values with exact zeros and a plateau, a smooth gradient."""
    h, w = shape
    plateau = rng.random(shape)
    plateau[: h // 2, : w // 2] = 0.5
    plateau[-1, -1] = 0.0
    smooth = np.add.outer(np.linspace(0, 0.6, h), np.linspace(0, 0.4, w))
    return {"uniform": rng.random(shape), "plateau": plateau, "smooth": smooth}


CASES = [(shape, kind, name) for shape in SHAPES for kind in ("blobs", "background", "line", "noise")
         for name in ("uniform", "plateau", "smooth")]


def ours(name, u, mask, **params):
    agg = registry.create("aggregation", name, **params)
    return agg(torch.from_numpy(u.astype(np.float32)), prediction=torch.from_numpy(mask))


def theirs(method, u, mask, param=None):
    return float(method(UncertaintyMap(u.astype(np.float32), mask=mask), param))


def close(a, b):
    assert a == pytest.approx(b, abs=1e-6, rel=1e-6)


@pytest.mark.parametrize("shape, kind, name", CASES)
def test_map_statistics(shape, kind, name):
    rng = np.random.default_rng(zlib.crc32(repr((shape, kind, name)).encode()))
    u, mask = maps(shape, rng)[name], layout(kind, shape, rng)
    close(ours("max", u, mask), theirs(A.max, u, mask))
    close(ours("std", u, mask), theirs(A.std_dev, u, mask))
    close(ours("geometric_mean", u, mask), theirs(A.geometric_mean, u, mask))
    close(ours("harmonic_mean", u, mask), theirs(A.harmonic_mean, u, mask))
    for t in (0.2, 0.5, 0.9, 2.0):  # 2.0: no value above, 0 as Aggrigator
        close(ours("above_threshold_mean", u, mask, t=t), theirs(A.above_threshold_mean, u, mask, t))
    for q in (0.0, 0.2, 0.5, 0.9, 1.0):
        close(ours("above_quantile_mean", u, mask, q=q), theirs(A.above_quantile_mean, u, mask, q))
    close(ours("above_quantile_mean_fg_ratio", u, mask), theirs(A.above_quantile_mean_fg_ratio, u, mask))
    close(ours("morans_i", u, mask), theirs(A.morans_I, u, mask))
    close(ours("gearys_c", u, mask), theirs(A.gearys_C, u, mask))


@pytest.mark.parametrize("shape, kind, name", CASES)
def test_class_means(shape, kind, name):
    rng = np.random.default_rng(zlib.crc32(repr((shape, kind, name, 1)).encode()))
    u, mask = maps(shape, rng)[name], layout(kind, shape, rng)
    for label in np.unique(mask):
        close(ours("class_mean", u, mask, label=int(label)), theirs(A.class_mean, u, mask, int(label)))
        for nbhood in ("full", "star"):
            for thickness in (1, 2):
                param = {"id": int(label), "thickness": thickness, "nbhood": nbhood}
                params = {"label": int(label), "thickness": thickness, "nbhood": nbhood}
                close(ours("class_boundary_mean", u, mask, **params), theirs(A.class_boundary_mean, u, mask, param))
                with np.errstate(all="ignore"), warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # Aggrigator warns on an empty interior
                    interior = theirs(A.class_interior_mean, u, mask, param)
                if np.isnan(interior):  # empty interior: Aggrigator's NaN, our documented value
                    close(ours("class_interior_mean", u, mask, **params), u.astype(np.float32).astype(float).mean())
                else:
                    close(ours("class_interior_mean", u, mask, **params), interior)
    for include in (False, True):
        # Aggrigator's value without any included class is 0: our empty_value=0
        close(ours("class_mean_equal", u, mask, include_background=include, empty_value=0.0),
              theirs(A.class_mean_w_equal_weights, u, mask, include))
        close(ours("class_mean_occurrence", u, mask, include_background=include, empty_value=0.0),
              theirs(A.class_mean_weighted_by_occurrence, u, mask, include))


@pytest.mark.parametrize("shape", [(8, 8), (13, 21)])
@pytest.mark.parametrize("measure", ["entropy", "eds", "moran"])
@pytest.mark.parametrize("window", [3, 5])
def test_spatial_mass_ratio(shape, measure, window):
    rng = np.random.default_rng(window)
    for name, u in maps(shape, rng).items():
        u32 = u.astype(np.float32)
        ratio = spatial_decomposition(UncertaintyMap(u32), window, measure)[3]
        close(ours("spatial_mass_ratio", u, np.zeros(shape, np.int64), measure=measure, window=window), ratio)


def test_spatial_mass_ratio_parameters():
    rng = np.random.default_rng(0)
    u = rng.random((12, 10)).astype(np.float32)
    ratio = spatial_decomposition(UncertaintyMap(u), 3, "entropy", {"bins": 7})[3]
    close(ours("spatial_mass_ratio", u, np.zeros(u.shape, np.int64), measure="entropy", bins=7), ratio)
    ratio = spatial_decomposition(UncertaintyMap(u), 3, "eds", {"threshold": 1.1})[3]
    close(ours("spatial_mass_ratio", u, np.zeros(u.shape, np.int64), measure="eds", threshold=1.1), ratio)


def test_constant_map_autocorrelation_is_aggrigators_one():
    u, mask = np.full((6, 7), 0.5), np.zeros((6, 7), np.int64)
    assert ours("morans_i", u, mask) == theirs(A.morans_I, u, mask) == 1.0
    assert ours("gearys_c", u, mask) == theirs(A.gearys_C, u, mask) == 1.0
