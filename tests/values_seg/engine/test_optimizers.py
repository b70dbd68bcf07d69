"""values_seg.engine.optimizers: torch's optimisers, the same bytes, without importing torch._dynamo."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from values_seg.engine.optimizers import eager

CASES = [
    (torch.optim.Adam, dict(lr=3e-3, weight_decay=1e-5)),
    (torch.optim.SGD, dict(lr=1e-2, weight_decay=1e-4, momentum=0.9, nesterov=False)),
    (torch.optim.RMSprop, dict(lr=1e-3, weight_decay=1e-4, momentum=0.5)),
]


def _train(cls, kwargs: dict, steps: int = 6):
    """``steps`` steps of a small network under ``cls`` with the training loop's schedule; the
    weights, the optimiser's state and what its step hooks saw."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(4, 2, 1))
    opt = cls(net.parameters(), **kwargs)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(1 - s / steps, 0.0) ** 0.9)
    hooked = []
    opt.register_step_post_hook(lambda o, args, kw: hooked.append(o.param_groups[0]["lr"]))
    for _ in range(steps):
        x, y = torch.randn(3, 1, 8, 8), torch.randint(0, 2, (3, 8, 8))
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(net(x), y).backward()
        opt.step()
        sched.step()
    opt.load_state_dict(opt.state_dict())
    return [p.detach().clone() for p in net.parameters()], opt.state_dict(), hooked


@pytest.mark.parametrize("cls,kwargs", CASES, ids=[c.__name__ for c, _ in CASES])
def test_an_eager_optimizer_gives_torch_s_bytes(cls, kwargs):
    weights, state, hooked = _train(cls, kwargs)
    eager_weights, eager_state, eager_hooked = _train(eager(cls), kwargs)
    assert all(torch.equal(a, b) for a, b in zip(weights, eager_weights, strict=True))
    assert state["param_groups"] == eager_state["param_groups"]
    assert all(torch.equal(state["state"][i][k], eager_state["state"][i][k]) for i in state["state"]
               for k in state["state"][i])
    assert hooked == eager_hooked and len(hooked) == 6  # torch's step hooks still run
    assert isinstance(eager(cls)(torch.nn.Linear(2, 2).parameters(), **kwargs), cls)


SCRIPT = textwrap.dedent('''
    import sys, torch
    from values_seg.engine.optimizers import eager
    cls = eager(torch.optim.Adam) if sys.argv[1] == "eager" else torch.optim.Adam
    net = torch.nn.Linear(3, 2)
    opt = cls(net.parameters(), lr=1e-3, weight_decay=1e-5)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1.0)
    for _ in range(2):
        opt.zero_grad(set_to_none=True)
        net(torch.randn(4, 3)).sum().backward()
        opt.step()
        sched.step()
    opt.load_state_dict(opt.state_dict())
    print("torch._dynamo" in sys.modules)
''')


@pytest.mark.parametrize("which,imported", [("torch", "True"), ("eager", "False")])
def test_training_with_an_eager_optimizer_never_imports_torch_dynamo(which, imported):
    """torch's own Adam imports the compiler (the reference: this check can fail); the eager one does not."""
    out = subprocess.run([sys.executable, "-c", SCRIPT, which], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == imported, out.stderr
