"""The continuous-score one-run bound (audit.statistics.one_run_scores): pins, Monte Carlo coverage, properties.

Soundness is measured on idealised one-run outcomes (m independent canaries, each in with probability ½, each
score an independent draw of the pair): the frequency with which the bound exceeds the truth must not be
significantly above α (one-sided Clopper–Pearson lower limit ≤ α, as in test_one_run_order.py), and negative
controls (an uncorrected max over thresholds; a truth understated by 20 %) must fail that check, so it can fail.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np
import pytest
import scipy.stats

import accountants as acc
from accountants.errors import InputError, InputTypeError
from audit import comparator, tightness
from audit import statistics as st
from audit.statistics.gdp import _gdp_epsilon

DELTA = 1e-5


def _game(rng, m, draw):
    truth = rng.random(m) < 0.5
    return draw(truth), truth


def _assert_not_above(hits, alpha):
    k, n = int(np.sum(hits)), len(hits)
    lo = 0.0 if k == 0 else float(scipy.stats.beta.ppf(0.05, k, n - k + 1))  # one-sided CP lower at 95 %
    assert lo <= alpha, f"exceeded the truth in {k}/{n} replicates (CP lower {lo:.4f} > α = {alpha})"


def _uncorrected(x, truth, s):
    """Negative control: the best threshold picked with the labels, paid nothing (CP at s/2 per rate)."""
    xin, xout = np.sort(x[truth]), np.sort(x[~truth])
    t = np.unique(x)
    fp = xout.size - np.searchsorted(xout, t, side="left")
    fn = np.searchsorted(xin, t, side="left")
    a, b = st.clopper_pearson_upper(fp, xout.size, s / 2), st.clopper_pearson_upper(fn, xin.size, s / 2)
    return float(np.max(st.epsilon_from_rates(a, b, DELTA)))


def test_is_the_multi_run_bound_on_the_realised_in_and_out_scores():
    rng = np.random.default_rng(0)
    x, truth = _game(rng, 3000, lambda t: rng.standard_normal(t.size) + 2.0 * t)
    b = st.epsilon_one_run_scores(x, truth, delta=DELTA)
    multi = st.epsilon_lower_bound(x[truth], x[~truth], delta=DELTA)
    assert b.value == multi.value > 0 and b.method == "one_run_scores" and b.bound == "lower"
    assert (b.n_in, b.n_out, b.n_hypotheses) == (int(truth.sum()), int((~truth).sum()), multi.n_hypotheses)
    # torch tensors and 0/1 truth are accepted like the other one-run statistics
    torch = pytest.importorskip("torch")
    assert st.epsilon_one_run_scores(torch.tensor(x), torch.tensor(truth.astype(int)), delta=DELTA).value == b.value


def test_closed_form_pin_with_one_pre_registered_threshold():
    """100 in at 1, 100 out at 0, threshold 0.5: FP = FN = 0, CP upper u = 1 − (s/2)^{1/100} (Clopper–Pearson at
    k = 0, closed form), ε = log((1 − δ − u)/u) = 3.28 (docs' auditing digest §2a); μ = Φ⁻¹(1 − u) − Φ⁻¹(u)."""
    truth = np.arange(200) % 2 == 0
    x = truth.astype(float)
    s = 0.05
    u = 1 - (s / 2) ** (1 / 100)
    b = st.epsilon_one_run_scores(x, truth, delta=DELTA, significance=s, strategy=st.Explicit(0.5))
    assert b.value == pytest.approx(math.log((1 - DELTA - u) / u), rel=1e-9)
    assert b.value == pytest.approx(3.28, abs=5e-3)
    g = st.gdp_lower_bound_one_run_scores(x, truth, delta=DELTA, significance=s, strategy=st.Explicit(0.5))
    mu = NormalDist().inv_cdf(1 - u) - NormalDist().inv_cdf(u)  # stdlib oracle, independent of scipy
    assert g.mu_lower == pytest.approx(mu, rel=1e-9) and g.bound == "gdp_mu_lower"
    assert st.gdp_mu_for(g.refuted_curve_epsilon, DELTA) == pytest.approx(mu, rel=1e-6)


@pytest.mark.parametrize("draw", ["normal", "ties"])
def test_null_coverage(draw):
    """Identical in and out laws: both forms certify nothing (0) in ≥ 1 − α of runs; the uncorrected max does not.

    Measured (seed 5, 300 runs, α = 0.2): 0 exceedances for either form, normal and tied scores; the uncorrected
    threshold picked with the labels exceeds 0 in about 40 % (m = 1000)."""
    rng = np.random.default_rng(5)
    m, s = 1000, 0.2
    eps, mus, bad = [], [], []
    for _ in range(300):
        x, truth = _game(rng, m, lambda t: rng.standard_normal(t.size) if draw == "normal"
                         else rng.integers(0, 3, t.size).astype(float))
        eps.append(st.epsilon_one_run_scores(x, truth, delta=DELTA, significance=s).value > 0)
        mus.append(st.gdp_lower_bound_one_run_scores(x, truth, delta=DELTA, significance=s).mu_lower > 0)
        bad.append(_uncorrected(x, truth, s) > 0)
    _assert_not_above(eps, s)
    _assert_not_above(mus, s)
    if draw == "normal":
        with pytest.raises(AssertionError):
            _assert_not_above(bad, s)


@pytest.mark.parametrize("mu", [1.0, 2.0])
def test_coverage_on_exact_gaussian_outcomes(mu):
    """Scores N(μ·bit, 1): ε_lower ≤ ε_μ(δ) and μ_lower ≤ μ in ≥ 1 − α of 200 runs (m = 1000), at δ = 1e-5 and at
    δ = 0.2 (where ε_lower comes closer to the truth). Negative control: μ_lower > 0.8 μ is frequent at μ = 2
    (measured 78 % of runs), and the check catches it. Larger run: docs/auditing.md (one-run section)."""
    rng = np.random.default_rng(int(10 * mu))
    m, s = 1000, 0.05
    over = {1e-5: [], 0.2: []}
    mu_over, mu_close = [], []
    for _ in range(200):
        x, truth = _game(rng, m, lambda t: rng.standard_normal(t.size) + mu * t)
        for d in over:
            over[d].append(st.epsilon_one_run_scores(x, truth, delta=d, significance=s).value > _gdp_epsilon(mu, d))
        mu_lo = st.gdp_lower_bound_one_run_scores(x, truth, delta=DELTA, significance=s).mu_lower
        mu_over.append(mu_lo > mu)
        mu_close.append(mu_lo > 0.8 * mu)
    for d in over:
        _assert_not_above(over[d], s)
    _assert_not_above(mu_over, s)
    if mu == 2.0:
        with pytest.raises(AssertionError):
            _assert_not_above(mu_close, s)


def test_monotone_in_the_separation_of_the_scores():
    """Shifting every in-score up never lowers either form (each grid count can only improve)."""
    for seed in range(5):
        rng = np.random.default_rng(seed)
        truth = rng.random(800) < 0.5
        base = rng.standard_normal(800)
        eps = [st.epsilon_one_run_scores(base + c * truth, truth, delta=DELTA).value for c in np.linspace(0, 4, 9)]
        mus = [st.gdp_lower_bound_one_run_scores(base + c * truth, truth, delta=DELTA).mu_lower
               for c in np.linspace(0, 4, 9)]
        assert all(np.diff(eps) >= 0) and all(np.diff(mus) >= 0) and eps[-1] > 1.0 and mus[-1] > 2.0, (seed, eps, mus)


def test_bad_input_is_named():
    x, truth = np.arange(10.0), np.arange(10) % 2 == 0
    with pytest.raises(InputError, match="truth must have one entry per score; got 9 and 10"):
        st.epsilon_one_run_scores(x, truth[:9], delta=DELTA)
    with pytest.raises(InputError, match="truth must hold booleans"):
        st.epsilon_one_run_scores(x, np.full(10, 2), delta=DELTA)
    with pytest.raises(InputError, match="truth must mark canaries both in and out; got 10 in and 0 out"):
        st.epsilon_one_run_scores(x, np.ones(10, bool), delta=DELTA)
    with pytest.raises(InputError, match="scores must be finite"):
        st.epsilon_one_run_scores(np.r_[x[:9], np.nan], truth, delta=DELTA)
    with pytest.raises(InputError, match=r"significance must be in \(0, 1\)"):
        st.epsilon_one_run_scores(x, truth, delta=DELTA, significance=1.5)
    with pytest.raises(InputError, match=r"delta must be in \[0, 1\)"):
        st.gdp_lower_bound_one_run_scores(x, truth, delta=-0.1)
    with pytest.raises(InputError, match="delta must be > 0 for the GDP form"):
        st.gdp_lower_bound_one_run_scores(x, truth, delta=0.0)
    with pytest.raises(InputTypeError, match=r"strategy must be Bonferroni\(\) or Explicit\(t\) for the GDP form"):
        st.gdp_lower_bound_one_run_scores(x, truth, delta=DELTA, strategy=st.Split())


def test_compare_one_run_pays_for_three_statistics():
    """Vouched independence: ε_lower is the largest of Steinke, order and scores, each at s/3; else Steinke at s."""
    rng = np.random.default_rng(6)
    member = rng.random(2000) < 0.5
    sc = rng.standard_normal(2000) + 3.0 * (member & (rng.random(2000) < 0.5))  # one-sided leakage: scores win
    spec = acc.DPSGD(2.0, acc.Poisson(0.5), 1)
    curves = comparator.analytical_curves(spec, DELTA)
    both = comparator.compare_one_run(sc, member, spec, delta=DELTA, curves=curves, independent_canaries=True)
    alone = comparator.compare_one_run(sc, member, spec, delta=DELTA, curves=curves)
    names = [x.name for x in both.one_run_statistics]
    assert names == ["steinke", "order", "scores", "fdp_gdp", "order_gdp", "scores_gdp"]
    eps = {x.name: x.result for x in both.one_run_statistics[:3]}
    assert all(b.confidence == pytest.approx(1 - 0.05 / 3) for b in eps.values())
    assert both.epsilon_lower is eps["scores"] is max(eps.values(), key=lambda b: b.value)
    assert [x.in_epsilon_lower for x in both.one_run_statistics] == [True] * 3 + [False] * 3
    assert [x.in_epsilon_lower for x in alone.one_run_statistics] == [True] + [False] * 5
    assert alone.epsilon_lower.method == "one_run" and alone.one_run_statistics[2].result.confidence == 0.95
    assert eps["scores"].value <= alone.one_run_statistics[2].result.value  # paying s/3 can only lower it
    assert both.epsilon_lower.value <= both.ceiling
    assert "do not interact" in both.one_run_statistics[2].assumption


def test_certifiable_replays_the_score_boxes():
    m = 1000
    weak = tightness.certifiable_one_run_replicates(acc.TradeOff.from_gdp(1.0), m, delta=DELTA, replicates=5,
                                                    statistic="scores")
    strong = tightness.certifiable_one_run_replicates(acc.TradeOff.from_gdp(3.0), m, delta=DELTA, replicates=5,
                                                      statistic="scores")
    assert 0 < np.median(weak) < np.median(strong) <= st.ceiling(m, m, delta=DELTA)  # n_in, n_out < m
    assert tightness.ONE_RUN_METHOD_STATISTIC["one_run_scores"] == "scores"
    with pytest.raises(InputError, match=r"statistic must be one of \['steinke', 'order', 'scores', 'order_family'\]"):
        tightness.certifiable_one_run_replicates(acc.TradeOff.from_gdp(1.0), m, delta=DELTA, statistic="x")
