"""Probability samples from a trained nnU-Net v2 model folder: one softmax per fold and mirror,
``[S, C, *spatial]``, fold-major. nnU-Net itself is imported lazily.

The order of the samples, and why the sliding window is our own: docs/design-rationale.md,
"nnU-Net", sampling.
"""

from __future__ import annotations

import contextlib
import functools
import io
import pickle
import itertools
import re
import zipfile
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import torch

FOLD_DIR = re.compile(r"^fold_(\d+|all)$")


class NnUNetModelError(ValueError):
    """A problem with a model folder, its folds or an input image; the message says how to fix it."""


def available_folds(model_folder: str | Path, checkpoint: str = "checkpoint_final.pth") -> dict[str, list[str]]:
    """``{fold folder name: [checkpoint files in it]}`` for every ``fold_*`` folder."""
    found: dict[str, list[str]] = {}
    folder = Path(model_folder)
    if not folder.is_dir():
        return found
    for sub in sorted(folder.iterdir()):
        if sub.is_dir() and FOLD_DIR.match(sub.name):
            found[sub.name] = sorted(p.name for p in sub.glob("*.pth"))
    return found


def parse_folds(folds: Any) -> list[int | str] | None:
    """Normalise a ``folds`` value: ``None``/``"auto"`` -> None (detect), ``"all"`` -> ``["all"]``,
    ``3`` -> ``[3]``, ``"0,1"`` / ``"[0, 1]"`` / ``(0, 1)`` -> ``[0, 1]``."""
    if folds is None:
        return None
    if isinstance(folds, str):
        text = folds.strip().strip("[]()").strip()
        if text.lower() in ("auto", "", "none"):
            return None
        folds = [t.strip().strip("'\"") for t in text.split(",") if t.strip()]
    elif isinstance(folds, (int, np.integer)) and not isinstance(folds, bool):
        folds = [int(folds)]
    if not isinstance(folds, Iterable):
        raise NnUNetModelError(f"folds must be 'auto', 'all', an int or a list of ints/'all', got {folds!r}")
    result: list[int | str] = []
    for f in folds:
        if isinstance(f, str) and f.strip().lower() == "all":
            item: int | str = "all"
        else:
            try:
                item = int(f)
            except (TypeError, ValueError):
                raise NnUNetModelError(f"folds: {f!r} is neither a fold number nor 'all'") from None
            if item < 0 or isinstance(f, bool):
                raise NnUNetModelError(f"folds: {f!r} is not a valid fold number")
        if item in result:
            raise NnUNetModelError(f"folds: fold {item!r} is listed twice")
        result.append(item)
    if not result:
        raise NnUNetModelError("folds: the list of folds is empty")
    return result


def resolve_folds(model_folder: str | Path, folds: Any = "auto", checkpoint: str = "checkpoint_final.pth") -> list[int | str]:
    """Check that ``model_folder`` is an nnU-Net model folder holding ``checkpoint`` for ``folds``
    (see :class:`NnUNetModel`) and return the folds; cheap (nnU-Net is not imported)."""
    folder = Path(model_folder).expanduser()
    if not folder.is_dir():
        raise NnUNetModelError(
            f"nnU-Net model folder {str(folder)!r} does not exist; point model_folder at a trainer folder "
            "like nnUNet_results/DatasetXXX_Name/nnUNetTrainer__nnUNetPlans__2d"
        )
    missing = [f for f in ("plans.json", "dataset.json") if not (folder / f).is_file()]
    if missing:
        raise NnUNetModelError(
            f"{str(folder)!r} is not an nnU-Net model folder: {', '.join(missing)} missing "
            f"(contents: {', '.join(sorted(p.name for p in folder.iterdir())) or 'empty'})"
        )
    present = available_folds(folder, checkpoint)
    fold_list = parse_folds(folds)
    if fold_list is None:
        fold_list = sorted(
            int(name[5:]) for name, files in present.items() if name != "fold_all" and checkpoint in files
        )
        if not fold_list:
            raise NnUNetModelError(f"no fold folder in {str(folder)!r} holds {checkpoint!r}; " + _describe_present(present))
    absent = [f for f in fold_list if checkpoint not in present.get(f"fold_{f}", [])]
    if absent:
        raise NnUNetModelError(
            f"{str(folder)!r}: no {checkpoint!r} for fold(s) {', '.join(map(str, absent))}; " + _describe_present(present)
        )
    return fold_list


def mirror_combinations(axes: Sequence[int] | None) -> list[tuple[int, ...]]:
    """Identity first, then every non-empty combination of ``axes`` in nnU-Net's order."""
    axes = list(axes or ())
    return [()] + [c for i in range(len(axes)) for c in itertools.combinations(axes, i + 1)]


def _checkpoint_globals() -> list:
    """What an nnU-Net v2 checkpoint holds beyond tensors and plain containers: numpy scalars in
    its training log and best EMA (``numpy.float64`` etc.), allowed for ``weights_only`` loading."""
    import numpy as np

    scalar = getattr(np, "_core", np.core).multiarray.scalar
    dtypes = [type(np.dtype(t)) for t in ("float64", "float32", "float16", "int64", "int32", "bool")]
    return [scalar, np.dtype, *dtypes]


@contextlib.contextmanager
def weights_only_loading(trust: bool):
    """Make nnU-Net's own ``torch.load(..., weights_only=False)`` calls load with
    ``weights_only=True`` (tensors, plain data and :func:`_checkpoint_globals` only), so that a
    model folder from elsewhere cannot run code when it is loaded; ``trust`` restores nnU-Net's
    behaviour for checkpoints the user trusts."""
    if trust:
        yield
        return
    original = torch.load
    torch.load = functools.partial(_load_weights_only, original)
    try:
        yield
    finally:
        torch.load = original


def _load_weights_only(load, f, *args, **kwargs):
    """``load(f, ...)`` (``torch.load``) with ``weights_only=True`` and :func:`_checkpoint_globals`;
    a file holding more is refused (:class:`NnUNetModelError` naming it and ``trust_checkpoint``)."""
    kwargs["weights_only"] = True
    with torch.serialization.safe_globals(_checkpoint_globals()):
        try:
            return load(f, *args, **kwargs)
        except pickle.UnpicklingError as e:
            raise NnUNetModelError(
                f"refusing to load {f}: it holds objects beyond weights and plain data, which could run code "
                f"when loaded ({str(e).splitlines()[0]}). Load it only if you trust where it comes from: "
                f"trust_checkpoint=True") from None


def check_checkpoints(folder: Path, folds: Iterable[int | str], checkpoint: str) -> None:
    """Refuse, before anything is loaded, a fold's checkpoint that loading would refuse: one holding
    objects beyond weights and plain data (read as :func:`weights_only_loading` reads it; nothing in
    it runs, its tensors are mapped, not read), or one that is no readable checkpoint."""
    for fold in folds:
        path = folder / f"fold_{fold}" / checkpoint
        try:
            _load_weights_only(torch.load, path, map_location="cpu", mmap=zipfile.is_zipfile(path))
        except NnUNetModelError:
            raise
        except Exception as e:  # noqa: BLE001 - truncated, not a torch file, ...
            raise NnUNetModelError(f"{path} is not a readable checkpoint ({type(e).__name__}: "
                                   f"{str(e).splitlines()[0] if str(e) else ''})") from None


def check_plans_file(folder: Path, trust: bool = False) -> None:
    """Refuse a ``plans.json`` that is not readable JSON, not of the structure nnU-Net reads, or
    (unless ``trust``) names a network class or building block nnU-Net does not ship (see
    :mod:`.architectures`): nnU-Net would import and call whatever it names."""
    import json

    from .architectures import check_plans

    path = folder / "plans.json"
    try:
        plans = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise NnUNetModelError(f"{path}: not a readable JSON file ({e})") from None
    try:
        check_plans(plans, path, trust)
    except ValueError as e:
        raise NnUNetModelError(str(e)) from None


@contextlib.contextmanager
def _quiet():
    """nnU-Net prints freely; keep its chatter out of our output."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


class NnUNetModel:
    """A trained nnU-Net v2 model folder as a sampler of softmax probabilities.

    Parameters
    ----------
    model_folder:
        The trainer folder, e.g. ``.../Dataset001_X/nnUNetTrainer__nnUNetPlans__2d``, holding
        ``plans.json``, ``dataset.json`` and ``fold_<k>/<checkpoint>``.
    folds:
        ``"auto"``/``None`` (default): every ``fold_<k>`` folder (k a number) holding the
        checkpoint, as nnU-Net's ``-f`` default does; ``"all"``: nnU-Net's ``fold_all`` (the
        model trained on all cases; one member); or a list of fold numbers, which may include
        ``"all"``.
    checkpoint:
        File name inside each fold folder (``checkpoint_final.pth`` or ``checkpoint_best.pth``).
    mirroring:
        Add the mirrored predictions (test-time augmentation along the checkpoint's
        ``inference_allowed_mirroring_axes``) as separate samples; a checkpoint that allows no
        axis gives one mirror (the identity) as nnU-Net does.
    tile_step_size, use_gaussian:
        nnU-Net's sliding-window settings (defaults as in nnU-Net).
    spacing:
        Voxel spacing of the images given to :meth:`predict`, in array-axis order; ``None``
        means 1.0 per axis (what :func:`values_seg_plugins._nnunet.export.export_dataset` writes).
    trust_checkpoint:
        Checkpoints are loaded with ``torch.load(weights_only=True)``: tensors and plain data
        only, and ``plans.json`` may name only the network classes and ``torch.nn`` building
        blocks nnU-Net ships (:mod:`.architectures`), so a model folder from elsewhere cannot run
        code; ``True`` loads them as nnU-Net does (full unpickling, any class the plans name) --
        only for model folders you trust.
    """

    def __init__(
        self,
        model_folder: str | Path,
        folds: Any = "auto",
        checkpoint: str = "checkpoint_final.pth",
        mirroring: bool = False,
        tile_step_size: float = 0.5,
        use_gaussian: bool = True,
        spacing: Sequence[float] | None = None,
        trust_checkpoint: bool = False,
    ):
        folder = Path(model_folder).expanduser()
        fold_list = resolve_folds(folder, folds, checkpoint)
        if not 0 < float(tile_step_size) <= 1:
            raise NnUNetModelError(f"tile_step_size must lie in (0, 1], got {tile_step_size}")

        check_plans_file(folder, trust_checkpoint)

        from nnunetv2.inference.predict_from_raw_data import nnUNetPredictor

        with _quiet():
            predictor = nnUNetPredictor(
                tile_step_size=float(tile_step_size),
                use_gaussian=bool(use_gaussian),
                use_mirroring=bool(mirroring),
                perform_everything_on_device=False,
                device=torch.device("cpu"),
                verbose=False,
                allow_tqdm=False,
            )
            try:
                with weights_only_loading(trust_checkpoint):
                    predictor.initialize_from_trained_model_folder(str(folder), tuple(fold_list), checkpoint)
            except NnUNetModelError:
                raise
            except Exception as e:  # noqa: BLE001 - say which folder nnU-Net failed on
                raise NnUNetModelError(
                    f"nnU-Net could not load {str(folder)!r} (folds {fold_list}, {checkpoint!r}): "
                    f"{type(e).__name__}: {e}"
                ) from e
        label_manager = predictor.label_manager
        if label_manager.has_regions:
            raise NnUNetModelError(
                f"{str(folder)!r} was trained with region-based labels (sigmoid outputs); values-seg needs "
                "softmax class probabilities"
            )
        configuration = predictor.configuration_manager
        if configuration.previous_stage_name is not None:
            raise NnUNetModelError(
                f"{str(folder)!r} is a cascade stage (needs the segmentation of "
                f"{configuration.previous_stage_name!r}); use a 2d or 3d_fullres model folder"
            )

        self.model_folder = folder
        self.checkpoint = checkpoint
        self.folds: list[int | str] = list(fold_list)
        self.mirroring = bool(mirroring)
        self.tile_step_size = float(tile_step_size)
        self.use_gaussian = bool(use_gaussian)
        self.spacing = None if spacing is None else [float(s) for s in spacing]
        self.predictor = predictor
        self.network: torch.nn.Module = predictor.network
        self.parameters: list[dict] = predictor.list_of_parameters
        self.plans_manager = predictor.plans_manager
        self.configuration_manager = configuration
        self.label_manager = label_manager
        self.dataset_json: dict = predictor.dataset_json
        self.allowed_mirroring_axes: tuple[int, ...] = tuple(predictor.allowed_mirroring_axes or ())
        self.mirror_axes: list[tuple[int, ...]] = (
            mirror_combinations(self.allowed_mirroring_axes) if self.mirroring else [()]
        )
        self.patch_size: tuple[int, ...] = tuple(int(p) for p in configuration.patch_size)
        self._loaded: int | None = 0  # initialize_from_trained_model_folder loaded parameters[0]

    # -- description -----------------------------------------------------------------
    @property
    def in_channels(self) -> int:
        return len(self.dataset_json.get("channel_names", self.dataset_json.get("modality", {})))

    @property
    def num_classes(self) -> int:
        return int(self.label_manager.num_segmentation_heads)

    @property
    def class_names(self) -> list[str]:
        by_value = {}
        for name, value in self.dataset_json["labels"].items():
            if name != "ignore" and isinstance(value, int):
                by_value.setdefault(value, name)
        return [by_value.get(i, f"class_{i}") for i in range(self.num_classes)]

    @property
    def n_mirrors(self) -> int:
        return len(self.mirror_axes)

    @property
    def n_samples(self) -> int:
        return len(self.folds) * self.n_mirrors

    def sample_labels(self) -> list[str]:
        """One label per sample, e.g. ``fold_0/mirror_()``, in sample order."""
        return [f"fold_{f}/mirror_{m}" for f in self.folds for m in self.mirror_axes]

    def __repr__(self) -> str:
        return (
            f"NnUNetModel({str(self.model_folder)!r}, folds={self.folds}, checkpoint={self.checkpoint!r}, "
            f"mirroring={self.mirroring}, samples={self.n_samples})"
        )

    # -- inference -------------------------------------------------------------------
    def check_image(self, image: np.ndarray, where: str = "image") -> None:
        if image.ndim not in (3, 4):
            raise NnUNetModelError(f"{where}: expected [in_channels, *spatial] with 2 or 3 spatial dims, got {image.shape}")
        if image.shape[0] != self.in_channels:
            raise NnUNetModelError(
                f"{where}: has {image.shape[0]} input channel(s) but the nnU-Net model in "
                f"{str(self.model_folder)!r} expects {self.in_channels} "
                f"({', '.join(map(str, self.dataset_json.get('channel_names', {}).values()))})"
            )
        if not np.isfinite(image).all():
            raise NnUNetModelError(f"{where}: image contains NaN or infinite values")

    def _spacing_for(self, spatial_ndim: int, spacing: Sequence[float] | None = None) -> list[float]:
        spacing = [float(s) for s in spacing] if spacing is not None else self.spacing or [1.0] * spatial_ndim
        if len(spacing) != spatial_ndim:
            raise NnUNetModelError(f"spacing {spacing} does not match an image with {spatial_ndim} spatial dims")
        if spatial_ndim == 2:  # as nnU-Net's SimpleITKIO reads a 2D image
            return [999.0 * max(spacing), *spacing]
        return list(spacing)

    def preprocess(self, image: np.ndarray, spacing: Sequence[float] | None = None) -> tuple[np.ndarray, dict]:
        """nnU-Net's preprocessing of one image (``[C, *spatial]``) -> (data ``[C, x, y, z]``, properties);
        ``spacing`` (array-axis order) overrides the model's for this image."""
        data = np.asarray(image, dtype=np.float32)
        spacing = self._spacing_for(data.ndim - 1, spacing)
        if data.ndim == 3:
            data = data[:, None]
        preprocessor = self.configuration_manager.preprocessor_class(verbose=False)
        with _quiet():
            data, _, properties = preprocessor.run_case_npy(
                data, None, {"spacing": spacing}, self.plans_manager, self.configuration_manager, self.dataset_json
            )
        return np.ascontiguousarray(data, dtype=np.float32), properties

    def _load_fold(self, index: int) -> None:
        if self._loaded != index:
            network = getattr(self.network, "_orig_mod", self.network)  # torch.compile'd (nnUNet_compile)
            network.load_state_dict(self.parameters[index])
            self._loaded = index

    def _slicers(self, shape: tuple[int, ...]) -> list[tuple]:
        from nnunetv2.inference.sliding_window_prediction import compute_steps_for_sliding_window

        patch = self.patch_size
        if len(patch) == len(shape) - 1:  # a 2D configuration on [x, y, z] data: slice by slice along x
            steps = compute_steps_for_sliding_window(shape[1:], patch, self.tile_step_size)
            return [
                (slice(None), d, *[slice(s, s + p) for s, p in zip(starts, patch)])
                for d in range(shape[0])
                for starts in itertools.product(*steps)
            ]
        if len(patch) != len(shape):
            raise NnUNetModelError(f"patch size {list(patch)} does not fit preprocessed data of shape {shape}")
        steps = compute_steps_for_sliding_window(shape, patch, self.tile_step_size)
        return [(slice(None), *[slice(s, s + p) for s, p in zip(starts, patch)]) for starts in itertools.product(*steps)]

    @torch.inference_mode()
    def _logits_per_mirror(self, data: torch.Tensor, device: torch.device) -> torch.Tensor:
        """Sliding-window logits of the loaded fold, one per mirror combination: ``[M, K, x, y, z]`` (float32)."""
        from acvl_utils.cropping_and_padding.padding import pad_nd_image
        from nnunetv2.inference.sliding_window_prediction import compute_gaussian

        padded, revert = pad_nd_image(data, self.patch_size, "constant", {"value": 0}, True, None)
        padded = padded.to(device)
        spatial = tuple(padded.shape[1:])
        slicers = self._slicers(spatial)
        n_m, k = self.n_mirrors, self.num_classes
        logits = torch.zeros((n_m, k, *spatial), dtype=torch.float32, device=device)
        weights = torch.zeros(spatial, dtype=torch.float32, device=device)
        if self.use_gaussian:
            gaussian = compute_gaussian(
                self.patch_size, sigma_scale=1.0 / 8, value_scaling_factor=10, dtype=torch.float32, device=device
            )
        else:
            gaussian = torch.ones(self.patch_size, dtype=torch.float32, device=device)
        for sl in slicers:
            tile = padded[sl][None]  # [1, C, *patch]
            batch = torch.cat([torch.flip(tile, [a + 2 for a in axes]) if axes else tile for axes in self.mirror_axes])
            out = self.network(batch)
            if isinstance(out, (list, tuple)):  # deep supervision left on: full resolution first
                out = out[0]
            out = out.float()
            for m, axes in enumerate(self.mirror_axes):
                pred = torch.flip(out[m], [a + 1 for a in axes]) if axes else out[m]
                logits[(m, *sl)] += pred * gaussian
            weights[sl[1:]] += gaussian
        logits /= weights
        return logits[(slice(None), slice(None), *revert[1:])]

    def _to_input_geometry(self, logits: np.ndarray, properties: dict) -> np.ndarray:
        """Softmax of one member's logits, resampled and un-cropped to the input geometry ``[K, x, y, z]``."""
        from nnunetv2.inference.export_prediction import convert_predicted_logits_to_segmentation_with_correct_shape

        _, probabilities = convert_predicted_logits_to_segmentation_with_correct_shape(
            logits,
            self.plans_manager,
            self.configuration_manager,
            self.label_manager,
            properties,
            return_probabilities=True,
            num_threads_torch=torch.get_num_threads(),
        )
        return np.asarray(probabilities, dtype=np.float32)

    @torch.inference_mode()
    def member_logits(self, image: np.ndarray | torch.Tensor, device: str | torch.device | None = None,
                      spacing: Sequence[float] | None = None) -> tuple[torch.Tensor, dict]:
        """Logits of every (fold, mirror) member in nnU-Net's preprocessed geometry, ``[S, K, x, y, z]``, and
        the preprocessing properties."""
        image = _as_numpy(image)
        self.check_image(image)
        device = torch.device(device) if device is not None else torch.device("cpu")
        data, properties = self.preprocess(image, spacing)
        self.network.to(device)
        self.network.eval()
        members = []
        for index in range(len(self.folds)):
            self._load_fold(index)
            members.append(self._logits_per_mirror(torch.from_numpy(data), device).cpu())
        return torch.cat(members), properties

    def predict(
        self, image: np.ndarray | torch.Tensor, device: str | torch.device | None = None, case_id: str | None = None,
        spacing: Sequence[float] | None = None,
    ) -> torch.Tensor:
        """Softmax probability samples ``[S, C, *spatial]`` (float32, CPU) for one image ``[C_in, *spatial]``;
        ``spacing`` (array-axis order) overrides the model's for this image."""
        where = f"case {case_id!r}" if case_id is not None else "image"
        array = _as_numpy(image)
        self.check_image(array, where)
        logits, properties = self.member_logits(array, device, spacing)
        spatial = array.shape[1:]
        samples = np.empty((logits.shape[0], self.num_classes, *spatial), dtype=np.float32)
        for s in range(logits.shape[0]):
            probabilities = self._to_input_geometry(logits[s].numpy(), properties)
            if len(spatial) == 2:
                probabilities = probabilities[:, 0]
            if tuple(probabilities.shape[1:]) != tuple(spatial):
                raise NnUNetModelError(
                    f"{where}: nnU-Net returned probabilities of shape {probabilities.shape[1:]}, expected {spatial}"
                )
            samples[s] = probabilities
        return torch.from_numpy(samples)

    __call__ = predict


def _as_numpy(image: Any) -> np.ndarray:
    if isinstance(image, torch.Tensor):
        image = image.detach().cpu().numpy()
    return np.asarray(image, dtype=np.float32)


def _describe_present(present: dict[str, list[str]]) -> str:
    if not present:
        return "the folder has no fold_* subfolders"
    return "present: " + "; ".join(f"{name}: {', '.join(files) or 'no .pth files'}" for name, files in present.items())
