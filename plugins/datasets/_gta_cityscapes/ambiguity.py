"""Synthetic label ambiguity: five classes switch to a twin class with probability 1/3 (paper
appendix B.3, after Kohl et al. 2018), with the exact reference variance (docs/design-rationale.md,
"GTA5 → Cityscapes").
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np

from values_seg_plugins.datasets._gta_cityscapes.labels import IGNORE_INDEX, NUM_TRAIN_CLASSES, table

#: the switchable classes, in the order of their twins' class ids 19, 20, ...
SWITCHABLE = ("sidewalk", "person", "car", "vegetation", "road")
SWITCH_PROBABILITY = 1.0 / 3.0
NUM_CLASSES = NUM_TRAIN_CLASSES + len(SWITCHABLE)  # 24
#: exact per-pixel reference variance on a switchable class's pixels, p (1 - p)
SWITCH_VARIANCE = SWITCH_PROBABILITY * (1.0 - SWITCH_PROBABILITY)  # 2/9
TWIN_IDS = tuple(range(NUM_TRAIN_CLASSES, NUM_CLASSES))


@functools.cache
def switchable_ids() -> tuple[int, ...]:
    """Training ids of the switchable classes (road 0, sidewalk 1, vegetation 8, person 11, car 13)."""
    names = table().train_names
    return tuple(names.index(name) for name in SWITCHABLE)


def class_names() -> tuple[str, ...]:
    """The 24 output classes: the 19 Cityscapes training classes, then the twins ``<class>_2``."""
    return table().train_names + tuple(f"{name}_2" for name in SWITCHABLE)


def _identity() -> np.ndarray:
    return np.arange(256, dtype=np.uint8)


def switch_tables(switches: np.ndarray) -> np.ndarray:
    """Lookup tables ``[N, 256]`` (uint8) for ``switches`` ``[N, 5]`` (bool): class -> twin where on."""
    switches = np.asarray(switches, dtype=bool).reshape(-1, len(SWITCHABLE))
    luts = np.tile(_identity(), (len(switches), 1))
    for k, (source, twin) in enumerate(zip(switchable_ids(), TWIN_IDS)):
        luts[switches[:, k], source] = twin
    return luts


def switch(labels: np.ndarray, switches) -> np.ndarray:
    """``labels`` with every pixel of each switched class (``switches``: 5 bools) set to its twin."""
    return switch_tables(switches)[0][labels]


def unswitch(labels: np.ndarray) -> np.ndarray:
    """Inverse of :func:`switch`: every twin back to its class (maps without twins are unchanged)."""
    lut = _identity()
    lut[list(TWIN_IDS)] = switchable_ids()
    return lut[labels]


def switches_from_uniform(u: float) -> np.ndarray:
    """Five independent Bernoulli(1/3) draws from one ``u`` uniform on [0, 1).

    ``k = floor(243 u)`` is uniform on 0..242 = 3^5 - 1; its five base-3 digits are then
    independent and uniform on {0, 1, 2}, and class ``i`` switches when digit ``i`` is 0: exactly
    probability 1/3 each, jointly independent (every digit pattern is one of the 243 values of k).
    """
    if not 0.0 <= u < 1.0:
        raise ValueError(f"u must lie in [0, 1), got {u}")
    k = min(int(u * 243), 242)
    digits = [(k // 3**i) % 3 for i in range(len(SWITCHABLE))]
    return np.array([d == 0 for d in digits], dtype=bool)


def case_rng(seed: int, case_id: str) -> np.random.Generator:
    """A generator seeded by the dataset seed and the case id (stable across processes and runs)."""
    digest = int.from_bytes(hashlib.sha256(case_id.encode()).digest()[:8], "little")
    return np.random.default_rng([int(seed), digest])


def reference_samples(labels: np.ndarray, rng: np.random.Generator, n: int = 5) -> np.ndarray:
    """``n`` reference maps ``[n, *labels.shape]`` (uint8), each with its own five switches drawn
    from ``rng`` (Bernoulli(1/3) per class and map)."""
    switches = rng.random((n, len(SWITCHABLE))) < SWITCH_PROBABILITY
    luts = switch_tables(switches)
    return luts[np.arange(n)[:, None], unswitch(labels).reshape(1, -1)].reshape(n, *labels.shape)


def reference_variance(labels: np.ndarray) -> np.ndarray:
    """The exact per-pixel variance of the reference (float32): 2/9 on the pixels of a switchable
    class (or its twin), 0 elsewhere, including ignored pixels."""
    lut = np.zeros(256, dtype=np.float32)
    lut[list(switchable_ids())] = SWITCH_VARIANCE
    lut[list(TWIN_IDS)] = SWITCH_VARIANCE
    lut[IGNORE_INDEX] = 0.0
    return lut[labels]


def class_colors() -> np.ndarray:
    """RGB colours ``[256, 3]`` (uint8) indexed by class id: the Cityscapes colours of the 19
    training classes, the complementary colour for each twin, black for ignore and unused ids."""
    colors = np.zeros((256, 3), dtype=np.uint8)
    train = table().train_colors
    colors[:NUM_TRAIN_CLASSES] = train
    colors[list(TWIN_IDS)] = 255 - train[list(switchable_ids())]
    return colors
