"""The fused per-case evaluation, with the built-in per-case quantities, equals the separate,
one-at-a-time computations."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from values_seg import metrics, registry
from values_seg.components.case_context import CaseContext
from values_seg.components.settings import EvaluationSettings
from values_seg.evaluation.per_case import ComponentError, aggregations_for, evaluate_case
from values_seg.components.quantity import resolve
from values_seg_plugins.quantities.calibration import FINE_BINS

PLAIN = ["dice", "predicted_fraction", "ged", "ncc"]


def fused(samples, raters, measures, aggregations=None, *, platt=None, ndsc_r=None, collect_histograms=False,
          n_bins=20, keep_maps=False, **case):
    """:func:`evaluate_case` with the built-in quantities (calibration of the measures with Platt
    parameters, ``n_bins`` per case; retention with ``ndsc_r``), their values by quantity name."""
    names = PLAIN + (["ndsc", "ndsc_rauc"] if ndsc_r else [])
    settings = EvaluationSettings.of({"ndsc_r": ndsc_r, "n_bins": n_bins // FINE_BINS})
    context = CaseContext(settings=settings, **case)  # case: case_id, background, ignore_index ...
    ev = evaluate_case(samples, raters, measures, aggregations, quantities=resolve(names), context=context,
                       keep_maps=keep_maps)
    out = SimpleNamespace(**vars(ev), **ev.values, calibration={}, histograms={})
    out.ndsc, out.ndsc_rauc = ev.values.get("ndsc"), ev.values.get("ndsc_rauc", {})
    calibrated = {m: measures[m] for m in platt or {}}
    if calibrated:
        out.calibration = evaluate_case(samples, raters, calibrated, quantities=resolve(["calibration_bins"]),
                                        fitted={"calibration_bins": platt}, context=context).values["calibration_bins"]
    if collect_histograms:
        out.histograms = evaluate_case(samples, raters, measures, quantities=resolve(["calibration_bins"]), fit=True,
                                       context=CaseContext(**case)).summaries["calibration_bins"]
    return out

MEASURES = ["predictive_entropy", "expected_entropy", "mutual_information", "max_softmax"]


def make_case(shape, S=6, C=2, R=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(S, C, *shape, generator=g) * 2
    logits[:, 1, 2:-2] += 3  # an object, so Dice and NCC are non-trivial
    samples = torch.softmax(logits, dim=1)
    raters = torch.zeros(R, *shape, dtype=torch.long)
    for r in range(R):
        raters[r, 2 + r : -2] = 1  # raters disagree in a border band
    return samples, raters


@pytest.mark.parametrize("shape", [(16, 16), (8, 10, 12)])
def test_fused_equals_separate_computations(shape):
    samples, raters = make_case(shape)
    measures = {n: registry.create("measure", n) for n in MEASURES}
    val_maps = {n: [m(samples)] for n, m in measures.items()}
    pred = samples.mean(0).argmax(0)
    factories = {
        "patch": lambda: registry.create("aggregation", "patch", size=4),
        "image": lambda: registry.create("aggregation", "image"),
        "threshold": lambda: registry.create("aggregation", "threshold"),
        "foreground_mean": lambda: registry.create("aggregation", "foreground_mean"),
    }
    aggs = aggregations_for(MEASURES, factories)
    for (m, _), agg in aggs.items():
        agg.fit(val_maps[m], [pred])
    platt = {n: (-1.5, 0.3) for n in MEASURES[:2]}
    ev = fused(samples, raters, measures, aggs, case_id="c1", platt=platt, keep_maps=True)

    assert ev.case_id == "c1" and torch.equal(ev.prediction, pred)
    assert ev.dice == pytest.approx(np.mean([metrics.dice(pred.numpy(), r.numpy()) for r in raters]))
    assert ev.predicted_fraction == pytest.approx(float((pred > 0).double().mean()))
    assert ev.ged == pytest.approx(metrics.ged(samples.argmax(1).numpy(), raters.numpy()))
    variance = metrics.rater_variance(raters.numpy())
    for name, m in measures.items():
        umap = m(samples)
        assert torch.allclose(ev.maps[name], umap)
        assert ev.ncc[name] == pytest.approx(metrics.ncc(variance, umap.numpy()), nan_ok=True)
        for agg_name in factories:
            expected = aggs[(name, agg_name)](umap, prediction=pred)
            assert ev.scores[(name, agg_name)] == pytest.approx(expected)
    assert set(ev.calibration) == set(platt)
    conf = metrics.platt_apply(ev.maps["predictive_entropy"].numpy(), *platt["predictive_entropy"])
    correct = np.concatenate([(pred == r).numpy().ravel() for r in raters])
    expected_ace = metrics.ace(correct, np.tile(conf.ravel(), len(raters)))
    assert metrics.ace_from_bins(ev.calibration["predictive_entropy"]) == pytest.approx(expected_ace)


def test_histogram_platt_fit_matches_pixel_fit():
    samples, raters = make_case((24, 24), seed=3)
    measures = {"predictive_entropy": registry.create("measure", "predictive_entropy")}
    ev = fused(samples, raters, measures, collect_histograms=True, keep_maps=True)
    umap = ev.maps["predictive_entropy"].numpy()
    pred = ev.prediction.numpy()
    u = np.tile(umap.astype(np.float16).astype(np.float64).ravel(), len(raters))
    correct = np.concatenate([(pred == r.numpy()).ravel() for r in raters]).astype(float)
    a, b = metrics.platt_fit(u, correct)
    a_h, b_h = ev.histograms["predictive_entropy"].platt_fit()
    grid = np.linspace(0, np.log(2), 11)
    assert np.allclose(metrics.platt_apply(grid, a_h, b_h), metrics.platt_apply(grid, a, b), atol=1e-4)


def test_bad_inputs_are_reported_with_the_case():
    samples, raters = make_case((8, 8))
    measures = {"predictive_entropy": registry.create("measure", "predictive_entropy")}
    with pytest.raises(ValueError, match="case 'x'.*sum to 1"):
        evaluate_case(samples * 2, raters, measures, context=CaseContext(case_id="x"))
    with pytest.raises(ValueError, match="raters .* do not match samples"):
        evaluate_case(samples, raters[:, :4], measures)
    with pytest.raises(ValueError, match="unknown measure"):
        evaluate_case(samples, raters, measures, {("mutual_information", "image"): registry.create("aggregation", "image")})
    with pytest.raises(ComponentError, match="measure 'broken' must return a map of the samples' spatial shape"):
        evaluate_case(samples, raters, {"broken": lambda s: s.mean()})
    # a NaN map says so (not "finite map of shape (8, 8), got (8, 8)"), and names the measure and the case
    with pytest.raises(ComponentError, match=r"case 'x': measure 'nan' returned 64 NaN or infinite value\(s\)") as e:
        evaluate_case(samples, raters, {"nan": lambda s: s[0, 0] * float("nan")}, context=CaseContext(case_id="x"))
    assert (e.value.kind, e.value.measure, e.value.aggregation) == ("measure", "nan", None)
    with pytest.raises(ComponentError, match="aggregation 'bad' .of measure 'pe'. returned nan") as e:
        evaluate_case(samples, raters, {"pe": measures["predictive_entropy"]}, {("pe", "bad"): lambda u: float("nan")})
    assert (e.value.kind, e.value.measure, e.value.aggregation) == ("aggregation", "pe", "bad")


def test_identical_raters_give_nan_ncc_and_zero_reference_energy():
    samples, raters = make_case((12, 12))
    raters = raters[:1].repeat(3, 1, 1)
    ev = fused(samples, raters, {"predictive_entropy": registry.create("measure", "predictive_entropy")})
    assert np.isnan(ev.ncc["predictive_entropy"])  # the raters' variance map is constant


def test_retention_in_the_fused_pass_equals_the_metrics_per_rater():
    # the nDSC of the predicted foreground and each measure's nDSC R-AUC (Shifts), averaged over the raters
    samples, raters = make_case((12, 14), R=3, seed=4)
    measures = {n: registry.create("measure", n) for n in MEASURES[:3]}
    ev = fused(samples, raters, measures, ndsc_r=0.01, keep_maps=True)
    pred = (samples.mean(0).argmax(0) > 0).numpy()
    expected_ndsc = np.mean([metrics.ndsc(pred, (r > 0).numpy(), r=0.01) for r in raters])
    assert ev.ndsc == pytest.approx(expected_ndsc)
    for name in measures:
        umap = ev.maps[name].numpy()
        expected = np.mean([metrics.ndsc_rauc(pred, (r > 0).numpy(), umap, r=0.01) for r in raters])
        assert ev.ndsc_rauc[name] == pytest.approx(expected)
    plain = fused(samples, raters, measures)
    assert plain.ndsc is None and plain.ndsc_rauc == {}  # only where a task consumes them


def test_retention_leaves_out_each_raters_ignored_pixels():
    samples, raters = make_case((10, 10), R=2, seed=5)
    raters[0, :2] = 255  # rater 0 did not label the first two rows
    measures = {"predictive_entropy": registry.create("measure", "predictive_entropy")}
    ev = fused(samples, raters, measures, ndsc_r=0.05, ignore_index=255, keep_maps=True,
                       reference_variance=np.zeros((10, 10)))  # (the raters' variance cannot skip ignored pixels)
    pred = (samples.mean(0).argmax(0) > 0).numpy()
    umap = ev.maps["predictive_entropy"].numpy()
    per_rater = []
    for r in raters.numpy():
        keep = r != 255
        per_rater.append(metrics.ndsc_rauc(pred[keep], r[keep] > 0, umap[keep], r=0.05))
    assert ev.ndsc_rauc["predictive_entropy"] == pytest.approx(np.mean(per_rater))


@pytest.mark.parametrize("C", [2, 3])
def test_class_argmax_equals_torch_argmax_with_ties_to_the_lower_class(C):
    from values_seg.numerics.labels import class_argmax

    rng = np.random.default_rng(C)
    p = torch.tensor(rng.random((4, C, 5, 6)), dtype=torch.float32)
    p[0, :, 0, 0] = 0.5  # an exact tie: the lower class, as argmax
    p[1, :, 1, :] = 0.25  # a row where every class ties
    expected = p.double().numpy().argmax(axis=1)  # NumPy's argmax: the first maximum
    for probabilities in (p, p.double(), p.half().float(), p.clone().requires_grad_(True)):  # NumPy and torch paths
        labels = class_argmax(probabilities, dim=1)
        assert labels.dtype == torch.uint8
        reference = probabilities.detach().double().numpy().argmax(axis=1)
        np.testing.assert_array_equal(labels.numpy(), reference)
    np.testing.assert_array_equal(class_argmax(p.mean(dim=0), dim=0).numpy(), p.mean(dim=0).numpy().argmax(axis=0))
    assert expected[0, 0, 0] == 0 and (expected[1, 1, :] == 0).all()


def ignored_case(seed=6):
    """Three classes, no background class, three raters, each leaving a different region unlabelled (255)."""
    samples, raters = make_case((14, 16), C=3, R=3, seed=seed)
    raters[1, 5:9] = 2
    raters[0, :3] = 255
    raters[1, :, -4:] = 255
    raters[2, 6:8, 3:9] = 255
    return samples, raters


def test_calibration_and_platt_leave_out_ignored_pixels():
    # float64 reference: every (pixel, rater) pair the rater labels, built by hand
    samples, raters = ignored_case()
    measures = {n: registry.create("measure", n) for n in MEASURES[:2]}
    platt = {"predictive_entropy": (-2.0, 0.4), "expected_entropy": (-1.0, -0.2)}
    ev = fused(samples, raters, measures, platt=platt, ignore_index=255, background=None,
                       collect_histograms=True, keep_maps=True)
    pred = ev.prediction.numpy()
    labelled = [r.numpy() != 255 for r in raters]
    correct = np.concatenate([(pred == r.numpy())[keep] for r, keep in zip(raters, labelled)]).astype(float)
    assert correct.size == sum(int(k.sum()) for k in labelled) < raters.numel()
    for name in measures:
        umap = ev.maps[name].numpy().astype(np.float64)
        kept = np.concatenate([umap[keep] for keep in labelled])
        conf = metrics.platt_apply(kept, *platt[name])
        # the evaluation's confidences are float32: within 1e-6 of the float64 reference
        assert metrics.ace_from_bins(ev.calibration[name]) == pytest.approx(metrics.ace(correct, conf), abs=1e-6)
        assert ev.calibration[name].count.sum() == correct.size
        assert ev.histograms[name].total.sum() == correct.size
        a, b = metrics.platt_fit(kept.astype(np.float16).astype(np.float64), correct)  # the histogram's float16 values
        a_h, b_h = ev.histograms[name].platt_fit()
        assert (a_h, b_h) == pytest.approx((a, b), rel=1e-6, abs=1e-9)


def test_ambiguity_leaves_out_ignored_pixels():
    samples, raters = ignored_case(seed=7)
    measures = {n: registry.create("measure", n) for n in MEASURES[:3]}
    ev = fused(samples, raters, measures, ignore_index=255, background=None, keep_maps=True)
    keep = (raters != 255).all(dim=0).numpy()  # pixels every rater labels
    r = raters.numpy()[:, keep]
    variance = metrics.rater_variance(r[:, :, None], num_classes=3).ravel()  # no ignored pixel left
    for name in measures:
        umap = ev.maps[name].numpy().astype(np.float64)[keep]
        assert ev.ncc[name] == pytest.approx(np.corrcoef(variance, umap)[0, 1], abs=1e-12)
    masks = samples.argmax(1).numpy()[:, keep]
    assert ev.ged == pytest.approx(metrics.ged(masks[..., None], r[..., None], num_classes=3, background=None),
                                   abs=1e-12)
    given = np.random.default_rng(0).random(keep.shape)  # a data set's own reference variance: masked the same
    ev = fused(samples, raters, measures, ignore_index=255, background=None, keep_maps=True,
                       reference_variance=given)
    umap = ev.maps["predictive_entropy"].numpy().astype(np.float64)[keep]
    assert ev.ncc["predictive_entropy"] == pytest.approx(np.corrcoef(given[keep], umap)[0, 1], abs=1e-12)


def test_retention_without_a_background_class_is_the_class_mean():
    samples, raters = ignored_case(seed=8)
    measures = {n: registry.create("measure", n) for n in MEASURES[:2]}
    ev = fused(samples, raters, measures, ignore_index=255, background=None, ndsc_r=0.05, keep_maps=True)
    assert ev.ndsc is not None and set(ev.ndsc_rauc) == set(measures)  # defined, no longer dropped
    pred = ev.prediction.numpy()
    ndsc, rauc = [], {n: [] for n in measures}
    for r in raters.numpy():
        keep = r != 255
        ndsc.append(metrics.class_ndsc(pred[keep], r[keep], r=0.05))
        for n in measures:
            rauc[n].append(metrics.class_ndsc_rauc_many(pred[keep], r[keep], ev.maps[n].numpy()[None, keep], 0.05)[0])
    assert ev.ndsc == pytest.approx(np.mean(ndsc))
    for n in measures:
        assert ev.ndsc_rauc[n] == pytest.approx(np.mean(rauc[n]))


@pytest.mark.parametrize("stored", [False, True], ids=["tensor", "stored"])
@pytest.mark.parametrize("device", ["cpu:0", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs CUDA"))])
def test_maps_computed_on_another_device_give_the_same_evaluation(device, stored):
    """The fused pass with ``device``: samples moved once, maps and mean moved back once; every
    score, map and quantity as computed where the samples are (``cpu:0`` is another device object
    than ``cpu`` and takes that path; on CUDA within float32 rounding). Samples as the cache stores
    them (float16, two classes) go there as float32; here their pass takes its own logs: within
    float32 rounding."""
    from values_seg.components.quantity import resolve
    from values_seg.numerics.stored_samples import StoredSamples

    gen = torch.Generator().manual_seed(0)
    C = 2 if stored else 3
    samples = torch.randn(6, C, 24, 24, generator=gen).softmax(1)
    raters = torch.randint(0, C, (3, 24, 24), generator=gen)
    if stored:
        samples = StoredSamples(samples.numpy().astype(np.float16))
    measures = {n: registry.create("measure", n) for n in ("predictive_entropy", "mutual_information", "max_softmax")}
    aggs = {(m, "patch"): registry.create("aggregation", "patch", size=5) for m in measures}
    quantities = resolve(["dice", "ged"])
    here = evaluate_case(samples, raters, measures, aggs, quantities=quantities, keep_maps=True)
    there = evaluate_case(samples, raters, measures, aggs, quantities=quantities, keep_maps=True,
                          context=CaseContext(device=torch.device(device)))
    exact = device == "cpu:0" and not stored
    for m in measures:
        assert there.maps[m].device == samples.device
        torch.testing.assert_close(there.maps[m], here.maps[m], rtol=0 if exact else 1e-5, atol=0 if exact else 1e-6)
    assert there.scores == pytest.approx(here.scores, rel=0 if exact else 1e-5)
    assert there.values == pytest.approx(here.values, rel=0 if exact else 1e-5)
    assert torch.equal(there.prediction, here.prediction)


def test_a_case_evaluated_as_stored_equals_its_float32_samples_evaluated(tmp_path):
    """The evaluation stage hands a cached case over as stored (float16, two classes): every score
    and quantity equals the evaluation of the float32 samples read from it, to float32 rounding
    of the logs; a measure and an aggregation that read the samples themselves get them too."""
    from values_seg.components.aggregation import SAMPLES
    from values_seg.engine.predictions import PredictionCache

    g = torch.Generator().manual_seed(7)
    samples = torch.softmax(torch.randn(5, 2, 6, 10, 12, generator=g) * 2, dim=1)
    raters = torch.randint(0, 2, (3, 6, 10, 12), generator=g)
    handle = PredictionCache(tmp_path).save("m", "d", "test", "c", samples)
    names = ["predictive_entropy", "expected_entropy", "mutual_information", "max_softmax", "softmax_variance"]
    measures = {n: registry.get("measure", n).obj for n in names}
    aggs = aggregations_for(names, {a: (lambda a=a: registry.create("aggregation", a)) for a in ("image", "patch")})
    aggs[(SAMPLES, "pairwise_dice")] = registry.create("aggregation", "pairwise_dice")
    quantities = resolve(["dice", "ged", "ncc", "calibration_bins"])
    fitted = {"calibration_bins": {n: (-3.0, -1.0) for n in names}}
    with handle.opened() as stored:
        assert stored.bits is not None
        got = evaluate_case(stored, raters, measures, aggs, quantities=quantities, fitted=fitted)
    expected = evaluate_case(handle.load(), raters, measures, aggs, quantities=quantities, fitted=fitted)
    assert got.scores.keys() == expected.scores.keys() and got.values.keys() == expected.values.keys()
    for key, value in expected.scores.items():
        assert got.scores[key] == pytest.approx(value, rel=1e-5, abs=1e-6), key
    assert got.values["dice"] == expected.values["dice"] and got.values["ged"] == expected.values["ged"]
    for name in names:
        assert got.values["ncc"][name] == pytest.approx(expected.values["ncc"][name], rel=1e-5, abs=1e-6)
        bins, reference = got.values["calibration_bins"][name], expected.values["calibration_bins"][name]
        np.testing.assert_array_equal(bins.count, reference.count)
        np.testing.assert_allclose(bins.confidence_sum, reference.confidence_sum, rtol=1e-5)
        np.testing.assert_array_equal(bins.correct_sum, reference.correct_sum)
