"""The order statistic under the composite T-fold subsampled-Gaussian null (audit.statistics.one_run_family).

Pins: the discretised T-fold pair against closed forms (q = 1: T Gaussian steps of μ are one of μ√T; T = 1: the
one-step SGM pair, exact by bisection on its closed-form masses), its ε lower bound against the project's
certified PLD bracket and the mpmath GDP bracket; properties (the p-value grows along the Blackwell order, the
reveal member); bad input; and a small Monte Carlo of coverage on exact T-step outcomes (the large one is
``benchmarks/bench_one_run_family.py``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import accountants as acc
from accountants.errors import InputError
from accountants.pld.accountant import pld_epsilon_bracket
from accountants.pld.gaussian import gdp_epsilon_bracket
from audit import statistics as st
from audit.statistics import ComposedSubsampledGaussianNull, GaussianNull
from audit.statistics.one_run_order import _mean_error, _sgm_log_masses
from audit.statistics.sgm_composition import composed_epsilon_lower, composed_mean_error, composed_sgm

V = np.array([0.03, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0])


def _exact_one_step(q: float, mu: float, v: float) -> float:
    """γ̄(v) of the one-step SGM pair: bisection (200 steps) on its closed-form upper mass (one_run_order)."""
    lo, hi = 0.0, 1.0
    while _sgm_log_masses(mu, q, np.array([hi]))[0][0] > math.log(v):
        hi *= 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if _sgm_log_masses(mu, q, np.array([mid]))[0][0] > math.log(v) else (lo, mid)
    lv, lg = _sgm_log_masses(mu, q, np.array([hi]))
    return math.exp(lg[0] - lv[0])


@pytest.mark.parametrize(("mu", "steps"), [(0.5, 2), (0.5, 10), (1.0, 4)])
def test_full_batch_is_one_gaussian_of_mu_root_t(mu, steps):
    # closed form: N(μ, 1)^⊗T vs N(0, 1)^⊗T is N(μ√T, 1) vs N(0, 1) (the sufficient statistic Σx/√T). The
    # lattice path (forced at q = 1) must sit below the closed form (it is a dominating pair: rounded down), by
    # at most 2e-3 relative at v ≥ 0.03 (the closed form itself is rounded down on an 8192-point grid).
    got = composed_mean_error(1.0, mu, steps, V)
    ref = _mean_error(GaussianNull(), mu * math.sqrt(steps), V)
    assert np.all(got <= ref * (1 + 1e-3))
    assert np.all(got >= ref * (1 - 2e-3))


@pytest.mark.parametrize(("q", "mu"), [(0.5, 0.5), (0.1, 2.0), (0.9, 1.0)])
def test_one_step_matches_the_exact_subsampled_gaussian(q, mu):
    # oracle: the one-step pair's closed-form masses (one_run_order._sgm_log_masses) inverted by bisection.
    # Below the exact value (dominating), within 5e-4 relative at v ≥ 0.03 (measured ≤ 2.1e-4).
    got = composed_mean_error(q, mu, 1, V)
    ref = np.array([_exact_one_step(q, mu, x) for x in V])
    assert np.all(got <= ref * (1 + 1e-9))
    assert np.all(got >= ref * (1 - 5e-4))


def test_dispatch_full_batch_and_reveal():
    null = ComposedSubsampledGaussianNull(1.0, 4)
    np.testing.assert_array_equal(_mean_error(null, 0.5, V), _mean_error(GaussianNull(), 1.0, V))
    # μ = ∞: reveal mass ρ = 1 − (1 − q)^T with error 0, then slope (1 − ρ)/(2 − ρ) (closed form)
    q, t = 0.1, 3
    rho = 1 - (1 - q) ** t
    want = np.maximum(V - rho / 2, 0) * (1 - rho) / (2 - rho) / V
    np.testing.assert_allclose(_mean_error(ComposedSubsampledGaussianNull(q, t), math.inf, V), want, atol=1e-12)
    assert np.all(_mean_error(ComposedSubsampledGaussianNull(q, t), 0.0, V) == 0.5)


@pytest.mark.parametrize(("q", "mu", "steps"), [(0.5, 0.5, 10), (0.2, 1.0, 5), (0.9, 0.7, 3)])
def test_epsilon_lower_sits_in_the_certified_pld_bracket(q, mu, steps):
    # peer: the project's certified PLD bracket (accountants.pld, add/remove, both orderings) for the same pair
    # (σ = 1/μ). Ours is a lower bound (≤ the bracket's upper end) and within 1 % of it.
    b = pld_epsilon_bracket(acc.DPSGD(1.0 / mu, acc.Poisson(q), steps), 1e-5, eps_error=1e-3)
    got = composed_epsilon_lower(q, mu, steps, 1e-5)
    assert got <= b.upper
    assert got >= 0.99 * b.lower


def test_epsilon_lower_full_batch_against_mpmath():
    # mpmath oracle: accountants.pld.gaussian.gdp_epsilon_bracket (Dong et al. 2019 Cor. 2.13 at 50 digits);
    # μ√T = 0.5·√2: the eps3 spec of bench_one_run_real (ε_tight 2.943)
    lo, up = gdp_epsilon_bracket(1e-5, 0.5 * math.sqrt(2))
    got = composed_epsilon_lower(1.0, 0.5, 2, 1e-5)
    assert got <= up
    assert got == pytest.approx(lo, abs=1e-8)
    assert composed_epsilon_lower(0.1, math.inf, 3, 1e-5) == math.inf
    assert composed_epsilon_lower(1e-7, math.inf, 3, 1e-5) == 0.0  # ρ = 3e-7 ≤ δ


def test_p_value_grows_along_the_blackwell_order():
    # larger μ (more informative) and larger q dominate: a dominating null has a larger p-value
    m, r, u = 2000, 500, 150
    p = {(q, mu): st.one_run_order_p_value(ComposedSubsampledGaussianNull(q, 5), mu, m, r, u)
         for q in (0.2, 0.5, 1.0) for mu in (0.2, 0.5, 1.0, math.inf)}
    for q in (0.2, 0.5, 1.0):
        seq = [p[(q, mu)] for mu in (0.2, 0.5, 1.0, math.inf)]
        assert seq == sorted(seq)
    for mu in (0.2, 0.5, 1.0, math.inf):
        seq = [p[(q, mu)] for q in (0.2, 0.5, 1.0)]
        assert seq == sorted(seq)


def test_slack_is_small_and_masses_sum_to_one():
    c = composed_sgm(0.5, 0.5, 10)
    assert 0 < c.slack < 1e-5
    assert c.q_mass.sum() + c.q_only == pytest.approx(1.0, abs=1e-9)
    assert c.p_mass.sum() + c.p_only == pytest.approx(1.0, abs=1e-9)


def _outcomes(q, mu, steps, m, rng):
    """Exact one-run outcomes: each canary in w.p. ½, T steps each drawn w.p. q, scored by its exact LLR."""
    truth = rng.random(m) < 0.5
    x = rng.standard_normal((m, steps)) + mu * ((rng.random((m, steps)) < q) & truth[:, None])
    return np.log1p(q * np.expm1(mu * x - mu * mu / 2)).sum(1), truth


@pytest.mark.slow
def test_monotone_in_the_guesser_errors_and_zero_on_null():
    # (r, u) = released guesses and their errors; more errors refute less; chance-level errors refute nothing
    level, m = 0.01, 4000
    few = st.sgm_family_epsilon(2, m, [(1000, 100)], level, 1e-5, refine=0)[0]
    more = st.sgm_family_epsilon(2, m, [(1000, 160)], level, 1e-5, refine=0)[0]
    assert 0 < more < few
    assert st.sgm_family_epsilon(2, m, [(1000, 500)], level, 1e-5, refine=0)[0] == 0.0


@pytest.mark.slow
def test_end_to_end_below_the_truth():
    rng = np.random.default_rng(3)
    scores, truth = _outcomes(1.0, 1.0, 2, 2000, rng)
    b = st.epsilon_one_run_order_sgm_family(scores, truth, steps=2, delta=1e-5)
    assert 0 < b.value <= composed_epsilon_lower(1.0, 1.0, 2, 1e-5)
    assert b.method == "one_run_order_family" and b.confidence == 0.95 and b.n_in + b.n_out == 2000


def _true_member_rejected(q, mu, steps, null_mu, m, reps, s, rng):
    """How often the member (q, null_mu) is rejected by some guess count (each at s / #grid) on exact outcomes
    of (q, mu). ε_lower > ε_true needs the true member rejected, so for null_mu = mu this bounds the violation
    rate from above."""
    from audit.statistics.one_run import _guesses
    from audit.statistics.one_run_order import _two_sided
    null = ComposedSubsampledGaussianNull(q, steps)
    hits = 0
    for _ in range(reps):
        scores, truth = _outcomes(q, mu, steps, m, rng)
        conf, correct = _two_sided(scores, truth, None)
        _, grid, r_eff, correct_at = _guesses(conf, correct, st.one_run_order_guess_grid(m))
        hits += any(st.one_run_order_p_value(null, null_mu, m, int(r), int(r) - int(correct_at[r - 1]))
                    < s / grid.size for r in np.unique(r_eff[r_eff > 0]))
    return hits


def test_true_member_is_rejected_at_most_at_the_level_and_a_weaker_one_is():
    # 150 exact runs (q = 0.5, μ = 1, T = 3, m = 1000) at s = 0.3: a valid test rejects the true member in at
    # most 30 % of runs; ≥ 60 rejections has probability 0.004 under Binomial(150, 0.3). Negative control: the
    # member μ = 0.6 (less informative than the truth) must be rejected in most runs (so the check can fail).
    rng = np.random.default_rng(11)
    assert _true_member_rejected(0.5, 1.0, 3, 1.0, 1000, 150, 0.3, rng) < 60
    assert _true_member_rejected(0.5, 1.0, 3, 0.6, 1000, 30, 0.3, rng) > 20


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"steps": 0}, "steps"), ({"steps": 2.5}, "steps"), ({"delta": 0.0}, "delta"), ({"delta": 1.5}, "delta"),
    ({"significance": 0.0}, "significance"),
])
def test_bad_input_names_the_parameter(kwargs, name):
    args = {"steps": 2, "delta": 1e-5, "significance": 0.05} | kwargs
    with pytest.raises(InputError, match=name):
        st.epsilon_one_run_order_sgm_family(np.arange(10.0), np.arange(10) % 2 == 0, **args)


@pytest.mark.parametrize(("args", "name"), [
    ((2, 40, [(40, 20)], 0.0, 1e-5), "significance"),  # level 0: log2(0) was a ValueError (random Hypothesis find)
    ((2, 40, [(40, 20)], 0.01, 0.0), "delta"), ((2, 40, [], 0.01, 1e-5), "counts"),
    ((2, 40, [(50, 1)], 0.01, 1e-5), "guesses"), ((2, 40, [(10, 11)], 0.01, 1e-5), "errors"),
    ((2, 0, [(1, 0)], 0.01, 1e-5), "m"), ((2, 40, [(10,)], 0.01, 1e-5), "counts"),
])
def test_family_search_bad_input_names_the_parameter(args, name):
    with pytest.raises(InputError, match=name):
        st.sgm_family_epsilon(*args)


def test_bad_null_parameters():
    with pytest.raises(InputError, match="q"):
        ComposedSubsampledGaussianNull(0.0, 3)
    with pytest.raises(InputError, match="steps"):
        ComposedSubsampledGaussianNull(0.5, 0)
    with pytest.raises(InputError, match="mu"):
        composed_mean_error(0.5, -1.0, 3, V)
    with pytest.raises(InputError, match="delta"):
        composed_epsilon_lower(0.5, 1.0, 3, 0.0)


def test_comparator_takes_the_family_only_with_independence():
    from audit.comparator import ONE_RUN_FAMILY_STATISTICS, compare_one_run
    assert ONE_RUN_FAMILY_STATISTICS == ("steinke", "order", "scores", "order_family")
    spec = acc.DPSGD(2.0, acc.Poisson(1.0), steps=2)
    with pytest.raises(InputError, match="independent_canaries"):
        compare_one_run(np.arange(10.0), np.arange(10) % 2 == 0, spec, delta=1e-5, sgm_family=True)
