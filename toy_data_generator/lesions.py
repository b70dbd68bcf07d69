"""The multi-lesion toy scenario ``lesions`` (not in the paper): several lesions per image, of varying
size and contrast, so that a model both misses lesions (FN) and finds lesions that are not there (FP).

Per case (its own random generator, from :func:`toy_data_generator.generator.case_rng`): 3 to 7 lesions, each a
disk/ball (the ``cube`` shift: squares/cubes) with

* a radius drawn from three kinds: *below the resolution* (0.3-0.7 voxels, 20 %: a faint speck the
  raters mostly cannot mark), *small* (1-2.5 voxels, 40 %) and *large* (2.5 voxels to size/10, 40 %);
* a contrast uniform in [0.25, 1] (the ``grey`` shift: times 0.6, every lesion fainter);
* with probability 0.3 it touches the previous lesion (centre distance = the sum of the radii);
  the ``border`` shift puts the first lesion's centre on the image border.

Image: each lesion's contrast times its partial-volume cover ``clip(r + 1/2 - d, 0, 1)`` (the largest
where lesions overlap), plus Gaussian noise of standard deviation 0.12 everywhere (noise is on in
this scenario). Raters (3): rater ``k`` marks the voxels within the lesion's radius times
(0.9, 1.0, 1.1)[k] of the lesions whose contrast reaches (0.3, 0.4, 0.5)[k]: they disagree on the
faint lesions (whether there is one) and on the borders (how large).
"""

from __future__ import annotations

import numpy as np

from toy_data_generator import scenarios as sc
from toy_data_generator import shapes

LESIONS = (3, 7)  # lesions per case, both included
KINDS = (("subresolution", 0.2, (0.3, 0.7)), ("small", 0.4, (1.0, 2.5)), ("large", 0.4, (2.5, None)))
CONTRAST = (0.25, 1.0)
GREY_FACTOR = 0.6
TOUCH_PROBABILITY = 0.3
NOISE_STD = 0.12
RATER_SCALE = (0.9, 1.0, 1.1)
RATER_CONTRAST = (0.3, 0.4, 0.5)


def _radius(rng: np.random.Generator, size: int) -> tuple[str, float]:
    k = rng.choice(len(KINDS), p=[p for _, p, _ in KINDS])
    kind, _, (low, high) = KINDS[k]
    return kind, float(rng.uniform(low, high if high is not None else max(size / 10, low + 0.5)))


def lesion_case(spec: sc.CaseSpec, dims: int, size: int, seed: int, rng: np.random.Generator):
    """One case of the ``lesions`` scenario (see the module docstring), drawn from the case's own
    ``rng``: image ``[1, *spatial]``, raters ``[3, *spatial]`` and metadata."""
    grid = (size,) * dims
    shape = "cube" if spec.shift == "cube" else "sphere"
    n = int(rng.integers(LESIONS[0], LESIONS[1] + 1))
    image = np.zeros(grid)
    raters = np.zeros((len(RATER_SCALE),) + grid, np.uint8)
    lesions = []
    for i in range(n):
        kind, radius = _radius(rng, size)
        contrast = float(rng.uniform(*CONTRAST)) * (GREY_FACTOR if spec.shift == "grey" else 1.0)
        touching = bool(i > 0 and rng.random() < TOUCH_PROBABILITY)
        if touching:
            direction = rng.normal(size=dims)
            direction /= np.linalg.norm(direction)
            center = np.asarray(lesions[-1]["center"]) + (lesions[-1]["radius"] + radius) * direction
        else:
            center = rng.uniform(radius + 1, size - radius - 1, size=dims)
        if spec.shift == "border" and i == 0:
            center[int(rng.integers(dims))] = 0.0 if rng.random() < 0.5 else size - 1.0
        distance = shapes.distance_map(grid, center, shape)
        image = np.maximum(image, contrast * np.clip(radius + 0.5 - distance, 0.0, 1.0))
        for k, (scale, threshold) in enumerate(zip(RATER_SCALE, RATER_CONTRAST)):
            if contrast >= threshold:
                raters[k] |= (distance <= radius * scale).astype(np.uint8)
        lesions.append({"kind": kind, "radius": radius, "contrast": contrast, "touching": touching,
                        "center": [float(c) for c in center]})
    image = image + rng.normal(0.0, NOISE_STD, size=grid)
    meta = {
        "case_id": spec.case_id, "scenario": spec.scenario, "split": spec.split, "index": spec.index,
        "ood": spec.ood, "shift": spec.shift, "blurred": False, "noise": True, "shape": shape,
        "n_lesions": n, "lesions": lesions, "n_raters": len(RATER_SCALE), "dims": int(dims), "size": int(size),
        "seed": int(seed),
    }
    return image.astype(np.float32)[None], raters, meta
