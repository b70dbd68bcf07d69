"""Files named by a parameter are keyed by their content, never by their name; every built-in
parameter that names a path says how its content is keyed; what is digested is noted for the
no-op rerun."""

from __future__ import annotations

import re
from typing import Annotated

import pytest

from values_seg.storage import input_files
from values_seg import registry
from values_seg.components.dataset import FINGERPRINT
from values_seg.params import InputPath, params_of
from values_seg.components.prediction_model import PredictionModel

#: parameter names that name a file or folder
PATH_LIKE = re.compile(r"(path|folder|root|dir|file|csv)$")


def test_every_builtin_parameter_naming_a_path_says_how_its_content_is_keyed():
    """A parameter that names a file or folder the component reads is declared ``InputPath``: keyed
    by its content, or by the component's own content key (a data set's fingerprint, a prediction
    model's cache identity). Trackers' folders are where they write, not what they read."""
    undeclared, unbacked = [], []
    for c in registry.components():
        for p in c.params:
            if not PATH_LIKE.search(p.name) or c.kind == "tracker":
                continue
            where = f"{c.kind} {c.name}.{p.name}"
            if p.reads is None:
                undeclared.append(where)
            elif p.reads.keyed_by == "fingerprint" and FINGERPRINT not in {q.name for q in c.params}:
                unbacked.append(where)
            elif p.reads.keyed_by == "cache_identity" and c.obj.cache_identity is PredictionModel.cache_identity:
                unbacked.append(where)
    assert not undeclared, f"declare these parameters InputPath(...): {undeclared}"
    assert not unbacked, f"these parameters name a content key their component does not have: {unbacked}"


def test_hrnet_weights_are_keyed_by_their_bytes_not_their_path(tmp_path):
    """Other weights at the same ``pretrained_path``: another backbone key, so another training key."""
    from values_seg.engine.specs import Recipe, TrainingSpec, backbone_ref, dataset_ref

    weights = tmp_path / "imagenet.pth"
    weights.write_bytes(b"first weights")
    ref = backbone_ref("hrnet", {"pretrained_path": str(weights)})
    spec = TrainingSpec(dataset=dataset_ref("toy"), backbone=ref, recipe=Recipe(epochs=1))
    with input_files.recording() as reads:
        before, spec_before = ref.key(), spec.key()
    assert str(weights.absolute()) in reads.stamps  # checked by the rerun
    weights.write_bytes(b"other weights")
    again = backbone_ref("hrnet", {"pretrained_path": str(weights)})
    assert again.key() != before
    assert TrainingSpec(dataset=dataset_ref("toy"), backbone=again, recipe=Recipe(epochs=1)).key() != spec_before


def test_a_prediction_models_weights_file_enters_its_cache_identity(tmp_path):
    class FromFile(PredictionModel):
        name = "from_file"
        family = "deterministic"

        def __init__(self, weights: Annotated[str, InputPath()]):
            self.weights = weights

    path = tmp_path / "w.bin"
    path.write_bytes(b"a")
    first = FromFile(str(path)).cache_identity()
    path.write_bytes(b"b")
    assert FromFile(str(path)).cache_identity() != first
    assert first["weights"] == str(path)  # the name is kept beside the content


def test_a_folder_is_digested_by_its_files_names_and_bytes(tmp_path):
    (tmp_path / "m" / "fold_0").mkdir(parents=True)
    (tmp_path / "m" / "plans.json").write_text("{}")
    (tmp_path / "m" / "fold_0" / "checkpoint.pth").write_bytes(b"x")
    first = input_files.content_digest(tmp_path / "m")
    (tmp_path / "m" / "fold_0" / "checkpoint.pth").write_bytes(b"y")
    assert input_files.content_digest(tmp_path / "m") != first
    (tmp_path / "m" / "fold_0" / "checkpoint.pth").write_bytes(b"x")
    assert input_files.content_digest(tmp_path / "m") == first
    (tmp_path / "m" / "fold_0" / "checkpoint.pth").rename(tmp_path / "m" / "fold_0" / "other.pth")
    assert input_files.content_digest(tmp_path / "m") != first
    with pytest.raises(FileNotFoundError, match="does not exist"):
        input_files.content_digest(tmp_path / "missing")


def test_noted_files_are_checked_by_size_and_time(tmp_path):
    path = tmp_path / "data.npy"
    path.write_bytes(b"12345")
    with input_files.recording() as reads:
        input_files.file_digest(path)
    assert set(reads.stamps) == {str(path.absolute())}
    stamps = reads.stamps
    assert input_files.unchanged(stamps)
    path.write_bytes(b"123456")
    assert not input_files.unchanged(stamps)
    path.unlink()
    assert not input_files.unchanged(stamps)


def test_the_declaration_is_read_from_the_annotation():
    def factory(dims: int, init: Annotated[str | None, InputPath()] = None, root: Annotated[str, InputPath("fingerprint")] = ""):
        return None

    params = {p.name: p for p in params_of(factory)}
    assert params["init"].reads == InputPath() and params["init"].annotation == str | None
    assert params["root"].reads.keyed_by == "fingerprint" and params["dims"].reads is None


def test_a_recording_sees_only_what_was_read_while_it_was_open(tmp_path):
    """A run's record keeps the files its own components read, and only a run whose component
    read files without noting them is left unrecorded: an earlier run of the same process that
    read a file since deleted, or a data set that noted nothing, does not follow later runs."""
    earlier, later = tmp_path / "earlier.npy", tmp_path / "later.npy"
    earlier.write_bytes(b"1")
    later.write_bytes(b"2")
    with input_files.recording() as first:
        input_files.file_digest(earlier)
        input_files.unnoted("dataset acme noted none of the files its fingerprint reads")
    earlier.unlink()
    with input_files.recording() as outer:
        with input_files.recording() as inner:  # both empty when it closes: the outer one stays open
            pass
        with input_files.recording() as inner:
            input_files.file_digest(later)
    assert first.unnoted and set(first.stamps) == {str(earlier.absolute())}
    assert not outer.unnoted and set(outer.stamps) == set(inner.stamps) == {str(later.absolute())}
    assert input_files.unchanged(outer.stamps)
