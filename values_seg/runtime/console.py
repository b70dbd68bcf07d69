"""What values-seg prints on the console, the same in the command line and its worker processes."""

from __future__ import annotations

import sys
import warnings

from values_seg.storage.redaction import redact


def one_line_warnings() -> None:
    """Show values-seg's own warnings (e.g. a corrupt cache file) as one line, ``values-seg:
    warning: ...``, in this process (the command line and its worker processes)."""
    show = warnings.showwarning
    if getattr(show, "one_line", False):
        return

    def showwarning(message, category, filename, lineno, file=None, line=None):
        if not category.__module__.startswith("values_seg"):
            return show(message, category, filename, lineno, file, line)
        print(f"values-seg: warning: {redact(str(message))}", file=file or sys.stderr, flush=True)

    showwarning.one_line = True
    warnings.showwarning = showwarning
