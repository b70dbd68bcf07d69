"""Markdown helpers: pipe tables and figure blocks with captions."""

from __future__ import annotations


def _cell(value) -> str:
    text = "" if value is None else str(value)
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def table(headers: list[str], rows: list[list], align: list[str] | None = None) -> str:
    """A GitHub pipe table; ``align`` per column: "l", "c" or "r" (default: left)."""
    align = align or ["l"] * len(headers)
    marks = {"l": ":--", "c": ":-:", "r": "--:"}
    lines = [
        "| " + " | ".join(_cell(h) for h in headers) + " |",
        "| " + " | ".join(marks.get(a, "---") for a in align) + " |",
    ]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def figure(path: str, alt: str, caption: str) -> str:
    """An embedded image and its one-line caption."""
    return f"![{alt}]({path})\n\n*{caption}*"
