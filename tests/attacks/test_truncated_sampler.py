"""The truncated-Poisson sampler of the built-in trainer, its worst case and its [training] keys (issue 27 §2)."""

from __future__ import annotations

import math

import pytest
import torch

import accountants as acc
from accountants.truncated_poisson import inclusion_probability
from attacks import samplers, worst_case
from attacks.canaries import CraftedDataset
from audit import config, runs


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_guarantees():
    present = torch.ones(30, dtype=torch.bool)
    present[[3, 17]] = False
    c = samplers.truncated_poisson(0.6, 10, 2000, present, _gen())
    assert c.dtype == samplers.COUNT_DTYPE and c.shape == (2000, 30)
    assert int(c.max()) == 1 and int(c[:, ~present].sum()) == 0
    sizes = c.sum(1)
    assert int(sizes.max()) == 10 and bool((sizes == 10).float().mean() > 0.9)   # 28 present, E = 16.8 > 10
    # the draw before the cut is Poisson's own (same first uniforms): the batch is a subset of it
    drawn = samplers.poisson(0.6, 2000, present, _gen())
    assert bool((c <= drawn).all())
    small = drawn.sum(1) <= 10
    assert bool((c[small] == drawn[small]).all())                 # nothing is cut below B


def test_no_cut_when_max_batch_size_covers_everything():
    present = torch.ones(12, dtype=torch.bool)
    a = samplers.truncated_poisson(0.3, 12, 50, present, _gen(3))
    assert torch.equal(a, samplers.poisson(0.3, 50, present, _gen(3)))


def test_inclusion_probability_matches_the_accountant():
    """P(record in batch) = p(n) of accountants.truncated_poisson (closed form, exact sums over K):
    200,000 record-steps per record; seeded, so deterministic; 5 binomial standard errors."""
    n, q, b, steps = 21, 0.5, 8, 10_000
    c = samplers.sample_counts(acc.TruncatedPoisson(q, b, n), steps, torch.ones(n, dtype=torch.bool), _gen(1))
    p = inclusion_probability(acc.TruncatedPoisson(q, b, n), n)
    se = math.sqrt(p * (1 - p) / steps)
    per_record = c.double().mean(0)
    assert bool(((per_record - p).abs() < 5 * se).all()), (per_record, p)
    assert abs(float(per_record.mean()) - p) < 5 * se / math.sqrt(n)


def test_dataset_size_must_be_a_covered_neighbour():
    present = torch.ones(10, dtype=torch.bool)
    present[0] = False                                            # 9 present: n = 9 or 10 are covered
    for n in (9, 10):
        samplers.sample_counts(acc.TruncatedPoisson(0.5, 4, n), 3, present, _gen())
    for n in (8, 11):
        with pytest.raises(ValueError, match="dataset_size"):
            samplers.sample_counts(acc.TruncatedPoisson(0.5, 4, n), 3, present, _gen())


def test_worst_case_is_the_realised_pair():
    spec = acc.DPSGD(1.0, acc.TruncatedPoisson(0.5, 60, 101), 10)
    c = worst_case.crafted(spec, dim=7)
    assert (c.background, c.copies, c.alternative, c.background_gradient) == (100, 1, False, 0)
    assert float(c.gradient_records()[:100].abs().sum()) == 0.0
    a_in, lp_in, a_out, _ = worst_case.laws(spec, c)
    p = inclusion_probability(spec.sampling, 101)
    assert a_in.tolist() == [0.0, 1.0] and a_out.tolist() == [0.0]
    assert torch.allclose(lp_in.exp(), torch.tensor([1 - p, p], dtype=torch.float64), rtol=1e-12)
    r1 = worst_case.crafted(acc.DPSGD(1.0, acc.TruncatedPoisson(0.5, 60, 101), 10, neighbouring="replace-one"), dim=7)
    assert r1.alternative and r1.background_gradient == 0


def test_default_background_is_unchanged():
    """Other constructions keep records of gradient −g (their stored trials do not move)."""
    g = torch.zeros(1, 4, dtype=torch.float64)
    g[0, 0] = 1.0
    rec = CraftedDataset(g, "crafted", background=3, copies=1).gradient_records()
    assert rec[:3].tolist() == [[-1.0, 0.0, 0.0, 0.0]] * 3
    with pytest.raises(ValueError, match="background_gradient"):
        CraftedDataset(g, "crafted", background=3, background_gradient=2)


BASE = """
[training]
n_records = 100
sampling = "{sampling}"
sample_rate = 0.5
{extra}
"""


def test_training_keys():
    cfg = config.loads(BASE.format(sampling="Truncated-Poisson", extra="max_batch_size = 60"))
    assert cfg.training.sampling == "truncated_poisson" and cfg.training.max_batch_size == 60
    spec = runs.spec_of(cfg.base)
    assert spec.sampling == acc.TruncatedPoisson(0.5, 60, 101)     # the larger neighbour: 100 + the canary
    assert config.loads(config.dumps(cfg)) == cfg
    with pytest.raises(ValueError, match=r"training.max_batch_size must be an integer ≥ 1"):
        config.loads(BASE.format(sampling="truncated_poisson", extra=""))
    with pytest.raises(ValueError, match=r"max_batch_size applies to training.sampling 'truncated_poisson' only"):
        config.loads(BASE.format(sampling="poisson", extra="max_batch_size = 60"))
    with pytest.raises(ValueError, match=r"training.max_batch_size must be an integer ≥ 0"):
        config.loads(BASE.format(sampling="truncated_poisson", extra="max_batch_size = -1"))
