"""Multi-run design: ε lower bounds from independent trials, paying for the threshold choice."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from accountants.errors import InputError, InputTypeError

from ._checks import _delta, _rates, _ratio, _scores, _significance, _trials
from .intervals import INTERVALS, _upper, clopper_pearson, clopper_pearson_upper, epsilon_from_rates
from .results import EmpiricalTradeOff, EpsilonLowerBound
from .strategies import Bonferroni, Explicit, MultiSplit, Split, ThresholdStrategy, strategy_name


def _levels(n: int, ratio: float) -> np.ndarray:
    """Count levels 0, 1, ⌊r⌋, ⌊r²⌋, … ≤ n (fixed by n and r before any score is seen)."""
    ratio = _ratio(ratio)  # ≥ 1.01, so at most log(n)/log(1.01) ≈ 1900 steps for n = 1e8
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


def _select_threshold(sel_in: np.ndarray, sel_out: np.ndarray, d: float, s: float, interval: str) -> float:
    """The threshold ("member" iff score ≥ t, t a selection-part score) with the best UNCORRECTED bound.

    The selection part is used for nothing else, so its choice needs no multiplicity correction
    (issue 11 §4: with the Bonferroni-corrected objective every candidate scores 0 at small n and
    the choice degenerates). Each rate's upper limit is taken at s/2, as in the evaluation; ties
    in that bound go to the larger uncorrected point estimate ε(FPR, FNR), then to the lowest t.
    """
    t = np.unique(np.concatenate([sel_in, sel_out]))
    fp = sel_out.size - np.searchsorted(np.sort(sel_out), t, side="left")
    fn = np.searchsorted(np.sort(sel_in), t, side="left")
    bound = epsilon_from_rates(_upper(interval, fp, sel_out.size, s / 2), _upper(interval, fn, sel_in.size, s / 2), d)
    point = epsilon_from_rates(fp / sel_out.size, fn / sel_in.size, d)
    best = np.flatnonzero(bound == bound.max())
    return float(t[best[int(np.argmax(point[best]))]])


def _split_bound(xin, xout, frac, rng, d, s, interval, name) -> EpsilonLowerBound:
    pin, pout = rng.permutation(xin.size), rng.permutation(xout.size)
    kin, kout = int(xin.size * frac), int(xout.size * frac)
    if min(kin, kout, xin.size - kin, xout.size - kout) < 1:
        raise InputError(f"frac={frac:g} leaves an empty part for {xin.size} in / {xout.size} out scores")
    sel_in, ev_in = xin[pin[:kin]], xin[pin[kin:]]
    sel_out, ev_out = xout[pout[:kout]], xout[pout[kout:]]
    th = _select_threshold(sel_in, sel_out, d, s, interval)  # chosen on the selection part only
    return _best(_explicit(ev_in, ev_out, th), ev_in.size, ev_out.size, d, s, interval, name)


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
    t = np.unique(np.concatenate([xin, xout]))[::-1]  # count of scores ≥ t, by binary search (no n² table)
    roc_fpr = np.concatenate([[0.0], (xout.size - np.searchsorted(np.sort(xout), t, side="left")) / xout.size])
    roc_tpr = np.concatenate([[0.0], (xin.size - np.searchsorted(np.sort(xin), t, side="left")) / xin.size])
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
    n_in, n_out = _trials("n_in", n_in), _trials("n_out", n_out)
    strategy = Bonferroni() if strategy is None else strategy
    if isinstance(strategy, Explicit):
        strategy = Explicit(0.5)
    if isinstance(strategy, (Split, MultiSplit)):  # a perfect attack on the evaluation part
        frac = strategy.frac
        ev_in, ev_out = n_in - int(n_in * frac), n_out - int(n_out * frac)
        if min(ev_in, ev_out, n_in - ev_in, n_out - ev_out) < 1:
            raise InputError(f"frac={frac:g} leaves an empty part for {n_in} in / {n_out} out trials")
        s = _significance(significance) / (2 if isinstance(strategy, MultiSplit) else 1)
        return float(_cp_epsilon(0, 0, ev_in, ev_out, _delta(delta), s))
    xin, xout = np.ones(n_in), np.zeros(n_out)
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
    n_in, n_out = _trials("n_in", n_in), _trials("n_out", n_out)
    a, f = _rates("fpr", fpr), _rates("fnr", fnr)
    if 0 in (a.size, f.size) or (a.shape != f.shape and 1 not in (a.size, f.size)):  # was a raw numpy ValueError
        raise InputError(f"fpr and fnr must be non-empty and of one length (points of a curve); got {a.size} "
                         f"and {f.size} values")
    fp = np.clip(np.round(a * n_out), 0, n_out)
    fn = np.clip(np.round(f * n_in), 0, n_in)
    return float(np.max(_cp_epsilon(fp, fn, n_in, n_out, d, s)))

