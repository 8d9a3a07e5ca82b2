"""An exact test of a trade-off claim at data-chosen thresholds: one p-value per threshold, no box.

**Null hypothesis** (the box test's, :func:`audit.comparator.violation_test`): every threshold test
"member iff score > t" of the audited mechanism has FNR(t) ≥ f(FPR(t)) and FPR(t) ≥ f(FNR(t)), f a sound
lower bound on the claimed trade-off curve.

**The p-value at one threshold.** Take a threshold of the Bonferroni grid (:func:`.multi_run._grid`) read
off the out-scores: t = the (k+1)-th largest of n_out out-scores, so FP = k. Its true FPR(t) is the upper
tail of the out-law at an order statistic, stochastically at most U ~ Beta(k + 1, n_out − k) (David &
Nagaraja 2003 §2.5; equal for continuous scores, smaller with ties), whatever the out-law is. The
in-scores are independent of t, so FN | t ~ Bin(n_in, FNR(t)), and under the null FNR(t) ≥ f(FPR(t)).
u ↦ P(Bin(n_in, f(u)) ≤ c) is non-decreasing (f is non-increasing), hence

    P(FN ≤ c) ≤ E_U[ F_Bin(c; n_in, f(U)) ] =: p(c),

an exact, distribution-free p-value for the observed FN = c. The thresholds read off the in-scores are
the mirror image (FN = k fixed, FNR(t) at most Beta(k + 1, n_in − k), FP | t binomial, the other ordering
FPR ≥ f(FNR)). The box test instead bounds U and FNR separately, each by a Clopper–Pearson limit, and
asks the corner to lie below f: p(c) ≤ P(U > a_hi) + F_Bin(c; n_in, f(a_hi)), so whenever a box at
level s/(2H) per rate lies below f, p(c) ≤ s/H, and this test rejects too. Integrating over U instead of
taking both rates at their worst is what makes it more powerful (at 20,000 trials, on the optimal attack's
scores of an all-or-none leak at the edge of what the trials resolve, 40 of 40 rejections against the box's 31:
benchmarks/bench_fault_detection.py ``ceiling-tests``).

**Numerics (an upper bound).** E_U[g(U)] for the non-decreasing g is bounded above by the upper Riemann
sum over a partition 0 = u_0 < u_1 < … < u_M of Beta quantiles, Σ_i P(u_{i−1} < U ≤ u_i)·g(u_i) +
P(U > u_M), with the Beta CDF and the binomial CDF exact (scipy). The partition holds the quantiles at
:data:`PARTITION`'s probabilities (both tails down to 1e-16), each cell cut into :data:`REFINE` parts, and,
when a level is given, each
threshold's one-sided Clopper–Pearson limit at that level (so the bound above is exact at the box
test's corner: the union with an ε-lower-bound test at the same grid is nested, not added).

**Multiplicity.** The H thresholds of the grid are fixed in number by (n_in, n_out) before any score is
seen; the test rejects at level s when H · min_j p_j ≤ s (Bonferroni).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.special
from numpy.typing import ArrayLike

from accountants.errors import InputError, InputTypeError

from ._checks import _floats, _ratio, _scores, _significance
from .multi_run import _grid

__all__ = ["MAX_THRESHOLDS", "PARTITION", "REFINE", "ThresholdTest", "count_pvalues", "threshold_test"]

Curve = Callable[[np.ndarray], np.ndarray]

PARTITION = np.concatenate([np.logspace(-16, np.log10(0.5), 60), 1.0 - np.logspace(np.log10(0.5), -16, 60)[1:]])
"""Probabilities whose Beta quantiles (the coarse partition) are computed exactly: log-spaced into both tails."""

REFINE = 8
"""Each coarse cell is cut into this many equal parts in u (any partition gives an upper bound; the Beta CDF is
evaluated exactly at every point): a tail cell then holds about 1/8 of the coarse cell's mass, at most ~9 % of
the tail's mass beyond it, at an eighth of the quantile inversions. Against adaptive quadrature the sum overshot by
3.93 % at p from 0.013 to 8e-9; far smaller p overshoot more in ratio (1.3e-10 for an integral of 2e-20), never near a
look's level."""


@dataclass(frozen=True)
class ThresholdTest:
    """The exact threshold test's outcome (module doc).

    Attributes:
        p_value: H · min_j p_j, capped at 1 (Bonferroni over the grid): the test rejects at level s iff ≤ s.
        h: the grid's number of thresholds.
        threshold, strict: the threshold of the smallest p ("member" iff score > t when ``strict``, ≥ t else).
        fpr, fnr: the realised rates there; curve_fnr: f at the ordering's fixed rate (the null's floor).
        n_in, n_out: trial counts.
    """

    p_value: float
    h: int
    threshold: float | None
    strict: bool
    fpr: float
    fnr: float
    curve_fnr: float
    n_in: int
    n_out: int

    def rejects(self, significance: float) -> bool:
        return self.p_value <= significance


def count_pvalues(fixed: ArrayLike, n_fixed: ArrayLike, seen: ArrayLike, n_seen: ArrayLike, curve: Curve, *,
                  level: float | None = None, h: int = 1) -> np.ndarray:
    """p_j ≥ E[F_Bin(seen_j; n_seen_j, f(U_j))], U_j ~ Beta(fixed_j + 1, n_fixed_j − fixed_j) (module doc).

    Args:
        fixed: the count fixed by the threshold's construction (k: FP for out-read thresholds), (H,).
        n_fixed: the trials on that side, (H,) or scalar.
        seen: the other side's observed count (c), (H,).
        n_seen: the trials on the other side.
        curve: f, vectorised over numpy arrays.
        level, h: when given, each threshold's one-sided Clopper–Pearson limit at level/(2h) joins the
            partition (nesting with the box and ε-lower-bound tests at that level).

    Returns:
        (H,) upper bounds on the p-values, in [0, 1]; 1 where fixed = n_fixed (no information).
    """
    k, nf, c, ns = _count_arrays(fixed, n_fixed, seen, n_seen)
    if not callable(curve):
        raise InputTypeError(f"curve must be callable (alpha -> beta); got {type(curve).__name__}")
    if isinstance(h, bool) or not isinstance(h, (int, np.integer)) or h < 1:
        raise InputError(f"h must be an integer ≥ 1 (the thresholds the level is shared by); got {h!r}")
    if not float(np.nan_to_num(np.asarray(curve(np.zeros(1)), dtype=np.float64).reshape(-1)[0], nan=0.0)) > 0.0:
        return np.ones(k.size)  # f(0) = 0: f ≡ 0 (non-increasing), no point lies below it, every p is 1
    ok = k < nf
    kk = np.where(ok, k, 0.0)
    nn = np.where(ok, nf, 1.0)
    a, b = kk[:, None] + 1, nn[:, None] - kk[:, None]
    u = _partition(a, b, None if level is None else 1.0 - _significance(level) / (2 * int(h)))
    cdf = scipy.special.betainc(a, b, u)
    mass = np.diff(np.concatenate([np.zeros((k.size, 1)), cdf], axis=1), axis=1)
    beta = np.clip(np.nan_to_num(np.asarray(curve(u), dtype=np.float64), nan=0.0), 0.0, 1.0)  # NaN → 0: g = 1
    g = np.where(c[:, None] < ns[:, None], scipy.special.betainc(ns[:, None] - c[:, None], c[:, None] + 1, 1.0 - beta),
                 1.0)  # F_Bin(c; n, β) = I_{1−β}(n − c, c + 1)
    p = np.sum(np.clip(mass, 0.0, None) * g, axis=1) + np.clip(1.0 - cdf[:, -1], 0.0, 1.0)
    # the CDFs' rounding, pessimistically: relative (betainc's ~1e-14) and absolute (cell masses are differences of
    # CDF values, each off by ~1e-16; ~1,000 cells), both far below any level a test runs at
    return np.where(ok, np.minimum(p * (1 + 1e-9) + 1e-12, 1.0), 1.0)


def _partition(a: np.ndarray, b: np.ndarray, extra: float | None) -> np.ndarray:
    """Per row, an increasing partition of [0, 1]: Beta(a, b) quantiles at :data:`PARTITION` (and ``extra``), each
    cell cut into :data:`REFINE` equal parts in u."""
    probs = np.broadcast_to(PARTITION, (a.shape[0], PARTITION.size))
    if extra is not None:
        probs = np.sort(np.concatenate([probs, np.full((a.shape[0], 1), extra)], axis=1), axis=1)
    with np.errstate(invalid="ignore"):
        q = scipy.special.betaincinv(a, b, probs)
    q = np.maximum.accumulate(np.where(np.isnan(q), 1.0, np.clip(q, 0.0, 1.0)), axis=1)
    lo = np.concatenate([np.zeros((q.shape[0], 1)), q[:, :-1]], axis=1)
    steps = np.arange(1, REFINE + 1) / REFINE
    u = (lo[:, :, None] + (q - lo)[:, :, None] * steps).reshape(q.shape[0], -1)
    u[:, REFINE - 1::REFINE] = q  # the coarse points themselves, exactly (the corners the nesting needs)
    return np.maximum.accumulate(u, axis=1)


MAX_THRESHOLDS = 10_000
"""The most thresholds one :func:`count_pvalues` call takes (each costs a partition of :data:`PARTITION`'s size)."""


def _count_pair(kname: str, nname: str, k: ArrayLike, n: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """(k, n) as float arrays of integers with 0 ≤ k ≤ n, n ≥ 1, or an InputError naming the parameter."""
    k, n = _floats(kname, k).reshape(-1), _floats(nname, n).reshape(-1)
    if not np.all(np.isfinite(n)) or np.any(n < 1) or np.any(n != np.round(n)):
        raise InputError(f"{nname} must be finite integers ≥ 1; got {n[:5].tolist()}")
    if not np.all(np.isfinite(k)) or np.any(k < 0) or np.any(k != np.round(k)):
        raise InputError(f"{kname} must be integers in [0, {nname}]; got {k[:5].tolist()}")
    if n.size not in (1, k.size):
        raise InputError(f"{nname} must be one number or one per entry of {kname}; got {n.size} for {k.size}")
    n = np.broadcast_to(n, k.shape)
    if np.any(k > n):
        raise InputError(f"{kname} must be integers in [0, {nname}]; got {k[k > n][:5].tolist()}")
    return k, n


def _count_arrays(fixed: ArrayLike, n_fixed: ArrayLike, seen: ArrayLike,
                  n_seen: ArrayLike) -> tuple[np.ndarray, ...]:
    k, nf = _count_pair("fixed", "n_fixed", fixed, n_fixed)
    c, ns = _count_pair("seen", "n_seen", seen, n_seen)
    if c.size != k.size:
        raise InputError(f"seen must have one entry per entry of fixed; got {c.size} and {k.size}")
    if k.size > MAX_THRESHOLDS:
        raise InputError(f"fixed holds {k.size} thresholds, more than MAX_THRESHOLDS = {MAX_THRESHOLDS}")
    return k, nf, c, ns


def _grid_pvalues(g: dict[str, np.ndarray], n_in: int, n_out: int, curve: Curve,
                  level: float | None) -> np.ndarray:
    """Each grid threshold's p-value: out-read thresholds test FNR ≥ f(FPR), in-read ones FPR ≥ f(FNR)."""
    s, h = g["strict"], g["threshold"].size
    return count_pvalues(np.where(s, g["fp_ub_count"], g["fn_ub_count"]), np.where(s, n_out, n_in),
                         np.where(s, g["fn_ub_count"], g["fp_ub_count"]), np.where(s, n_in, n_out), curve,
                         level=level, h=h)


def threshold_test(in_scores: ArrayLike, out_scores: ArrayLike, curve: Curve, *, significance: float | None = None,
                   ratio: float = 2.0) -> ThresholdTest:
    """The exact threshold test of "the trade-off lies on or above ``curve``" (module doc).  Bound: false-alarm
    probability ≤ s for a test that rejects when ``p_value`` ≤ s.

    Args:
        in_scores, out_scores: the trials' scores (higher ⇒ member), each non-empty and finite.
        curve: f, a sound lower bound on the claimed trade-off curve, vectorised over numpy arrays.
        significance: the level the test will be read at (optional): its box corners join the partition.
        ratio: the Bonferroni grid's count ratio (:class:`.strategies.Bonferroni`).
    """
    xin, xout = _scores("in_scores", in_scores), _scores("out_scores", out_scores)
    if significance is not None:
        significance = _significance(significance)
    if not callable(curve):
        raise InputTypeError(f"curve must be callable (alpha -> beta); got {type(curve).__name__}")
    g = _grid(xin, xout, _ratio(ratio))
    p = _grid_pvalues(g, xin.size, xout.size, curve, significance)
    h = int(p.size)
    j = int(np.argmin(p))
    strict = bool(g["strict"][j])
    fpr, fnr = float(g["fp"][j] / xout.size), float(g["fn"][j] / xin.size)
    floor = float(np.asarray(curve(np.array([fpr if strict else fnr])), dtype=np.float64)[0])
    t = float(g["threshold"][j])
    return ThresholdTest(float(min(1.0, h * float(p[j]))), h, t if np.isfinite(t) else None, strict, fpr, fnr,
                         floor, int(xin.size), int(xout.size))
