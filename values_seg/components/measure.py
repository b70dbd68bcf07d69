"""Helpers for C2 uncertainty measures: ``samples[S, C, *spatial] -> map[*spatial]``, written
against the per-case :class:`SampleStatistics`, computed once and shared (docs/design-rationale.md,
"Measures").
"""

from __future__ import annotations

import functools
from functools import cached_property
from typing import Callable

import numpy as np
import torch

from values_seg.numerics import kernels
from values_seg.families import check_types
from values_seg.registry import component
from values_seg.numerics.stored_samples import StoredSamples
from values_seg.components.unchanged import Unchanged
from values_seg.numerics.validation import check_probabilities, numpy_view

#: Floor inside log for the KL-based measures, as in the Shifts baselines (else +inf).
LOG_FLOOR = 1e-10


def log_(t: torch.Tensor) -> torch.Tensor:
    """In-place natural log; on CPU through NumPy's SIMD log (~2.5x torch's on CPU, same
    float32/float64 accuracy up to rounding)."""
    a = numpy_view(t) if t.is_contiguous() else None
    if a is not None:
        np.log(a, out=a)
        return t
    return t.log_()


def plogp_sum(p: torch.Tensor) -> torch.Tensor:
    """``sum_{k, c} p[k, c] log p[k, c]`` over the first two axes of ``p [K, C, *spatial]``, ``0 log 0 = 0``.

    ``p log max(p, tiny)`` is exactly 0 at ``p = 0``. One ``[C, *spatial]`` buffer serves every
    ``k`` (it stays in cache; fresh buffers of a whole case cost more in page faults than the
    arithmetic), accumulated in ``p``'s dtype.
    """
    K, C = p.shape[:2]
    tiny = torch.finfo(p.dtype).tiny
    total = torch.zeros(p.shape[2:], dtype=p.dtype, device=p.device)
    buf = torch.empty(p.shape[1:], dtype=p.dtype, device=p.device)
    for k in range(K):
        log_(torch.clamp_min(p[k], tiny, out=buf))
        if C <= 8:  # a chain of fused multiply-adds beats the reduction over a short axis
            for c in range(C):
                total.addcmul_(buf[c], p[k, c])
        else:
            total += buf.mul_(p[k]).sum(dim=0)
    return total


def entropy(p: torch.Tensor, dim: int) -> torch.Tensor:
    """Shannon entropy (natural log) along ``dim`` with ``0 log 0 = 0`` (:func:`plogp_sum`)."""
    if p.requires_grad:
        plogp = p.clamp_min(torch.finfo(p.dtype).tiny).log().mul(p)
        return plogp.sum(dim=dim).neg()
    return plogp_sum(p.movedim(dim, 0).unsqueeze(0)).neg_()


class shared(cached_property):
    """A statistic computed once per case and shared by the measures: registered, once computed,
    with the statistics' :class:`~values_seg.components.unchanged.Unchanged` (no measure may change it)."""

    def __get__(self, instance, owner=None):
        fresh = instance is not None and self.attrname not in instance.__dict__
        value = super().__get__(instance, owner)
        if fresh:
            instance.unchanged.add(f"statistic {self.attrname!r}", value)
        return value


class SampleStatistics:
    """Lazily computed, cached statistics of one case's probability samples ``[S, C, *spatial]``.

    ``samples``: a tensor, or the prediction cache's :class:`~values_seg.numerics.stored_samples.StoredSamples`
    (their float32 tensor is then made only when :attr:`samples` is asked for). Computation is in
    float32 (float64 input stays float64). ``unchanged``: the samples and the statistics computed so
    far, which the measures sharing them must not change.
    """

    def __init__(self, samples: torch.Tensor | StoredSamples):
        self._stored = samples if isinstance(samples, StoredSamples) else None
        self._samples = None if self._stored is not None else samples if samples.dtype == torch.float64 else samples.float()
        self.unchanged = Unchanged(samples=self._samples)

    @property
    def samples(self) -> torch.Tensor:
        """The samples as a tensor (of stored samples: :meth:`~values_seg.numerics.stored_samples.StoredSamples.tensor`,
        made on the first call)."""
        if self._samples is None:
            self._samples = self._stored.tensor()
            self.unchanged.add("samples", self._samples)
        return self._samples

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._stored.shape if self._stored is not None else self._samples.shape)

    @property
    def dtype(self) -> torch.dtype:
        """The statistics' dtype (float32, or float64 for float64 samples)."""
        return torch.float32 if self._stored is not None else self._samples.dtype

    @cached_property
    def _one_pass(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor | None] | None:
        """On CPU (float, contiguous, no autograd): the mean, the expected entropy and, for two
        classes, each sample's labels in one pass over the samples (per sample, NumPy's SIMD log
        into one buffer, then one compiled pass: :func:`values_seg.numerics.kernels.sample_pass`, whose last
        sample divides by ``S``). The mean adds the samples in order, ``p log p`` is summed per
        sample and class in the order of :func:`plogp_sum` (the same values up to rounding). A
        measure that reads only the mean pays the log too (about half of the pass). Stored float16
        samples of two classes are read as stored: the pass widens, renormalises and takes ``p log p``
        itself (one log per pixel), its last sample also gives the entropy of the mean (the fourth
        item; ``None`` otherwise), and the float32 samples are never made. ``None`` elsewhere (each
        statistic on its own)."""
        bits = self._stored.bits if self._stored is not None else None
        a = bits if bits is not None else numpy_view(self.samples) if self.samples.is_contiguous() else None
        if a is None:
            return None
        S, C = a.shape[:2]
        flat = a.reshape(S, C, -1)
        dtype = np.float32 if bits is not None else a.dtype
        mean, plogp = np.empty(flat.shape[1:], dtype), np.empty(flat.shape[2], dtype)  # set by the first sample
        labels = np.empty((S, flat.shape[2] if C == 2 else 0), np.bool_)
        logs = None if bits is not None else np.empty_like(mean)
        entropy_of_mean = np.empty_like(plogp) if bits is not None else None  # set by the last stored sample
        with np.errstate(divide="ignore"):  # log 0 = -inf: the kernel counts 0 log 0 as 0
            for k in range(S):
                kernels.sample_pass(flat[k], None if logs is None else np.log(flat[k], out=logs), mean, plogp,
                                    labels[k], k, S, entropy_of_mean)
        spatial = self.shape[2:]
        return (torch.from_numpy(mean.reshape(C, *spatial)), torch.from_numpy(plogp.reshape(spatial)),
                torch.from_numpy(labels.view(np.uint8).reshape(S, *spatial)) if C == 2 else None,
                None if entropy_of_mean is None else torch.from_numpy(entropy_of_mean.reshape(spatial)))

    @shared
    def mean(self) -> torch.Tensor:
        """Mean prediction p(Y|x) ``[C, *spatial]``."""
        return self.samples.mean(dim=0) if self._one_pass is None else self._one_pass[0]

    @shared
    def entropy_of_mean(self) -> torch.Tensor:
        """H(Y|x), the predictive entropy (of stored float16 samples: from their pass; elsewhere on
        CPU: NumPy's SIMD log of the mean, then one compiled pass, :func:`values_seg.numerics.kernels.entropy_from_logs`)."""
        if self._one_pass is not None and self._one_pass[3] is not None:
            return self._one_pass[3]
        mean = numpy_view(self.mean) if self.mean.is_contiguous() else None
        if mean is None:
            return entropy(self.mean, dim=0)
        C = mean.shape[0]
        flat = mean.reshape(C, -1)
        with np.errstate(divide="ignore"):  # log 0 = -inf: the kernel counts 0 log 0 as 0
            logs = np.log(flat)
        out = np.empty(flat.shape[1], mean.dtype)
        kernels.entropy_from_logs(flat, logs, out)
        return torch.from_numpy(out.reshape(mean.shape[1:]))

    @shared
    def mean_entropy(self) -> torch.Tensor:
        """E_s[H(Y|s,x)], the expected entropy."""
        if self._one_pass is None:
            return plogp_sum(self.samples).div_(-self.samples.shape[0])
        return self._one_pass[1]

    @shared
    def labels(self) -> torch.Tensor:
        """Each sample's class label map ``[S, *spatial]`` (:func:`values_seg.numerics.labels.class_argmax`)."""
        if self._one_pass is not None and self._one_pass[2] is not None:
            return self._one_pass[2]
        from values_seg.numerics.labels import class_argmax

        return class_argmax(self.samples, dim=1)

    @shared
    def cross_entropy_to_samples(self) -> torch.Tensor:
        """-sum_c pbar_c E_s[log p_sc] (log floored at ``LOG_FLOOR``)."""
        mean_log = log_(self.samples.clamp_min(LOG_FLOOR)).mean(dim=0)
        return mean_log.mul_(self.mean).sum(dim=0).neg_()


def measure(uncertainty_types: dict[str, str], name: str | None = None, label: str | None = None) -> Callable:
    """Declare a measure written as ``f(stats: SampleStatistics) -> map`` and which uncertainty
    type it stands for under each C1 family (families left out are not served; the type
    table of docs/concepts.md, :mod:`values_seg.families`, paper eq. 1, 15, 18); ``label``: its short display name.
    The result is a ``samples -> map`` component that validates its input, with the statistics
    form kept as ``.from_statistics`` (the fused evaluation shares one
    :class:`SampleStatistics` per case among all measures)."""
    check_types(uncertainty_types, "measure")

    def wrap(from_statistics: Callable[[SampleStatistics], torch.Tensor]) -> Callable:
        @functools.wraps(from_statistics)
        def checked(samples: torch.Tensor) -> torch.Tensor:
            samples = check_probabilities(samples, where=f"measure {checked.__name__!r}")
            return from_statistics(SampleStatistics(samples))

        checked.from_statistics = from_statistics
        return component(name=name, label=label, uncertainty_types=dict(uncertainty_types))(checked)

    return wrap
