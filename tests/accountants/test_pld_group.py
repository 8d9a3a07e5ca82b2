"""PLD accounting for a group of K records under Poisson add/remove (docs/dominating-pairs.md §5a).

Oracles: 1-D quadrature of the pair's Rényi divergence against dpaudit's own exact group RDP
(Schuchardt et al. 2024, arXiv:2403.04867, Thm 4.2; ``accountants.rdp.group``), 1-D quadrature of
the one-step hockey-stick divergence (exact profile at T = 1), and a 2-D quadrature check that a
non-collinear configuration of the K contributions is dominated by the collinear pair.
"""

from __future__ import annotations

import math

import pytest
import torch

import accountants as acc
from accountants.pld import pld_profile
from accountants.pld.discretise import discretise
from accountants.pld.pairs import PoissonGroupAdd, PoissonGroupRemove, PoissonRemove
from accountants.rdp.group import rdp_poisson_gaussian_group_terms

F64 = dict(dtype=torch.float64)


def _grid(k: int, sigma: float, n: int = 40_001) -> torch.Tensor:
    return torch.linspace(-k - 40 * sigma, 2 * k + 40 * sigma, n, **F64)


def _log_pdf(pair, x: torch.Tensor, of: str) -> torch.Tensor:
    comps = pair.p_components() if of == "p" else pair.q_components()
    terms = torch.stack([math.log(w) - 0.5 * ((x - m) / pair.sigma) ** 2 for w, m in comps if w > 0])
    return torch.logsumexp(terms, 0) - math.log(pair.sigma * math.sqrt(2 * math.pi))


def test_loss_inverse_round_trip():
    for pair in (PoissonGroupRemove(0.8, q=0.05, group=8), PoissonGroupAdd(0.8, q=0.05, group=8)):
        x = torch.linspace(-10.0, 20.0, 2001, **F64)
        loss = pair.loss(x)
        torch.testing.assert_close(pair.loss(pair.loss_inverse(loss)), loss, rtol=0, atol=1e-12)
        # The loss is log p/q (checked against the mixture densities).
        torch.testing.assert_close(loss, _log_pdf(pair, x, "p") - _log_pdf(pair, x, "q"), rtol=0, atol=1e-10)


def test_group_of_one_is_the_poisson_pair():
    """K = 1 is the existing Poisson remove pair: same components and loss; composed profiles agree."""
    from accountants.pld.compose import compose

    a, b = PoissonGroupRemove(1.0, q=0.02, group=1), PoissonRemove(1.0, q=0.02, shift=1.0)
    flat = [v for c in a.p_components() for v in c]
    assert flat == pytest.approx([v for c in b.p_components() for v in c], rel=1e-14)
    x = torch.linspace(-8.0, 9.0, 501, **F64)
    torch.testing.assert_close(a.loss(x), b.loss(x), rtol=1e-14, atol=1e-15)
    eps = torch.tensor([0.0, 0.5, 1.0, 2.0], **F64)
    ca, cb = (compose([(discretise(p, 1e-3, 1e-13), 50)], 1e-13) for p in (a, b))
    torch.testing.assert_close(ca.delta_upper(eps), cb.delta_upper(eps), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(("k", "sigma", "q"), [(2, 1.0, 0.1), (4, 2.0, 0.05), (8, 1.5, 0.02)])
def test_pair_has_the_exact_group_rdp(k, sigma, q):
    """D_α of the pair (trapezoid rule, step ≤ σ/40, error ≪ 1e-9) equals Thm 4.2's removal and
    insertion terms as computed by accountants.rdp.group (agrees with mpmath to 1e-12 there)."""
    alpha = torch.tensor([1.5, 2.0, 4.0, 8.0], **F64)
    fwd, rev = rdp_poisson_gaussian_group_terms(alpha, q, sigma, k)
    x = _grid(k, sigma)
    h = float(x[1] - x[0])
    for pair, ref in ((PoissonGroupRemove(sigma, q=q, group=k), fwd), (PoissonGroupAdd(sigma, q=q, group=k), rev)):
        lp, lq = _log_pdf(pair, x, "p"), _log_pdf(pair, x, "q")
        log_psi = torch.logsumexp(alpha[:, None] * lp + (1 - alpha[:, None]) * lq, 1) + math.log(h)
        torch.testing.assert_close(log_psi / (alpha - 1), ref, rtol=1e-7, atol=1e-10)


def _hockey_1d(pair, eps: torch.Tensor) -> torch.Tensor:
    x = _grid(pair.group if hasattr(pair, "group") else 1, pair.sigma, 200_001)
    h = float(x[1] - x[0])
    p, q = _log_pdf(pair, x, "p").exp(), _log_pdf(pair, x, "q").exp()
    return torch.clamp(p[None, :] - torch.exp(eps)[:, None] * q[None, :], min=0).sum(1) * h


def test_one_step_bracket_contains_exact_profile():
    """T = 1, K = 3: the certified bracket contains the pair's own δ(ε) by quadrature."""
    spec = acc.DPSGD(1.0, acc.Poisson(0.2), 1, group_size=3)
    eps = torch.tensor([0.0, 0.3, 1.0, 2.0, 4.0], **F64)
    prof = pld_profile(spec, h=1e-3, delta_error=1e-12)
    pairs = {"remove": PoissonGroupRemove(1.0, q=0.2, group=3), "add": PoissonGroupAdd(1.0, q=0.2, group=3)}
    for name, pair in pairs.items():
        # 1e-8: the trapezoid rule's error at the kink of (p − e^ε q)_+ (the two directions'
        # quadratures of the same H_1 differ by 3e-9); the brackets are ~1e-7 wide here.
        exact = _hockey_1d(pair, eps)
        d = prof.directions[name]
        assert torch.all(d.delta_lower(eps) <= exact + 1e-8)
        assert torch.all(exact <= d.delta_upper(eps) + 1e-8)


@pytest.mark.parametrize("angle", [math.pi / 2, 2 * math.pi / 3])
def test_non_collinear_configuration_is_dominated(angle):
    """K = 2, σ = 0.7, q = 0.3: contributions turning by ``angle`` (path 0 → e₁ → e₁ + (cos, sin))
    give H_γ ≤ the collinear pair's, both ways round, for γ below and above 1 (2-D trapezoid rule,
    801² points; same grid for both, so the comparison is not blurred by quadrature error)."""
    sigma, q, k = 0.7, 0.3, 2
    w = [math.comb(k, j) * q**j * (1 - q) ** (k - j) for j in range(k + 1)]
    g = torch.linspace(-7.0, 9.0, 801, **F64)
    x, y = torch.meshgrid(g, g, indexing="ij")
    dq = torch.exp(-(x**2 + y**2) / (2 * sigma**2)) / (2 * math.pi * sigma**2)
    cell = float(g[1] - g[0]) ** 2

    def ratio(us):
        return sum(
            wj * torch.exp((u[0] * x + u[1] * y - 0.5 * (u[0] ** 2 + u[1] ** 2)) / sigma**2)
            for wj, u in zip(w, us, strict=True)
        )

    r_col = ratio([(0.0, 0.0), (1.0, 0.0), (2.0, 0.0)])
    r_bent = ratio([(0.0, 0.0), (1.0, 0.0), (1.0 + math.cos(angle), math.sin(angle))])
    for gamma in (0.2, 0.6, 1.0, 2.0, 5.0):
        # remove: E_Q(R − γ)_+ ; add: E_Q(1 − γR)_+
        for r_b, r_c in (((r_bent - gamma), (r_col - gamma)), ((1 - gamma * r_bent), (1 - gamma * r_col))):
            assert float((r_b.clamp(min=0) * dq).sum()) <= float((r_c.clamp(min=0) * dq).sum()) + 1e-12 / cell


def test_pld_below_rdp_and_monotone_in_group_size():
    """PLD ε upper ≤ the registered RDP ε (Schuchardt et al. Thm 4.2, tight RDP, then Balle et al.
    2020 conversion) and strictly increasing in K; K = 1 is the usual Poisson value (1.8337)."""
    last = 0.0
    for k in (1, 2, 4):
        spec = acc.DPSGD(1.0, acc.Poisson(0.01), 1000, group_size=k)
        pld = acc.epsilon(spec, 1e-5, method="pld")
        rdp = acc.epsilon(spec, 1e-5, method="rdp")
        assert pld.lower <= pld.value <= rdp.value
        assert pld.lower > last
        last = pld.value
    assert acc.supports(acc.DPSGD(1.0, acc.Poisson(0.01), 10, group_size=64), "pld")
