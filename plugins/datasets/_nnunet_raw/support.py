"""Which downstream tasks a data set supports, and why (the choice ``validate-nnunet`` makes;
docs/design-rationale.md, "A data set in nnU-Net's raw layout").
"""

from __future__ import annotations

from dataclasses import dataclass

ALWAYS = ("segmentation", "failure_detection", "calibration")


@dataclass(frozen=True)
class DataFacts:
    iid_test: int
    ood_test: int
    max_test_raters: int
    pool: int


@dataclass(frozen=True)
class Support:
    tasks: tuple[str, ...]
    reasons: dict  # task -> why it runs or not

    def describe(self) -> str:
        return "\n".join(f"  {'+' if t in self.tasks else '-'} {t}: {why}" for t, why in self.reasons.items())


def facts(dataset) -> DataFacts:
    """Counts from case metadata (``dataset.meta(case_id)`` where the dataset offers it, else loading cases)."""
    def meta(case_id):
        return dataset.meta(case_id) if hasattr(dataset, "meta") else _loaded_meta(dataset, case_id)

    test = [meta(c) for c in dataset.case_ids("test")] if "test" in dataset.splits() else []
    pool = len(dataset.case_ids("pool")) if "pool" in dataset.splits() else 0
    return DataFacts(iid_test=sum(not m.get("ood", False) for m in test), ood_test=sum(bool(m.get("ood")) for m in test),
                     max_test_raters=max((int(m.get("n_raters", 1)) for m in test), default=0), pool=pool)


def _loaded_meta(dataset, case_id) -> dict:
    case = dataset.load(case_id)
    return {**case.meta, "n_raters": int(case.raters.shape[0])}


def supported_tasks(f: DataFacts, family: str, retrainable: bool) -> Support:
    """The tasks to run for data with facts ``f`` and a prediction model of ``family``."""
    if f.iid_test + f.ood_test == 0:
        raise ValueError("the data set has no labelled test cases: add imagesTs/ with labelsTs/, declare test cases "
                         "in a cases CSV, or give an OoD data set")
    reasons = {t: f"{f.iid_test} i.i.d. and {f.ood_test} OoD labelled test case(s)" for t in ALWAYS}
    ood = f.iid_test > 0 and f.ood_test > 0
    reasons["ood_detection"] = (f"{f.iid_test} i.i.d. vs {f.ood_test} OoD test cases" if ood else
                                "needs both i.i.d. and OoD test cases (an OoD data set or ood=true rows of a cases CSV)")
    raters = f.max_test_raters >= 2
    reasons["ambiguity"] = (f"up to {f.max_test_raters} raters per test case" if raters else
                            "needs several raters per test case (labelsTs_rater<k>/ folders)")
    typed = family != "deterministic"
    reasons["separation"] = ("raters and OoD cases: Q1-Q4" if raters and ood and typed else
                             "needs several raters, OoD cases and a model with AU and EU measures")
    al = f.pool > 0 and f.ood_test > 0 and retrainable
    reasons["active_learning"] = (f"a pool of {f.pool} case(s), retrained in a second cycle" if al else
                                  "needs a pool (split=pool rows of a cases CSV), OoD test cases and a model "
                                  "values-seg trains itself" + ("" if retrainable else " (not a trained nnU-Net folder)"))
    runs = {"ood_detection": ood, "ambiguity": raters, "separation": raters and ood and typed, "active_learning": al}
    order = ("segmentation", "ood_detection", "failure_detection", "calibration", "ambiguity", "active_learning",
             "separation")
    tasks = tuple(t for t in order if t in ALWAYS or runs[t])
    return Support(tasks, {t: reasons[t] for t in order})
