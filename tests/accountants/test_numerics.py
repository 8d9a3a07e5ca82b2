"""Log-space primitives against mpmath (50 digits) and closed forms."""

import math

import mpmath as mp
import pytest
import torch

from accountants import _numerics as nx


@pytest.mark.parametrize("x", [-1e-20, -1e-8, -0.1, -math.log(2), -0.7, -5.0, -50.0, -700.0])
def test_log1mexp_matches_mpmath(x):
    # Source: mpmath log(1 - exp(x)) at 50 digits; rtol 1e-14 (both branches are accurate to a few ulp).
    got = nx.log1mexp(torch.tensor(x, dtype=torch.float64)).item()
    with mp.workdps(50):  # local precision: other test modules change mpmath's global dps
        want = float(mp.log(-mp.expm1(mp.mpf(x))))
    assert got == pytest.approx(want, rel=1e-14)


def test_log1mexp_edges():
    out = nx.log1mexp(torch.tensor([0.0, 0.5], dtype=torch.float64))
    assert out[0] == -math.inf
    assert math.isnan(out[1].item())


@pytest.mark.parametrize("x", [1e-12, 1e-3, 1.0, 29.9, 30.1, 400.0, 1e5])
def test_log_expm1_matches_mpmath(x):
    got = nx.log_expm1(torch.tensor(x, dtype=torch.float64)).item()
    with mp.workdps(50):
        want = float(mp.log(mp.expm1(mp.mpf(x))))
    assert got == pytest.approx(want, rel=1e-14)


def test_log_add_and_sub():
    a = torch.tensor([0.0, -math.inf, 1000.0, -3.0], dtype=torch.float64)
    b = torch.tensor([0.0, -math.inf, 999.0, -math.inf], dtype=torch.float64)
    s = nx.log_add(a, b)
    assert s[0].item() == pytest.approx(math.log(2.0), rel=1e-15)
    assert s[1].item() == -math.inf
    assert s[2].item() == pytest.approx(1000.0 + math.log1p(math.exp(-1.0)), rel=1e-15)
    assert s[3].item() == -3.0
    d = nx.log_sub(torch.tensor([1000.0, 0.0], dtype=torch.float64), torch.tensor([999.0, -40.0], dtype=torch.float64))
    assert d[0].item() == pytest.approx(1000.0 + math.log(-math.expm1(-1.0)), rel=1e-15)
    assert d[1].item() == pytest.approx(math.log1p(-math.exp(-40.0)), rel=1e-14)  # ≈ −4.25e-18
    with pytest.raises(ValueError, match="exceeds"):
        nx.log_sub(torch.tensor([0.0]), torch.tensor([1.0]))


def test_logsumexp_signed():
    # Σ = e^3 − e^2 + e^0: closed form.
    la = torch.tensor([3.0, 2.0, 0.0], dtype=torch.float64)
    sg = torch.tensor([1.0, -1.0, 1.0], dtype=torch.float64)
    v, s = nx.logsumexp_signed(la, sg)
    assert s.item() == 1.0
    assert v.item() == pytest.approx(math.log(math.e**3 - math.e**2 + 1.0), rel=1e-15)
    v, s = nx.logsumexp_signed(torch.tensor([1.0, 1.0]), torch.tensor([1.0, -1.0]))
    assert s.item() == 0.0
    assert v.item() == -math.inf


@pytest.mark.parametrize(("n", "k"), [(5.0, 2), (5.0, 7), (2.5, 1), (2.5, 3), (2.5, 4), (256.5, 300), (1.01, 50)])
def test_log_binom_and_sign_match_mpmath(n, k):
    # Source: mpmath generalised binomial at 50 digits; rtol 1e-12 (lgamma differences).
    with mp.workdps(50):
        want = mp.binomial(mp.mpf(n), k)
        want_log = float(mp.log(abs(want))) if want != 0 else None
    got = nx.log_binom(torch.tensor(n, dtype=torch.float64), torch.tensor(float(k), dtype=torch.float64)).item()
    sign = nx.binom_sign(torch.tensor(n, dtype=torch.float64), torch.tensor(float(k), dtype=torch.float64)).item()
    if want == 0:
        assert got == -math.inf
    else:
        assert got == pytest.approx(want_log, rel=1e-12, abs=1e-12)
        assert sign == (1.0 if want > 0 else -1.0)


def test_dtype_and_device_follow_inputs():
    x = torch.tensor([-0.5], dtype=torch.float32)
    assert nx.log1mexp(x).dtype == torch.float32
    assert nx.as_float(3).dtype == torch.float64
    assert nx.as_float(3, like=x).dtype == torch.float32
