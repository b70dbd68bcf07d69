"""Table 1 of the paper as data: counts, blur and shift mix per scenario and split."""

import pytest

from toy_data_generator import scenarios

# Table 1, read as in the issue: (train, train blurred, test i.i.d., of which blurred, test OoD)
TABLE_1 = {
    "1": (200, 200, 20, 20, 0),
    "2": (200, 0, 21, 0, 42),
    "3a": (200, 100, 21, 0, 42),
    "3b": (200, 100, 42, 21, 21),
}


@pytest.mark.parametrize("name", sorted(TABLE_1))
def test_counts_equal_table_1(name):
    train, train_blur, test_iid, test_iid_blur, test_ood = TABLE_1[name]
    p = scenarios.plan(name)
    assert len(p["train"]) == train
    assert sum(s.blurred for s in p["train"]) == train_blur
    assert not any(s.ood for s in p["train"] + p["val"])
    iid = [s for s in p["test"] if not s.ood]
    ood = [s for s in p["test"] if s.ood]
    assert (len(iid), sum(s.blurred for s in iid), len(ood)) == (test_iid, test_iid_blur, test_ood)
    # OoD test cases are sharp, the three shifts in equal parts
    assert not any(s.blurred for s in ood)
    for shift in scenarios.SHIFTS:
        assert sum(s.shift == shift for s in ood) == test_ood // 3
    assert set(p) == {"train", "val", "test"}


@pytest.mark.parametrize(
    "name,noise,sigma", [("1", False, 2.0), ("2", True, 0.0), ("3a", True, 8.0), ("3b", True, 8.0)]
)
def test_noise_and_blur_sigma(name, noise, sigma):
    p = scenarios.plan(name)
    specs = [s for split in p.values() for s in split]
    assert all(s.noise == noise for s in specs)
    assert {s.sigma for s in specs if s.blurred} <= {sigma}
    assert all(s.sigma == 0 for s in specs if not s.blurred)


def test_validation_split_default_and_mix():
    p = scenarios.plan("3a")
    assert len(p["val"]) == 40  # 20 % of 200, drawn in addition to the 200 training cases
    assert sum(s.blurred for s in p["val"]) == 20
    p = scenarios.plan("3a", val_cases=7)
    assert len(p["val"]) == 7 and sum(s.blurred for s in p["val"]) in (3, 4)


def test_train_override_keeps_blur_mix():
    p = scenarios.plan("3b", train_cases=10)
    assert len(p["train"]) == 10 and sum(s.blurred for s in p["train"]) == 5
    assert len(p["val"]) == 2
    assert len(p["test"]) == 63  # the test set stays Table 1's


def test_pool_only_when_requested():
    assert "pool" not in scenarios.plan("2", pool_iid=0, pool_ood=0)
    p = scenarios.plan("2", pool_iid=5, pool_ood=7)
    pool = p["pool"]
    assert sum(not s.ood for s in pool) == 5
    counts = [sum(s.shift == sh for s in pool) for sh in scenarios.SHIFTS]
    assert counts == [3, 2, 2]
    assert not any(s.blurred for s in pool if s.ood)
    # scenario 1 has only blurred data: its OoD pool is blurred too
    assert all(s.blurred for s in scenarios.plan("1", pool_ood=3)["pool"])


def test_indices_and_case_ids():
    p = scenarios.plan("3b", pool_iid=2, pool_ood=3)
    ids = [s.case_id for split in p.values() for s in split]
    assert len(ids) == len(set(ids))
    for split, specs in p.items():
        assert [s.index for s in specs] == list(range(len(specs)))
        assert all(s.split == split and s.case_id.startswith(f"toy3b_{split}_") for s in specs)


def test_unknown_scenario_lists_valid_ones():
    with pytest.raises(ValueError, match=r"unknown toy scenario '4'; valid scenarios: 1, 2, 3a, 3b"):
        scenarios.get_scenario("4")
    assert scenarios.get_scenario(2).name == "2"
    assert scenarios.get_scenario("3A").name == "3a"


@pytest.mark.parametrize("kwargs", [{"train_cases": 0}, {"val_cases": 0}, {"pool_iid": -1}, {"pool_ood": 1.5}])
def test_bad_counts(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        scenarios.plan("1", **kwargs)


@pytest.mark.parametrize("name", sorted(TABLE_1))
def test_exchangeable_with_validation_only_at_its_blurred_share(name):
    """A test case is exchangeable with the validation split (what conformal guarantees cover) when it
    is i.i.d. and its split has the training mixture's blurred share: Table 1's counts decide it."""
    train, train_blur, test_iid, test_iid_blur, _ = TABLE_1[name]
    p = scenarios.plan(name, val_cases=60, pool_iid=6, pool_ood=3)
    same_mix = test_iid_blur * train == train_blur * test_iid  # blurred shares equal, in integers
    assert all(s.exchangeable for s in p["val"] + p["train"])
    assert [s.exchangeable for s in p["test"] if not s.ood] == [same_mix] * test_iid
    assert not any(s.exchangeable for s in p["test"] + p["pool"] if s.ood)
    assert all(s.exchangeable for s in p["pool"] if not s.ood)
    assert same_mix == (name != "3a")  # 3a: an all-sharp i.i.d. test split, a half-blurred validation split


def test_generated_meta_says_exchangeable():
    from toy_data_generator.generator import generate_case

    p = scenarios.plan("3a", train_cases=4, val_cases=2)
    iid = next(s for s in p["test"] if not s.ood)
    assert generate_case(iid, 2, 32, seed=0).meta["exchangeable"] is False
    assert generate_case(p["val"][0], 2, 32, seed=0).meta["exchangeable"] is True
