"""Training specifications: everything that determines a set of trained weights, and nothing else,
keyed by the sha256 of their canonical JSON (docs/design-rationale.md,
"Training specs and their keys").
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Iterable, Literal, Mapping

from values_seg.storage.artifact import Inputs
from values_seg.hookspecs import SUPPLIED_ARGS
from values_seg.engine.head import Head
from values_seg.registry import ComponentRef
from values_seg.storage.canonical import jsonable
from values_seg.storage.run_files import CHECKPOINTS

#: Bumped when the meaning of a spec's fields changes (the code itself is digested into every key;
#: random streams are not: they derive from the spec's fields, see :meth:`TrainingSpec.stream_identity`).
ENGINE_VERSION = 2

#: The arithmetic a recipe may train and predict in (``Recipe.precision``).
PRECISIONS = ("fp32", "bf16", "fp16")

#: The most epochs, steps per epoch or samples per batch a recipe may ask for (more would run until killed).
MAX_STEPS = 100_000

# Backbone factory arguments the engine supplies itself (not part of ``backbone.params``).
BACKBONE_ARGS = SUPPLIED_ARGS["backbone"]


def dataset_ref(name: str, params: Mapping | None = None, label: str = "") -> ComponentRef:
    return ComponentRef("dataset", name, dict(params or {}), label)


def backbone_ref(name: str, params: Mapping | None = None, label: str = "") -> ComponentRef:
    clash = [k for k in (params or {}) if k in BACKBONE_ARGS]
    if clash:
        raise ValueError(f"backbone params must not set {clash}: the engine supplies them")
    return ComponentRef("backbone", name, dict(params or {}), label)


@dataclass(frozen=True)
class Recipe:
    """Optimisation and augmentation: the paper's U-Net recipe by default (appendix C.1).

    ``epochs`` x ``steps_per_epoch`` optimiser steps (``steps_per_epoch=None``: one pass over the
    training cases, ``ceil(n_train / batch_size)``). Augmentations are drawn per sample and step:
    each axis in ``flip_axes`` (spatial axes, 0 = first spatial axis, negative from the end;
    ``None`` = every axis) flipped with ``flip_prob``; Gaussian noise of std ``noise_std`` added
    with ``noise_prob``; for 2D only, optional rotation by up to ``rotation_deg`` degrees and
    scaling by a factor in ``scale_range`` (zoom in = random crop, zoom out = padding).
    ``precision``: the arithmetic of training and inference (:mod:`values_seg.engine.precision`):
    ``fp32``, or mixed precision with ``bf16`` or ``fp16`` (with loss scaling); a config's
    ``auto`` is bf16 on CUDA and fp32 elsewhere (:func:`values_seg.engine.precision.resolve`).
    """

    optimizer: Literal["adam", "sgd", "rmsprop"] = "adam"
    lr: float = 3e-4
    weight_decay: float = 1e-5
    momentum: float = 0.0
    lr_schedule: Literal["constant", "poly"] = "constant"
    batch_size: int = 8
    epochs: int = 150
    steps_per_epoch: int | None = None
    loss: Literal["dice_ce", "ce"] = "dice_ce"
    flip_axes: tuple[int, ...] | None = None
    flip_prob: float = 0.5
    noise_std: float = 0.1
    noise_prob: float = 0.5
    rotation_deg: float = 0.0
    scale_range: tuple[float, float] | None = None
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"

    def __post_init__(self) -> None:
        f = lambda name, v: object.__setattr__(self, name, v)  # noqa: E731
        for name in ("lr", "weight_decay", "momentum", "flip_prob", "noise_std", "noise_prob", "rotation_deg"):
            f(name, float(getattr(self, name)))
        for name in ("batch_size", "epochs"):
            f(name, int(getattr(self, name)))
        if self.steps_per_epoch is not None:
            f("steps_per_epoch", int(self.steps_per_epoch))
        if self.flip_axes is not None:
            f("flip_axes", tuple(sorted({int(a) for a in self.flip_axes})))
        if self.scale_range is not None:
            lo, hi = (float(v) for v in self.scale_range)
            f("scale_range", None if lo == hi == 1.0 else (lo, hi))
        if self.optimizer == "adam":
            f("momentum", 0.0)  # unused by Adam: keep it out of the key
        if self.flip_prob == 0.0 or self.flip_axes == ():
            f("flip_axes", ())
            f("flip_prob", 0.0)
        if self.noise_std == 0.0 or self.noise_prob == 0.0:
            f("noise_std", 0.0)
            f("noise_prob", 0.0)
        if self.optimizer not in ("adam", "sgd", "rmsprop"):
            raise ValueError(f"recipe: unknown optimizer {self.optimizer!r} (adam, sgd, rmsprop)")
        if self.loss not in ("dice_ce", "ce"):
            raise ValueError(f"recipe: unknown loss {self.loss!r} (dice_ce, ce); a prediction model with a "
                             f"loss of its own brings it with its head")
        if self.precision not in PRECISIONS:
            raise ValueError(f"recipe: unknown precision {self.precision!r} ({', '.join(PRECISIONS)}; "
                             f"in a config also auto: bf16 on CUDA, else fp32)")
        if self.lr_schedule not in ("constant", "poly"):
            raise ValueError(f"recipe: unknown lr_schedule {self.lr_schedule!r} (constant, poly)")
        problems = [
            f"{name} must be {rule}, got {getattr(self, name)}" for name, ok, rule in (
                ("lr", self.lr > 0, "> 0"),
                ("weight_decay", self.weight_decay >= 0, ">= 0"),
                ("momentum", 0 <= self.momentum < 1, "in [0, 1)"),
                ("batch_size", 1 <= self.batch_size <= MAX_STEPS, f"in [1, {MAX_STEPS}]"),
                ("epochs", 1 <= self.epochs <= MAX_STEPS,
                 f"in [1, {MAX_STEPS}] (0: an untrained network would be scored as if trained)"),
                ("steps_per_epoch", self.steps_per_epoch is None or 1 <= self.steps_per_epoch <= MAX_STEPS,
                 f"in [1, {MAX_STEPS}]"),
                ("flip_prob", 0 <= self.flip_prob <= 1, "in [0, 1]"),
                ("noise_std", self.noise_std >= 0, ">= 0"),
                ("noise_prob", 0 <= self.noise_prob <= 1, "in [0, 1]"),
                ("rotation_deg", 0 <= self.rotation_deg <= 180, "in [0, 180]"),
                ("scale_range", self.scale_range is None or 0 < self.scale_range[0] <= self.scale_range[1],
                 "(low, high) with 0 < low <= high"),
            ) if not ok
        ]
        if problems:
            raise ValueError("recipe: " + "; ".join(problems))

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> "Recipe":
        """``unet`` (Adam, Dice + CE; toy and LIDC) or ``hrnet`` (SGD, CE; GTA5/Cityscapes),
        from the paper's appendix C.1; ``overrides`` replace single fields."""
        if name not in RECIPE_PRESETS:
            raise ValueError(f"unknown recipe preset {name!r}; available: {', '.join(RECIPE_PRESETS)}")
        return dataclasses.replace(RECIPE_PRESETS[name], **overrides)

    def replace(self, **changes: Any) -> "Recipe":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        """Every field; ``precision`` only where it is not fp32 (what every recipe computed in before
        the field existed), so fp32 keys, random streams and checkpoints stay what they were."""
        return {f.name: jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)
                if not (f.name == "precision" and self.precision == "fp32")}


RECIPE_PRESETS: dict[str, Recipe] = {
    "unet": Recipe(),
    # SGD lr 0.01, wd 5e-4, momentum 0.9, batch 6, CE; horizontal flips, rotation, scaling
    # (= random cropping / padding) and Gaussian noise. (A prediction model may override the
    # optimiser for its own trainings, as the paper's variability model does on this data.)
    "hrnet": Recipe(
        optimizer="sgd", lr=0.01, weight_decay=5e-4, momentum=0.9, lr_schedule="poly", batch_size=6,
        loss="ce", flip_axes=(-1,), rotation_deg=22.5, scale_range=(0.8, 1.2),  # the paper code's limits
    ),
}


@dataclass(frozen=True)
class TrainingSpec:
    """Everything that determines one set of trained weights.

    ``dataset``/``backbone`` are :class:`ComponentRef` (or build them with :meth:`create`), the
    training cases are ``dataset.case_ids(train_split)`` plus ``extra_cases`` (``(split, case_id)``
    pairs whose labels are added, e.g. active learning's queried cases), ``dropout`` the
    backbone's dropout probability, ``head`` a prediction model's own output head and loss
    (``None``: the backbone's logits, trained with the recipe's loss), ``recipe`` the
    optimisation, ``seed`` seeds initialisation, sampling, augmentation and dropout, and
    ``threads`` is the number of CPU threads it trains with (CPU results depend on it).
    ``fused``: trained in a fused group (:mod:`values_seg.engine.fused`: one vectorised step for
    several specs, a member's weights independent of its group); its arithmetic differs from a
    training of its own, so it is part of the key. Normalised to ``False`` where a member's
    arithmetic would depend on its group: more than one CPU thread, or fp16 loss scaling.
    """

    dataset: ComponentRef
    backbone: ComponentRef
    recipe: Recipe = field(default_factory=Recipe)
    head: Head | None = None
    dropout: float = 0.0
    seed: int = 0
    train_split: str = "train"
    extra_cases: tuple[tuple[str, str], ...] = ()
    threads: int = 1
    fused: bool = False

    def __post_init__(self) -> None:
        f = lambda name, v: object.__setattr__(self, name, v)  # noqa: E731
        if not isinstance(self.dataset, ComponentRef) or self.dataset.kind != "dataset":
            raise TypeError(f"TrainingSpec.dataset must be a dataset ComponentRef, got {self.dataset!r}")
        if not isinstance(self.backbone, ComponentRef) or self.backbone.kind != "backbone":
            raise TypeError(f"TrainingSpec.backbone must be a backbone ComponentRef, got {self.backbone!r}")
        f("dropout", float(self.dropout))
        f("seed", int(self.seed))
        f("threads", int(self.threads))
        f("fused", bool(self.fused) and self.threads == 1 and self.recipe.precision != "fp16")
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {self.dropout}")
        f("extra_cases", tuple(sorted({(str(s), str(c)) for s, c in self.extra_cases})))
        if self.head is not None and not isinstance(self.head, Head):
            raise TypeError(f"TrainingSpec.head must be a values_seg.engine.head.Head or None, got {self.head!r}")

    @classmethod
    def create(
        cls,
        dataset: str | ComponentRef,
        backbone: str | ComponentRef = "unet",
        *,
        dataset_params: Mapping | None = None,
        backbone_params: Mapping | None = None,
        recipe: Recipe | None = None,
        **fields: Any,
    ) -> "TrainingSpec":
        """Convenience constructor from names and parameter dicts."""
        if not isinstance(dataset, ComponentRef):
            dataset = dataset_ref(dataset, dataset_params)
        if not isinstance(backbone, ComponentRef):
            backbone = backbone_ref(backbone, backbone_params)
        return cls(dataset=dataset, backbone=backbone, recipe=recipe or Recipe(), **fields)

    def replace(self, **changes: Any) -> "TrainingSpec":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return {
            "dataset": self.dataset.to_dict(),
            "backbone": self.backbone.to_dict(),
            "recipe": self.recipe.to_dict(),
            "head": Head.describe(self.head),
            "dropout": self.dropout,
            "seed": self.seed,
            "train_split": self.train_split,
            "extra_cases": [list(p) for p in self.extra_cases],
            "threads": self.threads,
            **({"fused": True} if self.fused else {}),  # one-by-one keys stay what they were
        }

    def stream_identity(self) -> dict:
        """What seeds this training's part of the inference randomness (:func:`values_seg.engine.
        inference.stream_key`): :meth:`to_dict` without ``threads`` and ``fused``, and never a code digest. (The
        training itself draws from ``seed`` alone: its experiment seed and member.)"""
        return {k: v for k, v in self.to_dict().items() if k not in ("threads", "fused")}

    def key(self) -> str:
        """The key of the training's declared inputs (:class:`TrainingInputs`): this spec in full,
        the contents of the files its parameters name, the engine version and the digest of the
        code that trains it (the dataset's, backbone's and head's modules and the engine's
        training loop, :func:`values_seg.storage.provenance.code_digest`)."""
        key = self.__dict__.get("_key")
        if key is None:  # memoised outside the dataclass fields (not compared, not hashed)
            files = {role: ref.files() for role, ref in (("dataset", self.dataset), ("backbone", self.backbone))}
            key = TrainingInputs(self.to_dict(), self.components(), {r: f for r, f in files.items() if f}).key()
            self.__dict__["_key"] = key
        return key

    def components(self) -> tuple:
        """The components whose code trains this spec: the dataset, the backbone, the head's class."""
        def obj(ref: ComponentRef):
            try:
                return ref.component().obj
            except ValueError:  # not registered: its name and parameters still key it
                return None

        return obj(self.dataset), obj(self.backbone), type(self.head) if self.head else None

    @classmethod
    def from_dict(cls, d: Mapping) -> "TrainingSpec":
        return cls(
            dataset=ComponentRef("dataset", d["dataset"]["name"], d["dataset"]["params"]),
            backbone=ComponentRef("backbone", d["backbone"]["name"], d["backbone"]["params"]),
            recipe=Recipe(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in d["recipe"].items()}),
            head=Head.from_dict(d["head"]),
            dropout=d["dropout"],
            seed=d["seed"],
            train_split=d["train_split"],
            extra_cases=tuple(tuple(p) for p in d["extra_cases"]),
            threads=d.get("threads", 1),
            fused=d.get("fused", False),
        )

    def describe(self) -> str:
        """A short human-readable label for logs and progress bars."""
        bits = [self.dataset.name, self.backbone.name, f"seed{self.seed}"]
        if self.dropout:
            bits.append(f"p{self.dropout:g}")
        if self.head is not None:
            bits.append(self.head.name)
        if self.extra_cases:
            bits.append(f"+{len(self.extra_cases)}cases")
        return "/".join(bits) + f" [{self.key()[:8]}]"


#: A field digested as code (:meth:`values_seg.storage.artifact.Inputs.code`), not as a value.
CODE = {"key": False}


@dataclass(frozen=True)
class TrainingInputs(Inputs):
    """A training's declared inputs (:mod:`values_seg.storage.artifact`), whose key names its checkpoint:
    the spec in full (:meth:`TrainingSpec.to_dict`, so a fused spec keys apart from a one-by-one
    one), the contents of the files its components' parameters name; its code: the dataset's,
    backbone's and head's (:meth:`TrainingSpec.components`)."""

    stage = "training"
    version = ENGINE_VERSION
    folder = CHECKPOINTS

    spec: Mapping
    components: tuple = field(default=(), metadata=CODE)
    #: the contents of the files the dataset's and backbone's parameters name (e.g. weights)
    files: Mapping = field(default_factory=dict)

    def code(self) -> tuple:
        return self.components


def unique_specs(specs: Iterable[TrainingSpec]) -> dict[str, TrainingSpec]:
    """Specs deduplicated by key, in first-seen order."""
    out: dict[str, TrainingSpec] = {}
    for s in specs:
        out.setdefault(s.key(), s)
    return out
