"""Issue 28: the trainer draws its noise a block of steps at a time (memory grows with models,
not models × steps) with the very numbers of one ``randn(T, D)`` per model, and its stages are
separate functions (sampling, per-example gradients and clipping, noise, update)."""

from __future__ import annotations

import pytest
import torch

import accountants as acc
from attacks import dpsgd, models


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize(("T", "D", "block"), [(100, 650, 7), (3, 5, 1), (1, 7, 1), (5, 3, 1), (50, 17, 3),
                                               (10, 650, 1), (4, 4, 2), (8, 2, 8)])
def test_noise_stream_equals_one_randn_call(dtype, T, D, block, monkeypatch):
    # The reference is the draw train() made before the stream existed: randn(T, D) per model,
    # from that model's generator. Exact equality (the same uniforms, the same 16-value blocks).
    monkeypatch.setattr(dpsgd, "_NOISE_BLOCK_ELEMS", 2 * D * block)
    gens = [torch.Generator().manual_seed(s) for s in (3, 4)]
    ref = [torch.Generator().manual_seed(s) for s in (3, 4)]
    want = torch.stack([torch.randn(T, D, generator=g, dtype=dtype) for g in ref])
    stream = dpsgd.NoiseStream(gens, T, D, dtype)
    assert stream.block_steps == min(T, block)
    got = torch.cat([stream.rows(t, min(T, t + block)) for t in range(0, T, block)], dim=1)
    assert torch.equal(got, want)
    # and each generator ends where one randn(T, D) leaves it
    assert all(torch.equal(g.get_state(), h.get_state()) for g, h in zip(gens, ref, strict=True))


def test_noise_is_not_materialised_for_all_steps(digits100, monkeypatch):
    # Memory ∝ models × block, not models × steps: no rows call asks for more than the block.
    spec = acc.DPSGD(1.0, acc.Poisson(0.1), steps=9)
    model = models.logistic_regression(64, 10)
    D = models.num_params(models.init_params(model, 1))
    monkeypatch.setattr(dpsgd, "_NOISE_BLOCK_ELEMS", 3 * 2 * D)  # 3 models × 2 steps
    asked: list[tuple[int, int]] = []
    rows = dpsgd.NoiseStream.rows

    def spy(self, t0, t1):
        asked.append((t0, t1))
        return rows(self, t0, t1)

    monkeypatch.setattr(dpsgd.NoiseStream, "rows", spy)
    dpsgd.train(spec, model, digits100, clip_norm=1.0, learning_rate=0.5, n_models=3,
                generator=[torch.Generator().manual_seed(s) for s in range(3)])
    assert asked == [(0, 2), (2, 4), (4, 6), (6, 8), (8, 9)]


@pytest.mark.parametrize("shared", [False, True], ids=["per-model", "shared"])
def test_block_size_does_not_change_a_run(digits100, shared, monkeypatch):
    # Trials stay byte-identical whatever the block (one block == the old all-steps draw), and a
    # shared generator ends in the same state (the noise is skipped exactly as it was drawn).
    spec = acc.DPSGD(0.8, acc.Poisson(0.1), steps=6)
    model = models.logistic_regression(64, 10)
    probes = torch.randn(2, 650, generator=torch.Generator().manual_seed(9))

    def run(block_elems):
        monkeypatch.setattr(dpsgd, "_NOISE_BLOCK_ELEMS", block_elems)
        g = torch.Generator().manual_seed(1) if shared else [torch.Generator().manual_seed(s) for s in range(3)]
        res = dpsgd.train(spec, model, digits100, clip_norm=1.0, learning_rate=0.5, n_models=3, generator=g,
                          probes=probes, record_updates=True)
        return res, (g.get_state() if shared else None)

    (a, sa), (b, sb) = run(1 << 30), run(1)
    assert torch.equal(a.updates, b.updates) and torch.equal(a.observations, b.observations)
    assert all(torch.equal(a.params[k], b.params[k]) for k in a.params)
    if shared:
        assert torch.equal(sa, sb)


def test_generators_end_where_the_old_trainer_left_them(digits100):
    # Before the stream, train drew randn(T, D) per model right after its batches; a caller's
    # generators (own or shared) must end in that same state. Reference: the same draws by hand.
    from attacks import samplers

    spec = acc.DPSGD(1.0, acc.Poisson(0.1), steps=5)
    model = models.logistic_regression(64, 10)
    present = torch.ones(100, dtype=torch.bool)

    def by_hand(g):
        models.draw_init(models.init_plan(model, models.Init.DEFAULT, torch.float64), g)
        samplers.sample_counts(spec.sampling, 5, present, g)
        torch.randn(5, 650, generator=g, dtype=torch.float64)

    own = [torch.Generator().manual_seed(s) for s in (1, 2)]
    dpsgd.train(spec, model, digits100, clip_norm=1.0, learning_rate=0.5, n_models=2, generator=own)
    for s, g in zip((1, 2), own, strict=True):
        ref = torch.Generator().manual_seed(s)
        by_hand(ref)
        assert torch.equal(g.get_state(), ref.get_state())
    shared = torch.Generator().manual_seed(7)
    dpsgd.train(spec, model, digits100, clip_norm=1.0, learning_rate=0.5, n_models=2, generator=shared)
    ref = torch.Generator().manual_seed(7)
    by_hand(ref)
    by_hand(ref)
    assert torch.equal(shared.get_state(), ref.get_state())


def test_stages_compose_to_one_step(digits100):
    # One step by hand from the stage functions equals train() (q = 1, T = 1).
    model = models.logistic_regression(64, 10)
    spec = acc.DPSGD(0.5, acc.Poisson(1.0), steps=1)
    p0 = models.init_params(model, 1, torch.Generator().manual_seed(1))
    res = dpsgd.train(spec, model, digits100, clip_norm=1.0, learning_rate=0.3, params=p0,
                      generator=torch.Generator().manual_seed(2))
    from attacks.faults import FaultBase

    trainer = FaultBase()
    present = torch.ones(1, 100, dtype=torch.bool)
    draws = dpsgd.sample_draws(trainer, spec.sampling, 1, 650, present, [torch.Generator().manual_seed(2)],
                               None, 100.0, 100, 0, torch.float64)
    grads = dpsgd._StepGradients(model, p0, digits100.x, digits100.y, 1, draws.widths[0], True)
    theta = models.flatten(p0).clone()
    s = grads.clipped_sum(theta, draws.idx[:, 0], draws.cnt[:, 0].to(torch.float64), 1.0)
    noisy = dpsgd.add_noise(s, 0.5, draws.noise.rows(0, 1)[:, 0])
    theta, _ = dpsgd.update(trainer, theta, noisy, 100.0, draws.batch_sizes[:, 0], 0.3)
    torch.testing.assert_close(theta, models.flatten(res.params), rtol=0, atol=0)


def test_sample_draws_grows_its_store_for_a_wide_step():
    # The per-model store is sized to the widest plausible step (expected + 6 sd); a step that
    # draws more (here: every record at step 1 while E|B| = 1) grows it and loses nothing.
    class AllAtStepOne:
        def batch_counts(self, sampling, steps, present, generator, expected):
            c = torch.zeros(steps, present.numel(), dtype=torch.int16)
            c[0, 3] = 1
            c[1, :] = 2
            return c

    d = dpsgd.sample_draws(AllAtStepOne(), acc.Poisson(0.05), 3, 4, torch.ones(2, 20, dtype=torch.bool),
                           [torch.Generator().manual_seed(s) for s in (1, 2)], None, 1.0, 20, 0, torch.float64)
    assert d.widths == [1, 20, 0]
    assert d.idx.shape == (2, 3, 20)
    assert d.idx[0, 0, 0] == 3 and d.cnt[0, 0, 0] == 1 and d.cnt[0, 0, 1:].sum() == 0
    assert torch.equal(d.idx[1, 1], torch.arange(20)) and bool((d.cnt[:, 1] == 2).all())
    assert d.batch_sizes.tolist() == [[1, 40, 0], [1, 40, 0]]


def test_sample_draws_keeps_copies_not_views():
    # A canary-count view kept each model's whole (T, N) counts alive. (Measured, not asserted:
    # 200 models × 300 steps of draws took 313 MB of peak RSS with small per-model tensors between
    # the samplers' (T, N) temporaries, 43 MB with the stores allocated up front; docs/scale.md.)
    d = dpsgd.sample_draws(dpsgd.FaultBase(), acc.Poisson(0.05), 30, 8, torch.ones(5, 102, dtype=torch.bool),
                           [torch.Generator().manual_seed(s) for s in range(5)], None, 5.0, 100, 2,
                           torch.float64)
    assert d.idx.is_contiguous() and d.canary_counts.shape == (5, 30, 2)
    assert d.canary_counts._base is None  # a copy, not a view that keeps each model's (T, N) counts alive


class _PerModelPoisson(dpsgd.FaultBase):
    """The honest trainer through the per-model sampling path (batch_counts overridden, same draws)."""

    def batch_counts(self, sampling, steps, present, generator, expected):
        return super().batch_counts(sampling, steps, present, generator, expected)


@pytest.mark.parametrize("shared", [False, True], ids=["per-model", "shared"])
@pytest.mark.parametrize("group", [1, 3 * 40 * 7, 1 << 22])  # one model, 3 models, all models per group
def test_grouped_poisson_masks_equal_the_per_model_path(shared, group, monkeypatch):
    # The honest Poisson masks are indexed a group of models at a time; the draws (and the generator
    # states after them) and every index, count, width, size and canary count must equal the
    # per-model path's, bit for bit, with absent records, canary slots and a step wider than the
    # store planned (q = 0.6 with E|B| given as 1: the store grows).
    monkeypatch.setattr(dpsgd, "_MASK_GROUP_ELEMS", group)
    present = torch.rand(7, 40, generator=torch.Generator().manual_seed(5)) < 0.8
    plan = models.init_plan(models.logistic_regression(4, 3), models.Init.DEFAULT, torch.float64)

    def draws(trainer):
        g = torch.Generator().manual_seed(2) if shared else [torch.Generator().manual_seed(s) for s in range(7)]
        gens = dpsgd._generators(g, 7)
        d = dpsgd.sample_draws(trainer, acc.Poisson(0.6), 7, 15, present, gens, plan, 1.0, 38, 2, torch.float64)
        return d, torch.stack([h.get_state() for h in ([g] if shared else g)])

    (a, sa), (b, sb) = draws(dpsgd.FaultBase()), draws(_PerModelPoisson())
    assert a.widths == b.widths and max(a.widths) > 7  # grown past the planned store (7 wide)
    for name in ("theta0", "idx", "cnt", "batch_sizes", "canary_counts"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert torch.equal(a.noise.rows(0, 7), b.noise.rows(0, 7)) and torch.equal(sa, sb)


@pytest.mark.parametrize("arch", ["logistic", "mlp", "cnn"])
def test_model_slices_do_not_change_a_run(arch, monkeypatch):
    # The closed-form step runs a slice of models at a time; one model per slice and all models in
    # one slice give bit-identical runs (stored trials do not depend on _SLICE_BYTES).
    from attacks import data

    d = data.digits(images=arch == "cnn").subset(slice(0, 150))
    model = {"logistic": models.logistic_regression(64, 10), "mlp": models.mlp(64, 16, 10),
             "cnn": models.small_cnn(10)}[arch]
    spec = acc.DPSGD(0.9, acc.Poisson(0.1), steps=4)

    def run(slice_bytes):
        monkeypatch.setattr(dpsgd, "_SLICE_BYTES", slice_bytes)
        return dpsgd.train(spec, model, d, clip_norm=0.5, learning_rate=0.5, n_models=5, record_updates=True,
                           generator=[torch.Generator().manual_seed(s) for s in range(5)])

    a, b = run(1), run(1 << 40)
    assert torch.equal(a.updates, b.updates) and torch.equal(a.update_norms, b.update_norms)
    assert all(torch.equal(a.params[k], b.params[k]) for k in a.params)
