"""Exact Poisson-subsampled Gaussian RDP (Mironov, Talwar, Zhang 2019) against independent oracles."""

import math

import mpmath as mp
import pytest
import torch

from accountants.rdp import rdp_gaussian, rdp_laplace, rdp_poisson_gaussian, rdp_randomized_response
from tests.oracles import reference_records, sgm_rdp_quad, sgm_rdp_series

CURVES = reference_records("poisson_rdp_curve")


@pytest.mark.parametrize(
    "rec", CURVES, ids=lambda r: f"s{r['params']['noise_multiplier']}-q{r['params']['sample_rate']:.3g}"
)
def test_reference_curve_mpmath(rec):
    # Source: tests/data/reference_values.json family poisson_rdp_curve, `rdp_mpmath` (mpmath 1.3.0,
    # 50 digits: binomial series at integer orders, quadrature at fractional ones).
    # rtol 1e-10: our series is certified to 1e-15 of the sum; float64 cancellation in the
    # below-z0 constant terms costs at most ~σ²·1e-16 relative.
    p = rec["params"]
    orders = torch.tensor(p["orders"], dtype=torch.float64)
    got = rdp_poisson_gaussian(orders, p["sample_rate"], p["noise_multiplier"])
    want = torch.tensor(rec["values"]["rdp_mpmath"], dtype=torch.float64)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=0.0)


def test_reference_curve_at_least_as_accurate_as_opacus():
    # Opacus 1.6.0 agrees with mpmath to ≤ 2e-8 per curve (values.json note); our worst error on
    # each curve must be no larger (ours is certified to 1e-11 relative at fractional orders).
    assert CURVES, "values.json not found next to the repository"
    for rec in CURVES:
        p = rec["params"]
        orders = torch.tensor(p["orders"], dtype=torch.float64)
        got = rdp_poisson_gaussian(orders, p["sample_rate"], p["noise_multiplier"])
        exact = torch.tensor(rec["values"]["rdp_mpmath"], dtype=torch.float64)
        opacus = torch.tensor(rec["values"]["rdp_opacus"], dtype=torch.float64)
        ours_err = ((got - exact).abs() / exact).max()
        assert ours_err <= max(((opacus - exact).abs() / exact).max(), 1e-11)


EXTREME = [
    # (alpha, q, sigma): regimes where naive float64 code loses everything or overflows.
    (256.5, 1e-7, 0.3),  # issue 2: huge terms (i²/(2σ²) ~ 3.6e5), tiny q
    (1.5, 1e-7, 1.0),  # A − 1 ~ 1e-14: log(A) would lose all digits
    (1.01, 1e-7, 5.0),  # near-1 order, RDP ~ 2e-16
    (2.5, 0.5, 10.0),  # crossover z0 = 0.5: slowly converging alternating tail
    (1.05, 0.999, 1.0),  # q close to 1
    (64.5, 0.01, 0.1),  # small σ, large fractional order
    (3.5, 1e-9, 50.0),  # large σ, tiny q
    (10.25, 0.2, 0.7),
]


@pytest.mark.slow
@pytest.mark.parametrize(("alpha", "q", "sigma"), EXTREME)
def test_fractional_orders_match_mpmath_quadrature(alpha, q, sigma):
    # Source: mpmath quadrature of the defining integral at 50 digits (tests/oracles.py);
    # rtol 1e-9 covers the quadrature's own accuracy at these points.
    got = rdp_poisson_gaussian(torch.tensor(alpha, dtype=torch.float64), q, sigma).item()
    want = float(sgm_rdp_quad(alpha, q, sigma))
    assert math.isfinite(got)
    assert got == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize(
    ("alpha", "q", "sigma"), [(256, 1e-7, 0.3), (2, 1e-7, 1.0), (1024, 0.01, 2.0), (3, 0.999, 0.5), (40, 1e-5, 20.0)]
)
def test_integer_orders_match_mpmath_series(alpha, q, sigma):
    # Source: mpmath binomial series at 50 digits; rtol 1e-12 (all terms positive: log-sum-exp).
    got = rdp_poisson_gaussian(torch.tensor(float(alpha), dtype=torch.float64), q, sigma).item()
    assert got == pytest.approx(float(sgm_rdp_series(alpha, q, sigma)), rel=1e-12)


def test_q_one_is_the_gaussian_mechanism():
    # Closed form: without subsampling the RDP is α/(2σ²) (Mironov 2017 Prop. 7).
    a = torch.tensor([1.5, 2.0, 7.25, 100.0], dtype=torch.float64)
    torch.testing.assert_close(rdp_poisson_gaussian(a, 1.0, 1.3), a / (2 * 1.3**2), rtol=1e-15, atol=0)


def test_peer_test_anchor_dp_accounting():
    # Source: dp_accounting's own unit test test_compute_rdp_poisson_sampled_gaussian (q=0.01, σ=2.5,
    # 50 steps) in dp_accounting/rdp/rdp_privacy_accountant_test.py (dp-accounting 0.6.0); their rtol is 1e-4.
    orders = torch.tensor([1.5, 2.5, 5.0, 50.0, 100.0], dtype=torch.float64)
    got = 50 * rdp_poisson_gaussian(orders, 0.01, 2.5)
    pinned = torch.tensor(
        [6.70579741e-04, 1.08548710e-03, 2.18075656e-03, 2.38460375e-02, 1.67416308e02], dtype=torch.float64
    )
    torch.testing.assert_close(got[1:], pinned[1:], rtol=1e-4, atol=0)
    # At α = 1.5 dp_accounting's pinned value is 3 % loose (it sums |terms| of the fractional
    # series); the exact value is 6.50071e-4 (mpmath quadrature, 50 digits; Opacus 1.6.0 agrees).
    assert got[0].item() < pinned[0].item()
    assert got[0].item() == pytest.approx(50 * float(sgm_rdp_quad(1.5, 0.01, 2.5)), rel=1e-10)


def test_vectorised_over_configurations_and_orders():
    sig = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)[:, None]
    q = torch.tensor([0.01, 0.1, 0.3], dtype=torch.float64)[:, None]
    orders = torch.tensor([1.5, 2.0, 3.25, 32.0], dtype=torch.float64)
    batch = rdp_poisson_gaussian(orders, q, sig)
    assert batch.shape == (3, 4)
    for i in range(3):
        for j in range(4):
            single = rdp_poisson_gaussian(orders[j], q[i, 0].item(), sig[i, 0].item())
            # Equal up to float rounding (the loop sums the series in blocks of another length).
            assert batch[i, j].item() == pytest.approx(single.item(), rel=1e-14)


def test_dtype_and_device_follow_inputs():
    a = torch.tensor([2.0, 2.5], dtype=torch.float32)
    out = rdp_poisson_gaussian(a, torch.tensor(0.1, dtype=torch.float32), torch.tensor(1.0, dtype=torch.float32))
    assert out.dtype == torch.float32
    assert out.device == a.device


# ------------------------------------------------------------------ base mechanisms


@pytest.mark.parametrize("alpha", [1.5, 2.0, 10.0, 100.5])
@pytest.mark.parametrize("b", [0.5, 1.0, 4.0])
def test_laplace_rdp_matches_mpmath_integral(alpha, b):
    # Source: mpmath quadrature of log ∫ p^α q^{1−α} for Laplace(0,b) vs Laplace(1,b), 40 digits.
    with mp.workdps(40):
        a, bb = mp.mpf(alpha), mp.mpf(b)

        def f(x):
            return mp.e ** (a * (-abs(x - 1) / bb) + (1 - a) * (-abs(x) / bb)) / (2 * bb)

        want = mp.log(mp.quad(f, [-mp.inf, 0, 1, mp.inf])) / (a - 1)
    got = rdp_laplace(torch.tensor(alpha, dtype=torch.float64), b).item()
    assert got == pytest.approx(float(want), rel=1e-12)


@pytest.mark.parametrize("alpha", [1.5, 2.0, 30.0])
@pytest.mark.parametrize("p", [0.51, 0.75, 0.99])
def test_randomized_response_closed_form(alpha, p):
    # Closed form (Mironov 2017 Prop. 5) evaluated in mpmath.
    with mp.workdps(40):
        a, pp = mp.mpf(alpha), mp.mpf(p)
        want = mp.log(pp**a * (1 - pp) ** (1 - a) + (1 - pp) ** a * pp ** (1 - a)) / (a - 1)
    got = rdp_randomized_response(torch.tensor(alpha, dtype=torch.float64), p).item()
    assert got == pytest.approx(float(want), rel=1e-12)


def test_base_mechanisms_limits():
    # Large α → pure ε: Laplace → 1/b, RR → log(p/(1−p)); Gaussian is linear in α.
    big = torch.tensor(1e6, dtype=torch.float64)
    assert rdp_laplace(big, 2.0).item() == pytest.approx(0.5, rel=1e-5)
    assert rdp_randomized_response(big, 0.75).item() == pytest.approx(math.log(3.0), rel=1e-5)
    assert rdp_gaussian(torch.tensor(3.0), 2.0).item() == pytest.approx(3.0 / 8.0)
