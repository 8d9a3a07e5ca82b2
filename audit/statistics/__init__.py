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
Jagielski 2023), an (ε, δ) lower bound, and :func:`gdp_lower_bound_one_run` (Mahloujifar, Melis,
Chaudhuri 2024), a lower bound on the GDP μ returned as :class:`GdpLowerBound` (NOT an (ε, δ)
lower bound; ``epsilon_one_run_fdp`` is its deprecated name). Tied scores are guessed together.
:mod:`.one_run_order` adds Xiang et al.'s (2025) order-statistics bound in its (ε, δ) form
(:func:`epsilon_one_run_order`) and μ-GDP form (:func:`gdp_lower_bound_one_run_order`); it assumes
canaries that do not interact (independent per-canary views). :mod:`.one_run_family` runs it under the composite
null "each canary sees a T-fold subsampled Gaussian of unknown rate and noise"
(:func:`epsilon_one_run_order_sgm_family`): an ε lower bound for dpaudit's own vouched trainer only.
:mod:`.one_run_scores` reads the scores themselves: for canaries that do not interact, one run's in- and
out-scores are i.i.d. draws of the per-canary pair given the realised bits, so the multi-run threshold boxes
apply (:func:`epsilon_one_run_scores`, (ε, δ) form; :func:`gdp_lower_bound_one_run_scores`, μ-GDP form).
Multi-run intervals must not be applied to the scores of interacting one-run canaries (they are
not independent trials of the mechanism).

Modules: :mod:`.intervals` (binomial intervals, ε from rates), :mod:`.strategies` (threshold
strategies), :mod:`.multi_run` (multi-run bounds, empirical trade-off, ceilings), :mod:`.gdp`
(GDP helpers and the GDP estimate), :mod:`.one_run` (one-run bounds), :mod:`.sequential` (the
sequential violation test: α spent over pre-registered looks, futility stopping), :mod:`.threshold_test` (the
exact threshold test the sequential design runs at each look: one p-value per threshold), :mod:`.results`
(result types).

>>> import numpy as np
>>> from scipy.stats import norm
>>> q = (np.arange(2000) + 0.5) / 2000
>>> b = epsilon_lower_bound(norm.ppf(q) + 2.0, norm.ppf(q), delta=1e-5)
>>> 0.0 < b.value < 10.0, b.bound, b.confidence
(True, 'lower', 0.95)
"""

from __future__ import annotations

from .gdp import _gdp_delta, _gdp_epsilon, gdp_estimate, gdp_mu_for  # noqa: F401  (private names kept importable)
from .intervals import (  # noqa: F401
    INTERVALS,
    clopper_pearson,
    clopper_pearson_upper,
    epsilon_from_rates,
    jeffreys,
    jeffreys_upper,
)
from .multi_run import ceiling, certifiable_epsilon, empirical_tradeoff, epsilon_lower_bound
from .one_run import (
    MAX_CANARIES,
    ceiling_one_run,
    epsilon_one_run,
    epsilon_one_run_fdp,
    gdp_lower_bound_one_run,
    one_run_guess_grid,
    one_run_p_value,
)
from .one_run_family import SGM_FAMILY_ASSUMPTION, epsilon_one_run_order_sgm_family, sgm_family_epsilon
from .one_run_order import (
    ORDER_GUESS_FRACTIONS,
    ComposedSubsampledGaussianNull,
    EpsDeltaNull,
    GaussianNull,
    OrderNull,
    SubsampledGaussianNull,
    ceiling_one_run_order,
    epsilon_one_run_order,
    gdp_lower_bound_one_run_order,
    one_run_order_guess_grid,
    one_run_order_p_value,
    one_run_order_p_values,
    one_run_order_theta_lower,
    order_null_epsilon,
)
from .one_run_scores import (
    ONE_RUN_SCORES_ASSUMPTION,
    epsilon_one_run_scores,
    gdp_lower_bound_one_run_scores,
    gdp_mu_from_boxes,
    one_run_in_out,
)
from .results import EmpiricalTradeOff, EpsilonLowerBound, GdpEstimate, GdpLowerBound
from .sequential import (
    FIRST_LOOK,
    Look,
    SequentialResult,
    box_margin,
    futile,
    look_levels,
    look_schedule,
    sequential_test,
)
from .strategies import STRATEGIES, Bonferroni, Explicit, MultiSplit, Split, ThresholdStrategy, strategy_name  # noqa: F401
from .threshold_test import ThresholdTest, count_pvalues, threshold_test

__all__ = [
    "FIRST_LOOK",
    "MAX_CANARIES",
    "ONE_RUN_SCORES_ASSUMPTION",
    "ORDER_GUESS_FRACTIONS",
    "SGM_FAMILY_ASSUMPTION",
    "Bonferroni",
    "ComposedSubsampledGaussianNull",
    "EmpiricalTradeOff",
    "EpsDeltaNull",
    "EpsilonLowerBound",
    "Explicit",
    "GaussianNull",
    "GdpEstimate",
    "GdpLowerBound",
    "Look",
    "MultiSplit",
    "OrderNull",
    "SequentialResult",
    "Split",
    "SubsampledGaussianNull",
    "ThresholdStrategy",
    "ThresholdTest",
    "box_margin",
    "ceiling",
    "ceiling_one_run",
    "ceiling_one_run_order",
    "certifiable_epsilon",
    "clopper_pearson",
    "clopper_pearson_upper",
    "count_pvalues",
    "empirical_tradeoff",
    "epsilon_from_rates",
    "epsilon_lower_bound",
    "epsilon_one_run",
    "epsilon_one_run_fdp",
    "epsilon_one_run_order",
    "epsilon_one_run_order_sgm_family",
    "epsilon_one_run_scores",
    "futile",
    "gdp_estimate",
    "gdp_lower_bound_one_run",
    "gdp_lower_bound_one_run_order",
    "gdp_lower_bound_one_run_scores",
    "gdp_mu_for",
    "gdp_mu_from_boxes",
    "jeffreys",
    "jeffreys_upper",
    "look_levels",
    "look_schedule",
    "one_run_guess_grid",
    "one_run_in_out",
    "one_run_order_guess_grid",
    "one_run_order_p_value",
    "one_run_order_p_values",
    "one_run_order_theta_lower",
    "one_run_p_value",
    "order_null_epsilon",
    "sequential_test",
    "sgm_family_epsilon",
    "threshold_test",
]

