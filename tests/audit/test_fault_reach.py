"""The bug zoo's worst-case mechanisms (benchmarks/bench_fault_detection.py ``worst_case``, issue 25).

Each derivation is pinned two ways where it can be: by replaying the zoo's own trainer noise-free (σ set to 0,
the same seed with the canary in and out: the per-step contribution Δ of one record, in units of C), and by an
independent closed form of the resulting mechanism's ε (mpmath, tests/oracles.py).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import mpmath as mp
import numpy as np
import pytest
import torch

import accountants as acc
from tests.oracles import gdp_epsilon_mp

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
try:
    import bench_fault_detection as bench
finally:
    sys.path.pop(0)


class _Hook:
    """White-box hook: records θ_t and hands the trainer a fixed canary gradient at every step (None: canary out)."""

    def __init__(self, grad: list[torch.Tensor] | None) -> None:
        self.grad, self.trace = grad, []

    def record(self, params):
        self.trace.append(torch.cat([p.reshape(-1) for p in params]).clone())

    def canary_gradient(self, params):
        return None if self.grad is None else [g.clone() for g in self.grad]


def _first_step_shift(bug: str, x, y, grad, monkeypatch) -> float:
    """‖Δθ_1(in) − Δθ_1(out)‖·B/(LR·C): one record's pre-noise contribution at step 1, noise-free, same seed."""
    monkeypatch.setattr(bench, "SIGMA", 0.0)
    steps = []
    for g in (grad, None):
        hook = _Hook(g)
        bench.Trainer(bug)(x, y, seed=3, audit=hook)
        steps.append(hook.trace[0] - hook.trace[1])
    return float((steps[0] - steps[1]).norm()) * bench.B / (bench.LR * bench.C)


def _big(scale: float = 100.0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [scale * torch.randn(10, 64, generator=g), scale * torch.randn(10, generator=g)]


def test_sensitivity_per_step_of_the_zoo_code(monkeypatch):
    """Replay of the trainers' code: a correct trainer moves the sum by C, per_layer_clip by √2·C (two tensors at C
    each), clip_sum by 2C (a huge canary opposing the batch's sum flips the clipped sum), mean_times_batch by B·C
    (the canary alone in its batch), and by 2B·C/(n + 1) with n aligned records and an opposing canary."""
    empty_x, empty_y = torch.zeros(0, 64), torch.zeros(0, dtype=torch.long)
    assert _first_step_shift("correct", empty_x, empty_y, _big(), monkeypatch) == pytest.approx(1.0, rel=1e-5)
    assert _first_step_shift("per_layer_clip", empty_x, empty_y, _big(), monkeypatch) == pytest.approx(
        math.sqrt(2), rel=1e-5)
    assert _first_step_shift("mean_times_batch", empty_x, empty_y, _big(), monkeypatch) == pytest.approx(
        bench.B, rel=1e-5)
    # n identical records: at θ = 0 each has gradient g0 = ((0.1 − onehot) ⊗ x, 0.1 − onehot), norm ≈ 9.5 > C
    n = 8
    x, y = torch.full((n, 64), 1.25), torch.zeros(n, dtype=torch.long)
    r = torch.full((10,), 0.1)
    r[0] -= 1.0
    g0 = [r[:, None] * x[0][None, :], r]
    opposing = [-1e6 * t for t in g0]
    assert _first_step_shift("clip_sum", x, y, opposing, monkeypatch) == pytest.approx(2.0, rel=1e-5)
    assert _first_step_shift("accum_clip_sum", x, y, opposing, monkeypatch) == pytest.approx(2.0, rel=1e-5)
    assert _first_step_shift("correct", x, y, opposing, monkeypatch) == pytest.approx(1.0, rel=1e-5)
    # mean_times_batch with k ≥ 1 aligned records sampled (seed 3's mask) and the opposing canary: 2B·C/(k + 1)
    k = int((torch.rand(n, generator=torch.Generator().manual_seed(3)) < bench.Q).sum())
    assert k >= 1
    assert _first_step_shift("mean_times_batch", x, y, opposing, monkeypatch) == pytest.approx(
        2 * bench.B / (k + 1), rel=1e-5)


def test_mean_times_batch_bound_holds_for_random_batches():
    """‖B(S + g)/(n + 1) − B·S/n‖ ≤ 2B·C/(n + 1) ≤ B·C for every batch of n ≥ 1 clipped gradients (the bound of
    worst_case's docstring), over random directions and norms."""
    rng = np.random.default_rng(0)
    for _ in range(300):
        n, d = int(rng.integers(1, 60)), int(rng.integers(1, 6))
        g = rng.standard_normal((n + 1, d))
        g *= (rng.random(n + 1) / np.linalg.norm(g, axis=1))[:, None]  # norms ≤ C = 1
        s = g[:n].sum(0)
        shift = np.linalg.norm(bench.B * (s + g[n]) / (n + 1) - bench.B * s / n)
        assert shift <= 2 * bench.B / (n + 1) + 1e-9 and shift <= bench.B + 1e-9


def _subsampled_gaussian_epsilon(mu: float, q: float, delta: float) -> float:
    """ε(δ) of the pair (N(0, 1), (1 − q)N(0, 1) + qN(μ, 1)), both orderings, by bisection (mpmath).

    The privacy loss of the mixture against N(0, 1) is increasing in y, so each hockey-stick divergence is one
    threshold y*(ε): add: (1 − q)Φ̄(y*) + qΦ̄(y* − μ) − e^ε Φ̄(y*), y* = (log((e^ε − 1 + q)/q) + μ²/2)/μ; remove:
    zero once e^{−ε} ≤ 1 − q (ε ≥ log 2 here).
    """
    with mp.workdps(40):
        m, qq = mp.mpf(mu), mp.mpf(q)

        def add(e):
            ys = (mp.log((mp.exp(e) - 1 + qq) / qq) + m * m / 2) / m
            return (1 - qq) * mp.ncdf(-ys) + qq * mp.ncdf(m - ys) - mp.exp(e) * mp.ncdf(-ys)

        lo, hi = mp.log(2), mp.mpf(60)
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if add(mid) > delta else (lo, mid)
        return float(hi)


def test_mask_once_is_one_subsampled_gaussian_of_sensitivity_root_t():
    """mask_once: the canary is in all T steps (w.p. q) or none; in, T adaptive Gaussians of sensitivity C compose to
    one of √T·C. The spec worst_case returns is that one step, and the PLD accountant's ε on it sits at or just above
    the closed form's (upper side, within 0.5 %: its discretisation)."""
    wc = bench.worst_case("mask_once")
    assert wc.bound == "exact" and wc.spec == acc.DPSGD(bench.SIGMA / math.sqrt(bench.STEPS), acc.Poisson(bench.Q), 1)
    exact = _subsampled_gaussian_epsilon(math.sqrt(bench.STEPS) / bench.SIGMA, bench.Q, bench.DELTA)
    assert exact <= wc.epsilon() <= exact * 1.005
    assert 3.7 < exact < 3.9  # docs/fault-detection.md: ε 3.80


@pytest.mark.parametrize(("bug", "factor"), [("per_layer_clip", math.sqrt(2)), ("clip_sum", 2.0),
                                         ("accum_clip_sum", 2.0), ("mean_times_batch", bench.B),
                                         ("noise_div_batch_twice", bench.B), ("correct", 1.0)])
def test_sensitivity_bugs_are_dp_sgd_with_scaled_noise(bug, factor):
    """A per-step contribution k·C under noise σC is DP-SGD with noise multiplier σ/k, same q and T."""
    wc = bench.worst_case(bug)
    assert wc.spec == acc.DPSGD(bench.SIGMA / factor, acc.Poisson(bench.Q), bench.STEPS)


def test_shuffled_batches_bound_is_gdp_five_thirds():
    """shuffled_batches: 5 epochs, each a Gaussian shift of norm ≤ √5·C against noise σC: μ = √25/3 = 5/3; its ε is
    the GDP closed form (mpmath oracle, Dong, Roth, Su 2022 Cor. 2.13)."""
    wc = bench.worst_case("shuffled_batches")
    assert wc.gdp == pytest.approx(5.0 / 3.0, rel=1e-12) and wc.bound == "upper"
    assert wc.epsilon() == pytest.approx(gdp_epsilon_mp(5.0 / 3.0, bench.DELTA), rel=1e-6)


@pytest.mark.parametrize(("bug", "p"), [("noise_reused", 1 - 0.5 ** 10), ("noise_missing_bias", 1 - 0.5 ** 10),
                                    ("noise_every_other_step", 1 - 0.5 ** 10), ("no_clipping", 1.0)])
def test_revealing_bugs_curve_is_one_minus_p_times_one_minus_alpha(bug, p):
    """A transcript that is the out-transcript with probability 1 − p (the canary in no step: (1 − q)^T) has every
    test's FNR ≥ (1 − p)(1 − FPR); at δ = 1e-5 < p the bound's ε is ∞."""
    wc = bench.worst_case(bug)
    a = torch.tensor([0.0, 0.25, 0.5, 1.0], dtype=torch.float64)
    assert torch.allclose(wc.curve()(a), (1 - p) * (1 - a), atol=1e-12)
    assert math.isinf(wc.epsilon())


def test_every_zoo_trainer_has_a_worst_case():
    for bug in bench.BUGS:
        wc = bench.worst_case(bug)
        assert wc.bound in ("exact", "upper", "trivial", "estimate")
        assert (wc.spec is not None) + (wc.gdp is not None) + (wc.exposed is not None) == 1
    with pytest.raises(ValueError, match="bug must be one of"):
        bench.worst_case("nonsense")


def test_optimal_sequential_on_the_claim_and_on_a_revealing_bug():
    """The optimal attack on the claim's own curve never rejects (the null's boundary; 3 replicates at a 2,000
    ceiling), and on a canary revealed with probability 1 − 2^-10 it rejects at the first look (250 trials)."""
    _, _, curves = bench._setup()
    f = curves.best
    claim = lambda a: f(torch.as_tensor(a, dtype=torch.float64)).numpy()  # noqa: E731
    hits, spent = bench.optimal_sequential(bench.worst_case("correct").curve(), claim, reps=3, ceiling=2000)
    assert hits == 0
    hits, spent = bench.optimal_sequential(bench.worst_case("noise_missing_bias").curve(), claim, reps=3, ceiling=2000)
    assert hits == 3 and spent == [250, 250, 250]


def test_scale_witness_matches_simulation():
    """The χ² witness of a noise scale that depends on the canary (ceil_batch: 50/51 over T·(650 − 101) = 5,490
    noise-only coordinates): simulated norms of N(0, I) and N(0, ρ²I) reproduce its (FPR, FNR) = (0.01, 0.606)
    within sampling error (4,000 draws per side: FNR standard error 0.008, tolerance 0.04), and the point lies
    far below the claim's curve (0.962 at FPR 0.01)."""
    dims, rho = 10 * (650 - 101), 50 / 51
    wc = bench.worst_case("ceil_batch")
    assert wc.witness == pytest.approx(bench.scale_witness(rho, dims))
    fpr, fnr = wc.witness
    assert fnr == pytest.approx(0.606, abs=0.002)  # scipy.stats.chi2 1.17
    rng = np.random.default_rng(0)
    out = np.array([np.sum(rng.standard_normal(dims) ** 2) for _ in range(4000)])
    inn = np.array([np.sum((rho * rng.standard_normal(dims)) ** 2) for _ in range(4000)])
    t = np.quantile(out, fpr)
    assert np.mean(inn > t) == pytest.approx(fnr, abs=0.04)
    _, _, curves = bench._setup()
    assert float(curves.best(torch.tensor([fpr], dtype=torch.float64))) > fnr + 0.3
    assert bench.worst_case("opacus_rate").witness[1] < 1e-100  # σC/33 against σC/50: the worlds are separated


def test_final_view_shifts_and_the_shuffled_view_inside_the_claim():
    """``FINAL_VIEW`` (docs/fault-detection.md, "A final-model score"): each in-sampler's mean is its derivation's
    (T·q·Δ for the Poisson bugs, q·T for mask_once, exactly T/2 for shuffled_batches, T·q·B·E[1/(X + 1)] =
    T·q·B·(1 − (1 − q)^(n+1))/((n + 1)q) for mean_times_batch, X ~ Bin(n, q) on the audit's n records; 200,000
    draws, tolerance 5 standard errors), noise_reused's noise variance is T²σ², and shuffled_batches' final view,
    μ-GDP with μ = (T/2)/(σ√T) = 0.527, lies on or above the claim's PLD curve at every FPR of a log grid (so no
    test of it can show a violation: "not allowed")."""
    from scipy.stats import norm

    rng = np.random.default_rng(0)
    n, t, q, sigma = 200_000, bench.STEPS, bench.Q, bench.SIGMA
    na = bench.N_AUDIT
    means = {"correct": t * q, "noise_reused": t * q, "clip_sum": t * q * 0.65, "per_layer_clip": t * q * 1.35,
             "mask_once": q * t, "mean_times_batch": t * q * bench.B * (1 - (1 - q) ** (na + 1)) / ((na + 1) * q),
             "shuffled_batches": t / 2}
    assert set(means) == set(bench.FINAL_VIEW)
    for bug, mean in means.items():
        x = bench.FINAL_VIEW[bug][2](rng, n)
        assert abs(float(x.mean()) - mean) <= 5 * (float(x.std()) + 1e-12) / math.sqrt(n) + 1e-12, bug
    assert set(np.unique(bench.FINAL_VIEW["mask_once"][2](rng, 1000))) == {0.0, float(t)}
    assert bench.FINAL_NOISE_VAR == {"noise_reused": t ** 2 * sigma ** 2}
    mu = (t / 2) / (sigma * math.sqrt(t))
    assert mu == pytest.approx(0.527, abs=1e-3)
    a = np.logspace(-8, 0, 400)[:-1]
    gdp = norm.cdf(norm.ppf(1 - a) - mu)
    f = bench._setup()[2].best(torch.as_tensor(a, dtype=torch.float64)).numpy()
    assert bool(np.all(gdp >= f - 1e-9)), float(np.max(f - gdp))
