"""TradeOff curves: closed forms against mpmath values, exact conversions, soundness, properties."""

from __future__ import annotations

import math

import mpmath as mp
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

import accountants as acc
from accountants.orders import default_orders
from accountants.rdp.conversion import eps_from_rdp
from accountants.rdp.mechanisms import rdp_gaussian, rdp_laplace
from accountants.tradeoff import (
    GaussianTradeOff,
    LaplaceTradeOff,
    PiecewiseLinearTradeOff,
    TradeOff,
    lower_convex_hull,
)
from tests.oracles import reference_records

F64 = torch.float64


def t(x):
    return torch.as_tensor(x, dtype=F64)


GRID = torch.cat([t([0.0, 1e-12, 1e-9, 1e-6, 1e-4]), torch.linspace(1e-3, 1.0, 2001, dtype=F64)])


def assert_tradeoff_properties(f: TradeOff, tol: float = 1e-9) -> None:
    """f convex, non-increasing, 0 ≤ f ≤ 1 − α on a grid (Dong et al. 2022 Prop. 2.2)."""
    a = torch.linspace(0.0, 1.0, 4001, dtype=F64)
    b = f(a)
    assert bool((b >= -tol).all())
    assert bool((b <= 1.0 - a + tol).all())
    assert bool((b[1:] - b[:-1] <= tol).all())
    second = b[2:] - 2.0 * b[1:-1] + b[:-2]  # uniform grid: convex ⇔ second differences ≥ 0
    assert float(second.min()) >= -tol


# ------------------------------------------------------------------------------------------------
# μ-GDP closed form
# ------------------------------------------------------------------------------------------------

GAUSS = reference_records("tradeoff_gaussian")


@pytest.mark.parametrize("rec", GAUSS, ids=[f"mu={r['params']['mu']}" for r in GAUSS])
def test_gaussian_reference_values(rec):
    # Source: values.json tradeoff_gaussian (mpmath 1.3.0 at 50 digits). rtol 1e-10 as the README
    # suggests; δ below 1e-15 (tiny tails, float64 limit) is compared with atol 1e-20.
    p, v = rec["params"], rec["values"]
    f = TradeOff.from_gdp(p["mu"])
    torch.testing.assert_close(f(t(p["alphas"])), t(v["beta"]), rtol=1e-10, atol=0.0)
    ref = t(v["delta"])
    got = f.delta(t(p["eps"]))
    torch.testing.assert_close(got, ref, rtol=1e-10, atol=1e-20)
    assert float(f.total_variation()) == pytest.approx(v["tv_delta_at_eps0"], rel=1e-10)
    a_star = v["fixed_point_alpha_star"]
    assert float(f(a_star)) == pytest.approx(a_star, rel=1e-10)
    # Kaissis et al. Lemma 4: R* = R_min(½) = α* for symmetric f.
    assert float(f.bayes_risk(0.5)) == pytest.approx(a_star, rel=1e-10)


def test_gaussian_matches_mpmath_far_tail():
    # Source: mpmath oracle (50 digits) of Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ); rtol 1e-9 (the
    # erfcx difference loses ~|b|/μ ulps). This is where plain float64 Φ(a) − e^ε Φ(b) returns 0.
    f = TradeOff.from_gdp(0.3)
    with mp.workdps(50):
        ref = [
            mp.ncdf(mp.mpf(0.15) - mp.mpf(e) / mp.mpf(0.3)) - mp.e**e * mp.ncdf(-mp.mpf(0.15) - mp.mpf(e) / mp.mpf(0.3))
            for e in (3.0, 6.0)
        ]
    torch.testing.assert_close(f.delta(t([3.0, 6.0])), t([float(x) for x in ref]), rtol=1e-9, atol=0.0)


def test_gaussian_epsilon_round_trip_and_bayes_risk_by_brute_force():
    f = TradeOff.from_gdp(1.3)
    deltas = t([1e-10, 1e-5, 1e-2, 0.2])
    eps = f.epsilon(deltas)
    # δ(ε(δ)) ≤ δ (pessimistic end of the bisection) and equal to rounding.
    assert bool((f.delta(eps) <= deltas).all())
    torch.testing.assert_close(f.delta(eps), deltas, rtol=1e-9, atol=0.0)
    assert float(f.epsilon(0.9)) == 0.0  # δ above TV: ε = 0
    # Independent route to R_min: brute-force min over a dense α grid (Eq. 2) is ≥ R and within 1e-6.
    a = torch.linspace(0.0, 1.0, 200001, dtype=F64)
    fa = f(a)
    for pi in (0.05, 0.3, 0.5, 0.9):
        brute = float((pi * a + (1 - pi) * fa).min())
        r = float(f.bayes_risk(pi))
        assert r <= brute + 1e-15
        assert brute - r < 1e-6


# ------------------------------------------------------------------------------------------------
# Laplace closed form
# ------------------------------------------------------------------------------------------------


def test_laplace_closed_forms_against_paper_listing():
    # Source: Kaissis et al. 2024 App. B.3 listing, f_lap = laplace.cdf(laplace.isf(α) − μ)
    # (scipy), and the closed forms of the Laplace pair at shift η: TV = 1 − e^{−η/2} (∫ |p − q| / 2) and
    # R* = (1 − TV)/2 = e^{−η/2}/2 (the Bayes risk at prior ½ is (1 − TV)/2).
    scipy_stats = pytest.importorskip("scipy.stats")
    for eta in (0.5, 1.0, 2.0):
        f = LaplaceTradeOff(eta)
        a = torch.linspace(0.0, 1.0, 1001, dtype=F64)
        ref = scipy_stats.laplace.cdf(scipy_stats.laplace.isf(a.numpy()) - eta)
        torch.testing.assert_close(f(a), t(ref), rtol=0.0, atol=1e-14)
        assert float(f.bayes_risk(0.5)) == pytest.approx(math.exp(-eta / 2) / 2, rel=1e-14)
        assert float(f.total_variation()) == pytest.approx(1 - math.exp(-eta / 2), rel=1e-14)
        # δ by the conjugate of f on a dense grid (lower estimate) is within 1e-6 of the closed form.
        eps = t([-1.0, 0.0, 0.3, eta / 2])
        conj = (1.0 - f(a)[None, :] - torch.exp(eps)[:, None] * a[None, :]).max(dim=1).values
        torch.testing.assert_close(f.delta(eps), conj, rtol=0.0, atol=2e-3 * math.exp(eta))
        assert bool((f.delta(eps) >= conj - 1e-15).all())


# ------------------------------------------------------------------------------------------------
# Piecewise-linear curves: (ε, δ) pairs, profiles, hulls
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("eps", "delta"), [(0.0, 0.1), (1.0, 0.0), (1.0, 1e-3), (4.0, 1e-5)])
def test_single_pair_is_exact(eps, delta):
    # Source: Dong et al. 2022 Prop. 2.5 (f_{ε,δ}) and its Bayes risk min_α πα + (1 − π) f(α), attained at a
    # kink of f (α = 0, (1 − δ)/(1 + e^ε) or 1 − δ): R_min = (1 − δ) min{π, 1 − π, 1/(1 + e^ε)}; exact in float64.
    f = TradeOff.from_dp_pairs([eps], [delta])
    assert f.bound == "lower"
    a = torch.linspace(0, 1, 1001, dtype=F64)
    ref = torch.clamp(torch.maximum(1 - delta - math.exp(eps) * a, math.exp(-eps) * (1 - delta - a)), min=0)
    torch.testing.assert_close(f(a), ref, rtol=0, atol=1e-14)
    pis = torch.linspace(0, 1, 101, dtype=F64)
    r_ref = (1 - delta) * torch.minimum(torch.minimum(pis, 1 - pis), t(1 / (1 + math.exp(eps))))
    torch.testing.assert_close(f.bayes_risk(pis), r_ref, rtol=0, atol=1e-14)
    assert float(f.delta(eps)) == pytest.approx(delta, abs=1e-14)
    assert float(f.epsilon(max(delta, 1e-300))) == pytest.approx(eps, abs=1e-12)


def test_randomized_response_is_pure_dp_curve():
    # Source: Kairouz et al. 2015: RR(p) has the exact curve f_{ε,0}, ε = log(p/(1−p)).
    f = TradeOff.from_mechanism(acc.RandomizedResponse(0.75))
    assert f.bound == "exact"
    assert float(f(0.25)) == pytest.approx(0.25, abs=1e-15)  # α* = 1/(1 + e^ε) = 1 − p
    assert float(f.epsilon(0.0)) == pytest.approx(math.log(3.0), rel=1e-12)
    assert float(f.epsilon(1e-9)) < math.log(3.0)  # at δ > 0 a pure-DP curve needs slightly less ε


def test_profile_curve_brackets_the_exact_gaussian():
    # Bracket test: the curve from the exact profile on a finite ε grid is a LOWER bound, and the
    # grid loses little (step 1e-3: < 2e-6 in β, measured 4e-7).
    g = TradeOff.from_gdp(1.0)
    grid = torch.linspace(0.0, 12.0, 12001, dtype=F64)
    f = TradeOff.from_privacy_profile(grid, g.delta(grid))
    gap = g(GRID) - f(GRID)
    assert float(gap.min()) >= -1e-12
    assert float(gap.max()) < 2e-6
    assert bool((f.delta(grid) >= g.delta(grid) - 1e-12).all())  # δ of a lower f is an upper δ
    assert float(f.epsilon(1e-5)) >= float(g.epsilon(1e-5)) - 1e-9
    assert f.is_symmetric


def test_one_directional_profile_inverse_and_symmetrisation():
    # An asymmetric curve (one ordering only): f⁻¹ swaps the roles, (f⁻¹)⁻¹ = f, and the
    # symmetrisation lies below both and is symmetric (Dong et al. Prop. F.2).
    eps = torch.linspace(0, 6, 601, dtype=F64)
    delta = torch.clamp(0.3 * torch.exp(-eps), max=1.0)
    f = TradeOff.from_privacy_profile(eps, delta, symmetric=False)
    inv = f.inverse()
    assert not f.is_symmetric
    torch.testing.assert_close(inv.inverse()(GRID), f(GRID), rtol=0, atol=1e-12)
    s = f.symmetrised()
    assert s.is_symmetric
    assert bool((s(GRID) <= torch.minimum(f(GRID), inv(GRID)) + 1e-12).all())
    assert_tradeoff_properties(s)


@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1)), min_size=1, max_size=30))
def test_hull_of_points_is_a_tradeoff_below_every_point(points):
    a = t([p[0] for p in points])
    b = t([p[1] for p in points])
    f = TradeOff.from_points(a, b)
    assert f.bound == "estimate"
    assert_tradeoff_properties(f)
    assert bool((f(a) <= b + 1e-12).all())  # every achieved point is on or above the curve
    assert bool((f(1 - a) <= 1 - b + 1e-12).all())  # and so is every complement


def test_lower_convex_hull_kernel():
    x = t([0.0, 0.5, 0.25, 1.0, 0.5, 0.75])
    y = t([1.0, 0.1, 0.6, 0.0, 0.3, 0.2])
    hx, hy = lower_convex_hull(x, y)
    torch.testing.assert_close(hx, t([0.0, 0.5, 1.0]))
    torch.testing.assert_close(hy, t([1.0, 0.1, 0.0]))


# ------------------------------------------------------------------------------------------------
# RDP → trade-off (all orders)
# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mu", [0.5, 1.0, 3.0])
def test_rdp_curve_is_sound_and_beats_the_single_number_conversion(mu):
    # Soundness: exact G_μ has RDP αμ²/2, so the RDP curve must lie below G_μ (bracket).
    # Tightness: its ε(δ) is within 1e-4 relative of Balle et al. 2020 Thm 21 on the same orders
    # (the finite tangent set costs a few 1e-5; measured 1e-5 at μ = 1, δ = 1e-5).
    orders = default_orders()
    rdp = rdp_gaussian(orders, t(1.0 / mu))
    f = TradeOff.from_rdp(orders, rdp)
    g = TradeOff.from_gdp(mu)
    assert f.bound == "lower"
    assert float((f(GRID) - g(GRID)).max()) <= 1e-12
    assert_tradeoff_properties(f)
    for delta in (1e-3, 1e-5, 1e-8):
        e_curve = float(f.epsilon(delta))
        e_balle = float(eps_from_rdp(rdp, orders, delta, warn=False)[0])
        assert float(g.epsilon(delta)) <= e_curve <= e_balle * (1 + 1e-4)


def test_rdp_curve_of_laplace_is_below_the_exact_curve():
    orders = default_orders()
    f = TradeOff.from_rdp(orders, rdp_laplace(orders, t(1.0)))
    assert float((f(GRID) - LaplaceTradeOff(1.0)(GRID)).max()) <= 1e-12


def test_from_spec_rdp_and_pld_missing(monkeypatch):
    spec = acc.DPSGD(1.0, acc.Poisson(0.01), 100)
    f = acc.tradeoff_curve(spec, method="rdp")
    assert f.bound == "lower"
    assert f.is_symmetric
    assert_tradeoff_properties(f)
    # The curve's ε(δ) is within 1e-4 of the RDP accountant's ε (Balle et al. Thm 21, same orders).
    assert float(f.epsilon(1e-5)) <= acc.epsilon(spec, 1e-5).value * (1 + 1e-4)
    # An installation without PLD has no method "pld" registered (accountants.pld registers it on import, and
    # tradeoff reaches PLD only through the registry): asking for it names the methods there are.
    from accountants import api

    monkeypatch.delitem(api._METHODS, "pld")
    with pytest.raises(acc.InputError, match=r"method must be one of \['rdp'"):
        acc.tradeoff_curve(spec, method="pld")
    with pytest.raises(ValueError, match="method must be one of"):
        acc.tradeoff_curve(spec, method="fdp")


def test_from_spec_pld_is_tighter_than_rdp():
    pytest.importorskip("accountants.pld")
    spec = acc.DPSGD(1.0, acc.Poisson(0.01), 100)
    f_pld = acc.tradeoff_curve(spec, method="pld")
    f_rdp = acc.tradeoff_curve(spec, method="rdp")
    assert f_pld.bound == "lower"
    assert_tradeoff_properties(f_pld)
    assert float((f_rdp(GRID) - f_pld(GRID)).max()) <= 1e-9  # RDP is the looser lower bound
    eps_pld = float(f_pld.epsilon(1e-5))
    bracket = acc.epsilon(spec, 1e-5, method="pld")
    assert bracket.lower - 1e-9 <= eps_pld  # the curve's ε is an upper bound
    assert eps_pld <= float(f_rdp.epsilon(1e-5))


# ------------------------------------------------------------------------------------------------
# Properties and validation
# ------------------------------------------------------------------------------------------------


def test_extreme_parameters_stay_finite():
    # Guards the branch the formula does not take (pytorch#52248 pattern): no NaN at huge η or μ.
    a = t([0.0, 1e-300, 0.1, 0.5, 1.0])
    for f in (LaplaceTradeOff(800.0), GaussianTradeOff(60.0)):
        b = f(a)
        assert bool(torch.isfinite(b).all())
        assert float(b[0]) == 1.0
        assert float(b[-1]) == 0.0
        assert bool(torch.isfinite(f.bayes_risk(t([0.0, 0.3, 1.0]))).all())
        assert bool(torch.isfinite(f.delta(t([-5.0, 0.0, 5.0]))).all())


def test_composed_spec_rdp_curve():
    parts = (acc.DPSGD(1.0, acc.Poisson(0.01), 50), acc.DPSGD(2.0, acc.Poisson(0.02), 50))
    f = acc.tradeoff_curve(acc.Composed(parts), method="rdp")
    assert float(f.epsilon(1e-5)) <= acc.epsilon(acc.Composed(parts), 1e-5).value * (1 + 1e-4)


@given(st.floats(0.05, 6.0))
def test_closed_forms_are_tradeoff_functions(mu):
    assert_tradeoff_properties(GaussianTradeOff(mu))
    assert_tradeoff_properties(LaplaceTradeOff(mu))


@given(st.floats(0.0, 8.0), st.floats(0.0, 0.5), st.floats(0.0, 8.0), st.floats(0.0, 0.5))
def test_dp_pairs_curve_is_a_tradeoff_and_exact_at_each_pair(e1, d1, e2, d2):
    assume(abs(e1 - e2) > 1e-6)
    f = TradeOff.from_dp_pairs([e1, e2], [d1, d2])
    assert_tradeoff_properties(f)
    assert float(f.delta(e1)) <= d1 + 1e-12
    assert float(f.delta(e2)) <= d2 + 1e-12


def test_validation_messages():
    f = TradeOff.from_gdp(1.0)
    with pytest.raises(ValueError, match=r"alpha must be in \[0, 1\]"):
        f(1.5)
    with pytest.raises(ValueError, match=r"pi must be in \[0, 1\]"):
        f.bayes_risk(t([0.2, -0.1]))
    with pytest.raises(ValueError, match="mu must be a finite number > 0"):
        TradeOff.from_gdp(0.0)
    with pytest.raises(TypeError, match="alpha"):
        f(True)
    with pytest.raises(ValueError, match="delta must be >= 1 - exp"):
        TradeOff.from_privacy_profile(t([-1.0]), t([0.1]))
    with pytest.raises(ValueError, match="bound must be one of"):
        PiecewiseLinearTradeOff(t([0.0, 1.0]), t([1.0, 0.0]), bound="upper")
    with pytest.raises(ValueError, match="convex, non-increasing"):
        PiecewiseLinearTradeOff(t([0.0, 0.5, 1.0]), t([1.0, 0.9, 0.0]), bound="exact")  # concave chain
    with pytest.raises(TypeError, match="mechanism must be"):
        TradeOff.from_mechanism("gaussian")  # type: ignore[arg-type]
