"""A prediction model's own output head and training loss (:class:`Head`).

It lives in the engine, which builds, trains and keys it; prediction models declare theirs
(:mod:`values_seg.components.prediction_model` re-exports it, the documented place to import it from).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # annotations only: declaring a head (and the config's specs) needs no torch
    import torch
    from torch import nn


class Head:
    """A prediction model's own output head and training loss on top of a C0 backbone.

    Subclass it as a ``@dataclass(frozen=True)`` with a class attribute ``name``; its fields are
    its training-relevant parameters (they enter the training key). Override:

    * :meth:`out_channels`: how many channels the backbone must emit (default: ``C``);
    * :meth:`build`: the network around the backbone (default: the backbone itself);
    * :meth:`loss`: the training loss of one batch (``output`` is what the built network returns,
      ``target`` the label map ``[B, *spatial]``; ``epoch`` counts from 0; ``recipe`` is the
      spec's :class:`values_seg.engine.Recipe`, e.g. to anchor on its loss via
      :func:`values_seg.engine.losses.recipe_loss`);
    * :meth:`training_inputs`: what the built network takes in training beside the image
      (default: nothing).
    """

    name: ClassVar[str]
    _by_name: ClassVar[dict[str, type]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("name")
        if isinstance(name, str):
            Head._by_name[name] = cls

    def out_channels(self, num_classes: int) -> int:
        return num_classes

    def build(self, backbone: nn.Module, arch: dict) -> nn.Module:
        return backbone

    def loss(self, output: Any, target: torch.Tensor, *, ignore_index: int | None, epoch: int, recipe: Any) -> torch.Tensor:
        raise NotImplementedError

    def training_inputs(self, target: torch.Tensor) -> tuple:
        """The built network's inputs after the image in training: the loop calls
        ``net(x, *head.training_inputs(target))`` (default ``()``: ``net(x)``). ``target`` is the
        batch's label map after augmentation (ignored pixels included). It may draw random numbers
        (noise to reparameterise): it runs under the training's own random state, in a fused group
        too, outside the vectorised forward (which must draw none). Everywhere else (inference,
        the learning curve's validation Dice) the network is called with the image alone."""
        return ()

    def phases(self) -> list[tuple[str, int, int]]:
        """Named phases of its training, ``(name, first epoch, last epoch)`` counting from 1 (the
        learning-curve figure marks them); default: none."""
        return []

    def params(self) -> dict[str, Any]:
        if not dataclasses.is_dataclass(self):
            raise TypeError(f"{type(self).__name__} must be a frozen dataclass (its fields are its training key)")
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @staticmethod
    def describe(head: "Head | None") -> dict:
        """The head's part of a training key (``None``: the plain softmax head)."""
        if head is None:
            return {"kind": "softmax", "params": {}}
        from values_seg.storage.canonical import jsonable

        return {"kind": head.name, "params": {k: jsonable(tuple(v) if isinstance(v, list) else v)
                                              for k, v in head.params().items()}}

    @staticmethod
    def from_dict(d: dict) -> "Head | None":
        """Inverse of :meth:`describe`; the module defining the head must be loaded."""
        if d["kind"] == "softmax":
            return None
        cls = Head._by_name.get(d["kind"])
        if cls is None:
            raise ValueError(f"unknown head {d['kind']!r}: load the plugin that defines it "
                             f"(known: {', '.join(sorted(Head._by_name)) or 'none'})")
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in d["params"].items()})
