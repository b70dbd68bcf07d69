"""C1 ``nnunet``: a trained nnU-Net v2 model folder as a fold ensemble (optionally with mirror TTA).

Its samples, family, spacing and cache key, and how an untrusted folder is loaded:
docs/design-rationale.md, "nnU-Net".
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Annotated, Any

import torch

from values_seg import hookimpl
from values_seg.storage.input_files import file_digest
from values_seg.params import InputPath
from values_seg.components.prediction_model import PredictionModel


class NnUNet(PredictionModel):
    """Trained nnU-Net v2 model folder: per-fold (and per-mirror) softmax samples, a fold ensemble."""

    name = "nnunet"
    label = "nnU-Net"
    family = "bayesian"
    uses_backbone = False  # trained by nnUNetv2_train

    def __init__(
        self,
        model_folder: Annotated[str, InputPath("cache_identity")],
        folds: int | str | list[int | str] = "auto",
        checkpoint: str = "checkpoint_final.pth",
        mirroring: bool = False,
        tile_step_size: float = 0.5,
        spacing: list[float] | None = None,
        trust_checkpoint: bool = False,
    ):
        from values_seg_plugins._nnunet.model import check_checkpoints, check_plans_file, parse_folds, resolve_folds

        folder = Path(model_folder).expanduser()
        parsed = parse_folds(folds)
        resolved = resolve_folds(folder, parsed, checkpoint)  # clear errors now, nnU-Net loads on first use
        check_plans_file(folder, trust_checkpoint)  # what loading would refuse, refused now: before any work
        if not trust_checkpoint:
            check_checkpoints(folder, resolved, checkpoint)
        self.model_folder = str(folder.resolve())
        self.folds: Any = "auto" if parsed is None else parsed
        self.checkpoint = checkpoint
        self.mirroring = bool(mirroring)
        self.tile_step_size = float(tile_step_size)
        self.trust_checkpoint = bool(trust_checkpoint)  # False: weights_only loading (no code runs)
        self.spacing = None if spacing is None else [float(s) for s in spacing]
        self._model = None
        self._fingerprint: str | None = None

    # -- the nnU-Net model, loaded once per process -----------------------------------------
    @property
    def model(self):
        """The loaded :class:`values_seg_plugins._nnunet.NnUNetModel`."""
        if self._model is None:
            from values_seg_plugins._nnunet.model import NnUNetModel

            self._model = NnUNetModel(
                self.model_folder,
                folds=None if self.folds == "auto" else self.folds,
                checkpoint=self.checkpoint,
                mirroring=self.mirroring,
                tile_step_size=self.tile_step_size,
                spacing=self.spacing,
                trust_checkpoint=self.trust_checkpoint,
            )
        return self._model

    def __getstate__(self) -> dict:  # ship to worker processes without the loaded network
        state = dict(self.__dict__)
        state["_model"] = None
        return state

    def fingerprint(self) -> str:
        """sha256 of ``plans.json``, ``dataset.json`` and the used checkpoints' bytes: identifies the
        weights themselves (``params()`` names only the folder), e.g. for a prediction cache key."""
        if getattr(self, "_fingerprint", None) is None:
            from values_seg_plugins._nnunet.model import resolve_folds

            folder = Path(self.model_folder)
            folds = resolve_folds(folder, None if self.folds == "auto" else self.folds, self.checkpoint)
            digest = hashlib.sha256()
            for path in [folder / "plans.json", folder / "dataset.json"] + [
                folder / f"fold_{f}" / self.checkpoint for f in folds
            ]:
                digest.update(f"{path.relative_to(folder)}\0{file_digest(path)}\n".encode())
            self._fingerprint = digest.hexdigest()
        return self._fingerprint

    def cache_identity(self) -> dict[str, Any]:
        return {**self.params(), "weights": self.fingerprint()}

    @property
    def num_samples(self) -> int:
        return self.model.n_samples

    # -- PredictionModel -------------------------------------------------------------------
    def training_specs(self, base) -> list:
        return []  # trained outside values-seg, by nnUNetv2_train

    def predict(self, networks, image: torch.Tensor) -> torch.Tensor:
        device = image.device if isinstance(image, torch.Tensor) else None
        return self.model.predict(image, device=device)

    def predict_case(self, networks, case, device: torch.device) -> torch.Tensor:
        from values_seg_plugins.datasets._nnunet_raw.geometry import array_spacing

        spacing = array_spacing(case.meta) if self.spacing is None else None
        return self.model.predict(case.image, device=device, case_id=case.case_id, spacing=spacing)


@hookimpl
def values_seg_prediction_models():
    return [NnUNet]


@hookimpl
def values_seg_cli(data_commands):
    """``values-seg data nnunet-export``: a values-seg dataset in nnU-Net's raw format, to train nnU-Net on."""
    from values_seg_plugins._nnunet.cli import add_parser

    add_parser(data_commands)
