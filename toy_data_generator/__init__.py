"""Controlled toy data for uncertainty validation (ValUES, appendix B.1).

Spheres and cubes (circles and squares in 2D) drawn analytically in images of any size, in 2D
or 3D; blurred objects with three raters at 10 %, 55 % and 100 % of the largest rater's size
(aleatoric uncertainty); shifted test cases (cube, grey value, object over the border) with
background noise (epistemic uncertainty); the four scenarios of the paper's Table 1.

In memory::

    from toy_data_generator import generate
    for case in generate("3b", dims=3, size=64, seed=0):
        case.image, case.raters, case.meta

On disk: :func:`toy_data_generator.io.write_dataset` or ``values-seg toy generate``.
"""

from toy_data_generator.generator import ToyCase, check_params, generate, generate_case, min_size
from toy_data_generator.scenarios import SCENARIOS, SHIFTS, CaseSpec, get_scenario, plan

__all__ = [
    "SCENARIOS",
    "SHIFTS",
    "CaseSpec",
    "ToyCase",
    "check_params",
    "generate",
    "generate_case",
    "get_scenario",
    "min_size",
    "plan",
]
