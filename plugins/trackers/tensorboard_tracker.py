"""TensorBoard tracker (``tracking.tensorboard``; extra ``values-seg[tensorboard]``): event files
under ``dir/<run name>/<sweep key>/<training|combination>/<name>-<key>``, one folder per record
(the loss per epoch and the validation Dice as scalars by epoch, a combination's metrics at step
0, the parameters as text); a record's folder with its ``values_seg_key`` file is logged."""

from __future__ import annotations

import re
from pathlib import Path

from values_seg import hookimpl
from values_seg.components.tracker import Record, Tracker

DONE = "values_seg_key"


class TensorBoardTracker(Tracker):
    """``dir``: the folder of the event files (``tensorboard --logdir dir``)."""

    name = "tensorboard"
    extra = "values-seg[tensorboard]"

    def __init__(self, dir: str):  # noqa: A002 - the config's key
        self.dir = Path(dir)
        self.root: Path | None = None

    def check(self) -> None:
        import tensorboard  # noqa: F401

    def open(self, sweep: Record) -> None:
        self.root = self.dir / _safe(sweep.name) / sweep.key[:12]

    def folder(self, record: Record) -> Path:
        return self.root / record.kind / f"{_safe(record.name)[:80]}-{record.key[:12]}"

    def has(self, record: Record) -> bool:
        done = self.folder(record) / DONE
        return done.is_file() and done.read_text() == record.key

    def log(self, record: Record) -> None:
        from torch.utils.tensorboard import SummaryWriter

        folder = self.folder(record)
        writer = SummaryWriter(str(folder))
        try:
            for name, points in record.series.items():
                for step, value in points:
                    writer.add_scalar(name, value, global_step=step)
            for name, value in record.metrics.items():
                writer.add_scalar(name, value, global_step=0)
            table = "\n".join(f"| {k} | {v} |" for k, v in {**record.params, **record.tags, "key": record.key}.items())
            writer.add_text("params", "| parameter | value |\n|---|---|\n" + table, global_step=0)
        finally:
            writer.close()
        (folder / DONE).write_text(record.key)


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._=+-]", "_", text)


@hookimpl
def values_seg_trackers():
    return [TensorBoardTracker]
