from torch import nn

from values_seg import hookimpl


def tiny_cnn(dims: int, in_channels: int, num_classes: int, dropout: float = 0.0, width: int = 8) -> nn.Module:
    """Three convolutions: a minimal C0 backbone for 2D or 3D images."""
    conv = {2: nn.Conv2d, 3: nn.Conv3d}[dims]
    drop = {2: nn.Dropout2d, 3: nn.Dropout3d}[dims]
    return nn.Sequential(
        conv(in_channels, width, 3, padding=1), nn.ReLU(), drop(dropout),
        conv(width, width, 3, padding=2, dilation=2), nn.ReLU(), drop(dropout),
        conv(width, num_classes, 1),
    )


@hookimpl
def values_seg_backbones():
    return [tiny_cnn]
