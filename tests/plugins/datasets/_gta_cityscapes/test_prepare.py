"""``values-seg data gta-cityscapes prepare`` on synthetic trees in the official layouts."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from values_seg.storage.atomic import is_temporary
from values_seg.cli import main
from values_seg_plugins.datasets._gta_cityscapes.prepare import prepare
from values_seg_plugins.datasets._gta_cityscapes.synthetic import gta5_palette

# label ids the synthetic scenes use -> training ids, by hand from the published Cityscapes table
TRAIN_ID = {0: 255, 23: 10, 11: 2, 21: 8, 8: 1, 7: 0, 26: 13, 24: 11, 17: 5, 20: 7, 4: 255, 1: 255}


def sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


def test_every_frame_is_prepared_at_256_x_478(prepared):
    out, summary = prepared
    assert summary.prepared == 10 and summary.kept == 0 and not summary.problems
    cases = manifest(out)["cases"]
    assert len(cases) == 10 and sum(c["source"] == "gta5" for c in cases.values()) == 7
    for entry in cases.values():
        image = Image.open(out / entry["outputs"]["image"]["path"])
        label = Image.open(out / entry["outputs"]["label"]["path"])
        assert (image.mode, image.size, label.mode, label.size) == ("RGB", (478, 256), "P", (478, 256))
        assert set(np.unique(np.asarray(label)).tolist()) <= set(range(19)) | {255}


@pytest.mark.parametrize("case_id", ["gta5_00001", "cityscapes_lindau_000000_000019"])
def test_a_frame_equals_an_independent_computation(prepared, trees, case_id):
    out, _ = prepared
    entry = manifest(out)["cases"][case_id]
    image = np.asarray(Image.open(entry["sources"]["image"]["path"]))
    ids = np.asarray(Image.open(entry["sources"]["label"]["path"]))
    top, left = (image.shape[0] - 1024) // 2, (image.shape[1] - 1912) // 2
    assert (top, left) == ((14, 1) if case_id.startswith("gta5") else (0, 68))
    crop = torch.from_numpy(image[top: top + 1024, left: left + 1912].copy()).permute(2, 0, 1)[None].double()
    small = F.interpolate(crop, size=(256, 478), mode="bilinear", align_corners=False)[0].permute(1, 2, 0).numpy()
    expected_image = np.floor(small + 0.5).astype(np.uint8)
    lab = torch.from_numpy(ids[top: top + 1024, left: left + 1912].astype(np.float32))[None, None]
    small_ids = F.interpolate(lab, size=(256, 478), mode="nearest-exact")[0, 0].numpy().astype(np.uint8)
    expected_labels = np.vectorize(TRAIN_ID.__getitem__)(small_ids)
    got_image = np.asarray(Image.open(out / entry["outputs"]["image"]["path"]))
    got_labels = np.asarray(Image.open(out / entry["outputs"]["label"]["path"]))
    assert np.array_equal(got_image, expected_image)
    assert np.array_equal(got_labels, expected_labels)


def test_manifest_records_sources_and_outputs_with_hashes(prepared, trees):
    out, _ = prepared
    m = manifest(out)
    assert m["crop"] == [1024, 1912] and m["size"] == [256, 478]
    entry = m["cases"]["gta5_00002"]
    src = entry["sources"]["label"]
    assert src["path"] == str(trees[0] / "labels" / "00002.png") and src["sha256"] == sha(src["path"])
    assert src["size"] == Path(src["path"]).stat().st_size
    for rec in entry["outputs"].values():
        assert rec["sha256"] == sha(out / rec["path"]) and rec["size"] == (out / rec["path"]).stat().st_size
    assert entry["source_shape"] == [1052, 1914]
    cs = m["cases"]["cityscapes_aachen_000000_000019"]
    assert (cs["source_split"], cs["city"], cs["source_shape"]) == ("train", "aachen", [1024, 2048])
    assert not (out / "progress.jsonl").exists()


def test_splits_are_written_with_the_data(prepared):
    out, summary = prepared
    saved = json.loads((out / "splits.json").read_text())
    assert saved["seed"] == 123
    # 7 GTA5 frames: 2 to the i.i.d. pool (as many as Cityscapes train), 5 // 4 = 1 test, 4 -> 3 train + 1 val
    assert saved["counts"] == summary.counts == {"train": 3, "val": 1, "test_iid": 1, "test_ood": 1, "pool_iid": 2,
                                                 "pool_ood": 2}
    parts = [set(v) for v in saved["splits"].values()]
    assert len(set().union(*parts)) == sum(map(len, parts)) == 10
    assert all(c.startswith("cityscapes_lindau") for c in saved["splits"]["test_ood"])


def test_preview_is_written(prepared):
    out, _ = prepared
    im = Image.open(out / "preview.png")
    assert im.size == (4 * (478 + 4), 2 * (256 + 14 + 4))  # 1 i.i.d. + 1 OoD test frame, 4 panels each


def tiny_png(path: Path, ids, mode: str, palette=None) -> None:
    im = Image.fromarray(np.asarray(ids, dtype=np.uint8), mode=mode)
    if palette is not None:
        im.putpalette(palette)
    im.save(path, format="PNG")


def test_problem_frames_are_reported_and_the_rest_goes_on(trees, tmp_path):
    gta, cs = tmp_path / "gta5", tmp_path / "cityscapes"
    shutil.copytree(trees[0], gta)
    shutil.copytree(trees[1], cs)
    for i, src in enumerate(["00001", "00002", "00003", "00004"]):  # four more good frames, then break five
        for sub in ("images", "labels"):
            shutil.copy(gta / sub / f"{src}.png", gta / sub / f"{i + 8:05d}.png")
    wrong_palette = gta5_palette()
    wrong_palette[21: 24] = [9, 9, 9]
    tiny_png(gta / "labels" / "00002.png", [[7, 7]], "P", gta5_palette())  # size differs from its image
    tiny_png(gta / "labels" / "00003.png", [[7, 40]], "P", gta5_palette())  # unknown label id 40
    tiny_png(gta / "labels" / "00004.png", [[7, 8]], "P", wrong_palette)  # palette index 7 is not road's colour
    tiny_png(gta / "labels" / "00005.png", [[7, 8]], "L")  # not a palette PNG
    (gta / "images" / "00006.png").unlink()  # a label without its image
    val = cs / "gtFine" / "val" / "lindau" / "lindau_000001_000019_gtFine_labelIds.png"
    shutil.copy(cs / "leftImg8bit" / "val" / "lindau" / "lindau_000000_000019_leftImg8bit.png",
                cs / "leftImg8bit" / "val" / "lindau" / "lindau_000001_000019_leftImg8bit.png")
    tiny_png(val, [[7, 99]], "L")  # unknown label id 99
    summary = prepare(gta, cs, tmp_path / "out", progress=False)
    problems = "\n".join(summary.problems)
    assert len(summary.problems) == 6, problems
    assert f"{gta / 'images' / '00002.png'}: image is 1914 x 1052 but its label {gta / 'labels' / '00002.png'} " \
           "is 2 x 1" in problems
    assert f"{gta / 'labels' / '00003.png'}: label id(s) [40] are not Cityscapes label ids" in problems
    assert f"{gta / 'labels' / '00004.png'}: palette index 7 is (9, 9, 9), not the Cityscapes colour" in problems
    assert f"{gta / 'labels' / '00005.png'}: expected a palette ('P') PNG" in problems
    assert f"{gta / 'labels' / '00006.png'}: no image {gta / 'images' / '00006.png'}" in problems
    assert f"{val}: label id(s) [99]" in problems
    assert (tmp_path / "out" / "problems.txt").read_text().count("skipped") == 6
    cases = manifest(tmp_path / "out")["cases"]
    assert len(cases) == 10 + 4 + 1 - 6 and "gta5_00001" in cases and "gta5_00003" not in cases
    assert f"6 file(s) skipped, see {tmp_path / 'out' / 'problems.txt'}" in summary.describe()


def run_cli(*args: str) -> int:
    return main(["data", "gta-cityscapes", "prepare", *args, "--no-progress"])


def test_only_one_data_set_gets_a_message_naming_the_missing_one(trees, tmp_path, capsys):
    assert run_cli("--gta-root", str(trees[0]), "--out", str(tmp_path / "o")) == 2
    err = capsys.readouterr().err
    assert "needs local copies of both data sets; missing: --cityscapes-root (Cityscapes: the OoD test set" in err
    assert run_cli("--cityscapes-root", str(trees[1]), "--out", str(tmp_path / "o")) == 2
    assert "missing: --gta-root (GTA5: the i.i.d. training and test data)" in capsys.readouterr().err
    # the Cityscapes folder given as the GTA5 root: the missing folder is named
    assert run_cli("--gta-root", str(trees[1]), "--cityscapes-root", str(trees[1]), "--out", str(tmp_path / "o")) == 2
    assert f"GTA5 root: no folder {trees[1] / 'images'}" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_a_foreign_non_empty_output_folder_is_refused(trees, tmp_path, capsys):
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "notes.txt").write_text("mine")
    assert run_cli("--gta-root", str(trees[0]), "--cityscapes-root", str(trees[1]), "--out", str(tmp_path / "o")) == 2
    assert "is not empty and holds no GTA5/Cityscapes preparation" in capsys.readouterr().err
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["notes.txt"]


def test_resume_after_a_kill(trees, prepared, tmp_path, wait_until):
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "values_seg.cli", "data", "gta-cityscapes", "prepare", "--gta-root", str(trees[0]),
           "--cityscapes-root", str(trees[1]), "--out", str(out), "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    journal = out / "progress.jsonl"
    wait_until(lambda: proc.poll() is not None or (journal.exists() and journal.read_text().count("\n") >= 3),
               "two frames journalled", every=0.01)  # header + 2 frames
    assert proc.poll() is None, "the preparation finished before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "manifest.json").exists()
    journalled = journal.read_text().count("\n") - 1
    summary = prepare(*trees, out, progress=False)
    assert summary.kept >= 2 and summary.kept == journalled and summary.prepared == 10 - journalled
    expected = manifest(prepared[0])["cases"]
    got = manifest(out)["cases"]
    assert {c: e["outputs"] for c, e in got.items()} == {c: e["outputs"] for c, e in expected.items()}
    assert not [p for p in out.rglob("*") if is_temporary(p)]


def test_truncated_outputs_and_changed_sources_are_redone(trees, prepared, tmp_path):
    gta, cs = tmp_path / "gta5", tmp_path / "cityscapes"
    shutil.copytree(trees[0], gta)
    shutil.copytree(trees[1], cs)
    out = tmp_path / "out"
    first = prepare(gta, cs, out, workers=2, progress=False)
    assert first.prepared == 10
    expected = {c: e["outputs"] for c, e in manifest(prepared[0])["cases"].items()}
    assert {c: e["outputs"] for c, e in manifest(out)["cases"].items()} == expected  # 2 workers = 1 worker
    assert prepare(gta, cs, out, progress=False).kept == 10
    truncated = out / expected["gta5_00003"]["image"]["path"]
    truncated.write_bytes(truncated.read_bytes()[:1000])
    label = gta / "labels" / "00005.png"
    label.write_bytes(label.read_bytes())  # same bytes, new modification time: redone
    os.utime(label, ns=(label.stat().st_atime_ns, label.stat().st_mtime_ns + 10**9))
    again = prepare(gta, cs, out, progress=False)
    assert (again.prepared, again.kept) == (2, 8)
    assert sha(truncated) == expected["gta5_00003"]["image"]["sha256"]
