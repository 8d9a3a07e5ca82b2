"""Order-statistics one-run bound (Xiang, Wang, Xiao, Tian, Wang 2025, arXiv:2509.08704v1).

Game (the paper's framework (n, M, H, D, r), its filter releasing the top-r scores): m canaries, each in with
probability ½, ONE run. A decoder guesses every canary's bit with a confidence; the filter releases the r most
confident guesses; T of them are wrong. For a null pair (P_θ, Q_θ) (out-view, in-view) the optimal decoder guesses
the sign of the log likelihood ratio L with confidence |L|; its error at a view is γ = 1/(1 + e^{|L|}). With v the
mixture mass M = (P_θ + Q_θ)/2 of confidence above a level, G_θ(v) the error mass there and γ̄_θ(v) = G_θ(v)/v the
mean error of the top-v mass, the paper's order-statistics theorem (called Theorem 2 in the authors' code,
zihangxiang/tight-privacy-audit-in-one-run onerun/tail.py; Eq. (1) of its docs/IMPLEMENTATION.md) is

    P[T ≤ u] = E_V[ Bin_cdf(u; r, γ̄_θ(V)) ],   V ~ Beta(r + 1, m − r)   (r < m; r = m: Bin_cdf(u; m, G_θ(1))),

V the upper mass of the cut (the most confident guess that is not released): given the cut, the r released
guesses are i.i.d. from the mass above it. It is exact for independent canaries through (P_θ, Q_θ).

Why it is a p-value (our argument, not the paper's wording): if each canary's view is an independent
post-processing of (P_θ, Q_θ) — by Blackwell's theorem (Dong, Roth, Su 2019, arXiv:1905.02383 §2),
exactly when the per-canary channel is f_θ-DP — then any decoder and filter that read the views only (never
the labels) are a randomised decoder of (P_θ, Q_θ); given the views, the errors are independent Bernoulli
with the posterior error of each view, and releasing the r smallest posterior errors makes T stochastically
smallest. So under the null T is stochastically ≥ the law above, and P_null[p(T) ≤ s] ≤ s.

IMPORTANT (assumption): canaries must not interact (each canary's view independent of the others' bits), as
for Dirac gradient canaries on distinct quiet coordinates under Poisson sampling. For interacting canaries
(input canaries, fixed-size batches) a correlated mechanism can beat the product law (e.g. an (ε, δ)-DP
mechanism that reveals every bit at once with probability δ), and only :func:`.one_run.epsilon_one_run` and
:func:`.one_run.gdp_lower_bound_one_run` hold. Null families (typed, ``match``-dispatched):

- :class:`EpsDeltaNull` — the (ε, δ) form: the four-atom tight pair of (ε, δ)-DP; θ = ε. Its lower bound is
  an (ε, δ) lower bound on every mechanism whose canaries do not interact.
- :class:`GaussianNull` — the μ-GDP form: N(0, 1) vs N(μ, 1); θ = μ. A lower bound on μ (as
  :class:`.results.GdpLowerBound`), never an (ε, δ) lower bound.
- :class:`SubsampledGaussianNull` — P = N(0, 1), Q = (1 − q) N(0, 1) + q N(μ, 1), q fixed; θ = μ (the paper's
  SGM family). ε(θ, δ) is an ε lower bound only for a mechanism of that family.
- :class:`ComposedSubsampledGaussianNull` — its T-fold product (T steps of DP-SGD seen by one Dirac canary), q
  and T fixed, θ = μ ∈ [0, ∞] (μ = ∞: the step reveals whether the canary was drawn); γ̄ from a dominating
  discretisation (:mod:`.sgm_composition`). :mod:`.one_run_family` makes it composite over (q, μ).

Data-dependent choices are paid for: the decoder's centre and the ranking read the scores only (free: they
are part of the decoder, covered by the argument above); the number of released guesses r maximised over a
grid fixed before the audit is paid by a union bound (s / #grid), as in :mod:`.one_run`. Tied confidences are
released together (a tie group is never split by array position, issue 11 §2).

Limitation: the theorem is for a fixed r. With tied confidences r moves down to a tie boundary, a count that
depends on the scores (never on the labels); for continuous scores r' = r almost surely, for discrete ones the
level is checked by Monte Carlo, not proven (Laplace scores rounded to 0.25, ε = 2, m = 1000: the (ε, δ) bound
exceeded ε in 7 of 300 seeded runs, 2.3 % at α = 5 %).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import scipy.special
import scipy.stats
from numpy.typing import ArrayLike

from accountants.errors import InputError, InputTypeError

from ._checks import _delta, _scores, _significance, _truth
from .gdp import _gdp_epsilon
from .one_run import MAX_CANARIES, _count, _guesses
from .results import EpsilonLowerBound, GdpLowerBound
from .sgm_composition import composed_epsilon_lower, composed_mean_error, reveal_probability

__all__ = [
    "ORDER_GUESS_FRACTIONS",
    "ComposedSubsampledGaussianNull",
    "EpsDeltaNull",
    "GaussianNull",
    "OrderNull",
    "SubsampledGaussianNull",
    "ceiling_one_run_order",
    "epsilon_one_run_order",
    "gdp_lower_bound_one_run_order",
    "one_run_order_guess_grid",
    "one_run_order_p_value",
    "one_run_order_p_values",
    "one_run_order_theta_lower",
    "order_null_epsilon",
]

ORDER_GUESS_FRACTIONS = (1.0, 0.5, 0.25, 0.1, 0.03)
"""Fractions r/m of released guesses tried by default (fixed before the audit; paid by s / #grid)."""

_CELLS = 4096  # cells of the Beta quantile axis: the p-value is an upper Riemann sum, at most 1/_CELLS above
_CGRID = 8192  # confidence grid for inverting the upper mass v(c); coarser only lowers γ̄ (a larger p-value)


@dataclass(frozen=True, slots=True)
class EpsDeltaNull:
    """Null "every canary's channel is (ε, δ)-DP": the four-atom tight pair; θ = ε.

    Mixture masses: δ with error 0 (the atoms L = ±∞) above 1 − δ with error γ_ε = 1/(1 + e^ε) (L = ±ε), so
    G(v) = γ_ε · max(v − δ, 0) in closed form.
    """

    delta: float

    def __post_init__(self) -> None:
        _delta(self.delta)


@dataclass(frozen=True, slots=True)
class GaussianNull:
    """Null "every canary's channel is μ-GDP": P = N(0, 1), Q = N(μ, 1); θ = μ (Dong et al. 2019 Def. 2.7)."""


@dataclass(frozen=True, slots=True)
class SubsampledGaussianNull:
    """Null P = N(0, 1), Q = (1 − q) N(0, 1) + q N(μ, 1) with q known; θ = μ (the paper's "SGM" family)."""

    q: float

    def __post_init__(self) -> None:
        if isinstance(self.q, bool) or not isinstance(self.q, (int, float)) or not 0.0 < self.q <= 1.0:
            raise InputError(f"q must be in (0, 1]; got {self.q!r}")


@dataclass(frozen=True, slots=True)
class ComposedSubsampledGaussianNull:
    """Null P = N(0, 1)^⊗T, Q = ((1 − q) N(0, 1) + q N(μ, 1))^⊗T with q and T known; θ = μ ∈ [0, ∞]."""

    q: float
    steps: int

    def __post_init__(self) -> None:
        if isinstance(self.q, bool) or not isinstance(self.q, (int, float)) or not 0.0 < self.q <= 1.0:
            raise InputError(f"q must be in (0, 1]; got {self.q!r}")
        if isinstance(self.steps, bool) or not isinstance(self.steps, (int, np.integer)) \
                or not 1 <= self.steps <= 100_000:
            raise InputError(f"steps must be an integer in [1, 100000]; got {self.steps!r}")


OrderNull = EpsDeltaNull | GaussianNull | SubsampledGaussianNull | ComposedSubsampledGaussianNull


_MIN_MU = 1e-6
"""Smallest μ the Gaussian families are evaluated at (:func:`_mean_error` rounds smaller μ up to it)."""
_MAX_MU = 75.0
"""Above this μ the Gaussian families' mean error is taken as 0 (a lower value; Φ(−μ/2) < 1e-300 there)."""
_COMPOSED_MAX_MU = 20.0
"""Above this per-step μ the composed family is evaluated at μ = ∞ (the reveal pair, which dominates it)."""


def _reveal_mean_error(q: float, steps: int, v: np.ndarray) -> np.ndarray:
    """γ̄(v) of the reveal pair (μ = ∞): Q-only mass ρ = 1 − (1 − q)^T (error 0), then one shared atom of
    loss log(1 − ρ) (slope (1 − ρ)/(2 − ρ)); rounded down by 1e-15 for the float error of ρ."""
    rho = reveal_probability(q, steps)
    g = np.maximum(v - rho / 2 - 1e-15, 0.0) * ((1 - rho) / (2 - rho))
    return np.minimum(g / v, 0.5)


def _sgm_log_masses(mu: float, q: float, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(log v(c), log G(c)) for the SGM pair at confidence |L| > c ≥ 0 (q = 1: the Gaussian pair).

    L(x) = log(1 − q + q e^{μx − μ²/2}) increases in x. L > c iff x > x_hi = μ/2 + log((e^c − 1 + q)/q)/μ;
    L < −c iff x < x_lo = μ/2 + log((e^{−c} − 1 + q)/q)/μ (only while e^{−c} > 1 − q). Guess "in" above x_hi
    (wrong when out: ½ P[x > x_hi]) and "out" below x_lo (wrong when in: ½ Q[x < x_lo]).
    """
    lq, ln = math.log(q), scipy.special.log_ndtr
    x_hi = mu / 2 + (np.log(np.expm1(c) + q) - lq) / mu
    right_p, right_q1 = ln(-x_hi), ln(mu - x_hi)  # P[x > x_hi]; N(μ, 1)[x > x_hi]
    arg = q + np.expm1(-c)  # > 0 iff the left region exists
    has_left = arg > 0
    x_lo = mu / 2 + (np.log(np.where(has_left, arg, 1.0)) - lq) / mu
    left_p = np.where(has_left, ln(x_lo), -np.inf)  # P[x < x_lo]
    left_q1 = np.where(has_left, ln(x_lo - mu), -np.inf)  # N(μ, 1)[x < x_lo]
    l1q = math.log1p(-q) if q < 1 else -np.inf
    with np.errstate(divide="ignore"):
        right_q = np.logaddexp(l1q + right_p, lq + right_q1)  # Q[x > x_hi]
        left_q = np.logaddexp(l1q + left_p, lq + left_q1)  # Q[x < x_lo]
        log_v = np.logaddexp(np.logaddexp(right_p, right_q), np.logaddexp(left_p, left_q)) - math.log(2)
        log_g = np.logaddexp(right_p, left_q) - math.log(2)
    return log_v, log_g


def _sgm_c_for(mu: float, q: float, log_v: float) -> float:
    """A confidence c with log v(c) ≤ log_v (doubling, then 80 bisections; returns the upper, smaller-mass end)."""
    lo, hi = 0.0, 1.0
    while _sgm_log_masses(mu, q, np.array([hi]))[0][0] > log_v:
        lo, hi = hi, 2 * hi
        if hi > 1e6:
            return hi
    for _ in range(80):
        mid = 0.5 * (lo + hi)
        if _sgm_log_masses(mu, q, np.array([mid]))[0][0] > log_v:
            lo = mid
        else:
            hi = mid
    return hi


def _mean_error(null: OrderNull, theta: float, v: np.ndarray) -> np.ndarray:
    """γ̄_θ(v) for increasing v ∈ (0, 1], rounded DOWN (a smaller mean error only raises the p-value).

    SGM/Gaussian: v(c) is tabulated on a uniform confidence grid spanning [c(v_max), c(v_min)] and each v takes
    γ̄ at the first grid point with mass ≤ v (γ̄ increases with v, so this is a lower value).
    """
    match null:
        case EpsDeltaNull(delta=d):
            g = 0.5 if theta <= 0 else 1.0 / (1.0 + math.exp(min(theta, 700.0)))
            return g * np.maximum(v - d, 0.0) / v
        case GaussianNull() | SubsampledGaussianNull():
            q = 1.0 if isinstance(null, GaussianNull) else float(null.q)
            if theta <= 0:
                return np.full_like(v, 0.5)
            # γ̄_θ does not increase with θ (the family is Blackwell-ordered in μ), so evaluating a tiny θ at
            # _MIN_MU rounds γ̄ down: the sound direction. Below it, x_hi = μ/2 + log(·)/μ overflows (NaN).
            theta = max(theta, _MIN_MU)
            if theta > _MAX_MU:  # γ̄ < Φ(−μ/2) underflows; 0 is a lower value (p-values then 1: sound)
                return np.zeros_like(v)
            c_small = _sgm_c_for(theta, q, math.log(float(v[-1])))
            c_big = _sgm_c_for(theta, q, math.log(float(v[0])))
            c_lo = 0.0 if v[-1] >= 1.0 else max(0.0, c_small - 1e-9 * (1 + c_small))
            c = np.linspace(c_lo, c_big, _CGRID)
            log_vc, log_gc = _sgm_log_masses(theta, q, c)
            log_vc = np.minimum.accumulate(log_vc)  # non-increasing in c (guards rounding)
            idx = np.searchsorted(-log_vc, -np.log(v), side="left")  # first j with log v(c_j) ≤ log v
            idx = np.minimum(idx, c.size - 1)
            return np.exp(np.minimum(log_gc[idx] - log_vc[idx], math.log(0.5)))
        case ComposedSubsampledGaussianNull(q=q, steps=t):
            if theta <= 0:
                return np.full_like(v, 0.5)
            if theta > _COMPOSED_MAX_MU:  # includes μ = ∞
                return _reveal_mean_error(float(q), int(t), v)
            if q >= 1.0:  # T Gaussian steps of μ: one Gaussian step of μ√T (exact)
                return _mean_error(GaussianNull(), theta * math.sqrt(int(t)), v)
            return composed_mean_error(float(q), max(theta, _MIN_MU), int(t), v)
        case _:
            raise InputTypeError(f"null must be an EpsDeltaNull, GaussianNull, SubsampledGaussianNull or "
                                 f"ComposedSubsampledGaussianNull; got {type(null).__name__}")


@functools.lru_cache(maxsize=64)
def _cut_quantiles(m: int, r: int, cells: int = _CELLS) -> np.ndarray:
    """Left ends v_k = F⁻¹(k/K), k = 1..K−1, of the K cells of V ~ Beta(r + 1, m − r) (k = 0 is v = 0)."""
    t = np.arange(1, cells) / cells
    v = scipy.stats.beta.ppf(t, r + 1, m - r)
    return np.maximum.accumulate(np.clip(v, 1e-300, 1.0))


def one_run_order_p_value(null: OrderNull, theta: float, m: int, guesses: int, errors: int, *,
                          cells: int = _CELLS) -> float:
    """P[T ≤ errors] under the null θ (Xiang et al. 2025, the order-statistics theorem; module doc).  Bound: upper.

    E_V[Bin_cdf(u; r, γ̄_θ(V))] with V ~ Beta(r + 1, m − r), evaluated as an upper Riemann sum on K = ``cells``
    equal-probability cells of V (the integrand decreases in V: each cell takes its left end, at most 1/K above
    the integral) with γ̄ rounded down (:func:`_mean_error`). r = m: Bin_cdf(u; m, G_θ(1)).

    Args:
        null: the null family.
        theta: its parameter θ ≥ 0 (ε or μ).
        m: canaries, an integer in [1, MAX_CANARIES].
        guesses: r ∈ [1, m] released guesses.
        errors: u ∈ [0, r] wrong released guesses.
        cells: K, an integer in [2, 2^20] (p-values below 1/K are not resolved).
    """
    m = _count("m", m, 1, MAX_CANARIES)
    r = _count("guesses", guesses, 1, m)
    u = _count("errors", errors, 0, r)
    cells = _count("cells", cells, 2, 2 ** 20)
    if isinstance(theta, bool) or not isinstance(theta, (int, float, np.floating)) or not theta >= 0:
        raise InputError(f"theta must be a number ≥ 0; got {theta!r}")
    if u >= r:
        return 1.0
    if r == m:
        e_opt = float(_mean_error(null, float(theta), np.ones(1))[0])
        return float(min(1.0, scipy.stats.binom.cdf(u, m, e_opt)))
    v = _cut_quantiles(m, r, int(cells))
    h = scipy.special.bdtr(u, r, _mean_error(null, float(theta), v))  # Bin_cdf(u; r, ·), vectorised
    return float(min(1.0, (1.0 + float(np.sum(h))) / int(cells)))


def one_run_order_p_values(null: OrderNull, theta: float, m: int, guesses: int) -> np.ndarray:
    """:func:`one_run_order_p_value` for every error count u = 0..r at once, shape (r + 1,).  Bound: upper.

    One table per (θ, m, r): what a Monte Carlo check of many outcomes at the same null needs.
    """
    m = _count("m", m, 1, MAX_CANARIES)
    r = _count("guesses", guesses, 1, m)
    if isinstance(theta, bool) or not isinstance(theta, (int, float, np.floating)) or not theta >= 0:
        raise InputError(f"theta must be a number ≥ 0; got {theta!r}")
    u = np.arange(r + 1)
    if r == m:
        e_opt = float(_mean_error(null, float(theta), np.ones(1))[0])
        out = scipy.stats.binom.cdf(u, m, e_opt)
    else:
        g = _mean_error(null, float(theta), _cut_quantiles(m, r))
        out = (1.0 + scipy.stats.binom.cdf(u[:, None], r, g[None, :]).sum(axis=1)) / _CELLS
    out = np.minimum(out, 1.0)
    out[-1] = 1.0
    return out


def one_run_order_theta_lower(null: OrderNull, m: int, guesses: int, errors: int, significance: float,
                              *, rejected: float = 0.0) -> float:
    """sup{θ : p(θ) < significance}: the largest null parameter rejected at this level.  Bound: lower on θ.

    The p-value increases in θ (a more informative pair has a smaller error mass at every v, so few errors are
    less surprising), so the rejected θ form an interval [0, θ*). Search: from ``rejected`` (a θ known to be
    rejected, 0 by default) doubling by 1, 2, 4, … up to 64, then bisection until the bracket is narrower than
    1e-6 (1 + θ); returns the rejected end, so the rounding is downward.
    """
    s = _significance(significance)
    # the Riemann sum is at least 1/K and at most 1/K high: K ≥ 16/s keeps both below s/16 (K ≤ 2^20);
    # log2(16) − log2(s), not log2(16/s), which overflows for a subnormal s
    cells = int(min(2 ** 20, max(_CELLS, 2 ** math.ceil(4.0 - math.log2(s)))))

    def reject(t: float) -> bool:
        return one_run_order_p_value(null, t, m, guesses, errors, cells=cells) < s

    if rejected <= 0 and not reject(0.0):
        return 0.0
    lo, step = float(rejected), 1.0
    while reject(lo + step):
        lo, step = lo + step, 2 * step
        if lo > 64.0:
            return 64.0
    hi = lo + step
    while hi - lo > 1e-6 * (1.0 + lo):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if reject(mid) else (lo, mid)
    return lo


def _sgm_delta(mu: float, q: float, eps: float) -> float:
    """δ(ε) = Q[L > ε] − e^ε P[L > ε] of the SGM pair (the direction Q vs P, as in the authors' table)."""
    if eps > 700:
        return 0.0
    x = mu / 2 + (math.log(math.expm1(eps) + q) - math.log(q)) / mu
    qq = (1 - q) * scipy.special.ndtr(-x) + q * scipy.special.ndtr(mu - x)
    return float(max(qq - math.exp(eps) * scipy.special.ndtr(-x), 0.0))


def order_null_epsilon(null: OrderNull, theta: float, delta: float) -> float:
    """ε at ``delta`` of the null member θ (EpsDeltaNull: θ itself; Gaussian: Dong et al. Cor. 2.13)."""
    d = _delta(delta)
    match null:
        case EpsDeltaNull():
            return float(theta)
        case GaussianNull():
            return float(_gdp_epsilon(theta, d)) if theta > 0 else 0.0
        case SubsampledGaussianNull(q=q):
            if theta <= 0 or _sgm_delta(theta, q, 0.0) <= d:
                return 0.0
            lo, hi = 0.0, 1.0
            while _sgm_delta(theta, q, hi) > d:
                lo, hi = hi, 2 * hi
            for _ in range(100):
                mid = 0.5 * (lo + hi)
                lo, hi = (mid, hi) if _sgm_delta(theta, q, mid) > d else (lo, mid)
            return hi
        case ComposedSubsampledGaussianNull(q=q, steps=t):
            return 0.0 if theta <= 0 else composed_epsilon_lower(float(q), float(theta), int(t), d)
        case _:
            raise InputTypeError(f"null must be an OrderNull; got {type(null).__name__}")


def one_run_order_guess_grid(m: int) -> np.ndarray:
    """Default released-guess counts: ⌈f·m⌉ for f in :data:`ORDER_GUESS_FRACTIONS` (distinct, decreasing)."""
    m = _count("m", m, 1, MAX_CANARIES)
    return np.array(sorted({max(1, math.ceil(f * m)) for f in ORDER_GUESS_FRACTIONS}, reverse=True))


def _two_sided(scores: ArrayLike, truth: ArrayLike, center: float | None) -> tuple[np.ndarray, np.ndarray]:
    """(confidences, correct) of the two-sided decoder: "in" iff score ≥ centre; confidence |score − centre|.

    The centre defaults to the median of the scores (a function of the scores only, so it is free).
    """

    x = _scores("scores", scores)
    if center is None:
        c0 = float(np.median(x))
    elif isinstance(center, bool) or not isinstance(center, (int, float)) or not math.isfinite(center):
        raise InputError(f"center must be a finite number or None; got {center!r}")
    else:
        c0 = float(center)
    return np.abs(x - c0), (x >= c0) == _truth(truth, x.size)


def _order_bound(null: OrderNull, scores, truth, significance, guesses, center):
    """(θ_lower, s, strategy, n_in, n_out, #grid, r, v) maximised over the guess grid at s / #grid."""
    s = _significance(significance)
    conf, correct = _two_sided(scores, truth, center)
    m = conf.size
    if guesses is None:
        guesses = one_run_order_guess_grid(m)
    # reuse the one-run tie rule: rank by confidence, r moved down to a tie-group boundary
    _, grid, r_eff, correct_at = _guesses(conf, correct, guesses)
    sh = s / grid.size
    best = (0.0, None, None)
    for r in np.unique(r_eff[r_eff > 0])[::-1]:
        v = int(correct_at[r - 1])
        if best[0] > 0 and not one_run_order_p_value(null, best[0], m, int(r), int(r) - v) < sh:
            continue  # this r does not reject the best θ so far: its sup is no larger (p increases in θ)
        th = one_run_order_theta_lower(null, m, int(r), int(r) - v, sh, rejected=best[0])
        if th > best[0] or best[1] is None:
            best = (th, int(r), v)
    n_in = int(np.sum(np.asarray(truth).reshape(-1).astype(bool)))
    strategy = f"bonferroni over {grid.size} guess counts (two-sided guesses, tied confidences guessed together)"
    return best[0], s, strategy, n_in, m - n_in, int(grid.size), best[1], best[2]


def epsilon_one_run_order(scores: ArrayLike, truth: ArrayLike, *, delta: float, significance: float = 0.05,
                          guesses: ArrayLike | None = None, center: float | None = None) -> EpsilonLowerBound:
    """Order-statistics one-run ε lower bound, (ε, δ) form.  Bound: lower (canaries must not interact).

    Xiang et al. 2025 (arXiv:2509.08704v1), the order-statistics theorem (module doc), with the (ε, δ) null
    (:class:`EpsDeltaNull`): guess "in" iff score ≥ ``center`` (default: the median score), rank by
    |score − center|, release the r most confident for each r of :func:`one_run_order_guess_grid` (or ``guesses``), and
    return the largest ε whose tight pair is rejected at s / #grid, maximised over r. With probability ≥ 1 − s the
    mechanism is not (ε, δ)-DP for any ε ≤ value, PROVIDED each canary's view is independent of the other canaries'
    bits (module doc).

    IMPORTANT: scores are oriented higher ⇒ member.
    """
    d = _delta(delta)
    th, s, strategy, n_in, n_out, h, r, v = _order_bound(EpsDeltaNull(d), scores, truth, significance, guesses,
                                                         center)
    return EpsilonLowerBound(th, 1 - s, d, "one_run_order", strategy, None, n_in=n_in, n_out=n_out,
                             n_hypotheses=h, guesses=r, correct=v)


def gdp_lower_bound_one_run_order(scores: ArrayLike, truth: ArrayLike, *, delta: float,
                                  significance: float = 0.05, guesses: ArrayLike | None = None,
                                  center: float | None = None) -> GdpLowerBound:
    """Order-statistics one-run bound, μ-GDP form: a lower bound on the GDP μ.  Bound: gdp_mu_lower.

    Xiang et al. 2025 (arXiv:2509.08704v1), the order-statistics theorem (module doc), with the Gaussian null
    (:class:`GaussianNull`); same decoder, grid and union bound as :func:`epsilon_one_run_order`. With probability ≥
    1 − s the per-canary channel is not μ-GDP for any μ ≤ ``mu_lower`` (canaries must not interact). IMPORTANT: NOT
    an (ε, δ) lower bound; ``refuted_curve_epsilon`` is the ε at ``delta`` of the refuted GDP curve (as for
    :func:`.one_run.gdp_lower_bound_one_run`).
    """
    d = _delta(delta)
    if d <= 0:
        raise InputError("delta must be > 0 for the GDP form (GDP curves have δ(ε) > 0)")
    mu, s, strategy, n_in, n_out, h, r, v = _order_bound(GaussianNull(), scores, truth, significance, guesses,
                                                         center)
    return GdpLowerBound(mu, order_null_epsilon(GaussianNull(), mu, d), 1 - s, d, "one_run_order_gdp", strategy,
                         n_in, n_out, h, r, v)


def ceiling_one_run_order(m: int, *, delta: float, significance: float = 0.05) -> float:
    """The largest (ε, δ)-form order-statistics bound for m canaries: every released guess right at every r.

    Bound: upper on :func:`epsilon_one_run_order` with the default grid (a perfect two-sided guesser: no error at
    any r, the smallest possible p-value at every θ).
    """
    m = _count("m", m, 2, MAX_CANARIES)
    truth = np.arange(m) % 2 == 0
    return epsilon_one_run_order(np.where(truth, 1.0 + np.arange(m), -1.0 - np.arange(m)), truth, delta=delta,
                                 significance=significance).value

