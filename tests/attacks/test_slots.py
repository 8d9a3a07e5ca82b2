"""Quiet canary slots (attacks.models.Slotted) and the trainer's sparse Dirac path (attacks.canaries.DiracCanaries).

The claims pinned here (docs/worst-case.md, "One run at scale"):

- DP-SGD on a slotted model is exact DP-SGD: with the same draws and noise, its updates on the natural
  coordinates equal the unslotted model's (no natural gradient touches a slot, so no clipping norm
  changes), and each slot coordinate holds exactly (canary draws)·C + σC·z, z its own N(0, 1) number.
- The sparse Dirac path gives the same numbers as the dense (m, D) canaries.
"""

import pytest
import torch

import accountants as acc
from accountants.errors import InputError
from attacks import canaries, dpsgd, games, ghost, models
from attacks import membership as mia

M = 6


def _gens(seed=0, R=2):
    return [torch.Generator().manual_seed(seed + r) for r in range(R)]


def test_slots_come_last_and_start_at_zero_without_a_draw():
    base, sl = models.logistic_regression(64, 10), models.with_slots(models.logistic_regression(64, 10), M)
    assert models.slot_coordinates(sl).tolist() == list(range(650, 650 + M))
    p0 = models.init_params(base, 1, torch.Generator().manual_seed(5))
    p1 = models.init_params(sl, 1, torch.Generator().manual_seed(5))
    # the natural parameters get exactly the unslotted model's draws; the slots are 0 (no draw)
    torch.testing.assert_close(models.flatten(p1)[:, :650], models.flatten(p0), rtol=0, atol=0)
    assert not models.flatten(p1)[:, 650:].any()
    assert ghost.for_model(sl) is not None


def test_bad_slots_are_refused():
    with pytest.raises(InputError, match="slots"):
        models.with_slots(models.logistic_regression(64, 10), 0)
    with pytest.raises(InputError, match="Slotted"):
        models.slot_coordinates(models.logistic_regression(64, 10))
    with pytest.raises(InputError, match="distinct"):
        canaries.DiracCanaries(torch.tensor([3, 3]), 8)
    with pytest.raises(InputError, match=r"\[0, 7\]"):
        canaries.DiracCanaries(torch.tensor([8]), 8)


def _fixed_noise(monkeypatch, z):
    """Every step's noise rows are z[:, t, :D] (the trainer's D), whatever the model: the same numbers on the
    natural coordinates for the slotted and the unslotted model."""
    def rows(noise, dev):
        for t in range(noise.steps):
            yield z[:, t, : noise.dim].to(dev)
    monkeypatch.setattr(dpsgd, "_noise_rows", rows)


@pytest.mark.parametrize("which", ["logreg", "mlp"])
def test_slotted_dp_sgd_is_exact_dp_sgd(monkeypatch, digits100, which):
    """Same draws and noise: natural coordinates equal the unslotted model's; slot j holds draws_j·C + σC·z_j."""
    make = (lambda: models.logistic_regression(64, 10)) if which == "logreg" else (lambda: models.mlp(64, 8, 10))
    base, sl = make(), models.with_slots(make(), M)
    D0 = models.num_params(models.init_params(base, 1))
    R, T, sigma, C, lr = 2, 5, 0.8, 0.7, 0.5
    spec = acc.DPSGD(sigma, acc.Poisson(0.4), steps=T)
    z = torch.randn(R, T, D0 + M, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
    _fixed_noise(monkeypatch, z)
    present = torch.ones(R, digits100.n + M, dtype=torch.bool)
    present[:, digits100.n + 1 :: 2] = False  # some canaries out
    # the unslotted run has the same N (M gradient slots, all absent): the same draws and E|B|
    absent = present.clone()
    absent[:, digits100.n :] = False
    ref = dpsgd.train(spec, base, digits100, clip_norm=C, learning_rate=lr, n_models=R, present=absent,
                      gradient_canaries=canaries.dirac(range(M), D0, norm=C).vectors, generator=_gens(),
                      record_updates=True)
    dc = canaries.dirac_slots(sl, norm=2 * C)  # norm above C: clipped to C like any gradient
    out = dpsgd.train(spec, sl, digits100, clip_norm=C, learning_rate=lr, n_models=R, present=present,
                      gradient_canaries=dc, probes=dc, generator=_gens(), record_updates=True)
    assert ref.updates is not None and out.updates is not None and out.observations is not None
    # same functions summed in the same order: equal to round-off (1e-12 is ~1e4 ulps of these sizes)
    torch.testing.assert_close(out.updates[..., :D0], ref.updates, rtol=0, atol=1e-12)
    e = out.expected_batch_size
    assert e == ref.expected_batch_size == 0.4 * (digits100.n + M)
    draws = (out.batch_sizes - ref.batch_sizes).double()  # (R, T) canary draws per step
    slot_units = out.updates[..., D0:] * (e / C)  # (R, T, M) in units of C
    # exactly draws + σ·z: the noise is σC on each slot coordinate, the canary C per draw
    counts = (slot_units - sigma * z[..., D0:]).round()
    assert torch.all(counts >= 0)
    torch.testing.assert_close(slot_units, counts + sigma * z[..., D0:], rtol=0, atol=1e-12)
    torch.testing.assert_close(counts.sum(-1), draws, rtol=0, atol=0)
    assert not counts[:, :, 1::2].any()  # absent canaries are never drawn
    torch.testing.assert_close(out.observations, slot_units, rtol=0, atol=1e-12)


def test_slot_noise_has_std_sigma_c(digits100):
    """With the trainer's own noise stream, a slot's observation minus its draws is N(0, σ²) in units of C.

    m·T = 8,000 numbers: the sample std's sd is σ/√16,000 ≈ 0.8 % of σ; 4 % is 5 sds (seeded: one outcome)."""
    sl = models.with_slots(models.logistic_regression(64, 10), 2000)
    dc = canaries.dirac_slots(sl)
    spec = acc.DPSGD(1.5, acc.Poisson(0.3), steps=4)
    present = torch.ones(1, digits100.n + dc.m, dtype=torch.bool)
    present[:, digits100.n :] = False  # canaries out: the slot holds noise only
    out = dpsgd.train(spec, sl, digits100, clip_norm=1.0, learning_rate=0.5, present=present, gradient_canaries=dc,
                      probes=dc, generator=torch.Generator().manual_seed(1))
    assert out.observations is not None
    assert abs(float(out.observations.std()) / 1.5 - 1) < 0.04
    assert abs(float(out.observations.mean())) < 4 * 1.5 / 8000**0.5


@pytest.mark.parametrize("slotted", [True, False], ids=["slots", "quiet-coordinates"])
def test_sparse_dirac_path_equals_dense(digits100, slotted):
    base = models.logistic_regression(64, 10)
    model = models.with_slots(base, M) if slotted else base
    D = models.num_params(models.init_params(model, 1))
    coords = models.slot_coordinates(model) if slotted else torch.tensor([0, 32, 39, 5, 17, 640])
    sparse = canaries.DiracCanaries(coords, D, norm=1.0)
    dense = sparse.dense().vectors
    spec = acc.DPSGD(1.0, acc.Poisson(0.5), steps=4)
    present = torch.rand(3, digits100.n + M, generator=torch.Generator().manual_seed(2)) < 0.7
    kw = dict(clip_norm=1.0, learning_rate=0.5, n_models=3, present=present, record_updates=True, keep_initial=True)
    a = dpsgd.train(spec, model, digits100, gradient_canaries=sparse, probes=sparse, generator=_gens(R=3), **kw)
    b = dpsgd.train(spec, model, digits100, gradient_canaries=dense, probes=dense, generator=_gens(R=3), **kw)
    # the same additions of the same numbers: bit-identical
    torch.testing.assert_close(a.updates, b.updates, rtol=0, atol=0)
    torch.testing.assert_close(a.observations, b.observations, rtol=0, atol=0)


def test_one_run_game_sparse_equals_dense(digits100):
    sl = models.with_slots(models.logistic_regression(64, 10), M)
    setup = games.Setup(acc.DPSGD(1.0, acc.Poisson(0.5), steps=4), sl, digits100)
    sparse = canaries.dirac_slots(sl)
    scores = [mia.LikelihoodRatio(), mia.InnerProductSum()]
    a = games.one_run_game(setup, sparse, scores=scores, n_runs=3, seed=4, progress=False)
    b = games.one_run_game(setup, sparse.dense(), scores=scores, n_runs=3, seed=4, progress=False)
    torch.testing.assert_close(a.truth, b.truth)
    for k in a.scores:
        torch.testing.assert_close(a.scores[k], b.scores[k], rtol=0, atol=0)


def _observations(model, probes, present, spec, data):
    out = dpsgd.train(spec, model, data, clip_norm=1.0, learning_rate=0.5, present=present, gradient_canaries=probes,
                      probes=probes, generator=torch.Generator().manual_seed(3))
    assert out.observations is not None
    return out.observations[0]  # (T, m)


def test_a_slot_canary_sees_nothing_of_the_other_canaries_bits(digits100):
    """The structural argument behind vouching (docs/auditing.md, "When dpaudit vouches"), pinned exactly: under
    Poisson, a canary's observations are bit-identical whatever the other canaries' (and the natural records')
    membership; with a canary on a natural coordinate, or fixed-size batches, they are not (the controls)."""
    m = 40
    spec = acc.DPSGD(1.0, acc.Poisson(0.5), steps=6)
    sl = models.with_slots(models.logistic_regression(64, 10), m)
    dc = canaries.dirac_slots(sl)
    g = torch.Generator().manual_seed(8)
    a = torch.rand(1, digits100.n + m, generator=g) < 0.5
    b = torch.rand(1, digits100.n + m, generator=g) < 0.5
    both = (a & b)[0, digits100.n :]  # canaries in on both runs; the other canaries and records differ
    assert both.sum() >= 5 and (a != b).sum() > 20
    oa, ob = (_observations(sl, dc, p, spec, digits100) for p in (a, b))
    torch.testing.assert_close(oa[:, both], ob[:, both], rtol=0, atol=0)
    # control 1: the same canaries on natural coordinates (weights that records touch) see the training
    base = models.logistic_regression(64, 10)
    natural = canaries.DiracCanaries(torch.arange(100, 100 + m), 650)
    na, nb = (_observations(base, natural, p, spec, digits100) for p in (a, b))
    assert not torch.equal(na[:, both], nb[:, both])
    # control 2: fixed-size batches couple the inclusions (the b smallest keys among the present records win)
    fixed = acc.DPSGD(1.0, acc.FixedSize(30, digits100.n + m), steps=6)
    fa, fb = (_observations(sl, dc, p, fixed, digits100) for p in (a, b))
    assert not torch.equal(fa[:, both], fb[:, both])


def test_hidden_state_game_sparse_equals_dense(digits100):
    """The final-model projection ⟨θ_0 − θ_T, e_c⟩ of sparse Dirac canaries is the dense one's."""
    from attacks.threat import HiddenState

    sl = models.with_slots(models.logistic_regression(64, 10), M)
    setup = games.Setup(acc.DPSGD(1.0, acc.Poisson(0.5), steps=4), sl, digits100)
    sparse = canaries.dirac_slots(sl)
    a = games.one_run_game(setup, sparse, threat=HiddenState(), n_runs=2, seed=4, progress=False)
    b = games.one_run_game(setup, sparse.dense(), threat=HiddenState(), n_runs=2, seed=4, progress=False)
    for k in a.scores:
        torch.testing.assert_close(a.scores[k], b.scores[k], rtol=0, atol=1e-12)
