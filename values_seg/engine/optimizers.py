"""torch's optimisers without their first-use import of ``torch._dynamo`` (about 1 CPU-s in every
worker that trains: torch 2.x wraps ``Optimizer.add_param_group``, ``zero_grad``, ``state_dict``
and ``load_state_dict`` in ``torch._disable_dynamo``, which imports the compiler when first called,
and every ``step`` in ``_use_grad_for_differentiable``, which imports it to place graph breaks).

Outside ``torch.compile`` those wrappers only switch autograd off for the step; :func:`eager` gives
an optimiser class whose methods are torch's own functions with just that (the same arithmetic,
so the same bytes: ``tests/values_seg/engine/test_optimizers.py``). values-seg never compiles a
training step; a class from here is not meant for use inside ``torch.compile``.
"""

from __future__ import annotations

import functools
import inspect

import torch

#: The ``Optimizer`` methods torch wraps in ``torch._disable_dynamo``.
DYNAMO_WRAPPED = ("add_param_group", "zero_grad", "state_dict", "load_state_dict")


def _grad_mode_step(step):
    """``step`` (torch's own, unwrapped) with autograd set as torch's wrapper sets it: on only for
    a ``differentiable`` optimiser."""

    @functools.wraps(step)
    def eager_step(self, *args, **kwargs):
        with torch.set_grad_enabled(self.defaults["differentiable"]):
            return step(self, *args, **kwargs)

    eager_step.__dict__.pop("hooked", None)  # torch adds its profiling hooks to this class's step itself
    return eager_step


@functools.cache
def eager(cls: type[torch.optim.Optimizer]) -> type[torch.optim.Optimizer]:
    """``cls`` (e.g. ``torch.optim.Adam``) whose methods never import ``torch._dynamo``."""
    methods = {name: inspect.unwrap(getattr(cls, name)) for name in DYNAMO_WRAPPED}
    methods["step"] = _grad_mode_step(inspect.unwrap(cls.step))
    return type(cls.__name__, (cls,), {"__module__": __name__, "__qualname__": cls.__name__, **methods})
