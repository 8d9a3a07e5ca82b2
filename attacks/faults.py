"""Deliberately broken DP-SGD variants, so tests can show that an audit catches real bugs.

Pass one to :func:`attacks.dpsgd.train` as ``fault=``; the accountant still reads the honest
``spec``, which is exactly the situation of a buggy implementation with a correct claim. Each
fault leaks more than the spec allows, in the direction its docstring states (tested in
``tests/attacks/test_faults.py``).

**Adding a fault is one registered definition plus its test.** A fault is a frozen dataclass
deriving from :class:`FaultBase` that overrides the hooks it breaks (``noise_std``,
``clip_norm``, ``batch_counts``, ``normalise``; the trainer calls nothing else), decorated with
:func:`register_fault`. The registry gives it its name in records and reports, the
``training.fault`` value of a TOML config (and the config keys its fields read), and the list in
``dpaudit run --help``; no other file changes. :class:`ClipNormMismatch` was added this way.

>>> from attacks.faults import NoClipping, describe, fault_names
>>> describe(NoClipping())
'no_clipping'
>>> "clip_norm_mismatch" in fault_names()
True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import Field, dataclass, fields
from typing import Any, ClassVar

import torch
from torch import Tensor

from accountants import validate as check
from accountants.errors import InputError, InputTypeError

from . import samplers

__all__ = [
    "ClipNormMismatch",
    "Fault",
    "FaultBase",
    "FaultInfo",
    "NoClipping",
    "NoiseMissingFactor",
    "RealisedBatchNormalisation",
    "ShuffledBatches",
    "describe",
    "fault_from_name",
    "fault_info",
    "fault_names",
    "register_fault",
]


class FaultBase:
    """The honest trainer's behaviour at each point a fault can break; a fault overrides some hooks."""

    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, Field[Any]]]  # every registered fault is a dataclass

    def noise_std(self, std: float) -> float:
        """Std of the Gaussian noise added to the sum of clipped gradients (honest: σ·C)."""
        return std

    def clip_norm(self, clip_norm: float) -> float | None:
        """Norm per-example gradients are clipped to (honest: C); None: no clipping."""
        return clip_norm

    def batch_counts(self, sampling: Any, steps: int, present: Tensor, generator: torch.Generator | None,
                     expected: float) -> Tensor:
        """(T, N) draw counts of one model (honest: exactly ``spec.sampling``)."""
        return samplers.sample_counts(sampling, steps, present, generator)

    def normalise(self, noisy: Tensor, expected: float, realised: Tensor) -> Tensor:
        """Update from the noisy sum (R, D); ``realised`` (R,) batch sizes (honest: divide by the expected size)."""
        return noisy / expected


@dataclass(frozen=True)
class FaultInfo:
    """One registered fault: its name, class, the config keys its fields read, and its one-line doc."""

    name: str
    cls: type
    config: dict[str, str]  # field name -> TOML key in [training]
    doc: str


_FAULTS: dict[str, FaultInfo] = {}


def register_fault(name: str, *, config: dict[str, str] | None = None) -> Callable[[type], type]:
    """Class decorator: register a fault under ``name`` (once; a second registration is an error).

    Args:
        name: the stable name (records, reports, ``training.fault`` in TOML).
        config: which ``[training]`` key fills each constructor field (e.g. ``{"factor": "fault_factor"}``).
    """

    def deco(cls: type) -> type:
        if not issubclass(cls, FaultBase):
            raise InputTypeError(f"fault {name!r} must derive from attacks.faults.FaultBase")
        if name in _FAULTS or name == "none":
            raise InputError(f"fault {name!r} is already registered")
        doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
        _FAULTS[name] = FaultInfo(name, cls, dict(config or {}), doc)
        return cls

    return deco


def fault_names() -> list[str]:
    """Names of the registered faults, in registration order."""
    return list(_FAULTS)


def fault_info(name: str) -> FaultInfo:
    """The registered fault called ``name``."""
    try:
        return _FAULTS[name]
    except KeyError:
        raise InputError(f"unknown fault {name!r}; choose from {['none', *_FAULTS]}") from None


def fault_from_name(name: str, settings: dict[str, Any] | None = None) -> FaultBase | None:
    """The fault called ``name`` ("none": None) with its fields read from ``settings`` (a [training] table)."""
    if name == "none":
        return None
    info = fault_info(name)
    settings = settings or {}
    return info.cls(**{f: settings[key] for f, key in info.config.items() if key in settings})


@register_fault("noise_missing_factor", config={"factor": "fault_factor"})
@dataclass(frozen=True, slots=True)
class NoiseMissingFactor(FaultBase):
    """Noise std σ·C / factor instead of σ·C (e.g. factor = C when the clip norm is forgotten).

    Leaks more: the per-step white-box statistic of a Dirac canary keeps mean 1 (in units of C)
    but its std drops from σ to σ/factor, so μ_step grows from 1/σ to factor/σ.
    """

    factor: float = 2.0

    def __post_init__(self) -> None:
        check.in_range(1.0, None, closed="neither", factor=self.factor)
        check.finite(factor=self.factor)

    def noise_std(self, std: float) -> float:
        return std / self.factor


@register_fault("no_clipping")
@dataclass(frozen=True, slots=True)
class NoClipping(FaultBase):
    """Per-example gradients (canaries included) are summed without clipping to C.

    Leaks more: a canary whose gradient norm exceeds C moves the update by its full norm, so the
    white-box statistic's "in" mean grows from 1 to ‖g‖/C while the noise stays σ.
    """

    def clip_norm(self, clip_norm: float) -> float | None:
        return None


@register_fault("realised_batch_normalisation")
@dataclass(frozen=True, slots=True)
class RealisedBatchNormalisation(FaultBase):
    """The noisy sum is divided by the realised batch size |B_t| instead of the expected size.

    Leaks more (opacus #571/#819): the update's scale reveals |B_t|, which differs by one when the
    canary is in; the norm of a high-dimensional update measures that scale almost exactly.
    """

    def normalise(self, noisy: Tensor, expected: float, realised: Tensor) -> Tensor:
        return noisy / realised.clamp(min=1).to(noisy.dtype)[:, None]


@register_fault("shuffled_batches")
@dataclass(frozen=True, slots=True)
class ShuffledBatches(FaultBase):
    """Train with shuffle-once-per-epoch batches of size round(q·N) while Poisson(q) is accounted.

    Leaks more (opacus #80, tf-privacy #19): the canary is in exactly one step per epoch, never
    in zero, so the privacy amplification that Poisson's chance of absence buys is not there.
    """

    def batch_counts(self, sampling: Any, steps: int, present: Tensor, generator: torch.Generator | None,
                     expected: float) -> Tensor:
        return samplers.shuffled(max(1, round(expected)), steps, present, generator)


@register_fault("clip_norm_mismatch", config={"factor": "fault_factor"})
@dataclass(frozen=True, slots=True)
class ClipNormMismatch(FaultBase):
    """Per-example gradients are clipped to factor·C while the noise is calibrated to C.

    The clip norm of one configuration and the noise scale of another (a renamed or rescaled
    hyperparameter). Leaks more: a canary of gradient norm ‖g‖ > C moves the update by
    min(‖g‖, factor·C) instead of C, so the white-box statistic's "in" mean grows from 1 to
    min(‖g‖/C, factor) while the noise stays σ.
    """

    factor: float = 2.0

    def __post_init__(self) -> None:
        check.in_range(1.0, None, closed="neither", factor=self.factor)
        check.finite(factor=self.factor)

    def clip_norm(self, clip_norm: float) -> float | None:
        return clip_norm * self.factor


Fault = FaultBase  # any registered fault (kept as the name the trainer's signature uses)


def describe(fault: FaultBase | None) -> str:
    """A short stable name for records and reports ("none" for the honest trainer).

    A fault with fields adds their values: ``noise_missing_factor(2)``.
    """
    if fault is None:
        return "none"
    for info in _FAULTS.values():
        if type(fault) is info.cls:
            values = [getattr(fault, f.name) for f in fields(fault)]
            return info.name + (f"({', '.join(format(v, 'g') for v in values)})" if values else "")
    raise InputTypeError(f"fault must be one of the registered attacks.faults classes {sorted(_FAULTS)} or None; "
                         f"got {type(fault).__name__}")
