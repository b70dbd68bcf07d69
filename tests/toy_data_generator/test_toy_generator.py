"""The generated cases: rater sizes, blur band, shifts, noise, determinism; 2D and 3D.

Checks compute their reference from the arrays (voxel counts, brute-force distances), not from
the generator's internals.
"""

import time

import numpy as np
import pytest

from toy_data_generator import generate, generate_case, generator, plan, scenarios

SIZES = {2: 32, 3: 24}  # small images keep the module fast


def cases_of(scenario, dims, split, **kw):
    return [generate_case(s, dims, SIZES[dims], seed=kw.pop("seed", 0)) for s in plan(scenario, **kw)[split]]


def brute_distance(shape, center, metric="sphere"):
    idx = np.indices(shape).astype(float) + 0.5
    diffs = [idx[a] - center[a] for a in range(len(shape))]
    if metric == "cube":
        return np.max(np.abs(diffs), axis=0)
    return np.sqrt(sum(d**2 for d in diffs))


def attributes(case):
    """What a case looks like, from its arrays alone."""
    img, raters = case.image[0], case.raters
    fg = raters[-1].astype(bool)
    coords = np.nonzero(fg)
    bbox = np.prod([c.max() - c.min() + 1 for c in coords])
    touches = any(fg.take(0, axis=a).any() or fg.take(-1, axis=a).any() for a in range(fg.ndim))
    core = img[raters[0].astype(bool)]
    bg = img[~fg]
    return {
        "shape": "cube" if fg.sum() == bbox else "sphere",  # a voxelised axis-aligned cube fills its box
        "value": float(core.max()),
        "uniform": bool(np.ptp(core) == 0),
        "inside": not touches,
        "blurred": bool((raters != raters[-1]).any()),
        "noisy": bool((bg > 0).mean() > 0.3),
    }


@pytest.mark.parametrize("dims", [2, 3])
def test_case_contract(dims):
    case = generate_case(plan("3b")["test"][0], dims, SIZES[dims], seed=3)
    assert case.image.dtype == np.float32 and case.image.shape == (1,) + (SIZES[dims],) * dims
    assert case.raters.dtype == np.uint8 and case.raters.shape == (3,) + (SIZES[dims],) * dims
    assert set(np.unique(case.raters)) <= {0, 1}
    assert np.isfinite(case.image).all() and case.image.min() >= 0 and case.image.max() <= 1
    for key in ("ood", "shift", "blurred", "scenario", "split"):
        assert key in case.meta
    assert case.meta["scenario"] == "3b" and case.meta["split"] == "test" and case.meta["ood"] is False


@pytest.mark.parametrize("dims", [2, 3])
def test_rater_size_ratios(dims):
    ratios = []
    for case in cases_of("1", dims, "train", train_cases=40):
        n = case.raters.reshape(3, -1).sum(axis=1).astype(float)
        assert n[0] <= n[1] <= n[2]
        assert (case.raters[0] <= case.raters[1]).all() and (case.raters[1] <= case.raters[2]).all()  # nested
        ratios.append(n / n[2])
    mean = np.mean(ratios, axis=0)
    assert abs(mean[0] - 0.10) <= 0.05
    assert abs(mean[1] - 0.55) <= 0.05
    assert mean[2] == 1.0


@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("scenario", ["1", "3a"])
def test_blurred_disagreement_only_in_the_border_band(dims, scenario):
    for case in cases_of(scenario, dims, "train", train_cases=16):
        if not case.meta["blurred"]:
            continue
        img, raters = case.image[0], case.raters
        disagree = (raters != raters[-1]).any(axis=0)
        assert disagree.any()
        # white core: all raters say foreground; background: all say background
        assert raters[:, img == 1.0].all()
        # every disagreement voxel is in the blur: neither the white core nor beyond the object
        assert (img[disagree] < 1.0).all()
        r1, _, r3 = case.meta["rater_radii"]
        d = brute_distance(img.shape, case.meta["center"])
        band = (d > r1) & (d <= r3)
        assert not (disagree & ~band).any()
        assert raters[:, d <= r1].all() and not raters[:, d > r3].any()
        # blurred towards the outside only: intensity falls monotonically with distance in the band
        order = np.argsort(d[band], kind="stable")
        values = img[band][order]
        assert (np.diff(values) <= 1e-6).all()
        assert (img[d <= r1] == 1.0).all()
        if not case.meta["noise"]:
            assert (img[d > r3] == 0).all()


@pytest.mark.parametrize("dims", [2, 3])
def test_blur_sigma_scales_with_size(dims):
    spec = plan("1")["train"][0]
    small = generate_case(spec, dims, SIZES[dims], seed=0).meta["sigma"]
    assert small == pytest.approx(2.0 * SIZES[dims] / 64)
    spec3 = [s for s in plan("3b")["test"] if s.blurred][0]
    assert generate_case(spec3, dims, SIZES[dims], seed=0).meta["sigma"] == pytest.approx(8.0 * SIZES[dims] / 64)


def test_stronger_blur_keeps_the_band_brighter():
    d = np.linspace(0, 10, 101)
    weak = generator.blur_profile(d, 4.0, 8.0, 1.0)
    strong = generator.blur_profile(d, 4.0, 8.0, 4.0)
    mid = (d > 4.5) & (d < 7.5)
    assert (strong[mid] > weak[mid]).all()
    for p in (weak, strong):
        assert (p[d <= 4] == 1).all() and (p[d > 8] == 0).all()
        assert ((p[(d > 4) & (d <= 8)] < 1) & (p[(d > 4) & (d <= 8)] >= 0)).all()


@pytest.mark.parametrize("dims", [2, 3])
def test_sharp_cases_have_identical_raters_and_a_uniform_object(dims):
    for case in cases_of("2", dims, "train", train_cases=8):
        a = attributes(case)
        assert (case.raters == case.raters[0]).all()
        assert a == {"shape": "sphere", "value": 1.0, "uniform": True, "inside": True, "blurred": False, "noisy": True}


@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("scenario", ["2", "3a", "3b"])
def test_ood_cases_differ_from_training_cases_in_exactly_their_factor(dims, scenario):
    train = [attributes(c) for c in cases_of(scenario, dims, "train", train_cases=8) if not c.meta["blurred"]]
    reference = {"shape": "sphere", "value": 1.0, "uniform": True, "inside": True, "blurred": False, "noisy": True}
    assert train and all(t == reference for t in train)
    changed_by = {"cube": {"shape"}, "grey": {"value"}, "border": {"inside"}}
    seen = set()
    for case in cases_of(scenario, dims, "test"):
        a = attributes(case)
        diff = {k for k in reference if a[k] != reference[k]}
        if case.meta["ood"]:
            assert diff == changed_by[case.meta["shift"]], (case.case_id, a)
            seen.add(case.meta["shift"])
            if case.meta["shift"] == "grey":
                assert 0.5 <= a["value"] <= 0.9
        else:
            assert diff == ({"blurred"} if case.meta["blurred"] else set()), (case.case_id, a)
    assert seen == set(scenarios.SHIFTS)


@pytest.mark.parametrize("dims", [2, 3])
def test_objects_span_a_fifth_to_half_the_image(dims):
    size = SIZES[dims]
    for case in cases_of("2", dims, "train", train_cases=20):
        fg = case.raters[-1].astype(bool)
        extent = max(np.ptp(np.nonzero(fg)[a]) + 1 for a in range(dims))
        assert size / 5 - 1 <= extent <= size / 2 + 1


def test_noise_only_in_noisy_scenarios_and_only_in_the_background():
    clean = cases_of("1", 2, "train", train_cases=4)
    assert all((c.image[0][c.raters[-1] == 0] == 0).all() for c in clean)
    for c in cases_of("2", 2, "train", train_cases=4):
        bg = c.image[0][c.raters[-1] == 0]
        assert 0.4 < (bg > 0).mean() < 0.6  # half the background voxels carry noise
        assert 0.4 < bg[bg > 0].mean() < 0.6  # uniform in [0, 1)
        assert (c.image[0][c.raters[-1] == 1] == 1).all()  # the object is untouched


@pytest.mark.parametrize("dims", [2, 3])
def test_deterministic_and_order_independent(dims):
    a = list(generate("3b", dims, SIZES[dims], seed=11, train_cases=4, val_cases=2))
    b = list(generate("3b", dims, SIZES[dims], seed=11, train_cases=4, val_cases=2))
    assert [c.case_id for c in a] == [c.case_id for c in b]
    for x, y in zip(a, b):
        assert x.image.tobytes() == y.image.tobytes() and x.raters.tobytes() == y.raters.tobytes()
        assert x.meta == y.meta
    # one case alone equals the same case generated among others
    spec = plan("3b", train_cases=4, val_cases=2)["test"][40]
    alone = generate_case(spec, dims, SIZES[dims], seed=11)
    among = next(c for c in a if c.case_id == spec.case_id)
    assert alone.image.tobytes() == among.image.tobytes()
    # another seed, other data
    other = generate_case(spec, dims, SIZES[dims], seed=12)
    assert other.image.tobytes() != alone.image.tobytes()


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"dims": 4}, "dims must be 2 or 3, got 4"),
        ({"dims": 1}, "dims must be 2 or 3"),
        ({"dims": 2, "size": 31}, "size 31 is too small .* use size >= 32"),
        ({"dims": 3, "size": 21}, "size 21 is too small .* use size >= 22"),
        ({"seed": -1}, "seed must be a non-negative integer"),
        ({"size": 32.5}, "size must be an integer"),
    ],
)
def test_bad_parameters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        next(generate("1", **kwargs))


def test_unknown_scenario():
    with pytest.raises(ValueError, match="valid scenarios: 1, 2, 3a, 3b"):
        next(generate("5", 2, 32))


def test_min_size():
    assert generator.min_size(2) == 32 and generator.min_size(3) == 22
    # at the minimum the smallest object's smallest rater still has voxels
    for dims in (2, 3):
        for case in generate("1", dims, generator.min_size(dims), train_cases=10, splits=["train"]):
            assert case.raters[0].sum() > 0


def test_one_3d_case_at_64_is_fast():
    """Under 0.5 CPU-seconds a case: the process's CPU time, which a loaded machine does not stretch
    as it stretches the wall clock."""
    spec = plan("3b")["test"][0]
    generate_case(spec, 3, 64, 0)
    start = time.process_time()
    for _ in range(5):
        generate_case(spec, 3, 64, 0)
    assert (time.process_time() - start) / 5 < 0.5
