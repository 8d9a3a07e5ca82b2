"""ε_certifiable: what an optimal attack on a known curve certifies with a given design.

An audit is tight when its ε lower bound reaches what the *best possible* attack could certify
with the same trials, confidence, δ and threshold strategy, against the accountant's own curve.
Dividing ε_lower by the accountant's ε (or by the design's ceiling) mixes two questions: "is the
attack optimal?" and "can this many trials certify that much?". :func:`certifiable_epsilon_on_curve`
answers the second one, so that ε_lower / ε_certifiable answers the first.

Construction (seeded Monte Carlo on a canonical pair). Any trade-off function f is the trade-off curve of
the canonical pair

    out score U ~ Uniform(0, 1),       in score Y = 1 − f⁻¹(V), V ~ Uniform(0, 1),

with f⁻¹(v) = inf{α : f(α) ≤ v}: the test "member iff score > 1 − α" has FPR α and FNR
P(Y ≤ 1 − α) = P(f⁻¹(V) ≥ α) = P(V ≤ f(α)) = f(α), and by Neyman–Pearson no test of this pair
does better, so every (FPR, FNR) an attack on a mechanism with curve f can reach is reached by a
threshold on these scores. A replicate draws n_out out scores and n_in in scores from this pair
and runs the audit's own :func:`audit.statistics.epsilon_lower_bound` on them (same δ,
significance and threshold strategy, so the strategy's price is paid as in the audit, and the
max over thresholds profits from sampling noise exactly as the audit does). ε_certifiable is the
median over seeded replicates (21 by default; the approach of
``tests/audit/test_tightness_poisson.py``, which samples the exact Poisson pair instead).
Mid-quantile scores (every count at its expectation) are available too; they do not profit from
noise at the extreme thresholds and so sit below the median (Poisson default: 2.28 vs 2.57).

Per ordered direction (:func:`certifiable_directional`). The accountant's ``tradeoff_curve`` is symmetric: it
bounds both orderings of every neighbouring pair at once, taking at each slope the larger δ of the add and
remove directions, so its canonical pair is strong in both tails. One audit reads one pair (D, D') in both
orderings, whose curves are one direction's and its inverse; for add/remove the symmetric curve's
ε_certifiable is therefore above what an optimal audit of any single direction certifies (Poisson q = 0.5,
σ = 1, T = 10, 1,000 + 1,000 trials, 101 replicates: 2.75 against 2.62, and 2.61 for draws of the exact
pair). :func:`certifiable_directional` reads each direction's curve
(:func:`accountants.pld.directional_tradeoff_curves`; :func:`directional_curves` caches them per spec) and keeps
the largest median. Every audit's ``epsilon_certifiable`` is read this way wherever PLD is the tightest method
(:func:`audit.runs.certifiable_curves`; one-run canaries see one ordered pair too), else on the symmetric curve.

An audit's ε_lower fluctuates around ε_certifiable by sampling noise (the test in
``tests/audit/test_tightness_poisson.py`` sees replicates within about ±25 % at 500 trials per
side; at 1,000 per side the Poisson default's replicates span 2.23–2.90 around 2.57), so
ε_lower / ε_certifiable ≈ 1 means "the attack is as strong as the accountant's curve allows at
this trial count": the accountant is tight as far as this design can tell.

Bound: none. ε_certifiable is a benchmark for a ratio, never a privacy statement.

>>> import accountants as acc
>>> round(certifiable_epsilon_on_curve(acc.TradeOff.from_gdp(2.0), 1000, 1000, delta=1e-5), 2)
3.11
"""

from __future__ import annotations

import functools
import math
import types
from collections.abc import Callable, Mapping

import numpy as np
import torch

from accountants import validate as check
from accountants.errors import InputError, InputTypeError, UnsupportedError
from accountants.events import DPSGD
from accountants.pld import directional_tradeoff_curves
from accountants.tradeoff import TradeOff

from . import statistics
from .statistics import ThresholdStrategy

__all__ = ["FAMILY_REPLICATES",
           "ONE_RUN_METHOD_STATISTIC", "ONE_RUN_STATISTICS", "best_direction", "canonical_llr", "canonical_scores",
           "certifiable_directional", "certifiable_epsilon_on_curve", "certifiable_one_run_replicates",
           "certifiable_ratio", "certifiable_replicates", "directional_curves"]


def _quantile_function(curve: TradeOff, points: int = 4001) -> tuple[np.ndarray, np.ndarray]:
    """(v, f⁻¹(v)) tabulated on a grid dense near α = 0 (log-spaced) and uniform elsewhere."""
    a = torch.cat([torch.zeros(1, dtype=torch.float64), torch.logspace(-12, -2, points // 4, dtype=torch.float64),
                   torch.linspace(0.0, 1.0, points, dtype=torch.float64)]).unique()
    b = torch.cummin(curve(a), dim=0).values  # non-increasing by construction (guards rounding)
    return b.flip(0).numpy(), a.flip(0).numpy()  # v increasing, f⁻¹(v) non-increasing


def canonical_scores(curve: TradeOff, n_in: int, n_out: int, *, rng: np.random.Generator | None = None,
                     _table: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Scores (in, out) of the canonical pair of ``curve`` (module doc); higher ⇒ member.

    With ``rng`` None, the mid-quantiles ((i + ½)/n): every count equals its expectation; else
    independent uniform draws (one replicate of an optimal audit).
    """
    if not isinstance(curve, TradeOff):
        raise InputTypeError(f"curve must be an accountants.TradeOff; got {type(curve).__name__}")
    for name, n in (("n_in", n_in), ("n_out", n_out)):
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise InputError(f"{name} must be an integer ≥ 1; got {n!r}")
    vs, inv = _quantile_function(curve) if _table is None else _table
    if rng is None:
        u = (np.arange(int(n_out)) + 0.5) / n_out
        v = (np.arange(int(n_in)) + 0.5) / n_in
    else:
        u, v = rng.random(int(n_out)), rng.random(int(n_in))
    # f⁻¹ by linear interpolation of the tabulated (f(α), α) (f convex: the chords are accurate)
    y = 1.0 - np.interp(v, vs, inv)
    return y, u


def certifiable_replicates(curve: TradeOff, n_in: int, n_out: int, *, delta: float, significance: float = 0.05,
                           strategy: ThresholdStrategy | None = None, interval: str = "clopper_pearson",
                           replicates: int = 21, seed: int = 0) -> np.ndarray:
    """ε lower bounds of ``replicates`` seeded optimal audits on ``curve`` (sorted)."""
    check.integer(1, None, replicates=replicates)
    rng = np.random.default_rng(seed)
    table = _quantile_function(curve)
    out = []
    for _ in range(int(replicates)):
        xin, xout = canonical_scores(curve, n_in, n_out, rng=rng, _table=table)
        out.append(statistics.epsilon_lower_bound(xin, xout, delta=delta, significance=significance,
                                                  strategy=strategy, interval=interval).value)
    return np.sort(np.asarray(out, dtype=np.float64))


ONE_RUN_STATISTICS = ("steinke", "order", "scores", "order_family")
"""One-run ε statistics :func:`certifiable_one_run_replicates` can replay: Steinke et al. 2023
(:func:`audit.statistics.epsilon_one_run`), Xiang et al. 2025's (ε, δ) form
(:func:`audit.statistics.epsilon_one_run_order`), the threshold boxes on the scores
(:func:`audit.statistics.epsilon_one_run_scores`) and the order statistic under the composite SGM null
(:func:`audit.statistics.epsilon_one_run_order_sgm_family`; needs ``steps``)."""

FAMILY_REPLICATES = 7
"""Replicates behind the ε_certifiable of "order_family" (each costs seconds: a search over the family)."""

ONE_RUN_METHOD_STATISTIC = {"one_run": "steinke", "one_run_order": "order", "one_run_scores": "scores",
                            "one_run_order_family": "order_family"}
"""The :data:`ONE_RUN_STATISTICS` name of each one-run :class:`audit.statistics.EpsilonLowerBound` ``method``:
which statistic to replay for the ε_certifiable of the bound behind an audit's ε_lower."""


def canonical_llr(curve: TradeOff, scores: np.ndarray, *,
                  _table: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Log likelihood ratio log(dQ/dP) of canonical-pair scores (module doc): log(−f′(1 − x)), clipped to ±1e6.

    The in-score's CDF is P[Y ≤ x] = f(1 − x), so its density is −f′(1 − x) against the uniform out-score;
    f′ is the chord slope of the tabulated curve (constant on each cell: tied ratios there). A flat f (slope 0)
    gives −∞ (only out-scores land there), a vertical one +∞; both are clipped to finite confidences.
    """
    vs, inv = _quantile_function(curve) if _table is None else _table
    a, f = inv[::-1], vs[::-1]  # α increasing, f(α) non-increasing
    keep = np.concatenate([[True], np.diff(a) > 0])
    a, f = a[keep], f[keep]
    slope = np.diff(f) / np.diff(a)  # ≤ 0 on each cell [a_j, a_{j+1}]
    j = np.clip(np.searchsorted(a, 1.0 - np.asarray(scores, dtype=np.float64), side="right") - 1, 0, slope.size - 1)
    with np.errstate(divide="ignore"):
        llr = np.log(np.maximum(-slope[j], 0.0))
    return np.clip(llr, -1e6, 1e6)


def certifiable_one_run_replicates(curve: TradeOff, m: int, *, delta: float, significance: float = 0.05,
                                   replicates: int = 21, seed: int = 0, statistic: str = "steinke",
                                   steps: int | None = None) -> np.ndarray:
    """ε lower bounds of ``replicates`` seeded optimal one-run audits of m canaries on ``curve`` (sorted).

    One-run design (Steinke, Nasr, Jagielski 2023, Alg. 1): each of the m canaries is in with
    probability ½ and the audit guesses the highest scores. The optimal attack on a mechanism whose
    per-canary curve is f, when the canaries do not interact (Dirac gradient canaries on distinct
    quiet coordinates under Poisson sampling: each canary's view is an independent copy of the
    dominating pair), scores each canary by its canonical pair's score (module doc); each replicate
    draws the memberships, then the scores, and runs the ``statistic`` (:data:`ONE_RUN_STATISTICS`):
    "steinke" runs :func:`audit.statistics.epsilon_one_run` on the scores; "order" runs
    :func:`audit.statistics.epsilon_one_run_order` on their log likelihood ratios (:func:`canonical_llr`,
    centre 0: the optimal two-sided decoder of Xiang et al. 2025); "scores" runs
    :func:`audit.statistics.epsilon_one_run_scores` on the scores (0 in a replicate whose canaries all fell on one
    side: the boxes need both); "order_family" runs :func:`audit.statistics.epsilon_one_run_order_sgm_family`
    (T = ``steps``, required) on the log likelihood ratios, centre 0. For canaries that interact (input
    canaries, fixed-size batches) this is still the benchmark of "independent copies of the accountant's
    pair", not a property of that design. The same seed draws the same memberships and scores for every
    statistic. Bound: none.
    """
    check.integer(2, None, m=m)
    check.integer(1, None, replicates=replicates)
    if statistic not in ONE_RUN_STATISTICS:
        raise InputError(f"statistic must be one of {list(ONE_RUN_STATISTICS)}; got {statistic!r}")
    if statistic == "order_family":
        if steps is None:
            raise InputError("steps must be given for statistic 'order_family' (the family's T)")
        check.integer(1, 10_000, steps=steps)
    rng = np.random.default_rng(seed)
    table = _quantile_function(curve)
    out = []
    for _ in range(int(replicates)):
        truth = rng.random(int(m)) < 0.5
        n_in = int(truth.sum())
        xin, xout = canonical_scores(curve, max(n_in, 1), max(int(m) - n_in, 1), rng=rng, _table=table)
        scores = np.empty(int(m))
        scores[truth], scores[~truth] = xin[:n_in], xout[: int(m) - n_in]
        out.append(_one_run_statistic(statistic, curve, scores, truth, delta, significance, table, steps))
    return np.sort(np.asarray(out, dtype=np.float64))


def _one_run_statistic(statistic: str, curve: TradeOff, scores: np.ndarray, truth: np.ndarray, delta: float,
                       significance: float, table: tuple[np.ndarray, np.ndarray], steps: int | None = None) -> float:
    """One replicate's ε lower bound by the named :data:`ONE_RUN_STATISTICS` entry."""
    if statistic == "order_family":
        assert steps is not None
        return statistics.epsilon_one_run_order_sgm_family(canonical_llr(curve, scores, _table=table), truth,
                                                           steps=steps, delta=delta, significance=significance,
                                                           center=0.0).value
    if statistic == "order":
        return statistics.epsilon_one_run_order(canonical_llr(curve, scores, _table=table), truth, delta=delta,
                                                significance=significance, center=0.0).value
    if statistic == "scores":
        if truth.all() or not truth.any():
            return 0.0
        return statistics.epsilon_one_run_scores(scores, truth, delta=delta, significance=significance).value
    return statistics.epsilon_one_run(scores, truth, delta=delta, significance=significance).value


def certifiable_epsilon_on_curve(curve: TradeOff, n_in: int, n_out: int, *, delta: float,
                                 significance: float = 0.05, strategy: ThresholdStrategy | None = None,
                                 interval: str = "clopper_pearson", replicates: int = 21, seed: int = 0) -> float:
    """ε_certifiable: the median ε lower bound of seeded optimal audits on ``curve`` with this design.

    Each replicate runs the audit's own :func:`audit.statistics.epsilon_lower_bound` (same n_in,
    n_out, δ, significance, threshold strategy and interval) on scores drawn from the canonical
    pair of ``curve`` (module doc). Bound: none (a benchmark for ε_lower / ε_certifiable).
    """
    return float(np.median(certifiable_replicates(curve, n_in, n_out, delta=delta, significance=significance,
                                                  strategy=strategy, interval=interval, replicates=replicates,
                                                  seed=seed)))


def certifiable_directional(curves: Mapping[str, TradeOff], n_in: int, n_out: int, *, delta: float,
                            significance: float = 0.05, strategy: ThresholdStrategy | None = None,
                            interval: str = "clopper_pearson", replicates: int = 21,
                            seed: int = 0) -> tuple[str, np.ndarray]:
    """ε_certifiable per ordered direction: the direction whose optimal audits certify most, and their replicates.

    ``curves``: one lower bound on T(M(D'), M(D)) per ordered direction of the accountant (D with the
    record; :func:`accountants.pld.directional_tradeoff_curves`). An audit of one pair (D, D') reads
    both orderings of its scores, so the best it can face is the curve of its own direction and that
    curve's inverse; the symmetric curve of the maximum profile (:func:`certifiable_replicates` on
    ``tradeoff_curve``) is lower than every direction's and lets the canonical pair be strong in both
    tails at once (Poisson q = 0.5, σ = 1, T = 10, 1,000 + 1,000 trials: 2.75 symmetric against 2.62 per
    direction, and 2.61 for draws of the exact pair; docs/worst-case.md). Each direction's replicates use
    the same seed; the largest median wins (ties: the first). Bound: none.
    """
    return best_direction(curves, lambda curve: certifiable_replicates(
        curve, n_in, n_out, delta=delta, significance=significance, strategy=strategy, interval=interval,
        replicates=replicates, seed=seed))


def best_direction(curves: Mapping[str, TradeOff],
                   replicates: Callable[[TradeOff], np.ndarray]) -> tuple[str, np.ndarray]:
    """The direction of ``curves`` whose sorted ``replicates(curve)`` have the largest median (ties: the first).

    The one choice of :func:`certifiable_directional`, for any design's replicates (multi-run or one-run).
    """
    if not curves:
        raise InputError("curves must hold at least one direction")
    best: tuple[str, np.ndarray] | None = None
    for name, curve in curves.items():
        reps = replicates(curve)
        if best is None or np.median(reps) > np.median(best[1]):
            best = (name, reps)
    assert best is not None
    return best


@functools.lru_cache(maxsize=8)
def directional_curves(spec: DPSGD) -> Mapping[str, TradeOff] | None:
    """:func:`accountants.pld.directional_tradeoff_curves` of ``spec``, or None where PLD does not cover it.

    Cached (one PLD per direction, about 0.1–0.3 s each): the default run audits one spec twice. Bound: lower.
    """
    try:
        return types.MappingProxyType(directional_tradeoff_curves(spec))  # read-only: the cache shares it
    except UnsupportedError:
        return None


def certifiable_ratio(epsilon_lower: float | None, epsilon_certifiable: float | None) -> float | None:
    """ε_lower / ε_certifiable, or None when either is missing or ε_certifiable is 0."""
    if epsilon_lower is None or epsilon_certifiable is None or not math.isfinite(epsilon_certifiable):
        return None
    if epsilon_certifiable <= 0:
        return None
    return float(epsilon_lower) / float(epsilon_certifiable)
