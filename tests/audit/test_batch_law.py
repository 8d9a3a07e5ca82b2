"""The batch-law test (audit/conformance.py ``batch_law``) and the conformance audit's copied dataset.

Null: under Poisson sampling at q' ≤ q the update projected on a direction fixed by the history has
Var P ≥ (1 − q)/(n q)·(E P)² + noise (Binomial variance, Cauchy–Schwarz); the boundary is equal clipped
contributions at q' = q, which the synthetic records below draw exactly: P = a·(Bin(n, q)·c + σ·N(0, 1)).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from scipy import stats

import accountants as acc
from attacks import conformance_record, data, plugin
from audit import conformance, runs

from .conformance_sim import records
from .trainer_parts import linear_model

SPEC = acc.DPSGD(3.0, acc.Poisson(0.5), 10)
N_NATURAL = 40


def _p(counts: np.ndarray, rng: np.random.Generator, a: float = 0.7, sigma: float = 3.0, df: int = 20
       ) -> tuple[np.ndarray, np.ndarray]:
    """(P, ss/|R|) for natural counts (trials × steps): equal contributions c = 1, noise std σ (scale a)."""
    p = a * (counts + sigma * rng.standard_normal(counts.shape))
    v = a * a * sigma ** 2 * rng.chisquare(df, size=counts.shape) / df
    return p, v


def _z(p: np.ndarray, v: np.ndarray, q: float = 0.5, n: int = N_NATURAL) -> float:
    d, se, _, _ = conformance._batch_law_stat(p, v, np.ones(p.shape, dtype=bool), (1 - q) / (n * q))
    return d / se


def test_level_at_the_boundary_of_equal_contributions():
    # 4,000 audits of 100 trials at the boundary (Poisson, q' = q, every a_i equal): the one-sided test at
    # 5 % and 1 % rejects at most its level (binomial 3-sigma allowance: 0.0034 and 0.0016 at these counts)
    rng = np.random.default_rng(11)
    z = np.array([_z(*_p(rng.binomial(N_NATURAL, 0.5, size=(100, 1)).astype(float), rng)) for _ in range(4000)])
    pv = stats.norm.cdf(z)
    assert (pv <= 0.05).mean() <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 4000)
    assert (pv <= 0.01).mean() <= 0.01 + 3 * np.sqrt(0.01 * 0.99 / 4000)
    assert (pv <= 0.05).mean() >= 0.01  # and the test is not vacuous there (measured 0.034)


def test_level_over_steps_and_below_the_claimed_rate():
    rng = np.random.default_rng(12)
    several = [_z(*_p(rng.binomial(N_NATURAL, 0.5, size=(100, 10)).astype(float), rng)) for _ in range(1000)]
    assert (stats.norm.cdf(several) <= 0.05).mean() <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 1000)
    smaller = [_z(*_p(rng.binomial(N_NATURAL, 0.3, size=(200, 1)).astype(float), rng)) for _ in range(300)]
    assert (stats.norm.cdf(smaller) <= 0.05).mean() <= 0.02  # a smaller rate is benign: more Binomial variance


def test_fixed_size_and_a_higher_rate_are_rejected():
    rng = np.random.default_rng(13)
    fixed = np.full((500, 1), 20.0)  # a fixed-size batch of 20: no Binomial variance
    assert stats.norm.cdf(_z(*_p(fixed, rng))) < 1e-6
    hyper = rng.hypergeometric(31, 9, 20, size=(1000, 1)).astype(float)  # a shuffled half of 31 copies + 9 others
    assert stats.norm.cdf(_z(*_p(hyper, rng))) < 1e-6
    higher = rng.binomial(N_NATURAL, 0.9, size=(2000, 1)).astype(float)  # rate 0.9 claimed as 0.5
    assert stats.norm.cdf(_z(*_p(higher, rng))) < 1e-3


def _with_projections(recs: list[dict], *, fixed: bool, seed: int, probe_fixed: bool = False) -> list[dict]:
    """Synthetic records plus the batch-law fields: P_t from Poisson (or fixed-size) counts of 40 records."""
    rng = np.random.default_rng(seed)
    out = []
    for r in recs:
        steps = len(r["y"])
        counts = np.full(steps, 20.0) if fixed else rng.binomial(N_NATURAL, 0.5, size=steps).astype(float)
        s = rng.random(steps) < 0.5
        if probe_fixed:  # where the probe is in, the natural part is fixed-size: only those steps would reject
            counts = np.where(s, 20.0, counts)
        p, _ = _p(counts[None, :], rng, a=1.0)  # the records' noise on R has std 3 (sigma 3, scale 1)
        extra = {"bl": p[0].tolist(), "n": N_NATURAL}
        if probe_fixed:
            extra["probe"] = {"s": s.tolist()}
        out.append({**r, **extra})
    return out


def test_run_tests_rejects_fixed_size_batches_and_passes_poisson():
    recs = records(600, seed=3)
    bad = {t.name: t for t in conformance.run_tests(_with_projections(recs, fixed=True, seed=1), SPEC, 0.05, 0,
                                                    permutations=199).tests}["batch_law"]
    assert bad.rejected and bad.premise == "sampling" and "fixed-size or shuffled" in bad.finding
    ok = {t.name: t for t in conformance.run_tests(_with_projections(recs, fixed=False, seed=1), SPEC, 0.05, 0,
                                                   permutations=199).tests}["batch_law"]
    assert not ok.rejected and ok.skipped is None and ok.p_value > 0.05


def test_record_update_mode_reads_every_step_and_the_probe_steps_are_left_out():
    recs = _with_projections(records(300, seed=4, mode="record_update"), fixed=False, seed=2, probe_fixed=True)
    t = {t.name: t for t in conformance.run_tests(recs, SPEC, 0.05, 0, permutations=199).tests}["batch_law"]
    assert not t.rejected and "10 step(s)" in t.finding
    for r in recs:
        del r["probe"]  # the same observations with the probe's steps kept: those steps are fixed-size
    t = {t.name: t for t in conformance.run_tests(recs, SPEC, 0.05, 0, permutations=199).tests}["batch_law"]
    assert t.rejected


def test_non_poisson_claims_and_missing_projections_are_skipped():
    recs = _with_projections(records(200, seed=5), fixed=True, seed=3)
    for sampling in (acc.FixedSize(20, 41), acc.Shuffle(20, 41)):
        t = {t.name: t for t in conformance.run_tests(recs, acc.DPSGD(3.0, sampling, 10), 0.05, 0,
                                                      permutations=199).tests}["batch_law"]
        assert t.skipped and "not Poisson" in t.skipped and not t.rejected
    t = {t.name: t for t in conformance.run_tests(records(200, seed=5), SPEC, 0.05, 0, permutations=199).tests}
    assert t["batch_law"].skipped and not t["batch_law"].rejected
    few = _with_projections(records(12, seed=6), fixed=True, seed=4)  # about 6 trials without the canary
    t = {t.name: t for t in conformance.run_tests(few, SPEC, 0.05, 0, permutations=199).tests}
    assert t["batch_law"].skipped and "fewer than" in t["batch_law"].skipped


def test_copied_records_copies_one_record_and_keeps_every_class():
    d = data.digits().subset(slice(0, 100))
    c = conformance_record.copied_records(d, 40)
    assert c.n == 40 and c.num_classes == d.num_classes
    assert set(c.y.tolist()) == set(d.y[:40].tolist())  # every class of the first 40 records stays
    first = d.y[:40].tolist()
    others = [first.index(k) for k in sorted(set(first)) if k != first[0]]
    assert torch.equal(c.x[:40 - len(others)], d.x[:1].expand(40 - len(others), -1))  # 31 copies of record 0
    assert torch.equal(c.x[40 - len(others):], d.x[others])  # then the first record of each other class
    assert conformance_record.copied_records(d, 10).n == 10  # no room for two copies beside 9 classes: first 10
    assert torch.equal(conformance_record.copied_records(d, 10).x, d.x[:10])


def test_the_conformance_variant_trains_on_the_copied_records():
    from audit.runconfig import CanaryConfig, TrainingConfig, VariantConfig

    base = VariantConfig("conformance", TrainingConfig(dataset="digits", n_records=40, sampling="poisson"),
                         CanaryConfig(kind="dead_feature"))
    assert torch.equal(runs._records(base).x, conformance_record.copied_records(data.digits(), 40).x)
    other = dataclasses.replace(base, canary=CanaryConfig(kind="blank"))
    assert torch.equal(runs._records(other).x, data.digits().x[:40])
    fixed = dataclasses.replace(base, training=dataclasses.replace(base.training, sampling="fixed_wor"))
    assert torch.equal(runs._records(fixed).x, data.digits().x[:40])


def _trainer(shuffled: bool):
    def train(x, y, *, seed, audit=None):
        g = torch.Generator().manual_seed(seed)
        w, b = torch.zeros(10, x.shape[1]), torch.zeros(10)
        audit.record([w, b])
        order = torch.randperm(x.shape[0], generator=g)
        for t in range(2):
            if shuffled:  # a shuffled partition into 2 batches (the zoo's shuffled_batches) claimed as Poisson 0.5
                mask = torch.zeros(x.shape[0], dtype=torch.bool)
                mask[order[t * x.shape[0] // 2:(t + 1) * x.shape[0] // 2]] = True
            else:
                mask = torch.rand(x.shape[0], generator=g) < 0.5
            r = torch.softmax(x[mask] @ w.T + b, 1) - torch.nn.functional.one_hot(y[mask], 10).float()
            grads = [r[:, :, None] * x[mask][:, None, :], r]
            f = torch.clamp(1.0 / (torch.cat([gi.flatten(1) for gi in grads], 1).norm(dim=1) + 1e-12), max=1.0)
            noisy = [(gi * f.view(-1, *[1] * (gi.ndim - 1))).sum(0) + torch.randn(gi.shape[1:], generator=g)
                     for gi in grads]
            w, b = w - 0.5 * noisy[0] / 20, b - 0.5 * noisy[1] / 20
            audit.record([w, b])
        return linear_model(w, b)
    return train


@pytest.mark.parametrize("shuffled", [True, False])
def test_a_real_shuffled_trainer_is_caught_on_the_copied_records(shuffled):
    d = conformance_record.copied_records(data.digits(), N_NATURAL)
    can = conformance_record.dead_feature(d, 1, value=10.0, generator=torch.Generator().manual_seed(0))
    spec = acc.DPSGD(1.0, acc.Poisson(0.5), 2)  # sigma 1: the Binomial variance (~7.75 C²) dwarfs the noise's
    ctx = plugin.Context(_trainer(shuffled), d, can, 0, "inner_product", None, spec, "white_box", 1.0)
    recs = plugin.multi_run_game(ctx, n_trials=300, progress=False).metadata["conformance"]
    assert {r["n"] for r in recs if not r["member"]} == {N_NATURAL} and all(len(r["bl"]) == 2 for r in recs)
    t = {t.name: t for t in conformance.run_tests(recs, spec, 0.05, 0, permutations=199).tests}["batch_law"]
    assert t.rejected == shuffled, (t.p_value, t.finding)
