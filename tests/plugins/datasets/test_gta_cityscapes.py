"""The ``gta_cityscapes`` dataset plugin on a prepared folder of synthetic GTA5/Cityscapes trees."""

import itertools
import json
import shutil

import numpy as np
import pytest
from PIL import Image

from values_seg import registry
from values_seg.components.dataset import Dataset
from values_seg_plugins.datasets._gta_cityscapes import ambiguity
from values_seg_plugins.datasets._gta_cityscapes.prepare import prepare
from values_seg_plugins.datasets._gta_cityscapes.synthetic import write_small_trees
from values_seg.registry import Registry

IMAGENET_MEAN, IMAGENET_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
SWITCHABLE = {1: 19, 11: 20, 13: 21, 8: 22, 0: 23}  # sidewalk, person, car, vegetation, road -> twins


@pytest.fixture(scope="module")
def root(built_once):
    return built_once("gta-cityscapes-prepared", _prepare_small_trees)


def _prepare_small_trees(base):
    gta, cs = write_small_trees(base / "sources", gta5_frames=7, cityscapes_train=2, cityscapes_val=1)
    prepare(gta, cs, base / "data", progress=False)
    return base / "data"


@pytest.fixture(scope="module")
def ds(root):
    return registry.create("dataset", "gta_cityscapes", root=str(root))


def prepared_png(root, case_id, key):
    entry = json.loads((root / "manifest.json").read_text())["cases"][case_id]
    return np.asarray(Image.open(root / entry["outputs"][key]["path"]))


def test_registered_with_its_parameters():
    reg = Registry(builtins=False, entry_points=False)
    reg.load("values_seg_plugins.datasets.gta_cityscapes")
    comp = reg.get("dataset", "gta_cityscapes")
    assert comp.description.startswith("GTA5 -> Cityscapes") and "\n" not in comp.description
    params = {p.name: p for p in comp.params}
    assert params["root"].required and params["seed"].default == 0 and params["references"].default == 5
    assert "gta_cityscapes" in registry.names("dataset")


def test_attributes(ds):
    assert isinstance(ds, Dataset)
    assert (ds.dims, ds.in_channels, ds.num_classes, ds.ignore_index) == (2, 3, 24, 255)
    assert len(ds.class_names) == 24 and ds.class_names[0] == "road" and ds.class_names[23] == "road_2"
    assert ds.splits() == ["train", "val", "test", "pool"]


def test_splits_follow_the_prepared_figure_7_parts(ds, root):
    parts = json.loads((root / "splits.json").read_text())["splits"]
    assert ds.case_ids("train") == parts["train"] and ds.case_ids("val") == parts["val"]
    assert ds.case_ids("test") == parts["test_iid"] + parts["test_ood"]
    assert ds.case_ids("pool") == parts["pool_iid"] + parts["pool_ood"]
    with pytest.raises(ValueError, match="unknown split 'unlabeled'; available: train, val, test, pool"):
        ds.case_ids("unlabeled")


def test_cases_follow_the_contract(ds, root):
    for split in ds.splits():
        for case in ds.cases(split):
            case.validate(2, 3, 24, 255)
            gta5 = case.case_id.startswith("gta5_")
            assert case.meta["ood"] is (not gta5) and case.meta["split"] == split
            assert case.meta["shift"] == ("none" if gta5 else "cityscapes")
            assert case.meta["source"] == ("gta5" if gta5 else "cityscapes")
            if split in ("train", "val"):
                assert gta5
            assert case.image.dtype == np.float32 and case.image.shape == (3, 256, 478)
            assert case.raters.dtype == np.uint8 and case.raters.shape == (5, 256, 478)
    assert {c.meta["ood"] for c in ds.cases("test")} == {False, True}
    assert {c.meta["ood"] for c in ds.cases("pool")} == {False, True}


def test_image_is_imagenet_normalised_rgb(ds, root):
    case_id = ds.case_ids("test")[-1]
    rgb = prepared_png(root, case_id, "image").astype(np.float64) / 255.0
    expected = np.stack([(rgb[..., c] - IMAGENET_MEAN[c]) / IMAGENET_STD[c] for c in range(3)])
    assert np.allclose(ds.load(case_id).image, expected, atol=1e-5)


def test_references_are_switched_copies_of_the_labels_and_the_variance_is_exact(ds, root):
    for case_id in ds.case_ids("test") + ds.case_ids("val"):
        labels = prepared_png(root, case_id, "label")
        case = ds.load(case_id)
        unswitched = case.raters.copy()
        for source, twin in SWITCHABLE.items():
            unswitched[unswitched == twin] = source
        assert (unswitched == labels[None]).all()
        for r in case.raters:  # a class switches as a whole
            for source, twin in SWITCHABLE.items():
                assert len(set(r[labels == source].tolist())) <= 1
        expected = np.where(np.isin(labels, list(SWITCHABLE)), 2.0 / 9.0, 0.0)
        assert case.reference_variance.shape == (256, 478)
        assert np.allclose(case.reference_variance, expected, rtol=0, atol=1e-7)


def test_references_are_seeded_per_case(root, ds):
    again = registry.create("dataset", "gta_cityscapes", root=str(root))
    other = registry.create("dataset", "gta_cityscapes", root=str(root), seed=1)
    ids = ds.case_ids("test") + ds.case_ids("pool")
    assert all(np.array_equal(ds.load(c).raters, again.load(c).raters) for c in ids)
    assert any(not np.array_equal(ds.load(c).raters, other.load(c).raters) for c in ids)
    assert any(len({r.tobytes() for r in ds.load(c).raters}) > 1 for c in ids)  # the 5 maps differ


def test_training_labels_redraw_the_switches_at_every_load(ds):
    full = ds.load(ds.case_ids("train")[0]).raters
    # one pixel of every label present (switches act per class, so this is all there is to see)
    _, first = np.unique(ambiguity.unswitch(full[0]).ravel(), return_index=True)
    raters = full.reshape(5, -1)[:, first].reshape(5, 1, -1)
    everything = ds.training_label(full, 0.0)  # floor(243 u) = 0: every digit 0, every class switched
    switchable = list(SWITCHABLE) + list(SWITCHABLE.values())
    assert np.array_equal(np.isin(everything, ambiguity.TWIN_IDS), np.isin(full[0], switchable))
    base = ambiguity.unswitch(raters[0])
    present = [k for k, source in enumerate(ambiguity.switchable_ids()) if (base == source).any()]
    assert len(present) >= 4

    def switched(label):
        assert np.array_equal(ambiguity.unswitch(label), base)
        return [bool((label == ambiguity.TWIN_IDS[k]).any()) for k in present]

    exact = np.array([switched(ds.training_label(raters, (k + 0.5) / 243)) for k in range(243)])
    assert (exact.sum(axis=0) == 81).all()  # exactly 1/3
    n = 4000
    drawn = np.array([switched(ds.training_label(raters, u)) for u in np.random.default_rng(0).random(n)])
    sd1, sd2 = np.sqrt(2 / 9 / n), np.sqrt(1 / 9 * 8 / 9 / n)
    assert np.all(np.abs(drawn.mean(axis=0) - 1 / 3) < 4.5 * sd1)
    for i, j in itertools.combinations(range(len(present)), 2):
        assert abs((drawn[:, i] & drawn[:, j]).mean() - 1 / 9) < 4.5 * sd2


def test_quick_run_parameters(root):
    small = registry.create("dataset", "gta_cityscapes", root=str(root), max_per_split=1, shrink=8)
    assert [len(small.case_ids(s)) for s in small.splits()] == [1, 1, 2, 2]
    case = small.load(small.case_ids("pool")[1])
    assert case.image.shape == (3, 32, 59) and case.raters.shape == (5, 32, 59)
    assert case.reference_variance.shape == (32, 59)
    case.validate(2, 3, 24, 255)
    with pytest.raises(ValueError, match="shrink must be >= 1"):
        registry.create("dataset", "gta_cityscapes", root=str(root), shrink=0)


def test_a_missing_or_unfinished_root_says_how_to_prepare_it(tmp_path):
    with pytest.raises(FileNotFoundError, match=rf"{tmp_path / 'none'}: no such folder; prepare it with: "
                                                r"values-seg data gta-cityscapes prepare"):
        registry.create("dataset", "gta_cityscapes", root=str(tmp_path / "none"))
    (tmp_path / "half").mkdir()
    (tmp_path / "half" / "progress.jsonl").write_text("{}\n")
    with pytest.raises(FileNotFoundError, match="the preparation did not finish; rerun it to resume"):
        registry.create("dataset", "gta_cityscapes", root=str(tmp_path / "half"))


def test_a_corrupted_frame_is_detected_when_read(root, tmp_path):
    copy = tmp_path / "data"
    shutil.copytree(root, copy)
    ds = registry.create("dataset", "gta_cityscapes", root=str(copy))
    case_id = ds.case_ids("val")[0]
    path = copy / "gta5" / "labels" / f"{case_id.removeprefix('gta5_')}.png"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(ValueError, match=rf"case '{case_id}': {path} differs from manifest.json .*truncated or modif"):
        ds.load(case_id)


def test_a_prepared_folder_prepared_again_gets_new_cache_keys(root, tmp_path):
    """The cache keys hold the manifest's fingerprint (it records every frame's sha256): a frame
    prepared anew (file and manifest entry) is recomputed; the old fingerprint, pinned, is refused."""
    import hashlib

    from values_seg.components.dataset import pin_fingerprint
    from values_seg.registry import ComponentRef

    copy = tmp_path / "prepared"
    shutil.copytree(root, copy)
    ref = ComponentRef("dataset", "gta_cityscapes", {"root": str(copy)})
    before = pin_fingerprint(ref)
    assert pin_fingerprint(ref) == before and dict(before.kwargs)["fingerprint"]

    manifest = json.loads((copy / "manifest.json").read_text())
    case_id, entry = next(iter(manifest["cases"].items()))
    out = entry["outputs"]["image"]
    path = copy / out["path"]
    image = np.asarray(Image.open(path)).copy()
    image[0, 0] = 255 - image[0, 0]
    Image.fromarray(image).save(path)
    data = path.read_bytes()
    out["size"], out["sha256"] = len(data), hashlib.sha256(data).hexdigest()
    (copy / "manifest.json").write_text(json.dumps(manifest))
    after = pin_fingerprint(ref)
    assert after.key() != before.key()
    with pytest.raises(ValueError, match="the data changed since fingerprint"):
        before.create()
