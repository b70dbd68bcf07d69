"""LaTeX export: booktabs ``tabular`` environments (``\\usepackage{booktabs}``; no float wrapper,
so a paper can ``\\input`` them into its own ``table``)."""

from __future__ import annotations

import re

_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "±": r"$\pm$",
    "↑": r"$\uparrow$",
    "↓": r"$\downarrow$",
    "Δ": r"$\Delta$",
    "−": "--",
    "–": "--",
    "≥": r"$\geq$",
    "≤": r"$\leq$",
    "✓": r"\checkmark{}",
    "⚠": r"$^{\dagger}$",
    "✗": r"$\times$",
    "×": r"$\times$",
    ">": r"$>$",
    "<": r"$<$",
}

_NUM = r"-?\d+(?:\.\d+)?"
_NUMBER = re.compile(rf"^({_NUM})(?: ± ({_NUM}))?(?: \[({_NUM}), ({_NUM})\])?( ✓)?( ⚠)?$")


def escape(text) -> str:
    """Escape LaTeX specials and map the few symbols the report uses to math mode; a number,
    "mean ± std" or "value [low, high]" cell (optionally marked ✓) becomes one math expression
    (so minus signs are set as minus)."""
    text = "" if text is None else str(text)
    number = _NUMBER.match(text.strip())
    if number:
        mean, std, low, high, mark, unsupported = number.groups()
        math = mean + (f" \\pm {std}" if std else "") + (f"\\,[{low}, {high}]" if low is not None else "")
        return f"${math}$" + (r"\checkmark{}" if mark else "") + (r"$^{\dagger}$" if unsupported else "")
    return "".join(_SPECIAL.get(ch, ch) for ch in text)


def tabular(headers: list[str], rows: list[list], *, groups: list[tuple[str, int]] | None = None,
            align: str | None = None, blank_repeats: int = 0, comment: str = "") -> str:
    """A booktabs tabular.

    ``groups``: (title, span) pairs over all columns for a header line above ``headers`` (an
    empty title leaves those columns without a group; titled groups get a ``\\cmidrule``).
    ``blank_repeats``: the first k columns show a value only where it differs from the row above
    (or a column to its left changed), as the paper prints its row labels.
    """
    n = len(headers)
    align = align or "l" * n
    lines = []
    if comment:
        lines += [f"% {line}" for line in comment.splitlines()]
    lines += [f"\\begin{{tabular}}{{{align}}}", r"\toprule"]
    if groups:
        cells, rules, col = [], [], 1
        for title, span in groups:
            if title:
                cells.append(f"\\multicolumn{{{span}}}{{c}}{{{escape(title)}}}" if span > 1 else escape(title))
                rules.append(f"\\cmidrule(lr){{{col}-{col + span - 1}}}")
            else:
                cells += [""] * span
            col += span
        lines.append(" & ".join(cells) + r" \\")
        if rules:
            lines.append(" ".join(rules))
    lines.append(" & ".join(escape(h) for h in headers) + r" \\")
    lines.append(r"\midrule")
    previous: list | None = None
    for row in rows:
        shown = [escape(v) for v in row]
        if previous is not None and blank_repeats:
            for k in range(min(blank_repeats, n)):
                if row[k] == previous[k]:
                    shown[k] = ""
                else:
                    break
        previous = list(row)
        lines.append(" & ".join(shown) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", ""]
    return "\n".join(lines)
