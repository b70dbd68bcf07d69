"""The C1 contract: a prediction model declares the trainings it needs and turns trained networks
into probability samples; a model with its own output head and loss brings them as a :class:`~values_seg.engine.head.Head`.

What a model declares, the contract of a head and a complete plugin: docs/design-rationale.md,
"Prediction models"; a model with a head of its own: docs/guides/add-component.md.
"""

from __future__ import annotations

import copy
import inspect
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

import torch
from torch import nn

from values_seg.families import check_family
from values_seg.storage.input_files import read_files
from values_seg.params import params_of

if TYPE_CHECKING:
    from values_seg.components.dataset import Case
    from values_seg.engine.specs import TrainingSpec

__all__ = ["PredictionModel", "batched_forward", "enable_dropout", "softmax_probs"]


class PredictionModel:
    name: ClassVar[str]
    family: ClassVar[str]
    #: largest number of forward passes batched together at inference
    max_batch: ClassVar[int] = 16
    #: False for models trained outside values-seg (they ignore the config's backbones and
    #: cannot be retrained, e.g. for active learning)
    uses_backbone: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        family = cls.__dict__.get("family")
        if family is not None:
            try:
                check_family(family, f"{cls.__name__}.family")
            except ValueError as e:
                raise TypeError(str(e)) from None

    # -- what to train ------------------------------------------------------------------
    def training_specs(self, base: "TrainingSpec") -> list["TrainingSpec"]:
        """The trainings this model needs, derived from ``base`` (a plain softmax training of
        the dataset, backbone, recipe and seed of the experiment). Default: ``[base]``; a model
        with its own head returns e.g. ``[base.replace(head=MyHead(...))]``."""
        return [base]

    # -- inference ----------------------------------------------------------------------
    def predict(self, networks: Sequence[nn.Module], image: torch.Tensor) -> torch.Tensor:
        """Probability samples ``[S, C, *spatial]`` for ``image`` ``[in_channels, *spatial]``."""
        raise NotImplementedError

    def predict_case(self, networks: Sequence[nn.Module], case: "Case", device: torch.device) -> torch.Tensor:
        """Samples for one dataset case; override to use more of the case than its image."""
        image = torch.from_numpy(case.image).to(device=device, dtype=torch.float32)
        return self.predict(networks, image)

    @property
    def num_samples_predicted(self) -> int | None:
        """``S`` if known in advance (for shape checks), else ``None``."""
        return getattr(self, "num_samples", None)

    # -- identity -----------------------------------------------------------------------
    def params(self) -> dict[str, Any]:
        """The model's parameters (its ``__init__`` arguments read back from attributes)."""
        out = {}
        for p in params_of(type(self)):
            if not hasattr(self, p.name):
                raise AttributeError(f"{type(self).__name__} must store parameter {p.name!r} as an attribute")
            value = getattr(self, p.name)
            out[p.name] = list(value) if isinstance(value, tuple) else value
        return out

    def cache_identity(self) -> dict[str, Any]:
        """What, besides its training specs, determines this model's predictions; hashed into the
        prediction cache key. Default: :meth:`params`. Externally trained models should add what
        identifies their weights (e.g. checkpoint hashes), so retrained weights are re-predicted;
        the files its parameters name (declared ``InputPath()``) enter by their contents."""
        params = self.params()
        files = read_files(params_of(type(self)), params)
        return {**params, **({"files": files} if files else {})}

    def describe(self) -> str:
        return f"{self.name}({', '.join(f'{k}={v!r}' for k, v in self.params().items())})"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.params().items())})"

    @classmethod
    def description(cls) -> str:
        return (inspect.getdoc(cls) or "").strip().split("\n")[0]


# -- helpers for implementations ------------------------------------------------------------
def batched_forward(net: nn.Module, inputs: torch.Tensor, max_batch: int) -> torch.Tensor:
    """``net`` over ``inputs [N, ...]`` in chunks of at most ``max_batch``."""
    return torch.cat([net(chunk) for chunk in torch.split(inputs, max(int(max_batch), 1))])


def members_forward(networks: Sequence[nn.Module], x: torch.Tensor) -> torch.Tensor:
    """Every network of ``networks`` on ``x [B, ...]``, member-major ``[len(networks) * B, ...]``:
    on a GPU in one vectorised forward (:func:`stacked_forward`: fewer kernel launches), on the
    CPU one by one (measured: no gain there; 5 toy U-Nets on one 32^2 image took 10 % longer
    vectorised)."""
    if x.device.type == "cpu" or len(networks) < 2:
        return torch.cat([net(x) for net in networks])
    return stacked_forward(networks, x)


def stacked_forward(networks: Sequence[nn.Module], x: torch.Tensor) -> torch.Tensor:
    """:func:`members_forward` as one :func:`torch.func.vmap` over the networks' stacked weights
    (convolutions become grouped ones; networks of different structure go one by one). The
    stacked weights are kept with the first network for the next case, keyed by the networks and
    the versions of their tensors (an in-place change to a weight stacks them again)."""
    from torch.func import functional_call, stack_module_state, vmap

    key = tuple((id(n), sum(t._version for t in (*n.parameters(), *n.buffers()))) for n in networks)
    cached = networks[0].__dict__.get("_members_stack")
    if cached is None or cached[0] != key:
        networks[0].__dict__.pop("_members_stack", None)
        shapes = [[(n, t.shape) for n, t in net.state_dict().items()] for net in networks]
        cached = (key, None)
        if all(s == shapes[0] for s in shapes) and len({type(n) for n in networks}) == 1:
            params, buffers = stack_module_state(list(networks))
            skeleton = copy.deepcopy(networks[0]).to("meta")
            cached = (key, (skeleton, {k: v.detach() for k, v in params.items()}, buffers))
        networks[0].__dict__["_members_stack"] = cached
    if cached[1] is None:
        return torch.cat([net(x) for net in networks])
    skeleton, params, buffers = cached[1]
    skeleton.train(networks[0].training)
    return vmap(lambda p, b: functional_call(skeleton, (p, b), (x,)))(params, buffers).flatten(0, 1)


def softmax_probs(logits: torch.Tensor) -> torch.Tensor:
    """Softmax over the class axis (1), computed in float32."""
    return logits.float().softmax(dim=1)


def enable_dropout(net: nn.Module) -> int:
    """Switch every dropout layer of ``net`` to training mode (test-time dropout); norm layers
    keep their eval mode. Returns the number of dropout layers."""
    from values_seg.engine.networks import enable_dropout as _enable

    return _enable(net)
