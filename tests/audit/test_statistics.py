"""audit.statistics: interval values and coverage, sound and tight ε lower bounds on known Gaussian
pairs, null scores, threshold strategies, one-run bounds against a naive implementation."""

import math

import mpmath as mp
import numpy as np
import pytest
from scipy.stats import norm

from audit import statistics as st
from tests.oracles import gdp_epsilon_mp as _gdp_epsilon_mp

Q = (np.arange(5000) + 0.5) / 5000  # deterministic quantiles: scores with exactly known rates


def test_clopper_pearson_closed_forms():
    # k = 0: upper = 1 − (s/2)^{1/n} (closed form); k = n: lower = (s/2)^{1/n}
    lo, hi = st.clopper_pearson(0, 10, 0.05)
    assert lo == 0.0 and hi == pytest.approx(1 - 0.025 ** 0.1, rel=1e-12)
    lo, hi = st.clopper_pearson(10, 10, 0.05)
    assert hi == 1.0 and lo == pytest.approx(0.025 ** 0.1, rel=1e-12)
    assert st.clopper_pearson_upper(0, 100, 0.05) == pytest.approx(1 - 0.05 ** 0.01, rel=1e-12)
    with pytest.raises(ValueError, match="significance"):
        st.clopper_pearson(1, 10, 1.5)
    with pytest.raises(ValueError, match="k must"):
        st.clopper_pearson(11, 10)


def test_clopper_pearson_coverage_monte_carlo():
    """Seeded Monte Carlo: exact CP covers ≥ 95 % (minus 3 SE of 4000 draws); Jeffreys is close to nominal."""
    rng = np.random.default_rng(0)
    for p, n in ((0.03, 40), (0.3, 50)):
        k = rng.binomial(n, p, size=4000)
        lo, hi = st.clopper_pearson(k, n, 0.05)
        cover = np.mean((lo <= p) & (p <= hi))
        assert cover >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / 4000), (p, n, cover)
        assert np.mean(st.clopper_pearson_upper(k, n, 0.05) >= p) >= 0.95 - 3 * math.sqrt(0.05 * 0.95 / 4000)
        jl, jh = st.jeffreys(k, n, 0.05)
        assert np.all(jh <= hi + 1e-12) and np.mean((jl <= p) & (p <= jh)) > 0.9


def _ceiling_closed_form(n: int, s: float, d: float) -> float:
    """Zero errors in n in and n out, one threshold: each rate's Clopper–Pearson upper limit at s/2 is
    u = 1 − (s/2)^{1/n} (CP 1934 with k = 0), and ε = log((1 − δ − u)/u) (Kairouz et al. 2015 Thm 2.1:
    FPR + e^ε FNR ≥ 1 − δ). mpmath at 30 digits."""
    with mp.workdps(30):
        u = 1 - (mp.mpf(s) / 2) ** (mp.mpf(1) / n)
        return float(mp.log((1 - mp.mpf(d) - u) / u))


def test_ceiling_matches_closed_form():
    # closed form above: 3.2813 (n = 100), 5.6049 (n = 1000) at s = 0.05, δ = 1e-5; rel 1e-9 (CP's outward rounding)
    for n in (100, 1000):
        assert st.ceiling(n, n, delta=1e-5, strategy=st.Explicit(0.0)) == pytest.approx(
            _ceiling_closed_form(n, 0.05, 1e-5), rel=1e-9)
    # Bonferroni pays for its thresholds; the ceiling bounds every bound of the design
    c = st.ceiling(1000, 1000, delta=1e-5)
    assert 4.0 < c < 5.60
    b = st.epsilon_lower_bound(norm.ppf(Q[::5]) + 6, norm.ppf(Q[::5]), delta=1e-5)
    assert b.value <= c + 1e-12


@pytest.mark.parametrize("mu", [1.0, 2.0])
def test_sound_and_tight_on_gaussian_pairs(mu):
    """Scores N(μ,1) vs N(0,1) at deterministic quantiles: ε_lower < true ε(δ) of μ-GDP, and within 20 % of
    the best these trial counts allow (CP at the expected counts with one pre-chosen threshold)."""
    d = 1e-5
    b = st.epsilon_lower_bound(norm.ppf(Q) + mu, norm.ppf(Q), delta=d)
    true = st._gdp_epsilon(mu, d)  # μ=1: 4.3772, μ=2: 9.9973
    assert true == pytest.approx(_gdp_epsilon_mp(mu, d), rel=1e-9)
    alpha = np.linspace(1e-7, 1 - 1e-7, 50_000)
    best = st.certifiable_epsilon(alpha, norm.cdf(norm.ppf(1 - alpha) - mu), 5000, 5000, delta=d)
    assert b.value < true
    assert b.value == pytest.approx(best, rel=0.2), (b.value, best)
    assert b.bound == "lower" and b.confidence == 0.95 and b.n_hypotheses == 28
    for strategy in (st.Split(0.5, 1), st.MultiSplit(5, 0.5, 2), st.Explicit(mu / 2 + 1.0)):
        assert 0 < st.epsilon_lower_bound(norm.ppf(Q) + mu, norm.ppf(Q), delta=d, strategy=strategy).value < true


def test_null_scores_give_zero():
    z = np.zeros(400)
    for strategy in (st.Bonferroni(), st.Split(), st.MultiSplit(3), st.Explicit(0.0)):
        assert st.epsilon_lower_bound(z, z, delta=1e-5, strategy=strategy).value == 0.0
    assert st.gdp_estimate(z, z, delta=1e-5).mu_estimate == 0.0  # no |·| shortcut (jax_privacy PR #270)
    # same distribution, seeded: nothing certified at the 5 % level
    rng = np.random.default_rng(3)
    assert st.epsilon_lower_bound(rng.normal(size=500), rng.normal(size=500), delta=1e-5).value == 0.0


def test_score_direction_and_second_rule():
    """IMPORTANT: higher ⇒ member. Reversed scores certify nothing (the test family is one-directional);
    the second rule (FNR small, FPR moderate) is attained by the in-score threshold family."""
    assert st.epsilon_lower_bound(np.zeros(200), np.ones(200), delta=1e-5).value == 0.0
    # in-scores all above 0.5; out-scores: 70 % below, 30 % above → only FN = 0 thresholds are informative
    out = np.concatenate([np.zeros(140), np.ones(60)])
    b = st.epsilon_lower_bound(np.full(200, 0.9), out, delta=1e-5)
    assert b.fnr == 0.0 and b.value == pytest.approx(
        math.log((1 - 1e-5 - b.fpr_upper) / b.fnr_upper), rel=1e-12)


def test_epsilon_from_rates_inverts_the_dp_region():
    # on the boundary of the (ε, δ) region: FPR + e^ε FNR = 1 − δ
    eps, d, fnr = 1.3, 1e-3, 0.05
    fpr = 1 - d - math.exp(eps) * fnr
    assert st.epsilon_from_rates(fnr, fpr, d) == pytest.approx(eps, rel=1e-12)
    assert st.epsilon_from_rates(0.5, 0.5, 0.0) == 0.0


def _naive_p_value(m, r, v, eps, delta):
    """Steinke et al. 2023 Prop. 5.1 written with exact integer binomials and no vectorisation."""
    q = math.exp(eps) / (1 + math.exp(eps))

    def pmf(i):
        return math.comb(r, i) * q**i * (1 - q) ** (r - i)

    beta = sum(pmf(i) for i in range(v, r + 1))
    if delta == 0:
        return beta
    alpha = max((sum(pmf(j) for j in range(v - i, v)) / i for i in range(1, v + 1)), default=0.0)
    return min(1.0, beta + alpha * delta * 2 * m)


def _naive_eps(m, r, v, delta, s):
    lo, hi = 0.0, 50.0
    if _naive_p_value(m, r, v, 0.0, delta) >= s:
        return 0.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _naive_p_value(m, r, v, mid, delta) < s else (lo, mid)
    return lo


@pytest.mark.parametrize(("m", "r", "v", "delta"), [(200, 50, 45, 0.0), (200, 50, 45, 1e-5), (1000, 100, 100, 1e-5),
                                         (60, 30, 20, 1e-3)])
def test_one_run_bound_matches_naive(m, r, v, delta):
    for eps in (0.5, 2.0):
        assert st.one_run_p_value(m, r, v, eps, delta) == pytest.approx(_naive_p_value(m, r, v, eps, delta),
                                                                        rel=1e-9, abs=1e-15)
    # scores whose top r hold exactly v members; a single guess count (no union bound)
    scores = np.arange(m, 0, -1, dtype=float)
    truth = np.zeros(m, bool)
    truth[:v] = True
    truth[r:r + (m - r) // 2] = True
    b = st.epsilon_one_run(scores, truth, delta=delta, significance=0.05, guesses=[r])
    assert b.guesses == r and b.correct == v
    assert b.value == pytest.approx(_naive_eps(m, r, v, delta, 0.05), abs=1e-6)


def _prop51_eps_perfect(m: int, delta: float, s: float) -> float:
    """Steinke et al. 2023 Prop. 5.1 for r = v = m (every guess right), by bisection: p(ε) = q^m + 2mδ·max_i
    (Σ_{j=m−i}^{m−1} Bin(j; m, q))/i, q = e^ε/(1 + e^ε) — _naive_p_value with prefix sums (O(m), not O(m²))."""
    def p_value(eps):
        q = math.exp(eps) / (1 + math.exp(eps))
        pmf = [math.comb(m, j) * q**j * (1 - q) ** (m - j) for j in range(m + 1)]
        tail, best = 0.0, 0.0
        for i in range(1, m + 1):
            tail += pmf[m - i]
            best = max(best, tail / i)
        return min(1.0, pmf[m] + best * delta * 2 * m)

    lo, hi = 0.0, 50.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if p_value(mid) < s else (lo, mid)
    return lo


def test_one_run_ceiling_and_fdp():
    # perfect guesser, m = r = v = 1000, s = 0.05. δ = 0 (Steinke et al. 2023 Thm 3.1): the p-value is
    # P[Binomial(1000, p) ≥ 1000] = p^1000 with p = e^ε/(1 + e^ε), so ε = logit(0.05^{1/1000}) = 5.8091 in
    # closed form; δ = 1e-5 (Prop. 5.1): _prop51_eps_perfect above, 5.78. Bisection tolerance 1e-6.
    scores = np.arange(1000, 0, -1, dtype=float)
    b0 = st.epsilon_one_run(scores, np.ones(1000, bool), delta=0.0, guesses=[1000])
    p = 0.05 ** (1 / 1000)
    assert b0.value == pytest.approx(math.log(p / (1 - p)), abs=1e-6)
    assert st.epsilon_one_run(scores, np.ones(1000, bool), delta=1e-5, guesses=[1000]).value == \
        pytest.approx(_prop51_eps_perfect(1000, 1e-5, 0.05), abs=1e-6)
    rng = np.random.default_rng(0)
    y = rng.random(400) < 0.5
    x = 2.0 * y + rng.normal(size=400)
    f = st.gdp_lower_bound_one_run(x, y, delta=1e-5)  # a bound on the GDP μ (issue 11 §3), not on ε
    assert 0 < f.mu_lower < 2.0 and f.bound == "gdp_mu_lower"
    assert f.refuted_curve_epsilon == pytest.approx(st._gdp_epsilon(f.mu_lower, 1e-5), rel=1e-12)
    assert st.gdp_lower_bound_one_run(np.zeros(400), y, delta=1e-5).mu_lower == 0.0
    assert st.epsilon_one_run(x, y, delta=1e-5).value <= st.ceiling_one_run(400, delta=1e-5) + 1e-9


def test_gdp_estimate_is_an_estimate():
    g = st.gdp_estimate(norm.ppf(Q) + 1.0, norm.ppf(Q), delta=1e-5)
    assert set(g.to_dict()) == {"mu_estimate", "epsilon_estimate", "delta"}
    assert 0.7 < g.mu_estimate < 1.0 and g.epsilon_estimate < 4.38
    assert st.gdp_mu_for(st._gdp_epsilon(1.0, 1e-5), 1e-5) == pytest.approx(1.0, rel=1e-8)


def test_bad_inputs_name_the_parameter():
    with pytest.raises(ValueError, match="in_scores"):
        st.epsilon_lower_bound([], [1.0], delta=1e-5)
    with pytest.raises(ValueError, match="delta"):
        st.epsilon_lower_bound([1.0], [0.0], delta=1.5)
    with pytest.raises(ValueError, match="frac"):
        st.Split(1.5)
    with pytest.raises(TypeError, match="strategy"):
        st.epsilon_lower_bound([1.0], [0.0], delta=1e-5, strategy="bonferroni")


def test_jeffreys_variant_is_labelled_and_not_looser():
    cp = st.epsilon_lower_bound(norm.ppf(Q) + 2.0, norm.ppf(Q), delta=1e-5)
    jf = st.epsilon_lower_bound(norm.ppf(Q) + 2.0, norm.ppf(Q), delta=1e-5, interval="jeffreys")
    assert jf.method == "jeffreys" and cp.method == "clopper_pearson"
    assert cp.value <= jf.value < st._gdp_epsilon(2.0, 1e-5)  # Jeffreys limits are inside CP's
    with pytest.raises(ValueError, match="interval"):
        st.epsilon_lower_bound([1.0], [0.0], delta=1e-5, interval="wald")


@pytest.mark.slow
def test_one_run_delta_term_beyond_4096_guesses_bounds_the_printed_one_and_is_fast():
    """Steinke et al. 2023 Prop. 5.1's δ term, max_i P[v−i ≤ Bin(r,q) ≤ v−1]/i, is computed term by term up to 4,096
    right guesses and on the binomial's ±12 sd bulk beyond (audit/statistics/one_run._delta_term): never below the
    term-by-term value (a larger p-value keeps the ε bound sound) and above it by at most the mass outside the bulk
    plus 1e-9 relative; ceiling_one_run at m = 1e7 with δ > 0 took minutes term by term."""
    import math
    import time

    import scipy.stats

    from audit.statistics import one_run

    def printed(r, v, q, beta):
        i = np.arange(1, v + 1)
        return float(np.max((scipy.stats.binom.sf(v - i - 1, r, q) - beta) / i, initial=0.0))

    rng = np.random.default_rng(1)
    for _ in range(25):
        r = int(rng.integers(5_000, 40_000))
        v = int(rng.integers(4_097, r + 1))
        q = 1 / (1 + math.exp(-float(rng.uniform(0.0, 4.0))))
        beta = float(scipy.stats.binom.sf(v - 1, r, q))
        exact, fast = printed(r, v, q, beta), one_run._delta_term(r, v, q, beta)
        assert exact <= fast <= exact * (1 + 2e-9) + 1e-20, (r, v, q)  # T, the mass outside the bulk, < 1e-20
    # fast beyond 4096 guesses: linear in m, not m × v (the term-by-term sum). Measured as a ratio of this
    # process's CPU time at m = 1e6 and 1e7 (about 10 here; 100 if quadratic), not wall-clock seconds
    t0 = time.process_time()
    st.ceiling_one_run(10**6 + 1, delta=1e-5)
    t1 = time.process_time()
    big = st.ceiling_one_run(10**7, delta=1e-5)
    t2 = time.process_time()
    assert t2 - t1 < 40 * (t1 - t0) + 0.5, (t1 - t0, t2 - t1)
    # the ceiling falls with m once δ > 0 (the 2mδ term grows), and the m = 1e5 value is the term-by-term one
    assert big < st.ceiling_one_run(10**6, delta=1e-5) < st.ceiling_one_run(10**5, delta=1e-5)
    assert st.ceiling_one_run(10**5, delta=1e-5) == pytest.approx(5.083493256941438, abs=1e-9)
