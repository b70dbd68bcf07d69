"""The ``toy`` dataset plugin: registration, parameters, splits, lazily generated cases."""

import numpy as np
import pytest

from values_seg import registry
from values_seg.components.dataset import Case, Dataset
from values_seg.registry import Registry

from toy_data_generator import generate_case, plan

TABLE_1 = {"1": (200, 20, 0), "2": (200, 21, 42), "3a": (200, 21, 42), "3b": (200, 42, 21)}  # train, test iid, test OoD


@pytest.fixture(scope="module")
def reg():
    """A registry with only this plugin: other plugins' state cannot break these tests."""
    r = Registry(builtins=False, entry_points=False)
    r.load("values_seg_plugins.datasets.toy")
    return r


def test_registered_in_the_default_registry():
    assert "toy" in registry.names("dataset")
    ds = registry.create("dataset", "toy", scenario="2", dims=2, size=32)
    assert isinstance(ds, Dataset) and ds.splits() == ["train", "val", "test"]


def test_description_and_parameters(reg):
    comp = reg.get("dataset", "toy")
    assert comp.description.startswith("Toy spheres/cubes") and "\n" not in comp.description
    names = [p.name for p in comp.params]
    assert names[:4] == ["scenario", "dims", "size", "seed"]
    assert {"val_cases", "train_cases", "pool_iid", "pool_ood"} <= set(names)
    assert comp.source.endswith("datasets.toy")


@pytest.mark.parametrize("scenario", sorted(TABLE_1))
def test_splits_and_counts_equal_table_1(reg, scenario):
    ds = reg.create("dataset", "toy", scenario=scenario, dims=2, size=32)
    train, iid, ood = TABLE_1[scenario]
    assert len(ds.case_ids("train")) == train and len(ds.case_ids("val")) == 40
    test = [ds.spec(c) for c in ds.case_ids("test")]
    assert (sum(not s.ood for s in test), sum(s.ood for s in test)) == (iid, ood)


@pytest.mark.parametrize("dims,size", [(2, 32), (3, 24)])
def test_cases_follow_the_contract(reg, dims, size):
    ds = reg.create("dataset", "toy", scenario="3b", dims=dims, size=size, seed=4, train_cases=2, val_cases=1)
    assert ds.dims == dims and ds.in_channels == 1 and ds.num_classes == 2
    for split in ds.splits():
        for case in ds.cases(split):
            assert isinstance(case, Case)
            case.validate(dims, ds.in_channels, ds.num_classes)
            assert case.raters.shape[0] == 3
            assert case.meta["split"] == split and isinstance(case.meta["ood"], bool)
            assert case.meta["shift"] in ("none", "cube", "grey", "border")
            assert case.meta["ood"] == (case.meta["shift"] != "none")


def test_load_is_lazy_deterministic_and_matches_the_generator(reg):
    ds = reg.create("dataset", "toy", scenario="3a", dims=2, size=32, seed=7)
    cid = ds.case_ids("test")[-1]
    a, b = ds.load(cid), ds.load(cid)
    assert a.image.tobytes() == b.image.tobytes() and a.raters.tobytes() == b.raters.tobytes()
    spec = plan("3a")["test"][-1]
    ref = generate_case(spec, 2, 32, 7)
    assert np.array_equal(a.image, ref.image) and np.array_equal(a.raters, ref.raters)
    other = reg.create("dataset", "toy", scenario="3a", dims=2, size=32, seed=8).load(cid)
    assert not np.array_equal(a.image, other.image)


def test_pool_split_only_when_asked(reg):
    assert "pool" not in reg.create("dataset", "toy", scenario="2", size=32).splits()
    ds = reg.create("dataset", "toy", scenario="2", size=32, pool_iid=4, pool_ood=6)
    assert ds.splits() == ["train", "val", "test", "pool"]
    pool = [ds.spec(c) for c in ds.case_ids("pool")]
    assert sum(not s.ood for s in pool) == 4
    assert sorted(s.shift for s in pool if s.ood) == ["border", "border", "cube", "cube", "grey", "grey"]


def test_parameters_from_strings(reg):
    # key=value overrides arrive as strings
    ds = reg.create("dataset", "toy", scenario="3b", dims="3", size="24", seed="1", train_cases="4", val_cases="2")
    assert (ds.dims, ds.size, ds.seed) == (3, 24, 1)
    assert len(ds.case_ids("train")) == 4


@pytest.mark.parametrize(
    "params,message",
    [
        ({"scenario": "4"}, r"must be one of \['1', '2', '3a', '3b', 'lesions'\]"),
        ({"dims": 4}, "dims must be 2 or 3, got 4"),
        ({"dims": 2, "size": 20}, "size 20 is too small .* use size >= 32"),
        ({"dims": 3, "size": 16}, "size 16 is too small .* use size >= 22"),
        ({"val_cases": 0}, "val_cases must be an integer >= 1"),
        ({"seed": -3}, "seed must be a non-negative integer"),
    ],
)
def test_bad_parameters(reg, params, message):
    with pytest.raises(ValueError, match=message):
        reg.create("dataset", "toy", **params)


def test_direct_construction_errors_list_valid_scenarios(reg):
    ToyDataset = reg.get("dataset", "toy").obj
    with pytest.raises(ValueError, match="dataset 'toy': unknown toy scenario '9'; valid scenarios: 1, 2, 3a, 3b"):
        ToyDataset(scenario="9")


def test_unknown_split_and_case(reg):
    ds = reg.create("dataset", "toy", scenario="1", size=32)
    with pytest.raises(ValueError, match="unknown split 'pool'"):
        ds.case_ids("pool")
    with pytest.raises(KeyError, match="no case 'nope'"):
        ds.load("nope")
