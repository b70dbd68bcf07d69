"""Cache keys from declared inputs (values_seg.storage.artifact): every field of a stage's inputs is in its
key, component references with their labels, specs by their own keys; nothing else is accepted."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from values_seg.storage.artifact import Inputs, plain
from values_seg.registry import ComponentRef


@dataclass(frozen=True)
class Doubling(Inputs):
    stage = "evaluation"  # a known stage: its framework modules enter the code digest
    folder = "doublings"

    value: int
    measure: ComponentRef
    note: str = ""


class Spec:
    def key(self) -> str:
        return "spec-key"


def test_every_field_and_the_label_enter_the_key(tmp_path):
    ref = ComponentRef("measure", "predictive_entropy")
    base = Doubling(1, ref)
    assert base.key() == Doubling(1, ComponentRef("measure", "predictive_entropy")).key()
    changed = [Doubling(2, ref), Doubling(1, ComponentRef("measure", "predictive_entropy", label="pe")),
               Doubling(1, ComponentRef("measure", "max_softmax")), Doubling(1, ref, note="x")]
    keys = {base.key(), *(c.key() for c in changed)}
    assert len(keys) == 1 + len(changed)
    assert base.path(tmp_path) == tmp_path / "doublings" / base.key()


def test_plain_values():
    ref = ComponentRef("aggregation", "patch", {"size": 5}, label="p5")
    assert plain(ref) == {"kind": "aggregation", "name": "patch", "params": {"size": 5}, "label": "p5"}
    assert plain((Spec(), {"a": [1, 2.5, None]})) == [{"key": "spec-key"}, {"a": [1, 2.5, None]}]
    with pytest.raises(TypeError, match="a stage input must be JSON data"):
        plain(object())
