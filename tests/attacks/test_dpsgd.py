"""DP-SGD trainer: exact per-example gradients, the step formula, model independence, and the
white-box law of a Dirac canary's statistic for every sampler."""

import math

import pytest
import torch
from scipy import stats

import accountants as acc
from attacks import canaries, dpsgd, models, samplers


def _models_and_data(digits100):
    imgs = digits100.as_images(8)
    return [
        (models.logistic_regression(64, 10), digits100),
        (models.mlp(64, 16, 10), digits100),
        (models.small_cnn(10, channels=4), imgs),
    ]


@pytest.mark.parametrize("which", [0, 1, 2], ids=["logreg", "mlp", "cnn"])
def test_per_example_gradients_equal_batch_of_one_loop(digits100, which):
    model, d = _models_and_data(digits100)[which]
    params = {k: v[0] for k, v in models.init_params(model, 1, torch.Generator().manual_seed(3)).items()}
    x, y = d.x[:12], d.y[:12]
    fast = dpsgd.per_example_gradients(model, params, x, y)
    for i in range(12):  # reference: autograd on a batch of size 1 (opacus' micro-batch check)
        p = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
        loss = torch.nn.functional.cross_entropy(torch.func.functional_call(model, p, (x[i : i + 1],)), y[i : i + 1])
        g = torch.autograd.grad(loss, list(p.values()))
        for (name, _v), gi in zip(p.items(), g, strict=True):
            # brief asks 1e-6; float64 vmap vs autograd agree to round-off, so 1e-10 is still safe
            torch.testing.assert_close(fast[name][i], gi, atol=1e-10, rtol=0)


def test_one_step_matches_manual_computation(digits100):
    """q = 1, T = 1, σ tiny: θ1 = θ0 − η Σ_i clip_C(g_i) / N (Abadi et al. 2016 Alg. 1, noise ≈ 0)."""
    model, C, lr = models.logistic_regression(64, 10), 0.5, 0.7
    spec = acc.DPSGD(1e-12, acc.Poisson(1.0), steps=1)
    p0 = models.init_params(model, 1, torch.Generator().manual_seed(1))
    res = dpsgd.train(spec, model, digits100, clip_norm=C, learning_rate=lr, params=p0,
                      generator=torch.Generator().manual_seed(2))
    g = dpsgd.per_example_gradients(model, {k: v[0] for k, v in p0.items()}, digits100.x, digits100.y)
    flat = models.flatten(g)
    clipped = flat * torch.clamp(C / flat.norm(dim=1, keepdim=True), max=1.0)
    expect = models.flatten(p0)[0] - lr * clipped.sum(0) / 100
    torch.testing.assert_close(models.flatten(res.params)[0], expect, atol=1e-10, rtol=0)
    assert res.expected_batch_size == 100
    assert res.batch_sizes.tolist() == [[100]]


def test_models_do_not_depend_on_neighbours(digits100):
    """Model r's run depends only on its own generator: trained alone == trained among others."""
    model = models.logistic_regression(64, 10)
    spec = acc.DPSGD(1.0, acc.Poisson(0.2), steps=5)
    kw = dict(clip_norm=1.0, learning_rate=0.5)
    together = dpsgd.train(spec, model, digits100, n_models=3,
                           generator=[torch.Generator().manual_seed(s) for s in (10, 11, 12)], **kw)
    alone = dpsgd.train(spec, model, digits100, generator=[torch.Generator().manual_seed(11)], **kw)
    torch.testing.assert_close(models.flatten(together.params)[1], models.flatten(alone.params)[0],
                               atol=1e-12, rtol=0)
    assert torch.equal(together.batch_sizes[1], alone.batch_sizes[0])


@pytest.mark.parametrize("which", [1, 2], ids=["mlp", "cnn"])
def test_trains_every_model_kind(digits100, which):
    model, d = _models_and_data(digits100)[which]
    spec = acc.DPSGD(0.5, acc.FixedSize(16, 100), steps=3)
    p0 = models.init_params(model, 2, [torch.Generator().manual_seed(s) for s in (0, 1)])
    res = dpsgd.train(spec, model, d, clip_norm=1.0, learning_rate=0.5, n_models=2, params=p0,
                      generator=[torch.Generator().manual_seed(s) for s in (2, 3)])
    moved = (models.flatten(res.params) - models.flatten(p0)).norm(dim=1)
    assert bool(torch.isfinite(moved).all())
    assert bool((moved > 0).all())
    assert res.batch_sizes.eq(16).all()


def test_poisson_normalises_by_expected_batch_size(digits100):
    """One Poisson step (q = 0.3, σ ≈ 0): θ1 = θ0 − η Σ_{i∈B} clip(g_i) / (q·N), never / |B| (opacus #571)."""
    model, lr = models.logistic_regression(64, 10), 0.1
    spec = acc.DPSGD(1e-12, acc.Poisson(0.3), steps=1)
    p0 = models.init_params(model, 1, torch.Generator().manual_seed(1))
    res = dpsgd.train(spec, model, digits100, clip_norm=1.0, learning_rate=lr, params=p0,
                      generator=torch.Generator().manual_seed(5))
    # with params given, the model's generator draws the batch first: redraw it the same way
    batch = samplers.sample_counts(spec.sampling, 1, torch.ones(100, dtype=torch.bool),
                                   torch.Generator().manual_seed(5))[0].bool()
    assert int(batch.sum()) == int(res.batch_sizes[0, 0]) != 30  # the realised size is not q·N ...
    g = models.flatten(dpsgd.per_example_gradients(model, {k: v[0] for k, v in p0.items()},
                                                   digits100.x[batch], digits100.y[batch]))
    clipped = g * torch.clamp(1.0 / g.norm(dim=1, keepdim=True), max=1.0)
    expect = models.flatten(p0)[0] - lr * clipped.sum(0) / 30.0  # ... and the divisor is q·N = 30
    assert res.expected_batch_size == pytest.approx(30.0)
    torch.testing.assert_close(models.flatten(res.params)[0], expect, atol=1e-10, rtol=0)


def test_trainer_validates(digits100):
    model = models.logistic_regression(64, 10)
    spec = acc.DPSGD(1.0, acc.Poisson(0.3), steps=2)
    with pytest.raises(ValueError, match="clip_norm"):
        dpsgd.train(spec, model, digits100, clip_norm=0.0, learning_rate=0.1)
    with pytest.raises(TypeError, match=r"spec must be an accountants\.DPSGD"):
        dpsgd.train(acc.Poisson(0.3), model, digits100, clip_norm=1.0, learning_rate=0.1)
    with pytest.raises(ValueError, match=r"gradient_canaries must have shape \(m, D=650\)"):
        dpsgd.train(spec, model, digits100, clip_norm=1.0, learning_rate=0.1, gradient_canaries=torch.zeros(1, 3))


# Law of the white-box statistic o_t = <e_j, u_t>·E|B|/C of a Dirac canary (norm C) on a quiet
# coordinate: o_t = k_t + N(0, σ²) with k_t the canary's draws (Nasr et al. 2023 §3), so
# E o = E k and Var o = σ² + Var k. At q = 1 (Poisson rate 1, fixed size b = N) k ≡ 1: N(1, σ²).
SIGMA = 0.8
N_DATA = 100
SAMPLERS = [
    ("poisson_q1", acc.Poisson(1.0), 1.0, 0.0),
    ("poisson_q0.3", acc.Poisson(0.3), 0.3, 0.3 * 0.7),
    ("wor_b=N", acc.FixedSize(N_DATA + 1, N_DATA + 1), 1.0, 0.0),
    ("wor_b=N/2", acc.FixedSize(50, N_DATA + 1), 50 / 101, 50 / 101 * 51 / 101),
    ("wr_b=N", acc.FixedSize(N_DATA + 1, N_DATA + 1, replace=True), 1.0, 1 - 1 / 101),  # Binomial(N, 1/N)
]


def _dirac_run(d, sampling, present_canary, seed, R=10, T=100):
    model = models.logistic_regression(64, 10)
    p0 = {k: v[0] for k, v in models.init_params(model, 1, torch.Generator().manual_seed(0)).items()}
    coord = canaries.quiet_coordinates(model, p0, d, 1)
    c = canaries.dirac(coord, dim=650, norm=1.0)
    present = torch.ones(R, d.n + 1, dtype=torch.bool)
    present[:, -1] = present_canary
    spec = acc.DPSGD(SIGMA, sampling, steps=T)
    res = dpsgd.train(spec, model, d, clip_norm=1.0, learning_rate=0.5, n_models=R, present=present,
                      gradient_canaries=c.vectors, probes=c.vectors,
                      generator=[torch.Generator().manual_seed(seed * 1000 + r) for r in range(R)])
    return res.observations[..., 0].reshape(-1)


@pytest.mark.parametrize(("name", "sampling", "mean", "var_k"), SAMPLERS, ids=[s[0] for s in SAMPLERS])
def test_white_box_statistic_law(digits100, name, sampling, mean, var_k):
    o_in = _dirac_run(digits100, sampling, True, seed=1)
    n = o_in.numel()  # 1,000 independent steps
    var = SIGMA**2 + var_k
    # seeded; 5 standard errors for the mean, and Var(s²) ≈ 2σ⁴/n for the variance (+ kurtosis slack)
    assert abs(o_in.mean().item() - mean) < 5 * math.sqrt(var / n)
    assert abs(o_in.var().item() - var) < 5 * var * math.sqrt(3 / n)
    if var_k == 0.0:  # q = 1: exactly Gaussian N(1, σ²)
        assert stats.kstest(o_in.numpy(), "norm", args=(1.0, SIGMA)).pvalue > 1e-3
    if not (isinstance(sampling, acc.FixedSize) and sampling.batch_size > N_DATA):  # out-world needs b ≤ n
        o_out = _dirac_run(digits100, sampling, False, seed=2)
        assert stats.kstest(o_out.numpy(), "norm", args=(0.0, SIGMA)).pvalue > 1e-3
