"""Xiang et al.'s order-statistics one-run bound (audit.statistics.one_run_order): pins, closed forms, Monte Carlo.

Soundness is measured on idealised one-run outcomes generated as the paper does (m independent canaries, each
in with probability ½, each view an independent draw of the mechanism's pair): the frequency with which the
bound exceeds the truth must not be significantly above α (one-sided Clopper–Pearson lower limit ≤ α), and a
negative control (p-values computed for a null less informative than the mechanism) must fail that check, so
the check can fail.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import scipy.stats

from accountants.errors import InputError, InputTypeError
from audit import statistics as st
from audit.statistics import EpsDeltaNull, GaussianNull, SubsampledGaussianNull

SOURCE = "zihangxiang/tight-privacy-audit-in-one-run@6359b19 compare/RESULTS.txt (δ = 1e-5, 95 %)"

# (null, m, r, u, ε_lower published, tolerance). Tolerance 3e-3: the authors integrate a 1e5-point
# discretised pair by the trapezoid rule and return the bisection midpoint; we use the exact pair, an upper
# Riemann sum (p at most 1/4096 high) and the rejected end, so ours sits at most a few 1e-3 below theirs.
PINS = [
    (GaussianNull(), 100_000, 100_000, 15_866, 9.9002, 3e-3),
    (GaussianNull(), 1_000, 1_000, 159, 9.0038, 3e-3),
    (GaussianNull(), 100_000, 10_000, 51, 9.5899, 3e-3),
    (SubsampledGaussianNull(0.2), 100_000, 100_000, 43_173, 7.0250, 3e-3),
]


@pytest.mark.parametrize(("null", "m", "r", "u", "published", "tol"), PINS)
def test_pinned_against_the_papers_table(null, m, r, u, published, tol):
    theta = st.one_run_order_theta_lower(null, m, r, u, 0.05)
    eps = st.order_null_epsilon(null, theta, 1e-5)
    assert eps == pytest.approx(published, abs=tol), SOURCE
    assert eps <= published + 1e-4  # never above theirs: every rounding here is conservative


def test_true_epsilons_of_the_papers_mechanisms():
    # The table's "true eps" column (same source); ours: closed-form δ(ε) of the pair, bisection (abs 1e-4).
    assert st.order_null_epsilon(GaussianNull(), 2.0, 1e-5) == pytest.approx(9.9973, abs=1e-4)
    assert st.order_null_epsilon(SubsampledGaussianNull(0.5), 1.0, 1e-5) == pytest.approx(3.5340, abs=1e-4)
    assert st.order_null_epsilon(SubsampledGaussianNull(0.2), 2.0, 1e-5) == pytest.approx(7.6204, abs=1e-4)
    assert st.order_null_epsilon(EpsDeltaNull(1e-5), 1.7, 1e-5) == 1.7


def test_all_guesses_released_is_the_binomial_closed_form():
    # r = m: T ~ Bin(m, e_opt) with e_opt = (1 − δ)/(1 + e^ε) (four-atom pair) or Φ(−μ/2) (Gaussian pair).
    p = st.one_run_order_p_value(EpsDeltaNull(1e-5), 2.0, 1000, 1000, 100)
    assert p == pytest.approx(scipy.stats.binom.cdf(100, 1000, (1 - 1e-5) / (1 + math.e ** 2)), rel=1e-12)
    p = st.one_run_order_p_value(GaussianNull(), 1.5, 400, 400, 90)
    assert p == pytest.approx(scipy.stats.binom.cdf(90, 400, scipy.stats.norm.cdf(-0.75)), rel=1e-9)
    # the SGM pair with q = 1 is the Gaussian pair
    g = st.one_run_order_p_values(GaussianNull(), 1.3, 300, 60)
    s = st.one_run_order_p_values(SubsampledGaussianNull(1.0), 1.3, 300, 60)
    np.testing.assert_allclose(g, s, rtol=1e-9)


def test_p_value_increases_with_theta_and_table_matches_scalar():
    for null in (EpsDeltaNull(1e-5), GaussianNull(), SubsampledGaussianNull(0.3)):
        ps = [st.one_run_order_p_value(null, t, 2000, 200, 20) for t in (0.5, 1.0, 2.0, 3.0)]
        assert all(a <= b for a, b in itertools.pairwise(ps)), (null, ps)  # few errors: less surprising
        table = st.one_run_order_p_values(null, 1.0, 2000, 200)
        assert table[20] == pytest.approx(ps[1], rel=1e-12)
        assert np.all(np.diff(table) >= 0) and table[-1] == 1.0


def _gauss_game(rng, reps, m, mu):
    truth = rng.random((reps, m)) < 0.5
    return rng.standard_normal((reps, m)) + mu * truth, truth


def _released_errors(scores, truth, r, center=None):
    """Errors among the r most confident two-sided guesses (continuous scores: no ties), per replicate."""
    c = np.median(scores, axis=1, keepdims=True) if center is None else center
    conf, right = np.abs(scores - c), (scores >= c) == truth
    top = np.argpartition(-conf, r - 1, axis=1)[:, :r]
    return r - np.take_along_axis(right, top, axis=1).sum(axis=1)


def test_law_of_released_errors_matches_monte_carlo():
    # The theorem is an equality for the optimal decoder (LLR scores, centre 0) on independent canaries.
    rng = np.random.default_rng(1)
    mu, m, r, reps = 1.0, 200, 50, 20_000
    x, truth = _gauss_game(rng, reps, m, mu)
    t = _released_errors(mu * x - mu * mu / 2, truth, r, center=0.0)
    table = st.one_run_order_p_values(GaussianNull(), mu, m, r)
    for u in range(2, 14, 2):
        emp = np.mean(t <= u)
        sd = math.sqrt(max(emp * (1 - emp), 1e-4) / reps)
        assert emp - 4 * sd <= table[u] <= emp + 4 * sd + 1 / 4096, (u, emp, table[u])


def _coverage(errors_by_r, tables, level):
    """Per replicate: does some r of the grid reject θ (p_r(u_r) < level)?"""
    hit = np.zeros(next(iter(errors_by_r.values())).shape[0], dtype=bool)
    for r, u in errors_by_r.items():
        hit |= tables[r][u] < level
    return hit


def _assert_not_above(hits, alpha):
    k, n = int(hits.sum()), hits.size
    lo = 0.0 if k == 0 else float(scipy.stats.beta.ppf(0.05, k, n - k + 1))  # one-sided CP lower at 95 %
    assert lo <= alpha, f"exceeded the truth in {k}/{n} replicates (CP lower {lo:.4f} > α = {alpha})"
    return k / n


def test_sgm_family_coverage_on_subsampled_gaussian_outcomes():
    """The SGM family null (q = 0.5) on exact SGM outcomes (in: N(μ, 1) with probability q, else N(0, 1))."""
    rng = np.random.default_rng(7)
    mu, q, m, reps, s = 1.5, 0.5, 500, 1000, 0.05
    truth = rng.random((reps, m)) < 0.5
    x = rng.standard_normal((reps, m)) + mu * (truth & (rng.random((reps, m)) < q))
    grid = st.one_run_order_guess_grid(m)
    errs = {int(r): _released_errors(x, truth, int(r)) for r in grid}
    null = SubsampledGaussianNull(q)
    sound = {int(r): st.one_run_order_p_values(null, mu, m, int(r)) for r in grid}
    _assert_not_above(_coverage(errs, sound, s / grid.size), s)  # measured 13/1000 = 1.3 % (seed 7)


def test_gdp_form_coverage_on_gaussian_outcomes():
    """μ_lower > μ_true iff some grid r rejects μ_true at s/#grid (p increases in μ): measured by table lookup."""
    rng = np.random.default_rng(2)
    mu, m, reps, s = 1.0, 500, 1000, 0.05
    x, truth = _gauss_game(rng, reps, m, mu)
    grid = st.one_run_order_guess_grid(m)
    errs = {int(r): _released_errors(x, truth, int(r)) for r in grid}
    sound = {int(r): st.one_run_order_p_values(GaussianNull(), mu, m, int(r)) for r in grid}
    _assert_not_above(_coverage(errs, sound, s / grid.size), s)  # measured 27/1000 = 2.7 % (seed 2)
    # negative control: a null less informative than the mechanism (0.8 μ) is refuted far more often
    # than α (measured 426/1000), and the check catches it
    wrong = {int(r): st.one_run_order_p_values(GaussianNull(), 0.8 * mu, m, int(r)) for r in grid}
    with pytest.raises(AssertionError):
        _assert_not_above(_coverage(errs, wrong, s / grid.size), s)
    # the public function agrees with the lookup on the first replicate
    b = st.gdp_lower_bound_one_run_order(x[0], truth[0], delta=1e-5, significance=s)
    assert (b.mu_lower > mu) == bool(_coverage({k: v[:1] for k, v in errs.items()}, sound, s / grid.size)[0])
    assert b.mu_lower <= mu and b.guesses in grid and b.n_hypotheses == grid.size


def test_eps_delta_form_coverage_on_laplace_outcomes():
    """A pure ε-DP mechanism (Laplace, scale 1/ε, shift 1): ε_lower > ε measured by lookup at θ = ε."""
    rng = np.random.default_rng(3)
    eps, m, reps, s = 2.0, 400, 1500, 0.05
    truth = rng.random((reps, m)) < 0.5
    x = rng.laplace(0.0, 1.0 / eps, (reps, m)) + truth
    grid = st.one_run_order_guess_grid(m)
    errs = {int(r): _released_errors(x, truth, int(r)) for r in grid}
    null = EpsDeltaNull(1e-5)
    sound = {int(r): st.one_run_order_p_values(null, eps, m, int(r)) for r in grid}
    _assert_not_above(_coverage(errs, sound, s / grid.size), s)
    b = st.epsilon_one_run_order(x[0], truth[0], delta=1e-5, significance=s)
    assert 0 < b.value <= eps and b.method == "one_run_order" and b.bound == "lower"


def test_eps_delta_form_on_randomized_response_ties():
    """RR scores are ±1: one tie group per sign, so only r = m is released; ε_lower ≤ ε in 200 replicates."""
    rng = np.random.default_rng(4)
    eps, m = 1.0, 2000
    over = 0
    for _ in range(200):
        truth = rng.random(m) < 0.5
        flip = rng.random(m) < 1 / (1 + math.e ** eps)
        x = np.where(truth ^ flip, 1.0, -1.0)
        b = st.epsilon_one_run_order(x, truth, delta=0.0, center=0.0)
        assert b.guesses == m
        over += b.value > eps
    assert over <= 4  # P[Bin(200, ≤ 0.05/5) ≥ 5] < 0.06: a stricter check than the CP one at this size


def test_perfect_guesser_reaches_large_bounds_and_bad_input_is_named():
    x = np.concatenate([np.arange(100.0, 200.0), np.arange(0.0, 100.0)])
    y = np.concatenate([np.ones(100, bool), np.zeros(100, bool)])
    perfect = st.epsilon_one_run_order(x, y, delta=1e-5).value
    assert 2.5 < perfect <= st.ceiling_one_run_order(200, delta=1e-5) + 1e-9
    noisy = st.epsilon_one_run_order(x + np.random.default_rng(8).normal(0, 60, 200), y, delta=1e-5).value
    assert noisy <= perfect
    with pytest.raises(InputError, match="center"):
        st.epsilon_one_run_order(x, y, delta=1e-5, center=float("nan"))
    with pytest.raises(InputError, match="q must be in"):
        SubsampledGaussianNull(1.5)
    with pytest.raises(InputTypeError, match="null must be"):
        st.one_run_order_p_value("gauss", 1.0, 10, 5, 1)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="errors"):
        st.one_run_order_p_value(GaussianNull(), 1.0, 10, 5, 6)
    with pytest.raises(InputError, match="delta must be > 0"):
        st.gdp_lower_bound_one_run_order(x, y, delta=0.0)


def test_order_certifiable_matches_order_audits_of_the_exact_poisson_pair():
    """ε_certifiable per statistic: the order statistic's canonical-pair replay (audit.tightness, optimal
    two-sided decoder on canonical LLRs) against order audits of exact draws of the Poisson pair (white-box
    LLR of Bern(q) + N(0, σ²) per step, centre 0): σ = 1, q = 0.5, T = 10, m = 1000, 9 replicates each.
    Tolerance 25 %, the replicates' spread (as in test_tightness_one_run for Steinke's statistic)."""
    import torch

    import accountants as acc
    from attacks import membership as mia
    from audit import tightness

    spec = acc.DPSGD(1.0, acc.Poisson(0.5), 10)
    curve = acc.tradeoff_curve(spec, method="pld")
    cert = tightness.certifiable_one_run_replicates(curve, 1000, delta=1e-5, replicates=9, statistic="order")
    steinke = tightness.certifiable_one_run_replicates(curve, 1000, delta=1e-5, replicates=9)
    g = torch.Generator().manual_seed(3)
    got = []
    for _ in range(9):
        truth = torch.rand(1000, generator=g) < 0.5
        o = torch.randn(1000, 10, generator=g, dtype=torch.float64)
        o += truth[:, None] * (torch.rand(1000, 10, generator=g, dtype=torch.float64) < 0.5)
        scores = mia.white_box_llr(o, spec, 1000).numpy()
        got.append(st.epsilon_one_run_order(scores, truth.numpy(), delta=1e-5, center=0.0).value)
    a, b = float(np.median(got)), float(np.median(cert))
    assert abs(a - b) <= 0.25 * b, (a, b)
    assert b > float(np.median(steinke))  # the order statistic certifies more with the same canaries
    with pytest.raises(InputError, match="statistic must be one of"):
        tightness.certifiable_one_run_replicates(curve, 100, delta=1e-5, statistic="best")


def test_one_run_statistics_reach_result_json_and_the_report(tmp_path):
    """Which statistic certified what: in result.json (strict round trip) and in both reports."""
    import accountants as acc
    from audit import model
    from audit.score import audit_scores

    rng = np.random.default_rng(5)
    member = rng.random(400) < 0.5
    sc = rng.normal(size=400) + 3.0 * member
    r = audit_scores({"member": member.astype(int), "score": sc}, acc.DPSGD(2.0, acc.Poisson(0.5), 1), delta=1e-5,
                     design="one-run", out=tmp_path)
    stats = r["audits"][0]["one_run_statistics"]
    assert [x["name"] for x in stats] == ["steinke", "order", "scores", "fdp_gdp", "order_gdp", "scores_gdp"]
    assert [x["in_epsilon_lower"] for x in stats] == [True] + [False] * 5  # independence not vouched
    assert [x["bound"] for x in stats] == ["lower"] * 3 + ["gdp_mu_lower"] * 3
    assert stats[0]["value"] == r["audits"][0]["epsilon_lower"]["value"]
    back = model.load_result(tmp_path).audits[0].one_run_statistics
    assert [model.to_dict(x) for x in back] == stats
    for f in ("report.md", "report.html"):
        text = (tmp_path / f).read_text(encoding="utf-8")
        assert "one-run statistics" in text and "canaries do not interact" in text
    with pytest.raises(InputError, match="unknown key"):
        model.from_dict(model.OneRunStatistic, {**stats[0], "extra": 1})


def test_compare_one_run_pays_for_the_max_over_statistics():
    """independent_canaries=True: ε_lower is the largest of Steinke's, the order and the score statistic, each at
    s/3 (test_one_run_scores.py checks the score statistic's share)."""
    import accountants as acc
    from audit import comparator

    rng = np.random.default_rng(6)
    member = rng.random(2000) < 0.5
    sc = rng.normal(size=2000) + 3.0 * member
    spec = acc.DPSGD(2.0, acc.Poisson(0.5), 1)
    curves = comparator.analytical_curves(spec, 1e-5)
    both = comparator.compare_one_run(sc, member, spec, delta=1e-5, curves=curves, independent_canaries=True)
    alone = comparator.compare_one_run(sc, member, spec, delta=1e-5, curves=curves)
    st_, order = both.one_run_statistics[0].result, both.one_run_statistics[1].result
    assert st_.confidence == order.confidence == pytest.approx(1 - 0.05 / 3)  # s split in three
    scores = both.one_run_statistics[2].result
    assert both.epsilon_lower is max((st_, order, scores), key=lambda b: b.value) and both.epsilon_lower is order
    assert alone.epsilon_lower.method == "one_run" and alone.epsilon_lower.confidence == pytest.approx(0.95)
    assert order.value <= alone.one_run_statistics[1].result.value  # paying s/3 can only lower it
    assert [x.in_epsilon_lower for x in both.one_run_statistics] == [True] * 3 + [False] * 3
    assert both.epsilon_lower.value <= both.ceiling == pytest.approx(st.ceiling_one_run_order(2000, delta=1e-5,
                                                                                              significance=0.05 / 3))


def test_small_significance_is_resolved():
    """Regression: with K = 4096 cells the p-value never fell below 1/4096, so a level s/#grid under 2.4e-4
    (e.g. s = 0.001 over 5 guess counts) certified nothing below r = m whatever the scores; K now grows to at
    least 16/s. Before the fix the first assertion gave 0."""
    x = np.concatenate([np.arange(1000.0, 2000.0), -np.arange(1000.0, 2000.0)])
    y = np.concatenate([np.ones(1000, bool), np.zeros(1000, bool)])
    assert st.epsilon_one_run_order(x, y, delta=1e-5, significance=2e-4, guesses=[500]).value > 3.0
    assert st.one_run_order_p_value(EpsDeltaNull(1e-5), 0.5, 2000, 500, 0) == pytest.approx(1 / 4096, rel=1e-6)
    assert st.one_run_order_p_value(EpsDeltaNull(1e-5), 0.5, 2000, 500, 0, cells=2 ** 16) < 1e-4
