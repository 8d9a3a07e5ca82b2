"""Each sampler's "Formal guarantees" (attacks/samplers.py docstrings), checked with seeded
statistical tests: inclusion frequencies, batch-size law, absent records never drawn."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import accountants as acc
from attacks import samplers

N, T = 40, 4000
ALL = torch.ones(N, dtype=torch.bool)


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_poisson_inclusion_and_batch_size_law():
    q = 0.25
    present = ALL.clone()
    present[[3, 7]] = False
    c = samplers.poisson(q, T, present, _gen(1))
    assert c.dtype == torch.int16
    assert int(c.max()) == 1
    assert int(c[:, [3, 7]].sum()) == 0  # absent records are never drawn
    # per-record inclusion ~ Binomial(T, q), independent: chi-square over the 38 present records
    hits = c[:, present].sum(0).double()
    chi2 = (((hits - T * q) ** 2) / (T * q * (1 - q))).sum().item()
    assert stats.chi2.sf(chi2, df=38) > 1e-3
    # batch size ~ Binomial(38, q): mean 9.5, variance 38·q·(1-q) = 7.125 (5-SE tolerances)
    b = c.sum(1).double()
    assert abs(b.mean().item() - 38 * q) < 5 * (38 * q * (1 - q) / T) ** 0.5
    assert abs(b.var().item() - 38 * q * (1 - q)) < 5 * 7.125 * (2 / T) ** 0.5
    # independence across steps: lag-1 correlation of one record's indicator ~ N(0, 1/T)
    x = c[:, 0].double()
    r = torch.corrcoef(torch.stack([x[:-1], x[1:]]))[0, 1].item()
    assert abs(r) < 5 / T**0.5


def test_fixed_size_without_replacement_uniform_subsets():
    b = 6
    present = ALL.clone()
    present[0] = False
    c = samplers.fixed_size_without_replacement(b, T, present, _gen(2))
    assert c.sum(1).eq(b).all()
    assert int(c.max()) == 1
    assert int(c[:, 0].sum()) == 0
    # each present record in a batch with probability b / n_present: chi-square on per-record counts
    hits = c[:, present].sum(0).double()
    p = b / 39
    chi2 = (((hits - T * p) ** 2) / (T * p * (1 - p))).sum().item()
    assert stats.chi2.sf(chi2, df=38) > 1e-3
    # pair inclusion (uniform subsets): P[i and j] = b(b-1)/(n(n-1))
    both = (c[:, 1] * c[:, 2]).sum().item()
    p2 = b * (b - 1) / (39 * 38)
    assert abs(both - T * p2) < 5 * (T * p2) ** 0.5


def test_fixed_size_with_replacement_multinomial():
    b = 10
    c = samplers.fixed_size_with_replacement(b, T, ALL, _gen(3))
    assert c.sum(1).eq(b).all()
    assert int(c.max()) >= 2  # duplicates do happen with replacement
    k = c[:, 5].double()  # Binomial(b, 1/N): mean 0.25, variance 0.24375
    assert abs(k.mean().item() - b / N) < 5 * (b / N * (1 - 1 / N) / T) ** 0.5
    assert abs(k.var().item() - b / N * (1 - 1 / N)) < 0.05


def test_shuffled_once_per_epoch():
    c = samplers.shuffled(8, 50, ALL, _gen(4))  # 5 steps per epoch, 10 epochs
    assert c.sum(1).eq(8).all()
    epochs = c.reshape(10, 5, N).sum(1)
    assert epochs.eq(1).all()  # every record exactly once per epoch


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 30), frac=st.floats(0.01, 1.0), steps=st.integers(1, 5), seed=st.integers(0, 2**31))
def test_fixed_size_property(n, frac, steps, seed):
    b = max(1, round(frac * n))
    c = samplers.sample_counts(acc.FixedSize(b, n), steps, torch.ones(n, dtype=torch.bool), _gen(seed))
    assert c.sum(1).eq(b).all()
    assert int(c.max()) <= 1


def test_sample_counts_dispatch_and_errors():
    g = _gen(0)
    assert samplers.sample_counts(acc.Poisson(1.0), 3, ALL, g).eq(1).all()  # q = 1: full batch
    with pytest.raises(ValueError, match="dataset_size must be ≥ the 40 records present"):
        samplers.sample_counts(acc.FixedSize(5, 30), 3, ALL, g)
    with pytest.raises(ValueError, match=r"batch_size must be in \[1, 2\]"):
        samplers.fixed_size_without_replacement(3, 1, torch.tensor([True, True, False]), g)
    with pytest.raises(TypeError, match="present must be a 1-D bool tensor"):
        samplers.poisson(0.5, 1, torch.ones(3), g)
    with pytest.raises(ValueError, match=r"rate must be in \(0, 1\]"):
        samplers.poisson(1.5, 1, ALL, g)
    assert samplers.expected_batch_size(acc.Poisson(0.1), 50) == pytest.approx(5.0)
    assert samplers.expected_batch_size(acc.FixedSize(7, 50), 50) == 7.0
