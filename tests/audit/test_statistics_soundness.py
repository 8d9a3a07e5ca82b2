"""audit.statistics defects of issue 11 (§2 one-run ties, §3 the f-DP one-run number, §4 Split's selection,
§7/§8 inputs that hung, crashed or returned nonsense). Each test here fails on b2756c0, a commit of this
repository (`git show b2756c0`); what it returned is quoted as the defect, never as a source of a pinned value."""

import math

import numpy as np
import pytest
import scipy.stats
from scipy.stats import norm

from accountants import DPSGD, InputError, Poisson
from audit import comparator
from audit import statistics as st
from tests.oracles import gdp_epsilon_mp

# ------------------------------------------------------------------------------------ §2 one-run ties


@pytest.mark.parametrize("order", ["members_first", "members_last", "shuffled"])
def test_one_run_all_equal_scores_certify_nothing(order):
    """Identical scores carry no evidence: ε_lower = 0 and μ_lower = 0 in any order (b2756c0: 4.44 and 7.37 with
    the members listed first, because a stable argsort guessed the first r of a tie group)."""
    y = np.array([True] * 500 + [False] * 500)
    if order == "members_last":
        y = y[::-1].copy()
    elif order == "shuffled":
        y = np.random.default_rng(0).permutation(y)
    x = np.zeros(y.size)
    assert st.epsilon_one_run(x, y, delta=1e-5).value == 0.0
    assert st.epsilon_one_run(x, y, delta=0.0).value == 0.0
    assert st.gdp_lower_bound_one_run(x, y, delta=1e-5).mu_lower == 0.0
    assert st.epsilon_one_run(x, y, delta=1e-5, guesses=[10, 100]).value == 0.0  # no tie boundary ≤ r: skipped


def test_one_run_tied_null_scores_monte_carlo():
    """500 seeded null audits, m = 200, scores N(0,1) rounded to integers (heavy ties), members listed first:
    ε_lower > 0 (and μ_lower > 0) in at most the significance level. A sound bound has E[count] ≤ 25; we allow
    the binomial slack, the 0.999 quantile of Bin(500, 0.05) (= 39), so a sound method fails this test with
    probability < 1e-3 (and never: the seeds are fixed). b2756c0 certified ε > 0 in nearly every audit."""
    s, n_audits = 0.05, 500
    slack = int(scipy.stats.binom.ppf(0.999, n_audits, s))
    pos_e = pos_mu = 0
    rng = np.random.default_rng(11)
    for _ in range(n_audits):
        y = np.sort(rng.random(200) < 0.5)[::-1]  # members first
        x = np.round(rng.normal(size=200))
        pos_e += st.epsilon_one_run(x, y, delta=1e-5, significance=s).value > 0
        pos_mu += st.gdp_lower_bound_one_run(x, y, delta=1e-5, significance=s).mu_lower > 0
    assert pos_e <= slack and pos_mu <= slack, (pos_e, pos_mu, slack)


def test_one_run_ties_record_whole_groups():
    """Guesses end at a tie-group boundary; without ties the bound is Alg. 1 done by hand (below)."""
    x = np.array([3.0, 2, 2, 2, 1, 0])
    y = np.array([1, 1, 0, 1, 0, 0], bool)
    b = st.epsilon_one_run(x, y, delta=0.0, guesses=[1, 2, 3, 6])
    assert b.guesses in (1, 4, 6) and "tied scores guessed together" in b.strategy
    rng = np.random.default_rng(0)
    y = rng.random(400) < 0.5
    x = 2.0 * y + rng.normal(size=400)
    # no ties: the bound is Steinke et al. 2023 Alg. 1 done by hand — guess the top r for r in the grid m, m/2, ...,
    # v right guesses, the largest ε with p-value (Prop. 5.1; one_run_p_value, checked against exact integer
    # binomials in test_statistics.py) below s/#grid, derived here (2.3159531503915787; the untied bound did not change)
    m, order = x.size, np.argsort(-x)
    grid = st.one_run_guess_grid(m)
    by_hand = 0.0
    for r in grid:
        v = int(y[order][:r].sum())
        lo, hi = 0.0, 50.0
        for _ in range(80):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if st.one_run_p_value(m, int(r), v, mid, 1e-5) < 0.05 / grid.size else (lo, mid)
        by_hand = max(by_hand, lo)
    assert st.epsilon_one_run(x, y, delta=1e-5).value == pytest.approx(by_hand, abs=1e-9)
    # the f-DP bound on the same guesses: the GDP curve it refutes has ε = 3.5686 at δ (Dong et al. Cor. 2.13,
    # in mpmath), and μ_lower is the largest μ rejected at the chosen guess count (Mahloujifar et al. 2024 Alg.)
    g = st.gdp_lower_bound_one_run(x, y, delta=1e-5)
    assert g.refuted_curve_epsilon == pytest.approx(gdp_epsilon_mp(g.mu_lower, 1e-5), rel=1e-9)
    rejects = st.one_run._fdp_rejects_mu
    sh = 0.05 / grid.size
    assert rejects(m, g.guesses, g.correct, g.mu_lower, sh) and not rejects(m, g.guesses, g.correct,
                                                                            g.mu_lower * (1 + 1e-6), sh)


# ------------------------------------------------------------------------------------ §3 the f-DP one-run number


@pytest.mark.slow
def test_fdp_one_run_is_a_gdp_bound_never_an_epsilon_lower():
    """Randomized response with pure ε = 1 (so (1, δ)-DP for every δ): 20 seeded one-run audits of m = 500.
    The f-DP result refutes a GDP curve whose ε at δ exceeds 1 in many audits (issue 11: 58 of 100), so it must
    not appear in any field named epsilon_lower; every epsilon_lower field stays ≤ 1."""
    p = 1 / (1 + math.e)  # RR at ε = 1 reports the truth with probability e/(1+e)
    spec = DPSGD(1.0, Poisson(0.5), 1)
    refuted_above_1 = 0
    for seed in range(20):
        rng = np.random.default_rng(seed)
        y = rng.random(500) < 0.5
        x = np.where(rng.random(500) < p, ~y, y).astype(float)
        cmp = comparator.compare_one_run(x, y, spec, delta=1e-5, curves=comparator.Curves(spec, 1e-5))
        fields = {k: v for k, v in vars(cmp).items() if "epsilon_lower" in k}
        assert set(fields) == {"epsilon_lower"}
        assert cmp.epsilon_lower.value <= 1.0 and cmp.epsilon_lower.bound == "lower"
        g = cmp.gdp_lower
        assert isinstance(g, st.GdpLowerBound) and g.bound == "gdp_mu_lower" and not hasattr(g, "value")
        assert not any("epsilon_lower" in k for k in g.to_dict())
        refuted_above_1 += g.refuted_curve_epsilon > 1.0
    assert refuted_above_1 >= 3  # the GDP number does exceed the true ε: reading it as ε_lower would be wrong


def test_epsilon_one_run_fdp_is_a_deprecated_alias():
    y = np.arange(40) % 2 == 0
    with pytest.warns(DeprecationWarning, match="gdp_lower_bound_one_run"):
        g = st.epsilon_one_run_fdp(y.astype(float), y, delta=1e-5)
    assert isinstance(g, st.GdpLowerBound)


# ------------------------------------------------------------------------------------ §4 Split


def test_split_selects_on_the_uncorrected_objective():
    """Scores N(1,1) vs N(0,1) at the quantiles (i+½)/100, 100 + 100, Split(0.5, seed 0), δ = 1e-5, s = 0.05.

    jax_privacy 2.0.0 (PyPI wheel), CanaryScoreAuditor(in, out).epsilon_clopper_pearson(0.05, 1e-5,
    one_sided=False, threshold_strategy=Split(0.5, 0)) = 0.325402401747255: the same partition (one
    default_rng(0), in-permutation then out-permutation, first ⌊n/2⌋ select), the threshold chosen by the
    uncorrected two-sided CP bound, the bound on the other half. Ours agreed to 2.2e-16 on seeds 0-29 at
    δ ∈ {0, 1e-5}. b2756c0 gave 0.000 (it chose on the Bonferroni-corrected bound, 0 at every candidate).
    """
    q = (np.arange(100) + 0.5) / 100
    xin, xout = norm.ppf(q) + 1.0, norm.ppf(q)
    b = st.epsilon_lower_bound(xin, xout, delta=1e-5, strategy=st.Split(0.5, 0))
    assert b.value == pytest.approx(0.325402401747255, rel=1e-12)
    # by hand: the same partition; the selection half's best uncorrected bound over "score ≥ t"; the bound on
    # the evaluation half at that one threshold (no correction)
    rng = np.random.default_rng(0)
    pin, pout = rng.permutation(100), rng.permutation(100)
    sel_in, ev_in, sel_out, ev_out = xin[pin[:50]], xin[pin[50:]], xout[pout[:50]], xout[pout[50:]]
    ts = np.unique(np.concatenate([sel_in, sel_out]))
    unc = [st.epsilon_lower_bound(sel_in, sel_out, delta=1e-5, strategy=st.Explicit(float(t))).value for t in ts]
    t_best = float(ts[int(np.argmax(unc))])
    assert b.threshold == t_best
    assert b.value == st.epsilon_lower_bound(ev_in, ev_out, delta=1e-5, strategy=st.Explicit(t_best)).value
    assert b.value <= st.ceiling(100, 100, delta=1e-5, strategy=st.Split(0.5, 0))


def test_split_null_scores_monte_carlo():
    """300 seeded null audits (100 + 100 N(0,1) scores): Split certifies ε > 0 in at most s = 0.05, up to the
    0.999 binomial quantile (24 of 300)."""
    slack = int(scipy.stats.binom.ppf(0.999, 300, 0.05))
    rng = np.random.default_rng(5)
    pos = sum(st.epsilon_lower_bound(rng.normal(size=100), rng.normal(size=100), delta=1e-5,
                                     strategy=st.Split(0.5, i)).value > 0 for i in range(300))
    assert pos <= slack, (pos, slack)


# ------------------------------------------------------------------------------------ §7/§8 inputs


@pytest.mark.parametrize(("fpr", "fnr"), [(math.nan, 0.1), (-1.0, 0.1), (-1e97, 0.1), (0.1, 1.5), (0.1, -0.2),
                                          ([0.1, math.nan], 0.1)])
def test_epsilon_from_rates_rejects_non_rates(fpr, fnr):
    with pytest.raises(InputError, match=r"fpr|fnr"):
        st.epsilon_from_rates(fpr, fnr, 1e-5)  # b2756c0: fpr = −1 gave 0.0, fpr = −1e97 gave 1.8e308


@pytest.mark.parametrize("fn", [st.jeffreys, st.jeffreys_upper, st.clopper_pearson, st.clopper_pearson_upper])
def test_intervals_reject_infinite_n(fn):
    with pytest.raises(InputError, match="n must"):
        fn(1, math.inf)  # b2756c0: jeffreys returned NaN


@pytest.mark.parametrize(("args", "match"), [
    ((10, 5, 6, 1.0, 1e-5), "correct"),            # more right guesses than guesses
    ((10, 11, 3, 1.0, 1e-5), "guesses"),           # more guesses than canaries
    ((10**18, 10**18, 10**17, 1.0, 1e-5), "m"),    # b2756c0 tried to allocate 105 PiB
    ((10, 5, 3, math.nan, 1e-5), "eps"),           # b2756c0 returned NaN
    ((10, 5, 3, -1e300, 1e-5), "eps"),             # b2756c0: OverflowError
    ((10, 5, -3, 1.0, 1e-5), "correct"),
    ((10, 5, 2.5, 1.0, 1e-5), "correct"),
    ((10, 5, 3, 1.0, 1.5), "delta"),
])
def test_one_run_p_value_validates_counts(args, match):
    with pytest.raises(InputError, match=match):
        st.one_run_p_value(*args)


def test_one_run_p_value_is_a_probability():
    assert st.one_run_p_value(10, 5, 3, math.inf, 1e-5) == 1.0
    assert 0 <= st.one_run_p_value(1000, 1000, 0, 0.0, 0.5) <= 1
    assert st.one_run_p_value(st.MAX_CANARIES, 10, 10, 50.0, 0.0) == 1.0


@pytest.mark.parametrize("ratio", [1 + 1e-12, 1.0, 0.5, -2.0, math.nan])
def test_grid_ratio_is_validated(ratio):
    """Bonferroni(ratio=1+1e-12) and empirical_tradeoff(ratio ≤ 1) looped (practically) forever on b2756c0."""
    with pytest.raises(InputError, match="ratio"):
        st.Bonferroni(ratio)
    with pytest.raises(InputError, match="ratio"):
        st.empirical_tradeoff([1.0, 2.0, 3.0, 4.0], [0.0, 1.0], ratio=ratio)


def test_gdp_mu_for_rejects_non_finite_epsilon_and_stays_finite():
    for bad in (math.nan, math.inf, -1.0):
        with pytest.raises(InputError, match="epsilon"):
            st.gdp_mu_for(bad, 1e-5)
    assert 0 < st.gdp_mu_for(0.0, 1e-300) < 1e-15  # b2756c0: brentq ValueError (no sign change)


# ------------------------------------------------------------------------------------ issue 12 §7 package split

PUBLIC_AT_B2756C0 = [  # audit/statistics.py's __all__ at b2756c0, plus the names other modules imported from it
    "Bonferroni", "EmpiricalTradeOff", "EpsilonLowerBound", "Explicit", "GdpEstimate", "MultiSplit", "Split",
    "ThresholdStrategy", "ceiling", "ceiling_one_run", "certifiable_epsilon", "clopper_pearson",
    "clopper_pearson_upper", "empirical_tradeoff", "epsilon_from_rates", "epsilon_lower_bound", "epsilon_one_run",
    "epsilon_one_run_fdp", "gdp_estimate", "gdp_mu_for", "jeffreys", "jeffreys_upper", "one_run_guess_grid",
    "one_run_p_value", "INTERVALS", "STRATEGIES", "strategy_name"]


def test_statistics_package_keeps_every_public_name():
    import importlib

    import audit.statistics

    mod = importlib.import_module("audit.statistics")
    for name in PUBLIC_AT_B2756C0:
        assert getattr(st, name) is getattr(audit.statistics, name) is getattr(mod, name)
    assert {"GdpLowerBound", "gdp_lower_bound_one_run"} <= set(st.__all__)
    assert set(st.__all__) >= set(PUBLIC_AT_B2756C0) - {"INTERVALS", "STRATEGIES", "strategy_name"}
