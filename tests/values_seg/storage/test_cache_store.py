"""values_seg.storage.cache_store: the one place the cache's layout lives; an older layout's cache is set aside
(never deleted) and recomputed once, said in one line; no module joins ``cache_dir / ...``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from values_seg.storage import run_directory
from values_seg.storage.artifact import Inputs
from values_seg.engine import Checkpoints, PredictionCache, TrainingSpec
from values_seg.engine.inference import PredictionInputs, prediction_key
from values_seg.engine.specs import Recipe, TrainingInputs, backbone_ref, dataset_ref
from values_seg.storage.run_files import CACHE_MARKER, CHECKPOINTS, EVALUATIONS, PREDICTIONS
from values_seg.storage.cache_store import KINDS, LAYOUT, CacheStore

ROOT = Path(__file__).resolve().parents[3]


def _spec(**kw) -> TrainingSpec:
    return TrainingSpec(dataset=dataset_ref("toy_lesions"), backbone=backbone_ref("tiny_unet"),
                        recipe=Recipe(epochs=1), **kw)


def test_the_store_names_every_stage_folder(tmp_path):
    store = CacheStore(tmp_path)
    assert store.path(CHECKPOINTS, "abc") == tmp_path / "checkpoints" / "abc"
    assert Checkpoints.of(store).root == tmp_path / "checkpoints"
    cache = PredictionCache.of(store, "float32")
    assert (cache.root, cache.dtype) == (tmp_path / "predictions", "float32")
    assert store.path("my_plugin_stage", "k1") == tmp_path / "my_plugin_stage" / "k1"  # a plugin's own kind


@pytest.mark.parametrize("kind, key", [("../x", "k"), (CACHE_MARKER, "k"), ("checkpoints.layout-v1", "k"),
                                       (CHECKPOINTS, "../k"), (CHECKPOINTS, ""), (CHECKPOINTS, "a/b")])
def test_an_unusable_kind_or_key_is_refused(tmp_path, kind, key):
    with pytest.raises(ValueError, match="unusable"):
        CacheStore(tmp_path).path(kind, key)


def test_inputs_name_their_folder_through_the_store(tmp_path):
    from dataclasses import dataclass

    @dataclass(frozen=True)
    class Doubled(Inputs):
        stage = "evaluation"  # a known stage: its framework modules enter the code digest
        folder = "doublings"
        x: int

    inputs = Doubled(3)
    assert inputs.path(tmp_path) == CacheStore(tmp_path).outputs(inputs) == tmp_path / "doublings" / inputs.key()


def test_training_and_prediction_keys_derive_from_declared_inputs():
    spec = _spec(seed=1)
    assert spec.key() == TrainingInputs(spec.to_dict(), spec.components()).key()
    assert _spec(seed=1, fused=True).key() != spec.key()  # a fused group's member keys apart
    assert _spec(seed=2).key() != spec.key()

    class Model:
        name = "deterministic"

        def cache_identity(self):
            return {}

    pkey = prediction_key(Model(), [spec], threads=1)
    assert pkey == PredictionInputs("deterministic", {}, (spec.key(),), 1, 2, Model).key()
    assert prediction_key(Model(), [spec], threads=2) != pkey


def test_a_code_field_is_digested_not_written_into_the_key():
    a = PredictionInputs("m", {}, ("k",), 1, 2, None)
    assert "model_class" not in json.dumps(__import__("values_seg.storage.artifact", fromlist=["plain"]).plain(a))


def _old_cache(tmp_path) -> Path:
    """A cache as values-seg wrote it before layouts were recorded: a marker without "layout"."""
    cache = tmp_path / "cache"
    run_directory.claim_cache(cache, tmp_path / "run")
    marker = json.loads((cache / CACHE_MARKER).read_text())
    del marker["layout"]
    (cache / CACHE_MARKER).write_text(json.dumps(marker))
    (cache / CHECKPOINTS).mkdir()
    (cache / CHECKPOINTS / "old.pt").write_bytes(b"weights")
    (cache / EVALUATIONS / "e1").mkdir(parents=True)
    return cache


def test_a_new_cache_records_the_current_layout(tmp_path):
    cache = run_directory.claim_cache(tmp_path / "cache", tmp_path / "run")
    assert json.loads((cache / CACHE_MARKER).read_text())["layout"] == LAYOUT
    assert CacheStore(cache).upgrade() is None


def test_an_older_layout_is_set_aside_once_and_said_once(tmp_path):
    cache = _old_cache(tmp_path)
    store = CacheStore(cache)
    assert store.layout() == 1
    line = store.upgrade()
    assert line is not None and "\n" not in line
    assert re.search(r"older layout \(v1.*recomputing once in layout v%d" % LAYOUT, line)
    assert (cache / "checkpoints.layout-v1" / "old.pt").read_bytes() == b"weights"  # kept, not deleted
    assert (cache / "evaluations.layout-v1" / "e1").is_dir()
    assert not (cache / CHECKPOINTS).exists() and not (cache / PREDICTIONS).exists()
    assert store.layout() == LAYOUT
    assert store.upgrade() is None  # the second run: nothing to say, nothing moved
    run_directory.claim_cache(cache, tmp_path / "run")  # still values-seg's cache


@pytest.mark.parametrize("kind", [CHECKPOINTS, EVALUATIONS])
def test_an_upgrade_never_overwrites_what_is_in_the_way_and_moves_nothing(tmp_path, kind):
    """The error carries the folder in the way (its ``filename``); no folder is set aside, not even
    those before it."""
    cache = _old_cache(tmp_path)
    (cache / f"{kind}.layout-v1").write_text("the user's")
    with pytest.raises(FileExistsError, match=f"cannot set aside the cache's {kind} of layout v1") as raised:
        CacheStore(cache).upgrade()
    assert raised.value.filename == str(cache / f"{kind}.layout-v1")
    assert (cache / f"{kind}.layout-v1").read_text() == "the user's"
    assert (cache / CHECKPOINTS / "old.pt").exists() and (cache / EVALUATIONS / "e1").is_dir()
    assert CacheStore(cache).layout() == 1


def test_every_core_kind_is_a_stage_folder_of_the_store():
    assert set(KINDS) >= {CHECKPOINTS, PREDICTIONS, EVALUATIONS}


def test_no_module_joins_the_cache_layout_by_hand():
    """Only values_seg/storage/cache_store.py knows the layout: nobody writes ``cache_dir / X`` (plugins included)."""
    join = re.compile(r"\bcache(_dir)?\)?\s*/\s*(\"|'|[A-Z_]+\b|run_files\.)")
    found = [f"{p.relative_to(ROOT)}:{i}" for folder in ("values_seg", "plugins") for p in (ROOT / folder).rglob("*.py")
             if p.name != "store.py" for i, line in enumerate(p.read_text().splitlines(), 1) if join.search(line)]
    assert found == []


def test_a_mapped_verified_read_is_the_files_bytes_and_refuses_a_damaged_file(tmp_path):
    """cache_store.mapped_verified (the prediction cache's read, issue 34): the file's bytes in place,
    checked against its sidecar; one flipped byte (same size) is refused and the file set aside;
    an empty file (which cannot be mapped) is read as bytes; the map is closed after the block."""
    import numpy as np

    from values_seg.storage import cache_store
    from values_seg.storage.cache_store import CorruptFileError, CorruptFileWarning

    path = tmp_path / "case.npy"
    data = bytes(range(256)) * 64
    cache_store.write_verified(path, data, {})
    with cache_store.mapped_verified(path, "prediction") as mapped:
        assert bytes(mapped) == data
        view = np.frombuffer(mapped, np.uint8)
        assert view[255] == 255 and not view.flags.writeable
        del view
    assert mapped.closed
    damaged = bytearray(data)
    damaged[1000] ^= 1
    path.write_bytes(bytes(damaged))
    with pytest.warns(CorruptFileWarning), pytest.raises(CorruptFileError, match="sha256"):
        with cache_store.mapped_verified(path, "prediction"):
            pass
    assert not path.exists() and path.with_name("case.npy.corrupt").exists()
    empty = tmp_path / "empty.npy"
    cache_store.write_verified(empty, b"", {})
    with cache_store.mapped_verified(empty, "prediction") as content:
        assert content == b""


def test_a_file_that_cannot_be_mapped_is_read_as_bytes(tmp_path, monkeypatch):
    """A file system without memory maps (mmap raises OSError, e.g. ENODEV on some FUSE mounts):
    the verified read falls back to reading the bytes, and a damaged file is still refused."""
    import errno
    import mmap as mmap_module

    from values_seg.storage import cache_store
    from values_seg.storage.cache_store import CorruptFileError, CorruptFileWarning

    def no_maps(*args, **kwargs):
        raise OSError(errno.ENODEV, "No such device")

    path = tmp_path / "case.npy"
    data = b"\x93NUMPY" + bytes(range(200))
    cache_store.write_verified(path, data, {})
    monkeypatch.setattr(mmap_module, "mmap", no_maps)
    with cache_store.mapped_verified(path, "prediction") as content:
        assert content == data
    path.write_bytes(data[:-1] + b"\x00")
    with pytest.warns(CorruptFileWarning), pytest.raises(CorruptFileError, match="sha256"):
        with cache_store.mapped_verified(path, "prediction"):
            pass


@pytest.mark.parametrize("interrupted_at", ["sidecar", "data"])
def test_an_interrupted_write_leaves_no_data_file_without_its_record(tmp_path, monkeypatch, interrupted_at):
    """cache_store.write_verified moves the data file into place last, after its sidecar: a Ctrl-C (or a
    worker's SIGTERM, raised as KeyboardInterrupt) during the sidecar's write or the data's move
    leaves no data file and no temporary file, and the lone sidecar it may leave reads as absent,
    without a corruption warning, so a resumed run reuses every checkpoint it finds."""
    import os
    import warnings

    from values_seg.storage import atomic, cache_store

    path = tmp_path / "k.pt"
    real_write, real_replace = atomic.write, os.replace
    seen = []

    def write(target, data, **options):
        if interrupted_at == "sidecar":
            raise KeyboardInterrupt
        real_write(target, data, **options)

    def replace(src, dst):
        if Path(dst) == path:
            seen.append(cache_store.sidecar_of(path).exists())
            if interrupted_at == "data":
                raise KeyboardInterrupt
        real_replace(src, dst)

    monkeypatch.setattr(atomic, "write", write)
    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        cache_store.write_verified(path, b"weights", {})
    monkeypatch.undo()
    assert seen == ([True] if interrupted_at == "data" else [])  # the record is there before the data
    assert not path.exists() and not any(atomic.is_temporary(p) for p in tmp_path.iterdir())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert cache_store.check(path, "checkpoint") is None
    side = cache_store.write_verified(path, b"weights", {})
    assert cache_store.check(path, "checkpoint") == side and path.read_bytes() == b"weights"


def _stores(root: Path) -> list[str]:
    """Modules and classes of the core named a store or a cache: ``path`` or ``path:Class``."""
    import ast

    found = []
    for path in sorted((root / "values_seg").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if {"store", "cache"} & set(path.stem.split("_")):
            found.append(rel)
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if isinstance(node, ast.ClassDef) and node.name.endswith(("Store", "Cache")):
                found.append(f"{rel}:{node.name}")
    return found


def test_one_store_name():
    """One cache store on disk; the engine's views of it are named as what they hold (``Checkpoints``,
    ``PredictionCache``), and the only other cache is a training's cases in memory."""
    assert _stores(ROOT) == ["values_seg/engine/loader.py:CaseCache", "values_seg/engine/predictions.py:PredictionCache",
                             "values_seg/storage/cache_store.py", "values_seg/storage/cache_store.py:CacheStore"]


def test_the_store_scan_finds_a_second_store(tmp_path):
    (tmp_path / "values_seg" / "engine").mkdir(parents=True)
    (tmp_path / "values_seg" / "engine" / "store.py").write_text("class CheckpointStore:\n    pass\n")
    assert _stores(tmp_path) == ["values_seg/engine/store.py", "values_seg/engine/store.py:CheckpointStore"]
