"""Input checks shared by the statistics modules (each error names the parameter and its range)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from accountants.errors import InputError, InputTypeError


def _significance(significance: float) -> float:
    if isinstance(significance, bool) or not isinstance(significance, (int, float)):
        raise InputTypeError(f"significance must be a number; got {type(significance).__name__}")
    if not 0.0 < significance < 1.0:
        raise InputError(f"significance must be in (0, 1); got {significance!r}")
    return float(significance)


def _delta(delta: float) -> float:
    if isinstance(delta, bool) or not isinstance(delta, (int, float)):
        raise InputTypeError(f"delta must be a number; got {type(delta).__name__}")
    if not 0.0 <= delta < 1.0:
        raise InputError(f"delta must be in [0, 1); got {delta!r}")
    return float(delta)


MAX_SCORES = 10_000_000
"""Cap on the number of scores (or trials) one call accepts; an error names it."""


def _floats(name: str, x: ArrayLike) -> np.ndarray:
    """``x`` as a float64 array, or InputTypeError naming ``name``."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    if isinstance(x, (str, bytes)) or x is None:
        raise InputTypeError(f"{name} must be a number or an array of numbers; got {type(x).__name__}")
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError, OverflowError) as e:
        raise InputTypeError(f"{name} must be a number or an array of numbers; got {x!r:.80}") from e
    if a.size > MAX_SCORES:
        raise InputError(f"{name} holds {a.size} entries, more than MAX_SCORES = {MAX_SCORES}")
    return a


def _scores(name: str, x: ArrayLike) -> np.ndarray:
    a = _floats(name, x).reshape(-1)
    if a.size == 0:
        raise InputError(f"{name} must hold at least one score; got none")
    if not np.all(np.isfinite(a)):
        bad = np.flatnonzero(~np.isfinite(a))
        raise InputError(f"{name} must be finite; got {a[bad[0]]} ({bad.size} of {a.size} entries, first at index "
                         f"{bad[0]})")
    return a


def _counts(k: ArrayLike, n: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    k, n = _floats("k", k), _floats("n", n)
    if not np.all(np.isfinite(n)) or np.any(n < 1) or np.any(n != np.round(n)):
        raise InputError(f"n must be finite integers ≥ 1; got {n.reshape(-1)[:5].tolist()}")
    if not np.all(np.isfinite(k)) or np.any(k < 0) or np.any(k != np.round(k)):
        raise InputError("k must be integers in [0, n]")
    try:
        k, n = np.broadcast_arrays(k, n)
    except ValueError as e:
        raise InputError(f"k and n must have broadcastable shapes; got {k.shape} and {n.shape}") from e
    if np.any(k > n):
        raise InputError("k must be integers in [0, n]")
    return k, n


def _rates(name: str, x: ArrayLike) -> np.ndarray:
    a = _floats(name, x)
    if np.any(np.isnan(a)) or np.any(a < 0) or np.any(a > 1):
        bad = np.flatnonzero(~((a >= 0) & (a <= 1)).reshape(-1))
        raise InputError(f"{name} must be rates in [0, 1]; got {a.reshape(-1)[bad[0]]!r} at index {bad[0]}")
    return a


def _ratio(ratio: float) -> float:
    """The geometric ratio of the count grid: a number ≥ 1.01 (below, the grid loop runs ~log n / log r times
    and adds nothing: every count level is already present)."""
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float, np.integer, np.floating)):
        raise InputTypeError(f"ratio must be a number; got {type(ratio).__name__}")
    if not ratio >= 1.01:
        raise InputError(f"ratio must be ≥ 1.01; got {ratio!r}")
    return float(ratio)



def _trials(name: str, v: object) -> int:
    """A trial count: an integer in [1, MAX_SCORES]."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 1 <= v <= MAX_SCORES:
        raise InputError(f"{name} must be an integer in [1, {MAX_SCORES}] (MAX_SCORES); got {v!r}")
    return int(v)


def _truth(truth: ArrayLike, size: int) -> np.ndarray:
    """Membership bits as a bool array with one entry per score (bool or 0/1), else InputError naming ``truth``."""
    if hasattr(truth, "detach"):
        truth = truth.detach().cpu().numpy()
    t = np.asarray(truth).reshape(-1)
    if t.dtype != bool and not (np.issubdtype(t.dtype, np.number) and np.all(np.isin(t, (0, 1)))):
        raise InputError("truth must hold booleans (or 0/1), one per score")
    if t.size != size:
        raise InputError(f"truth must have one entry per score; got {t.size} and {size}")
    return t.astype(bool)
