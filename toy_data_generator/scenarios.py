"""The toy scenarios of the paper (appendix B.1, Table 1) as data, and the per-case plan.

Table 1, read as (train / test, "(n)" = of which blurred):

========  ======================  =================================================================
scenario  train                   test
========  ======================  =================================================================
1         200 (200 blurred)       20 i.i.d. (20 blurred); no OoD
2         200 (0)                 21 i.i.d. sharp + 42 OoD (14 cube, 14 grey, 14 border)
3a        200 (100)               21 i.i.d. sharp + 42 OoD (14 cube, 14 grey, 14 border)
3b        200 (100)               21 i.i.d. sharp + 21 i.i.d. blurred + 21 OoD (7 cube, 7 grey, 7 border)
========  ======================  =================================================================

OoD test cases are always sharp (not blurred) and each differs from the sharp training cases in
exactly one factor: ``cube`` (a cube instead of a sphere), ``grey`` (object value in [0.5, 0.9]
instead of 1.0) or ``border`` (object partly outside the image). Background noise is on in
scenarios 2, 3a and 3b (train and test alike) and off in scenario 1.

Blur: Gaussian falloff of sigma 2 voxels (scenario 1) or 8 voxels (scenarios 3a/3b) at an image
size of 64, scaled by ``size / 64`` for other sizes.

Splits beyond Table 1 (not in the paper):

* ``val``: extra cases from the training distribution (same blurred/sharp mix as ``train``) for
  fitting thresholds and Platt scaling. Default: 20 % of the training cases (40 for Table 1), the
  validation fraction of the paper's 5-fold split, but drawn *in addition to* the 200 training
  cases so that ``train`` keeps Table 1's count.
* ``pool`` (optional, for active learning; the paper ran none on toy data): ``pool_iid`` cases from
  the training distribution and ``pool_ood`` OoD cases, the three shifts in equal parts (cycled
  cube, grey, border). In scenario 1, whose data are all blurred, the OoD pool cases are blurred
  too; elsewhere they are sharp, like the OoD test cases.

Exchangeability with the validation split (what guarantees calibrated there, e.g. conformal risk
control, cover): a case is ``exchangeable`` when it is i.i.d. and its split has the training
mixture's blurred share (``val``, ``train`` and the i.i.d. pool always; the i.i.d. test cases of
scenarios 1, 2 and 3b). Scenario 3a's i.i.d. test cases are all sharp (Table 1: 21 (0)) while the
validation split is half blurred: they are i.i.d. with training in the paper's sense (no shift
factor) but not exchangeable with the calibration cases, and no guarantee covers them. In 3b the
i.i.d. test split and the validation split are both stratified at the same blurred share (21 of 42
and half of ``val``): exchangeable within each stratum, with the mixture's proportions.
"""

from __future__ import annotations

from dataclasses import dataclass

SHIFTS = ("cube", "grey", "border")  # the epistemic shift factors (appendix B.1.3)
SPLITS = ("train", "val", "test", "pool")
REFERENCE_SIZE = 64  # the paper's image size; blur sigmas are given at this size


@dataclass(frozen=True)
class Group:
    """``count`` cases that share blur and shift."""

    count: int
    blurred: bool
    shift: str = "none"


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    noise: bool  # background noise on every case of the scenario
    sigma: float  # blur sigma at REFERENCE_SIZE (voxels); used by blurred cases
    train: tuple[Group, ...]
    test: tuple[Group, ...]
    ood_blurred: bool = False  # whether OoD pool cases are blurred
    lesions: bool = False  # several lesions per case (toy_data_generator/lesions.py), not one object

    @property
    def train_count(self) -> int:
        return sum(g.count for g in self.train)

    @property
    def test_count(self) -> int:
        return sum(g.count for g in self.test)

    @property
    def iid_test_exchangeable(self) -> bool:
        """Whether the i.i.d. test cases are exchangeable with the validation split: the same blurred
        share as the training mixture (from which ``val`` is drawn; module docstring)."""
        iid = [g for g in self.test if g.shift == "none"]
        if not iid:
            return False
        share = lambda groups: sum(g.count for g in groups if g.blurred) / sum(g.count for g in groups)  # noqa: E731
        return share(iid) == share(self.train)


def _ood_groups(total: int) -> tuple[Group, ...]:
    per = total // len(SHIFTS)
    return tuple(Group(per, False, s) for s in SHIFTS)


SCENARIOS: dict[str, Scenario] = {
    "1": Scenario(
        "1",
        "train on data with induced AU (blur); test on i.i.d. data also containing AU",
        noise=False,
        sigma=2.0,
        train=(Group(200, True),),
        test=(Group(20, True),),
        ood_blurred=True,
    ),
    "2": Scenario(
        "2",
        "train on data without ambiguity; test on i.i.d. data and shifted data",
        noise=True,
        sigma=8.0,  # unused: scenario 2 has no blurred case
        train=(Group(200, False),),
        test=(Group(21, False),) + _ood_groups(42),
    ),
    "3a": Scenario(
        "3a",
        "train on data with and without blur; test on i.i.d. data and shifted data without blur",
        noise=True,
        sigma=8.0,
        train=(Group(100, True), Group(100, False)),
        test=(Group(21, False),) + _ood_groups(42),
    ),
    "3b": Scenario(
        "3b",
        "train on data with and without blur; test on i.i.d. data and shifted data without blur "
        "and on i.i.d. data with blur",
        noise=True,
        sigma=8.0,
        train=(Group(100, True), Group(100, False)),
        test=(Group(21, False), Group(21, True)) + _ood_groups(21),
    ),
    "lesions": Scenario(
        "lesions",
        "several lesions per case of varying size and contrast (some faint, touching or below the "
        "resolution; toy_data_generator/lesions.py); test on i.i.d. data and shifted data",
        noise=True,
        sigma=0.0,
        train=(Group(200, False),),
        test=(Group(21, False),) + _ood_groups(21),
        lesions=True,
    ),
}


def get_scenario(name: str | int) -> Scenario:
    """The scenario called ``name`` ("1", "2", "3a", "3b" or "lesions"); a clear ``ValueError`` otherwise."""
    key = str(name).strip().lower()
    if key not in SCENARIOS:
        raise ValueError(f"unknown toy scenario {name!r}; valid scenarios: {', '.join(SCENARIOS)}")
    return SCENARIOS[key]


@dataclass(frozen=True)
class CaseSpec:
    """Everything that determines one case except the random draws (which come from its seed)."""

    scenario: str
    split: str
    index: int  # position within the split
    blurred: bool
    shift: str = "none"  # "none" for i.i.d. cases
    noise: bool = False
    sigma: float = 0.0  # blur sigma at REFERENCE_SIZE (0 when not blurred)
    #: exchangeable with the validation split (module docstring): guarantees calibrated there cover it
    exchangeable: bool = True

    @property
    def ood(self) -> bool:
        return self.shift != "none"

    @property
    def case_id(self) -> str:
        return case_id(self.scenario, self.split, self.index)


def case_id(scenario: str, split: str, index: int) -> str:
    return f"toy{scenario}_{split}_{index:04d}"


def _scaled(groups: tuple[Group, ...], total: int) -> tuple[Group, ...]:
    """``groups`` rescaled to ``total`` cases, proportions kept (largest remainder)."""
    full = sum(g.count for g in groups)
    exact = [g.count * total / full for g in groups]
    counts = [int(x) for x in exact]
    order = sorted(range(len(groups)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: total - sum(counts)]:
        counts[i] += 1
    return tuple(Group(c, g.blurred, g.shift) for c, g in zip(counts, groups))


def _cycle_shifts(count: int, blurred: bool) -> tuple[Group, ...]:
    counts = [count // len(SHIFTS) + (1 if i < count % len(SHIFTS) else 0) for i in range(len(SHIFTS))]
    return tuple(Group(c, blurred, s) for c, s in zip(counts, SHIFTS))


def default_val_cases(train_cases: int) -> int:
    """20 % of the training cases (at least 1)."""
    return max(1, round(0.2 * train_cases))


def _check_count(name: str, value: int, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def split_groups(
    scenario: str | Scenario,
    train_cases: int | None = None,
    val_cases: int | None = None,
    pool_iid: int = 0,
    pool_ood: int = 0,
) -> dict[str, tuple[Group, ...]]:
    """The groups of every split (``pool`` only when it has cases)."""
    sc = scenario if isinstance(scenario, Scenario) else get_scenario(scenario)
    n_train = sc.train_count if train_cases is None else _check_count("train_cases", train_cases, 1)
    n_val = default_val_cases(n_train) if val_cases is None else _check_count("val_cases", val_cases, 1)
    _check_count("pool_iid", pool_iid, 0)
    _check_count("pool_ood", pool_ood, 0)
    groups = {
        "train": _scaled(sc.train, n_train),
        "val": _scaled(sc.train, n_val),
        "test": sc.test,
    }
    if pool_iid + pool_ood > 0:
        pool = (_scaled(sc.train, pool_iid) if pool_iid else ()) + _cycle_shifts(pool_ood, sc.ood_blurred)
        groups["pool"] = pool
    return {k: tuple(g for g in v if g.count > 0) for k, v in groups.items()}


def plan(
    scenario: str | Scenario,
    train_cases: int | None = None,
    val_cases: int | None = None,
    pool_iid: int = 0,
    pool_ood: int = 0,
) -> dict[str, list[CaseSpec]]:
    """Per split, the list of :class:`CaseSpec` in order (index = position in the split)."""
    sc = scenario if isinstance(scenario, Scenario) else get_scenario(scenario)
    result: dict[str, list[CaseSpec]] = {}
    for split, groups in split_groups(sc, train_cases, val_cases, pool_iid, pool_ood).items():
        specs: list[CaseSpec] = []
        for g in groups:
            for _ in range(g.count):
                specs.append(
                    CaseSpec(
                        scenario=sc.name,
                        split=split,
                        index=len(specs),
                        blurred=g.blurred,
                        shift=g.shift,
                        noise=sc.noise,
                        sigma=sc.sigma if g.blurred else 0.0,
                        exchangeable=g.shift == "none" and (split != "test" or sc.iid_test_exchangeable),
                    )
                )
        result[split] = specs
    return result
