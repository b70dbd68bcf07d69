"""Decoding the source PNGs: GTA5 palette indices (not colours), Cityscapes label ids, clear errors."""

import numpy as np
import pytest
from PIL import Image

from values_seg_plugins.datasets._gta_cityscapes import reading
from values_seg_plugins.datasets._gta_cityscapes.labels import UnknownLabelIds
from values_seg_plugins.datasets._gta_cityscapes.synthetic import gta5_palette


def save(im: Image.Image, path):
    im.save(path, format="PNG")
    return path


def read(decode, path):
    data, _ = reading.read_bytes(path)
    return decode(data, path)


def gta5_label(ids, palette=None) -> Image.Image:
    im = Image.fromarray(np.asarray(ids, dtype=np.uint8), mode="P")
    im.putpalette(palette or gta5_palette())
    return im


def test_gta5_labels_are_read_by_index_not_colour(tmp_path):
    # ids 0-4 share the colour black and 26 (car) shares (0, 0, 142) with the license plate
    ids = np.array([[0, 1, 2, 3], [4, 7, 26, 33]])
    path = save(gta5_label(ids), tmp_path / "00001.png")
    out = read(reading.decode_gta5_label, path)
    assert out.dtype == np.uint8 and np.array_equal(out, ids)


def test_the_file_record_holds_path_size_and_sha256(tmp_path):
    import hashlib

    path = save(gta5_label([[7]]), tmp_path / "00001.png")
    _, rec = reading.read_bytes(path)
    assert rec.path == str(path) and rec.size == path.stat().st_size
    assert rec.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("mode", ["L", "RGB"])
def test_gta5_label_of_the_wrong_mode_names_the_file(tmp_path, mode):
    path = save(Image.new(mode, (4, 3)), tmp_path / "00002.png")
    with pytest.raises(reading.SourceFileError, match=rf"{path}: expected a palette \('P'\) PNG .* got PIL mode '{mode}'"):
        read(reading.decode_gta5_label, path)


def test_gta5_label_with_a_wrong_palette_names_the_file_and_index(tmp_path):
    palette = gta5_palette()
    palette[7 * 3: 7 * 3 + 3] = [1, 2, 3]  # road should be (128, 64, 128)
    path = save(gta5_label([[7, 8]], palette), tmp_path / "00003.png")
    with pytest.raises(reading.SourceFileError, match=rf"{path}: palette index 7 is \(1, 2, 3\), not the Cityscapes "
                                                      r"colour \(128, 64, 128\) of label id 7 \(road\)"):
        read(reading.decode_gta5_label, path)


def test_gta5_label_with_unknown_ids_names_the_file(tmp_path):
    path = save(gta5_label([[7, 40]]), tmp_path / "00004.png")
    with pytest.raises(UnknownLabelIds, match=rf"{path}: label id\(s\) \[40\]"):
        read(reading.decode_gta5_label, path)


def test_cityscapes_labels(tmp_path):
    ids = np.array([[7, 8, 26], [0, 33, 24]], dtype=np.uint8)
    path = save(Image.fromarray(ids, mode="L"), tmp_path / "a_gtFine_labelIds.png")
    assert np.array_equal(read(reading.decode_cityscapes_label, path), ids)
    bad = save(Image.fromarray(np.array([[7, 99]], dtype=np.uint8), mode="L"), tmp_path / "b_gtFine_labelIds.png")
    with pytest.raises(UnknownLabelIds, match=rf"{bad}: label id\(s\) \[99\]"):
        read(reading.decode_cityscapes_label, bad)
    palette = save(gta5_label(ids), tmp_path / "c_gtFine_labelIds.png")
    with pytest.raises(reading.SourceFileError, match=rf"{palette}: expected an 8-bit grayscale \('L'\) PNG"):
        read(reading.decode_cityscapes_label, palette)


def test_images(tmp_path):
    rgb = np.random.default_rng(0).integers(0, 256, (3, 5, 3), dtype=np.uint8)
    path = save(Image.fromarray(rgb, mode="RGB"), tmp_path / "rgb.png")
    assert np.array_equal(read(reading.decode_image, path), rgb)
    rgba = save(Image.fromarray(np.dstack([rgb, np.full((3, 5), 7, np.uint8)]), mode="RGBA"), tmp_path / "rgba.png")
    assert np.array_equal(read(reading.decode_image, rgba), rgb)
    grey = save(Image.new("L", (5, 3)), tmp_path / "grey.png")
    with pytest.raises(reading.SourceFileError, match=rf"{grey}: expected an RGB image, got PIL mode 'L'"):
        read(reading.decode_image, grey)


def test_truncated_and_non_png_files_name_the_file(tmp_path):
    path = save(Image.fromarray(np.zeros((64, 64, 3), np.uint8) + 9), tmp_path / "t.png")
    path.write_bytes(path.read_bytes()[:60])
    with pytest.raises(reading.SourceFileError, match=rf"{path}: not a readable PNG"):
        read(reading.decode_image, path)
    jpeg = tmp_path / "j.png"
    Image.new("RGB", (4, 4)).save(jpeg, format="JPEG")
    with pytest.raises(reading.SourceFileError, match=rf"{jpeg}: expected a PNG file, got JPEG"):
        read(reading.decode_image, jpeg)
