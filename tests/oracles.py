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


def restricted_renyi_at(family: str, alpha: float, coeffs: list[float], shift: float = 1.0,
                        scale: float = 1.0, p_mix: list[tuple[float, float]] | None = None,
                        q_mix: list[tuple[float, float]] | None = None, dps: int = 25) -> tuple[float, list[float]]:
    """The restricted Rényi objective of Chaudhuri et al. 2019 (Lemma 3 with eq. (3)) at one polynomial h, and
    the gradient of its α-divergence objective in h's coefficients, by mpmath quadrature.

    P = family(0, scale), Q = family(shift, scale) (Laplace or Gaussian), or the mixtures
    p_mix / q_mix = [(weight, location), ...] of that family; h(x) = Σ_j coeffs[j] x^j,
    J(h) = E_P h − C E_Q |h|^A − 1/(α² − α) with A = α/(α − 1), C = (α − 1)^A/α; returns
    (log(1 + α(α − 1) J)/(α − 1), ∂J/∂coeffs). J is concave in the coefficients, so a zero gradient
    certifies that h is the maximiser over polynomials of that degree: the value is then the
    restricted divergence itself, not only a lower bound. Breakpoints: the real roots of h (the kinks of
    |h|^A) and every component's centre (the Laplace kinks)."""
    p_mix = p_mix or [(1.0, 0.0)]
    q_mix = q_mix or [(1.0, shift)]
    with mp.workdps(dps):
        a, s = mp.mpf(alpha), mp.mpf(scale)
        big_a = a / (a - 1)
        c = (a - 1) ** big_a / a
        cs = [mp.mpf(x) for x in coeffs]

        def one(x, m):
            return mp.npdf(x, m, s) if family == "gaussian" else mp.exp(-abs(x - m) / s) / (2 * s)

        def dp(x):
            return mp.fsum(mp.mpf(w) * one(x, mp.mpf(m)) for w, m in p_mix)

        def dq(x):
            return mp.fsum(mp.mpf(w) * one(x, mp.mpf(m)) for w, m in q_mix)

        def h(x):
            return mp.fsum(cj * x**j for j, cj in enumerate(cs))

        roots = []
        if len(cs) > 1 and any(cs[1:]):
            top = max(j for j, cj in enumerate(cs) if cj != 0)
            roots = [r.real for r in mp.polyroots(cs[top::-1], maxsteps=200, extraprec=60) if abs(r.imag) < 1e-20]
        pts = sorted({-mp.inf, *(mp.mpf(m) for _, m in p_mix + q_mix), *roots, mp.inf})
        ep = mp.quad(lambda x: h(x) * dp(x), pts)
        eq = mp.quad(lambda x: abs(h(x)) ** big_a * dq(x), pts)
        j_val = ep - c * eq - 1 / (a * a - a)
        grad = [mp.quad(lambda x, i=i: x**i * dp(x), pts)
                - c * big_a * mp.quad(lambda x, i=i: mp.sign(h(x)) * abs(h(x)) ** (big_a - 1) * x**i * dq(x), pts)
                for i in range(len(cs))]
        return float(mp.log(1 + a * (a - 1) * j_val) / (a - 1)), [float(g) for g in grad]


def gaussian_mixture_kl_at(coeffs: list[float] | None, sigma: float, p_mix: list[tuple[float, float]],
                           q_mix: list[tuple[float, float]], dps: int = 25) -> tuple[float, list[float]]:
    """KL between Gaussian mixtures P, Q = [(weight, location), ...] of std σ, by mpmath quadrature.

    coeffs None: the full KL(P‖Q) = ∫ p log(p/q), gradient []. Otherwise the restricted KL objective of
    Chaudhuri et al. 2019 in f-form, J(h) = E_P h − E_Q e^{h−1} at h(x) = Σ_j coeffs[j] x^j, and ∂J/∂coeffs
    (concave in the coefficients: a vanishing gradient certifies the maximum over the class)."""
    with mp.workdps(dps):
        s = mp.mpf(sigma)

        def dens(mix, x):
            return mp.fsum(mp.mpf(w) * mp.npdf(x, mp.mpf(m), s) for w, m in mix)

        pts = sorted({-mp.inf, *(mp.mpf(m) for _, m in p_mix + q_mix), mp.inf})
        if coeffs is None:
            return float(mp.quad(lambda x: dens(p_mix, x) * mp.log(dens(p_mix, x) / dens(q_mix, x)), pts)), []
        cs = [mp.mpf(c) for c in coeffs]

        def h(x):
            return mp.fsum(cj * x**j for j, cj in enumerate(cs))

        j_val = (mp.quad(lambda x: h(x) * dens(p_mix, x), pts)
                 - mp.quad(lambda x: mp.exp(h(x) - 1) * dens(q_mix, x), pts))
        grad = [mp.quad(lambda x, i=i: x**i * dens(p_mix, x), pts)
                - mp.quad(lambda x, i=i: x**i * mp.exp(h(x) - 1) * dens(q_mix, x), pts) for i in range(len(cs))]
        return float(j_val), [float(g) for g in grad]
