"""Shared test setup: one torch thread per xdist worker, so 2 workers fit 2 cores; test data built
once per session, shared by the xdist workers (``built_once``); the shared helpers of ``helpers/`` (the
tiny config) importable by plain name."""

import fcntl
import functools
import os
import pickle
import shutil
import signal
import sys
from pathlib import Path

import pyarrow.parquet  # noqa: F401  before torch (see values_seg/__init__.py)
import pytest
import torch

#: the suite's shared helpers (the tiny config: ``from tiny import tiny_config``), importable by plain
#: name from every test module; only this folder, never ``tests/`` itself, whose folders named like
#: the project's packages (``values_seg``, ``toy_data_generator``) would shadow them
HELPERS = str(Path(__file__).with_name("helpers"))
if HELPERS not in sys.path:
    sys.path.insert(0, HELPERS)

if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)


@pytest.fixture
def one_torch_thread():
    """Tiny tensors: one thread is fastest, and spinning OpenMP threads on a shared 2-core
    machine slow tiny convolutions down a thousandfold."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def pytest_configure(config):
    """A suite started as a background job of a non-interactive shell (``cmd &`` in a CI script)
    inherits SIGINT ignored (POSIX), as does every process it starts: the tests of Ctrl-C would send
    it to processes that never see it and wait for ever. Handle it as Python does by default (a
    handler, not an ignore, so the processes the tests start get the default too)."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


HANG_GUARD_S = 600  # only against a hang: tests wait on states, never on a speed tuned on a quiet machine


@pytest.fixture
def wait_until():
    """``wait_until(state, what)``: poll ``state()`` until it is true (returned); fail naming ``what``
    only when it never comes (a hang), however slow a loaded machine makes the way there."""
    import time

    def wait(state, what: str, guard: float = HANG_GUARD_S, every: float = 0.05):
        end = time.monotonic() + guard
        while not (value := state()):
            if time.monotonic() > end:
                pytest.fail(f"waited {guard:.0f} s (a hang guard) for: {what}")
            time.sleep(every)
        return value

    return wait


def _shared_root(tmp_path_factory) -> Path:
    """The session's folder of shared test data: with pytest-xdist each worker has its own basetemp
    (``.../pytest-N/popen-gwK``), so the folder lies one above it, where all workers of the session see it."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "built-once"
    root.mkdir(exist_ok=True)
    return root


def build_once(root: Path, name: str, build):
    """The value of ``build(root / name)``, built in that fresh folder by the first caller of any
    process, which holds a file lock meanwhile; the others wait on the lock and read its value
    (pickled beside the folder, the mark of a finished build). A build that failed halfway is redone."""
    folder, value = root / name, root / f"{name}.value.pickle"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not value.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            result = build(folder)
            partial = value.with_name(value.name + ".partial")
            partial.write_bytes(pickle.dumps(result))
            partial.replace(value)
            return result
    return pickle.loads(value.read_bytes())


@pytest.fixture(scope="session")
def built_once(tmp_path_factory):
    """``built_once(name, build)``: the value of ``build(folder)``, run once per test session however
    many xdist workers and conftests ask for it (:func:`build_once`). The folder is read-only by
    convention: a test that changes it copies it first."""
    return functools.partial(build_once, _shared_root(tmp_path_factory))


@pytest.fixture
def upgraded():
    """``upgraded(site, distribution, version)``: a simulated upgrade of an installed distribution
    through its metadata: a copy of its dist-info with another version in the folder ``site``, which
    the caller puts ahead on the path (``sys.path`` or ``PYTHONPATH``); returns the copy."""
    import importlib.metadata

    def upgrade(site: Path, distribution: str, version: str = "99.0.0") -> Path:
        dist = importlib.metadata.distribution(distribution)
        info = Path(dist._path)
        target = Path(site) / f"{info.name.split('-')[0]}-{version}.dist-info"
        shutil.copytree(info, target)
        text = (target / "METADATA").read_text()
        (target / "METADATA").write_text(text.replace(f"Version: {dist.version}", f"Version: {version}", 1))
        return target

    return upgrade
