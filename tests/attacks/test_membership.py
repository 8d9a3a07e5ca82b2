"""Membership scores: closed forms, mpmath/scipy oracles, optimality of the likelihood ratio,
LiRA on synthetic statistics, eval mode."""

import math

import pytest
import torch
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from scipy import stats

import accountants as acc
from attacks import membership as mia
from attacks import models


def test_llr_q1_closed_form():
    """q = 1: in = N(1, σ²), out = N(0, σ²) per step ⇒ Λ = Σ_t (o_t − 1/2)/σ²."""
    o = torch.tensor([[0.3, -1.2, 2.0], [1.0, 1.0, 1.0]], dtype=torch.float64)
    spec = acc.DPSGD(0.7, acc.Poisson(1.0), steps=3)
    torch.testing.assert_close(mia.white_box_llr(o, spec, 10), ((o - 0.5) / 0.49).sum(-1))


@pytest.mark.parametrize(
    "sampling", [acc.Poisson(0.1), acc.FixedSize(3, 10), acc.FixedSize(4, 10, replace=True)], ids=str
)
def test_llr_matches_scipy_mixture_oracle(sampling):
    sigma, a, N = 0.9, 0.8, 10
    spec = acc.DPSGD(sigma, sampling, steps=2)
    o = torch.tensor([[-0.4, 1.7]], dtype=torch.float64)
    # oracle: log Σ_k P(k) φ((o − k a)/σ) − log φ(o/σ) with P from scipy
    if isinstance(sampling, acc.Poisson):
        law = {0: 0.9, 1: 0.1}
    elif not sampling.replace:
        law = {0: 0.7, 1: 0.3}
    else:
        law = {k: stats.binom.pmf(k, 4, 0.1) for k in range(5)}
    expect = sum(
        math.log(sum(p * stats.norm.pdf(x, k * a, sigma) for k, p in law.items()) / stats.norm.pdf(x, 0, sigma))
        for x in o[0].tolist()
    )
    got = mia.white_box_llr(o, spec, N, amplitude=a).item()
    assert got == pytest.approx(expect, rel=1e-12)


def test_llr_beats_sum_at_low_fpr():
    """Neyman–Pearson: under Poisson q = 0.05 the mixture LLR has more power than Σ o_t (seeded)."""
    g = torch.Generator().manual_seed(0)
    sigma, q, T, n = 0.4, 0.05, 200, 4000
    spec = acc.DPSGD(sigma, acc.Poisson(q), steps=T)
    k = (torch.rand(n, T, generator=g, dtype=torch.float64) < q).double()
    o_in = k + sigma * torch.randn(n, T, generator=g, dtype=torch.float64)
    o_out = sigma * torch.randn(n, T, generator=g, dtype=torch.float64)

    def tpr_at(score, fpr=0.01):
        thr = torch.quantile(score(o_out), 1 - fpr)
        return (score(o_in) > thr).double().mean().item()

    llr = tpr_at(lambda o: mia.white_box_llr(o, spec, 1000))
    dot = tpr_at(mia.inner_product_sum)
    assert llr > dot + 0.1, (llr, dot)


def test_black_box_statistics():
    model = models.logistic_regression(3, 4)
    params = {"linear.weight": torch.zeros(2, 4, 3, dtype=torch.float64),
              "linear.bias": torch.tensor([[0.0, 1.0, 2.0, 3.0], [800.0, 0.0, 0.0, 0.0]], dtype=torch.float64)}
    x = torch.zeros(2, 3, dtype=torch.float64)
    y = torch.tensor([3, 0])
    loss = mia.loss_scores(model, params, x, y)
    z = torch.tensor([0.0, 1.0, 2.0, 3.0], dtype=torch.float64)
    p3 = torch.softmax(z, 0)[3]
    torch.testing.assert_close(loss[0, 0], torch.log(p3))
    phi = mia.logit_confidence(model, params, x, y)
    torch.testing.assert_close(phi[0, 0], torch.log(p3) - torch.log1p(-p3))
    assert phi[1, 1].item() == pytest.approx(800 - math.log(3))  # finite where 1 − p rounds to 0


def test_lira_online_offline_fixed_variance():
    g = torch.Generator().manual_seed(1)
    S, m = 64, 3
    shadow_in = torch.rand(S, m, generator=g) < 0.5
    shadow = shadow_in.double() * 2.0 + 0.5 * torch.randn(S, m, generator=g, dtype=torch.float64)
    target = torch.tensor([[2.0, 0.0, 1.0]], dtype=torch.float64)
    on = mia.lira(target, shadow, shadow_in)
    assert on[0, 0] > 0 > on[0, 1]  # near the "in" centre vs near the "out" centre
    off = mia.lira(target, shadow, shadow_in, online=False)
    assert off[0, 0] > off[0, 2] > off[0, 1]  # monotone in the statistic
    fv = mia.lira(target, shadow, shadow_in, fixed_variance=True)
    assert torch.isfinite(fv).all()
    with pytest.raises(ValueError, match="canary 0 has no 'in' shadow"):
        mia.lira(target, shadow, torch.zeros(S, m, dtype=torch.bool))


def test_model_in_eval_mode_for_black_box_scores():
    model = models.mlp(4, 8, 3, dropout=0.5)
    params = models.init_params(model, 2, torch.Generator().manual_seed(0))
    x, y = torch.randn(5, 4, dtype=torch.float64), torch.tensor([0, 1, 2, 0, 1])
    a, b = mia.logit_confidence(model, params, x, y), mia.logit_confidence(model, params, x, y)
    assert torch.equal(a, b)  # dropout off: deterministic (tensorflow/privacy PR #484)
    assert model.training  # the caller's mode is restored


def test_score_registry_and_views():
    assert mia.score_name(mia.score_from_name("lira", n_shadow=8, online=False)) == "lira_offline_8"
    with pytest.raises(ValueError, match="unknown score 'rmia'; choose from"):
        mia.score_from_name("rmia")
    assert mia.needs(mia.LikelihoodRatio()).__class__.__name__ == "WhiteBox"
    assert mia.needs(mia.LiRA()).__class__.__name__ == "BlackBox"
    with pytest.raises(ValueError, match="n_shadow"):
        mia.LiRA(n_shadow=1)


@settings(max_examples=40, deadline=None)
@given(
    o=st.lists(st.floats(-5, 5), min_size=2, max_size=2),
    q=st.floats(0.01, 1.0),
    sigma=st.floats(0.3, 3.0),
    b=st.integers(1, 8),
)
@example(o=[-3.0, -4.0], q=1.0, sigma=0.3125, b=1)
def test_llr_increasing_in_each_observation(o, q, sigma, b):
    """Each step's likelihood ratio is increasing in o_t (a monotone-likelihood-ratio family), for every sampler."""
    lo, hi = sorted(o)
    assume(hi - lo > 1e-3)
    for sampling in (acc.Poisson(q), acc.FixedSize(b, 10), acc.FixedSize(b, 10, replace=True)):
        spec = acc.DPSGD(sigma, sampling, steps=1)
        llr = mia.white_box_llr(torch.tensor([[lo], [hi], [-1e6]], dtype=torch.float64), spec, 10)
        # strictly increasing unless both sit on the floor log P[not drawn], where the in-batch term no longer
        # registers in float (o = −4 and −3 at σ = 0.3125, b = 1 of 10: a random Hypothesis run)
        assert llr[1] > llr[0] or (llr[1] == llr[0] == llr[2]), (sampling, llr)


@pytest.mark.parametrize("name", ["llr", "inner_product", "loss", "confidence"])
def test_a_score_without_its_observation_is_an_input_error(name):
    """A score asked of a view that lacks what it reads (a white-box score without the update
    projections, a black-box score without the final model) names the missing observation
    (InputError, CLI exit 2), where it raised a TypeError on None before (found by mypy)."""
    view = mia.ScoreView(spec=acc.DPSGD(1.0, acc.Poisson(0.1), 3), n_records=10, m=1)
    with pytest.raises(acc.InputError, match="this score needs"):
        mia.score_from_name(name).compute(view)
