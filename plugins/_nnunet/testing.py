"""A tiny nnU-Net v2 model folder written from hand-made plans and random weights (for tests), in
the layout ``nnUNetv2_train`` writes (docs/design-rationale.md, "nnU-Net").
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Sequence

import torch


def tiny_plans(
    dims: int = 2,
    in_channels: int = 1,
    patch_size: Sequence[int] | None = None,
    features: Sequence[int] = (4, 8, 16),
    dataset_name: str = "Dataset999_Tiny",
    normalization: str = "ZScoreNormalization",
) -> tuple[dict, str]:
    """``(plans, configuration name)`` for a minimal 2D (``"2d"``) or 3D (``"3d_fullres"``) configuration."""
    if dims not in (2, 3):
        raise ValueError(f"dims must be 2 or 3, got {dims}")
    patch = list(patch_size or ([32, 32] if dims == 2 else [16, 16, 16]))
    n_stages = len(features)
    conv = "torch.nn.modules.conv.Conv2d" if dims == 2 else "torch.nn.modules.conv.Conv3d"
    norm = "torch.nn.modules.instancenorm.InstanceNorm2d" if dims == 2 else "torch.nn.modules.instancenorm.InstanceNorm3d"
    spacing = [1.0] * dims
    name = "2d" if dims == 2 else "3d_fullres"
    resampling = {"is_seg": False, "order": 3, "order_z": 0, "force_separate_z": None}
    configuration = {
        "data_identifier": f"nnUNetPlans_{name}",
        "preprocessor_name": "DefaultPreprocessor",
        "batch_size": 2,
        "patch_size": patch,
        "median_image_size_in_voxels": patch,
        "spacing": spacing,
        "normalization_schemes": [normalization] * in_channels,
        "use_mask_for_norm": [False] * in_channels,
        "resampling_fn_data": "resample_data_or_seg_to_shape",
        "resampling_fn_seg": "resample_data_or_seg_to_shape",
        "resampling_fn_data_kwargs": resampling,
        "resampling_fn_seg_kwargs": {**resampling, "is_seg": True, "order": 1},
        "resampling_fn_probabilities": "resample_data_or_seg_to_shape",
        "resampling_fn_probabilities_kwargs": {**resampling, "order": 1},
        "architecture": {
            "network_class_name": "dynamic_network_architectures.architectures.unet.PlainConvUNet",
            "arch_kwargs": {
                "n_stages": n_stages,
                "features_per_stage": list(features),
                "conv_op": conv,
                "kernel_sizes": [[3] * dims] * n_stages,
                "strides": [[1] * dims] + [[2] * dims] * (n_stages - 1),
                "n_conv_per_stage": [1] * n_stages,
                "n_conv_per_stage_decoder": [1] * (n_stages - 1),
                "conv_bias": True,
                "norm_op": norm,
                "norm_op_kwargs": {"eps": 1e-05, "affine": True},
                "dropout_op": None,
                "dropout_op_kwargs": None,
                "nonlin": "torch.nn.LeakyReLU",
                "nonlin_kwargs": {"inplace": True},
            },
            "_kw_requires_import": ["conv_op", "norm_op", "dropout_op", "nonlin"],
        },
        "batch_dice": True,
    }
    intensity = {"max": 1.0, "mean": 0.0, "median": 0.0, "min": -1.0, "percentile_00_5": -1.0,
                 "percentile_99_5": 1.0, "std": 1.0}
    plans = {
        "dataset_name": dataset_name,
        "plans_name": "nnUNetPlans",
        "original_median_spacing_after_transp": ([999.0] if dims == 2 else []) + spacing,
        "original_median_shape_after_transp": ([1] if dims == 2 else []) + patch,
        "image_reader_writer": "SimpleITKIO",
        "transpose_forward": [0, 1, 2],
        "transpose_backward": [0, 1, 2],
        "configurations": {name: configuration},
        "experiment_planner_used": "ExperimentPlanner",
        "label_manager": "LabelManager",
        "foreground_intensity_properties_per_channel": {str(c): dict(intensity) for c in range(in_channels)},
    }
    return plans, name


def tiny_dataset_json(in_channels: int = 1, num_classes: int = 2, num_training: int = 4) -> dict:
    return {
        "channel_names": {str(c): f"channel{c}" for c in range(in_channels)},
        "labels": {"background": 0, **{f"class{i}": i for i in range(1, num_classes)}},
        "numTraining": num_training,
        "file_ending": ".nii.gz",
    }


def build_network(plans: dict, configuration: str, dataset_json: dict) -> torch.nn.Module:
    """The network exactly as nnU-Net builds it for inference (no deep supervision)."""
    from nnunetv2.training.nnUNetTrainer.nnUNetTrainer import nnUNetTrainer
    from nnunetv2.utilities.label_handling.label_handling import determine_num_input_channels
    from nnunetv2.utilities.plans_handling.plans_handler import PlansManager

    plans_manager = PlansManager(plans)
    configuration_manager = plans_manager.get_configuration(configuration)
    return nnUNetTrainer.build_network_architecture(
        plans_manager,
        configuration_manager,
        determine_num_input_channels(plans_manager, configuration_manager, dataset_json),
        plans_manager.get_label_manager(dataset_json).num_segmentation_heads,
        enable_deep_supervision=False,
    )


def make_model_folder(
    root: str | Path,
    dims: int = 2,
    in_channels: int = 1,
    num_classes: int = 2,
    folds: Sequence[int | str] = (0, 1),
    checkpoint: str = "checkpoint_final.pth",
    patch_size: Sequence[int] | None = None,
    mirror_axes: Sequence[int] | None = None,
    same_weights: bool = False,
    seed: int = 0,
    weight_scale: float = 1.0,
) -> Path:
    """Write ``root/nnUNetTrainer__nnUNetPlans__<config>`` with random weights per fold; return its path.

    ``same_weights`` gives every fold identical parameters; ``mirror_axes`` defaults to all
    spatial axes (what nnU-Net's default data augmentation allows); ``weight_scale`` multiplies
    the weights of the final convolution (larger: more confident softmax).
    """
    plans, configuration = tiny_plans(dims, in_channels, patch_size)
    dataset_json = tiny_dataset_json(in_channels, num_classes)
    folder = Path(root) / f"nnUNetTrainer__nnUNetPlans__{configuration}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "plans.json").write_text(json.dumps(plans, indent=2))
    (folder / "dataset.json").write_text(json.dumps(dataset_json, indent=2))
    axes = tuple(range(dims)) if mirror_axes is None else tuple(mirror_axes)
    for i, fold in enumerate(folds):
        torch.manual_seed(seed + (0 if same_weights else i))
        network = build_network(plans, configuration, dataset_json)
        with torch.no_grad():
            for p in network.parameters():  # break symmetry so that mirroring changes the output
                p.add_(0.05 * torch.randn_like(p))
            last = [m for m in network.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Conv3d))][-1]
            last.weight.mul_(weight_scale)
        target = folder / f"fold_{fold}"
        target.mkdir(exist_ok=True)
        torch.save(
            {
                "network_weights": network.state_dict(),
                "optimizer_state": None,
                "grad_scaler_state": None,
                "logging": {},
                "_best_ema": None,
                "current_epoch": 1,
                "init_args": {
                    "plans": plans,
                    "configuration": configuration,
                    "fold": fold,
                    "dataset_json": dataset_json,
                    "device": torch.device("cpu"),
                },
                "trainer_name": "nnUNetTrainer",
                "inference_allowed_mirroring_axes": axes,
            },
            target / checkpoint,
        )
    return folder


def training_script(dataset_id: int) -> str:
    """Python source that plans, preprocesses and trains folds 0 and 1 of raw data set
    ``dataset_id`` with nnU-Net's own API, 2d, one short epoch each, on the CPU (run it in a process
    with ``nnUNet_raw``, ``nnUNet_preprocessed`` and ``nnUNet_results`` set)."""
    return textwrap.dedent(
        f"""
        import os
        import torch
        from nnunetv2.experiment_planning.plan_and_preprocess_api import extract_fingerprints, plan_experiments, preprocess
        from nnunetv2.run.run_training import get_trainer_from_args

        extract_fingerprints([{dataset_id}], num_processes=1, check_dataset_integrity=True, show_progress_bar=False)
        plan_experiments([{dataset_id}])
        preprocess([{dataset_id}], configurations=("2d",), num_processes=(1,), show_progress_bar=False)
        os.environ["nnUNet_n_proc_DA"] = "0"  # single-threaded augmentation (planning needs it > 0)
        for fold in (0, 1):
            trainer = get_trainer_from_args("{dataset_id}", "2d", fold, "nnUNetTrainer", "nnUNetPlans",
                                            device=torch.device("cpu"))
            trainer.num_iterations_per_epoch, trainer.num_val_iterations_per_epoch, trainer.num_epochs = 2, 1, 1
            trainer.run_training()
        """
    )


def plant_hub_payload(folder: str | Path, marker: str | Path) -> Path:
    """Turn model folder ``folder`` into an attack on whoever loads it (for tests): its plans name
    ``torch.hub.load`` as the network class, with arguments that make nnU-Net run the
    ``hubconf.py`` written beside them, which writes ``marker``. Returns the hubconf path."""
    folder = Path(folder)
    hubconf = folder / "hubconf.py"
    hubconf.write_text(textwrap.dedent(f"""
        from pathlib import Path
        Path({str(marker)!r}).write_text("code from the model folder ran")

        def network(**kwargs):
            import torch
            return torch.nn.Identity()
        """))
    plans = json.loads((folder / "plans.json").read_text())
    for configuration in plans["configurations"].values():
        configuration["architecture"] = {
            "network_class_name": "torch.hub.load",
            "arch_kwargs": {"repo_or_dir": str(folder), "model": "network", "source": "local"},
            "_kw_requires_import": [],
        }
    (folder / "plans.json").write_text(json.dumps(plans, indent=2))
    return hubconf
