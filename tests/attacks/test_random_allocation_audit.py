"""Random allocation (balls-in-bins) in the built-in trainer and its worst-case audit (docs/sampling.md,
docs/worst-case.md): the sampler's law, the other samplers' draws unchanged, the per-epoch likelihood
ratio, the accountant's dominating pair realised by the real trainer, sound audits, the config keys,
and the tightness row of benchmarks/bench_tightness.py.
"""

import hashlib
import math
import sys
from pathlib import Path

import pytest
import torch
from scipy import stats
from scipy.stats import binom, ks_2samp

import accountants as acc
from accountants.errors import InputError, UnsupportedError
from attacks import data, dpsgd, games, models, samplers, worst_case
from attacks import membership as mia
from audit import comparator, config, conformance, runs
from audit import statistics as st

ROOT = Path(__file__).resolve().parents[2]


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def test_balls_in_bins_law():
    """k = 1: each present record in exactly one step of every full epoch, uniformly (chi-square), independently of
    the other records (chi-square of independence), never an absent one; batch sizes Binomial(n, 1/t)."""
    N, t, E = 40, 5, 800
    present = torch.ones(N, dtype=torch.bool)
    present[[0, 13]] = False
    c = samplers.sample_counts(acc.RandomAllocation(1, t), t * E, present, _gen(1))
    assert c.dtype == samplers.COUNT_DTYPE and c.shape == (t * E, N)
    assert int(c[:, [0, 13]].sum()) == 0
    per_epoch = c.reshape(E, t, N)[:, :, present]  # (epoch, step, record)
    assert per_epoch.sum(1).eq(1).all()  # exactly once per epoch
    pos = per_epoch.argmax(1)  # (E, 38) the step of each record in each epoch
    hist = torch.stack([(pos == j).sum(0) for j in range(t)], 1).double()  # (38, t) ~ Multinomial(E, 1/t)
    chi2 = (((hist - E / t) ** 2) / (E / t)).sum().item()
    assert stats.chi2.sf(chi2, df=38 * (t - 1)) > 1e-3
    table = torch.zeros(t, t)
    for a, b in zip(pos[:, 0].tolist(), pos[:, 1].tolist(), strict=True):
        table[a, b] += 1
    assert stats.chi2_contingency(table.numpy())[1] > 1e-3  # two records' steps are independent
    sizes = c.sum(1).double()
    n, p = 38, 1 / t
    assert abs(sizes.mean().item() - n * p) < 5 * (n * p * (1 - p) / (t * E)) ** 0.5
    assert samplers.expected_batch_size(acc.RandomAllocation(1, t), N) == N / t  # k·N/t, the public normaliser


def test_partial_epoch_and_coupling():
    """A trailing partial epoch of r = 2 of t = 5 steps holds a record with probability 2/5 (5-SE band); the other
    records' allocations are the same whether or not a slot is present (the realised pair's coupling)."""
    N, t = 20_000, 5
    full = torch.ones(N, dtype=torch.bool)
    c = samplers.sample_counts(acc.RandomAllocation(1, t), 7, full, _gen(2))
    assert c[:5].sum(0).eq(1).all() and int(c[5:].sum(0).max()) == 1
    hits = int(c[5:].sum())
    assert abs(hits - N * 0.4) < 5 * (N * 0.4 * 0.6) ** 0.5
    gone = full.clone()
    gone[7] = False
    d = samplers.sample_counts(acc.RandomAllocation(1, t), 7, gone, _gen(2))
    assert torch.equal(torch.cat([c[:, :7], c[:, 8:]], 1), torch.cat([d[:, :7], d[:, 8:]], 1))
    assert int(d[:, 7].sum()) == 0


def test_k_of_t_subsets_are_uniform():
    """k = 2 of t = 5: exactly two distinct steps per epoch, each of the C(5, 2) = 10 subsets equally likely."""
    N, t, k, E = 30, 5, 2, 600
    c = samplers.random_allocation(k, t, t * E, torch.ones(N, dtype=torch.bool), _gen(3))
    per_epoch = c.reshape(E, t, N)
    assert per_epoch.sum(1).eq(k).all() and int(c.max()) == 1
    code = (per_epoch * (2 ** torch.arange(t))[None, :, None]).sum(1).reshape(-1)  # subset as a bitmask
    counts = torch.bincount(code, minlength=2**t)[[i for i in range(2**t) if bin(i).count("1") == k]].double()
    assert counts.numel() == math.comb(t, k) and int(counts.sum()) == E * N
    assert stats.chisquare(counts.numpy()).pvalue > 1e-3
    with pytest.raises(InputError, match="k"):
        samplers.random_allocation(6, 5, 10, torch.ones(3, dtype=torch.bool))


def _h(t):
    return hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest()[:16]


def test_other_samplers_draw_what_they_drew_before():
    """The stored trials of the other samplers do not change: SHA-256 prefixes of their draws and of a short
    training run (updates, batch sizes), recorded at commit aeb6ecc (before random allocation was added)."""
    present = torch.ones(30, dtype=torch.bool)
    present[[2, 29]] = False
    want = {"poisson": "8ce1fccac808bd4c", "fixed_wor": "1b2878d69296400a", "fixed_wr": "6ebd51d7040c13f6",
            "shuffle": "64542ca53fbedda2"}
    specs = {"poisson": acc.Poisson(0.3), "fixed_wor": acc.FixedSize(5, 30),
             "fixed_wr": acc.FixedSize(5, 30, replace=True), "shuffle": acc.Shuffle(4, 30)}
    for name, s in specs.items():
        assert _h(samplers.sample_counts(s, 17, present, _gen(3))) == want[name], name
    d = data.digits().subset(slice(0, 40))
    want_train = {"poisson": ("70284de7ec9dd253", "991ba019b6df3c09"),
                  "fixed_wor": ("ad3c49d841e39ae1", "de427d1f04205429"),
                  "shuffle": ("cff30d47588e996a", "ae797a01258c146a")}
    trained = (("poisson", acc.Poisson(0.3)), ("fixed_wor", acc.FixedSize(5, 40)), ("shuffle", acc.Shuffle(4, 40)))
    for name, s in trained:
        res = dpsgd.train(acc.DPSGD(1.0, s, 6), models.logistic_regression(64, 10), d, clip_norm=1.0, learning_rate=0.5,
                          n_models=2, generator=[_gen(i) for i in range(2)], record_updates=True)
        assert (_h(res.updates), _h(res.batch_sizes)) == want_train[name], name


def test_allocation_llr_closed_form():
    """Epochs of t = 3 steps (full) then r = 2 (the record there with probability 2/3): log of
    (1 − r/t) + (1/t) Σ_j e^{(o_j − 1/2)/σ²} per epoch, written out here."""
    spec = acc.DPSGD(1.3, acc.RandomAllocation(1, 3), 5)
    o = torch.tensor([[0.2, -1.0, 2.5, 0.7, -0.4]], dtype=torch.float64)
    v = 1.3**2

    def epoch(x, p):
        return math.log((1 - p) + sum(math.exp((y - 0.5) / v) for y in x) / 3)

    want = epoch([0.2, -1.0, 2.5], 1.0) + epoch([0.7, -0.4], 2 / 3)
    assert math.isclose(float(mia.allocation_llr(o, spec)), want, rel_tol=1e-12)
    assert math.isclose(float(mia.white_box_llr(o, spec, 9)), want, rel_tol=1e-12)  # the Dirac canary's score
    c = worst_case.crafted(spec, dim=4)
    assert (c.background, c.copies, c.alternative) == (0, 1, False)
    assert math.isclose(float(worst_case.llr(o, spec, c)), want, rel_tol=1e-12)
    with pytest.raises(UnsupportedError, match="k = 1"):
        mia.allocation_llr(o, acc.DPSGD(1.0, acc.RandomAllocation(2, 3), 5))


def test_crafted_refuses_what_the_accountant_does_not_cover():
    for spec in (acc.DPSGD(1.0, acc.RandomAllocation(2, 3), 6),
                 acc.DPSGD(1.0, acc.RandomAllocation(1, 3), 6, group_size=2)):
        with pytest.raises(UnsupportedError, match="balls-in-bins"):
            worst_case.crafted(spec, dim=4)


def test_trainer_realises_the_allocation_pair():
    """The real trainer on the crafted dataset (z = +C·e alone) gives the scores of the accountant's pair
    (1/t)Σ_j N(e_j, σ²I) vs N(0, σ²I) per epoch, drawn independently by sample_allocation_pair (KS)."""
    spec = acc.DPSGD(1.0, acc.RandomAllocation(1, 3), 5)  # epochs of 3 and 2 steps
    c = worst_case.crafted(spec, dim=650)
    setup = games.Setup(spec, models.logistic_regression(64, 10), data.digits().subset(slice(0, 0)))
    out = games.multi_run_game(setup, c, n_trials=600, seed=5, chunk_size=600, progress=False,
                               scores=[mia.LikelihoodRatio()], keep_observations=True)
    assert out.threat == "white_box_crafted_dataset"
    xin, xout = worst_case.sample_allocation_pair(spec, 20_000, generator=_gen(1))
    for member, x in ((True, xin), (False, xout)):
        got = out.scores["llr"][out.truth == member].reshape(-1).numpy()
        assert ks_2samp(got, mia.allocation_llr(x, spec).numpy()).pvalue > 1e-3, member
    o = out.observations[out.truth].reshape(-1, 5)  # in: one unit shift per epoch (partial: with prob. 2/3)
    se = (3 / o.shape[0]) ** 0.5  # σ = 1: the sum of 3 steps' noise has variance 3 (plus ≤ 1/4 from the allocation)
    assert abs(o[:, :3].sum(1).mean().item() - 1.0) < 5 * se and abs(o[:, 3:].sum(1).mean().item() - 2 / 3) < 5 * se


def test_allocation_audits_are_sound():
    """M = 60 seeded audits of the exact pair (n = 250 + 250, s = 0.05): violations of the RDP curve and
    ε_lower > ε_upper are each at most binom.ppf(0.999, M, s) (probability < 0.001 if the true rate is ≤ s);
    measured: 0. Every ε_lower is also below the RDP upper bound, as it must be."""
    spec = acc.DPSGD(1.0, acc.RandomAllocation(1, 4), 8)
    curves = comparator.analytical_curves(spec, 1e-5)
    g = _gen(2024)
    violations = above = 0
    M, n, s = 60, 250, 0.05
    for _ in range(M):
        xin, _ = worst_case.sample_allocation_pair(spec, n, generator=g)
        _, xout = worst_case.sample_allocation_pair(spec, n, generator=g)
        si, so = mia.allocation_llr(xin, spec).numpy(), mia.allocation_llr(xout, spec).numpy()
        violations += comparator.violation_test(st.empirical_tradeoff(si, so, significance=s), curves.best).violated
        above += st.epsilon_lower_bound(si, so, delta=1e-5, significance=s).value > curves.epsilon_best
    assert violations <= int(binom.ppf(0.999, M, s)) and above == 0
    assert violations == 0


def test_config_random_allocation_keys():
    """Every spelling describe accepts; k and steps_per_epoch validated with their key and range."""
    for spelling in ("random_allocation", "random-allocation", "Balls-In-Bins", "balls_in_bins"):
        cfg = config.loads(f'[training]\nsampling = "{spelling}"\nsteps_per_epoch = 4\nsteps = 8\n')
        v = config.variants(cfg)[0]
        assert v.training.sampling == "random_allocation"
        assert runs.spec_of(v) == acc.DPSGD(1.0, acc.RandomAllocation(1, 4), 8)
    with pytest.raises(InputError, match=r"training\.k must be an integer in \[1, training\.steps_per_epoch = 4\]; "
                                         r"got 5"):
        config.loads('[training]\nsampling = "random_allocation"\nsteps_per_epoch = 4\nk = 5\n')
    with pytest.raises(InputError, match=r"training\.k must be an integer in \[1, training\.steps_per_epoch = 2\]"):
        config.loads('[training]\nsampling = "random_allocation"\nsteps_per_epoch = 2\nk = 3\ntrainer = "m:f"\n')
    with pytest.raises(InputError, match=r"training\.k must be an integer ≥ 1; got 0"):
        config.loads('[training]\nsampling = "random_allocation"\nk = 0\n')
    with pytest.raises(InputError, match=r"training\.steps_per_epoch must be an integer ≥ 1; got 0"):
        config.loads('[training]\nsampling = "random_allocation"\nsteps_per_epoch = 0\n')
    with pytest.raises(InputError, match=r"'add_remove' only"):
        config.loads('[training]\nsampling = "random_allocation"\nneighbouring = "replace_one"\n')
    with pytest.raises(InputError, match=r"need training\.k = 1"):
        config.loads('[training]\nsampling = "random_allocation"\nk = 2\n')
    cfg = config.loads('[training]\nsampling = "random_allocation"\nk = 2\nsteps_per_epoch = 5\n'
                       '[attack]\nscore = "inner_product"\n')
    assert runs.spec_of(config.variants(cfg)[0]).sampling == acc.RandomAllocation(2, 5)
    assert conformance.inclusion_rate(runs.spec_of(config.variants(cfg)[0])) == 2 / 5  # k/t per step


def test_tightness_row():
    """benchmarks/bench_tightness.py, row random_allocation_add_remove (σ = 1, RandomAllocation(1, 5), T = 10,
    10,000 trials, seed 0, 401 curve replicates), measured 2026-11-28 (docs/worst-case.md): ε_lower 1.269; the
    headline ε_certifiable 1.327 per direction (remove; ratio 0.96), 1.398 on the symmetric PLD curve
    (accountants/pld/random_allocation.py; ratio 0.91; on the RDP curve it was 1.728, ratio 0.73) and 1.331 on the
    realised pair (11 replicates), which is the accountant's own dominating pair (ratio 0.95). Tolerances: ±0.05
    absolute (the run is seeded; float reductions may differ across machines); ratios ≥ 0.9, the issue's goal."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_tightness
    finally:
        sys.path.pop(0)
    r = bench_tightness.run_allocation_row(10_000, 0.05)
    assert not r["violated"] and r["curve"] == "pld" and r["certifiable_on"] == "direction remove"
    assert r["epsilon_lower"] == pytest.approx(1.269, abs=0.05)
    assert r["epsilon_certifiable"] == pytest.approx(1.327, abs=0.05)
    assert r["symmetric"]["epsilon_certifiable"] == pytest.approx(1.398, abs=0.05)
    assert r["ratio"] >= 0.9 and r["symmetric"]["ratio"] >= 0.9
    assert r["epsilon_certifiable_pair"] == pytest.approx(1.331, abs=0.05)
    assert r["ratio_pair"] >= 0.9
    assert r["epsilon_lower"] <= r["certified_lower"] <= r["epsilon_rdp"]  # 1.269 ≤ 3.740 ≤ 4.289
