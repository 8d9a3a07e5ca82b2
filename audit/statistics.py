"""Honest statistics: turn attack scores into ε LOWER bounds at a stated confidence.

IMPORTANT: scores are oriented so that higher ⇒ "member"; a threshold t says "member" when
score ≥ t. α = FPR (says member, was out), β = FNR (says out, was in).

Every result states its direction. :class:`EpsilonLowerBound` values are lower bounds that hold
with probability ≥ ``confidence`` over the audit's randomness; anything that assumes a shape
(a Gaussian-DP fit) is returned as :class:`GdpEstimate` with fields named ``*_estimate`` and is
never used to pass or fail a claim.

Multi-run design (independent trials, one canary each): Clopper–Pearson (exact) or Jeffreys
(approximate) intervals on FPR and FNR. Choosing the threshold after looking at the scores is
paid for by a typed :data:`ThresholdStrategy`:

- :class:`Bonferroni` (default): union bound over H candidate thresholds placed at the
  order statistics of a geometric count grid (FP ≤ 0, 1, 2, 4, …; FN ≤ 0, 1, 2, 4, …); H is
  fixed by the trial counts before any score is seen (jax_privacy instead takes the convex
  hull of the realised points, whose size depends on the data);
- :class:`Explicit`: a threshold fixed before the audit (no correction);
- :class:`Split`: pick the threshold on one part of the scores, bound on the rest;
- :class:`MultiSplit`: k random splits at level α/2 each; the lower median of the k bounds
  holds at level α (Meinshausen, Meier, Bühlmann 2009, quantile aggregation with γ = ½).

One-run design (m canaries in one training run): :func:`epsilon_one_run` (Steinke, Nasr,
Jagielski 2023) and :func:`epsilon_one_run_fdp` (Mahloujifar, Melis, Chaudhuri 2024); multi-run
intervals must not be applied to one-run scores (the canaries of one run are not independent
trials of the mechanism).

>>> import numpy as np
>>> from scipy.stats import norm
>>> q = (np.arange(2000) + 0.5) / 2000
>>> b = epsilon_lower_bound(norm.ppf(q) + 2.0, norm.ppf(q), delta=1e-5)
>>> 0.0 < b.value < 10.0, b.bound, b.confidence
(True, 'lower', 0.95)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.optimize
import scipy.stats
from numpy.typing import ArrayLike

from accountants._validate import InputError, InputTypeError

__all__ = [
    "Bonferroni",
    "EmpiricalTradeOff",
    "EpsilonLowerBound",
    "Explicit",
    "GdpEstimate",
    "MultiSplit",
    "Split",
    "ThresholdStrategy",
    "ceiling",
    "ceiling_one_run",
    "certifiable_epsilon",
    "clopper_pearson",
    "clopper_pearson_upper",
    "empirical_tradeoff",
    "epsilon_from_rates",
    "epsilon_lower_bound",
    "epsilon_one_run",
    "epsilon_one_run_fdp",
    "gdp_estimate",
    "gdp_mu_for",
    "jeffreys",
    "jeffreys_upper",
    "one_run_guess_grid",
    "one_run_p_value",
]

INTERVALS = ("clopper_pearson", "jeffreys")


# ------------------------------------------------------------------------------------ validation


def _significance(significance: float) -> float:
    if isinstance(significance, bool) or not isinstance(significance, (int, float)):
        raise InputTypeError(f"significance must be a number; got {type(significance).__name__}")
    if not 0.0 < significance < 1.0:
        raise InputError(f"significance must be in (0, 1); got {significance!r}")
    return float(significance)


def _delta(delta: float) -> float:
    if isinstance(delta, bool) or not isinstance(delta, (int, float)):
        raise InputTypeError(f"delta must be a number; got {type(delta).__name__}")
    if not 0.0 <= delta < 1.0:
        raise InputError(f"delta must be in [0, 1); got {delta!r}")
    return float(delta)


def _scores(name: str, x: ArrayLike) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu().numpy()
    a = np.asarray(x, dtype=np.float64).reshape(-1)
    if a.size == 0:
        raise InputError(f"{name} must hold at least one score; got none")
    if not np.all(np.isfinite(a)):
        bad = np.flatnonzero(~np.isfinite(a))
        raise InputError(f"{name} must be finite; got {a[bad[0]]} ({bad.size} of {a.size} entries, first at index "
                         f"{bad[0]})")
    return a


# ------------------------------------------------------------------------------------ intervals


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
        lo = np.where(k > 0, scipy.stats.beta.ppf(s / 2, k, n - k + 1), 0.0)
        hi = np.where(k < n, scipy.stats.beta.ppf(1 - s / 2, k + 1, n - k), 1.0)
    return lo, hi


def clopper_pearson_upper(k: ArrayLike, n: ArrayLike, significance: float = 0.05) -> np.ndarray:
    """One-sided Clopper–Pearson upper limit: P(p > limit) ≤ significance.  Bound: upper on p.

    Beta.ppf(1 − s; k + 1, n − k), and 1 when k = n (Clopper & Pearson 1934).
    """
    s = _significance(significance)
    k, n = _counts(k, n)
    with np.errstate(invalid="ignore"):
        return np.where(k < n, scipy.stats.beta.ppf(1 - s, k + 1, n - k), 1.0)


def jeffreys(k: ArrayLike, n: ArrayLike, significance: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided Jeffreys interval: Beta(k + ½, n − k + ½) quantiles, with the endpoints 0 at k = 0, 1 at k = n.

    Brown, Cai, DasGupta (2001) §4.1.2. Coverage is approximate (close to nominal on average,
    below it for some p), so a bound built on it is labelled ``method="jeffreys"`` and is not
    used for the violation test.
    """
    s = _significance(significance)
    k, n = _counts(k, n)
    lo = np.where(k > 0, scipy.stats.beta.ppf(s / 2, k + 0.5, n - k + 0.5), 0.0)
    hi = np.where(k < n, scipy.stats.beta.ppf(1 - s / 2, k + 0.5, n - k + 0.5), 1.0)
    return lo, hi


def jeffreys_upper(k: ArrayLike, n: ArrayLike, significance: float = 0.05) -> np.ndarray:
    """One-sided Jeffreys upper limit Beta.ppf(1 − s; k + ½, n − k + ½) (1 at k = n).  Approximate."""
    s = _significance(significance)
    k, n = _counts(k, n)
    return np.where(k < n, scipy.stats.beta.ppf(1 - s, k + 0.5, n - k + 0.5), 1.0)


def _counts(k: ArrayLike, n: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    if np.any(n < 1) or np.any(n != np.round(n)):
        raise InputError(f"n must be integers ≥ 1; got {n.reshape(-1)[:5].tolist()}")
    if np.any(k < 0) or np.any(k > n) or np.any(k != np.round(k)):
        raise InputError("k must be integers in [0, n]")
    return np.broadcast_arrays(k, n)


def _upper(interval: str, k: np.ndarray, n: int, significance: float) -> np.ndarray:
    match interval:
        case "clopper_pearson":
            return clopper_pearson_upper(k, n, significance)
        case "jeffreys":
            return jeffreys_upper(k, n, significance)
    raise InputError(f"interval must be one of {list(INTERVALS)}; got {interval!r}")


# ------------------------------------------------------------------------------------ strategies


@dataclass(frozen=True, slots=True)
class Bonferroni:
    """Union bound over H candidate thresholds on geometric count grids (ratio r; see :func:`_grid`).

    H = #levels(n_out) + #levels(n_in) ≈ 2 log_r(n) + 2 is fixed by the design, not by the scores.
    """

    ratio: float = 2.0

    def __post_init__(self) -> None:
        if not self.ratio > 1.0:
            raise InputError(f"ratio must be > 1; got {self.ratio!r}")


@dataclass(frozen=True, slots=True)
class Explicit:
    """A threshold fixed before the scores were seen: no correction."""

    threshold: float

    def __post_init__(self) -> None:
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, (int, float)):
            raise InputTypeError(f"threshold must be a number; got {type(self.threshold).__name__}")
        if math.isnan(self.threshold):
            raise InputError("threshold must not be NaN")


@dataclass(frozen=True, slots=True)
class Split:
    """Choose the threshold on a fraction ``frac`` of the scores, bound on the rest (seeded)."""

    frac: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0.0 < self.frac < 1.0:
            raise InputError(f"frac must be in (0, 1); got {self.frac!r}")


@dataclass(frozen=True, slots=True)
class MultiSplit:
    """k seeded splits, each bounded at level α/2; the lower median holds at level α."""

    k: int = 11
    frac: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise InputError(f"k must be an integer ≥ 1; got {self.k!r}")
        if not 0.0 < self.frac < 1.0:
            raise InputError(f"frac must be in (0, 1); got {self.frac!r}")


ThresholdStrategy = Bonferroni | Explicit | Split | MultiSplit
STRATEGIES = {"bonferroni": Bonferroni, "explicit": Explicit, "split": Split, "multi_split": MultiSplit}


def strategy_name(strategy: ThresholdStrategy) -> str:
    """A stable description, e.g. ``"split(frac=0.5, seed=0)"``."""
    match strategy:
        case Bonferroni(ratio=r):
            return "bonferroni" if r == 2.0 else f"bonferroni(ratio={r:g})"
        case Explicit(threshold=t):
            return f"explicit({t:g})"
        case Split(frac=f, seed=s):
            return f"split(frac={f:g}, seed={s})"
        case MultiSplit(k=k, frac=f, seed=s):
            return f"multi_split(k={k}, frac={f:g}, seed={s})"
    raise InputTypeError(f"strategy must be Bonferroni(), Explicit(t), Split(...) or MultiSplit(...); got {strategy!r}")


# ------------------------------------------------------------------------------------ results


@dataclass(frozen=True)
class EpsilonLowerBound:
    """ε ≥ ``value`` at ``delta``, with probability ≥ ``confidence``.  Bound: lower.

    Attributes:
        value: the lower bound (0 when nothing is certified).
        confidence: 1 − significance.
        delta: the δ of the (ε, δ) statement.
        method: "clopper_pearson", "jeffreys" (approximate coverage), "one_run" or "one_run_fdp".
        strategy: how the threshold (or number of guesses) was chosen and paid for.
        threshold: the threshold that attained ``value`` (score ≥ threshold ⇒ member); None if none.
        fpr, fnr: realised empirical rates at that threshold (multi-run).
        fpr_upper, fnr_upper: the upper confidence limits used.
        n_in, n_out: counts of member / non-member trials (multi-run); m canaries (one-run: n_in + n_out).
        n_hypotheses: thresholds (or guess counts) the union bound paid for.
        guesses, correct: one-run: guesses made and how many were right.
    """

    value: float
    confidence: float
    delta: float
    method: str
    strategy: str
    threshold: float | None = None
    fpr: float | None = None
    fnr: float | None = None
    fpr_upper: float | None = None
    fnr_upper: float | None = None
    n_in: int = 0
    n_out: int = 0
    n_hypotheses: int = 1
    guesses: int | None = None
    correct: int | None = None
    bound: str = field(default="lower", init=False)

    def __float__(self) -> float:
        return float(self.value)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (every attribute, plus ``bound``)."""
        return {k: getattr(self, k) for k in (
            "value", "bound", "confidence", "delta", "method", "strategy", "threshold", "fpr", "fnr", "fpr_upper",
            "fnr_upper", "n_in", "n_out", "n_hypotheses", "guesses", "correct")}


@dataclass(frozen=True)
class GdpEstimate:
    """A Gaussian-DP fit to the empirical trade-off.  Bound: none (an estimate).

    It assumes the mechanism's curve has Gaussian shape, so it is not a model-free lower bound
    (auditing digest §2c) and never passes or fails anything.

    Attributes:
        mu_estimate: max over the frontier of Φ⁻¹(1 − FPR_ub) − Φ⁻¹(FNR_ub) (both orientations),
            with the same Bonferroni-corrected CP limits as the ε bound (grid thresholds); clamped at 0.
        epsilon_estimate: the ε of μ-GDP at ``delta`` (Dong et al. Cor. 2.13).
        delta: δ.
    """

    mu_estimate: float
    epsilon_estimate: float
    delta: float

    def to_dict(self) -> dict[str, Any]:
        return {"mu_estimate": self.mu_estimate, "epsilon_estimate": self.epsilon_estimate, "delta": self.delta}


@dataclass(frozen=True)
class EmpiricalTradeOff:
    """Empirical (FPR, FNR) points on the threshold frontier with simultaneous confidence boxes.

    All boxes contain the true (FPR, FNR) of their threshold simultaneously with probability
    ≥ ``confidence``: each rate gets a two-sided Clopper–Pearson interval at level
    significance / (2H) for H thresholds.

    Attributes:
        thresholds, fpr, fnr, fpr_lo, fpr_hi, fnr_lo, fnr_hi: (H,) arrays, thresholds decreasing.
        n_in, n_out: trial counts.
        confidence: simultaneous confidence of the boxes.
        roc_fpr, roc_tpr: the full empirical ROC (every threshold), for plots only.
    """

    thresholds: np.ndarray
    fpr: np.ndarray
    fnr: np.ndarray
    fpr_lo: np.ndarray
    fpr_hi: np.ndarray
    fnr_lo: np.ndarray
    fnr_hi: np.ndarray
    n_in: int
    n_out: int
    confidence: float
    roc_fpr: np.ndarray = field(default_factory=lambda: np.zeros(0))
    roc_tpr: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def to_dict(self) -> dict[str, Any]:
        return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in (
            ("thresholds", self.thresholds), ("fpr", self.fpr), ("fnr", self.fnr), ("fpr_lo", self.fpr_lo),
            ("fpr_hi", self.fpr_hi), ("fnr_lo", self.fnr_lo), ("fnr_hi", self.fnr_hi), ("n_in", self.n_in),
            ("n_out", self.n_out), ("confidence", self.confidence))}  # the ROC is for plots only


# ------------------------------------------------------------------------------------ ε from rates


def epsilon_from_rates(fpr: ArrayLike, fnr: ArrayLike, delta: float) -> np.ndarray:
    """ε implied by a test with error rates (FPR, FNR) against an (ε, δ)-DP mechanism.

    Kairouz, Oh, Viswanath 2015 Thm 2.1 / Dong, Roth, Su (arXiv:1905.02383v3) Eq. (5): every
    test satisfies FPR + e^ε FNR ≥ 1 − δ and FNR + e^ε FPR ≥ 1 − δ, hence
    ε ≥ max{log((1 − δ − FNR)/FPR), log((1 − δ − FPR)/FNR), 0}. Fed with UPPER limits on the
    rates, the result is a lower bound on ε.  Bound: lower (given upper limits on the rates).

    Returns:
        array of the broadcast shape; +inf where a rate is 0 and the other leaves room.
    """
    d = _delta(delta)
    a = np.asarray(fpr, dtype=np.float64)
    b = np.asarray(fnr, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        r1 = np.where(1 - d - b > 0, np.log(np.maximum(1 - d - b, 0)) - np.log(a), -np.inf)
        r2 = np.where(1 - d - a > 0, np.log(np.maximum(1 - d - a, 0)) - np.log(b), -np.inf)
    return np.maximum(np.maximum(np.nan_to_num(r1, nan=-np.inf), np.nan_to_num(r2, nan=-np.inf)), 0.0)


# ------------------------------------------------------------------------------------ thresholds


def _levels(n: int, ratio: float) -> np.ndarray:
    """Count levels 0, 1, ⌊r⌋, ⌊r²⌋, … ≤ n (fixed by n and r before any score is seen)."""
    out, k = {0}, 1.0
    while k <= n:
        out.add(int(k))
        k *= ratio
    return np.array(sorted(out))


def _grid(in_scores: np.ndarray, out_scores: np.ndarray, ratio: float) -> dict[str, np.ndarray]:
    """The candidate thresholds of :class:`Bonferroni` and the counts their upper limits use.

    Two families, H = #levels(n_out) + #levels(n_in) thresholds, a number fixed before the audit:

    - for each level k of the out-count grid, t just above the (k+1)-th largest out score
      ("member" iff score > t), so FP ≤ k. The true FPR at t is at most S(X_(k+1)), an order
      statistic whose law is Beta(k+1, n−k) for continuous scores (stochastically smaller with
      ties), so the Clopper–Pearson upper limit AT COUNT k is valid although t was read off the
      data; FNR at t is bounded conditionally on the out scores (t is independent of the in scores);
    - symmetrically, for each level k of the in-count grid, t at the (k+1)-th smallest in score
      ("member" iff score ≥ t), so FN ≤ k.

    Returns:
        dict of (H,) arrays: threshold, strict (bool: "member" iff score > threshold), fp, fn
        (realised counts) and fp_ub_count, fn_ub_count (the counts the upper limits use).
    """
    n_in, n_out = in_scores.size, out_scores.size
    out_desc, in_asc = np.sort(out_scores)[::-1], np.sort(in_scores)
    ko, ki = _levels(n_out, ratio), _levels(n_in, ratio)
    t1 = np.where(ko < n_out, out_desc[np.minimum(ko, n_out - 1)], -np.inf)  # member iff score > t1
    fp1 = np.sum(out_scores[None, :] > t1[:, None], axis=1)
    fn1 = np.sum(in_scores[None, :] <= t1[:, None], axis=1)
    t2 = np.where(ki < n_in, in_asc[np.minimum(ki, n_in - 1)], np.inf)  # member iff score ≥ t2
    fp2 = np.sum(out_scores[None, :] >= t2[:, None], axis=1)
    fn2 = np.sum(in_scores[None, :] < t2[:, None], axis=1)
    return {
        "threshold": np.concatenate([t1, t2]),
        "strict": np.concatenate([np.ones(ko.size, bool), np.zeros(ki.size, bool)]),
        "fp": np.concatenate([fp1, fp2]),
        "fn": np.concatenate([fn1, fn2]),
        "fp_ub_count": np.concatenate([ko, fp2]),
        "fn_ub_count": np.concatenate([fn1, ki]),
    }


def epsilon_lower_bound(
    in_scores: ArrayLike,
    out_scores: ArrayLike,
    *,
    delta: float,
    significance: float = 0.05,
    strategy: ThresholdStrategy | None = None,
    interval: str = "clopper_pearson",
) -> EpsilonLowerBound:
    """ε lower bound from independent trials (multi-run design), paying for the threshold.  Bound: lower.

    At a threshold t with FP false positives among n_out and FN false negatives among n_in,
    FPR_ub and FNR_ub are one-sided upper limits at level s/2 each (Jagielski et al. 2020,
    arXiv:2006.07709; Nasr et al. 2021, arXiv:2101.04535), and
    ε_lb(t) = max{log((1 − δ − FNR_ub)/FPR_ub), log((1 − δ − FPR_ub)/FNR_ub), 0}
    (:func:`epsilon_from_rates`). The threshold strategy decides how s is shared (module doc).

    IMPORTANT: higher score ⇒ member. Identical (null) scores give 0.

    Args:
        in_scores: scores of trials whose canary was in, (n_in,).
        out_scores: scores of trials whose canary was out, (n_out,).
        delta: δ ∈ [0, 1).
        significance: s ∈ (0, 1); the bound holds with probability ≥ 1 − s.
        strategy: :data:`ThresholdStrategy`; default :class:`Bonferroni`.
        interval: "clopper_pearson" (exact; default) or "jeffreys" (approximate coverage).

    Returns:
        :class:`EpsilonLowerBound`.
    """
    s = _significance(significance)
    d = _delta(delta)
    xin, xout = _scores("in_scores", in_scores), _scores("out_scores", out_scores)
    strategy = Bonferroni() if strategy is None else strategy
    if interval not in INTERVALS:
        raise InputError(f"interval must be one of {list(INTERVALS)}; got {interval!r}")
    name = strategy_name(strategy)
    match strategy:
        case Bonferroni(ratio=r):
            return _best(_grid(xin, xout, r), xin.size, xout.size, d, s, interval, name)
        case Explicit(threshold=th):
            g = _explicit(xin, xout, th)
            return _best(g, xin.size, xout.size, d, s, interval, name)
        case Split(frac=frac, seed=seed):
            return _split_bound(xin, xout, frac, np.random.default_rng(seed), d, s, interval, name)
        case MultiSplit(k=k, frac=frac, seed=seed):
            rng = np.random.default_rng(seed)
            bounds = [_split_bound(xin, xout, frac, rng, d, s / 2, interval, name) for _ in range(k)]
            bounds.sort(key=lambda b: b.value)
            chosen = bounds[(k - 1) // 2]  # lower median: at least half of the k bounds are ≥ it
            return EpsilonLowerBound(chosen.value, 1 - s, d, interval, name, chosen.threshold, chosen.fpr,
                                     chosen.fnr, chosen.fpr_upper, chosen.fnr_upper, xin.size, xout.size, k)
    raise InputTypeError(f"strategy must be Bonferroni(), Explicit(t), Split(...) or MultiSplit(...); got {strategy!r}")


def _explicit(xin: np.ndarray, xout: np.ndarray, th: float) -> dict[str, np.ndarray]:
    fp, fn = np.array([int(np.sum(xout >= th))]), np.array([int(np.sum(xin < th))])
    return {"threshold": np.array([float(th)]), "strict": np.zeros(1, bool), "fp": fp, "fn": fn,
            "fp_ub_count": fp, "fn_ub_count": fn}


def _bounds(g: dict[str, np.ndarray], n_in: int, n_out: int, d: float, s: float, interval: str):
    """ε lower bound at every candidate with a union bound over all of them (and over the two rates)."""
    h = g["threshold"].size
    a_ub = _upper(interval, g["fp_ub_count"], n_out, s / (2 * h))
    b_ub = _upper(interval, g["fn_ub_count"], n_in, s / (2 * h))
    return epsilon_from_rates(a_ub, b_ub, d), a_ub, b_ub


def _best(g: dict[str, np.ndarray], n_in: int, n_out: int, d: float, s: float, interval: str,
          name: str) -> EpsilonLowerBound:
    eps, a_ub, b_ub = _bounds(g, n_in, n_out, d, s, interval)
    i = int(np.argmax(eps))
    t = g["threshold"][i]
    return EpsilonLowerBound(float(eps[i]), 1 - s, d, interval, name, float(t) if np.isfinite(t) else None,
                             float(g["fp"][i] / n_out), float(g["fn"][i] / n_in), float(a_ub[i]), float(b_ub[i]),
                             n_in, n_out, int(g["threshold"].size))


def _split_bound(xin, xout, frac, rng, d, s, interval, name) -> EpsilonLowerBound:
    pin, pout = rng.permutation(xin.size), rng.permutation(xout.size)
    kin, kout = int(xin.size * frac), int(xout.size * frac)
    if min(kin, kout, xin.size - kin, xout.size - kout) < 1:
        raise InputError(f"frac={frac:g} leaves an empty part for {xin.size} in / {xout.size} out scores")
    sel_in, ev_in = xin[pin[:kin]], xin[pin[kin:]]
    sel_out, ev_out = xout[pout[:kout]], xout[pout[kout:]]
    g = _grid(sel_in, sel_out, 2.0)
    eps, _, _ = _bounds(g, sel_in.size, sel_out.size, d, s, interval)  # choose on the selection part
    i = int(np.argmax(eps))
    th = g["threshold"][i]
    if g["strict"][i]:  # "member iff score > th": the same test on the evaluation part
        fp, fn = np.array([int(np.sum(ev_out > th))]), np.array([int(np.sum(ev_in <= th))])
        ge = {"threshold": np.array([th]), "strict": np.ones(1, bool), "fp": fp, "fn": fn, "fp_ub_count": fp,
              "fn_ub_count": fn}
    else:
        ge = _explicit(ev_in, ev_out, th)
    return _best(ge, ev_in.size, ev_out.size, d, s, interval, name)


def empirical_tradeoff(in_scores: ArrayLike, out_scores: ArrayLike, *, significance: float = 0.05,
                       ratio: float = 2.0) -> EmpiricalTradeOff:
    """(FPR, FNR) at the :class:`Bonferroni` candidate thresholds, with simultaneous confidence boxes.

    Bound: all boxes contain their threshold's true (FPR, FNR) at once with probability
    ≥ 1 − significance: each of the 2H rate intervals is a two-sided Clopper–Pearson interval at
    level significance/(2H) (union bound), its upper end taken at the count of :func:`_grid`.
    Points are sorted by FPR; ``roc_fpr``/``roc_tpr`` give the full empirical ROC for plotting.
    """
    s = _significance(significance)
    xin, xout = _scores("in_scores", in_scores), _scores("out_scores", out_scores)
    g = _grid(xin, xout, ratio)
    h = g["threshold"].size
    a_lo, _ = clopper_pearson(g["fp"], xout.size, s / (2 * h))
    _, a_hi = clopper_pearson(g["fp_ub_count"], xout.size, s / (2 * h))
    b_lo, _ = clopper_pearson(g["fn"], xin.size, s / (2 * h))
    _, b_hi = clopper_pearson(g["fn_ub_count"], xin.size, s / (2 * h))
    fpr, fnr = g["fp"] / xout.size, g["fn"] / xin.size
    o = np.lexsort((fnr, fpr))
    t = np.unique(np.concatenate([xin, xout]))[::-1]
    roc_fpr = np.concatenate([[0.0], np.sum(xout[None, :] >= t[:, None], axis=1) / xout.size])
    roc_tpr = np.concatenate([[0.0], np.sum(xin[None, :] >= t[:, None], axis=1) / xin.size])
    return EmpiricalTradeOff(g["threshold"][o], fpr[o], fnr[o], a_lo[o], a_hi[o], b_lo[o], b_hi[o], xin.size,
                             xout.size, 1 - s, roc_fpr, roc_tpr)


def _cp_epsilon(fp, fn, n_in: int, n_out: int, d: float, s: float) -> np.ndarray:
    """ε lower bound at fixed thresholds: each rate's CP upper limit at s/2."""
    return epsilon_from_rates(clopper_pearson_upper(fp, n_out, s / 2), clopper_pearson_upper(fn, n_in, s / 2), d)


def ceiling(n_in: int, n_out: int, *, delta: float, significance: float = 0.05,
            strategy: ThresholdStrategy | None = None) -> float:
    """The largest ε lower bound a multi-run design can certify: a perfect attack (FP = FN = 0).

    Evaluates :func:`epsilon_lower_bound` on perfectly separated scores with the design's
    threshold strategy. With one pre-chosen threshold (:class:`Explicit`) this is
    log((1 − δ − u_in)/u_out), u = 1 − (s/2)^{1/n} (auditing digest §2a: n = 100 each → 3.28 at
    s = 0.05, δ = 1e-5); :class:`Bonferroni` pays for its H thresholds. A claim above the ceiling
    can never be refuted by this design.  Bound: upper on every ε_lower of the design.
    """
    for name, v in (("n_in", n_in), ("n_out", n_out)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise InputError(f"{name} must be an integer ≥ 1; got {v!r}")
    strategy = Bonferroni() if strategy is None else strategy
    if isinstance(strategy, Explicit):
        strategy = Explicit(0.5)
    xin, xout = np.ones(int(n_in)), np.zeros(int(n_out))
    if isinstance(strategy, (Split, MultiSplit)):  # a perfect attack on the evaluation part
        frac = strategy.frac
        xin, xout = np.ones(int(n_in)), np.zeros(int(n_out))
        ev_in, ev_out = n_in - int(n_in * frac), n_out - int(n_out * frac)
        s = _significance(significance) / (2 if isinstance(strategy, MultiSplit) else 1)
        return float(_cp_epsilon(0, 0, ev_in, ev_out, _delta(delta), s))
    return epsilon_lower_bound(xin, xout, delta=delta, significance=significance, strategy=strategy).value


def certifiable_epsilon(fpr: ArrayLike, fnr: ArrayLike, n_in: int, n_out: int, *, delta: float,
                        significance: float = 0.05) -> float:
    """The ε lower bound a design would certify if its counts equalled their expectations.

    For points (α_j, f(α_j)) of a known curve, takes FP = round(α n_out), FN = round(f n_in), and
    returns max_j of the Clopper–Pearson bound with ONE pre-chosen threshold (no correction):
    "the best the trial count allows" for an attack whose trade-off is f.  Bound: none (a
    benchmark for tightness, not a statement about a mechanism).
    """
    s, d = _significance(significance), _delta(delta)
    fp = np.clip(np.round(np.asarray(fpr, dtype=np.float64) * n_out), 0, n_out)
    fn = np.clip(np.round(np.asarray(fnr, dtype=np.float64) * n_in), 0, n_in)
    return float(np.max(_cp_epsilon(fp, fn, n_in, n_out, d, s)))


# ------------------------------------------------------------------------------------ GDP estimate


def gdp_mu_for(epsilon: float, delta: float) -> float:
    """The μ whose μ-GDP curve has δ(ε) = δ exactly (0 when δ ≥ δ_μ→0 ... i.e. ε is not binding).

    Solves Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ) = δ (Dong et al. Cor. 2.13; increasing in μ) by brentq.
    """
    d = _delta(delta)
    if d <= 0:
        raise InputError("delta must be > 0 for a finite GDP μ")
    if epsilon < 0:
        raise InputError(f"epsilon must be ≥ 0; got {epsilon!r}")

    def gap(mu: float) -> float:
        return _gdp_delta(mu, epsilon) - d

    hi = 1.0
    while gap(hi) < 0:
        hi *= 2.0
        if hi > 1e4:
            return math.inf
    return float(scipy.optimize.brentq(gap, 1e-12, hi, xtol=1e-12, rtol=1e-12))


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


# ------------------------------------------------------------------------------------ one run


def one_run_p_value(m: int, guesses: int, correct: int, eps: float, delta: float) -> float:
    """p-value of ≥ ``correct`` right guesses out of ``guesses`` under "M is (ε, δ)-DP".  Bound: upper on the p-value.

    Steinke, Nasr, Jagielski 2023 (arXiv:2305.08846) Thm 3.1 / Prop. 5.1: with q = e^ε/(1+e^ε),
    β = P[Bin(r, q) ≥ v]; for δ > 0, p = min(1, β + 2mδ · max_{i=1..v} P[v > Bin(r, q) ≥ v − i] / i).
    """
    q = 1.0 / (1.0 + math.exp(-eps))
    beta = float(scipy.stats.binom.sf(correct - 1, guesses, q))
    if delta == 0 or correct == 0:
        return beta
    i = np.arange(1, correct + 1)
    tail = scipy.stats.binom.sf(correct - i - 1, guesses, q) - beta
    alpha = float(np.max(tail / i, initial=0.0))
    return min(1.0, beta + alpha * delta * 2 * m)


def _sup_eps(reject, eps_max: float = 64.0) -> float:
    """sup{ε ≥ 0 : reject(ε)} for a predicate true on [0, ε*) (doubling, then brentq on a sign change)."""
    if not reject(0.0):
        return 0.0
    lo, hi = 0.0, 1.0
    while reject(hi):
        lo, hi = hi, 2 * hi
        if hi > eps_max:
            return eps_max
    for _ in range(60):  # bisection to ~1e-12 relative
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
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 1:
        raise InputError(f"m must be an integer ≥ 1; got {m!r}")
    g = {int(m)}
    r = int(m)
    while r > 1:
        r = max(1, r // 2)
        g.add(r)
    return np.array(sorted(g, reverse=True))


def _one_run(scores, truth, delta, significance, guesses, method, reject_fn) -> EpsilonLowerBound:
    s, d = _significance(significance), _delta(delta)
    x = _scores("scores", scores)
    if hasattr(truth, "detach"):
        truth = truth.detach().cpu().numpy()
    y = np.asarray(truth).astype(bool).reshape(-1)
    if y.size != x.size:
        raise InputError(f"truth must have one entry per score; got {y.size} and {x.size}")
    m = x.size
    grid = one_run_guess_grid(m) if guesses is None else np.asarray(guesses, dtype=int).reshape(-1)
    if grid.size == 0 or grid.min() < 1 or grid.max() > m:
        raise InputError(f"guesses must be integers in [1, {m}]")
    order = np.argsort(-x, kind="stable")  # top-r by score are guessed "member" (one-sided guessing)
    correct_at = np.cumsum(y[order])
    sh = s / grid.size  # union bound over the guess counts
    best = (0.0, None, None)
    for r in grid:
        v = int(correct_at[r - 1])
        e = _sup_eps(lambda eps, r=int(r), v=v: reject_fn(m, r, v, eps, d, sh))
        if e > best[0] or best[1] is None:
            best = (e, int(r), v)
    e, r, v = best
    return EpsilonLowerBound(e, 1 - s, d, method, f"bonferroni over {grid.size} guess counts", None,
                             n_in=int(y.sum()), n_out=int((~y).sum()), n_hypotheses=int(grid.size), guesses=r,
                             correct=v)


def epsilon_one_run(scores: ArrayLike, truth: ArrayLike, *, delta: float, significance: float = 0.05,
                    guesses: ArrayLike | None = None) -> EpsilonLowerBound:
    """One-run ε lower bound (m canaries, each in with probability ½, ONE training run).  Bound: lower.

    Steinke, Nasr, Jagielski 2023 (arXiv:2305.08846) Alg. 1 and Thm 3.1 with the δ term of
    Prop. 5.1: guess "member" for the r highest scores; with v right guesses the bound is
    sup{ε : p(ε) < s'} (:func:`one_run_p_value`), maximised over r in :func:`one_run_guess_grid`
    (or ``guesses``) with a union bound s' = s / #grid.
    """
    def reject(m, r, v, eps, d, sh):
        return one_run_p_value(m, r, v, eps, d) < sh

    return _one_run(scores, truth, delta, significance, guesses, "one_run", reject)


def _fdp_rejects(m: int, r: int, v: int, eps: float, delta: float, sh: float) -> bool:
    """Mahloujifar et al. (arXiv:2410.22235) Alg. 'audit_rh_with_cap' for the GDP curve of (ε, δ), k = 2."""
    if v == 0:
        return False
    mu = gdp_mu_for(eps, delta) if delta > 0 else math.inf
    if math.isinf(mu):
        return False  # no GDP curve meets this (ε, δ): nothing to reject
    ppf, cdf = scipy.stats.norm.ppf, scipy.stats.norm.cdf

    def blow_up_inverse(x: float) -> float:  # B⁻¹(x) = 1 − f⁻¹... for GDP: Φ(Φ⁻¹(x) − μ)
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


def epsilon_one_run_fdp(scores: ArrayLike, truth: ArrayLike, *, delta: float, significance: float = 0.05,
                        guesses: ArrayLike | None = None) -> EpsilonLowerBound:
    """f-DP one-run ε lower bound through the Gaussian family.  Bound: lower.

    Mahloujifar, Melis, Chaudhuri 2024 (arXiv:2410.22235) Thm 9 / Alg. 'audit_rh_with_cap': for a
    candidate ε, the claim "μ(ε, δ)-GDP" (μ from :func:`gdp_mu_for`) is rejected at level s' when
    the recursion over correct guesses exceeds r/m; the bound is the largest rejected ε. Same
    guess grid and union bound as :func:`epsilon_one_run`. Since (ε, δ)-DP does not imply
    μ(ε, δ)-GDP, the bound refutes the GDP curve through (ε, δ): the mechanism's curve lies below
    it somewhere, i.e. it is not μ(ε_lb, δ)-GDP.
    """
    if _delta(delta) <= 0:
        raise InputError("delta must be > 0 for the f-DP one-run bound (GDP curves have δ(ε) > 0)")
    return _one_run(scores, truth, delta, significance, guesses, "one_run_fdp", _fdp_rejects)


def ceiling_one_run(m: int, *, delta: float, significance: float = 0.05) -> float:
    """The best one-run ε lower bound for m canaries: every guess right at every r of the grid.

    Bound: upper on every one-run bound of the design.
    """
    grid = one_run_guess_grid(m)
    del grid
    y = np.ones(m, dtype=bool)
    x = np.arange(m, 0, -1, dtype=np.float64)
    return epsilon_one_run(x, y, delta=delta, significance=significance).value
