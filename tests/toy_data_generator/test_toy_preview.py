"""The preview montage: example choice, 3D slice choice, a readable PNG."""

import matplotlib.image
import numpy as np

from toy_data_generator import generate_case, plan, preview


def test_examples_cover_every_kind_of_case():
    test = plan("3b")["test"]
    picked = preview.pick_examples(test, 6)
    assert len(picked) == 6
    assert {(s.shift, s.blurred) for s in picked} == {
        ("none", False),
        ("none", True),
        ("cube", False),
        ("grey", False),
        ("border", False),
    }
    assert [s.index for s in picked] == sorted(s.index for s in picked)
    assert len(preview.pick_examples(test[:2], 6)) == 2


def test_3d_slice_is_where_the_object_is_widest():
    case = generate_case(plan("1")["train"][0], 3, 24, 0)
    image, raters, note = preview.display_slice(case)
    areas = case.raters[-1].sum(axis=(1, 2))
    assert raters.shape == (3, 24, 24) and image.shape == (24, 24)
    assert raters[-1].sum() == areas.max()
    assert note.strip() == f"z={int(np.argmax(areas))}"


def test_preview_png(tmp_path):
    specs = plan("3b", train_cases=4, val_cases=2)
    path = preview.preview_scenario(tmp_path / "p.png", specs, 2, 32, 0, per_split=3)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = matplotlib.image.imread(path)
    height, width = pixels.shape[:2]
    assert width > 500 and height > 600  # 3 rows (train, val, test) of 3 panels
    # the rater contours are drawn: the PNG holds the rater colours
    rgb = (pixels[..., :3] * 255).round().astype(int).reshape(-1, 3)
    for colour in preview.RATER_COLORS + (preview.AGREE_COLOR,):
        target = np.array([int(colour[i : i + 2], 16) for i in (1, 3, 5)])
        assert (np.abs(rgb - target).sum(axis=1) < 40).sum() > 20, colour
