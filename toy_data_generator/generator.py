"""One toy case from a seed: image, three rater masks and metadata (paper appendix B.1).

The object
    A sphere (circle in 2D) or, for the ``cube`` shift, an axis-aligned cube (square) with a
    random diameter (edge length) between 1/5 and 1/2 of the image size and a random sub-voxel
    centre. I.i.d. objects lie fully inside the image with a margin of one voxel; ``border``
    objects are partly outside (see :func:`_border_center`).

Aleatoric uncertainty (appendix B.1.2, Figure 4)
    A *blurred* object of radius ``R`` (the largest rater's extent) has a white core of radius
    ``r1`` and is blurred towards the outside only: a Gaussian falloff of width ``sigma`` starting
    at ``r1``, shifted and rescaled so that it reaches 0 exactly at ``R`` (the image stays
    continuous and the object ends where the largest rater's mask ends)::

        I(d) = 1                          d <= r1
        I(d) = (g(d) - g(R)) / (1 - g(R))   r1 < d <= R,   g(d) = exp(-(d - r1)^2 / (2 sigma^2))
        I(d) = 0                          d > R

    where ``d`` is the distance from the centre in the metric of the shape. The three raters
    segment the level sets ``{d <= r_k}`` (equivalently, thresholds of the falloff) with radii
    derived analytically from the size ratios 10 %, 55 %, 100 % (volume ~ r^dims), so
    ``r_k = R * q_k ** (1 / dims)`` and ``r1 = R * 0.1 ** (1 / dims)``. The raters therefore agree on
    the white core and on the background and disagree only in the blurred band ``r1 < d <= R``.
    ``sigma`` is the scenario's blur (2 or 8 voxels at size 64) scaled by ``size / 64``: small
    sigma fades quickly after the core, large sigma keeps the band bright and fades late.
    Sharp (not blurred) objects are ``value`` inside ``R`` and all three raters are identical.

Epistemic uncertainty (appendix B.1.3, Figure 5)
    Shifts: ``cube`` (shape), ``grey`` (object value uniform in [0.5, 0.9] instead of 1.0),
    ``border`` (object partly outside the image). Each OoD case changes exactly that factor.

Background noise (scenarios 2, 3a, 3b)
    Every background voxel (outside the largest rater's mask) independently, with probability
    0.5, takes a value uniform in [0, 1); the others stay 0 (the noise model of the paper's code).

Determinism
    Each case has its own random generator seeded from ``(seed, scenario, split, index)``
    (:func:`case_rng`), so a case does not depend on which other cases are generated or in what
    order, and the same seed gives byte-identical arrays.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np

from toy_data_generator import lesions, shapes
from toy_data_generator import scenarios as sc

RATER_FRACTIONS = (0.10, 0.55, 1.00)  # rater sizes relative to the largest rater (appendix B.1.2)
DIAMETER_RANGE = (1 / 5, 1 / 2)  # object diameter as a fraction of the image size
GREY_RANGE = (0.5, 0.9)  # object value of the ``grey`` shift
NOISE_DENSITY = 0.5  # fraction of background voxels that carry noise
BORDER_OFFSET = (-1 / 3, 1 / 2)  # ``border``: centre's distance to the crossed face, in radii
IID_MARGIN = 1.0  # voxels between an i.i.d. object and the image border
MIN_RATER1_RADIUS = 1.0  # voxels: the smallest rater mask of the smallest object
VALID_DIMS = (2, 3)


@dataclass
class ToyCase:
    """A generated case: ``image`` float32 ``[1, *spatial]``, ``raters`` uint8 ``[3, *spatial]``
    (rater 1 = smallest), ``meta`` (``ood``, ``shift``, ``blurred``, ``scenario``, ``split``, ...)."""

    case_id: str
    image: np.ndarray
    raters: np.ndarray
    meta: dict = field(default_factory=dict)


def min_size(dims: int) -> int:
    """Smallest image size whose smallest object (diameter size/5) still gives rater 1
    (10 % of the volume) a radius of at least one voxel: 32 in 2D, 22 in 3D."""
    check_dims(dims)
    smallest_radius = MIN_RATER1_RADIUS / RATER_FRACTIONS[0] ** (1.0 / dims)
    return math.ceil(smallest_radius * 2 / DIAMETER_RANGE[0] - 1e-9)


def check_dims(dims: int) -> int:
    if isinstance(dims, bool) or dims not in VALID_DIMS:
        raise ValueError(f"dims must be 2 or 3, got {dims!r}")
    return int(dims)


def check_params(dims: int, size: int, seed: int) -> None:
    """Raise a clear ``ValueError`` for bad dims, size or seed."""
    check_dims(dims)
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
        raise ValueError(f"size must be an integer number of voxels, got {size!r}")
    smallest = min_size(dims)
    if size < smallest:
        raise ValueError(
            f"size {size} is too small for the toy objects in {dims}D: objects span 1/5 to 1/2 of the "
            f"image and the smallest rater mask (10 % of the object) needs a radius of at least "
            f"{MIN_RATER1_RADIUS:g} voxel; use size >= {smallest}"
        )
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")


def case_rng(seed: int, scenario: str, split: str, index: int) -> np.random.Generator:
    """The random generator of one case, independent of every other case."""
    key = [int(seed), zlib.crc32(str(scenario).encode()), zlib.crc32(split.encode()), int(index)]
    return np.random.default_rng(np.random.SeedSequence(key))


def blur_sigma(spec_sigma: float, size: int) -> float:
    """The scenario's blur sigma (given at size 64) in voxels of an image of ``size``."""
    return float(spec_sigma) * size / sc.REFERENCE_SIZE


def blur_profile(distance: np.ndarray, r_core: float, r_outer: float, sigma: float) -> np.ndarray:
    """Intensity (0..1, float64) of a blurred object at ``distance`` from its centre.

    1 inside ``r_core``; a Gaussian falloff of width ``sigma`` rescaled to reach 0 at ``r_outer``;
    0 beyond. Values in the band ``r_core < d <= r_outer`` are strictly below 1.
    """
    if not 0 < r_core < r_outer:
        raise ValueError(f"need 0 < r_core < r_outer, got {r_core}, {r_outer}")
    if sigma <= 0:
        raise ValueError(f"sigma must be positive, got {sigma}")
    two_s2 = 2.0 * sigma * sigma
    g_outer = math.exp(-((r_outer - r_core) ** 2) / two_s2)
    excess = np.maximum(distance - r_core, 0.0)
    profile = (np.exp(-(excess**2) / two_s2) - g_outer) / (1.0 - g_outer)
    profile = np.clip(profile, 0.0, 1.0)
    band = (distance > r_core) & (distance <= r_outer)
    profile[band] = np.minimum(profile[band], np.nextafter(np.float32(1), np.float32(0)))
    profile[distance > r_outer] = 0.0
    return profile


def _inside_center(rng: np.random.Generator, dims: int, size: int, radius: float) -> np.ndarray:
    lo, hi = radius + IID_MARGIN, size - radius - IID_MARGIN
    return rng.uniform(lo, hi, size=dims)


def _border_center(rng: np.random.Generator, dims: int, size: int, radius: float) -> np.ndarray:
    """A centre that puts the object partly outside the image: along a random non-empty set of
    axes, at a distance in [-R/3, R/2] from a random face (negative: the centre itself is
    outside); along the other axes, inside as for i.i.d. objects."""
    center = _inside_center(rng, dims, size, radius)
    crossed = rng.integers(1, 2**dims)  # bit mask of axes, never 0
    high_side = rng.integers(0, 2, size=dims)
    offsets = rng.uniform(BORDER_OFFSET[0] * radius, BORDER_OFFSET[1] * radius, size=dims)
    for axis in range(dims):
        if crossed >> axis & 1:
            center[axis] = size - offsets[axis] if high_side[axis] else offsets[axis]
    return center


def generate_case(spec: sc.CaseSpec, dims: int = 2, size: int = 64, seed: int = 0) -> ToyCase:
    """Generate the case described by ``spec`` in an image of ``size`` voxels per axis."""
    check_params(dims, size, seed)
    if spec.shift not in ("none",) + sc.SHIFTS:
        raise ValueError(f"unknown shift {spec.shift!r}; valid: none, {', '.join(sc.SHIFTS)}")
    rng = case_rng(seed, spec.scenario, spec.split, spec.index)
    if sc.get_scenario(spec.scenario).lesions:
        return ToyCase(spec.case_id, *lesions.lesion_case(spec, dims, size, seed, rng))
    grid = (size,) * dims

    # 1. size, 2. position, 3. value, 4. noise: always drawn in this order
    diameter = rng.uniform(DIAMETER_RANGE[0] * size, DIAMETER_RANGE[1] * size)
    radius = diameter / 2.0
    shape = "cube" if spec.shift == "cube" else "sphere"
    for _ in range(100):  # a border object must keep voxels inside the image (virtually always true)
        center = (
            _border_center(rng, dims, size, radius)
            if spec.shift == "border"
            else _inside_center(rng, dims, size, radius)
        )
        distance = shapes.distance_map(grid, center, shape)
        if (distance <= radius).any():
            break
    value = rng.uniform(*GREY_RANGE) if spec.shift == "grey" else 1.0

    if spec.blurred:
        rater_radii = [shapes.radius_for_volume_fraction(radius, q, dims) for q in RATER_FRACTIONS]
        sigma = blur_sigma(spec.sigma, size)
        profile = blur_profile(distance, rater_radii[0], rater_radii[-1], sigma)
    else:
        rater_radii = [radius] * len(RATER_FRACTIONS)
        sigma = 0.0
        profile = (distance <= radius).astype(np.float64)
    raters = np.stack([distance <= r for r in rater_radii]).astype(np.uint8)
    image = (value * profile).astype(np.float32)

    if spec.noise:
        carries = rng.random(grid) < NOISE_DENSITY
        noise = rng.random(grid, dtype=np.float32)
        background = distance > radius
        image = np.where(background & carries, noise, image)

    meta = {
        "case_id": spec.case_id,
        "scenario": spec.scenario,
        "split": spec.split,
        "index": spec.index,
        "ood": spec.ood,
        "shift": spec.shift,
        "blurred": spec.blurred,
        "exchangeable": spec.exchangeable,
        "noise": spec.noise,
        "shape": shape,
        "value": float(value),
        "center": [float(c) for c in center],
        "radius": float(radius),
        "rater_radii": [float(r) for r in rater_radii],
        "sigma": float(sigma),
        "n_raters": int(raters.shape[0]),
        "dims": int(dims),
        "size": int(size),
        "seed": int(seed),
    }
    return ToyCase(spec.case_id, image[None], raters, meta)


def generate(
    scenario: str,
    dims: int = 2,
    size: int = 64,
    seed: int = 0,
    splits: Sequence[str] | None = None,
    train_cases: int | None = None,
    val_cases: int | None = None,
    pool_iid: int = 0,
    pool_ood: int = 0,
) -> Iterator[ToyCase]:
    """Stream every case of a scenario (or of the given ``splits``), one at a time."""
    check_params(dims, size, seed)
    specs = sc.plan(scenario, train_cases, val_cases, pool_iid, pool_ood)
    for split in splits or list(specs):
        if split not in specs:
            raise ValueError(f"unknown split {split!r}; available: {', '.join(specs)}")
        for spec in specs[split]:
            yield generate_case(spec, dims, size, seed)
