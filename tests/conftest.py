"""Shared test setup: one torch thread per xdist worker, so 2 workers fit 2 cores."""

import os

import torch

if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)
