"""torch's optimisers without their first-use import of ``torch._dynamo`` (about 1 CPU-s in every
worker that trains), with the same arithmetic: docs/design-rationale.md,
"Optimisers without the compiler".
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
