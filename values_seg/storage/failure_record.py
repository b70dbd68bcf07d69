"""A failed job's record in ``failures.csv``: its stage, its name, its cause in one line (what
failed and why, without machine paths: what the console and the report show) and its full error
(the traceback, for whoever debugs it)."""

from __future__ import annotations

import re

#: the columns of ``failures.csv``
COLUMNS = ("stage", "job", "cause", "error")

_QUALIFIED_TYPE = re.compile(r"^(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_]\w*(?::|$))")  # "pkg.module." of "pkg.module.Error: ..."
_ABSOLUTE_PATH = re.compile(r"(?<![\w:/.~-])/(?:[^\s/'\"`:,;()\[\]{}<>]+/)+(?=[^\s/'\"`:,;()\[\]{}<>]+)")


def one_line(text: str) -> str:
    """``text`` on one line (its lines joined, spaces collapsed), each absolute path shortened to
    ``…/`` and its last part (a report is shared: the machine's folders stay in ``failures.csv``)."""
    return _ABSOLUTE_PATH.sub("…/", " ".join(str(text).split()))


def cause_of(error: str) -> str:
    """The cause of a recorded error in one line: a traceback's exception (its last block, the
    exception's type without its module), or the error text itself (:func:`one_line`)."""
    lines = str(error).rstrip().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if starts:  # the last exception of a chain: the unindented lines after its last frame
        block = lines[starts[-1] + 1:]
        frames = [i for i, line in enumerate(block) if line.startswith('  File "')]
        rest = block[frames[-1] + 1:] if frames else block
        while rest and rest[0].startswith("    "):  # the frame's source line and its markers
            rest = rest[1:]
        lines = rest
    text = " ".join(line.strip() for line in lines if line.strip())
    return one_line(_QUALIFIED_TYPE.sub("", text))
