"""A helper of the progress tests: run a config as a user would, with a measure
whose second call waits until the test has seen the evaluation's bar on stderr (progress shown
while a case is slow, waiting on the output, never on the clock)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml


GATED_MEASURE = '''
"""A measure whose second call waits while the file ``hold`` next to this module exists (the test
removes it once it has seen the evaluation's progress)."""
import time
from pathlib import Path

import torch

from values_seg import hookimpl
from values_seg.components.measure import measure

calls = 0


@measure({"deterministic": "PU"}, label="Gated")
def gated_measure(stats):
    global calls
    calls += 1
    hold = Path(__file__).with_name("hold")
    for _ in range(6000):  # a guard against hanging the suite: the test removes the file (600 s)
        if calls != 2 or not hold.exists():
            break
        time.sleep(0.1)
    return torch.ones(stats.mean.shape[1:])


@hookimpl
def values_seg_measures():
    return [gated_measure]
'''


def gated_evaluation_progress(tmp_path: Path, config: dict, env: dict, plugins: Path | None = None) -> tuple[str, int, str]:
    """Run ``config`` (with :data:`GATED_MEASURE` added, written into ``plugins``: a folder the
    workers import from, else ``tmp_path``) in ``tmp_path`` as a user would, hold the evaluation's
    second case until stderr shows the evaluation's bar with one case counted; returns that bar's
    (split, total) and all of stderr."""
    plugins = plugins or tmp_path
    (plugins / "gated_plugin.py").write_text(GATED_MEASURE)
    hold = plugins / "hold"
    hold.touch()
    config = {**config, "plugins": [*config.get("plugins", []), "gated_plugin"],
              "measures": [*config["measures"], "gated_measure"]}
    (tmp_path / "gated.yaml").write_text(yaml.safe_dump(config))
    env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [str(plugins), env.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-m", "values_seg.cli", "run", "gated.yaml", "--out", "run"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    chunks: list[bytes] = []
    reader = threading.Thread(target=lambda: chunks.extend(iter(lambda: proc.stderr.read1(4096), b"")), daemon=True)
    reader.start()
    bar = re.compile(rf"evaluate {re.escape(config['datasets'][0]['label'])}/unet/deterministic/seed0 (\w+): "
                     r"+\d+%\|[^|]*\| 1/(\d+) \[")
    found = None
    while found is None and (reader.is_alive() or proc.poll() is None):  # until the bar shows, or the run ends
        found = bar.search(b"".join(chunks).decode(errors="replace"))
        time.sleep(0.05)
    hold.unlink()
    proc.wait(timeout=600)
    reader.join()
    err = b"".join(chunks).decode(errors="replace")
    assert proc.returncode == 0, err
    found = found or bar.search(err)
    assert found, err
    return found.group(1), int(found.group(2)), err

