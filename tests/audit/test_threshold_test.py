"""The exact threshold test (audit/statistics/threshold_test.py): validity, its numerics, and its power over the box."""

import numpy as np
import pytest
from scipy import integrate, stats
from scipy.stats import norm

from audit import runs
from audit import statistics as st
from audit.statistics import sequential as sq
from audit.statistics.threshold_test import count_pvalues, threshold_test


def _gdp(mu):
    return lambda a: norm.cdf(norm.ppf(1 - np.clip(a, 0, 1)) - mu)  # the μ-GDP curve (Dong, Roth, Su Eq. 6)


def test_the_p_value_bounds_the_integral_from_above_and_closely():
    """Closed form against quadrature: E_U[F_Bin(c; m, f(U))], U ~ Beta(k + 1, n − k), by scipy's adaptive quad
    (absolute error 1e-15). The upper Riemann sum may only overshoot: at these p-values (0.013 to 8e-9) by 3.93 %
    each (the bound allows 5 %). Far smaller p overshoot more in ratio (1.3e-10 for an integral of 2e-20), never
    near a look's level (≥ 1e-7)."""
    f = _gdp(1.0)
    for k, n, c, m in [(0, 200, 150, 200), (10, 1000, 780, 1000), (3, 300, 200, 300), (0, 50, 30, 50),
                       (40, 5000, 4300, 5000)]:
        def integrand(u, k=k, n=n, c=c, m=m):
            return stats.beta.pdf(u, k + 1, n - k) * stats.binom.cdf(c, m, f(np.array([u])))[0]

        exact = integrate.quad(integrand, 0, 1, points=[k / n], limit=400, epsabs=1e-15)[0]
        p = float(count_pvalues(np.array([k]), n, np.array([c]), m, f)[0])
        assert exact <= p <= exact * 1.05, (k, n, c, m, exact, p)


def test_each_threshold_p_value_is_valid_at_the_null_boundary():
    """Scores exactly on the μ-GDP curve (out N(0, 1), in N(1, 1)): every threshold's p-value is super-uniform.

    1,000 seeded replicates of 200 + 200 trials; P(p_j ≤ 0.1) per threshold, measured 0.059–0.112 (the largest of 18
    estimates, each with standard error 0.0095: the p-value is nearly exact at the boundary); the bound allows three
    binomial standard errors (0.028) above 0.1."""
    f, ps = _gdp(1.0), []
    for r in range(1000):
        rng = np.random.default_rng(r)
        xin, xout = rng.standard_normal(200) + 1.0, rng.standard_normal(200)
        g = st.multi_run._grid(xin, xout, 2.0)
        ps.append(count_pvalues(np.where(g["strict"], g["fp_ub_count"], g["fn_ub_count"]), 200,
                                np.where(g["strict"], g["fn_ub_count"], g["fp_ub_count"]), 200, f))
    rate = np.mean(np.array(ps) <= 0.1, axis=0)
    assert rate.max() <= 0.1 + 3 * np.sqrt(0.1 * 0.9 / 1000), rate


def test_the_bonferroni_test_keeps_its_level_at_the_boundary():
    """400 seeded replicates of 1,000 trials on the μ-GDP boundary at s = 0.1: measured 22 rejections (5.5 %)."""
    hits = sum(threshold_test(*_boundary(r, 1000), _gdp(1.0), significance=0.1).rejects(0.1) for r in range(400))
    assert hits / 400 <= 0.1


def _boundary(r, n):
    rng = np.random.default_rng(10_000 + r)
    m = rng.random(n) < 0.5
    x = rng.standard_normal(n) + m * 1.0
    return x[m], x[~m]


def test_a_box_below_the_curve_implies_a_rejection_and_so_does_an_epsilon_bound_above_the_claim():
    """Dominance (module doc): on 60 seeded draws from the boundary to far below it, the box test's violation and
    ε_lower > the claim's ε (its Bonferroni grid, whose corners the partition holds) each imply this test's."""
    claim_eps, delta = 1.0, 1e-5
    claim = runs._numpy_curve(runs._claim_curve(claim_eps, delta))
    n_box = n_eps = 0
    for r in range(60):
        rng = np.random.default_rng(r)
        mu = [1.0, 2.0, 2.6, 3.2][r % 4]
        xin, xout = rng.standard_normal(600) + mu, rng.standard_normal(600)
        s = 0.05
        exact = threshold_test(xin, xout, claim, significance=s).rejects(s)
        if sq.box_margin(xin, xout, claim, significance=s) > 1e-9:
            n_box += 1
            assert exact, r
        if st.epsilon_lower_bound(xin, xout, delta=delta, significance=s).value > claim_eps:
            n_eps += 1
            assert exact, r
    assert n_box >= 10 and n_eps >= 10  # both premises occur (measured 51 and 54): the test is not vacuous


def test_it_rejects_a_mixture_the_box_test_misses():
    """An all-or-none shift (mask_once's final view: in N(0, 1) or N(1, 1), each w.p. ½; out N(0, 1)) against the
    0.5-GDP curve, 6,000 trials, s = 0.05, seed 0: measured p = 0.017 here, while the box's margin is −0.002."""
    rng = np.random.default_rng(0)
    m = rng.random(6000) < 0.5
    x = rng.standard_normal(6000) + np.where(m, (rng.random(6000) < 0.5) * 1.0, 0.0)
    xin, xout = x[m], x[~m]
    r = threshold_test(xin, xout, _gdp(0.5), significance=0.05)
    assert r.rejects(0.05) and sq.box_margin(xin, xout, _gdp(0.5), significance=0.05) <= 0


def test_no_information_gives_one_and_bad_input_names_the_parameter():
    p = count_pvalues(np.array([5, 3]), 5, np.array([0, 0]), 10, _gdp(1.0))
    assert p[0] == 1.0 and 0.0 < p[1] <= 1.0  # every out-score above the threshold: FPR unknown, p = 1
    flat = count_pvalues(np.array([0, 3]), 50, np.array([0, 0]), 50, lambda a: np.zeros_like(a))
    assert flat.tolist() == [1.0, 1.0]  # f ≡ 0: nothing lies below it (the shortcut; a zero FN count included)
    with pytest.raises(Exception, match="in_scores"):
        threshold_test(np.array([]), np.array([0.0]), _gdp(1.0))
    with pytest.raises(Exception, match="significance"):
        threshold_test(np.array([1.0]), np.array([0.0]), _gdp(1.0), significance=1.5)


def test_the_comparators_exact_violation_reads_the_test_and_says_where():
    """comparator.exact_violation_test: the verdict a sequential audit reports (its message names the threshold, the
    realised rates, the curve's floor and p) and its refusals, as the box test's."""
    import torch

    import accountants as acc
    from accountants.errors import InputError, InputTypeError
    from audit import comparator, model
    from audit.runs import _violation

    curve = acc.TradeOff.from_gdp(0.5)
    rng = np.random.default_rng(0)
    m = rng.random(6000) < 0.5
    x = torch.as_tensor(rng.standard_normal(6000) + np.where(m, (rng.random(6000) < 0.5) * 1.0, 0.0))
    v = comparator.exact_violation_test(x[m], x[~m], curve, significance=0.05, against="the claim")
    assert v.violated and 0 < v.p_value <= 0.05 and v.margin == pytest.approx(0.05 - v.p_value)
    assert v.fnr < v.curve_fnr and v.threshold is not None  # the realised point lies below the curve's floor
    assert v.message.startswith("VIOLATION of the claim: bug or broken DP — at threshold") and "p ≤ " in v.message
    quiet = comparator.exact_violation_test(x[~m][:1500], x[~m][1500:], curve, significance=0.05)
    assert not quiet.violated and quiet.threshold is None and quiet.message.startswith("no violation of")
    r = _violation(v)
    assert r.p_value == v.p_value and model.ViolationTest(**{**r.__dict__}) == r
    with pytest.raises(InputError, match="sound bound"):
        comparator.exact_violation_test(x[m], x[~m], acc.TradeOff.from_points(
            torch.tensor([0.0, 1.0], dtype=torch.float64), torch.tensor([1.0, 0.0], dtype=torch.float64)),
            significance=0.05)
    with pytest.raises(InputTypeError, match=r"curve must be an accountants\.TradeOff"):
        comparator.exact_violation_test(x[m], x[~m], _gdp(0.5), significance=0.05)
