"""Finding image/label pairs in the official layouts; missing folders and unmatched files."""

from pathlib import Path

import pytest

from values_seg_plugins.datasets._gta_cityscapes.layout import LayoutError, find_cityscapes, find_gta5


def touch(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


def test_gta5_pairs_and_unmatched_files(tmp_path):
    for name in ("00001", "00002", "00003"):
        touch(tmp_path / "images" / f"{name}.png")
    for name in ("00001", "00002", "00004"):
        touch(tmp_path / "labels" / f"{name}.png")
    touch(tmp_path / "images" / "._00001.png")  # macOS companion: ignored
    layout = find_gta5(tmp_path)
    assert [p.case_id for p in layout.pairs] == ["gta5_00001", "gta5_00002"]
    assert layout.pairs[0].label == tmp_path / "labels" / "00001.png"
    assert len(layout.problems) == 2
    assert f"{tmp_path / 'images' / '00003.png'}: no label {tmp_path / 'labels' / '00003.png'}" in layout.problems[0]
    assert f"{tmp_path / 'labels' / '00004.png'}: no image" in layout.problems[1]


@pytest.mark.parametrize("missing", ["images", "labels"])
def test_gta5_missing_folder_is_named(tmp_path, missing):
    touch(tmp_path / ({"images", "labels"} - {missing}).pop() / "00001.png")
    with pytest.raises(LayoutError, match=rf"GTA5 root: no folder {tmp_path / missing} \(expected images/NNNNN.png"):
        find_gta5(tmp_path)


def test_gta5_without_images_is_an_error(tmp_path):
    (tmp_path / "images").mkdir()
    (tmp_path / "labels").mkdir()
    with pytest.raises(LayoutError, match="no PNG images in"):
        find_gta5(tmp_path)


def cityscapes_tree(root: Path) -> None:
    for split, city, stem in (("train", "aachen", "aachen_000000_000019"), ("train", "bochum", "bochum_000001_000019"),
                              ("val", "lindau", "lindau_000000_000019")):
        touch(root / "leftImg8bit" / split / city / f"{stem}_leftImg8bit.png")
        touch(root / "gtFine" / split / city / f"{stem}_gtFine_labelIds.png")
        touch(root / "gtFine" / split / city / f"{stem}_gtFine_color.png")  # other gtFine files: ignored
        touch(root / "gtFine" / split / city / f"{stem}_gtFine_instanceIds.png")


def test_cityscapes_pairs(tmp_path):
    cityscapes_tree(tmp_path)
    layout = find_cityscapes(tmp_path)
    assert [(p.case_id, p.source_split, p.city) for p in layout.pairs] == [
        ("cityscapes_aachen_000000_000019", "train", "aachen"),
        ("cityscapes_bochum_000001_000019", "train", "bochum"),
        ("cityscapes_lindau_000000_000019", "val", "lindau"),
    ]
    assert layout.pairs[2].label.name == "lindau_000000_000019_gtFine_labelIds.png" and not layout.problems


def test_cityscapes_unmatched_files_are_reported_and_skipped(tmp_path):
    cityscapes_tree(tmp_path)
    orphan = touch(tmp_path / "leftImg8bit" / "train" / "aachen" / "aachen_000002_000019_leftImg8bit.png")
    (tmp_path / "leftImg8bit" / "train" / "bochum" / "bochum_000001_000019_leftImg8bit.png").unlink()
    layout = find_cityscapes(tmp_path)
    assert len(layout.pairs) == 2
    assert any(p.startswith(f"{orphan}: no label ") and "aachen_000002_000019_gtFine_labelIds.png" in p
               for p in layout.problems)
    assert any("bochum_000001_000019_gtFine_labelIds.png: no image" in p for p in layout.problems)


@pytest.mark.parametrize("missing", ["leftImg8bit/val", "gtFine/train", "gtFine"])
def test_cityscapes_missing_folder_is_named(tmp_path, missing):
    cityscapes_tree(tmp_path)
    import shutil

    shutil.rmtree(tmp_path / missing)
    with pytest.raises(LayoutError, match=rf"Cityscapes root: no folder {tmp_path}/{missing.split('/')[0]}/"):
        find_cityscapes(tmp_path)


def test_a_missing_root_is_named(tmp_path):
    with pytest.raises(LayoutError, match=f"GTA5 root: no folder {tmp_path / 'nope'}"):
        find_gta5(tmp_path / "nope")
    with pytest.raises(LayoutError, match=f"Cityscapes root: no folder {tmp_path / 'nope'}"):
        find_cityscapes(tmp_path / "nope")
