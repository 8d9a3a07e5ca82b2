"""Truncated Poisson (issue 27 §2): the label split, the PLD bracket, limits, the peer, describe and CLI.

The exact one-step privacy profiles come from an mpmath oracle: every batch of a small dataset is
enumerated (each subset drawn by Poisson sampling, then every B-subset of a truncated draw), the output
is the 1-D mixture of Gaussians at the batch sums, and δ(ε) = ∫(p − e^ε q)_+ is integrated exactly
between the roots of p − e^ε q (Φ differences at 20 digits).
"""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from fractions import Fraction
from math import comb

import mpmath
import pytest

import accountants as acc
from accountants.pld import pld_delta_bracket, pld_epsilon_bracket
from accountants.truncated_poisson import inclusion_probability, truncation_split

# ----------------------------------------------------------------------------------- mpmath oracle


def _batch_means(others, x, q, b):
    """{batch sum: probability} of a truncated Poisson batch of ``others`` (plus ``x`` unless None)."""
    recs = list(others) + ([] if x is None else [x])
    q = mpmath.mpf(q)
    out: dict = {}
    for mask in itertools.product((0, 1), repeat=len(recs)):
        k = sum(mask)
        pr = q**k * (1 - q) ** (len(recs) - k)
        drawn = [r for r, m in zip(recs, mask, strict=True) if m]
        subs = [drawn] if k <= b else list(itertools.combinations(drawn, b))
        for sub in subs:
            mu = mpmath.mpf(sum(sub))
            out[mu] = out.get(mu, 0) + pr / len(subs)
    return out


def _hockey(p, q, eps, sigma=1.0, grid=600):
    """∫ (p − e^ε q)_+ for 1-D Gaussian mixtures {mean: weight} with a common σ (roots refined)."""
    with mpmath.workdps(20):
        a, s = mpmath.e ** mpmath.mpf(eps), mpmath.mpf(sigma)
        f = lambda t: sum(w * mpmath.npdf(t, m, s) for m, w in p.items()) - a * sum(  # noqa: E731
            w * mpmath.npdf(t, m, s) for m, w in q.items())
        cdf = lambda mix, t: sum(w * mpmath.ncdf(t, m, s) for m, w in mix.items())  # noqa: E731
        means = [*p, *q]
        lo, hi = min(means) - 12 * sigma, max(means) + 12 * sigma
        ts = [lo + (hi - lo) * i / grid for i in range(grid + 1)]
        vals = [f(t) for t in ts]
        cuts = [mpmath.findroot(f, (ts[i], ts[i + 1]), solver="anderson")
                for i in range(grid) if (vals[i] > 0) != (vals[i + 1] > 0)]
        pts = [-mpmath.inf, *cuts, mpmath.inf]
        total = mpmath.mpf(0)
        for left, right in itertools.pairwise(pts):
            mid = left + 1 if right == mpmath.inf else (right - 1 if left == -mpmath.inf else (left + right) / 2)
            if f(mid) > 0:
                total += (cdf(p, right) - cdf(p, left)) - a * (cdf(q, right) - cdf(q, left))
        return float(total)


def _pair_delta(pi, gamma, q, eps, direction):
    """Exact δ(ε) of the labelled dominating pair (docs/dominating-pairs.md §4c), one direction."""
    pois, trunc = ({0: 1 - q, 1: q}, {0: 1}), ({0: 1 - gamma, 2: gamma}, {0: 1})
    if direction == "add":
        pois, trunc = pois[::-1], trunc[::-1]
    return (1 - pi) * _hockey(*pois, eps) + pi * _hockey(*trunc, eps)


# ----------------------------------------------------------------------------------- the split


def _split_by_enumeration(q: Fraction, b: int, m: int) -> tuple[Fraction, Fraction, Fraction]:
    """(π, γ̄, p) by summing over K ~ Bin(m − 1, q) exactly (rationals)."""
    w = [comb(m - 1, k) * q**k * (1 - q) ** (m - 1 - k) for k in range(m)]
    pi = sum(w[b:], Fraction(0))
    inc_trunc = sum((w[k] * q * Fraction(b, k + 1) for k in range(b, m)), Fraction(0))
    gamma = inc_trunc / pi if pi else Fraction(0)
    return pi, gamma, q * (1 - pi) + inc_trunc


@pytest.mark.parametrize(("q", "b", "m"), [(Fraction(1, 2), 2, 5), (Fraction(1, 10), 3, 40), (Fraction(3, 10), 7, 30),
                                     (Fraction(1, 2), 9, 10), (Fraction(1, 2), 10, 10), (Fraction(1), 4, 9)])
def test_split_matches_exact_enumeration(q, b, m):
    # Source: exact rational sums over K ~ Bin(m−1, q); float rounding only (rel. 1e-14), and the
    # rounding directions: γ̄ up, p down.
    s = acc.TruncatedPoisson(float(q), b, m)
    pi, gamma = truncation_split(s, m)
    epi, egamma, ep = _split_by_enumeration(q, b, m)
    assert pi == pytest.approx(float(epi), rel=1e-14, abs=1e-300)
    assert gamma >= float(egamma) and gamma == pytest.approx(float(egamma), rel=1e-14, abs=1e-300)
    p = inclusion_probability(s, m)
    assert p <= float(ep) and p == pytest.approx(float(ep), rel=1e-14)


# ----------------------------------------------------------------------------------- the bracket


CONFIGS = [(0, 0, 0, 0), (-1, -1, -1, -1), (-1, -1, 0, 0), (1, 1, 1, 1), (-0.5, -0.5, -0.5, -0.5), (-1, 1, -1, 1)]


@pytest.mark.parametrize("eps", [0.0, 0.5, 1.0])
def test_one_step_bracket_contains_exact_profiles(eps):
    """n = 5, B = 2, q = 1/2, σ = 1 (truncation in 11/16 of the steps): for 1-D datasets (the record's
    gradient +C, the others' as listed), removal from 5 records and addition to 4 records, both orders:
    exact δ ≤ the labelled pair's exact δ ≤ PLD upper; the largest exact δ ≥ PLD lower."""
    n, b, q = 5, 2, 0.5
    spec = acc.DPSGD(1.0, acc.TruncatedPoisson(q, b, n), 1)
    br = pld_delta_bracket(spec, eps, eps_error=1e-4)
    worst = 0.0
    for m, others_all in ((n, CONFIGS), (n + 1, [(*c, c[0]) for c in CONFIGS[:3]])):
        pi, gamma = truncation_split(spec.sampling, m)
        pair = {d: _pair_delta(pi, gamma, q, eps, d) for d in ("remove", "add")}
        assert max(pair.values()) <= br.upper + 1e-12
        for others in others_all:
            big, small = _batch_means(others, 1, q, b), _batch_means(others, None, q, b)
            for d, (p_, q_) in (("remove", (big, small)), ("add", (small, big))):
                exact = _hockey(p_, q_, eps)
                assert exact <= pair[d] + 1e-12, (m, others, d)
                worst = max(worst, exact)
    assert br.lower <= worst <= br.upper
    assert br.upper - max(_pair_delta(*truncation_split(spec.sampling, m), q, eps, d)
                          for m in (n, n + 1) for d in ("remove", "add")) < 2e-3   # discretisation only


def test_replace_one_bracket_contains_exact_profiles():
    """Replace-one, n = 5, B = 2, q = 1/2: x = +C against x' = −C with four others (1-D), exact δ at ε = 0.5."""
    spec = acc.DPSGD(1.0, acc.TruncatedPoisson(0.5, 2, 5), 1, neighbouring="replace-one")
    br = pld_delta_bracket(spec, 0.5, eps_error=1e-4)
    worst = 0.0
    for others in CONFIGS[:4]:
        worst = max(worst, _hockey(_batch_means(others, 1, 0.5, 2), _batch_means(others, -1, 0.5, 2), 0.5))
    assert br.lower <= worst <= br.upper


# ----------------------------------------------------------------------------------- limits, monotonicity


def test_profile_says_its_lower_end_is_the_pairs():
    """pld_profile's lower ends bound the composed pairs; for truncated Poisson no dataset realises them."""
    from accountants.pld import pld_profile

    assert not pld_profile(acc.DPSGD(1.0, acc.TruncatedPoisson(0.01, 120, 10_000), 10), h=0.01).pair_realised
    assert pld_profile(acc.DPSGD(1.0, acc.Poisson(0.01), 10), h=0.01).pair_realised


def test_no_truncation_is_poisson():
    """B ≥ n: no batch is ever cut, so the pair is the Poisson pair and the bound is Poisson's."""
    tp = pld_epsilon_bracket(acc.DPSGD(1.0, acc.TruncatedPoisson(0.01, 10_001, 10_000), 1000), 1e-5)
    po = pld_epsilon_bracket(acc.DPSGD(1.0, acc.Poisson(0.01), 1000), 1e-5)
    assert tp.upper == po.upper
    assert tp.lower == pytest.approx(po.lower, abs=1e-9)


def test_upper_bound_decreases_with_max_batch_size():
    """Observed on this grid (not a theorem: π falls and γ̄ moves with B): a larger B never raised ε."""
    ups = [pld_epsilon_bracket(acc.DPSGD(1.0, acc.TruncatedPoisson(0.05, b, 1000), 200), 1e-5).upper
           for b in (40, 50, 60, 80)]
    assert all(a >= c - 1e-9 for a, c in itertools.pairwise(ups))
    assert ups[0] > ups[-1] + 0.1


def test_pinned_against_dp_accounting():
    """dp_accounting 0.6.0 (pip), PLDAccountant(ADD_OR_REMOVE_ONE, value_discretization_interval=1e-3),
    SelfComposedDpEvent(TruncatedSubsampledGaussianDpEvent(dataset_size=10000, sampling_probability=0.01,
    truncated_batch_size=B, noise_multiplier=1), 1000).get_epsilon(1e-5): 5.297398671874311 (B = 120),
    10.773192056794018 (B = 100). Its second label uses the replace-one ±2C pair, which dominates the
    add/remove shift-2C pair dpaudit proves, so dpaudit's upper end is below it (plus its 1e-3 grid)."""
    for b, peer in ((120, 5.297398671874311), (100, 10.773192056794018)):
        br = pld_epsilon_bracket(acc.DPSGD(1.0, acc.TruncatedPoisson(0.01, b, 10_000), 1000), 1e-5)
        assert br.lower <= peer
        assert 0.9 * peer <= br.upper <= peer + 0.01, (b, br)


# ----------------------------------------------------------------------------------- API, describe, CLI


def test_rdp_and_pld_answer():
    spec = acc.DPSGD(1.0, acc.TruncatedPoisson(0.01, 120, 10_000), 100)
    with pytest.raises(acc.UnsupportedError, match="truncated-poisson"):
        acc.epsilon(acc.DPSGD(1.0, spec.sampling, 100, neighbouring="replace-one"), 1e-5, method="rdp")
    assert acc.epsilon(spec, 1e-5, method="rdp").value >= acc.epsilon(spec, 1e-5, method="pld").value
    b = acc.epsilon(spec, 1e-5, method="pld")
    assert 0 < b.lower <= b.value and "realised pair" in b.theorem
    with pytest.raises(acc.UnsupportedError, match="group_size"):
        acc.epsilon(acc.DPSGD(1.0, acc.TruncatedPoisson(0.01, 120, 10_000), 100, group_size=2), 1e-5, method="pld")


def test_calibrate_reaches_the_target():
    spec = acc.DPSGD(1.0, acc.TruncatedPoisson(0.01, 120, 10_000), 100)
    sigma = acc.calibrate(spec, target_epsilon=2.0, delta=1e-5, method="pld")
    assert acc.epsilon(spec.with_noise(sigma), 1e-5, method="pld").value <= 2.0 + 1e-9


@pytest.mark.parametrize(("bad", "name"), [(dict(rate=0.0), "rate"), (dict(max_batch_size=0), "max_batch_size"),
                                       (dict(dataset_size=0), "dataset_size")])
def test_validation_names_the_parameter(bad, name):
    kw = dict(rate=0.01, max_batch_size=120, dataset_size=10_000) | bad
    with pytest.raises(ValueError, match=name):
        acc.TruncatedPoisson(**kw)


def test_describe_round_trip():
    spec = acc.DPSGD(1.0, acc.TruncatedPoisson(0.01, 120, 10_000), 1000)
    d = json.loads(json.dumps(spec.to_dict()))
    assert d["sampling"] == {"kind": "truncated_poisson", "rate": 0.01, "max_batch_size": 120, "dataset_size": 10_000}
    assert acc.DPSGD.from_dict(d) == spec
    from accountants import describe
    text = ("dpsgd:noise_multiplier=1,steps=1000,sampling=truncated,sample_rate=0.01,max_batch_size=120,"
            "dataset_size=10000")
    assert describe.parse_mechanism(text) == spec
    assert "at most 120" in describe.describe(spec)


def test_cli(capsys):
    """In process (audit.cli.main), as the subprocess would run it: exit 0 with JSON, exit 2 with one line."""
    from audit.cli import main as cli_main

    def main(argv):
        try:
            return cli_main(argv)
        except SystemExit as e:     # errors leave through sys.exit, as from the shell
            return e.code

    base = ["account", "--noise-multiplier", "1", "--steps", "1000", "--delta", "1e-5", "--dataset-size", "10000",
            "--max-batch-size", "120"]
    assert main([*base, "--sampling", "Truncated-Poisson", "--batch-size", "100", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == "pld" and out["spec"]["sampling"]["kind"] == "truncated_poisson"
    # 5.2974: dp_accounting 0.6.0's PLD ε at this setting (B = 120; the peer test above pins 5.297398671874311);
    # our upper end is tighter (docs/dominating-pairs.md §4c), so the CLI's number must not exceed it
    assert out["lower"] <= out["epsilon"] <= 5.2974 and math.isfinite(out["epsilon"])
    assert main([*base[:-2], "--sampling", "truncated", "--sample-rate", "0.01"]) == 2
    err = capsys.readouterr().err
    assert "--max-batch-size" in err and len(err.strip().splitlines()) == 1
    assert main([*base[:7], "--max-batch-size", "120", "--sampling", "poisson", "--sample-rate", "0.01"]) == 2
    assert "--max-batch-size applies" in capsys.readouterr().err


def test_cli_subprocess():
    """The module entry point itself (one run)."""
    r = subprocess.run([sys.executable, "-m", "audit", "account", "--noise-multiplier", "1", "--steps", "10",
                        "--delta", "1e-5", "--sampling", "truncated-poisson", "--sample-rate", "0.01",
                        "--dataset-size", "1000", "--max-batch-size", "20"], capture_output=True, text=True)
    assert r.returncode == 0 and "truncated Poisson" in r.stdout, r.stderr


def test_tradeoff_curve_is_below_poissons():
    """The truncated run's sound trade-off lower curve lies below Poisson's (its pair dominates Poisson's:
    the cut label only adds a shift-2C part), and it is a real curve (β < 1 − α somewhere)."""
    import torch

    alpha = torch.tensor([0.001, 0.01, 0.1, 0.5])
    t = acc.tradeoff_curve(acc.DPSGD(1.0, acc.TruncatedPoisson(0.01, 120, 10_000), 100), method="pld")(alpha)
    p = acc.tradeoff_curve(acc.DPSGD(1.0, acc.Poisson(0.01), 100), method="pld")(alpha)
    assert bool((t <= p + 1e-12).all()) and bool((t < 1 - alpha).any())


def _renyi(p, q, alpha, sigma=1.0):
    """D_α(P‖Q) of 1-D Gaussian mixtures {mean: weight} by mpmath quadrature (20 digits)."""
    with mpmath.workdps(20):
        s = mpmath.mpf(sigma)
        dens = lambda mix, t: sum(w * mpmath.npdf(t, m, s) for m, w in mix.items())  # noqa: E731
        f = lambda t: dens(p, t) ** alpha * dens(q, t) ** (1 - alpha)  # noqa: E731
        means = [*p, *q]
        pts = [-mpmath.inf, *sorted({float(m) for m in means}), mpmath.inf]
        return float(mpmath.log(mpmath.quad(f, pts)) / (alpha - 1))


@pytest.mark.parametrize("alpha", [2, 4])
def test_rdp_bounds_exact_renyi(alpha):
    """n = 5, B = 2, q = 1/2, σ = 1: the exact D_α of 1-D datasets (both orders, removal from 5 and addition
    to 4 records) is below the one-step RDP bound, and B > n gives the Poisson RDP exactly."""
    import torch

    from accountants.rdp.poisson import rdp_poisson_gaussian
    from accountants.truncated_poisson import rdp_truncated_poisson_gaussian

    s = acc.TruncatedPoisson(0.5, 2, 5)
    bound = float(rdp_truncated_poisson_gaussian(torch.tensor([float(alpha)], dtype=torch.float64), s, 1.0)[0])
    worst = 0.0
    for others in [(0, 0, 0, 0), (-1, -1, -1, -1), (-1, -1, 0, 0), (1, 1, 1, 1), (-1, -1, -1, -1, -1)]:
        big, small = _batch_means(others, 1, 0.5, 2), _batch_means(others, None, 0.5, 2)
        worst = max(worst, _renyi(big, small, alpha), _renyi(small, big, alpha))
    assert worst <= bound
    # the bound is the labelled pair's own Rényi divergence (removal direction, larger m), by quadrature
    pair = []
    for m in (5, 6):
        pi, gamma = truncation_split(s, m)
        e1 = math.exp((alpha - 1) * _renyi({0: 0.5, 1: 0.5}, {0: 1}, alpha))
        e2 = math.exp((alpha - 1) * _renyi({0: 1 - gamma, 2: gamma}, {0: 1}, alpha))
        pair.append(math.log((1 - pi) * e1 + pi * e2) / (alpha - 1))
    assert bound == pytest.approx(max(pair), rel=1e-9)
    a = torch.tensor([float(alpha)], dtype=torch.float64)
    free = rdp_truncated_poisson_gaussian(a, acc.TruncatedPoisson(0.5, 7, 5), 1.0)
    assert torch.equal(free, rdp_poisson_gaussian(a, 0.5, 1.0))


def test_dp_accounting_event_round_trip():
    """TruncatedSubsampledGaussianDpEvent ↔ DPSGD(σ, TruncatedPoisson(q, B, n), T), objects and JSON;
    q = 0 or B = 0 is no release (as dp_accounting 0.6.0's accountant)."""
    dpa = pytest.importorskip("dp_accounting")
    from accountants.integrations import dp_accounting as dpi

    spec = acc.DPSGD(1.0, acc.TruncatedPoisson(0.01, 120, 10_000), 1000)
    event = dpi.to_dp_event(spec)
    assert isinstance(event.event, dpa.dp_event.TruncatedSubsampledGaussianDpEvent)
    assert dpi.from_dp_event(event) == spec
    assert dpi.from_dp_event(json.loads(json.dumps(dpi.event_to_json(event)))) == spec
    none = dpa.dp_event.TruncatedSubsampledGaussianDpEvent(dataset_size=10, sampling_probability=0.0,
                                                           truncated_batch_size=3, noise_multiplier=1.0)
    assert dpi.from_dp_event(none) == acc.Composed(())


def test_stateful_accountant_round_trip():
    """The Opacus-like Accountant records truncated phases and its JSON state round-trips them."""
    from accountants.accountant import Accountant

    a = Accountant("add_remove", 1, "pld")
    a.step(noise_multiplier=1.0, sampling=acc.TruncatedPoisson(0.01, 120, 10_000), steps=50)
    a.step(noise_multiplier=1.0, sample_rate=0.01, steps=50)
    state = json.loads(json.dumps(a.state_dict()))
    b = Accountant.from_state_dict(state)
    assert b.spec() == a.spec()
    assert b.epsilon(1e-5).value == a.epsilon(1e-5).value


def test_full_rate_addition_is_a_replacement():
    """q = 1, B = n = 100: adding a record to 100 of gradient −C·e cuts the batch to 100, so the record
    replaces one with probability 100/101: exactly Poisson(100/101) at σ/2 (both orders). The upper end
    must cover it. Regression: the unsubsampled-Gaussian shortcut used to read only the m = n direction
    (a Gaussian of shift C) and returned 28.37."""
    spec = acc.DPSGD(1.0, acc.TruncatedPoisson(1.0, 100, 100), 20)
    realised = pld_epsilon_bracket(acc.DPSGD(0.5, acc.Poisson(100 / 101), 20), 1e-5)
    assert pld_epsilon_bracket(spec, 1e-5).upper >= realised.lower > 70
    assert acc.epsilon(spec, 1e-5, method="pld").value >= realised.lower
