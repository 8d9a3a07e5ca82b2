"""One-run design: m canaries in ONE training run (Steinke, Nasr, Jagielski 2023; Mahloujifar et al. 2024).

Guesses depend on the scores only: the r highest scores are guessed "member", and r is moved down to
the nearest tie-group boundary so that tied scores are guessed together (never split by their
position in the array, which may correlate with membership: issue 11 §2).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import scipy.special
import scipy.stats
from numpy.typing import ArrayLike

from accountants.errors import InputError, InputTypeError

from ._checks import _delta, _scores, _significance, _truth
from .gdp import _gdp_epsilon
from .results import EpsilonLowerBound, GdpLowerBound

MAX_CANARIES = 10_000_000
"""Cap on m (and so on the correct-guess count): the δ term of :func:`one_run_p_value` allocates O(correct)."""


def _count(name: str, v: object, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        if isinstance(v, (float, np.floating)) and math.isfinite(v) and v == int(v):
            v = int(v)
        else:
            raise InputTypeError(f"{name} must be an integer; got {v!r}")
    if not lo <= v <= hi:
        raise InputError(f"{name} must be an integer in [{lo}, {hi}]; got {v!r}")
    return int(v)


def one_run_p_value(m: int, guesses: int, correct: int, eps: float, delta: float) -> float:
    """p-value of ≥ ``correct`` right guesses out of ``guesses`` under "M is (ε, δ)-DP".  Bound: upper on the p-value.

    Steinke, Nasr, Jagielski 2023 (arXiv:2305.08846) Thm 3.1 / Prop. 5.1: with q = e^ε/(1+e^ε),
    β = P[Bin(r, q) ≥ v]; for δ > 0, p = min(1, β + 2mδ · max_{i=1..v} P[v > Bin(r, q) ≥ v − i] / i).

    Args:
        m: canaries, an integer in [1, :data:`MAX_CANARIES`].
        guesses: r, an integer in [0, m].
        correct: v, an integer in [0, r].
        eps: ε ≥ 0 (not NaN; +inf allowed).
        delta: δ ∈ [0, 1).
    """
    m = _count("m", m, 1, MAX_CANARIES)
    guesses = _count("guesses", guesses, 0, m)
    correct = _count("correct", correct, 0, guesses)
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating, np.integer)):
        raise InputTypeError(f"eps must be a number; got {type(eps).__name__}")
    if not eps >= 0:
        raise InputError(f"eps must be ≥ 0; got {eps!r}")
    delta = _delta(delta)
    q = 1.0 / (1.0 + math.exp(-eps)) if eps < 800 else 1.0
    beta = float(scipy.stats.binom.sf(correct - 1, guesses, q))
    if delta == 0 or correct == 0:
        return min(max(beta, 0.0), 1.0)
    alpha = _delta_term(guesses, correct, q, beta)
    return min(1.0, max(beta + alpha * delta * 2 * m, 0.0))


_EXACT_TERMS = 4096  # up to this many right guesses the δ term is computed term by term, as printed
_WINDOW_SD = 12.0  # the binomial's bulk: mean ± 12 sd (outside it a negligible mass, below 1e-20 in tests)


def _delta_term(r: int, v: int, q: float, beta: float) -> float:
    """max_{i=1..v} P[v − i ≤ Bin(r, q) ≤ v − 1] / i, the δ term of Prop. 5.1; exact or an upper bound.

    Up to :data:`_EXACT_TERMS` right guesses: every i, as printed (O(v) binomial tails). Beyond, in
    O(sd): with the bulk B = [rq − 12 sd, rq + 12 sd] and T = P[Bin ∉ B], every window [v − i, v − 1]
    holds at most its mass inside B plus T; windows that reach below B hold B's part of
    [B_lo, v − 1] and are longer than the one starting at B_lo; windows above B hold at most T. So
    max(T, max_{k ∈ B, k < v} (P[k ≤ Bin ≤ min(v − 1, B_hi)] + T)/(v − k)) bounds the term from above
    (a larger p-value: the ε bound can only get smaller, i.e. stays sound), and exceeds it by at most T.
    """
    if v <= _EXACT_TERMS:
        i = np.arange(1, v + 1)
        tail = scipy.stats.binom.sf(v - i - 1, r, q) - beta
        return float(np.max(tail / i, initial=0.0))
    sd = math.sqrt(r * q * (1.0 - q))
    lo = max(0, math.floor(r * q - _WINDOW_SD * sd) - 1)
    hi = min(r, math.ceil(r * q + _WINDOW_SD * sd) + 1)
    outside = float(scipy.stats.binom.cdf(lo - 1, r, q) + scipy.stats.binom.sf(hi, r, q)) if lo > 0 or hi < r \
        else 0.0
    top = min(v - 1, hi)
    if top < lo:  # every window lies below the bulk: its mass is at most T
        return outside
    k = np.arange(top, lo - 1, -1)  # from v − 1 (or B_hi) down to B_lo
    mass = np.cumsum(scipy.stats.binom.pmf(k, r, q)) * (1.0 + 1e-9)  # rounding of the sum, upward
    return float(max(outside, np.max((mass + outside) / (v - k))))


def _sup_eps(reject, eps_max: float = 64.0) -> float:
    """sup{x ≥ 0 : reject(x)} for a predicate true on [0, x*): doubling from 1 (capped at ``eps_max``), then
    bisection until the bracket is narrower than an absolute 1e-9; returns the lower (rejected) end."""
    if not reject(0.0):
        return 0.0
    lo, hi = 0.0, 1.0
    while reject(hi):
        lo, hi = hi, 2 * hi
        if hi > eps_max:
            return eps_max
    for _ in range(60):  # 60 halvings of a bracket ≤ 32 wide reach the 1e-9 stop
        mid = 0.5 * (lo + hi)
        if reject(mid):
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-9:
            break
    return lo


def one_run_guess_grid(m: int) -> np.ndarray:
    """Numbers of guesses tried by the one-run bounds: m, m/2, m/4, …, ≥ 1 (fixed before the audit)."""
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or not 1 <= m <= MAX_CANARIES:
        raise InputError(f"m must be an integer in [1, {MAX_CANARIES}]; got {m!r}")
    g = {int(m)}
    r = int(m)
    while r > 1:
        r = max(1, r // 2)
        g.add(r)
    return np.array(sorted(g, reverse=True))


def _guesses(scores, truth, guesses) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Validated scores, truth, guess grid, and for each grid r the tie-respecting count r' ≤ r (0: none)."""
    x = _scores("scores", scores)
    if x.size > MAX_CANARIES:
        raise InputError(f"scores must hold at most {MAX_CANARIES} canaries (MAX_CANARIES); got {x.size}")
    y = _truth(truth, x.size)
    m = x.size
    if guesses is None:
        grid = one_run_guess_grid(m)
    else:
        g = np.asarray(guesses).reshape(-1)
        if g.size == 0 or not np.issubdtype(g.dtype, np.number) or not np.all(np.isfinite(g)) \
                or np.any(g != np.round(g)) or g.min() < 1 or g.max() > m:
            raise InputError(f"guesses must be integers in [1, {m}]")
        grid = g.astype(np.int64)
    order = np.argsort(-x, kind="stable")
    xs = x[order]
    # r is allowed iff it ends a tie group: r = m, or the r-th and (r+1)-th highest scores differ
    ok = np.concatenate([xs[:-1] > xs[1:], [True]])
    allowed = np.flatnonzero(ok) + 1  # increasing
    pos = np.searchsorted(allowed, grid, side="right")  # how many allowed counts are ≤ r
    r_eff = np.where(pos > 0, allowed[np.maximum(pos - 1, 0)], 0)
    return y[order], grid, r_eff, np.cumsum(y[order])


def _one_run(scores, truth, delta, significance, guesses, method, reject_fn, eps_max=64.0):
    s, d = _significance(significance), _delta(delta)
    y_sorted, grid, r_eff, correct_at = _guesses(scores, truth, guesses)
    m = y_sorted.size
    sh = s / grid.size  # union bound over the guess counts (a grid point with no allowed count is still paid for)
    best = (0.0, None, None)
    for r in np.unique(r_eff[r_eff > 0])[::-1]:
        v = int(correct_at[r - 1])
        e = _sup_eps(lambda eps, r=int(r), v=v: reject_fn(m, r, v, eps, d, sh), eps_max)
        if e > best[0] or best[1] is None:
            best = (e, int(r), v)
    e, r, v = best
    return (e, s, d, f"bonferroni over {grid.size} guess counts (tied scores guessed together)", int(y_sorted.sum()),
            int((~y_sorted).sum()), int(grid.size), r, v)


def epsilon_one_run(scores: ArrayLike, truth: ArrayLike, *, delta: float, significance: float = 0.05,
                    guesses: ArrayLike | None = None) -> EpsilonLowerBound:
    """One-run ε lower bound (m canaries, each in with probability ½, ONE training run).  Bound: lower.

    Steinke, Nasr, Jagielski 2023 (arXiv:2305.08846) Alg. 1 and Thm 3.1 with the δ term of
    Prop. 5.1: guess "member" for the r highest scores; with v right guesses the bound is
    sup{ε : p(ε) < s'} (:func:`one_run_p_value`), maximised over r in :func:`one_run_guess_grid`
    (or ``guesses``) with a union bound s' = s / #grid. Each r is moved down to the nearest
    tie-group boundary (tied scores are guessed together; r with no boundary below is skipped but
    still paid for), so the guesses depend on the scores alone.
    """
    def reject(m, r, v, eps, d, sh):
        return one_run_p_value(m, r, v, eps, d) < sh

    e, s, d, strategy, n_in, n_out, h, r, v = _one_run(scores, truth, delta, significance, guesses, "one_run", reject)
    return EpsilonLowerBound(e, 1 - s, d, "one_run", strategy, None, n_in=n_in, n_out=n_out, n_hypotheses=h,
                             guesses=r, correct=v)


def _fdp_rejects_mu(m: int, r: int, v: int, mu: float, sh: float) -> bool:
    """Mahloujifar et al. (arXiv:2410.22235) Alg. 'audit_rh_with_cap' for the μ-GDP curve, k = 2: True when
    v right guesses out of r reject "the mechanism is μ-GDP" at level sh."""
    if v == 0:
        return False
    ppf, cdf = scipy.special.ndtri, scipy.special.ndtr  # = norm.ppf / norm.cdf, without the per-call overhead

    def blow_up_inverse(x: float) -> float:  # for μ-GDP, B⁻¹(x) = Φ(Φ⁻¹(x) − μ)
        return float(cdf(ppf(min(x, 1.0)) - mu))

    rr = sh * v / m
    h = sh * (r - v) / m
    for i in range(v - 1, -1, -1):
        h_new = max(h, blow_up_inverse(rr))
        if h_new == h:
            break  # neither h nor r changes again
        rr = min(rr + (i / (r - i)) * (h_new - h), 1.0)
        h = h_new
    return rr + h > r / m


def gdp_lower_bound_one_run(scores: ArrayLike, truth: ArrayLike, *, delta: float, significance: float = 0.05,
                            guesses: ArrayLike | None = None) -> GdpLowerBound:
    """f-DP one-run audit through the Gaussian family: a lower bound on the GDP μ.  Bound: gdp_mu_lower.

    Mahloujifar, Melis, Chaudhuri 2024 (arXiv:2410.22235) Thm 9 / Alg. 'audit_rh_with_cap': the
    claim "the mechanism is μ-GDP" is rejected at level s' when the recursion over correct guesses
    exceeds r/m; ``mu_lower`` is the largest rejected μ (same guess grid, tie rule and union bound
    as :func:`epsilon_one_run`). With probability ≥ 1 − s the mechanism is not μ-GDP for any
    μ ≤ ``mu_lower``.

    IMPORTANT: this is NOT an (ε, δ) lower bound. ``refuted_curve_epsilon`` is the ε at ``delta``
    of the refuted μ-GDP curve (Dong et al. Cor. 2.13); an (ε, δ)-DP mechanism that is not GDP
    (randomized response, for one) can be refuted at a ``refuted_curve_epsilon`` above its ε.
    """
    if _delta(delta) <= 0:
        raise InputError("delta must be > 0 for the f-DP one-run bound (GDP curves have δ(ε) > 0)")
    mu, s, d, strategy, n_in, n_out, h, r, v = _one_run(
        scores, truth, delta, significance, guesses, "one_run_fdp",
        lambda m, r, v, mu, d, sh: _fdp_rejects_mu(m, r, v, mu, sh), eps_max=64.0)
    return GdpLowerBound(mu, _gdp_epsilon(mu, d), 1 - s, d, "one_run_fdp", strategy, n_in, n_out, h, r, v)


def epsilon_one_run_fdp(scores: ArrayLike, truth: ArrayLike, *, delta: float, significance: float = 0.05,
                        guesses: ArrayLike | None = None) -> GdpLowerBound:
    """Deprecated name of :func:`gdp_lower_bound_one_run` (it never was an (ε, δ) lower bound)."""
    warnings.warn("epsilon_one_run_fdp is deprecated: use gdp_lower_bound_one_run, which returns a GdpLowerBound "
                  "(a lower bound on the GDP μ, not on ε)", DeprecationWarning, stacklevel=2)
    return gdp_lower_bound_one_run(scores, truth, delta=delta, significance=significance, guesses=guesses)


def ceiling_one_run(m: int, *, delta: float, significance: float = 0.05) -> float:
    """The best one-run ε lower bound for m canaries: every guess right at every r of the grid.

    Bound: upper on every one-run bound of the design.
    """
    one_run_guess_grid(m)  # validates m
    y = np.ones(m, dtype=bool)
    x = np.arange(m, 0, -1, dtype=np.float64)
    return epsilon_one_run(x, y, delta=delta, significance=significance).value
