"""Shuffled batches (accountants.shuffle): the upper bound is the full-batch Gaussian of ⌈T/⌊n/b⌋⌉ epochs,
the lower bound is certified from Chua et al.'s pair, lower ≤ upper, and the gap to Poisson is real.

Oracles: the Gaussian mechanism's exact privacy profile (Balle & Wang 2018, Thm 8), the single-epoch
"cube" test of Chua et al. (ICML 2024, §4: δ ≥ P(max_t x_t > C) − e^ε Q(max_t x_t > C)), and the exact
δ(ε) of the one-epoch max-statistic pair (:func:`exact_max_delta`), all in mpmath. We could not access
the papers' tables from this machine, so values are pinned against these oracles.
"""

from __future__ import annotations

import itertools
import json
import math

import mpmath as mp
import numpy as np
import pytest

import accountants as acc
from accountants import shuffle as sh
from accountants.results import BracketError
from accountants.shuffle import reduce_shuffle, shuffle_epochs, shuffle_lower_delta, shuffle_lower_epsilon

DELTA = 1e-5


def _gauss_delta(mu: float, eps: float) -> mp.mpf:
    """Exact δ(ε) of N(0,1) vs N(μ,1) (Balle & Wang 2018, Thm 8)."""
    mu, eps = mp.mpf(mu), mp.mpf(eps)
    return mp.ncdf(-eps / mu + mu / 2) - mp.e**eps * mp.ncdf(-eps / mu - mu / 2)


def _gauss_eps(mu: float, delta: float) -> float:
    """ε(δ) of the same pair: bisection on the decreasing δ(ε), 30 digits."""
    mp.mp.dps = 30
    lo, hi = mp.mpf(0), mp.mpf(200)
    for _ in range(120):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _gauss_delta(mu, mid) > delta else (lo, mid)
    return float(hi)


def _cube_delta(sigma: float, batches: int, m1: float, m0: float, eps: float) -> mp.mpf:
    """max over C of P(M > C) − e^ε Q(M > C), M = max_t x_t, P = MoG(m1), Q = MoG(m0) (Chua et al. 2024)."""
    mp.mp.dps = 20
    s = mp.mpf(sigma)

    def out(c, m):
        return 1 - mp.ncdf((c - m) / s) * mp.ncdf(c / s) ** (batches - 1)

    def gap(c):
        return out(c, m1) - mp.e**eps * out(c, m0)

    # a grid of step 0.05 on [-2, 13], then step 0.0005 around the best point: every C gives a valid test
    c0 = max((mp.mpf(-2) + mp.mpf(i) / 20 for i in range(301)), key=gap)
    return max(gap(c0 + mp.mpf(j) / 2000) for j in range(-100, 101))


def max_law(sigma: float, batches: int, m: float, k: int, n: int):
    """(log density, CDF, survival function) of M = max_t x_t over one epoch of L = ``batches`` batches, at
    the current mpmath precision: with probability p = k/n the record sits in a uniform batch J and
    x ~ N(m·e_J, σ²I_L), else x ~ N(0, σ²I_L). F(c) = Φ(z)^{L−1}·[(1−p)Φ(z) + pΦ(z_m)], z = c/σ,
    z_m = (c−m)/σ; its derivative is the density; S = 1 − F is computed from the upper tails
    (−expm1 of (L−1)·log1p(−Φ(−z)) + log1p(−[(1−p)Φ(−z) + pΦ(−z_m)])) so that it keeps its digits when tiny."""
    s, p, L = mp.mpf(sigma), mp.mpf(k) / n, batches

    def logpdf(c):
        z, zm = c / s, (c - m) / s
        a, am = mp.ncdf(z), mp.ncdf(zm)
        b = (1 - p) * a + p * am
        dens = (L - 1) * mp.npdf(z) * a ** (L - 2) * b + a ** (L - 1) * ((1 - p) * mp.npdf(z) + p * mp.npdf(zm))
        return mp.log(dens / s)

    def cdf(c):
        z, zm = c / s, (c - m) / s
        return mp.ncdf(z) ** (L - 1) * ((1 - p) * mp.ncdf(z) + p * mp.ncdf(zm))

    def sf(c):
        if c == mp.inf:
            return mp.mpf(0)
        z, zm = c / s, (c - m) / s
        a, am = mp.ncdf(-z), mp.ncdf(-zm)
        return -mp.expm1((L - 1) * mp.log1p(-a) + mp.log1p(-((1 - p) * a + p * am)))

    return logpdf, cdf, sf


def exact_max_delta(sigma: float, batches: int, m1: float, m0: float, k: int, n: int, eps: float,
                    grid: int = 200) -> mp.mpf:
    """Exact δ(ε) = ∫ (f_P − e^ε f_Q)₊ of one epoch's max statistic, P = law of M with shift m1, Q with m0.

    Recipe (mpmath, 40 digits): the set {f_P > e^ε f_Q} is a union of intervals whose ends are the roots of
    g(c) = log f_P(c) − log f_Q(c) − ε; bracket them by the sign changes of g on ``grid`` + 1 points of
    [−10σ, max(m) + 12σ + (ε + 10)σ²/|m1 − m0|] (beyond either end g keeps its sign: the log-ratio is
    monotone there, like (m1 − m0)c/σ² above and tending to a constant or ±∞ below; m1 < m0 gives Q‖P),
    refine each by Anderson's method, and add (S_P(a) − S_P(b)) − e^ε (S_Q(a) − S_Q(b)) over the intervals.
    A missed or misplaced root can only lower the value (every set gives a valid test); the roots are found
    to ~1e-30, which moves δ by a second-order amount. Checked against the Gaussian closed form (L = 1).
    About 0.5–1 s per call.
    """
    with mp.workdps(40):
        lp, _, sp = max_law(sigma, batches, m1, k, n)
        lq, _, sq = max_law(sigma, batches, m0, k, n)
        e = mp.mpf(eps)

        def g(c):
            return lp(c) - lq(c) - e

        lo = mp.mpf(-10 * sigma)
        hi = mp.mpf(max(m1, m0) + 12 * sigma + (eps + 10) * sigma**2 / abs(m1 - m0))
        cs = [lo + (hi - lo) * i / grid for i in range(grid + 1)]
        vals = [g(c) > 0 for c in cs]
        roots = [mp.findroot(g, (cs[i], cs[i + 1]), solver="anderson") for i in range(grid) if vals[i] != vals[i + 1]]
        ends = ([-mp.inf] if vals[0] else []) + roots + ([mp.inf] if vals[-1] else [])
        total = mp.mpf(0)
        for a, b in zip(ends[::2], ends[1::2], strict=True):
            sa_p, sa_q = (mp.mpf(1), mp.mpf(1)) if a == -mp.inf else (sp(a), sq(a))
            total += (sa_p - sp(b)) - mp.e**e * (sa_q - sq(b))
        return total


def test_exact_max_delta_oracle_is_the_gaussian_for_one_batch():
    """L = 1 and p = 1: M is N(m, σ²), so the oracle must equal Balle & Wang's closed form (to 1e-12: μ enters
    the closed form as a float, rounded at 1e-16 and amplified by ε·μ-sized derivatives)."""
    for sigma, m0, eps in ((0.7, 0.0, 1.0), (0.3, 1.0, 10.0)):
        with mp.workdps(40):
            closed = _gauss_delta((2.0 - m0) / sigma, eps)
        assert float(abs(exact_max_delta(sigma, 1, 2.0, m0, 10, 10, eps) / closed - 1)) < 1e-12


def test_shuffle_description_round_trips():
    s = acc.Shuffle(64, 1000)
    assert s.steps_per_epoch == 15 and s.rate == 0.064
    spec = acc.DPSGD(1.1, s, 100, "replace-one")
    assert spec.to_dict()["sampling"] == {"kind": "shuffle", "batch_size": 64, "dataset_size": 1000}
    assert acc.DPSGD.from_dict(spec.to_dict()) == spec and acc.Shuffle.from_dict(s.to_dict()) == s
    assert acc.describe.make_sampling("shuffled", batch_size=64, dataset_size=1000) == s
    parsed = acc.describe.parse_mechanism("dpsgd:noise_multiplier=1.1,steps=100,sampling=shuffle,batch_size=64,"
                                          "dataset_size=1000,neighbouring=replace_one")
    assert parsed == spec
    assert "shuffled batches of 64 of 1000" in acc.describe.describe(spec)
    with pytest.raises(acc.InputError, match="batch_size must be in"):
        acc.Shuffle(11, 10)
    with pytest.raises(acc.InputError, match="sample_rate does not apply"):
        acc.describe.make_sampling("shuffle", batch_size=1, dataset_size=2, sample_rate=0.5)


@pytest.mark.parametrize(("b", "n", "steps", "epochs"), [(100, 1000, 10, 1), (100, 1000, 25, 3), (100, 1005, 30, 3),
                                                          (1000, 1000, 4, 4), (7, 100, 1, 1)])
def test_upper_bound_is_the_full_batch_gaussian_of_the_epochs(b, n, steps, epochs):
    spec = acc.DPSGD(1.3, acc.Shuffle(b, n), steps)
    assert shuffle_epochs(spec) == epochs
    assert reduce_shuffle(spec) == acc.DPSGD(1.3, acc.Poisson(1.0), epochs)
    rdp = acc.epsilon(spec, DELTA)
    assert rdp.value == acc.epsilon(acc.DPSGD(1.3, acc.Poisson(1.0), epochs), DELTA).value
    assert "no amplification" in rdp.theorem


@pytest.mark.parametrize(("relation", "shift"), [("add_remove", 1.0), ("replace_one", 2.0)])
def test_upper_bound_brackets_the_closed_form_gaussian(relation, shift):
    """k epochs of sensitivity Δ: N(0,1) vs N(Δ√k/σ, 1) exactly; the PLD bracket contains it, RDP is above."""
    spec = acc.DPSGD(2.0, acc.Shuffle(50, 1000), 60, relation)  # 20 steps per epoch: 3 epochs
    exact = _gauss_eps(shift * math.sqrt(3) / 2.0, DELTA)  # mpmath oracle
    pld = acc.epsilon(spec, DELTA, method="pld")
    assert pld.lower <= exact <= pld.value
    assert acc.epsilon(spec, DELTA).value >= exact


def test_lower_bound_is_exact_for_one_batch_per_epoch():
    """b = n: every step uses everyone, the pair is Gaussian with shift 1 per epoch: lower ≈ exact ≤ upper."""
    spec = acc.DPSGD(1.0, acc.Shuffle(100, 100), 3)
    exact = _gauss_eps(math.sqrt(3), DELTA)  # closed form, mpmath
    lower = shuffle_lower_epsilon(spec, DELTA)
    assert exact - 0.02 <= lower <= exact  # the loss rounding costs ≤ h per epoch (h = 2e-3) plus bisection
    assert lower <= acc.epsilon(spec, DELTA, method="pld").lower


@pytest.mark.parametrize(("sigma", "batches", "m0"), [(1.0, 10, 1.0), (0.7, 4, 0.0), (2.0, 20, 1.0)])
def test_single_epoch_lower_delta_against_the_cube_oracle(sigma, batches, m0):
    """Ours is a post-processing of the same pair binned more finely than one threshold: ≥ the cube test at
    ε + h (its loss is rounded down by ≤ h), and ≤ the Gaussian upper bound's δ."""
    relation = "add_remove" if m0 == 1.0 else "replace_one"
    spec = acc.DPSGD(sigma, acc.Shuffle(10, 10 * batches), batches, relation)
    h = 2e-3
    for eps in (0.5, 2.0):
        ours = shuffle_lower_delta(spec, eps, h=h)
        cube = _cube_delta(sigma, batches, 2.0, m0, eps + h + 1e-6)
        assert ours >= float(cube) * (1 - 1e-6) - 1e-12, (eps, ours, cube)
        assert ours <= float(_gauss_delta((2.0 - m0) / sigma, eps)) * (1 + 1e-9)


# Pinned (mpmath cube oracle above, σ = 1, 10 batches, one epoch, add/remove, δ = 1e-5): the cube test's
# ε, i.e. the largest ε with max_C [P(M > C) − e^ε Q(M > C)] > δ, lies in [4.3434, 4.3435]; ours must reach
# it up to the loss lattice h = 2e-3 and the bisection (1e-4 relative), and stay below the exact
# Gaussian ε(μ = 1) = 4.377178 (mpmath).
CUBE_EPS_SIGMA1_L10 = (4.3434, 4.3435)
GAUSS_EPS_MU1 = 4.377178


def test_lower_bound_pinned_single_epoch():
    spec = acc.DPSGD(1.0, acc.Shuffle(100, 1000), 10)
    assert float(_cube_delta(1.0, 10, 2.0, 1.0, CUBE_EPS_SIGMA1_L10[0])) > DELTA
    assert float(_cube_delta(1.0, 10, 2.0, 1.0, CUBE_EPS_SIGMA1_L10[1])) <= DELTA
    assert _gauss_eps(1.0, DELTA) == pytest.approx(GAUSS_EPS_MU1, abs=1e-6)
    lower = shuffle_lower_epsilon(spec, DELTA)
    assert CUBE_EPS_SIGMA1_L10[0] - 2e-3 - 5e-4 <= lower <= GAUSS_EPS_MU1


@pytest.mark.parametrize("relation", ["add_remove", "replace_one"])
def test_lower_at_most_upper_over_a_grid(relation):
    for sigma in (0.6, 1.0, 2.5):
        for b, n, steps in ((10, 40, 4), (10, 40, 10), (5, 100, 45)):
            spec = acc.DPSGD(sigma, acc.Shuffle(b, n), steps, relation)
            lower = shuffle_lower_epsilon(spec, DELTA, h=1e-2)
            upper = acc.epsilon(spec, DELTA, method="pld")
            assert 0 <= lower <= upper.value, (sigma, b, n, steps, lower, upper.value)
            assert lower <= acc.epsilon(spec, DELTA).value


def test_shuffle_is_far_from_poisson():
    """σ = 1, b/n = 0.1, 3 epochs: the certified shuffle ε exceeds the Poisson ε a user would quote."""
    bounds = acc.shuffle_bounds(acc.DPSGD(1.0, acc.Shuffle(100, 1000), 30), DELTA)
    assert bounds.poisson.value < 4.2 < 7.8 < bounds.lower <= bounds.upper.value
    with pytest.raises(acc.UnsupportedError, match="group_size"):
        shuffle_lower_epsilon(acc.DPSGD(1.0, acc.Shuffle(10, 100), 10, group_size=2), DELTA)
    with pytest.raises(acc.UnsupportedError, match="every phase"):
        shuffle_lower_epsilon(acc.Composed((acc.DPSGD(1.0, acc.Shuffle(10, 100), 10),
                                            acc.DPSGD(1.0, acc.Poisson(0.1), 10))), DELTA)


def test_cli_account_shuffle_prints_both_bounds_and_poisson(capsys):
    from audit.cli import main

    argv = ["account", "--sampling", "shuffle", "--batch-size", "100", "--dataset-size", "1000", "--steps", "30",
            "--noise-multiplier", "1", "--delta", "1e-5"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "certified lower bound" in out and "upper bound: 3 epochs" in out and "NOT a bound" in out
    assert main([*argv, "--method", "pld", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["lower"] <= d["methods"]["pld"]["upper"]["epsilon"] and d["methods"]["pld"]["poisson"]["epsilon"] < 4.2
    argv[-2:] = ["--epsilon", "5", "--method", "pld", "--json"]
    assert main(argv) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["methods"]["pld"]["poisson"]["delta"] < 1e-5 < d["lower"] <= d["methods"]["pld"]["upper"]["delta"]
    assert main(["account", "--sampling", "shuffle", "--batch-size", "100", "--steps", "3", "--noise-multiplier",
                 "1", "--delta", "1e-5"]) == 2
    assert "--dataset-size" in capsys.readouterr().err


def test_docs_shuffle_recipe_runs_as_written():
    import pathlib
    import re

    text = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "shuffle.md").read_text()
    (block,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    scope: dict = {}
    exec(compile(block, "docs/shuffle.md", "exec"), scope)
    b = scope["b"]
    assert b.poisson.value < b.lower <= b.upper.value


def test_every_entry_point_accounts_shuffle_soundly_or_refuses():
    """calibrate, the stateful accountant and the PLD internals never treat Shuffle as fixed-size sampling
    (which would claim amplification): RDP shares the upper bound per step, PLD refuses per-step use
    (calibrate with PLD: test_pld_calibrate_shuffle_matches_the_gaussian_closed_form)."""
    spec = acc.DPSGD(1.0, acc.Shuffle(10, 100), 25)  # 3 epochs
    sigma = acc.calibrate(spec, target_epsilon=2.0, delta=DELTA)
    assert acc.epsilon(spec.with_noise(sigma), DELTA).value <= 2.0
    assert acc.epsilon(acc.DPSGD(sigma, acc.Poisson(1.0), 3), DELTA).value <= 2.0 * (1 + 1e-9)
    with pytest.raises(acc.UnsupportedError, match="Shuffle"):
        acc.pld_epsilon_bracket(spec, DELTA)
    a = acc.RDPAccountant()
    for _ in range(25):
        a.step(noise_multiplier=1.0, sampling=acc.Shuffle(10, 100))
    assert a.epsilon(DELTA).value == pytest.approx(acc.epsilon(spec, DELTA).value, rel=1e-9)
    assert a.epsilon(DELTA).value >= acc.epsilon(spec, DELTA).value * (1 - 1e-12)
    b = acc.Accountant.from_state_dict(a.state_dict())
    assert b.history == a.history


def test_pld_calibrate_shuffle_matches_the_gaussian_closed_form():
    """PLD calibrate of a shuffled run: the σ* at which 3 full-batch Gaussian epochs (μ-GDP with μ = √3/σ,
    Dong-Roth-Su 2022 Cor. 2.13: δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)) have ε = 2 at δ = 1e-5, from
    the closed form by scipy brentq to 1e-12. Never overshoots (σ ≥ σ*, ε(σ) ≤ 2) and is within 1e-3 of σ*
    (rtol 1e-4 of the bracket plus the PLD discretisation)."""
    from scipy.optimize import brentq
    from scipy.stats import norm

    spec = acc.DPSGD(1.0, acc.Shuffle(10, 100), 25)  # ⌈25/10⌉ = 3 epochs

    def gdp_delta(sigma):
        mu = math.sqrt(3) / sigma
        return norm.cdf(-2.0 / mu + mu / 2) - math.exp(2.0) * norm.cdf(-2.0 / mu - mu / 2)

    exact = brentq(lambda s: gdp_delta(s) - DELTA, 0.5, 20.0, xtol=1e-12)
    sigma = acc.calibrate(spec, target_epsilon=2.0, delta=DELTA, method="pld")
    assert acc.epsilon(spec.with_noise(sigma), DELTA, method="pld").value <= 2.0
    assert exact * (1 - 1e-9) <= sigma <= exact * (1 + 1e-3), (sigma, exact)


@pytest.mark.parametrize(("sigma", "b", "n", "steps", "peer"), [
    (0.8, 5, 500, 200, 8.0818), (1.0, 10, 1000, 100, 4.0626), (1.0, 10, 1000, 500, 7.0853), (2.0, 10, 100, 30, 2.1392),
])
def test_lower_bound_matches_the_authors_accountant(sigma, b, n, steps, peer):
    """ε at δ = 1e-5 of Chua et al.'s ShuffleAccountant (google-research dpsgd_batch_sampler_accounting,
    dpsgd_bounds.py, lower-bound branch: MoG(2) vs MoG(1) sliced on max_t x_t, epochs composed by
    dp_accounting 0.6's PLD at discretisation 1e-3), measured once on this machine by running that
    algorithm beside ours (its code is not part of this repository). Ours is certified (every loss and
    mass rounded down), so it must not exceed the peer's value by more than the peer's own
    discretisation (1e-3 per epoch), and it stays within 0.01 below it."""
    ours = shuffle_lower_epsilon(acc.DPSGD(sigma, acc.Shuffle(b, n), steps), DELTA)
    assert peer - 0.01 <= ours <= peer + 1e-3 * math.ceil(steps / (n // b)), (ours, peer)


# ----------------------------------------------------------------- issue 22 §1: a certified lower end holds


def test_scipy_normal_cdf_meets_the_error_model():
    """The float64 bin masses assume (accountants.shuffle._phi_err) that scipy's ndtr(z) (z ≤ 0, value above
    1e-300) and log_ndtr(z) (value below −1e-300) are within 2e-14 + 4u·z² relative of Φ at the float
    argument (u = 2^-53; the z² is exp(−z²/2) amplifying rounding inside erfc). Checked against mpmath
    (40 digits) at 601 points."""
    from scipy import special

    u = 2.0**-53
    with mp.workdps(40):
        for z in [-38 + 76 * i / 600 for i in range(601)]:
            bound = 2e-14 + 4 * u * z * z
            t = mp.ncdf(z)
            if z <= 0 and t > 1e-300:
                assert abs(special.ndtr(z) / t - 1) <= bound, z
            log_t = mp.log(t) if z <= 0 else mp.log1p(-mp.ncdf(-z))
            if abs(log_t) > 1e-300:  # beyond z ≈ 37.5, log Φ(z) underflows (the code then uses ndtr(−z))
                assert abs(special.log_ndtr(z) / log_t - 1) <= bound, z


LAWS = [(0.3, 17, 2.0, 51, 53), (0.3, 17, 1.0, 51, 53), (0.548, 17, 0.0, 51, 53), (0.3, 17, 2.0, 51, 51),
        (0.308, 75, 2.0, 1200, 1214), (1.0, 1, 2.0, 3, 53), (2.0, 100, 1.0, 1000, 1000)]


def _oracle_masses(edges: np.ndarray, law: tuple) -> list[mp.mpf]:
    """Masses of (−∞, e₀], …, (e_last, ∞) from :func:`max_law` at 60 digits: F differences where F ≤ 1/2,
    S differences above (each side keeps its digits there)."""
    with mp.workdps(60):
        _, cdf, sf = max_law(*law)
        bounds = [-mp.inf, *map(mp.mpf, edges), mp.inf]
        out = []
        for a, b in itertools.pairwise(bounds):
            fb = mp.mpf(1) if b == mp.inf else cdf(b)
            if fb <= 0.5:
                out.append(fb - (0 if a == -mp.inf else cdf(a)))
            else:
                out.append((1 if a == -mp.inf else sf(a)) - sf(b))
        return out


@pytest.mark.parametrize("law", LAWS)
@pytest.mark.parametrize("force_mpmath", [False, True])
def test_certified_bin_masses_are_within_their_bound(law, force_mpmath, monkeypatch):
    """Every kept bin mass m̂ with relative bound R satisfies |m̂/m − 1| ≤ R against the mpmath oracle,
    deep into both tails (down to ~1e-280), where the float masses were up to 870× off (issue 22).
    ``force_mpmath`` sets R_MAX below every float bound, so the mpmath fallback computes every bin."""
    if force_mpmath:
        monkeypatch.setattr(sh, "R_MAX", 1e-15)
    sigma, _, m, _, _ = law
    edges = np.linspace(-6 * sigma, m + 14 * sigma, 41)
    mass, rel = sh._certify(edges, sh._MaxLaw(*law))
    exact = _oracle_masses(edges, law)
    kept = 0
    for i, (got, r, ex) in enumerate(zip(mass, rel, exact, strict=True)):
        if got > 0:
            kept += 1
            assert r <= sh.R_MAX and abs(got / ex - 1) <= r, (i, got, float(ex), r)
        else:
            assert ex < 1e-270, (i, float(ex))  # only bins near float64's underflow may be dropped
    assert kept >= 30


def _exact_max_pairs(spec: acc.DPSGD, eps: float, delta: float | None = None) -> float:
    """max over Chua et al.'s pairs and both orders of the exact one-epoch max-statistic δ(ε) (mpmath); with
    ``delta``, stops at the first one above it (enough to show that a lower δ, or the ε read from it, holds)."""
    s = spec.sampling
    batches = min(spec.steps, s.steps_per_epoch)
    pairs = sh._PAIRS[spec.neighbouring]
    best = 0.0
    for m1, m0 in [*pairs, *((b, a) for a, b in pairs)]:
        best = max(best, float(exact_max_delta(spec.noise_multiplier, batches, m1, m0, batches * s.batch_size,
                                               s.dataset_size, eps)))
        if delta is not None and best > delta:
            break
    return best


# The issue's three configurations (one epoch each): the CLI case that printed "certified lower ε ≥ 50.07"
# beside "ε ≤ 20.78" (σ = 0.3, b = 3, n = 53, T = 17, δ = 1e-6), replace-one σ = 0.548 on the same
# sampler, and add/remove σ = 0.308, b = 16, n = 1214 (75 steps per epoch).
ISSUE_CASES = [(0.3, 3, 53, 17, "add_remove"), (0.548, 3, 53, 17, "replace_one"), (0.308, 16, 1214, 75, "add_remove")]


@pytest.mark.parametrize(("sigma", "b", "n", "steps", "relation"), ISSUE_CASES)
def test_issue_cases_bracket_the_exact_max_statistic(sigma, b, n, steps, relation):
    """lower ≤ exact ≤ upper at δ = 1e-6, ε read through δ: the exact δ of the max statistic (mpmath,
    best pair and order) is above 1e-6 at the certified lower ε (so the exact ε is above it) and at most 1e-6
    at the PLD upper ε; the certified lower δ is at most the exact δ at ε = 20.505 (the issue's certificate
    for the replace-one case) and at ε = 50.07 (the value printed before the fix)."""
    delta = 1e-6
    spec = acc.DPSGD(sigma, acc.Shuffle(b, n), steps, relation)
    lower = shuffle_lower_epsilon(spec, delta)
    upper = acc.epsilon(spec, delta, method="pld").value
    assert 0 < lower <= upper <= acc.epsilon(spec, delta).value
    assert _exact_max_pairs(spec, lower, delta) > delta
    assert _exact_max_pairs(spec, upper) <= delta
    for eps in (20.505, 50.07):
        ours = shuffle_lower_delta(spec, eps)
        assert ours <= _exact_max_pairs(spec, eps, ours)


def test_cli_case_of_the_issue_prints_a_lower_end_below_the_upper(capsys):
    """The command of issue 22 printed 50.07 beside 20.78: now the lower end is within 0.03 below the upper
    (the pair is nearly the whole mechanism at one epoch; exact max-statistic ε ≈ 20.755, mpmath above)."""
    from audit.cli import main

    argv = ["account", "--sampling", "shuffle", "--noise-multiplier", "0.3", "--batch-size", "3",
            "--dataset-size", "53", "--steps", "17", "--delta", "1e-6", "--method", "pld", "--json"]
    assert main(argv) == 0
    d = json.loads(capsys.readouterr().out)
    upper = d["methods"]["pld"]["upper"]["epsilon"]
    assert upper - 0.05 <= d["lower"] <= upper


def _random_configs(count: int, seed: int) -> list[tuple[float, int, int, int, float, str]]:
    """Seeded (σ, b, n, T, δ, relation): σ log-uniform in [0.3, 3], b in 1..32, L = ⌊n/b⌋ in 1..60, n mod b
    ≠ 0 for even indices and = 0 for odd ones, T up to two epochs, δ log-uniform in [1e-8, 1e-3]."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        sigma = float(np.exp(rng.uniform(math.log(0.3), math.log(3.0))))
        b = int(rng.integers(1, 33)) if i % 2 else int(rng.integers(2, 33))
        batches = int(rng.integers(1, 61))
        n = b * batches + (int(rng.integers(1, b)) if i % 2 == 0 else 0)
        steps = int(rng.integers(1, 2 * batches + 1))
        delta = float(10 ** rng.uniform(-8, -3))
        out.append((sigma, b, n, steps, delta, ("add_remove", "replace_one")[int(rng.integers(2))]))
    return out


def test_seeded_scan_lower_never_above_the_proven_upper():
    """40 seeded configurations, half with n mod b ≠ 0 and many with a partial last epoch (both make the
    record's epoch probability p < 1, where issue 22 found lower ends above the upper; before the fix this
    scan failed at its 22nd configuration, 35.10 against 16.49): lower ε ≤ the PLD and the RDP upper ε.
    h = 5e-3 keeps it fast (any lattice spacing gives a certified lower bound)."""
    for sigma, b, n, steps, delta, relation in _random_configs(40, seed=22):
        spec = acc.DPSGD(sigma, acc.Shuffle(b, n), steps, relation)
        lower = shuffle_lower_epsilon(spec, delta, h=5e-3)
        assert lower <= acc.epsilon(spec, delta, method="pld").value, (sigma, b, n, steps, delta, relation, lower)
        assert lower <= acc.epsilon(spec, delta).value


def test_a_lower_end_above_the_upper_is_an_internal_error(monkeypatch, capsys):
    """Every EpsilonBound/DeltaBound checks lower ≤ value at construction (results.check_bracket), and so does
    ShuffleBounds: a lower end above the upper raises BracketError (an AssertionError: a bug, CLI exit 3),
    never a printed number."""
    with pytest.raises(BracketError, match="lower epsilon"):
        acc.EpsilonBound(1.0, 1e-5, method="pld", lower=1.5)
    with pytest.raises(BracketError, match="lower delta"):
        acc.DeltaBound(1e-6, 1.0, method="pld", lower=2e-6)
    with pytest.raises(BracketError):
        acc.EpsilonBound(1.0, 1e-5, lower=math.nan)
    assert acc.EpsilonBound(1.0, 1e-5, lower=1.0).lower == 1.0 and acc.EpsilonBound(math.inf, 1e-5, lower=3.0)
    assert issubclass(BracketError, AssertionError) and not issubclass(BracketError, acc.InputError)
    from audit.cli import main

    monkeypatch.setattr(sh, "shuffle_lower_epsilon", lambda spec, delta: 50.07)  # the value the issue saw
    argv = ["account", "--sampling", "shuffle", "--noise-multiplier", "0.3", "--batch-size", "3",
            "--dataset-size", "53", "--steps", "17", "--delta", "1e-6"]
    assert main(argv) == 3
    captured = capsys.readouterr()
    assert "50.07" not in captured.out and "BracketError" in captured.err


def test_account_delta_query_checks_the_lower_delta_against_every_upper(monkeypatch, capsys):
    """`account --sampling shuffle --epsilon E` printed the certified lower δ beside the upper δ unchecked;
    a lower δ above an upper δ is now an internal error (exit 3), never two numbers (issue 22 §1)."""
    import accountants.shuffle as shuffle_mod
    from audit.cli import main

    args = ["account", "--sampling", "shuffle", "--noise-multiplier", "1", "--batch-size", "10",
            "--dataset-size", "100", "--steps", "10", "--epsilon", "1"]
    assert main(args) == 0
    monkeypatch.setattr(shuffle_mod, "shuffle_lower_delta", lambda spec, eps: 1.0)  # a broken lower end
    assert main(args) == 3
