"""Hypothesis battery over the accounting functions (issue 11 §5, §7, §8).

Contract: every call returns a number that is not NaN, or raises the input-error class
(``accountants.InputError``/``InputTypeError``/``UnsupportedError``, i.e. ValueError/TypeError);
upper bounds are never below the exact Gaussian ε at q = 1, and ε never increases with σ.
Example counts are small so that the file runs in well under a minute in CI.
"""

from __future__ import annotations

import math
import warnings

import mpmath
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import accountants as acc
from accountants.api import RdpMethod
from accountants.orders import default_orders

F64 = torch.float64
def CI(n: int):
    return settings(max_examples=n, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck),
                    database=None)
INPUT_ERRORS = (acc.InputError, acc.InputTypeError, acc.UnsupportedError, ValueError, TypeError)


def log_uniform(lo: float, hi: float):
    return st.floats(math.log10(lo), math.log10(hi)).map(lambda e: 10.0**e)


def quiet(fn, *a, **k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*a, **k)


def gdp_eps_mp(mu: float, delta: float) -> float:
    """Exact ε(δ) of μ-GDP (Balle & Wang 2018 Thm 8), bisection in 50-digit mpmath."""
    with mpmath.workdps(50):
        m, d = mpmath.mpf(mu), mpmath.mpf(delta)

        def f(e):
            return mpmath.ncdf(m / 2 - e / m) - mpmath.exp(e) * mpmath.ncdf(-m / 2 - e / m) - d

        if f(mpmath.mpf(0)) <= 0:
            return 0.0
        lo, hi = mpmath.mpf(0), m * m / 2 + 20 * m + 10
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
        return float(lo)


# -------------------------------------------------------------- §8: soundness down to σ = 1e-300


@CI(40)
@given(sigma=log_uniform(1e-300, 1e3), steps=st.integers(1, 10_000), delta=log_uniform(1e-14, 0.5))
def test_rdp_upper_at_least_exact_gaussian(sigma, steps, delta):
    """q = 1: T Gaussian steps are exactly μ-GDP, μ = √T/σ (Dong-Roth-Su 2022 Cor. 3.3)."""
    e = quiet(acc.epsilon, acc.DPSGD(sigma, acc.Poisson(1.0), steps), delta).value
    mu = math.sqrt(steps) / sigma
    if mu <= 1e6:
        assert e >= gdp_eps_mp(mu, delta) * (1 - 1e-12)
    else:
        assert e >= 5e11 * (1 - 1e-9)   # ε(δ) increases with μ; at μ = 1e6 it exceeds 5e11


_FIXED_GRID = RdpMethod(orders=default_orders(), refine=0)


@CI(40)
@given(s1=log_uniform(1e-300, 1e3), ratio=log_uniform(1.0, 1e3), q=log_uniform(1e-7, 1.0),
       steps=st.integers(1, 100_000), delta=log_uniform(1e-14, 0.5))
def test_epsilon_non_increasing_in_sigma(s1, ratio, q, steps, delta):
    s2 = s1 * ratio
    e1 = quiet(_FIXED_GRID.epsilon, acc.DPSGD(s1, acc.Poisson(q), steps), delta).value
    e2 = quiet(_FIXED_GRID.epsilon, acc.DPSGD(s2, acc.Poisson(q), steps), delta).value
    assert not math.isnan(e1) and not math.isnan(e2)
    assert e1 >= e2 * (1 - 1e-12) - 1e-300


# -------------------------------------------------------------- §5: PLD, sound bracket or refusal


@CI(6)
@given(sigma=log_uniform(0.01, 100.0), q=log_uniform(1e-7, 1.0), steps=log_uniform(1.0, 1e6).map(int),
       delta=log_uniform(1e-14, 0.1))
def test_pld_sound_bracket_or_unsupported(sigma, q, steps, delta):
    spec = acc.DPSGD(sigma, acc.Poisson(q), max(1, steps))
    try:
        b = acc.epsilon(spec, delta, method="pld")
    except acc.UnsupportedError as e:
        reason = str(e)
        b = None
    if b is None:
        assert reason.startswith("pld:")   # names the limit that was hit
        return
    r = quiet(acc.epsilon, spec, delta, method="rdp")
    assert not math.isnan(b.value) and not math.isnan(b.lower)
    assert 0.0 <= b.lower <= b.value <= r.value        # a certified lower end is below every upper bound
    assert b.lower <= r.value


# -------------------------------------------------------------- §7: no crash, no NaN, input errors only

ANY_FLOAT = st.one_of(
    st.sampled_from([0.0, -1.0, 1.0, 0.5, 2.0, 1e-300, 1e300, math.inf, -math.inf, math.nan, 5e-324, 1e217]),
    st.floats(allow_nan=True, allow_infinity=True),
)
ANY_INT = st.one_of(st.integers(-3, 50), st.sampled_from([10**6, 2**40, -(2**40)]))


def _no_nan(x) -> None:
    if isinstance(x, torch.Tensor):
        assert not bool(torch.isnan(x).any())
    elif isinstance(x, float):
        assert not math.isnan(x)
    elif isinstance(x, (tuple, list)):
        for y in x:
            _no_nan(y)
    elif hasattr(x, "value"):
        _no_nan(float(x.value))
        if getattr(x, "lower", None) is not None:
            _no_nan(float(x.lower))


def _spec(draw):
    sigma = draw(ANY_FLOAT)
    kind = draw(st.sampled_from(["poisson", "fixed", "fixed-wr"]))
    if kind == "poisson":
        sampling = acc.Poisson(draw(ANY_FLOAT))
    else:
        sampling = acc.FixedSize(draw(ANY_INT), draw(ANY_INT), replace=kind == "fixed-wr")
    return acc.DPSGD(sigma, sampling, draw(ANY_INT), draw(st.sampled_from(["add-remove", "replace-one"])),
                     draw(st.sampled_from([1, 1, 2, 3])))


@st.composite
def calls(draw):
    name = draw(st.sampled_from(["epsilon", "delta", "rdp_curve", "poisson_epsilon", "calibrate",
                                 "fixed_size_step_rdp", "group", "group_baseline"]))
    if name in ("epsilon", "delta", "rdp_curve", "calibrate"):
        spec = _spec(draw)   # may raise an input error already: that is allowed
        if name == "epsilon":
            return lambda: acc.epsilon(spec, draw(ANY_FLOAT), method="rdp")
        if name == "delta":
            return lambda: acc.delta(spec, draw(ANY_FLOAT), method="rdp")
        if name == "rdp_curve":
            orders = torch.tensor([draw(ANY_FLOAT), 2.0], dtype=F64)
            return lambda: acc.rdp_curve(spec, orders)
        target, delta, rtol = draw(ANY_FLOAT), draw(ANY_FLOAT), draw(ANY_FLOAT)
        return lambda: acc.calibrate(spec, target, delta, rtol=rtol)
    if name == "poisson_epsilon":
        s, q, t, d = (torch.tensor([draw(ANY_FLOAT)], dtype=F64) for _ in range(4))
        return lambda: acc.poisson_epsilon(s, q, torch.round(t), d, warn=False)
    a = torch.tensor([draw(ANY_FLOAT), 3.0], dtype=F64)
    s = draw(ANY_FLOAT)
    if name == "fixed_size_step_rdp":
        b, n, rep = draw(ANY_INT), draw(ANY_INT), draw(st.booleans())
        return lambda: acc.fixed_size_step_rdp(a, s, b, n, replace=rep)
    q, k = draw(ANY_FLOAT), draw(st.integers(-1, 5))
    fn = acc.rdp_poisson_gaussian_group if name == "group" else acc.rdp_poisson_gaussian_group_baseline
    return lambda: fn(a, q, s, k)


@CI(150)
@given(st.data())
def test_public_functions_raise_input_errors_only(data):
    try:
        call = data.draw(calls())
        out = quiet(call)
    except INPUT_ERRORS:
        return
    _no_nan(out)


@pytest.mark.parametrize("orders", [[math.inf], [1e217], [1e300, 2.0]])
def test_rdp_curve_huge_orders(orders):
    out = acc.rdp_curve(acc.DPSGD(1.0, acc.Poisson(0.01), 3), torch.tensor(orders, dtype=F64))
    _no_nan(out)


@pytest.mark.parametrize("replace", [False, True])
def test_fixed_size_rdp_at_infinite_order_and_huge_sigma_is_infinite_not_nan(replace):
    """A random Hypothesis run found α = ∞ with σ = 1e300: c·α/σ² read ∞/∞ (σ² overflows) = NaN. The RDP of a
    Gaussian at α = ∞ is ∞ (Mironov 2017, Prop. 7: α/(2σ²) grows without bound in α), at any σ; finite orders
    stay finite (here 0 after underflow: 2·3/1e600)."""
    out = acc.fixed_size_step_rdp(torch.tensor([math.inf, 3.0], dtype=torch.float64), 1e300, 1, 2, replace=replace)
    assert out.rdp[0] == math.inf and out.rdp[1] == 0.0
