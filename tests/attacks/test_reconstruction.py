"""Informed-adversary reconstruction: the white-box MAP reconstructor's success rate matches its
closed form and respects the GDP ReRo bound; the black-box reconstructor beats the prior."""

import math

import pytest
import torch
from scipy import integrate, stats

import accountants as acc
from attacks import canaries, data, games, models, threat
from attacks import reconstruction as recon


def test_guess_and_success():
    s = torch.tensor([[0.1, 3.0, 2.0], [5.0, 0.0, 0.0]])
    assert recon.guess(s).tolist() == [1, 0]
    assert recon.success(s, torch.tensor([1, 2])).tolist() == [True, False]
    with pytest.raises(ValueError, match="reference must have shape"):
        recon.black_box_scores(torch.zeros(1, 3), torch.zeros(1, 3))


def test_white_box_success_matches_closed_form_and_bound(digits100):
    """q = 1, T steps, noise σ: each candidate's LLR is Gaussian with standardised gap μ = √T/σ, so
    P[success] = ∫ φ(z) Φ(z + μ)^(n−1) dz (argmax of n independent Gaussians), and the ReRo bound for
    μ-GDP is Φ(Φ⁻¹(κ) + μ) with κ = 1/n (Kaissis et al. 2023, arXiv:2307.03928)."""
    n, sigma, T, K = 10, 2.0, 4, 300
    digits100 = digits100.subset(slice(0, 30))  # the natural records only add work, not signal
    mu = math.sqrt(T) / sigma
    model = models.logistic_regression(64, 10)
    p0 = {k: v[0] for k, v in models.init_params(model, 1, torch.Generator().manual_seed(0)).items()}
    cands = canaries.dirac(canaries.quiet_coordinates(model, p0, digits100, n), dim=650)
    setup = games.Setup(acc.DPSGD(sigma, acc.Poisson(1.0), steps=T), model, digits100)
    out = games.reconstruction_game(setup, cands, n_trials=K, seed=4, progress=False)
    assert out.scores["llr"].shape == (K, n)
    assert out.metadata["kappa"] == pytest.approx(0.1)
    rate = out.successes("llr").double().mean().item()
    exact = integrate.quad(lambda z: stats.norm.pdf(z) * stats.norm.cdf(z + mu) ** (n - 1), -12, 12)[0]
    bound = stats.norm.cdf(stats.norm.ppf(1 / n) + mu)  # 0.389 for μ = 1, κ = 0.1
    assert exact <= bound
    assert abs(rate - exact) < 5 * math.sqrt(exact * (1 - exact) / K), (rate, exact)  # seeded, 5 SE


def test_black_box_reconstruction_beats_prior(digits100):
    model = models.logistic_regression(64, 10)
    setup = games.Setup(acc.DPSGD(0.5, acc.Poisson(0.5), steps=30), model, digits100, learning_rate=2.0)
    cands = canaries.mislabelled(data.digits().subset(slice(100, 200)), 5, generator=torch.Generator().manual_seed(0))
    out = games.reconstruction_game(setup, cands, threat=threat.BlackBox(), n_trials=30, n_reference=6,
                                    progress=False)
    assert out.threat == "black_box"
    assert out.scores["reference_shift"].shape == (30, 5)
    assert out.successes("reference_shift").double().mean().item() > 0.6  # prior κ = 0.2
