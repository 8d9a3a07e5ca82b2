"""Shuffled batches audited honestly (docs/shuffle.md, docs/worst-case.md): the sampler the accountant
describes (absent records hold ⊥ in their slot), the per-epoch likelihood ratio, the crafted pair of
Chua et al. (ICML 2024, §4) realised by the real trainer, soundness against the shuffle upper bound,
and the claim of issue 14: such an audit exceeds the Poisson ε that shuffled code usually quotes.
"""

import math

import numpy as np
import pytest
import torch
from scipy.stats import binom, ks_2samp

import accountants as acc
from accountants.errors import InputError, UnsupportedError
from attacks import data, games, models, samplers, worst_case
from attacks import membership as mia
from audit import comparator, config, runs
from audit import statistics as st


def test_shuffled_slots_keep_positions_and_never_draw_an_absent_slot():
    """⊥ semantics: the other records' batches do not depend on whether slot 0 is present."""
    N, b, T = 12, 3, 10  # 4 steps per epoch: epochs of 4, 4 and a partial one of 2
    full = torch.ones(N, dtype=torch.bool)
    gone = full.clone()
    gone[0] = False
    a = samplers.sample_counts(acc.Shuffle(b, N), T, full, torch.Generator().manual_seed(3))
    c = samplers.sample_counts(acc.Shuffle(b, N), T, gone, torch.Generator().manual_seed(3))
    assert torch.equal(a[:, 1:], c[:, 1:]) and int(c[:, 0].sum()) == 0
    for start in (0, 4):  # every record exactly once in each full epoch
        assert a[start:start + 4].sum(0).tolist() == [1] * N
    assert a[8:].sum(0).max() <= 1 and a.sum(1).tolist() == [b] * T
    with pytest.raises(InputError, match="dataset_size must be the 12 record slots"):
        samplers.sample_counts(acc.Shuffle(b, 13), T, full)
    assert samplers.expected_batch_size(acc.Shuffle(b, N), N) == 3.0


def test_shuffled_llr_closed_form():
    """One epoch of L = 3 steps, p = 1: log Σ_t e^{o_t − 1/2} − log 3 (Dirac canary vs ⊥); crafted: m = 2 vs 1."""
    spec = acc.DPSGD(1.3, acc.Shuffle(3, 9), 5)  # epochs: 3 steps (p = 1), then 2 steps (p = 6/9)
    o = torch.tensor([[0.2, -1.0, 2.5, 0.7, -0.4]], dtype=torch.float64)
    v = 1.3**2

    def epoch(x, m1, m0, p):
        def mix(m):
            return math.log((1 - p) + p / len(x) * sum(math.exp((m * t - m * m / 2) / v) for t in x))
        return mix(m1) - mix(m0)

    want = epoch([0.2, -1.0, 2.5], 1, 0, 1.0) + epoch([0.7, -0.4], 1, 0, 6 / 9)
    assert math.isclose(float(mia.white_box_llr(o, spec, 9)), want, rel_tol=1e-12)
    want2 = epoch([0.2, -1.0, 2.5], 2, 1, 1.0) + epoch([0.7, -0.4], 2, 1, 6 / 9)
    assert math.isclose(float(mia.shuffled_llr(o, spec, 2.0, 1.0)), want2, rel_tol=1e-12)


def test_trainer_realises_the_shuffled_pair():
    """The real trainer on the crafted dataset (z = +C·e, n − 1 records of −C·e, ⊥ when out) gives the
    scores of the pair MoG(2) vs MoG(1) per epoch, drawn independently by sample_shuffle_pair (KS)."""
    spec = acc.DPSGD(1.0, acc.Shuffle(2, 7), 5)  # L = 3 (one record sits out each epoch), epochs of 3 and 2
    c = worst_case.crafted(spec, dim=650)
    assert (c.background, c.copies, c.alternative) == (6, 1, False)
    setup = games.Setup(spec, models.logistic_regression(64, 10), data.digits().subset(slice(0, 0)))
    out = games.multi_run_game(setup, c, n_trials=600, seed=5, chunk_size=600, progress=False,
                               scores=[mia.LikelihoodRatio()], keep_observations=True)
    assert out.threat == "white_box_crafted_dataset"
    xin, xout = worst_case.sample_shuffle_pair(spec, 20_000, generator=torch.Generator().manual_seed(1))
    for member, x in ((True, xin), (False, xout)):
        got = out.scores["llr"][out.truth == member].reshape(-1).numpy()
        want = mia.shuffled_llr(x, spec, 2.0, 1.0).numpy()
        assert ks_2samp(got, want).pvalue > 1e-3, member
    # the observations are the pair's, shifted by the baseline −b
    o = out.observations[out.truth].reshape(-1, 5) + 2.0
    torch.testing.assert_close(worst_case.llr(o - 2.0, spec, c), mia.shuffled_llr(o, spec, 2.0, 1.0))


def test_shuffled_audits_are_sound_against_the_upper_bound():
    """M seeded audits of the exact pair: violations of the shuffle upper curve and ε_lower > ε_upper are
    each at most binom.ppf(0.999, M, s) (probability < 0.001 if the true rate is ≤ s); measured: 0."""
    spec = acc.DPSGD(1.0, acc.Shuffle(4, 20), 10)  # 5 steps per epoch, 2 epochs
    curves = comparator.analytical_curves(spec, 1e-5)
    g = torch.Generator().manual_seed(2024)
    M, n, s = 40, 250, 0.05
    violations = above = 0
    for _ in range(M):
        xin, _ = worst_case.sample_shuffle_pair(spec, n, generator=g)
        _, xout = worst_case.sample_shuffle_pair(spec, n, generator=g)
        si, so = mia.shuffled_llr(xin, spec, 2.0, 1.0).numpy(), mia.shuffled_llr(xout, spec, 2.0, 1.0).numpy()
        violations += comparator.violation_test(st.empirical_tradeoff(si, so, significance=s), curves.best).violated
        above += st.epsilon_lower_bound(si, so, delta=1e-5, significance=s).value > curves.epsilon_best
    slack = int(binom.ppf(0.999, M, s))
    assert violations <= slack and above <= slack, (violations, above, slack)
    assert violations == 0 and above == 0  # measured (seeded)


def test_shuffled_audit_exceeds_the_poisson_epsilon():
    """Issue 14's claim at the benchmark's setting (Shuffle(5, 500), T = 200, σ = 0.8, 5,000 + 5,000
    trials), on seeded draws of the realised pair: the audit certifies more than the Poisson ε at
    q = b/n (so quoting Poisson would be refuted) and stays below the shuffle upper bound.

    Values (this run, seed 0): ε_lower 2.52 against Poisson 1.806 (PLD, q = 0.01), certified shuffle
    lower 8.08, upper 8.60. Over 11 seeds the optimal audit ranged 2.22–3.12 (never below 1.81), so
    the margin is not luck of one seed.
    """
    spec = acc.DPSGD(0.8, acc.Shuffle(5, 500), 200)
    b = acc.shuffle_bounds(spec, 1e-5)
    g = torch.Generator().manual_seed(0)
    xin, _ = worst_case.sample_shuffle_pair(spec, 5000, generator=g)
    _, xout = worst_case.sample_shuffle_pair(spec, 5000, generator=g)
    si, so = mia.shuffled_llr(xin, spec, 2.0, 1.0).numpy(), mia.shuffled_llr(xout, spec, 2.0, 1.0).numpy()
    low = st.epsilon_lower_bound(si, so, delta=1e-5).value
    # Poisson q = 0.01, T = 200, σ = 0.8: dp_accounting 0.6 PLD (interval 1e-3) gives 1.8019; ours is an upper
    # bound with bracket [1.7998, 1.8058]; tolerance ±0.01 covers both discretisations
    assert abs(b.poisson.value - 1.8019) < 0.01
    assert b.poisson.value < low < b.lower <= b.upper.value, (low, b)


def test_config_sampling_shuffle_is_accounted_as_shuffle():
    """training.sampling = "shuffle" claims Shuffle(b, n_records + 1), accounted by the shuffle upper bound;
    the fault shuffled_batches still claims Poisson."""
    cfg = config.loads('[training]\nsampling = "shuffle"\nbatch_size = 10\nn_records = 99\nsteps = 20\n')
    v = config.variants(cfg)[0]
    spec = runs.spec_of(v)
    assert spec.sampling == acc.Shuffle(10, 100)
    upper = acc.epsilon(spec, 1e-5, method="pld").value
    gauss = acc.epsilon(acc.DPSGD(1.0, acc.Poisson(1.0), 2), 1e-5, method="pld").value  # 2 full-batch epochs
    assert upper == gauss
    curve = acc.tradeoff_curve(spec, method="pld")  # the curve of the reduced spec, for the comparator
    assert "shuffled phases" in curve.description
    faulty = config.variants(config.loads('[training]\nfault = "shuffled_batches"\n'))[0]
    assert isinstance(runs.spec_of(faulty).sampling, acc.Poisson)
    with pytest.raises(InputError, match=r"needs training\.neighbouring 'add_remove'"):
        config.loads('[training]\nsampling = "shuffle"\nneighbouring = "replace_one"\n'
                     '[attack]\nthreat_model = "white_box_crafted_dataset"\n')
    with pytest.raises(InputError, match="'multi_run' or 'one_run'"):
        config.loads('[training]\nsampling = "shuffle"\n[audit]\ngame = "reconstruction"\n[canary]\ncount = 4\n')
    with pytest.raises(UnsupportedError, match="add/remove"):
        worst_case.crafted(acc.DPSGD(1.0, acc.Shuffle(2, 6), 3, neighbouring=acc.Neighbouring.REPLACE_ONE), dim=4)
    assert np.isfinite(float(mia.white_box_llr(torch.zeros(1, 20), spec, 100)))


def test_shipped_shuffle_example_is_the_benchmark_row():
    """examples/shuffle_claims.toml (dpaudit check, 10,000 trials: too slow for CI; measured exit 1, ε_lower
    2.788) audits the benchmark's shuffle row and claims its Poisson ε."""
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "benchmarks"))
    try:
        import bench_tightness
    finally:
        sys.path.pop(0)
    cfg = config.load(root / "examples" / "shuffle_claims.toml")
    v = config.variants(cfg)[0]
    assert runs.spec_of(v) == bench_tightness.SHUFFLE_SPEC
    assert v.attack.threat_model == "white_box_crafted_dataset" and v.audit.trials == 10_000
    poisson = acc.epsilon(acc.DPSGD(0.8, acc.Poisson(0.01), 200), 1e-5, method="pld").value
    assert abs(cfg.claim.epsilon - poisson) < 1e-3
