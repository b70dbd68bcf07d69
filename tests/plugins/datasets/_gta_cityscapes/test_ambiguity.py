"""Label switches (appendix B.3): exact and sampled frequencies, independence, the variance map."""

import itertools

import numpy as np
import pytest

from values_seg_plugins.datasets._gta_cityscapes import ambiguity

# training ids by hand (Cityscapes): road 0, sidewalk 1, building 2, vegetation 8, sky 10, person 11, car 13
ROAD, SIDEWALK, BUILDING, VEGETATION, SKY, PERSON, CAR = 0, 1, 2, 8, 10, 11, 13
# twins in the order sidewalk, person, car, vegetation, road -> 19..23
TWIN = {SIDEWALK: 19, PERSON: 20, CAR: 21, VEGETATION: 22, ROAD: 23}
SCENE = np.array([[ROAD, SIDEWALK, BUILDING, VEGETATION], [SKY, PERSON, CAR, 255], [ROAD, ROAD, CAR, 4]], np.uint8)


def switched_classes(maps: np.ndarray) -> np.ndarray:
    """[N, 5] bool: which of sidewalk, person, car, vegetation, road each map shows as its twin,
    checking that a class is switched everywhere or nowhere."""
    out = []
    for source, twin in TWIN.items():
        pixels = maps[:, SCENE == source]
        all_twin, all_source = (pixels == twin).all(axis=1), (pixels == source).all(axis=1)
        assert (all_twin | all_source).all(), "a class switched only in part"
        out.append(all_twin)
    return np.stack(out, axis=1)


def test_classes_and_twins():
    assert ambiguity.switchable_ids() == (SIDEWALK, PERSON, CAR, VEGETATION, ROAD)
    names = ambiguity.class_names()
    assert len(names) == ambiguity.NUM_CLASSES == 24
    assert names[19:] == ("sidewalk_2", "person_2", "car_2", "vegetation_2", "road_2")


def test_switch_changes_whole_classes_only_and_unswitch_inverts_it():
    for pattern in itertools.product([False, True], repeat=5):
        out = ambiguity.switch(SCENE, pattern)
        expected = SCENE.copy()
        for on, (source, twin) in zip(pattern, TWIN.items()):
            if on:
                expected[SCENE == source] = twin
        assert np.array_equal(out, expected)
        assert np.array_equal(ambiguity.unswitch(out), SCENE)


def test_switch_draws_from_u_are_exactly_one_third_and_independent():
    """Over the 243 equally likely values of floor(243 u), every pattern of the 5 switches occurs
    prod(1 if on else 2) times: the product of independent Bernoulli(1/3) probabilities x 243."""
    draws = np.array([ambiguity.switches_from_uniform((k + 0.5) / 243) for k in range(243)])
    assert (draws.sum(axis=0) == 81).all()
    for pattern in itertools.product([False, True], repeat=5):
        count = int((draws == np.array(pattern)).all(axis=1).sum())
        assert count == np.prod([1 if on else 2 for on in pattern]), pattern
    with pytest.raises(ValueError):
        ambiguity.switches_from_uniform(1.0)


def binomial_ok(count, n, p, z=4.5) -> bool:
    return abs(count / n - p) <= z * np.sqrt(p * (1 - p) / n)


def test_sampled_training_switches_frequency_and_independence():
    n = 20_000
    u = np.random.default_rng(0).random(n)
    maps = np.stack([ambiguity.switch(SCENE, ambiguity.switches_from_uniform(x)) for x in u])
    on = switched_classes(maps)
    for k in range(5):
        assert binomial_ok(on[:, k].sum(), n, 1 / 3), (k, on[:, k].mean())
    for i, j in itertools.combinations(range(5), 2):
        assert binomial_ok((on[:, i] & on[:, j]).sum(), n, 1 / 9), (i, j)


def test_reference_samples_frequency_independence_and_determinism():
    n = 6000
    maps = ambiguity.reference_samples(SCENE, np.random.default_rng(3), n)
    assert maps.shape == (n, *SCENE.shape) and maps.dtype == np.uint8
    on = switched_classes(maps)
    for k in range(5):
        assert binomial_ok(on[:, k].sum(), n, 1 / 3)
    for i, j in itertools.combinations(range(5), 2):
        assert binomial_ok((on[:, i] & on[:, j]).sum(), n, 1 / 9)
    untouched = ~np.isin(SCENE, list(TWIN))
    assert (maps[:, untouched] == SCENE[untouched]).all()  # other classes and ignore (255) stay
    a = ambiguity.reference_samples(SCENE, ambiguity.case_rng(0, "gta5_00001"), 5)
    assert np.array_equal(a, ambiguity.reference_samples(SCENE, ambiguity.case_rng(0, "gta5_00001"), 5))
    # samples of an already switched map are samples of the unswitched one
    b = ambiguity.reference_samples(ambiguity.switch(SCENE, [True] * 5), ambiguity.case_rng(0, "gta5_00001"), 5)
    assert np.array_equal(a, b)


def test_variance_map_is_two_ninths_on_switchable_pixels():
    v = ambiguity.reference_variance(SCENE)
    expected = np.array([[2, 2, 0, 2], [0, 2, 2, 0], [2, 2, 2, 0]], dtype=np.float64) / 9
    assert v.dtype == np.float32 and np.allclose(v, expected, rtol=0, atol=1e-7)
    assert np.array_equal(ambiguity.reference_variance(ambiguity.switch(SCENE, [True] * 5)), v)


def test_variance_map_matches_the_variance_of_many_samples():
    """Monte-Carlo: the per-pixel variance of the twin indicator over many references -> 2/9."""
    n = 9000
    maps = ambiguity.reference_samples(SCENE, np.random.default_rng(5), n)
    is_twin = np.isin(maps, list(TWIN.values())).astype(np.float64)
    empirical = is_twin.var(axis=0)
    exact = ambiguity.reference_variance(SCENE)
    switchable = exact > 0
    sigma = np.sqrt(2 / 9 / n)  # of the estimated switch frequency p = 1/3
    tolerance = (1 - 2 / 3) * 4.5 * sigma + (4.5 * sigma) ** 2  # |p(1-p) - 2/9| for |p - 1/3| <= 4.5 sigma
    assert np.all(np.abs(empirical[switchable] - exact[switchable]) <= tolerance)
    assert np.all(empirical[~switchable] == 0)
