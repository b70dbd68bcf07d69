"""The ``toy`` dataset: the controlled toy scenarios of the paper (appendix B.1), in memory.

Cases are generated lazily from the seed when loaded (nothing large is cached), so a case is the
same whichever split or order it is asked for in, and identical to what
``values-seg toy generate`` writes to disk with the same parameters.
"""

from __future__ import annotations

from typing import Literal

from values_seg import hookimpl
from values_seg.components.dataset import Case, Dataset

from toy_data_generator import generator, scenarios


class ToyDataset(Dataset):
    """Toy spheres/cubes with blur (3 raters) and shifts (paper appendix B.1, Table 1 scenarios 1, 2, 3a, 3b)."""

    name = "toy"
    in_channels = 1
    num_classes = 2
    ignore_index = None
    class_names = ("background", "foreground")

    def __init__(
        self,
        scenario: Literal["1", "2", "3a", "3b", "lesions"] = "1",
        dims: int = 2,
        size: int = 64,
        seed: int = 0,
        val_cases: int | None = None,
        train_cases: int | None = None,
        pool_iid: int = 0,
        pool_ood: int = 0,
    ):
        """
        Args:
            scenario: Table 1 scenario: "1" (blur only), "2" (shifts only), "3a"/"3b" (both); or
                "lesions": several lesions per case (toy_data_generator/lesions.py).
            dims: 2 (circles, squares) or 3 (spheres, cubes).
            size: image size in voxels per axis (the paper: 64); at least 32 in 2D, 22 in 3D.
            seed: the same seed gives identical cases.
            val_cases: validation cases from the training distribution (for thresholds and Platt
                scaling), drawn in addition to the training cases; default 20 % of ``train_cases``.
            train_cases: override Table 1's 200 training cases for quick runs (blur mix kept).
            pool_iid: i.i.d. cases of an unlabeled active-learning pool (split ``pool``).
            pool_ood: OoD cases of that pool, the three shifts in equal parts.
        """
        try:
            self.scenario = scenarios.get_scenario(scenario).name
            generator.check_params(dims, size, seed)
            self._plan = scenarios.plan(self.scenario, train_cases, val_cases, pool_iid, pool_ood)
        except ValueError as e:
            raise ValueError(f"dataset 'toy': {e}") from None
        self.dims = int(dims)
        self.size = int(size)
        self.seed = int(seed)
        self._specs = {spec.case_id: spec for specs in self._plan.values() for spec in specs}

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}={len(v)}" for k, v in self._plan.items())
        return f"ToyDataset(scenario={self.scenario!r}, dims={self.dims}, size={self.size}, seed={self.seed}; {counts})"

    def splits(self) -> list[str]:
        return list(self._plan)

    def case_ids(self, split: str) -> list[str]:
        self.check_split(split)
        return [spec.case_id for spec in self._plan[split]]

    def spec(self, case_id: str) -> scenarios.CaseSpec:
        """What the case is (split, blur, shift) without generating it."""
        try:
            return self._specs[case_id]
        except KeyError:
            raise KeyError(f"{self!r} has no case {case_id!r}") from None

    def load(self, case_id: str) -> Case:
        toy = generator.generate_case(self.spec(case_id), self.dims, self.size, self.seed)
        return Case(toy.case_id, toy.image, toy.raters, toy.meta)


@hookimpl
def values_seg_datasets():
    return [ToyDataset]


@hookimpl
def values_seg_cli(commands):
    """``values-seg toy generate``: a toy scenario on disk (NIfTI, manifest, preview)."""
    from toy_data_generator.cli import configure_parser, generate_command

    toy = commands.add_parser("toy", help="the controlled toy data (paper appendix B.1)")
    toy_sub = toy.add_subparsers(dest="toy_command", required=True)
    generate = toy_sub.add_parser("generate", help="write a toy scenario as NIfTI + manifest + preview")
    configure_parser(generate)
    generate.set_defaults(func=generate_command)
