"""Blocks of the report that carry their data for the HTML report (``report.html``).

A :class:`Block` is a Markdown block (a ``str``) that also carries what the page shows in its place: a
:class:`RichTable` or a gallery (docs/design-rationale.md, "The HTML page").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd


@dataclass(frozen=True)
class Metric:
    """One metric column of a :class:`RichTable`: ``column`` of the frame holds per row ``None``
    (empty cell) or ``[value, low, high, flag, std, note]`` (× 100 as in the Markdown tables;
    ``low``/``high`` ``None`` without an interval; ``flag``: marks shown beside the value, e.g. "✓",
    "⚠", or ""; ``std`` and ``note``, why the data cannot support the value, optional)."""

    column: str
    group: str = ""  # e.g. the task's label: the page can show the columns of one group alone
    direction: str = ""  # "higher" | "lower" | "" (better)


@dataclass
class RichTable:
    """An interactive table: ``labels`` (columns of text, each a filter), then ``metrics``."""

    frame: pd.DataFrame
    labels: tuple[str, ...]
    metrics: tuple[Metric, ...]
    caption: str = ""
    notes: dict[str, str] = field(default_factory=dict)  # column -> tooltip of its header

    def __post_init__(self):
        known = set(self.labels) | {m.column for m in self.metrics}
        missing = known - set(self.frame.columns)
        if missing:
            raise ValueError(f"rich table: columns {sorted(missing)} are declared but not in the frame")


class Block(str):
    """A Markdown block of the report with what ``report.html`` shows instead: ``table`` (a
    :class:`RichTable`) or ``gallery`` (the name of the gallery the block's figures join)."""

    table: RichTable | None
    gallery: str | None

    def __new__(cls, markdown: str, *, table: RichTable | None = None, gallery: str | None = None):
        self = super().__new__(cls, markdown)
        self.table, self.gallery = table, gallery
        return self

    def __reduce__(self):  # pickled with its data (figure keys, worker processes)
        return _block, (str(self), self.table, self.gallery)


def _block(markdown: str, table: RichTable | None, gallery: str | None) -> Block:
    return Block(markdown, table=table, gallery=gallery)


__all__ = ["Block", "Metric", "RichTable"]
