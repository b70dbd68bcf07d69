"""Markdown helpers: pipe tables and figure blocks with captions."""

from __future__ import annotations

import re


def _cell(value) -> str:
    text = "" if value is None else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


#: the alignment marks of a key column (one that tells the rows apart; :func:`table`'s ``keys``):
#: four dashes, the other columns' marks fewer
KEY_MARKS = {"l": ":----", "c": ":----:", "r": "----:"}


def table(headers: list[str], rows: list[list], align: list[str] | None = None, keys: int | None = None) -> str:
    """A GitHub pipe table; ``align`` per column: "l", "c" or "r" (default: left). ``keys``: the
    number of leading columns that tell the rows apart; every table :func:`split_table` splits it into
    repeats them (their alignment marks say so, :data:`KEY_MARKS`). Without ``keys`` the split
    guesses them: the leading left-aligned columns."""
    align = align or ["l"] * len(headers)
    if keys is not None and not 1 <= keys <= len(headers):
        raise ValueError(f"markdown table: keys must lie in [1, {len(headers)}], got {keys!r}")
    marks = {"l": ":--", "c": ":-:", "r": "--:"}
    lines = [
        "| " + " | ".join(_cell(h) for h in headers) + " |",
        "| " + " | ".join(KEY_MARKS.get(a, "----") if keys is not None and i < keys else marks.get(a, "---")
                          for i, a in enumerate(align)) + " |",
    ]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def figure(path: str, alt: str, caption: str) -> str:
    """An embedded image and its one-line caption."""
    return f"![{alt}]({path})\n\n*{caption}*"


#: The widest line of ``report.md`` outside code blocks: readable in a terminal, an editor, a diff.
WIDTH = 100

_FENCE = ("```", "~~~")
#: a line that starts like this would begin a new block (list, heading, quote, table, setext
#: underline, ordered list) instead of continuing a wrapped paragraph
_BLOCK_START = re.compile(r"^([-+*#>|=]|\d+[.)](\s|$))")


def fit(text: str, width: int = WIDTH) -> str:
    """``text`` (Markdown) with every line outside code blocks at most ``width`` characters where
    it can be: wide pipe tables split into tables of fewer columns that repeat the row labels
    (:func:`split_table`), long paragraphs, list items and captions wrapped at spaces (CommonMark
    joins the lines again). Only a word (or a code span: a command, a path) longer than ``width``
    stays longer."""
    out: list[str] = []
    lines = text.split("\n")
    i, fenced = 0, False
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith(_FENCE):
            fenced = not fenced
        if fenced or line.lstrip().startswith(_FENCE):
            out.append(line)
            i += 1
        elif line.startswith("|"):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            out += split_table(lines[i:j], width)
            i = j
        else:
            out += _wrap(line, width)
            i += 1
    return "\n".join(out)


def _wrap(line: str, width: int) -> list[str]:
    if len(line) <= width or line.startswith("#") or not line.strip():
        return [line]
    lead = re.match(r"^(\s*(?:[-*+]|\d+[.)])\s+|\s*)", line).group(1)
    indent = " " * len(lead)
    words: list[str] = []  # a code span is one word: a command or a path stays on one line, to copy
    for word in line[len(lead):].split(" "):
        if words and words[-1].count("`") % 2:
            words[-1] += " " + word
        else:
            words.append(word)
    lines, current = [], [words[0]]
    for word in words[1:]:
        if word and len(lead) + len(" ".join(current + [word])) > width:
            # a line must not begin like a block: break before the word before, where that is free
            at = next((k for k in range(len(current) - 1, 0, -1) if not _BLOCK_START.match(current[k])), None) \
                if _BLOCK_START.match(word) else len(current)
            if at:
                lines.append(current[:at])
                current = current[at:]
        current.append(word)
    lines.append(current)
    return [(lead if k == 0 else indent) + " ".join(ws) for k, ws in enumerate(lines)]


def _cells(row: str) -> list[str]:
    """The cells of a pipe-table row (escaped pipes ``\\|`` stay in their cell)."""
    cells = re.split(r"(?<!\\)\|", row.strip())
    return [c.strip() for c in cells[1:-1]]


def _row(cells: list[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def split_table(rows: list[str], width: int = WIDTH) -> list[str]:
    """A pipe table (header, alignment row, body) as it is when its lines fit in ``width``; else as
    several tables, each with the row labels (the key columns :func:`table` declared, else the leading
    left-aligned columns) and as many of the
    other columns as fit, in order, keeping the columns of one setting together (headers that share
    the text before ": ", e.g. a scenario's or a task's); where even one column does not fit beside the labels, one
    list item per row (its labels, then each column's header and value)."""
    if max(map(len, rows)) <= width or len(rows) < 2:
        return rows
    table = [_cells(r) for r in rows]
    header, marks, body = table[0], table[1], table[2:]
    n = len(header)
    body = [r + [""] * (n - len(r)) for r in body]
    keys = 0
    if any(m.count("-") >= 4 for m in marks):  # declared (:func:`table`'s ``keys``)
        while keys < n - 1 and marks[keys].count("-") >= 4:
            keys += 1
    else:  # guessed: the leading left-aligned columns
        while keys < n - 1 and marks[keys].startswith(":") and not marks[keys].endswith(":"):
            keys += 1
    keys = min(max(keys, 1), n - 1)

    def span(columns: list[int]) -> int:
        return max(len(_row([t[c] for c in columns])) for t in [header, marks, *body])

    groups: list[list[int]] = []  # columns of one setting ("Toy 2: paper", "Toy 2: run") stay together
    for c in range(keys, n):
        prefix = header[c].split(": ")[0] if ": " in header[c] else None
        if groups and prefix is not None and header[groups[-1][-1]].split(": ")[0] == prefix:
            groups[-1].append(c)
        else:
            groups.append([c])
    chunks, current = [], []
    for group in groups:
        if current and span([*range(keys), *current, *group]) > width:
            chunks.append(current)
            current = []
        for c in group:  # a group wider than a table on its own: split it as single columns
            if current and span([*range(keys), *current, c]) > width:
                chunks.append(current)
                current = []
            current.append(c)
    chunks.append(current)
    if all(span([*range(keys), *chunk]) <= width for chunk in chunks):
        out: list[str] = []
        for m, chunk in enumerate(chunks):
            columns = [*range(keys), *chunk]
            out += ([""] if m else []) + [_row([t[c] for c in columns]) for t in [header, marks, *body]]
        return out
    out = []
    for r in body:
        label = " · ".join(v for v in r[:keys] if v) or "–"
        label = label if label.startswith("**") else f"**{label}**"
        out += _wrap(f"- {label}: " + "; ".join(f"{header[c]}: {r[c]}" if header[c] else r[c] for c in range(keys, n) if r[c]), width)
    return out
