"""Binomial confidence intervals (Clopper–Pearson, Jeffreys) and the ε implied by two error rates."""

from __future__ import annotations

import numpy as np
import scipy.stats
from numpy.typing import ArrayLike

from accountants.errors import InputError

from ._checks import _counts, _delta, _rates, _significance

INTERVALS = ("clopper_pearson", "jeffreys")


def _lo(x: np.ndarray) -> np.ndarray:
    """A lower limit; where the Beta quantile did not converge (NaN, e.g. significance 1e-308), 0: wider, sound."""
    return np.where(np.isnan(x), 0.0, x)


def _hi(x: np.ndarray) -> np.ndarray:
    """An upper limit; NaN (non-converged Beta quantile) becomes 1: wider, sound."""
    return np.where(np.isnan(x), 1.0, x)


def clopper_pearson(k: ArrayLike, n: ArrayLike, significance: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided Clopper–Pearson interval for a binomial proportion.  Bound: exact coverage ≥ 1 − significance.

    Clopper & Pearson (1934): [Beta.ppf(s/2; k, n−k+1), Beta.ppf(1−s/2; k+1, n−k)], with 0 at
    k = 0 and 1 at k = n. Vectorised over k and n.

    Args:
        k: successes, integers in [0, n].
        n: trials, integers ≥ 1.
        significance: s in (0, 1), split equally between the two tails.

    Returns:
        (lower, upper) arrays of the broadcast shape.
    """
    s = _significance(significance)
    k, n = _counts(k, n)
    with np.errstate(invalid="ignore"):
        lo = _lo(np.where(k > 0, scipy.stats.beta.ppf(s / 2, k, n - k + 1), 0.0))
        hi = _hi(np.where(k < n, scipy.stats.beta.ppf(1 - s / 2, k + 1, n - k), 1.0))
    return lo, hi



def clopper_pearson_upper(k: ArrayLike, n: ArrayLike, significance: float = 0.05) -> np.ndarray:
    """One-sided Clopper–Pearson upper limit: P(p > limit) ≤ significance.  Bound: upper on p.

    Beta.ppf(1 − s; k + 1, n − k), and 1 when k = n (Clopper & Pearson 1934).
    """
    s = _significance(significance)
    k, n = _counts(k, n)
    with np.errstate(invalid="ignore"):
        return _hi(np.where(k < n, scipy.stats.beta.ppf(1 - s, k + 1, n - k), 1.0))



def jeffreys(k: ArrayLike, n: ArrayLike, significance: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided Jeffreys interval: Beta(k + ½, n − k + ½) quantiles, with the endpoints 0 at k = 0, 1 at k = n.

    Brown, Cai, DasGupta (2001) §4.1.2. Coverage is approximate (close to nominal on average,
    below it for some p), so a bound built on it is labelled ``method="jeffreys"`` and is not
    used for the violation test.
    """
    s = _significance(significance)
    k, n = _counts(k, n)
    with np.errstate(invalid="ignore"):
        lo = _lo(np.where(k > 0, scipy.stats.beta.ppf(s / 2, k + 0.5, n - k + 0.5), 0.0))
        hi = _hi(np.where(k < n, scipy.stats.beta.ppf(1 - s / 2, k + 0.5, n - k + 0.5), 1.0))
    return lo, hi



def jeffreys_upper(k: ArrayLike, n: ArrayLike, significance: float = 0.05) -> np.ndarray:
    """One-sided Jeffreys upper limit Beta.ppf(1 − s; k + ½, n − k + ½) (1 at k = n).  Approximate."""
    s = _significance(significance)
    k, n = _counts(k, n)
    with np.errstate(invalid="ignore"):
        return _hi(np.where(k < n, scipy.stats.beta.ppf(1 - s, k + 0.5, n - k + 0.5), 1.0))



def _upper(interval: str, k: np.ndarray, n: int, significance: float) -> np.ndarray:
    match interval:
        case "clopper_pearson":
            return clopper_pearson_upper(k, n, significance)
        case "jeffreys":
            return jeffreys_upper(k, n, significance)
    raise InputError(f"interval must be one of {list(INTERVALS)}; got {interval!r}")



def epsilon_from_rates(fpr: ArrayLike, fnr: ArrayLike, delta: float) -> np.ndarray:
    """ε implied by a test with error rates (FPR, FNR) against an (ε, δ)-DP mechanism.

    Kairouz, Oh, Viswanath 2015 Thm 2.1 / Dong, Roth, Su (arXiv:1905.02383v3) Eq. (5): every
    test satisfies FPR + e^ε FNR ≥ 1 − δ and FNR + e^ε FPR ≥ 1 − δ, hence
    ε ≥ max{log((1 − δ − FNR)/FPR), log((1 − δ − FPR)/FNR), 0}. Fed with UPPER limits on the
    rates, the result is a lower bound on ε.  Bound: lower (given upper limits on the rates).

    Args:
        fpr, fnr: rates in [0, 1] (NaN, negative or > 1 is an InputError).
        delta: δ ∈ [0, 1).

    Returns:
        array of the broadcast shape; +inf where a rate is 0 and the other leaves room.
    """
    d = _delta(delta)
    a, b = _rates("fpr", fpr), _rates("fnr", fnr)
    try:
        np.broadcast_shapes(a.shape, b.shape)
    except ValueError:
        raise InputError(f"fpr and fnr must have broadcastable shapes; got {a.shape} and {b.shape}") from None
    with np.errstate(divide="ignore", invalid="ignore"):
        r1 = np.where(1 - d - b > 0, np.log(np.maximum(1 - d - b, 0)) - np.log(a), -np.inf)
        r2 = np.where(1 - d - a > 0, np.log(np.maximum(1 - d - a, 0)) - np.log(b), -np.inf)
    return np.maximum(np.maximum(np.nan_to_num(r1, nan=-np.inf), np.nan_to_num(r2, nan=-np.inf)), 0.0)

