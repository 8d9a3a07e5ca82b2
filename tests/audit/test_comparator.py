"""audit.comparator: the box-below-curve test on known Gaussian pairs, white-box Dirac audits of
correct DP-SGD (q = 1 and Poisson q < 1) find no violation and are tight, reconstruction vs ReRo."""

import numpy as np
import pytest
import torch
from scipy.stats import norm

import accountants as acc
from attacks import canaries, data, games, models
from attacks import membership as mia
from audit import comparator
from audit import statistics as st
from tests.oracles import gdp_epsilon_mp

Q = (np.arange(1000) + 0.5) / 1000


def test_violation_test_on_gaussian_pairs():
    pts = st.empirical_tradeoff(norm.ppf(Q) + 1.0, norm.ppf(Q))
    assert not comparator.violation_test(pts, acc.TradeOff.from_gdp(1.0)).violated  # the true curve
    v = comparator.violation_test(pts, acc.TradeOff.from_gdp(0.5), against="claim mu=0.5")
    assert v.violated and "bug or broken DP" in v.message and v.fnr_upper < v.curve_fnr
    with pytest.raises(ValueError, match="estimate"):
        comparator.violation_test(pts, acc.TradeOff.from_points(torch.tensor([0.5]), torch.tensor([0.4])))


@pytest.fixture(scope="module")
def dirac_setup():
    d = data.digits().subset(slice(0, 40))
    model = models.logistic_regression(64, 10)
    p0 = {k: v[0] for k, v in models.init_params(model, 1, torch.Generator().manual_seed(0)).items()}
    return d, model, canaries.dirac(canaries.quiet_coordinates(model, p0, d, 1), dim=650)


@pytest.mark.parametrize("sampling", [acc.Poisson(1.0), acc.Poisson(0.5)])
def test_white_box_dirac_audit_of_correct_dpsgd(dirac_setup, sampling):
    d, model, c = dirac_setup
    spec = acc.DPSGD(2.0, sampling, steps=4)  # q = 1: μ = √T/σ = 1 exactly (GDP)
    out = games.multi_run_game(games.Setup(spec, model, d, learning_rate=0.5), c, n_trials=1000, seed=3,
                               chunk_size=500, progress=False, scores=[mia.LikelihoodRatio()])
    s_in, s_out = out.in_scores("llr"), out.out_scores("llr")
    cmp = comparator.compare_membership(s_in, s_out, spec, delta=1e-5)
    assert not cmp.violated, [v.message for v in cmp.violations]
    assert cmp.epsilon_lower.value <= cmp.curves.epsilon_tight <= cmp.curves.epsilon_rdp
    assert 0 < cmp.tightness_tight < 1 and cmp.epsilon_lower.value <= cmp.ceiling
    assert cmp.delta_theory_empirical_estimate < 0.05  # the attack does not beat theory beyond noise
    if sampling.rate == 1.0:
        # PLD of the q = 1 Gaussian is exact: ε(1e-5) of 1-GDP = 4.3772 (tests/oracles.py gdp_epsilon_mp:
        # Balle & Wang 2018 Thm 8 in mpmath); rel 2e-3 covers the PLD grid's discretisation
        assert cmp.curves.epsilon_tight == pytest.approx(gdp_epsilon_mp(1.0, 1e-5), rel=2e-3)
        # what these trial counts can certify for this mechanism: the same statistics on
        # deterministic-quantile scores of the exact pair N(μ²/2, μ²) vs N(−μ²/2, μ²), μ = 1
        n_in, n_out = len(s_in), len(s_out)
        ref = st.epsilon_lower_bound(norm.ppf((np.arange(n_in) + 0.5) / n_in) + 0.5,
                                     norm.ppf((np.arange(n_out) + 0.5) / n_out) - 0.5, delta=1e-5).value
        assert cmp.epsilon_lower.value >= 0.7 * ref, (cmp.epsilon_lower.value, ref)


def test_reconstruction_against_rero():
    curves = comparator.Curves(acc.DPSGD(1.0, acc.Poisson(1.0), steps=1), 1e-5,
                               curves={"pld": acc.TradeOff.from_gdp(1.0)})  # keyed by method name
    ok = comparator.compare_reconstruction(np.r_[np.ones(5), np.zeros(95)], 0.01, curves)
    # ReRo bound of 1-GDP at κ = 0.01: 0.092362 (accountants.reconstruction doctest)
    assert ok.bound == pytest.approx(0.092362, abs=1e-6) and not ok.violated
    bad = comparator.compare_reconstruction(np.r_[np.ones(60), np.zeros(40)], 0.01, curves)
    assert bad.violated and bad.success_lower > 0.45
