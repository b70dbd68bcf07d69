"""``report.html``: the report as one self-contained page people can explore.

Made from the same blocks as ``report.md`` (:mod:`values_seg.report.rich`), with every script, style and
figure embedded, and kept like a figure when nothing it is made from changed (docs/design-rationale.md,
"The HTML page").
"""

from __future__ import annotations

import base64
import hashlib
import html
import re
from concurrent.futures import Future
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

from values_seg.storage import run_directory
from values_seg.storage.run_files import REPORT_HTML
from values_seg.report.page_template import TEMPLATE
from values_seg.report.rich import Block, RichTable

#: Tables with more rows than this page through them (the rest: every row at once).
PAGE_ROWS = 50


@lru_cache(maxsize=1)
def _markdown():
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    md.add_render_rule("image", _image_rule)
    return md


def _image_rule(renderer, tokens, idx, options, env) -> str:
    """An image of the report: a figure of the run directory is embedded (:meth:`_Page._image`)."""
    alt = renderer.renderInlineAsText(tokens[idx].children or [], options, env)
    return env["page"]._image(tokens[idx].attrGet("src") or "", alt)


def _versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in ("itables", "markdown-it-py", "Jinja2")}


def submit(renderer, run_dir: Path, title: str, lines: list[str]) -> Future:
    """Queue ``report.html`` of ``lines`` (the report's blocks, head included) on ``renderer``;
    a future of its path. Its key: the blocks, the embedded figures, the template, the versions
    of the libraries and this module's code."""
    out = run_dir / REPORT_HTML
    figures = sorted({run_dir / src for src in _image_sources("\n".join(lines)) if (run_dir / src).is_file()})
    versions = {**_versions(), "template": hashlib.sha256(TEMPLATE.encode()).hexdigest()}
    return renderer.submit(write_page, out, run_dir, out, title, lines, versions, inputs=figures)


def _image_sources(text: str) -> list[str]:
    return re.findall(r"!\[[^\]]*\]\(([^)\s]+)\)", text)


def write_page(run_dir: Path, out: Path, title: str, lines: list[str], versions: dict | None = None) -> Path:
    """Write the page of the report ``lines`` to ``out`` (atomically); returns ``out``."""
    import jinja2
    import markupsafe

    page = _Page(Path(run_dir))
    body = page.body(lines)
    env = jinja2.Environment(autoescape=True)
    text = env.from_string(TEMPLATE).render(
        title=title, body=markupsafe.Markup(body), toc=page.toc, datatables=markupsafe.Markup(_datatables_init()),
        versions={k: v for k, v in (versions or {}).items() if k != "template"})
    run_directory.write_owned(run_dir, out, text)
    return out


@lru_cache(maxsize=1)
def _datatables_init() -> str:
    """DataTables (itables' bundle, with its style), embedded once per page."""
    from itables import options
    from itables.javascript import generate_init_offline_itables_html

    return generate_init_offline_itables_html(options.dt_bundle)


class _Page:
    """The HTML of the report's blocks: Markdown converted, rich tables and galleries built."""

    def __init__(self, run_dir: Path):
        self.run_dir = run_dir
        self.toc: list[dict] = []  # the ## and ### headings: {"level", "id", "text"}
        self._ids: set[str] = set()
        self._tables = 0

    def body(self, lines: list[str]) -> str:
        parts, pending, gallery = [], [], None
        for item in [*lines, None]:
            rich = isinstance(item, Block) and (item.table is not None or item.gallery)
            if item is not None and not rich:
                pending.append(item)
                continue
            if pending and any(p.strip() for p in pending):
                if gallery is not None:
                    parts.append("</div>")
                    gallery = None
                parts.append(self.markdown("\n".join(pending)))
            pending = []
            if item is None:
                break
            if item.table is not None:
                if gallery is not None:
                    parts.append("</div>")
                    gallery = None
                parts.append(self.markdown(str(item)) if item.table.frame.empty else self.rich_table(item.table))
                continue
            if gallery != item.gallery:
                parts.append(("</div>" if gallery is not None else "") + '<div class="gallery">')
                gallery = item.gallery
            parts.append(f'<div class="card">{self.markdown(str(item))}</div>')
        if gallery is not None:
            parts.append("</div>")
        return "\n".join(parts)

    # ------------------------------------------------------------------------------- Markdown
    def markdown(self, text: str) -> str:
        md = _markdown()
        tokens = md.parse(text)
        env: dict = {}
        out, start, i = [], 0, 0
        while i < len(tokens):
            tok = tokens[i]
            if tok.type == "heading_open" and tok.tag in ("h2", "h3"):
                inline = tokens[i + 1]
                anchor = self._anchor(inline.content)
                tok.attrSet("id", anchor)
                self.toc.append({"level": int(tok.tag[1]), "id": anchor, "text": _plain(inline.content)})
            if tok.type == "table_open":
                end = next(j for j in range(i, len(tokens)) if tokens[j].type == "table_close")
                out.append(self._render(tokens[start:i], env))
                out.append(self.markdown_table(tokens[i:end + 1], env))
                start = i = end + 1
                continue
            i += 1
        out.append(self._render(tokens[start:], env))
        return "".join(out)

    def _render(self, tokens, env) -> str:
        md = _markdown()
        return md.renderer.render(tokens, md.options, {**env, "page": self})

    def _inline(self, children, env) -> str:
        md = _markdown()
        return md.renderer.renderInline(children, md.options, {**env, "page": self})

    def _image(self, src: str, alt: str) -> str:
        """An ``<img>`` of the report: a PNG of the run directory as base64 (else its link, as given)."""
        path = (self.run_dir / src).resolve()
        inside = path.is_relative_to(self.run_dir.resolve())
        if inside and path.is_file() and path.suffix.lower() == ".png":
            src = "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")
        return (f'<img class="figure" src="{html.escape(src, quote=True)}" alt="{html.escape(alt, quote=True)}" '
                f'title="click: full size">')

    def _anchor(self, text: str) -> str:
        base = re.sub(r"[^a-z0-9]+", "-", _plain(text).lower()).strip("-") or "section"
        anchor, k = base, 1
        while anchor in self._ids:
            k += 1
            anchor = f"{base}-{k}"
        self._ids.add(anchor)
        return anchor

    # ------------------------------------------------------------------------------- tables
    def markdown_table(self, tokens, env) -> str:
        """A Markdown table (any section's) as an interactive table: sort, search."""
        header, rows, row = [], [], None
        in_head = False
        for tok in tokens:
            if tok.type == "thead_open":
                in_head = True
            elif tok.type == "thead_close":
                in_head = False
            elif tok.type == "tr_open":
                row = []
            elif tok.type == "tr_close":
                (header.extend(row) if in_head else rows.append(row))
            elif tok.type == "inline" and row is not None:
                row.append(self._inline(tok.children or [], env))
        columns = _unique(header)
        frame = pd.DataFrame([r + [""] * (len(columns) - len(r)) for r in rows], columns=columns)
        small = {"layout": {"topEnd": None, "bottomStart": None}} if len(frame) < 10 else {}
        return self._datatable(frame, allow_html=True, **small)

    def rich_table(self, table: RichTable) -> str:
        """A :class:`RichTable`: a filter per label column (with more than one value), sorting by
        any metric (best first), each value with its interval as a bar (the numbers on hover), and
        buttons that show the metric columns of one group (task) alone."""
        frame = table.frame[[*table.labels, *(m.column for m in table.metrics)]].copy()
        n_labels = len(table.labels)
        defs = []
        for j, m in enumerate(table.metrics, start=n_labels):
            lo, hi = _extent(frame[m.column])
            defs.append({"targets": j, "className": "dt-right",  # the first click on a header: best first
                         "orderSequence": ["desc", "asc"] if m.direction == "higher" else ["asc", "desc"],
                         "render": _js_function(f"function(d, t, r, meta) {{ return vsCell(d, t, {lo!r}, {hi!r}, meta); }}")})
            frame[m.column] = [_cell(v) for v in frame[m.column]]
        filters = [j for j, c in enumerate(table.labels) if frame[c].nunique() > 1]
        options: dict = {"columnDefs": defs, "layout": {"topStart": None, "topEnd": "search"}}
        if filters:
            options["layout"]["top1"] = "searchPanes"
            options["searchPanes"] = {"columns": filters, "threshold": 1, "cascadePanes": True, "viewTotal": True,
                                      "controls": False, "layout": f"columns-{min(len(filters), 6)}"}
        groups = list(dict.fromkeys(m.group for m in table.metrics if m.group))
        if len(groups) > 1:
            metric_cols = list(range(n_labels, n_labels + len(table.metrics)))
            buttons = [{"extend": "colvisGroup", "text": "All tasks", "show": metric_cols}]
            for g in groups:
                mine = [j for j, m in enumerate(table.metrics, start=n_labels) if m.group == g]
                buttons.append({"extend": "colvisGroup", "text": g, "show": mine,
                                "hide": [j for j in metric_cols if j not in mine]})
            options["layout"]["topStart"] = "buttons"
            options["buttons"] = buttons
            # first the first task's columns (every task's side by side is wider than a 1280-px window)
            defs.append({"targets": buttons[1]["hide"], "visible": False})
        return self._datatable(frame, caption=table.caption or None, **options)

    def _datatable(self, frame: pd.DataFrame, **options) -> str:
        from itables import to_html_datatable

        self._tables += 1
        many = len(frame) > PAGE_ROWS
        return to_html_datatable(
            frame, table_id=f"table-{self._tables}", connected=False, maxBytes=0, showIndex=False,
            paging=many, **({"pageLength": PAGE_ROWS, "lengthMenu": [PAGE_ROWS, 100, 500]} if many else {}),
            scrollX=True, classes="display compact cell-border", text_in_header_can_be_selected=False, **options)


def _js_function(code: str):
    from itables.typing import JavascriptFunction

    return JavascriptFunction(code)


def _cell(value) -> str:
    """A metric cell as the page's script reads it (``vsCell`` in the template):
    "value;low;high;mark;std;note" (a number or nothing each; ``note``: why the data cannot support
    the value, shown on hover), "" where empty."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    v, low, high, flag, sd, note = (list(value) + [None] * 6)[:6]
    if _num(v) is None:
        return ""
    note = str(note or "").translate(_NOTE_SAFE)  # no ";" (the separator) and nothing HTML reads
    return ";".join("" if x is None else repr(x) for x in (_num(v), _num(low), _num(high))) + \
        f";{flag or ''};" + ("" if _num(sd) is None else repr(_num(sd))) + f";{note}"


_NOTE_SAFE = str.maketrans({";": ",", '"': "'", "<": "‹", ">": "›", "&": "+"})


def _num(x):
    return float(x) if x is not None and np.isfinite(x) else None


def _extent(cells: pd.Series) -> tuple[float, float]:
    """The range a column's bars span: its lowest and highest value or interval bound."""
    values = [x for c in cells if c is not None and not (isinstance(c, float) and np.isnan(c))
              for x in list(c)[:3] if x is not None and np.isfinite(x)]
    if not values:
        return 0.0, 1.0
    lo, hi = float(min(values)), float(max(values))
    return (lo, hi) if hi > lo else (lo - 1.0, hi + 1.0)


def _plain(text: str) -> str:
    """Inline Markdown as plain text (headings in the table of contents)."""
    return re.sub(r"[*_`]", "", text).strip()


def _unique(names: list[str]) -> list[str]:
    """Column names made unique (DataFrame columns of a Markdown table with repeated headers)."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        seen[n] = seen.get(n, 0) + 1
        out.append(n if seen[n] == 1 else (f"{n} ({seen[n]})" if n.strip() else " " * seen[n]))
    return out


__all__ = ["submit", "write_page"]
