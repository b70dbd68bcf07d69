"""Inputs a component cannot change for the others: shared tensors watched by torch's version
counters, NumPy arrays made read-only (docs/design-rationale.md,
"Inputs a component cannot change").
"""

from __future__ import annotations

import numpy as np
import torch


def version(tensor: torch.Tensor) -> int | None:
    """torch's in-place version counter of ``tensor`` (``None`` for an inference tensor: it has none)."""
    return None if tensor.is_inference() else tensor._version


class Unchanged:
    """Named tensors that must stay as they were when added (see the module docstring)."""

    __slots__ = ("_expected",)

    def __init__(self, **tensors: torch.Tensor | None):
        self._expected: dict[str, tuple[torch.Tensor, int | None]] = {}
        for name, tensor in tensors.items():
            self.add(name, tensor)

    def add(self, name: str, tensor) -> None:
        """Watch ``tensor`` (a list or tuple of them: each, as ``name[i]``; anything else: nothing)."""
        if isinstance(tensor, torch.Tensor):
            self._expected[name] = (tensor, version(tensor))
        elif isinstance(tensor, (list, tuple)):
            for i, t in enumerate(tensor):
                self.add(f"{name}[{i}]", t)

    def modified(self) -> list[str]:
        """The names of the tensors changed in place since they were added."""
        return [name for name, (t, v) in self._expected.items() if v is not None and t._version != v]


def modified(*watched: Unchanged) -> list[str]:
    return [name for w in watched for name in w.modified()]


def message(names: list[str]) -> str:
    """What a component that changed its inputs is told."""
    return (f"modified its input(s) in place ({', '.join(names)}): inputs are shared with the other "
            f"components; compute on a copy (e.g. x.clone()) instead")


def private(samples: torch.Tensor, given) -> torch.Tensor:
    """``samples`` (checked from the caller's ``given``), cloned where it still shares the caller's
    memory: a component that changes it then changes only the evaluation's copy."""
    if isinstance(given, (torch.Tensor, np.ndarray)) and _shares(samples, given):
        return samples.clone()
    return samples


def _shares(tensor: torch.Tensor, given) -> bool:
    if isinstance(given, np.ndarray):
        return tensor.device.type == "cpu" and bool(np.may_share_memory(tensor.detach().numpy(), given))
    return tensor.untyped_storage().data_ptr() == given.untyped_storage().data_ptr()


def copies(tensors) -> list[torch.Tensor]:
    """A component's own copies of ``tensors`` (where the inputs outlive the call, e.g. the
    validation maps every fit reads)."""
    return [t.clone() for t in tensors]


def read_only(array: np.ndarray) -> np.ndarray:
    """``array`` that NumPy refuses to write to (a view: the owner's flag is kept)."""
    view = array.view()
    view.setflags(write=False)
    return view
