"""Shared test setup: one torch thread per xdist worker, so 2 workers fit 2 cores."""

import os

import pyarrow.parquet  # noqa: F401  before torch (see values_seg/__init__.py)
import pytest
import torch

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
