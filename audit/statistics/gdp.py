"""Gaussian-DP helpers: the μ of a GDP curve through (ε, δ), and the μ-GDP estimate (never a bound)."""

from __future__ import annotations

import math

import numpy as np
import scipy.optimize
import scipy.stats
from numpy.typing import ArrayLike

from accountants.errors import InputError, InputTypeError

from ._checks import _delta, _scores, _significance
from .intervals import clopper_pearson_upper
from .multi_run import _grid
from .results import GdpEstimate


def gdp_mu_for(epsilon: float, delta: float) -> float:
    """The μ of the μ-GDP curve whose privacy profile passes through (ε, δ): δ_μ(ε) = δ.

    Solves Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ) = δ for μ (Dong et al. Cor. 2.13; the left side
    increases in μ) by brentq on [lo, hi]: hi doubled from 1 and lo = 1e-12 shrunk until the gap changes sign.
    Returns +inf when μ would exceed 1e4 (no GDP curve of practical size meets (ε, δ)). δ_μ is a difference
    of two Φ values, so it is resolved to about 1e-16 absolute: for δ below that, μ is overstated.

    Args:
        epsilon: ε, finite and ≥ 0.
        delta: δ ∈ (0, 1).
    """
    d = _delta(delta)
    if d <= 0:
        raise InputError("delta must be > 0 for a finite GDP μ")
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)):
        raise InputTypeError(f"epsilon must be a number; got {type(epsilon).__name__}")
    if not 0 <= epsilon < math.inf:
        raise InputError(f"epsilon must be finite and ≥ 0; got {epsilon!r}")

    def gap(mu: float) -> float:
        return _gdp_delta(mu, epsilon) - d

    hi = 1.0
    while gap(hi) < 0:
        hi *= 2.0
        if hi > 1e4:
            return math.inf
    lo = 1e-12
    while gap(lo) > 0:  # δ so small that μ < 1e-12 (δ_μ(0) ≈ μ/√(2π))
        lo *= 1e-6
        if lo < 1e-290:
            return lo
    return float(scipy.optimize.brentq(gap, lo, hi, xtol=min(1e-12, lo), rtol=1e-12, maxiter=1000))


def _gdp_delta(mu: float, eps: float) -> float:
    n = scipy.stats.norm
    # log-space second term: e^ε Φ(b) = exp(ε + log Φ(b)), finite for large ε
    return float(n.cdf(mu / 2 - eps / mu) - math.exp(eps + n.logcdf(-mu / 2 - eps / mu)))


def _gdp_epsilon(mu: float, delta: float) -> float:
    if mu <= 0:
        return 0.0
    if _gdp_delta(mu, 0.0) <= delta:
        return 0.0
    hi = 1.0
    while _gdp_delta(mu, hi) > delta:
        hi *= 2.0
    return float(scipy.optimize.brentq(lambda e: _gdp_delta(mu, e) - delta, 0.0, hi, xtol=1e-10))


def gdp_estimate(in_scores: ArrayLike, out_scores: ArrayLike, *, delta: float,
                 significance: float = 0.05) -> GdpEstimate:
    """μ-GDP fit μ = max_t [Φ⁻¹(1 − FPR_ub) − Φ⁻¹(FNR_ub)] (both orientations, Bonferroni), then ε(δ).

    Dong, Roth, Su (arXiv:1905.02383v3) Eq. (6) and Cor. 2.13. Both orientations are taken as
    separate terms (never |·|: the absolute value gives ε ≈ 3.5 on null scores, jax_privacy
    PR #270). Bound: none — an estimate that assumes a Gaussian-shaped curve.
    """
    s, d = _significance(significance), _delta(delta)
    xin, xout = _scores("in_scores", in_scores), _scores("out_scores", out_scores)
    g = _grid(xin, xout, 2.0)
    h = g["threshold"].size
    a = clopper_pearson_upper(g["fp_ub_count"], xout.size, s / (2 * h))
    b = clopper_pearson_upper(g["fn_ub_count"], xin.size, s / (2 * h))
    ppf = scipy.stats.norm.ppf
    with np.errstate(divide="ignore", invalid="ignore"):
        mu = np.maximum(ppf(1 - a) - ppf(b), ppf(1 - b) - ppf(a))
    mu = float(np.max(np.nan_to_num(mu, nan=0.0, posinf=0.0, neginf=0.0), initial=0.0))
    mu = max(mu, 0.0)
    return GdpEstimate(mu, _gdp_epsilon(mu, d) if d > 0 else math.inf if mu > 0 else 0.0, d)

