"""report.html beside report.md: the same sections, self-contained, the downstream numbers as in
results.csv, kept when nothing changed (the browser's view: test_page_browser.py)."""

from __future__ import annotations

import re
import shutil
from html.parser import HTMLParser

import numpy as np
import pandas as pd
import pytest

from values_seg.storage import run_directory
from values_seg.report import build_report, load_run
from values_seg.report.page import _cell
from values_seg.report.rich import Block, Metric, RichTable
from values_seg.report.tables import downstream_tables, rich_table
from values_seg.storage.run_files import REPORT_HTML
from values_seg.storage.user_files import UserFileKept


class _Tags(HTMLParser):
    """Every start tag with its attributes, and the text of the h2 headings."""

    def __init__(self):
        super().__init__()
        self.tags, self.h2, self._in_h2 = [], [], False

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_h2 = tag == "h2"
        if self._in_h2:
            self.h2.append("")

    def handle_endtag(self, tag):
        self._in_h2 = self._in_h2 and tag != "h2"

    def handle_data(self, data):
        if self._in_h2:
            self.h2[-1] += data


def _parse(path) -> _Tags:
    tags = _Tags()
    tags.feed(path.read_text(encoding="utf-8"))
    return tags


def test_the_page_has_every_section_and_embeds_everything(built_report):
    run = built_report.parent
    page = run / REPORT_HTML
    assert run_directory.intact(run, page)  # recorded in run.json like every file values-seg writes
    tags = _parse(page)
    markdown = built_report.read_text(encoding="utf-8")
    assert tags.h2 == re.findall(r"^## (.+)$", markdown, flags=re.M)  # the same sections, in order
    # nothing is fetched: no script, style or image from elsewhere; every figure embedded as PNG
    assert not [a for t, a in tags.tags if t in ("script", "link", "iframe") and (a.get("src") or a.get("href"))]
    images = [a["src"] for t, a in tags.tags if t == "img" and "figure" in a.get("class", "")]
    assert len(images) == markdown.count("![") and all(s.startswith("data:image/png;base64,") for s in images)
    montages = [s for t, a in tags.tags if t == "img" and (s := a.get("alt", "")).startswith("uncertainty maps")]
    assert len(montages) == 1 and ('div', {'class': 'gallery'}) in tags.tags
    # the downstream tables are one interactive table with filters (the other tables interactive too)
    text = page.read_text(encoding="utf-8")
    assert text.count('"top1": "searchPanes"') == 1 and text.count("<table id=\"table-") >= 5


def _reference_cell(results: pd.DataFrame, scenario, model, measure, aggregation, metric, split) -> float:
    rows = results[(results["scenario"] == scenario) & (results["prediction_model"] == model)
                   & (results["measure"] == measure) & (results["aggregation"] == aggregation)
                   & (results["metric"] == metric) & (results["split"] == split)]
    assert len(rows) == 2  # one per seed
    return 100 * rows["value"].mean()


def test_the_rich_table_holds_the_numbers_of_results_csv(stats_run):
    run = load_run(stats_run)
    table = rich_table(downstream_tables(run.results, run.spec, run.distributions))
    results = pd.read_csv(stats_run / "results.csv")
    frame = table.frame
    assert table.labels == ("Scenario", "PM", "UM", "UT", "AGG")  # one data set, one backbone
    assert len(frame) == 24 and set(frame["Scenario"]) == {"toy_1", "toy_3b"}
    row = frame[(frame["Scenario"] == "toy_3b") & (frame["PM"] == "TTD") & (frame["UM"] == "MI")
                & (frame["AGG"] == "Patch")].iloc[0]
    value, low, high, mark, std, note = row["AUROC ↑"]
    assert value == pytest.approx(_reference_cell(results, "toy_3b", "test_time_dropout", "mutual_information",
                                                  "patch", "auroc", "all"), abs=1e-9)
    assert low < value < high and mark == "" and note == ""
    auroc = next(m for m in table.metrics if m.column == "AUROC ↑")
    assert auroc == Metric("AUROC ↑", "OoD-D", "higher")
    # toy_1 has no OoD data: its AUROC cells are empty, not zero
    assert frame.loc[frame["Scenario"] == "toy_1", "AUROC ↑"].isna().all()
    # a cell as the page's script reads it: value;low;high;mark;std;note (no ";" or HTML in the note)
    assert _cell([81.5, 80.0, 83.25, "✓", np.nan]) == "81.5;80.0;83.25;✓;;"
    assert _cell([50.0, 50.0, 50.0, "⚠", np.nan, 'a; b "<c>"']) == "50.0;50.0;50.0;⚠;;a, b '‹c›'"
    assert _cell(None) == "" and _cell([np.nan, 1.0, 2.0, "", 0.1]) == ""


def test_a_rich_table_refuses_columns_it_does_not_have():
    with pytest.raises(ValueError, match=r"\['AUROC'\]"):
        RichTable(pd.DataFrame({"PM": ["a"]}), ("PM",), (Metric("AUROC"),))


def test_a_block_is_its_markdown_and_keeps_its_data_through_pickle():
    import pickle

    table = RichTable(pd.DataFrame({"PM": ["a"], "m": [[1.0, None, None, "", None]]}), ("PM",), (Metric("m"),))
    block = Block("| PM |\n| -- |\n| a |", table=table)
    again = pickle.loads(pickle.dumps(block, protocol=4))
    assert again == "| PM |\n| -- |\n| a |" and again.table.frame.equals(table.frame) and again.gallery is None


def test_the_page_is_kept_when_nothing_changed_and_written_when_something_did(synthetic_run, tmp_path):
    run = shutil.copytree(synthetic_run, tmp_path / "run")
    results = pd.read_csv(run / "results.csv")  # one scenario: fewer figures, faster
    results = results[results["scenario"] == "toy_1"]
    results.to_csv(run / "results.csv", index=False)
    results.to_parquet(run / "results.parquet", index=False)
    build_report(run)
    page = run / REPORT_HTML
    first = page.stat().st_mtime_ns, page.read_bytes()
    build_report(run)
    assert (page.stat().st_mtime_ns, page.read_bytes()) == first  # not written again
    page.write_text("edited")  # a page that is no longer what values-seg wrote is kept aside and written again
    with pytest.warns(UserFileKept, match="report.html"):
        build_report(run)
    assert (run / "report.user-1.html").read_text() == "edited"
    assert page.read_bytes() == first[1]
    results.loc[results["metric"] == "dice", "value"] += 0.01  # new numbers: a new page
    results.to_csv(run / "results.csv", index=False)
    results.to_parquet(run / "results.parquet", index=False)
    build_report(run)
    assert page.read_bytes() != first[1] and run_directory.intact(run, page)
