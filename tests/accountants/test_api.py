"""Public API: descriptions, errors that name the parameter, unsupported combinations, the
stateful accountant, and one contract test run on every registered method."""

import doctest
import json
import math

import pytest
import torch

import accountants as acc
from accountants import api


@pytest.mark.parametrize(
    ("build", "name"),
    [
        (lambda: acc.DPSGD(0.0, acc.Poisson(0.1), 10), "noise_multiplier"),
        (lambda: acc.DPSGD(-1.0, acc.Poisson(0.1), 10), "noise_multiplier"),
        (lambda: acc.DPSGD(math.nan, acc.Poisson(0.1), 10), "noise_multiplier"),
        (lambda: acc.DPSGD(1.0, acc.Poisson(0.0), 10), "rate"),
        (lambda: acc.DPSGD(1.0, acc.Poisson(1.5), 10), "rate"),
        (lambda: acc.DPSGD(1.0, acc.Poisson(math.nan), 10), "rate"),
        (lambda: acc.DPSGD(1.0, acc.Poisson(0.1), 0), "steps"),
        (lambda: acc.DPSGD(1.0, acc.Poisson(0.1), 10, group_size=0), "group_size"),
        (lambda: acc.DPSGD(1.0, acc.Poisson(0.1), 10, neighbouring="swap"), "neighbouring"),
        (lambda: acc.FixedSize(0, 10), "batch_size"),
        (lambda: acc.FixedSize(11, 10), "batch_size"),
        (lambda: acc.Gaussian(0.0), "sigma"),
        (lambda: acc.Laplace(-1.0), "b"),
        (lambda: acc.RandomizedResponse(0.4), "p"),
        (lambda: acc.epsilon(acc.DPSGD(1.0, acc.Poisson(0.1), 10), 0.0), "delta"),
        (lambda: acc.epsilon(acc.DPSGD(1.0, acc.Poisson(0.1), 10), 1.0), "delta"),
        (lambda: acc.epsilon(acc.DPSGD(1.0, acc.Poisson(0.1), 10), math.nan), "delta"),
        (lambda: acc.delta(acc.DPSGD(1.0, acc.Poisson(0.1), 10), -1.0), "epsilon"),
        (lambda: acc.rdp_curve(acc.DPSGD(1.0, acc.Poisson(0.1), 10), torch.tensor([0.5, 2.0])), "orders"),
        (lambda: acc.rdp_curve(acc.DPSGD(1.0, acc.Poisson(0.1), 10), torch.tensor([1.0])), "orders"),
        (lambda: acc.epsilon(acc.DPSGD(1.0, acc.Poisson(0.1), 10), 1e-5, method="magic"), "method"),
    ],
)
def test_bad_input_names_the_parameter(build, name):
    with pytest.raises(ValueError, match=name):
        build()


def test_wrong_types():
    with pytest.raises(TypeError, match="sampling"):
        acc.DPSGD(1.0, 0.1, 10)
    with pytest.raises(TypeError, match="noise_multiplier"):
        acc.DPSGD("1.0", acc.Poisson(0.1), 10)
    with pytest.raises(TypeError, match="steps"):
        acc.DPSGD(1.0, acc.Poisson(0.1), 2.5)


def test_descriptions_are_frozen():
    spec = acc.DPSGD(1.0, acc.Poisson(0.1), 10)
    with pytest.raises(AttributeError):
        spec.steps = 3  # type: ignore[misc]


def test_unknown_method_lists_choices():
    with pytest.raises(ValueError, match=r"choose from \[.*'rdp'.*\]"):
        acc.get_method("nope")


def test_unsupported_is_an_error_not_a_number():
    # Combinations without a registered theorem raise a clear error, and supports() agrees.
    assert acc.supports(acc.DPSGD(1.0, acc.Poisson(0.1), 10))
    for bad in [
        acc.DPSGD(1.0, acc.Poisson(0.1), 10, group_size=65),  # group RDP covers K <= 64
        acc.DPSGD(1.0, acc.FixedSize(10, 100), 10, group_size=2),  # no fixed-size group theorem
        acc.DPSGD(1.0, acc.FixedSize(10, 100, replace=True), 10, neighbouring="replace-one"),
    ]:
        assert not acc.supports(bad)
        with pytest.raises(acc.UnsupportedError, match=r"group_size|replace-one"):
            acc.epsilon(bad, 1e-5)


def test_composition_is_additive_and_heterogeneous():
    a = acc.DPSGD(1.0, acc.Poisson(0.01), 300)
    b = acc.DPSGD(0.8, acc.Poisson(0.02), 200)
    both = acc.Composed((a, b))
    orders = torch.tensor([1.5, 2.0, 8.0, 64.0], dtype=torch.float64)
    summed = acc.rdp_curve(a, orders) + acc.rdp_curve(b, orders)
    torch.testing.assert_close(acc.rdp_curve(both, orders), summed, rtol=1e-15, atol=0)
    assert acc.epsilon(both, 1e-5).value > max(acc.epsilon(a, 1e-5).value, acc.epsilon(b, 1e-5).value)
    with pytest.raises(ValueError, match="neighbouring"):
        acc.Composed((a, acc.DPSGD(1.0, acc.Poisson(0.01), 3, neighbouring="replace-one")))


def test_stateful_accountant_matches_pure_functions_and_round_trips():
    acct = acc.RDPAccountant()
    for _ in range(3):
        acct.step(noise_multiplier=1.0, sample_rate=0.01, steps=100)
    acct.step(noise_multiplier=0.8, sampling=acc.Poisson(0.02), steps=50)
    assert len(acct.history) == 2  # run-length encoded
    assert len(acct) == 350
    e1 = acct.epsilon(1e-5)
    e2 = acct.epsilon(1e-5)  # queries have no side effects
    assert e1 == e2
    pure = acc.epsilon(
        acc.Composed((acc.DPSGD(1.0, acc.Poisson(0.01), 300), acc.DPSGD(0.8, acc.Poisson(0.02), 50))), 1e-5
    )
    assert e1.value == pytest.approx(pure.value, rel=1e-15)
    state = json.loads(json.dumps(acct.state_dict()))
    again = acc.Accountant.from_state_dict(state)
    assert again.epsilon(1e-5).value == pytest.approx(e1.value, rel=1e-15)
    with pytest.raises(ValueError, match="exactly one of"):
        acct.step(noise_multiplier=1.0, steps=1)


@pytest.mark.parametrize("method", acc.methods())
def test_accountant_contract(method):
    """Run on every registered method (dp_accounting PrivacyAccountantTest pattern)."""
    m = acc.get_method(method)
    # An empty ledger gives ε = 0.
    assert acc.epsilon(acc.Composed(()), 1e-5, method=method).value == 0.0
    spec = acc.DPSGD(1.0, acc.Poisson(0.01), 500)
    if m.unsupported(spec) is not None:
        pytest.skip(f"{method} does not cover Poisson add/remove")
    e = acc.epsilon(spec, 1e-5, method=method)
    assert e.bound == "upper" and e.method == method and e.value > 0
    # ε → δ round trip. ε_upper(δ) certifies true δ(ε_upper) ≤ δ, so a certified lower bound on
    # δ at ε_upper can never exceed δ. (Two upper bounds computed on different grids may: the
    # RDP method has no lower bound and reuses its grid, so there δ_upper(ε_upper(δ)) ≤ δ holds.)
    d = acc.delta(spec, e.value, method=method)
    assert d.bound == "upper"
    assert (d.lower if d.lower is not None else d.value) <= 1e-5 * (1 + 1e-9)
    # More steps never cost less.
    assert acc.epsilon(spec.with_steps(1000), 1e-5, method=method).value >= e.value
    # supports() does every check epsilon() does.
    big = acc.DPSGD(1.0, acc.Poisson(0.01), 10, group_size=7, neighbouring="replace-one")
    if not acc.supports(big, method):
        with pytest.raises(acc.UnsupportedError):
            acc.epsilon(big, 1e-5, method=method)


def test_doctests():
    res = doctest.testmod(api, optionflags=doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0
