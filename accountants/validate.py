"""Input checks that name the parameter and the allowed range.

Every public entry point validates at construction or at the top of the call, never deep
inside a computation. Messages follow one shape::

    q must be in (0, 1]; got 1.3 (3 of 64 entries out of range, first at index 7)

Scalars and tensors go through the same functions. :class:`~accountants.errors.InputTypeError` (a
``TypeError``) is raised for the wrong kind of input, :class:`~accountants.errors.InputError` (a
``ValueError``) for a value out of range (including NaN). The public home of these checks for every
package (``from accountants import validate as check``); the error classes live in
:mod:`accountants.errors`.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import torch

from .errors import InputError, InputTypeError

__all__ = [
    "finite",
    "in_range",
    "integer",
    "positive",
]


def _describe(lo: float | None, hi: float | None, closed: str) -> str:
    left = "[" if closed in ("both", "left") else "("
    right = "]" if closed in ("both", "right") else ")"
    lo_s = "-inf" if lo is None else f"{lo:g}"
    hi_s = "inf" if hi is None else f"{hi:g}"
    return f"{left}{lo_s}, {hi_s}{right}"


def _as_tensor(name: str, value: Any) -> torch.Tensor:
    if isinstance(value, bool):
        raise InputTypeError(f"{name} must be a number or a tensor of numbers; got bool {value!r}")
    if isinstance(value, torch.Tensor):
        if value.dtype == torch.bool or value.is_complex():
            raise InputTypeError(f"{name} must be a real tensor; got dtype {value.dtype}")
        return value.detach()
    if isinstance(value, numbers.Real):
        return torch.tensor(float(value), dtype=torch.float64)
    try:
        t = torch.as_tensor(value, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        raise InputTypeError(
            f"{name} must be a number, a sequence of numbers or a tensor; got {type(value).__name__}"
        ) from None
    return t


def _fail(name: str, value: torch.Tensor, bad: torch.Tensor, allowed: str) -> None:
    if value.ndim == 0:
        raise InputError(f"{name} must be {allowed}; got {value.item():g}")
    flat_bad = bad.reshape(-1)
    idx = int(torch.nonzero(flat_bad)[0].item())
    first = value.reshape(-1)[idx].item()
    raise InputError(
        f"{name} must be {allowed}; got {first:g} "
        f"({int(flat_bad.sum())} of {flat_bad.numel()} entries out of range, first at index {idx})"
    )


def in_range(lo: float | None, hi: float | None, *, closed: str = "both", **named: Any) -> None:
    """Check that each named value lies in the interval (NaN always fails).

    Args:
        lo, hi: interval ends; ``None`` means unbounded on that side.
        closed: which ends are included: "both", "left", "right" or "neither".
        **named: ``name=value`` pairs; values are scalars, sequences or tensors.

    Raises:
        ValueError: naming the parameter, the allowed range, the offending value and, for
            tensors, the count and first index of entries out of range.
    """
    if closed not in ("both", "left", "right", "neither"):
        raise InputError(f"closed must be one of both, left, right, neither; got {closed!r}")
    allowed = "in " + _describe(lo, hi, closed)
    for name, raw in named.items():
        v = _as_tensor(name, raw)
        bad = torch.isnan(v)
        if lo is not None:
            bad |= (v < lo) if closed in ("both", "left") else (v <= lo)
        if hi is not None:
            bad |= (v > hi) if closed in ("both", "right") else (v >= hi)
        if bool(bad.any()):
            _fail(name, v, bad, allowed)


def positive(**named: Any) -> None:
    """Check that each named value is > 0 and finite."""
    for name, raw in named.items():
        v = _as_tensor(name, raw)
        bad = torch.isnan(v) | (v <= 0) | torch.isinf(v)
        if bool(bad.any()):
            _fail(name, v, bad, "a finite number > 0")


def finite(**named: Any) -> None:
    """Check that each named value is finite (not NaN, not ±inf)."""
    for name, raw in named.items():
        v = _as_tensor(name, raw)
        bad = ~torch.isfinite(v)
        if bool(bad.any()):
            _fail(name, v, bad, "finite")


def integer(lo: int | None = None, hi: int | None = None, **named: Any) -> None:
    """Check that each named value is an integer (a Python int, or an integral tensor) in [lo, hi]."""
    for name, raw in named.items():
        if isinstance(raw, bool):
            raise InputTypeError(f"{name} must be an integer; got bool {raw!r}")
        if isinstance(raw, numbers.Integral):
            v = torch.tensor(int(raw), dtype=torch.float64)
        elif isinstance(raw, float):
            if not math.isfinite(raw) or raw != int(raw):
                raise InputTypeError(f"{name} must be an integer; got {raw!r}")
            v = torch.tensor(raw, dtype=torch.float64)
        else:
            v = _as_tensor(name, raw).to(torch.float64)
            nonint = ~torch.isfinite(v) | (v != torch.round(v))
            if bool(nonint.any()):
                _fail(name, v, nonint, "an integer")
        in_range(lo, hi, closed="both", **{name: v})
