"""report.md fits in 100 columns: wide tables split (row labels repeated), long text wrapped,
and the Markdown means what it meant (checked by rendering both with markdown-it, CommonMark)."""

import re

import pytest
from markdown_it import MarkdownIt

from values_seg.report.markdown import WIDTH, fit, table

MD = MarkdownIt("commonmark").enable("table")


def _same(html: str) -> str:
    """HTML with each run of white space as one space (a soft line break shows as a space)."""
    return re.sub(r"\s+", " ", html)


def _outside_code(text: str) -> list[str]:
    lines, fenced = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def _tables(text: str) -> list[list[list[str]]]:
    """Every pipe table of ``text`` as rows of cells, read by markdown-it (header row first)."""
    tokens, tables, rows, row = MD.parse(text), [], None, None
    for tok in tokens:
        if tok.type == "table_open":
            rows = []
        elif tok.type == "tr_open":
            row = []
        elif tok.type == "inline" and row is not None:
            row.append(tok.content)
        elif tok.type == "tr_close":
            rows.append(row)
            row = None
        elif tok.type == "table_close":
            tables.append(rows)
    return tables


def _wide_table(n_rows=6, n_metrics=12):
    headers = ["Scenario", "PM", "UM", "AGG"] + [f"Metric {k} i.i.d. ↑" for k in range(n_metrics)]
    rows = [[f"toy_{r}", "Ensemble", "MI", "Patch"] + [f"{r}{k}.25 [{k}.10, {r}9.75]" for k in range(n_metrics)]
            for r in range(n_rows)]
    return headers, rows, table(headers, rows, align=["l"] * 4 + ["r"] * n_metrics)


def test_a_wide_table_splits_into_tables_that_fit_and_repeat_the_row_labels():
    headers, rows, wide = _wide_table()
    assert max(map(len, wide.splitlines())) > WIDTH
    out = fit(wide)
    assert max(map(len, out.splitlines())) <= WIDTH
    parts = _tables(out)
    assert len(parts) >= 2
    # put the full table together again from the parts: the labels agree, every column once, in order
    full = [list(r) for r in parts[0]]
    for part in parts[1:]:
        assert [r[:4] for r in part] == [r[:4] for r in full]
        for r, extra in zip(full, part):
            r += extra[4:]
    assert full == [headers, *rows]


def test_a_table_whose_columns_cannot_fit_becomes_one_item_per_row_with_every_value():
    headers = ["Task", "Scenario", "Best method", "Value", "Runner-up"]
    rows = [["Failure Detection (i.i.d.)", f"toy_{k}", "TTA · EE (AU) · Patch", "36.58 [35.44, 38.86]",
             "TTA · PE (PU) · Patch: 36.63 (not clearly worse: p = 0.994) " + "and more words " * 4] for k in range(3)]
    out = fit(table(headers, rows, align=["l", "l", "l", "r", "l"]))
    assert max(map(len, out.splitlines())) <= WIDTH
    items = [" ".join(li.split()) for li in re.split(r"\n(?=- )", out)]
    assert len(items) == 3
    for item, row in zip(items, rows):
        assert item.startswith(f"- **{row[0]} · {row[1]} · {row[2]}**")
        assert f"Value: {row[3]}" in item and " ".join(row[4].split()) in item


def test_a_table_that_fits_is_left_as_it_is():
    small = table(["a", "b"], [["1", "2"]])
    assert fit(small) == small


@pytest.mark.parametrize("text", [
    "A paragraph " + "with many words and `inline code` and **bold text** " * 6 + "- not a list - + 1. 2) # # > | =",
    "- a list item " + "that goes on and on " * 10 + "\n- a second item",
    "*A caption in italics " + "that is far too long for one line " * 5 + "*",
    "**Notes**\n\n1. an ordered item " + "with more words " * 12,
])
def test_long_text_is_wrapped_and_renders_the_same(text):
    out = fit(text)
    assert max(map(len, out.splitlines())) <= WIDTH
    assert _same(MD.render(out)) == _same(MD.render(text))


def test_code_blocks_and_headings_are_left_as_they_are():
    long = "x = " + " + ".join(["value"] * 30)
    heading = "## " + "A long heading " * 8
    text = f"```python\n{long}\n```\n\n{heading}\n"
    assert fit(text) == text


def test_every_line_of_a_built_report_fits(built_report):
    lines = _outside_code(built_report.read_text())
    # over the width only where a code span (a command, a path: kept whole to copy) is that long
    wide = [line for line in lines if len(line) > WIDTH and " " in line.strip()
            and max(map(len, re.findall(r"`[^`]*`", line)), default=0) < WIDTH // 2]
    assert not wide, wide[:3]


def test_a_code_span_is_never_broken():
    command = "`values-seg report /a/rather/long/path/to/the/runs/of/this/experiment/with/many/folders`"
    out = fit(f"Run directory: `/a/path`. Rebuild with {command} and read the report again afterwards.")
    assert command in out.splitlines() or any(command in line for line in out.splitlines())


def test_the_page_keeps_the_full_tables(built_report):
    """report.html is made from the unsplit blocks: a table split in report.md is whole there."""
    page = (built_report.parent / "report.html").read_text()
    widest_on_page = max(head.count("<th") for head in re.findall(r"<thead>(.*?)</thead>", page, re.S))
    widest_in_md = max(len(t[0]) for t in _tables(built_report.read_text()))
    assert widest_on_page > widest_in_md, (widest_on_page, widest_in_md)


def test_the_columns_of_one_setting_stay_in_one_table():
    headers = ["PM", "UM"] + [f"Toy {k}: {w}" for k in range(4) for w in ("paper", "run", "Δ")]
    rows = [["Ensemble", "MI"] + ["0.95", "0.62 ± 0.07", "-0.33"] * 4 for _ in range(3)]
    parts = _tables(fit(table(headers, rows, align=["l", "l"] + ["r"] * 12)))
    assert len(parts) >= 2
    for part in parts:
        settings = [h.split(": ")[0] for h in part[0][2:]]
        assert all(settings.count(s) == 3 for s in settings), part[0]


def test_a_split_table_repeats_every_declared_key_column():
    """Key columns need not be left-aligned (a lesion table's per-model F1, a rank): declared, each
    continuation table repeats all of them, and its rows stay distinct."""
    headers = ["prediction model", "lesion F1", "measure", "lesion aggregation"] + [f"F1-AUC {k}" for k in range(8)]
    rows = [[model, "0.612 [0.501, 0.702]", measure, aggregation] + [f"0.45{k} [0.35{k}, 0.55{k}]" for k in range(8)]
            for model in ("Ensemble", "SSN") for measure in ("PE", "MI") for aggregation in ("lesion_mean", "lesion_max")]
    out = fit(table(headers, rows, align=["l", "r", "l", "l"] + ["r"] * 8, keys=4))
    parts = _tables(out)
    assert len(parts) >= 2 and max(map(len, out.splitlines())) <= WIDTH
    for part in parts:
        assert part[0][:4] == headers[:4]
        assert len({tuple(r) for r in part[1:]}) == len(rows)
    with pytest.raises(ValueError, match="keys must lie in"):
        table(headers, rows, keys=0)


def test_a_table_split_into_items_names_each_item_by_its_keys_and_every_column_by_its_header():
    """The separation summary: one key (the question), each scenario a column, cells left-aligned."""
    headers = ["Question"] + [f"toy_{k}" for k in range(4)]
    rows = [[f"Q{q}: Do AU-measures capture AU? (expected yes)"] + [f"undecided ? ({k}/4 yes, 2 undecided) " * 2
                                                                     for k in range(4)] for q in range(1, 5)]
    out = fit(table(headers, rows, keys=1))
    items = [" ".join(li.split()) for li in re.split(r"\n(?=- )", out)]
    assert len(items) == 4
    for item, row in zip(items, rows):
        assert item.startswith(f"- **{row[0]}**: ")
        assert all(f"toy_{k}: {' '.join(row[1 + k].split())}" in item for k in range(4))


def _report_tables(text: str) -> list[tuple[str, list[list[str]]]]:
    """Each pipe table of report.md with the heading it is under."""
    out, heading, lines = [], "", text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("#"):
            heading = lines[i]
        if lines[i].startswith("|"):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            out.append((heading, _tables("\n".join(lines[i:j]))[0]))
            i = j
        else:
            i += 1
    return out


def test_every_table_of_a_built_report_has_distinct_rows(built_report):
    found = _report_tables(built_report.read_text())
    assert len(found) > 10
    for heading, rows in found:
        body = [tuple(r) for r in rows[1:]]
        assert len(set(body)) == len(body), (heading, rows[0])
