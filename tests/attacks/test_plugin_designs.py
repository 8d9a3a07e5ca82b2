"""Designs for a user trainer beyond the default (docs/fault-detection.md): the mean-image canary and
the gradient-canary hook scored by the spread of its per-step updates (``step_spread``)."""

import shutil
from pathlib import Path

import pytest
import torch

import accountants as acc
from attacks import canaries, data, plugin
from audit import config, registry
from audit.score import audit_trainer

ROOT = Path(__file__).resolve().parents[2]


def test_mean_image_is_the_standardised_origin_and_its_weight_gradient_is_zero():
    d = data.digits().subset(slice(0, 50))
    c = canaries.mean_image(d, 3, generator=torch.Generator().manual_seed(0))
    assert c.kind == "mean_image" and c.x.shape == (3, 64) and not c.x.any()
    assert ((c.y >= 0) & (c.y < 10)).all()
    # closed form: for z = W x + b at x = 0, dL/dW = (softmax - onehot) x^T = 0; dL/db = softmax - onehot != 0
    model = torch.nn.Linear(64, 10)
    loss = torch.nn.functional.cross_entropy(model(c.x[:1].float()), c.y[:1])
    gw, gb = torch.autograd.grad(loss, [model.weight, model.bias])
    assert float(gw.abs().max()) == 0.0 and float(gb.norm()) > 0.1
    assert registry.canaries()["mean_image"].kind == "input"


def test_step_spread_is_the_spread_of_the_per_step_projections():
    # A "trainer" whose step t moves flat parameter 0 by a known amount a_t: the score is sum (a_t - mean)^2.
    d = data.digits().subset(slice(0, 20))
    steps = torch.tensor([0.5, -1.0, 2.0, 0.25], dtype=torch.float64)

    def scripted(x, y, *, seed, audit):
        model = torch.nn.Linear(64, 10)
        with torch.no_grad():
            model.weight.zero_()
            model.bias.zero_()
        audit.record(model.parameters())
        for a in steps:
            audit.canary_gradient(list(model.parameters()))
            with torch.no_grad():
                model.weight.view(-1)[0] -= float(a)
            audit.record(model.parameters())
        return model

    spec = acc.DPSGD(1.0, acc.Poisson(0.5), 4)
    for score, want in (("step_spread", float(((steps - steps.mean()) ** 2).sum())), ("inner_product", 1.75)):
        ctx = plugin.Context(scripted, d, plugin.DiracCanary(0), score=score, spec=spec, threat="white_box")
        assert plugin.run_trial(ctx, 0)["scores"][score][0] == pytest.approx(want, rel=1e-6)
    with pytest.raises(acc.InputError, match=r"step_spread.*DiracCanary"):
        plugin.Context(scripted, d, canaries.blank(d, 1), score="step_spread", spec=spec, threat="white_box")


REUSED = '''
import torch
import torch_trainer as t


def train(x, y, *, seed, audit=None):
    """torch_trainer.train with one bug: the noise is drawn once and reused at every step."""
    g = torch.Generator().manual_seed(seed)
    model = torch.nn.Linear(x.shape[1], 10)
    w, b = torch.zeros_like(model.weight.detach()), torch.zeros_like(model.bias.detach())
    noise = [t.NOISE_MULTIPLIER * t.CLIP_NORM * torch.randn(p.shape, generator=g) for p in (w, b)]
    if audit is not None:
        audit.record([w, b])
    for _ in range(t.STEPS):
        mask = torch.rand(x.shape[0], generator=g) < t.SAMPLE_RATE
        grads = t.per_example_gradients(w, b, x[mask], y[mask])
        if audit is not None:
            c = audit.canary_gradient([w, b])
            if c is not None:
                grads = [torch.cat([gi, ci[None]]) for gi, ci in zip(grads, c, strict=True)]
        norms = torch.cat([gi.flatten(1) for gi in grads], dim=1).norm(dim=1)
        factor = torch.clamp(t.CLIP_NORM / (norms + 1e-12), max=1.0)
        sums = [(gi * factor.view(-1, *[1] * (gi.ndim - 1))).sum(dim=0) for gi in grads]
        w = w - t.LEARNING_RATE * (sums[0] + noise[0]) / t.EXPECTED_BATCH
        b = b - t.LEARNING_RATE * (sums[1] + noise[1]) / t.EXPECTED_BATCH
        if audit is not None:
            audit.record([w, b])
    with torch.no_grad():
        model.weight.copy_(w)
        model.bias.copy_(b)
    return model
'''


def test_step_spread_catches_reused_noise_that_the_summed_projection_cannot(tmp_path, monkeypatch):
    """Noise reused across steps (docs/fault-detection.md): the final model leaks less than claimed, so the
    summed projection sees nothing, but every difference of two updates is noise-free. The spread score
    fires at 300 trials; the correct trainer, same design and trials, does not (one seed each: the bug's
    out-scores are exactly 0, so this is not a near call)."""
    shutil.copy(ROOT / "examples" / "own_training" / "torch_trainer.py", tmp_path / "torch_trainer.py")
    (tmp_path / "reused.py").write_text(REUSED, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = acc.DPSGD(3.0, acc.Poisson(0.5), 10)
    kw = dict(trials=300, canary="dirac", threat="white_box")
    assert audit_trainer("reused:train", spec, score="step_spread", **kw)["violation"]
    assert not audit_trainer("reused:train", spec, score="inner_product", **kw)["violation"]
    assert not audit_trainer("torch_trainer:train", spec, score="step_spread", **kw)["violation"]


def test_config_accepts_the_new_designs_for_a_user_trainer_only(tmp_path):
    base = ('[training]\ntrainer = "t:train"\nn_records = 30\nnoise_multiplier = 2.0\nsteps = 3\n'
            '[audit]\ntrials = 6\n')
    ok = [('dirac', 'white_box', 'step_spread'), ('mean_image', 'black_box', 'loss'),
          ('mean_image', 'white_box', 'inner_product')]
    for kind, threat, score in ok:
        text = base + f'[canary]\nkind = "{kind}"\n[attack]\nthreat_model = "{threat}"\nscore = "{score}"\n'
        c = config.loads(text)
        assert (c.canary.kind, c.attack.score) == (kind, score)
    bad = base + '[canary]\nkind = "blank"\n[attack]\nthreat_model = "white_box"\nscore = "step_spread"\n'
    with pytest.raises(acc.InputError, match=r"'step_spread' with canary\.kind 'dirac'"):
        config.loads(bad)
    with pytest.raises(acc.InputError, match=r"attack\.score must be one of"):  # dpaudit's own trainer has none
        config.loads('[attack]\nscore = "step_spread"\n')


def test_the_default_for_a_user_trainer_adds_the_mean_image_audit_unless_variants_are_given():
    """docs/fault-detection.md: blank + mean image, sharing the significance; a config's own [[variant]]s are kept."""
    base = ('[training]\ntrainer = "no_such_mod_for_default:train"\nn_records = 30\nnoise_multiplier = 2.0\n'
            'steps = 3\n')
    c = config.loads(base)
    assert [v.name for v in c.variants] == ["main", "mean_image"]
    assert [v.canary.kind for v in config.variants(c)] == ["blank", "mean_image"]
    assert {v.attack.threat_model for v in config.variants(c)} == {"black_box"}  # not importable: black box
    own = config.loads(base + '[[variant]]\nname = "a"\n[[variant]]\nname = "b"\ntraining.steps = 4\n')
    assert [v.name for v in own.variants] == ["a", "b"]
    assert {v.canary.kind for v in config.variants(own)} == {"blank"}
