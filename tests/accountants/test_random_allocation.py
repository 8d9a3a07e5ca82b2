"""Random allocation (balls-in-bins): description, RDP upper bound, certified lower bound, CLI.

Reference values and their sources are written beside each assertion. The "exact" values of the
realised pair (P = (1/t) Σ_j N(e_j, σ²I), Q = N(0, σ²I)) for t = 2 come from tensor Gauss-Hermite
quadrature (``_pair_moment``), accurate to ~1e-9 relative at the orders used (checked against 2x
the nodes below).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import accountants as acc
from accountants.random_allocation import (
    random_allocation_bounds,
    random_allocation_lower_delta,
    random_allocation_lower_epsilon,
)
from accountants.rdp.random_allocation import (
    add_rdp_jensen,
    add_rdp_quadrature,
    epoch_rdp_balls_in_bins,
    remove_rdp_balls_in_bins,
)


def _pair_moment(power: float, sigma: float, t: int, n: int = 160) -> float:
    """E_Q[(avg_j L_j)^power], L_j = exp((x_j − 1/2)/σ²), x ~ N(0, σ²I_t), by tensor Gauss-Hermite."""
    x, w = np.polynomial.hermite_e.hermegauss(n)
    w = w / math.sqrt(2 * math.pi)
    log_l = (x * sigma - 0.5) / sigma**2
    grids = np.stack(np.meshgrid(*([log_l] * t), indexing="ij"))
    weights = np.prod(np.stack(np.meshgrid(*([w] * t), indexing="ij")), axis=0)
    log_avg = np.logaddexp.reduce(grids, axis=0) - math.log(t)
    return float(np.sum(weights * np.exp(power * log_avg)))


def _pair_delta(eps: float, sigma: float) -> float:
    """Exact δ(ε) of one t = 2 epoch, max over both orders, by a fine 2-D trapezoid (rel. error < 1e-4)."""
    g = np.linspace(-9 * sigma, 1 + 9 * sigma, 1801)
    x1, x2 = np.meshgrid(g, g, indexing="ij")
    q = np.exp(-(x1**2 + x2**2) / (2 * sigma**2)) / (2 * math.pi * sigma**2)
    p = 0.5 * q * (np.exp((2 * x1 - 1) / (2 * sigma**2)) + np.exp((2 * x2 - 1) / (2 * sigma**2)))
    h = g[1] - g[0]
    return max(float(np.sum(np.maximum(a - math.exp(eps) * b, 0)) * h * h) for a, b in ((p, q), (q, p)))


def _spec(sigma: float, t: int, steps: int, k: int = 1) -> acc.DPSGD:
    return acc.DPSGD(sigma, acc.RandomAllocation(k, t), steps)


# ----------------------------------------------------------------------------------- description


def test_round_trip_and_words():
    spec = _spec(1.0, 100, 1000)
    assert acc.DPSGD.from_dict(spec.to_dict()) == spec
    assert spec.to_dict()["sampling"] == {"kind": "random_allocation", "k": 1, "steps_per_epoch": 100}
    words = "σ = 1, balls-in-bins: each record in 1 of every 100 steps, 1000 steps, add-remove"
    assert acc.describe.describe(spec) == words
    assert acc.describe.parse_mechanism(
        "dpsgd:noise_multiplier=1,steps=1000,sampling=balls-in-bins,k=1,steps_per_epoch=100") == spec
    assert spec.sample_rate == 0.01


@pytest.mark.parametrize(("k", "t", "name"), [(0, 10, "k"), (11, 10, "k"), (1, 0, "steps_per_epoch"), (1.5, 10, "k")])
def test_bad_input_names_the_parameter(k, t, name):
    with pytest.raises(ValueError, match=name):
        acc.RandomAllocation(k, t)


def test_unsupported_relations():
    with pytest.raises(acc.UnsupportedError, match="replace-one"):
        acc.epsilon(acc.DPSGD(1.0, acc.RandomAllocation(1, 10), 10, "replace-one"), 1e-5)
    with pytest.raises(acc.UnsupportedError, match="group_size=2"):
        acc.epsilon(acc.DPSGD(1.0, acc.RandomAllocation(1, 10), 10, group_size=2), 1e-5)
    assert acc.supports(_spec(1.0, 10, 10), "pld")  # balls-in-bins has a PLD (accountants.pld.random_allocation)
    assert acc.supports(_spec(1.0, 10, 10, k=2), "pld")  # k > 1: reduced to balls-in-bins blocks (issue 27)


# ----------------------------------------------------------------------------------- upper bound


@pytest.mark.parametrize(("k", "t", "steps"), [(5, 5, 20), (1, 1, 20)])
def test_every_step_equals_full_batch_gaussian(k, t, steps):
    # k = t (and k = t = 1): the record is in every step: exactly `steps` Gaussian releases (closed form in RDP).
    ra = acc.epsilon(_spec(1.3, t, steps, k), 1e-5).value
    full = acc.epsilon(acc.DPSGD(1.3, acc.Poisson(1.0), steps), 1e-5).value
    assert ra == pytest.approx(full, rel=1e-9)


@pytest.mark.parametrize(("sigma", "t"), [(0.8, 7), (1.0, 100), (2.0, 1000)])
def test_remove_moments_closed_form(sigma, t):
    # E_Q[(Σ L)^2] = t e^{1/σ²} + t(t−1); E_Q[(Σ L)^3] = t e^{3/σ²} + 3t(t−1) e^{1/σ²} + t(t−1)(t−2)
    # (multinomial expansion, E L^a = e^{a(a−1)/(2σ²)}). Tolerance 1e-9: float64 log-space sums + margin 1e-9.
    m2, m3 = math.exp(1 / sigma**2), math.exp(3 / sigma**2)
    d2 = math.log((t * m2 + t * (t - 1)) / t**2)
    d3 = math.log((t * m3 + 3 * t * (t - 1) * m2 + t * (t - 1) * (t - 2)) / t**3) / 2
    got = remove_rdp_balls_in_bins(torch.tensor([2.0, 3.0], dtype=torch.float64), sigma, t)
    assert got[0].item() == pytest.approx(d2, rel=1e-9)
    assert got[1].item() == pytest.approx(d3, rel=1e-9)


@pytest.mark.parametrize("sigma", [0.7, 1.0, 2.0])
def test_both_directions_bracket_the_exact_pair_t2(sigma):
    # Exact D_α of the t = 2 pair by quadrature: bound ≥ exact (soundness) and ≤ exact·(1 + 1e-4) (tightness).
    orders = [2.0, 3.0, 6.0]
    add = add_rdp_quadrature(torch.tensor(orders, dtype=torch.float64), sigma, 2)
    rem = remove_rdp_balls_in_bins(torch.tensor(orders, dtype=torch.float64), sigma, 2)
    for i, a in enumerate(orders):
        exact_add = math.log(_pair_moment(-(a - 1), sigma, 2)) / (a - 1)
        exact_rem = math.log(_pair_moment(a, sigma, 2)) / (a - 1)
        assert exact_add <= add[i].item() <= exact_add * (1 + 1e-4)
        assert exact_rem * (1 - 1e-9) <= rem[i].item() <= exact_rem * (1 + 1e-6)


def test_add_quadrature_at_t1_is_the_gaussian():
    # t = 1: P = N(1, σ²), Q = N(0, σ²): D_α = α/(2σ²) in both directions (closed form).
    o = torch.tensor([2.0, 4.0, 8.0], dtype=torch.float64)
    got = add_rdp_quadrature(o, 1.5, 1)
    want = o / (2 * 1.5**2)
    assert torch.all(got >= want) and torch.all(got <= want * (1 + 1e-5))


def test_add_direction_brackets_a_monte_carlo_estimate_t50():
    # MC estimate of E_Q[A^{−(α−1)}] at t = 50 (seeded, 40,000 draws, 6 standard errors either side): the bound
    # is above the CI's lower end (sound) and, being near exact, below its upper end (tight). The Jensen bound
    # (α + t − 1)/(2tσ²) is far above at this t.
    g = torch.Generator().manual_seed(7)
    sigma, t = 1.0, 50
    x = torch.randn(40_000, t, generator=g, dtype=torch.float64) * sigma
    log_a = torch.logsumexp((x - 0.5) / sigma**2, dim=1) - math.log(t)
    o = torch.tensor([2.0, 4.0], dtype=torch.float64)
    bound = add_rdp_quadrature(o, sigma, t)
    for i, a in enumerate(o.tolist()):
        v = torch.exp(-(a - 1) * log_a)
        se = (v.std() / math.sqrt(len(v))).item()
        lo, hi = (math.log(v.mean().item() + k * se) / (a - 1) for k in (-6, 6))
        assert lo <= bound[i].item() <= hi
    assert torch.all(add_rdp_jensen(o, sigma, t) > 5 * bound)


def test_bracket_against_exact_one_epoch_t2():
    # One epoch at t = 2, σ = 1: certified lower δ ≤ exact δ (2-D quadrature) ≤ the RDP upper δ.
    spec = _spec(1.0, 2, 2)
    for eps in (0.5, 1.5):
        exact = _pair_delta(eps, 1.0)
        assert random_allocation_lower_delta(spec, eps) <= exact * (1 + 1e-3)
        assert exact <= acc.delta(spec, eps).value


def test_issue_setting_bracket():
    # Issue 27: b = 100, n = 10,000 (t = 100), σ = 1, 1,000 steps, δ = 1e-5. Pinned: this implementation
    # (commit on branch wt-alloc, 2026-11-25): upper 1.97921 (RDP, order 8), lower 1.19319 (h = 2e-3);
    # Poisson q = 0.01 gives 2.10132 with the same RDP accountant. Tolerance 1e-4: the values are deterministic.
    b = random_allocation_bounds(_spec(1.0, 100, 1000), 1e-5, method="rdp")
    assert b.value == pytest.approx(1.97921, abs=1e-4)
    assert b.lower == pytest.approx(1.19319, abs=1e-4)
    poisson = acc.epsilon(acc.DPSGD(1.0, acc.Poisson(0.01), 1000), 1e-5).value
    assert b.lower < b.value < poisson


def test_monotone_in_sigma_and_steps():
    eps_sigma = [acc.epsilon(_spec(s, 20, 60), 1e-5).value for s in (0.8, 1.0, 1.5, 3.0)]
    assert all(a > b for a, b in itertools.pairwise(eps_sigma))
    e = {n: acc.epsilon(_spec(1.0, 20, n), 1e-5).value for n in (1, 20, 21, 40, 41, 200)}
    assert e[1] == e[20] and e[21] == e[40]  # a partial epoch is charged as a whole one (⌈T/t⌉ epochs)
    assert e[20] < e[21] < e[41] < e[200]


def test_epoch_never_above_one_gaussian_step():
    # Joint convexity: one epoch of balls-in-bins is no worse than a single Gaussian release.
    o = torch.tensor([1.5, 2.0, 10.0, 300.0], dtype=torch.float64)
    assert torch.all(epoch_rdp_balls_in_bins(o, 1.0, 50) <= o / 2 * (1 + 1e-8))


def test_k_between_one_and_t_is_amplified_and_says_so():
    # 1 < k < t: blocks of balls-in-bins (tests/accountants/test_random_allocation_k.py checks it against the exact
    # pair); never above plain composition of the 3·2 + min(3, 5) = 9 Gaussian releases, and below it here.
    b = acc.epsilon(_spec(1.0, 10, 25, k=3), 1e-5)
    assert "2×3 + 1×4" in b.theorem and "9 Gaussian releases" in b.theorem
    assert b.value < acc.epsilon(acc.DPSGD(1.0, acc.Poisson(1.0), 9), 1e-5).value


@settings(max_examples=4, deadline=None)
@given(st.floats(0.5, 6.0), st.integers(2, 50))
def test_calibrate_never_overshoots(target, t):
    spec = _spec(1.0, t, 3 * t)
    s = acc.calibrate(spec, target, 1e-5, rtol=1e-3)
    assert acc.epsilon(spec.with_noise(s), 1e-5).value <= target


def test_tradeoff_curve_from_rdp():
    curve = acc.tradeoff_curve(_spec(1.0, 100, 1000), "rdp")
    assert "balls-in-bins" in repr(curve)


# ----------------------------------------------------------------------------------- CLI


def test_cli_random_allocation(capsys):
    from audit.cli import main

    rc = main(["account", "--noise-multiplier", "1", "--steps", "1000", "--sampling", "random-allocation",
               "--batch-size", "100", "--dataset-size", "10000", "--delta", "1e-5", "--method", "rdp"])
    out = capsys.readouterr().out
    assert rc == 0 and "balls-in-bins" in out and "epsilon <= 1.97921" in out and "certified lower 1.19319" in out
    rc = main(["account", "--noise-multiplier", "1", "--steps", "10", "--sampling", "random-allocation",
               "--steps-per-epoch", "5", "--k", "6", "--delta", "1e-5"])
    assert rc == 2 and "--k must be in [1, --steps-per-epoch=5]" in capsys.readouterr().err


# ----------------------------------------------------------------------------------- dp_accounting adapter


def test_dp_accounting_event_reads_as_epochs():
    from accountants.integrations.dp_accounting import from_dp_event

    # RandomAllocationDpEvent (dp_accounting commit 926b243, PR #414): event, num_selected = k, num_steps = t.
    gauss = {"class_name": "GaussianDpEvent", "noise_multiplier": 1.0}
    epoch = {"class_name": "RandomAllocationDpEvent", "event": gauss, "num_selected": 1, "num_steps": 100}
    run = {"class_name": "SelfComposedDpEvent", "event": epoch, "count": 10}
    assert from_dp_event(run) == _spec(1.0, 100, 1000)


def test_dp_accounting_event_written_for_whole_epochs_only():
    pytest.importorskip("dp_accounting")
    from accountants.integrations.dp_accounting import to_dp_event

    with pytest.raises(acc.UnsupportedError, match=r"RandomAllocationDpEvent|whole number of epochs"):
        to_dp_event(_spec(1.0, 100, 150))


# ----------------------------------------------------------------------------------- peer: dp_accounting PR #414

# (σ, t, epochs, δ, peer lower ε, peer upper ε): dp_accounting pld/random_allocation at google/differential-privacy
# commit 926b2439 (PR #414, Feldman & Shenfeld 2026), gaussian_allocation_pld with num_selected = 1,
# value_discretization_interval = 1e-3, IS_DOMINATED (lower) and DOMINATES (upper), get_epsilon_for_delta;
# rounded to 4 decimals (benchmarks/bench_random_allocation_peer.py recomputes them).
PEER_PR414 = [
    (1, 2, 1, 1e-05, 3.6963, 3.6983),
    (0.7, 2, 1, 0.001, 4.2217, 4.2237),
    (2, 2, 3, 1e-05, 2.6305, 2.6365),
    (1, 5, 1, 1e-05, 2.8187, 2.8209),
    (0.7, 5, 3, 0.001, 5.9929, 6.0004),
    (2, 5, 10, 1e-05, 3.1283, 3.1633),
    (1, 10, 1, 1e-05, 2.1878, 2.1905),
    (1, 10, 10, 1e-05, 6.0943, 6.1397),
    (0.7, 10, 3, 0.001, 4.5629, 4.5731),
    (2, 10, 3, 1e-05, 1.1020, 1.1177),
    (1, 20, 5, 1e-05, 2.9814, 3.0093),
    (1.5, 20, 1, 0.001, 0.3750, 0.3813),
    (0.8, 20, 10, 1e-05, 6.7407, 6.7931),
    (1, 50, 1, 1e-05, 0.9698, 0.9753),
    (2, 50, 10, 1e-05, 0.8435, 0.9212),
    (1, 50, 3, 0.001, 0.8366, 0.8594),
    (1, 100, 1, 1e-05, 0.6174, 0.6247),
    (1, 100, 10, 1e-05, 1.6584, 1.7452),
    (2, 100, 3, 1e-05, 0.3009, 0.3270),
    (0.8, 100, 2, 0.001, 0.7751, 0.7912),
    (1, 200, 2, 1e-05, 0.5094, 0.5293),
    (3, 10, 20, 1e-05, 1.8700, 1.9755),
]


def test_upper_above_the_peer_lower_pld():
    # A sound upper bound is above the truth, which is above the peer's dominated (lower) PLD ε: 22 settings.
    for sigma, t, epochs, delta, peer_lower, _ in PEER_PR414:
        assert acc.epsilon(_spec(sigma, t, t * epochs), delta).value >= peer_lower


@pytest.mark.parametrize("i", [0, 1, 3, 6, 9, 21])
def test_certified_lower_below_the_peer_upper_pld(i):
    # The certified lower end is below the truth, which is below the peer's dominating (upper) PLD ε.
    sigma, t, epochs, delta, _, peer_upper = PEER_PR414[i]
    assert random_allocation_lower_epsilon(_spec(sigma, t, t * epochs), delta) <= peer_upper


def test_accountant_state_dict_round_trips_random_allocation():
    """An accountant holding a random-allocation phase saves and reloads (mypy found
    ``state_dict`` reading ``batch_size`` from every non-Poisson, non-shuffle sampling: an
    AttributeError before). Exact equality: the reloaded history is the same description."""
    import json

    a = acc.Accountant(method="rdp")
    a.step(noise_multiplier=1.0, sampling=acc.RandomAllocation(1, 10), steps=10)
    a.step(noise_multiplier=1.0, sampling=acc.Poisson(0.1), steps=5)
    b = acc.Accountant.from_state_dict(json.loads(json.dumps(a.state_dict())))
    assert b.history == a.history
    assert b.epsilon(1e-5) == a.epsilon(1e-5)
