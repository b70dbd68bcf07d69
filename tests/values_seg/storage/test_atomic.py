"""atomic.replacing: a reader sees the old version or the new one, never a temporary file."""

import ast
from pathlib import Path

import pytest

from values_seg.storage import atomic
from values_seg.storage.atomic import replacing


@pytest.mark.parametrize("fault", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_failed_write_keeps_the_old_file_and_removes_the_temporary_one(tmp_path, fault):
    target = tmp_path / "table.csv"
    target.write_text("old")
    with pytest.raises(type(fault)):
        with replacing(target) as tmp:
            tmp.write_text("half")
            raise fault
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_a_folder_is_written_whole_or_not_at_all(tmp_path):
    target = tmp_path / "evaluation"
    with pytest.raises(KeyboardInterrupt):
        with replacing(target) as tmp:
            tmp.mkdir()
            (tmp / "part.npz").write_bytes(b"x")
            raise KeyboardInterrupt
    assert list(tmp_path.iterdir()) == []
    with replacing(target) as tmp:
        tmp.mkdir()
        (tmp / "done.json").write_text("{}")
    assert [p.name for p in tmp_path.iterdir()] == ["evaluation"] and (target / "done.json").exists()


def test_keep_suffix_lets_a_writer_pick_the_format_by_the_extension(tmp_path):
    """SimpleITK chooses the format from the name: the temporary file keeps ``.nii.gz``."""
    import numpy as np
    import SimpleITK as sitk

    from values_seg.storage.atomic import is_temporary

    target = tmp_path / "case_001.nii.gz"
    with replacing(target, keep_suffix=True) as tmp:
        assert tmp.name.endswith(".nii.gz") and is_temporary(tmp) and tmp.parent == tmp_path
        sitk.WriteImage(sitk.GetImageFromArray(np.arange(8, dtype=np.float32).reshape(2, 4)), str(tmp))
    assert [p.name for p in tmp_path.iterdir()] == ["case_001.nii.gz"]
    assert sitk.GetArrayFromImage(sitk.ReadImage(str(target))).tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_fsync_reaches_the_disk_before_the_replace(tmp_path, monkeypatch):
    import os

    target = tmp_path / "manifest.json"
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append((os.readlink(f"/proc/self/fd/{fd}"), target.exists()))
                        or real(fd))
    with replacing(target) as tmp:
        tmp.write_text("{}")
    assert synced == []
    with replacing(target, fsync=True) as tmp:
        tmp.write_text('{"a": 1}')
    assert synced == [(str(tmp), True)]  # the temporary file, while the old target still stood
    assert target.read_text() == '{"a": 1}' and not tmp.exists()


def test_is_temporary_knows_only_replacings_names(tmp_path):
    from values_seg.storage.atomic import is_temporary

    with replacing(tmp_path / "index.csv") as tmp:
        assert is_temporary(tmp)
        tmp.write_text("case_id\n")
    for name in ("index.csv", ".index.csv", "index.csv.tmp", "a.tmp.nii.gz", ".index.csv.12.xyz.tmp"):
        assert not is_temporary(tmp_path / name), name


#: os.replace outside the helper, where it moves a damaged cache entry (or a user's file) aside rather than writing
RENAMES_ASIDE = {("values_seg/storage/cache_store.py", "set_aside"), ("values_seg/storage/cache_store.py", "upgrade"),  # an older layout's folders
                 ("values_seg/storage/user_files.py", "keep")}


def _hand_written_replaces(root: Path) -> list[str]:
    """``os.replace``/``os.rename`` calls and ``tmp.replace(...)`` of a temporary path outside
    :func:`replacing`, as ``file:line in function``."""
    found = []
    for package in ("values_seg", "plugins", "toy_data_generator"):
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            tree = ast.parse(path.read_text(encoding="utf-8"))
            where = {}  # call -> innermost enclosing function (ast.walk goes outside in)
            for func in ast.walk(tree):
                if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    where.update({node: func.name for node in ast.walk(func) if isinstance(node, ast.Call)})
            for node in ast.walk(tree):
                if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                        and isinstance(node.func.value, ast.Name)):
                    continue
                owner, attr, name = node.func.value.id, node.func.attr, where.get(node, "<module>")
                by_os = owner == "os" and attr in ("replace", "rename")
                by_path = "tmp" in owner.lower() and attr in ("replace", "rename") and len(node.args) == 1
                if (by_os or by_path) and (rel, name) not in RENAMES_ASIDE \
                        and (rel, name) != ("values_seg/storage/atomic.py", "replacing"):
                    found.append(f"{rel}:{node.lineno} in {name}")
    return sorted(set(found))


def test_one_atomic_write_helper():
    """Every temporary-file-and-rename write goes through ``atomic.replacing`` (or
    ``run_directory.write_owned``, which uses it)."""
    root = Path(__file__).resolve().parents[3]
    found = _hand_written_replaces(root)
    assert not found, "hand-written atomic writes (use values_seg.storage.atomic.replacing): " + ", ".join(found)


def test_one_integrity_record_and_check(tmp_path):
    """A sidecar and an evaluation manifest hold the same record, checked by the same function."""
    from values_seg.storage.cache_store import entry, problem, read_sidecar, set_aside, write_verified

    data = b"0123456789"
    record = entry(data)
    assert record == {"sha256": "84d89877f0d4041efb6bf91a16f0248f2fd573e6af05c19f96bedb9f882f7882", "size": 10}
    assert problem(record, data=data) is None and problem(record, size=10) is None
    assert problem(record, size=9) == "size 9 bytes, expected 10"
    assert problem(record, data=b"0123456780").startswith("sha256 ")
    assert problem({"size": 10}, size=10) == "no integrity record"
    side = write_verified(tmp_path / "a.bin", data, {"what": "test"})
    assert {k: side[k] for k in record} == record == {k: read_sidecar(tmp_path / "a.bin")[k] for k in record}
    folder = tmp_path / "evaluation"
    folder.mkdir()
    (folder / "x").write_bytes(data)
    assert set_aside(folder) == tmp_path / "evaluation.corrupt" and (tmp_path / "evaluation.corrupt" / "x").exists()


def _hand_written_writers(root: Path) -> list[str]:
    """Functions (outside :mod:`values_seg.storage.atomic`) whose whole body writes one file through
    ``replacing``: a second atomic writer beside :func:`values_seg.storage.atomic.write`."""
    found = []
    for package in ("values_seg", "plugins", "toy_data_generator"):
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel == "values_seg/storage/atomic.py":
                continue
            for func in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    continue
                body = [s for s in func.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
                body = [s for s in body if not (isinstance(s, ast.Assign) and len(body) > 1)]  # path = Path(path)
                if len(body) == 1 and isinstance(body[0], ast.With) and len(body[0].body) == 1 \
                        and "replacing" in ast.unparse(body[0].items[0].context_expr) \
                        and ast.unparse(body[0].body[0]).startswith("tmp.write_"):
                    found.append(f"{rel}: {func.name}")
    return found


def test_no_second_atomic_writer():
    root = Path(__file__).resolve().parents[3]
    found = _hand_written_writers(root)
    assert not found, "write through values_seg.storage.atomic.write: " + ", ".join(found)


def test_the_writer_scan_finds_a_wrapper(tmp_path):
    (tmp_path / "values_seg").mkdir()
    (tmp_path / "values_seg" / "x.py").write_text(
        "def save(path, text):\n    with replacing(path) as tmp:\n        tmp.write_text(text)\n")
    assert _hand_written_writers(tmp_path) == ["values_seg/x.py: save"]
