"""High-precision reference computations (mpmath) shared by the tests.

Each oracle is an independent derivation, not a copy of the code under test: the subsampled
Gaussian RDP is evaluated by direct quadrature of its defining integral with breakpoints at the
two modes of the integrand, and (at integer orders) by the binomial series.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import mpmath as mp

REFERENCE = Path(__file__).resolve().parent / "data" / "reference_values.json"


@functools.cache
def _reference() -> dict:
    if not REFERENCE.is_file():  # an error, never a skip: a test that silently loses its oracle cannot fail
        raise FileNotFoundError(f"{REFERENCE} is missing; it ships with the repository (tests/data/README.md)")
    return json.loads(REFERENCE.read_text())


def reference_records(family: str) -> list[dict]:
    """Records of one family of tests/data/reference_values.json (provenance: tests/data/README.md).

    Raises ``KeyError`` for a family the file does not hold, so a typo cannot empty a parameter set."""
    records = [r for r in _reference()["records"] if r["family"] == family]
    if not records:
        raise KeyError(f"family {family!r} not in {REFERENCE.name}; known: {sorted(_reference()['family_counts'])}")
    return records


def sgm_rdp_quad(alpha: float, q: float, sigma: float, dps: int = 50) -> mp.mpf:
    """RDP of the Poisson-subsampled Gaussian by quadrature of
    A = ∫ N(z; 0, σ²) (1 − q + q e^{(2z−1)/(2σ²)})^α dz, in log space (Mironov et al. 2019 Eq. (3)).

    The integrand has modes near z = 0 and z = α, each of width σ; the interval is split there
    and at the crossover z0 = σ² log((1−q)/q) + 1/2 so that tanh-sinh quadrature resolves both.
    """
    with mp.workdps(dps):
        a, q, s = mp.mpf(alpha), mp.mpf(q), mp.mpf(sigma)

        def f(z):
            return mp.npdf(z, 0, s) * (1 - q + q * mp.e ** ((2 * z - 1) / (2 * s * s))) ** a

        z0 = s * s * mp.log((1 - q) / q) + mp.mpf(1) / 2 if q < 1 else mp.mpf(0)
        pts = sorted({mp.mpf(0), a, z0, -12 * s, a + 12 * s, a - 12 * s, 12 * s})
        pts = [-mp.inf, *pts, mp.inf]

        # A − 1 keeps precision for tiny RDP: integrate h = (1 + q(L − 1))^α − 1 − αq(L − 1) ≥ 0.
        def h(z):
            L = mp.e ** ((2 * z - 1) / (2 * s * s))
            return mp.npdf(z, 0, s) * ((1 + q * (L - 1)) ** a - 1 - a * q * (L - 1))

        am1 = mp.quad(h, pts, maxdegree=10)
        return mp.log1p(am1) / (a - 1)


def sgm_rdp_series(alpha: int, q: float, sigma: float, dps: int = 50) -> mp.mpf:
    """RDP at integer α by the finite binomial series (Mironov et al. 2019 §3.3)."""
    with mp.workdps(dps):
        q, s = mp.mpf(q), mp.mpf(sigma)
        a = int(alpha)
        am1 = mp.fsum(
            mp.binomial(a, k) * (1 - q) ** (a - k) * q**k * mp.expm1(mp.mpf(k * k - k) / (2 * s * s))
            for k in range(2, a + 1)
        )
        return mp.log1p(am1) / (a - 1)


def gdp_epsilon_mp(mu: float, delta: float, dps: int = 50) -> float:
    """Exact ε(δ) of μ-GDP by bisection on δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ) (Balle & Wang 2018 Thm 8;
    Dong, Roth, Su 2022 Cor. 2.13), in mpmath at ``dps`` digits; returns the upper end of the bracket."""
    with mp.workdps(dps):
        m, d = mp.mpf(mu), mp.mpf(delta)

        def excess(e):
            return mp.ncdf(m / 2 - e / m) - mp.exp(e) * mp.ncdf(-m / 2 - e / m) - d

        lo, hi = mp.mpf(0), m * m / 2 + 20 * m + 10
        for _ in range(300):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if excess(mid) > 0 else (lo, mid)
        return float(hi)
