"""C0 backbone ``unet``: the plain U-Net of the nnU-Net stack (dynamic_network_architectures)."""

from __future__ import annotations

from typing import Literal

from torch import nn

from values_seg import component, hookimpl
from values_seg_plugins.backbones._common import PadToMultiple, dropout_layer


@component(name="unet")
def unet(
    dims: int,
    in_channels: int,
    num_classes: int,
    dropout: float = 0.0,
    base_width: int = 8,
    max_width: int = 320,
    depth: int = 4,
    convs_per_stage: int = 2,
    dropout_mode: Literal["element", "channel"] = "element",
) -> nn.Module:
    """U-Net from nnU-Net's PlainConvUNet, 2D or 3D, four encoder and four decoder stages.

    ``depth`` (4) downsampling steps: ``depth + 1`` resolution stages of ``convs_per_stage``
    3x3(x3) convolutions each, i.e. four encoder blocks with skip connections, a bottleneck and
    four decoder blocks. Widths ``base_width * 2**i`` capped at ``max_width`` (paper: 8 for toy,
    16 for LIDC). Instance norm, leaky ReLU, He initialisation as in nnU-Net. With
    ``dropout > 0``, a dropout layer (p = ``dropout``; element-wise or, with
    ``dropout_mode="channel"``, whole feature maps) follows every convolution block
    (conv -> norm -> nonlinearity -> dropout), for test-time dropout. Inputs of any size are
    zero-padded to a multiple of ``2**depth`` and the output cropped back.
    """
    import torch.nn as tnn
    from dynamic_network_architectures.architectures.unet import PlainConvUNet
    from dynamic_network_architectures.building_blocks.simple_conv_blocks import ConvDropoutNormReLU
    from dynamic_network_architectures.initialization.weight_init import InitWeights_He

    if dims not in (2, 3):
        raise ValueError(f"unet: dims must be 2 or 3, got {dims}")
    if base_width < 1 or depth < 1 or convs_per_stage < 1:
        raise ValueError("unet: base_width, depth and convs_per_stage must be >= 1")
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"unet: dropout must lie in [0, 1), got {dropout}")
    n_stages = depth + 1
    conv = tnn.Conv2d if dims == 2 else tnn.Conv3d
    norm = tnn.InstanceNorm2d if dims == 2 else tnn.InstanceNorm3d
    net = PlainConvUNet(
        input_channels=in_channels,
        n_stages=n_stages,
        features_per_stage=[min(base_width * 2**i, max_width) for i in range(n_stages)],
        conv_op=conv,
        kernel_sizes=3,
        strides=[1] + [2] * depth,
        n_conv_per_stage=convs_per_stage,
        num_classes=num_classes,
        n_conv_per_stage_decoder=convs_per_stage,
        conv_bias=True,
        norm_op=norm,
        norm_op_kwargs={"eps": 1e-5, "affine": True},
        dropout_op=None,
        nonlin=tnn.LeakyReLU,
        nonlin_kwargs={"inplace": True},
        deep_supervision=False,
    )
    net.apply(InitWeights_He(1e-2))
    if dropout > 0:
        for block in net.modules():
            if isinstance(block, ConvDropoutNormReLU):
                block.all_modules.append(dropout_layer(dims, dropout, dropout_mode))
    return PadToMultiple(net, 2**depth)


@hookimpl
def values_seg_backbones():
    return [unet]
