"""Continuous-score one-run bound: the multi-run confidence boxes applied to the canaries of one run.

Steinke, Nasr, Jagielski 2023 (arXiv:2305.08846) and Xiang et al. 2025 (arXiv:2509.08704) read only guesses
(the top-r scores); this module reads the scores themselves, through the threshold boxes of the multi-run design
(:func:`.multi_run.epsilon_lower_bound`, :func:`.multi_run.empirical_tradeoff`; docs/auditing.md, "Choosing the
threshold").

Why the multi-run machinery applies (our argument). Canary i's bit b_i is i.i.d. Bernoulli(½). If canaries do not
interact, canary i's score is x_i = g_i(b_i, ξ_i) with ξ_1, …, ξ_m mutually independent and independent of the
bits (and every g_i the same g: canaries exchangeable, e.g. Dirac gradient canaries on distinct quiet coordinates
under Poisson sampling, scored by one rule). Then, conditionally on the whole bit vector b, the scores are
independent with x_i ~ Q (the law of g(1, ξ)) for b_i = 1 and x_i ~ P (of g(0, ξ)) for b_i = 0: given the
realised counts n_in and n_out, the in-scores are n_in i.i.d. draws of Q and the out-scores n_out i.i.d. draws of
P, independent of each other — the multi-run design with n_in + n_out trials, so its boxes hold at their stated
level conditionally on b, hence unconditionally. And (P, Q) is (ε, δ)-indistinguishable when the training is
(ε, δ)-DP in each canary: fix b_{-i}; adding or removing canary i is one neighbouring step, x_i is a
post-processing of the output, and the law of x_i given b_i does not depend on b_{-i}.

IMPORTANT (assumption): canaries must not interact and must be scored by one rule that reads no other canary
(no normalisation across canaries). Interacting canaries (input canaries, fixed-size batches) break the
conditional independence; then only :func:`.one_run.epsilon_one_run` holds.

The (ε, δ) inequality of the boxes covers both orderings of the pair (:func:`.intervals.epsilon_from_rates`), so
the Bonferroni grid's low thresholds ("out" for scores below an in-score order statistic, FN ≤ k) are the
two-sided decoder's second tail; the μ-GDP form reads each box in both orderings too.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.special
from numpy.typing import ArrayLike

from accountants.errors import InputError, InputTypeError

from ._checks import _delta, _rates, _scores, _significance, _truth
from .gdp import _gdp_epsilon
from .intervals import clopper_pearson_upper
from .multi_run import _grid, epsilon_lower_bound
from .results import EpsilonLowerBound, GdpLowerBound
from .strategies import Bonferroni, Explicit, ThresholdStrategy, strategy_name

ONE_RUN_SCORES_ASSUMPTION = ("canaries do not interact (each canary's score a function of its own bit and "
                             "independent randomness, by one rule)")
"""What :func:`epsilon_one_run_scores` and :func:`gdp_lower_bound_one_run_scores` assume (module doc)."""


def one_run_in_out(scores: ArrayLike, truth: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """(in-scores, out-scores) of one run's canaries; each side must hold at least one canary."""
    x = _scores("scores", scores)
    y = _truth(truth, x.size)
    if y.all() or not y.any():
        raise InputError(f"truth must mark canaries both in and out; got {int(y.sum())} in and "
                         f"{int((~y).sum())} out of {y.size}")
    return x[y], x[~y]


def epsilon_one_run_scores(scores: ArrayLike, truth: ArrayLike, *, delta: float, significance: float = 0.05,
                           strategy: ThresholdStrategy | None = None) -> EpsilonLowerBound:
    """One-run ε lower bound from the canaries' scores, (ε, δ) form.  Bound: lower (canaries must not interact).

    The multi-run bound (:func:`.multi_run.epsilon_lower_bound`: Clopper–Pearson limits on FPR and FNR, the
    threshold paid for by ``strategy``, default :class:`Bonferroni`) on the in- and out-scores of one run, which
    are i.i.d. draws of the per-canary pair given the realised bits when canaries do not interact (module doc).
    Jeffreys intervals are not offered (approximate coverage). IMPORTANT: higher score ⇒ member.

    Args:
        scores: one score per canary, (m,), finite.
        truth: membership bits (bool or 0/1), one per score, both values present.
        delta: δ ∈ [0, 1).
        significance: s ∈ (0, 1); the bound holds with probability ≥ 1 − s.
        strategy: a :data:`ThresholdStrategy` (default :class:`Bonferroni`).

    Returns:
        :class:`EpsilonLowerBound` with method "one_run_scores".
    """
    xin, xout = one_run_in_out(scores, truth)
    b = epsilon_lower_bound(xin, xout, delta=delta, significance=significance, strategy=strategy)
    return EpsilonLowerBound(b.value, b.confidence, b.delta, "one_run_scores", f"{b.strategy} (threshold boxes "
                             "on one run's scores)", b.threshold, b.fpr, b.fnr, b.fpr_upper, b.fnr_upper,
                             b.n_in, b.n_out, b.n_hypotheses)


def _box_corners(xin: np.ndarray, xout: np.ndarray, s: float, strategy: ThresholdStrategy
                 ) -> tuple[np.ndarray, np.ndarray, int]:
    """(FPR upper limits, FNR upper limits, H): one box per candidate threshold, each rate at s/(2H)."""
    match strategy:
        case Bonferroni(ratio=r):
            g = _grid(xin, xout, r)
            fp, fn = g["fp_ub_count"], g["fn_ub_count"]
        case Explicit(threshold=t):
            fp, fn = np.array([int(np.sum(xout >= t))]), np.array([int(np.sum(xin < t))])
        case _:
            raise InputTypeError(f"strategy must be Bonferroni() or Explicit(t) for the GDP form; got {strategy!r}")
    h = fp.size
    return clopper_pearson_upper(fp, xout.size, s / (2 * h)), clopper_pearson_upper(fn, xin.size, s / (2 * h)), h


def gdp_mu_from_boxes(fpr_upper: ArrayLike, fnr_upper: ArrayLike) -> float:
    """The largest μ whose GDP curve some box lies below: max of Φ⁻¹(1 − α) − Φ⁻¹(β), both orderings, ≥ 0.

    A μ-GDP pair has β ≥ Φ(Φ⁻¹(1 − α) − μ) at every test and in both orderings (Dong, Roth, Su 2019,
    arXiv:1905.02383v3, Eq. (6); G_μ is symmetric), i.e. μ ≥ Φ⁻¹(1 − α) − Φ⁻¹(β), which decreases in α and β: so
    upper limits on the rates give a lower bound on μ.  Bound: lower on μ (given upper limits).
    """
    a, b = _rates("fpr_upper", fpr_upper).reshape(-1), _rates("fnr_upper", fnr_upper).reshape(-1)
    if a.size != b.size or a.size == 0:
        raise InputError(f"fpr_upper and fnr_upper must be non-empty and of one length (one box each); got {a.size} "
                         f"and {b.size} values")
    ppf = scipy.special.ndtri
    with np.errstate(divide="ignore", invalid="ignore"):
        mu = np.maximum(ppf(1 - a) - ppf(b), ppf(1 - b) - ppf(a))
    mu = np.where(np.isnan(mu), 0.0, mu)  # a box with a rate 1 refutes nothing
    return float(min(max(np.max(mu, initial=0.0), 0.0), 1e4))  # an empty rate (+inf) is capped at μ = 1e4


def gdp_lower_bound_one_run_scores(scores: ArrayLike, truth: ArrayLike, *, delta: float,
                                   significance: float = 0.05,
                                   strategy: Bonferroni | Explicit | None = None) -> GdpLowerBound:
    """One-run bound from the scores, μ-GDP form: a lower bound on the GDP μ.  Bound: gdp_mu_lower.

    The boxes of :func:`epsilon_one_run_scores` (Clopper–Pearson at s/(2H) per rate; H thresholds of
    :class:`Bonferroni`'s grid, or one :class:`Explicit` threshold) refute every μ-GDP curve some box lies below
    (:func:`gdp_mu_from_boxes`): with probability ≥ 1 − s the per-canary pair is not μ-GDP for any μ ≤
    ``mu_lower`` (canaries must not interact; module doc). The box test of :func:`audit.comparator.violation_test`,
    solved for μ. IMPORTANT: NOT an (ε, δ) lower bound; ``refuted_curve_epsilon`` is the ε at ``delta`` of the
    refuted GDP curve (Dong et al. Cor. 2.13), as for :func:`.one_run.gdp_lower_bound_one_run`.
    """
    s, d = _significance(significance), _delta(delta)
    if d <= 0:
        raise InputError("delta must be > 0 for the GDP form (GDP curves have δ(ε) > 0)")
    strategy = Bonferroni() if strategy is None else strategy
    xin, xout = one_run_in_out(scores, truth)
    a, b, h = _box_corners(xin, xout, s, strategy)
    mu = gdp_mu_from_boxes(a, b)
    eps = _gdp_epsilon(mu, d) if math.isfinite(mu) else math.inf
    return GdpLowerBound(mu, eps, 1 - s, d, "one_run_scores_gdp", f"{strategy_name(strategy)} (threshold boxes on "
                         "one run's scores)", int(xin.size), int(xout.size), h)
