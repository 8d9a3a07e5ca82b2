"""audit.capacity_estimate: the held-out lower confidence bound on restricted divergences from samples
(moved from accountants.capacity, issue 12 §7; tests moved unchanged from tests/accountants/test_capacity.py).

Truths: N(0,1) vs N(1,1), linear class: α = 2 Rényi log 2 and KL 0.5; poly3 at α = 2: log(8/3)
(closed forms of docs/capacity-bounded.md)."""

import math

import pytest
import torch

from audit.capacity_estimate import RestrictedLowerBound, restricted_lower_bound

F64 = torch.float64


def test_lower_bound_coverage_monte_carlo():
    # Seeded Monte Carlo: 400 repetitions, n = 1000 per law, one-sided 90% bound. The bound is on
    # J(ĥ) ≤ D^H, so coverage of the true value should be ≥ 0.90 up to Monte-Carlo error
    # (binomial sd 0.015: 0.85 is > 3 sd below). Truth: N(0,1) vs N(1,1), lin: α = 2 → log 2, KL → 0.5.
    g = torch.Generator().manual_seed(20260)
    reps, n = 400, 1000
    xp = torch.randn(reps, n, generator=g, dtype=F64)
    xq = torch.randn(reps, n, generator=g, dtype=F64) + 1.0
    for divergence, alpha, truth in (("renyi", 2.0, math.log(2.0)), ("kl", None, 0.5)):
        lb = restricted_lower_bound(xp, xq, "linear", divergence, alpha, confidence=0.9, generator=g)
        cover = (lb.lower <= truth).double().mean().item()
        assert cover >= 0.85, (divergence, cover)
        assert lb.confidence == 0.9
        assert lb.n_fit == (500, 500)
        assert lb.n_eval == (500, 500)
        # Not vacuous: the average bound recovers most of the value.
        assert lb.lower.mean().item() > 0.7 * truth
        assert bool((lb.lower >= 0).all())


def test_lower_bound_heldout_vs_plugin_bias():
    # The in-sample maximum is biased upward (a maximum of noisy estimates); the held-out value of the fitted ĥ is not.
    # poly3, α = 2, N(0,1) vs N(1,1): truth log(1 + 1 + 1/2 + 1/6) = log(8/3) (α = 2 closed form).
    truth = math.log(8.0 / 3.0)
    g = torch.Generator().manual_seed(7)
    reps, n = 300, 160
    xp = torch.randn(reps, n, generator=g, dtype=F64)
    xq = torch.randn(reps, n, generator=g, dtype=F64) + 1.0
    lb = restricted_lower_bound(xp, xq, "poly3", "renyi", 2.0, confidence=0.95, generator=g)
    assert lb.held_out_estimate.mean().item() < truth
    assert (lb.lower <= truth).double().mean().item() >= 0.9
    # The plug-in (in-sample α = 2 closed form log(1 + Δ̂ᵀ Ĉov_Q⁻¹ Δ̂), what the estimator never reports)
    # overshoots the truth on average.
    phi_p = torch.stack([xp, xp**2, xp**3], -1)
    phi_q = torch.stack([xq, xq**2, xq**3], -1)
    d = phi_p.mean(1) - phi_q.mean(1)
    cov = torch.func.vmap(torch.cov)(phi_q.transpose(1, 2))
    plug = torch.log1p((d * torch.linalg.solve(cov, d.unsqueeze(-1)).squeeze(-1)).sum(-1))
    assert plug.mean().item() > truth > lb.held_out_estimate.mean().item()
    # KL with a cubic term: held-out overflow gives the valid bound 0, never NaN.
    lk = restricted_lower_bound(xp, xq, "poly3", "kl", generator=g)
    assert bool(torch.isfinite(lk.lower).all())
    assert bool((lk.lower >= 0).all())
    with pytest.raises(ValueError, match="alpha"):
        restricted_lower_bound(xp, xq, "linear", "renyi")


def test_result_type():
    g = torch.Generator().manual_seed(0)
    lb = restricted_lower_bound(torch.randn(50, generator=g, dtype=F64), torch.randn(50, generator=g, dtype=F64),
                                generator=g)
    assert isinstance(lb, RestrictedLowerBound) and lb.lower.shape == ()
