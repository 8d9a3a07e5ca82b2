"""Order statistic with the composite subsampled-Gaussian null: an ε lower bound for dpaudit's own vouched trainer.

When dpaudit vouches for its own one-run audit (docs/auditing.md, "When dpaudit vouches"), canary j's slot
coordinate at step t is exactly (a·b_{j,t} + σ·z_{j,t})·C/E|B| with b_{j,t} its own Poisson coin, z i.i.d.
N(0, 1), a = min(norm, C)/C. In units of the noise, canary j's T observations are then exactly one draw of the
pair P = N(0, 1)^⊗T (out) vs Q = ((1 − q')N(0, 1) + q'N(μ', 1))^⊗T (in), the T-fold subsampled Gaussian, with
an unknown effective μ' = a/σ' (a clipping or noise-scale bug changes it) and an unknown rate q' (a sampler bug).
So the same vouching implies the composite null

    H = {SGM(q', μ', T) : q' ∈ (0, 1], μ' ∈ [0, ∞]}    (μ' = ∞: a step reveals whether the canary was drawn),

and the order statistic (:mod:`.one_run_order`, Xiang et al. 2025) tests every member at once:

    ε_lower = inf{ ε_{q',μ'}(δ) : (q', μ') not rejected at level s }.

Computing the infimum soundly (our argument). Members are Blackwell-ordered: for fixed q', larger μ' dominates
(add noise); for fixed μ', larger q' dominates (re-draw a fresh out-sample with probability 1 − q''/q'). A
dominating pair has smaller decoder errors at every mass v, so its p-value is larger at every outcome. Hence
(1) if a pair D was rejected, every member dominated by D is rejected too (its p-value is smaller); and (2) the
rejected set is closed downwards. With a grid q_0 < q_1 < … < q_K = 1 and μ_lo(q) a per-step μ at which the
(discretised, dominating) member (q, μ_lo) was rejected: an accepted (q', μ') with q' ∈ [q_i, q_{i+1}] has
μ' > μ_lo(q_{i+1}) (else it is dominated by the rejected (q_{i+1}, μ_lo(q_{i+1}))), so ε(q', μ') ≥
ε(q_i, μ_lo(q_{i+1})). Below q_0 the reveal member (q_0, ∞), which dominates every (q' ≤ q_0, μ'), is rejected.
So ε_lower = min_i ε_lower(q_i, μ_lo(q_{i+1})) with ε rounded down (:func:`.sgm_composition.composed_epsilon_lower`).
The grid and the bisections read the outcome, but the statement "the true member is accepted by every guess
count" does not depend on them, and it holds with probability ≥ 1 − s: any grid gives a valid bound, and the
grid is refined where the bound is attained.

Data-dependent choices: the guess counts r (the default grid of :func:`.one_run_order.one_run_order_guess_grid`)
are paid by a union bound, s / #grid each, and a member is rejected when ANY r rejects it (the true member is
accepted by all r with probability ≥ 1 − s). The decoder (median centre, two-sided confidence) reads the scores
only, as in :mod:`.one_run_order`.

IMPORTANT (assumption): the per-canary structure above (dpaudit's own DP-SGD with Poisson sampling, Dirac
canaries on their own slots, the same a, σ and q at every step, T steps): only :mod:`audit.runs` vouches for it.
For a user's trainer or a score file use :func:`.one_run_order.epsilon_one_run_order` (the (ε, δ) null).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from accountants.errors import InputError

from ._checks import _delta, _significance
from .one_run import MAX_CANARIES, _count, _guesses
from .one_run_order import (
    _CELLS,
    _COMPOSED_MAX_MU,
    ComposedSubsampledGaussianNull,
    _two_sided,
    one_run_order_guess_grid,
    one_run_order_p_value,
)
from .results import EpsilonLowerBound
from .sgm_composition import composed_epsilon_lower

__all__ = ["SGM_FAMILY_ASSUMPTION", "epsilon_one_run_order_sgm_family", "sgm_family_epsilon"]

SGM_FAMILY_ASSUMPTION = ("each canary's T observations are a T-fold Poisson-subsampled Gaussian pair with unknown "
                         "rate and noise (dpaudit's own DP-SGD, Dirac canaries on their own slots)")
"""What :func:`epsilon_one_run_order_sgm_family` assumes beyond non-interacting canaries (module doc)."""

_Q_FLOOR = 1e-12  # the smallest rate searched; below it the reveal member must be rejected (else ε_lower = 0)
_MU_RTOL = 4e-3  # bisection on μ stops when the bracket is narrower than this (relative; returns the rejected end)
_COARSE = 1024  # cells of the first, cheap p-value of each test (module doc of one_run_order: an upper sum)
_REFINE = 12  # grid refinements (each splits the interval that attains the minimum)


class _Test:
    """Rejection of a null member by any of the released-guess counts (each at s / #grid)."""

    def __init__(self, steps: int, m: int, counts: list[tuple[int, int]], level: float):
        self.steps, self.m, self.counts, self.level = steps, m, counts, level
        # the Riemann sum is at most 1/K high: K ≥ 16/s keeps it below s/16 (as one_run_order_theta_lower)
        self.cells = int(min(2 ** 20, max(_CELLS, 2 ** math.ceil(4.0 - math.log2(level)))))
        self.calls, self.last = 0, 0

    def rejects(self, q: float, mu: float) -> bool:
        self.calls += 1
        null = ComposedSubsampledGaussianNull(q, self.steps)
        for i in [self.last, *(j for j in range(len(self.counts)) if j != self.last)]:
            if self._rejects_at(null, mu, *self.counts[i]):
                self.last = i  # the count that rejects one member usually rejects its neighbours: try it first
                return True
        return False

    def _rejects_at(self, null: ComposedSubsampledGaussianNull, mu: float, r: int, u: int) -> bool:
        """p < level, first on _COARSE cells: an upper Riemann sum on any cells is a valid p-value (it rejects
        soundly), and it is at most 1/_COARSE above the integral, so p_coarse − 1/_COARSE ≥ level accepts."""
        coarse = one_run_order_p_value(null, mu, self.m, r, u, cells=min(_COARSE, self.cells))
        if coarse < self.level:
            return True
        if coarse - 1.0 / _COARSE >= self.level or self.cells <= _COARSE:
            return False
        return one_run_order_p_value(null, mu, self.m, r, u, cells=self.cells) < self.level


def _q_floor(test: _Test) -> float | None:
    """A rate q_0 whose reveal member (q_0, ∞) is rejected, as large as bisection finds; None if even _Q_FLOOR's
    is accepted (then members with ε = 0 are accepted)."""
    if not test.rejects(_Q_FLOOR, math.inf):
        return None
    lo, hi = math.log(_Q_FLOOR), 0.0  # log q; q = 1 (reveal everything) is never rejected
    while hi - lo > 1e-3:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if test.rejects(math.exp(mid), math.inf) else (lo, mid)
    return math.exp(lo)


def _mu_lower(test: _Test, q: float, lo: float, hint: float) -> float:
    """A per-step μ at which rate q's member is rejected, as large as bisection finds; ``lo`` is known rejected
    (a value rejected at a larger rate, whose member dominates this one) or 0. ∞ when the reveal member is
    rejected. Returns the rejected end of the final bracket."""
    if lo <= 0 and not test.rejects(q, 0.0):
        return 0.0
    hi = max(hint, 1.5 * lo + 0.25)
    while hi <= _COMPOSED_MAX_MU and test.rejects(q, hi):
        lo, hi = hi, 2.0 * hi + 0.25
    if hi > _COMPOSED_MAX_MU:
        if test.rejects(q, math.inf):
            return math.inf
        if test.rejects(q, _COMPOSED_MAX_MU):
            return _COMPOSED_MAX_MU
        hi = _COMPOSED_MAX_MU
    while hi - lo > _MU_RTOL * max(lo, 1e-3):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if test.rejects(q, mid) else (lo, mid)
    return lo


def _epsilon(q: float, mu: float, steps: int, delta: float) -> float:
    if mu <= 0:
        return 0.0
    return composed_epsilon_lower(q, mu if mu <= _COMPOSED_MAX_MU else math.inf, steps, delta)


def _initial_grid(q0: float) -> list[float]:
    """Rates from q_0 to 1: log-spaced in q up to ½, then log-spaced in 1 − q down to 10⁻⁴, then 1."""
    low = [q0, *np.exp(np.linspace(math.log(q0), math.log(0.5), 5))[1:]] if q0 < 0.5 else [q0]  # q0 exactly
    high = [1.0 - x for x in np.exp(np.linspace(math.log(0.5), math.log(1e-4), 5))[1:] if 1.0 - x > low[-1]]
    return sorted({float(x) for x in [*low, *high, 1.0]})


def _split(a: float, b: float) -> float:
    """The middle of [a, b] in log q below ½ and in log(1 − q) above."""
    if b <= 0.5:
        return math.sqrt(a * b)
    if b >= 1.0:
        return 1.0 - (1.0 - a) * 0.1 if a > 0.5 else 0.5 * (a + b)
    return 1.0 - math.sqrt((1.0 - a) * (1.0 - b)) if a >= 0.5 else 0.5 * (a + b)


def _checked_counts(counts: list[tuple[int, int]], m: int) -> list[tuple[int, int]]:
    """(released guesses r, errors u) pairs with 1 ≤ r ≤ m and 0 ≤ u ≤ r, else an InputError naming ``counts``."""
    if not isinstance(counts, (list, tuple)) or not counts:
        raise InputError(f"counts must be a non-empty list of (guesses r, errors u) pairs; got {counts!r}")
    out = []
    for pair in counts:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise InputError(f"counts must hold (guesses r, errors u) pairs; got {pair!r}")
        r = _count("counts: guesses r", pair[0], 1, m)
        out.append((r, _count("counts: errors u", pair[1], 0, r)))
    return out


def sgm_family_epsilon(steps: int, m: int, counts: list[tuple[int, int]], level: float, delta: float,
                       *, refine: int = _REFINE) -> tuple[float, float, float]:
    """inf of ε over the accepted members (module doc): (ε_lower, q at the minimum, μ_lo there).  Bound: lower.

    ``counts``: (released guesses r, errors u) per guess count of the union bound; ``level``: s / #grid.
    """
    t = _count("steps", steps, 1, 10_000)
    m, counts, level = _count("m", m, 1, MAX_CANARIES), _checked_counts(counts, m), _significance(level)
    d = _delta(delta)
    if d <= 0:
        raise InputError(f"delta must be in (0, 1) for the family bound (μ' = ∞ members have δ > 0); got {delta!r}")
    test = _Test(t, m, counts, level)
    q0 = _q_floor(test)
    if q0 is None:
        return 0.0, _Q_FLOOR, 0.0
    grid = _initial_grid(q0)
    mu = {1.0: _mu_lower(test, 1.0, 0.0, 0.5)}
    for q in reversed(grid[:-1]):  # μ_lo does not increase in q: the next rate's value is rejected here too
        prev = mu[min(x for x in mu if x > q)]
        mu[q] = _mu_lower(test, q, prev, 1.3 * prev) if prev < math.inf else math.inf

    def term(i: int) -> float:
        a, b = grid[i], grid[i + 1]
        return math.inf if mu[b] == math.inf else _epsilon(a, mu[b], t, d)

    terms = {(grid[i], grid[i + 1]): term(i) for i in range(len(grid) - 1)}
    for _ in range(int(refine)):
        (a, b), val = min(terms.items(), key=lambda kv: kv[1])
        if val <= 0:
            break
        c = _split(a, b)
        if not a < c < b:
            break
        mu[c] = _mu_lower(test, c, mu[b], mu[a] if mu[a] < math.inf else 1.3 * mu[b])
        del terms[(a, b)]
        terms[(a, c)] = math.inf if mu[c] == math.inf else _epsilon(a, mu[c], t, d)
        terms[(c, b)] = math.inf if mu[b] == math.inf else _epsilon(c, mu[b], t, d)
    (a, b), val = min(terms.items(), key=lambda kv: kv[1])
    return (0.0 if val == math.inf else val), a, mu[b]


def epsilon_one_run_order_sgm_family(scores: ArrayLike, truth: ArrayLike, *, steps: int, delta: float,
                                     significance: float = 0.05, guesses: ArrayLike | None = None,
                                     center: float | None = None) -> EpsilonLowerBound:
    """Order-statistics one-run ε lower bound under the composite T-fold SGM null.  Bound: lower (assumption below).

    Xiang et al. 2025's order statistic (:mod:`.one_run_order`: two-sided decoder, the guess grid paid by
    s / #grid) with the null "each canary's view is SGM(q', μ', T) for some q' ∈ (0, 1], μ' ∈ [0, ∞]", and ε_lower
    = inf of ε(δ) over the members no guess count rejects (module doc). With probability ≥ 1 − s the mechanism
    is not (ε, δ)-DP for any ε < value, PROVIDED each canary's T observations are a subsampled Gaussian pair with
    the same rate and noise at every step (dpaudit vouches for this only for its own trainer; module doc).

    Args:
        scores, truth: one score per canary (higher ⇒ member) and the membership bits.
        steps: T ≥ 1, the training steps.
        delta: δ ∈ (0, 1).
        significance: s ∈ (0, 1).
        guesses: released-guess counts (default :func:`.one_run_order.one_run_order_guess_grid`).
        center: the decoder's centre (default: the median score).
    """
    s, d = _significance(significance), _delta(delta)
    if d <= 0:
        raise InputError(f"delta must be in (0, 1) for the family bound (μ' = ∞ members have δ > 0); got {delta!r}")
    t = _count("steps", steps, 1, 10_000)
    conf, correct = _two_sided(scores, truth, center)
    m = _count("m", conf.size, 1, MAX_CANARIES)
    grid_in = one_run_order_guess_grid(m) if guesses is None else guesses
    _, grid, r_eff, correct_at = _guesses(conf, correct, grid_in)
    counts = [(int(r), int(r) - int(correct_at[r - 1])) for r in np.unique(r_eff[r_eff > 0])[::-1]]
    value, q_at, mu_at = sgm_family_epsilon(t, m, counts, s / grid.size, d)
    n_in = int(np.sum(np.asarray(truth).reshape(-1).astype(bool)))
    strategy = (f"bonferroni over {grid.size} guess counts (two-sided guesses, tied confidences guessed together); "
                f"composite SGM null over rate and noise, T = {t}; infimum at q = {q_at:.4g}, per-step "
                f"mu = {mu_at:.4g}")
    r_best, u_best = counts[0] if counts else (None, None)
    return EpsilonLowerBound(value, 1 - s, d, "one_run_order_family", strategy, None, n_in=n_in, n_out=m - n_in,
                             n_hypotheses=int(grid.size), guesses=r_best,
                             correct=None if r_best is None or u_best is None else r_best - u_best)
