"""The black-box ``projection`` score of a user trainer (attacks/plugin.py) and the black-box default that uses it."""

import copy
import textwrap

import pytest
import torch

from accountants.errors import InputError
from attacks import canaries, data, plugin
from attacks.games import trial_seed
from audit import config


@pytest.fixture(scope="module")
def small():
    d = data.digits().subset(slice(0, 30))
    return d, canaries.blank(d, 1, generator=torch.Generator().manual_seed(0))


def _gd(x, y, start=0.0, steps=3, lr=0.5):
    """Noise-free full-batch gradient descent (sum of the examples' losses) on a linear model from θ_0 = start."""
    model = torch.nn.Linear(x.shape[1], 10)
    with torch.no_grad():
        model.weight.fill_(start)
        model.bias.fill_(start)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y, reduction="sum").backward()
        opt.step()
    return model


def gd_train(x, y, *, seed):
    return _gd(x, y)


def test_a_member_scores_higher_than_a_non_member(small, tmp_path):
    # no noise, no clipping: the canary's own gradient step moves θ_T against its direction, so every member's
    # score exceeds every non-member's (higher ⇒ member, the order every audit reads)
    d, c = small
    ctx = plugin.Context(gd_train, d, c, seed=3, score="projection")
    out = plugin.multi_run_game(ctx, n_trials=8, progress=False, run_dir=tmp_path)
    s, m = out.scores["projection"], out.truth
    assert 0 < int(m.sum()) < 8
    assert float(s[m].min()) > float(s[~m].max())
    # every trial records the label the projection chose (the report names it); the game's metadata holds it
    label = int(plugin._projection_game(ctx, plugin._trainer_of(ctx), 0)[0].y[0])
    assert out.metadata["canary_labels"] == [label]
    assert (tmp_path / plugin.TRIALS_FILE).read_text().count(f'"canary_label": {label}') == 8
    loss = plugin.multi_run_game(plugin.Context(gd_train, d, c, seed=3, score="loss"), n_trials=2, progress=False)
    assert "canary_labels" not in loss.metadata  # the loss score keeps the configured label


def test_directions_are_per_tensor_clipped_gradients_at_the_template(small):
    d, c = small
    model = _gd(d.x.to(torch.float32), d.y, lr=0.01)
    (dirs,) = plugin.projection_directions(model, c.x.to(torch.float32), c.y, 2.0)
    named = dict(model.named_parameters())
    params = {k: p.detach().clone().requires_grad_(True) for k, p in named.items()}
    loss = torch.nn.functional.cross_entropy(torch.func.functional_call(model, params, (c.x.to(torch.float32),)), c.y)
    grads = torch.autograd.grad(loss, list(params.values()))
    for di, gi in zip(dirs, grads, strict=True):
        # each tensor clipped to C = 2 on its own, then divided by C: norm min(‖g_l‖/C, 1)
        # (float32 gradients: 1e-6 relative)
        assert float(di.norm()) == pytest.approx(min(float(gi.norm()) / 2.0, 1.0), rel=1e-6)
        assert float(torch.nn.functional.cosine_similarity(di.flatten(), gi.double().flatten(), dim=0)) == \
            pytest.approx(1.0, abs=1e-6)
    # the weight's gradient (‖r‖·‖x‖) is clipped, the bias's (‖r‖ ≤ √2 < C) is not
    assert float(dirs[0].norm()) == pytest.approx(1.0) and float(dirs[1].norm()) < 0.75
    # the mean image (x = 0 in model space) has no weight gradient: its weight direction is 0, the bias's is not
    mean = canaries.mean_image(d, 1, generator=torch.Generator().manual_seed(0))
    (w, b), = plugin.projection_directions(model, mean.x.to(torch.float32), mean.y, 1.0)
    assert float(w.abs().max()) == 0.0 and float(b.norm()) > 0


def test_a_constant_shift_of_the_parameters_shifts_every_score_alike(small):
    # what makes an unknown fixed start θ_0 harmless: with the directions fixed, θ_T + a (a fixed vector) moves every
    # trial's score by −⟨a, d⟩, so every threshold test (ranks) is unchanged
    d, c = small
    dirs = plugin.projection_directions(_gd(d.x.to(torch.float32), d.y, lr=0.01), c.x.to(torch.float32), c.y, 1.0)
    models = [_gd(d.x[:k].to(torch.float32), d.y[:k], lr=0.01) for k in (10, 20, 30)]
    base = [plugin.projection_scores(m, dirs, "t", 0)[0] for m in models]
    g = torch.Generator().manual_seed(1)
    shift = [0.3 * torch.randn(p.shape, generator=g) for p in models[0].parameters()]
    for m in models:
        with torch.no_grad():
            for p, a in zip(m.parameters(), shift, strict=True):
                p.add_(a)
    moved = [plugin.projection_scores(m, dirs, "t", 0)[0] for m in models]
    shifts = [a - b for a, b in zip(moved, base, strict=True)]
    want = -sum(float((a.double() * x).sum()) for a, x in zip(shift, dirs[0], strict=True))
    assert abs(want) > 0.01  # a shift the score sees; float32 parameters: 1e-5 relative
    assert shifts == pytest.approx([want] * 3, rel=1e-5)


def test_the_directions_come_from_canary_free_template_trials_not_the_audited_ones(small):
    # the score is fixed before the trials: TEMPLATE_TRIALS extra calls of the trainer on the natural records alone
    # (no canary row), each with its own seed from the template stream, give the canary's label (least likely on
    # average) and the directions (their mean over the template models); each trial's score is then its own final
    # model projected on them (no membership bit, no other trial read)
    d, c = small
    calls, models = [], {}

    def spy(x, y, *, seed):
        calls.append((x.shape[0], seed, bool((x == c.x[0]).all(dim=1).any())))
        models[seed] = _gd(x, y, lr=0.05 + (seed % 7) / 100)  # the template models differ from one another
        return models[seed]

    ctx = plugin.Context(spy, d, c, seed=11, score="projection")
    out = plugin.multi_run_game(ctx, n_trials=5, progress=False)
    k = plugin.TEMPLATE_TRIALS
    t_seeds = [trial_seed(11, j, plugin._STREAM_TEMPLATE) for j in range(k)]
    seeds = [trial_seed(11, i, plugin._STREAM_TRAINER) for i in range(5)]
    assert [call for call in calls if call[1] in t_seeds] == [(d.n, t, False) for t in t_seeds]  # natural records only
    assert sorted(call[1] for call in calls if call[1] not in t_seeds) == sorted(seeds)
    templates = [models[t] for t in t_seeds]
    label = plugin.least_likely_labels(templates, c.x.to(torch.float32))
    each = [plugin.projection_directions(m, c.x.to(torch.float32), label, 1.0)[0] for m in templates]
    expected = [torch.stack(ts).mean(dim=0) for ts in zip(*each, strict=True)]
    assert not torch.equal(each[0][0], each[1][0])  # the mean is over models that differ
    chosen, dirs = plugin._projection_game(ctx, spy, 0)
    assert torch.equal(chosen.x, c.x) and torch.equal(chosen.y, label)
    assert all(torch.equal(g, w) for g, w in zip(dirs[0], expected, strict=True))
    for i, seed in enumerate(seeds):
        assert float(out.scores["projection"][i]) == plugin.projection_scores(models[seed], [expected], "t", i)[0]
    plugin.multi_run_game(ctx, n_trials=2, progress=False)
    assert len(calls) == k + 7 and sum(call[1] in t_seeds for call in calls) == k  # a second game: no new templates


class _NoParams(torch.nn.Module):
    def forward(self, x):
        return x[:, :10]


def test_a_model_without_parameters_is_an_error_naming_the_score(small):
    d, c = small

    def bare(x, y, *, seed):
        return _NoParams()

    with pytest.raises(plugin.TrainerError, match=r"trial 0 \(the projection score's template trial 0, on the natural "
                                                  r"records alone\): the returned model has no parameters; the "
                                                  r"projection score reads the final parameters \(use score 'loss'\)"):
        plugin.multi_run_game(plugin.Context(bare, d, c, seed=0, score="projection"), n_trials=2, progress=False)
    with pytest.raises(plugin.TrainerError, match=r"trainer 't', trial 4: the returned model has no parameters"):
        plugin.projection_scores(_NoParams(), [[torch.zeros(1)]], "t", 4)


def test_a_model_whose_shapes_differ_from_the_template_is_an_error(small):
    d, c = small
    dirs = plugin.projection_directions(_gd(d.x.to(torch.float32), d.y), c.x.to(torch.float32), c.y, 1.0)
    with pytest.raises(plugin.TrainerError, match=r"trial 2: the returned model's parameters .* are not the template"):
        plugin.projection_scores(torch.nn.Linear(64, 11), dirs, "t", 2)


def test_the_black_box_default_reads_the_parameters_and_the_mean_image_its_loss(tmp_path):
    # docs/fault-detection.md, "A final-model score": a trainer without audit= and no design keys gets two audits at
    # half the significance each: the blank canary scored by the projection, the mean image by its loss; the
    # one-run game keeps the loss (m distinct canaries, one model)
    (tmp_path / "bb_mod.py").write_text(textwrap.dedent('''
        def black(x, y, *, seed):
            pass
    '''), encoding="utf-8")
    claim = '[training]\ntrainer = "bb_mod:black"\nn_records = 30\nnoise_multiplier = 2.0\nsteps = 3\n'
    cfg = tmp_path / "bb.toml"
    cfg.write_text(claim, encoding="utf-8")
    got = [(v.name, v.canary.kind, v.attack.threat_model, v.attack.score, v.audit.max_trials)
           for v in config.variants(config.load(cfg))]
    assert got == [("main", "blank", "black_box", "projection", config.SEQUENTIAL_MAX_TRIALS),
                   ("mean_image", "mean_image", "black_box", "loss", config.SEQUENTIAL_MAX_TRIALS)]
    cfg.write_text(claim + '[audit]\ngame = "one_run"\n', encoding="utf-8")
    (v,) = config.variants(config.load(cfg))
    assert (v.attack.threat_model, v.attack.score) == ("black_box", "loss")


def test_the_black_box_main_audit_runs_on_the_audits_own_smaller_dataset(tmp_path):
    # docs/fault-detection.md, "The audit's dataset": under a Poisson claim the main audit hands the trainer about 20
    # natural records per batch (audit.conformance.natural_records: ⌈20/q⌉ = 40 of 200 at q = 0.5), so a contribution
    # scaled by B/|B_t| moves the final model by about B/|B_t|·C; the mean image's audit keeps the configured 200, and
    # a fixed-size claim (which names its dataset size) keeps its records in every audit
    (tmp_path / "bb_mod.py").write_text("def black(x, y, *, seed):\n    pass\n", encoding="utf-8")
    cfg = tmp_path / "bb.toml"
    head = '[training]\ntrainer = "bb_mod:black"\nn_records = 200\nnoise_multiplier = 2.0\nsteps = 3\n'
    cfg.write_text(head + 'sampling = "poisson"\nsample_rate = 0.5\n', encoding="utf-8")
    assert [(v.name, v.training.n_records) for v in config.variants(config.load(cfg))] == [("main", 40),
                                                                                           ("mean_image", 200)]
    cfg.write_text(head + 'sampling = "fixed_wor"\nbatch_size = 50\n', encoding="utf-8")
    assert [v.training.n_records for v in config.variants(config.load(cfg))] == [200, 200]
    # a configuration cannot write the marker: AUDIT_DATASET exists only in the default's own tables (and survives
    # their deep copies); a string of its name is an n_records like any other, refused by its type check
    assert config.RECOMMENDED_BLACK_BOX_VARIANTS[0]["training"]["n_records"] is config.AUDIT_DATASET
    assert copy.deepcopy(config.RECOMMENDED_BLACK_BOX_VARIANTS)[0]["training"]["n_records"] is config.AUDIT_DATASET
    cfg.write_text(head + '[[variant]]\nname = "main"\ntraining.n_records = "AUDIT_DATASET"\n', encoding="utf-8")
    with pytest.raises(InputError, match="n_records"):
        config.load(cfg)


def test_the_projection_canary_takes_the_template_models_least_likely_label():
    model = torch.nn.Linear(3, 4)
    with torch.no_grad():
        model.weight.zero_()
        model.bias.copy_(torch.tensor([0.5, -2.0, 1.0, -1.0]))
    x = torch.zeros(2, 3)
    assert plugin.least_likely_labels([model], x).tolist() == [1, 1]
    with torch.no_grad():
        model.weight[3, 0] = -10.0  # the first input now finds class 3 least likely
    assert plugin.least_likely_labels([model], torch.tensor([[1.0, 0, 0], [0, 0, 0]])).tolist() == [3, 1]
    # over several models, the least likely on average (mean log-softmax), not any one model's
    other = torch.nn.Linear(3, 4)
    with torch.no_grad():
        other.weight.zero_()
        other.bias.copy_(torch.tensor([0.0, 3.0, 0.0, -1.5]))
    assert plugin.least_likely_labels([other], x).tolist() == [3, 3]
    assert plugin.least_likely_labels([model, other], torch.tensor([[1.0, 0, 0], [0, 0, 0]])).tolist() == [3, 3]


def test_the_python_api_gives_the_black_box_main_audit_the_same_smaller_dataset():
    # audit.score's trainer audit writes the CLI's default variants: the main audit's AUDIT_DATASET resolved as the
    # CLI resolves it (⌈20/q⌉ = 40 of 100 at q = 0.5), the mean image's audit on all 100
    import accountants as acc
    from audit import score

    def black(x, y, *, seed):
        return torch.nn.Linear(x.shape[1], 10)

    cfg = score._trainer_config(black, acc.DPSGD(2.0, acc.Poisson(0.5), 3), trials=10, delta=1e-5, significance=0.05,
                                dataset="digits", n_records=100, canary=None, threat=None, score=None, clip_norm=1.0,
                                seed=0, claim_epsilon=None, name="black")
    assert [(v.name, v.training.n_records, v.attack.score) for v in config.variants(cfg)] == [
        ("main", 40, "projection"), ("mean_image", 100, "loss")]
