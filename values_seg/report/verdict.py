"""Which aggregation? Mean ranks of the aggregations, the winner, and where the answer flips.

Per scenario, task and split, on each task's primary metric: ranks within the other components, a paired
bootstrap of the winner against the runner-up, and the flips. Rationale and the exact rules:
docs/statistics.md, "The aggregation verdict".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from values_seg.report.common import scenarios
from values_seg.report.equivalence import confirmed, equivalent_groups
from values_seg.report.intervals import group_rows
from values_seg.report.ranking import METHOD, Methods, matched_blocks, over_text
from values_seg.report.rundir import RunData
from values_seg.report.spec import HIGHER, LOWER
from values_seg.statistics import adjust, family_method, paired_p_value
from values_seg.statistics.multiple import BH, HOLM

CORRECTION = {BH: "Benjamini–Hochberg", HOLM: "Holm", "": "untested"}

SAMPLES = "samples"  # the measure column of sample-based aggregations (values_seg.components.aggregation.SAMPLES)
#: chance level of metrics by their declared ``separation_role`` ("EU": a ranking score, 0.5 = random)
CHANCE = {"EU": 0.5}
PANEL = ["scenario", "task", "metric", "split"]
INVERTED = "inverted"  # the kind of a below-chance result of an aggregation declared inverted


@dataclass
class Verdict:
    ranks: pd.DataFrame  # PANEL, block (0: main), over, aggregation, members, mean_rank, ci_*, n_combinations, ...
    # PANEL, block, over, winner, tied, runner_up, gap, p_value, p_adjusted, correction, family_size, significant,
    # winner_entry, runner_up_entry; a further block only where its winner or runner-up is outside the main block
    winners: pd.DataFrame
    flips: pd.DataFrame  # kind, task, metric, where, detail, p_value, p_adjusted
    left_out: pd.DataFrame = field(default_factory=pd.DataFrame)  # PANEL, aggregation, reason
    merged: list = field(default_factory=list)  # groups of aggregations ranked as one entry
    n_resamples: int = 0
    n_seeds: int = 0
    chance: pd.DataFrame = field(default_factory=pd.DataFrame)  # every below-chance test, adjusted as one family
    unsupported: str = ""  # how many methods are left out, unsupported by the data (Methods.left_out_text)
    # the same columns: a significantly below-chance method whose aggregation declares the inverted
    # orientation (lower = more uncertain): a detector with its sign reversed, not a flip
    inverted: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def empty(self) -> bool:
        return self.ranks.empty


def entry_label(spec, members: str) -> str:
    """"FG mean = Class mean": an entry's aggregations (``members``, ";"-separated), by their labels."""
    return " = ".join(spec.label("aggregation", a) for a in members.split(";"))


def format_p(p: float) -> str:
    """A bootstrap p-value, never shown as 0 (it is at least 2 / (B + 1))."""
    return f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def _average_ranks(x: np.ndarray, higher: bool) -> np.ndarray:
    """Ranks along the last axis (1 = best), ties sharing their mean rank."""
    from scipy.stats import rankdata

    return rankdata(-x if higher else x, axis=-1, method="average")


def _with_samples_per_measure(methods: pd.DataFrame) -> pd.DataFrame:
    """A sample-based aggregation's rows copied to every measure of their prediction model."""
    samples = methods[methods["measure"] == SAMPLES]
    if samples.empty:
        return methods
    others = methods[methods["measure"] != SAMPLES]
    measures = others[["backbone", "prediction_model", "measure"]].drop_duplicates()
    joined = samples.drop(columns="measure").merge(measures, on=["backbone", "prediction_model"])
    return pd.concat([others, joined[methods.columns]], ignore_index=True)


def comparable_blocks(methods: pd.DataFrame, spec) -> list[tuple[list, pd.DataFrame]]:
    """``(choices, their methods)`` per block of aggregations ranked together, the main block first:
    the aggregations that exist in every combination (backbone × model × measure), over all of
    them; then each largest set of aggregations that occur together (:func:`matched_blocks`) and
    holds one outside the main block, over the combinations where all of them exist. Without two
    aggregations in every combination the main block is the matched block over most combinations."""
    part = methods[methods["aggregation"] != ""]
    _, groups = group_rows(part, [c for c in METHOD if c != "aggregation"])
    if not groups:
        return []
    choice = part["aggregation"].to_numpy()
    core = frozenset.intersection(*(frozenset(choice[g]) for g in groups))
    blocks = matched_blocks(part, "aggregation", spec)
    if len(core) >= 2:
        main = (spec.ordered("aggregation", core), part[part["aggregation"].isin(core)])
    elif blocks:
        main = max(blocks, key=lambda b: (len(b[1]) // len(b[0]), len(b[0])))
    else:
        return []
    return [main] + [b for b in blocks if not set(b[0]) <= set(main[0])]


def verdict(run: RunData, table: Methods | None = None, task: str | None = None) -> Verdict:
    """The "Which aggregation?" tables of a run (see the module docstring); only ``task`` where given."""
    res, spec, dist = run.results, run.spec, run.distributions
    if res.empty:
        return Verdict(pd.DataFrame(), pd.DataFrame(), pd.DataFrame())
    table = table or Methods(run)
    level = dist.level if dist is not None else 0.95
    panels = []
    for sc in scenarios(res):
        for ms in spec.figure3_metrics():
            if ms.direction not in (HIGHER, LOWER) or not ms.per_aggregation or task not in (None, ms.task):
                continue
            splits = [k[4] for k in table.parts if k[:4] == (sc.dataset, sc.scenario, ms.task, ms.metric)]
            for split in spec.ordered("split", splits):
                methods, pooled = table.get(sc, ms.task, ms.metric, split)
                if not methods.empty:
                    where = {"scenario": sc.title, "task": ms.task, "metric": ms.metric, "split": split}
                    panels.append((where, ms, methods, pooled))
    merged = confirmed(equivalent_groups(run.cases), [p[2] for p in panels])
    members = {g[0]: ";".join(g) for g in merged}
    hidden = {a for g in merged for a in g[1:]}
    ranks, winners, chance, left = [], [], [], []
    for where, ms, methods, pooled in panels:
        methods = methods[~methods["aggregation"].isin(hidden)]
        chance += _chance_tests(run, ms, methods, pooled, where)
        joined = _with_samples_per_measure(methods)
        blocks = comparable_blocks(joined, spec)
        if not blocks:
            continue
        left += _left_out(methods, joined, blocks, spec, where, table.unsupported(**where))
        for i, (choices, matched) in enumerate(blocks):
            about = {**where, "block": i, "over": over_text(matched, "aggregation", spec)}
            panel = _panel(matched, pooled, choices, ms.direction == HIGHER, level)
            panel.insert(1, "members", [members.get(a, a) for a in choices])
            ranks.append(panel.assign(**about))
            w = _winner(panel, matched, pooled, choices, ms.direction == HIGHER)
            if i == 0 or {*w["tied"].split(";"), w["runner_up"]} - set(blocks[0][0]) - {""}:  # else: the main's claim
                winners.append({**about, **w})
    ranks_df = pd.DataFrame() if not ranks else pd.concat(ranks, ignore_index=True)
    winners_df = _adjusted(pd.DataFrame(winners), level)
    if not winners_df.empty:  # the entries, by their ";"-separated aggregations; a tie's entries by " | "
        winners_df["winner_entry"] = [members.get(a, a) for a in winners_df["winner"]]  # "" stays ""
        winners_df["runner_up_entry"] = [members.get(a, a) for a in winners_df["runner_up"]]
        winners_df["tied"] = [" | ".join(members.get(a, a) for a in t.split(";")) for t in winners_df["tied"]]
    n_seeds = int(res["seed"].nunique()) if "seed" in res else 0
    chance_df = _adjusted(pd.DataFrame(chance), level)
    flips = _flips(winners_df, chance_df, members)
    inverted = flips["kind"] == INVERTED
    return Verdict(ranks_df, winners_df, flips[~inverted].reset_index(drop=True),
                   pd.DataFrame(left, columns=PANEL + ["aggregation", "reason"]), merged,
                   dist.n_resamples if dist is not None else 0, n_seeds, chance_df,
                   table.left_out_text({(ms.task, ms.metric) for _, ms, _, _ in panels}),
                   flips[inverted].reset_index(drop=True))


def _matrices(matched: pd.DataFrame, pooled: list, choices: list):
    """Observed values ``[combinations, choices]`` and, with bootstrap, resamples ``[B, combinations, choices]``
    (only the resamples in which every value is defined)."""
    context = [c for c in METHOD if c != "aggregation"]
    wide = matched.pivot_table(index=context, columns="aggregation", values="value", aggfunc="mean")[choices]
    values = wide.to_numpy(dtype=float)
    if (matched["pooled"] < 0).any():
        return values, None
    index = matched.pivot_table(index=context, columns="aggregation", values="pooled", aggfunc="first")[choices]
    samples = np.stack([np.stack([pooled[int(i)] for i in row]) for row in index.to_numpy()])  # [K, A, B]
    samples = np.moveaxis(samples, -1, 0)
    ok = np.isfinite(samples).all(axis=(1, 2))
    return values, (samples[ok] if ok.any() else None)


def _panel(matched, pooled, choices, higher, level) -> pd.DataFrame:
    values, samples = _matrices(matched, pooled, choices)
    observed = _average_ranks(values, higher).mean(axis=0)
    low = high = np.full(len(choices), np.nan)
    hist = [""] * len(choices)
    if samples is not None:
        r = _average_ranks(samples, higher)  # [B, K, A]
        mean = r.mean(axis=1)
        alpha = (1 - level) / 2
        low, high = np.quantile(mean, alpha, axis=0), np.quantile(mean, 1 - alpha, axis=0)
        whole = np.floor(r).astype(int)
        hist = [" ".join(f"{np.mean(whole[..., a] == k):.2f}" for k in range(1, len(choices) + 1))
                for a in range(len(choices))]
    return pd.DataFrame({"aggregation": choices, "mean_rank": observed, "ci_low": low, "ci_high": high,
                         "n_combinations": values.shape[0], "rank_shares": hist})


def _winner(panel: pd.DataFrame, matched, pooled, choices, higher) -> dict:
    """The winner (or the tie at the top), the runner-up, and the paired test between them."""
    order = panel.sort_values("mean_rank", kind="stable")
    ranks = order["mean_rank"].to_numpy()
    top = order[np.isclose(ranks, ranks[0], rtol=0, atol=1e-9)]
    rest = order.iloc[len(top):]
    best = top.iloc[0]
    out = {"winner": best["aggregation"] if len(top) == 1 else "", "tied": ";".join(top["aggregation"]),
           "runner_up": rest.iloc[0]["aggregation"] if len(rest) and len(top) == 1 else "",
           "gap": float(rest.iloc[0]["mean_rank"] - ranks[0]) if len(rest) else 0.0, "p_value": np.nan}
    _, samples = _matrices(matched, pooled, choices)
    if samples is not None and out["runner_up"]:
        mean = _average_ranks(samples, higher).mean(axis=1)
        diff = mean[:, choices.index(out["runner_up"])] - mean[:, choices.index(out["winner"])]
        out["p_value"] = float(paired_p_value(diff))
    return out


def _adjusted(tests: pd.DataFrame, level: float) -> pd.DataFrame:
    """``tests`` with ``p_adjusted``, ``correction``, ``family_size`` and ``significant``: its p-values one family."""
    if tests.empty:
        return tests
    p = tests["p_value"].to_numpy(dtype=float)
    n = int(np.isfinite(p).sum())
    method = family_method(n) if n else ""
    return tests.assign(p_adjusted=adjust(p, method) if n else np.nan, correction=method, family_size=n,
                        significant=(adjust(p, method) < 1 - level) if n else False)


def _chance_tests(run: RunData, ms, methods: pd.DataFrame, pooled: list, where: dict) -> list[dict]:
    """Every method on the wrong side of the chance level while another aggregation of the same
    model and measure is on the right side, with the two-sided bootstrap p-value of value − chance."""
    declared = run.spec.metric(ms.task, ms.metric) or {}
    chance = CHANCE.get(declared.get("separation_role", ""))
    if chance is None:
        return []
    higher = ms.direction == HIGHER
    good = methods["value"] > chance if higher else methods["value"] < chance
    out = []
    for r in methods[~good & (methods["value"] != chance)].itertuples():
        same = methods[(methods["backbone"] == r.backbone) & (methods["prediction_model"] == r.prediction_model)
                       & (methods["measure"] == r.measure) & good]
        if same.empty:
            continue
        best = same.sort_values("value", ascending=not higher).iloc[0]
        p, low, high = np.nan, np.nan, np.nan
        if r.pooled >= 0:
            d = pooled[r.pooled] - chance
            p = float(paired_p_value(d))
            low, high = np.nanquantile(pooled[r.pooled], [(1 - (run.distributions.level)) / 2,
                                                          (1 + run.distributions.level) / 2])
        out.append({**where, "prediction_model": r.prediction_model, "measure": r.measure,
                    "aggregation": r.aggregation, "value": r.value, "ci_low": low, "ci_high": high,
                    "chance": chance, "best_aggregation": best["aggregation"], "best_value": best["value"],
                    "inverted": run.spec.inverted(r.aggregation), "p_value": p})
    return out


def _left_out(methods, joined, blocks, spec, where: dict, unsupported: dict) -> list[dict]:
    """The aggregations outside the main block, why, and where else they are ranked."""
    main = set(blocks[0][0])
    sample_based = set(methods.loc[methods["measure"] == SAMPLES, "aggregation"])
    models = set(joined["prediction_model"])
    out = []
    for a in spec.ordered("aggregation", set(joined["aggregation"]) - main - {""}):
        rows = joined[joined["aggregation"] == a]
        missing = spec.ordered("prediction_model", models - set(rows["prediction_model"]))
        why = (f"no values with {', '.join(spec.label('prediction_model', m) for m in missing)}" if missing
               else f"exists only with {over_text(rows, 'aggregation', spec)}")
        why += " (it aggregates the prediction model's samples)" if a in sample_based else ""
        if a in unsupported:  # missing where the data cannot support its values (Methods.left_out)
            why = f"⚠ the data cannot support its values with {unsupported[a]}"
        if not any(a in choices for choices, _ in blocks):
            why += "; never together with another aggregation: not ranked"
        out.append({**where, "aggregation": a, "reason": why})
    return out


def _flips(winners: pd.DataFrame, chance: pd.DataFrame, members: dict) -> pd.DataFrame:
    rows = []
    main = winners[winners["block"] == 0] if not winners.empty else winners
    for (task, metric), g in (main.groupby(["task", "metric"], sort=False) if not main.empty else []):
        clear = g[g["significant"]]
        if clear["winner"].nunique() > 1:
            detail = "; ".join(f"{r.scenario} {r.split}: {r.winner_entry.replace(';', ' = ')}"
                               + (" (sig.)" if r.significant else "")
                               for r in g[g["winner"] != ""].itertuples())
            rows.append({"kind": "best differs", "task": task, "metric": metric, "where": "", "detail": detail,
                         "p_value": float(clear["p_value"].max()), "p_adjusted": float(clear["p_adjusted"].max())})
    for b in (chance[chance["significant"]].itertuples() if not chance.empty else []):
        name = members.get(b.aggregation, b.aggregation).replace(";", " = ")
        found = (f"{b.prediction_model} × {b.measure} × {name}: {b.value:.3f} [{b.ci_low:.3f}, {b.ci_high:.3f}] < "
                 f"{b.chance:g} (p = {format_p(b.p_value)}, adjusted {format_p(b.p_adjusted)})")
        if b.inverted:  # declared lower = more uncertain: below chance is its orientation, not a collapse
            detail = (f"{found}; declared inverted (lower = more uncertain), so a detector with its sign reversed: "
                      f"{2 * b.chance - b.value:.3f} read the other way round")
        else:
            detail = f"{found}; with {b.best_aggregation}: {b.best_value:.3f}"
        rows.append({"kind": INVERTED if b.inverted else "below chance", "task": b.task, "metric": b.metric,
                     "where": f"{b.scenario} {b.split}", "detail": detail, "p_value": b.p_value,
                     "p_adjusted": b.p_adjusted})
    return pd.DataFrame(rows, columns=["kind", "task", "metric", "where", "detail", "p_value", "p_adjusted"])


def method_note(v: Verdict, spec, level: float) -> str:
    """How the section ranks, merges, tests and what its intervals are conditional on (CLI and report)."""
    text = ("mean rank over the prediction model × measure combinations (1 = best); the main ranking holds the "
            "aggregations that exist in every combination, over all of them; one that exists in some only is "
            "ranked with the others where it exists (a further block), and named below with the reason.")
    if v.merged:
        text += (" Aggregations that rank the cases identically on this run (same per-case score ranks in every "
                 "combination) are one entry: " + "; ".join(" = ".join(spec.label("aggregation", a) for a in g)
                                                              for g in v.merged) + ".")
    if v.n_resamples:
        size = int(v.winners["family_size"].iloc[0]) if not v.winners.empty else 0
        correction = CORRECTION[v.winners["correction"].iloc[0]] if not v.winners.empty else ""
        text += (f" Winner vs runner-up: paired bootstrap test of the mean ranks ({v.n_resamples} resamples of the "
                 f"test cases, p ≥ 2/(B + 1) = {2 / (v.n_resamples + 1):.1g}), the section's {size} tests adjusted "
                 f"together ({correction}), significant below {1 - level:g}; "
                 f"a tie at the top has no winner; a flip needs two different winners that are each significant. "
                 f"Intervals and tests are conditional on the {v.n_seeds} training seed(s) run: they resample the "
                 f"test cases{' and the seeds' if v.n_seeds > 1 else ''}, not new trainings.")
    return text


def _winner_text(w, spec) -> str:
    if not w["winner"]:
        return f"tie: {' and '.join(entry_label(spec, e) for e in w['tied'].split(' | '))} (no winner)"
    if not w["runner_up"]:
        return f"winner: {entry_label(spec, w['winner_entry'])} (nothing to compare it with)"
    sig = "significantly" if w["significant"] else "not significantly"
    p = (f" (p = {format_p(w['p_value'])}, adjusted {format_p(w['p_adjusted'])})"
         if np.isfinite(w["p_value"]) else "")
    return (f"winner: {entry_label(spec, w['winner_entry'])}, {sig} better than "
            f"{entry_label(spec, w['runner_up_entry'])}{p}")


def describe(v: Verdict, run: RunData) -> str:
    """Plain text: per panel the ranked entries of the main block (mean rank [interval]), the winner
    and its test against the runner-up; the further blocks' winners and left-out entries; the flips."""
    if v.empty:
        return "Which aggregation? No panel ranks two or more aggregations over matched combinations."
    spec = run.spec
    level = run.distributions.level if run.distributions is not None else 0.95
    lines = ["Which aggregation? Per task's primary metric, scenario and split: " + method_note(v, spec, level)
             + (f" {v.unsupported}" if v.unsupported else "")]
    for key, g in v.ranks.groupby(PANEL[1:3] + PANEL[:1] + PANEL[3:], sort=False):
        task, metric, scenario, split = key
        at = (v.winners["task"] == task) & (v.winners["metric"] == metric) & \
             (v.winners["scenario"] == scenario) & (v.winners["split"] == split)
        for block, b in g.groupby("block", sort=True):
            w = v.winners[at & (v.winners["block"] == block)]
            w = w.iloc[0] if not w.empty else None  # a further block without a claim of its own: its ranks only
            head = "  further block" if block else f"\n{spec.metric_spec(task, metric).title} — {scenario} ({split})"
            lines.append(f"{head}, {int(b['n_combinations'].iloc[0])} combinations ({b['over'].iloc[0]}), "
                         f"{len(b)} entries:")
            main = set(g.loc[g["block"] == 0, "aggregation"])
            shown = {"", *(w[["winner", "runner_up"]] if w is not None else [])}
            for r in b.sort_values("mean_rank").itertuples():
                if block == 0 or r.aggregation not in main or r.aggregation in shown:
                    ci = f" [{r.ci_low:.2f}, {r.ci_high:.2f}]" if np.isfinite(r.ci_low) else ""  # the point's precision
                    lines.append(f"  {r.mean_rank:5.2f}{ci}  {entry_label(spec, r.members)}")
            if w is not None:
                lines.append("  " + _winner_text(w, spec))
        lo = v.left_out[(v.left_out["task"] == task) & (v.left_out["metric"] == metric)
                        & (v.left_out["scenario"] == scenario) & (v.left_out["split"] == split)]
        for r in lo.itertuples():
            lines.append(f"  left out of the main ranking: {spec.label('aggregation', r.aggregation)}: {r.reason}")
    flips = v.flips
    lines.append("\nFlips:" if not flips.empty else "\nFlips: none (no two different significant winners, "
                                                      "no aggregation of the usual orientation significantly below "
                                                      "chance).")
    for r in flips.itertuples():
        where = f" ({r.where})" if r.where else ""
        lines.append(f"  {r.kind}: {spec.metric_spec(r.task, r.metric).title}{where}: {r.detail}")
    if not v.inverted.empty:
        lines.append("\nInverted (aggregations declared lower = more uncertain, significantly below chance: not flips):")
        lines += [f"  {spec.metric_spec(r.task, r.metric).title} ({r.where}): {r.detail}" for r in v.inverted.itertuples()]
    if not v.chance.empty:
        lines.append(f"  (below chance: {len(v.chance)} methods on the wrong side of chance tested, two-sided "
                     f"bootstrap of value − chance, {CORRECTION[v.chance['correction'].iloc[0]]} over "
                     f"{int(v.chance['family_size'].iloc[0])}; {int(v.chance['significant'].sum())} significant)")
    return "\n".join(lines)


def files(run_dir, suffix: str = "") -> list[Path]:
    """The files :func:`write` writes: ``RUN_DIR/comparisons/aggregation_verdict<suffix>.csv`` (mean
    ranks), ``..._winners`` and ``..._flips``."""
    from values_seg.storage.run_files import COMPARISONS

    folder = Path(run_dir) / COMPARISONS
    return [folder / f"aggregation_verdict{suffix}{part}.csv" for part in ("", "_winners", "_flips")]


def write(v: Verdict, run_dir, suffix: str = ""):
    """The mean ranks, winners and flips (:func:`files`); returns the first path."""
    from values_seg.storage.run_directory import write_owned

    paths = files(run_dir, suffix)
    for frame, path in zip((v.ranks, v.winners, v.flips), paths):
        write_owned(run_dir, path, lambda tmp, frame=frame: frame.to_csv(tmp, index=False))
    return paths[0]
