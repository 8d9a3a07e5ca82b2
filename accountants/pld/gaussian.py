"""Exact privacy profile of composed Gaussian mechanisms (no subsampling): μ-GDP in closed form.

T Gaussian steps with sensitivity s and noise σ compose to μ-GDP with μ = √(Σ T_i s_i²/σ_i²)
(Dong, Roth, Su 2022, Cor. 3.3), whose privacy profile is exactly

    δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ)

(Balle & Wang 2018, Thm 8; Dong, Roth, Su 2022, Cor. 2.13). It is evaluated in 60-digit mpmath,
so the float64 round-off of a lattice composition (which floors the reachable δ near 1e-12) does
not arise; ε(δ) is found by bisection on that decreasing function and both ends are rounded
outwards to float64. The PLD accountant uses this whenever every step is an unsubsampled Gaussian.
"""

from __future__ import annotations

import math

import mpmath

from .. import validate as check

__all__ = ["gdp_delta", "gdp_delta_bracket", "gdp_epsilon_bracket"]

_DPS = 60
_ITERS = 400
_MAX_MU = 1e6


def _delta_mp(eps: mpmath.mpf, mu: mpmath.mpf) -> mpmath.mpf:
    a = mpmath.ncdf(mu / 2 - eps / mu)
    b = mpmath.exp(eps) * mpmath.ncdf(-mu / 2 - eps / mu)
    return a - b


def gdp_delta(epsilon: float, mu: float) -> float:
    """δ(ε) of μ-GDP (60-digit evaluation, rounded to the nearest float64).  Bound: exact."""
    check.in_range(0.0, _MAX_MU, closed="right", mu=mu)
    with mpmath.workdps(_DPS):
        return float(max(_delta_mp(mpmath.mpf(epsilon), mpmath.mpf(mu)), 0))


def gdp_delta_bracket(epsilon: float, mu: float) -> tuple[float, float]:
    """(lower, upper) float64 bracket on δ(ε) of μ-GDP: the 60-digit value rounded outwards."""
    check.in_range(0.0, _MAX_MU, closed="right", mu=mu)
    with mpmath.workdps(_DPS):
        d = _delta_mp(mpmath.mpf(epsilon), mpmath.mpf(mu))
        d = max(d, mpmath.mpf(0))
        f = float(d)
        lo = math.nextafter(f, -math.inf) if f > 0 else 0.0
        return max(0.0, min(lo, f)), min(1.0, math.nextafter(f, math.inf))


def gdp_epsilon_bracket(delta: float, mu: float) -> tuple[float, float]:
    """(lower, upper) float64 bracket on ε(δ) = inf{ε ≥ 0 : δ(ε) ≤ δ} of μ-GDP.  Bound: [lower, upper].

    Bisection in 60-digit arithmetic to a relative width of ~1e-30, then rounded outwards. For
    μ > 1e6 (ε > 5e11) the trivial bracket [0, inf] is returned.
    """
    check.in_range(0.0, 1.0, closed="neither", delta=delta)
    check.positive(mu=mu)
    check.finite(mu=mu)
    if mu > _MAX_MU:
        return 0.0, math.inf   # ε ≈ μ²/2 > 5e11: left to the RDP bound (mpmath's erfc overflows)
    with mpmath.workdps(_DPS):
        m, d = mpmath.mpf(mu), mpmath.mpf(delta)
        if _delta_mp(mpmath.mpf(0), m) <= d:
            return 0.0, 0.0
        lo, hi = mpmath.mpf(0), m * m / 2 + 10 * m + 1
        while _delta_mp(hi, m) > d:           # δ(ε) → 0 as ε → ∞: terminates
            lo, hi = hi, 2 * hi
        for _ in range(_ITERS):
            if hi - lo <= mpmath.mpf(10) ** (-30) * hi:
                break
            mid = (lo + hi) / 2
            if _delta_mp(mid, m) > d:
                lo = mid
            else:
                hi = mid
        flo, fhi = float(lo), float(hi)
        lower = math.nextafter(flo, -math.inf) if math.isfinite(flo) else math.nextafter(math.inf, 0.0)
        upper = math.nextafter(fhi, math.inf) if math.isfinite(fhi) else math.inf
        return max(0.0, lower), upper
