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
