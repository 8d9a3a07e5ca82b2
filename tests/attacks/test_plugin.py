"""The user-trainer protocol (attacks/plugin.py) and its TOML wiring."""

import json
import textwrap

import pytest
import torch

from attacks import canaries, data, plugin
from audit import config, runs

TRAINER_SRC = textwrap.dedent('''
    import torch

    def train(x, y, *, seed):
        """A tiny deterministic trainer: a few full-batch gradient steps of logistic regression."""
        g = torch.Generator().manual_seed(seed)
        model = torch.nn.Linear(x.shape[1], 10)
        with torch.no_grad():
            model.weight.copy_(0.01 * torch.randn(model.weight.shape, generator=g))
            model.bias.zero_()
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        for _ in range(3):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        return model

    def not_a_model(x, y, *, seed):
        return 42

    def wrong(x, y):
        return torch.nn.Linear(64, 10)
''')


@pytest.fixture(scope="module")
def small():
    d = data.digits().subset(slice(0, 30))
    return d, canaries.blank(d, 1, generator=torch.Generator().manual_seed(0))


def _write(tmp_path, name="my_trainer_mod"):
    (tmp_path / f"{name}.py").write_text(TRAINER_SRC, encoding="utf-8")


def test_trainer_from_the_config_folder_through_the_toml_key(tmp_path):
    _write(tmp_path)
    cfg = tmp_path / "own.toml"
    cfg.write_text('[training]\ntrainer = "my_trainer_mod:train"\nn_records = 30\nnoise_multiplier = 2.0\n'
                   'steps = 3\n[audit]\ntrials = 6\n', encoding="utf-8")
    loaded = config.load(cfg)
    # no [canary]/[attack] keys and no audit= keyword: the recommended black-box design
    assert loaded.canary.kind == "blank" and loaded.attack.threat_model == "black_box"
    assert loaded.training.trainer_dir == str(tmp_path.resolve())
    folder, result = runs.execute(cfg, tmp_path / "run", progress=False)
    a = result.audits[0]
    assert a.trials == 6 and a.threat_model == "black_box" and a.score == "projection"
    lines = (folder / "audits" / "main" / "trials.jsonl").read_text().splitlines()
    assert [json.loads(x)["trial"] for x in lines] == list(range(6))
    # resume re-reads config.toml (the folder is recorded) and runs nothing new
    folder2, result2 = runs.execute(None, tmp_path / "run", resume=True, progress=False)
    assert result2.audits[0].epsilon_lower == a.epsilon_lower
    assert len((folder2 / "audits" / "main" / "trials.jsonl").read_text().splitlines()) == 6


def test_the_default_design_follows_what_the_trainer_supports(tmp_path):
    # docs/fault-detection.md: no [canary]/[attack] keys -> a blank canary, scored by the per-step
    # projection (white box) for a trainer taking audit=, by the final parameters' projection (black box) otherwise
    (tmp_path / "sig_mod.py").write_text(textwrap.dedent('''
        def black(x, y, *, seed):
            pass

        def white(x, y, *, seed, audit=None):
            pass
    '''), encoding="utf-8")
    claim = '\nn_records = 30\nnoise_multiplier = 2.0\nsteps = 3\n'
    for fn, sampling, kind, threat, score in [
            ("black", "poisson", "blank", "black_box", "projection"),
            ("white", "poisson", "blank", "white_box", "inner_product"),
            ("white", "fixed_size", "blank", "white_box", "inner_product"),  # input canaries: any sampling
            ("missing", "poisson", "blank", "black_box", "projection")]:  # not importable: the run reports it
        cfg = tmp_path / f"{fn}_{sampling}.toml"
        cfg.write_text(f'[training]\ntrainer = "sig_mod:{fn}"\nsampling = "{sampling}"{claim}', encoding="utf-8")
        loaded = config.load(cfg)
        assert (loaded.canary.kind, loaded.attack.threat_model, loaded.attack.score) == \
            (kind, threat, score), (fn, sampling)
    # an explicit design is kept as written
    cfg.write_text('[training]\ntrainer = "sig_mod:white"' + claim + '[attack]\nthreat_model = "black_box"\n'
                   'score = "confidence"\n[canary]\nkind = "mislabelled"\n', encoding="utf-8")
    loaded = config.load(cfg)
    assert (loaded.canary.kind, loaded.attack.score) == ("mislabelled", "confidence")


def test_a_trainer_that_raises_on_trial_3_keeps_trials_0_to_2(tmp_path, small):
    d, c = small
    calls = []

    def flaky(x, y, *, seed):
        calls.append(seed)
        if len(calls) == 4:
            raise RuntimeError("out of memory")
        return torch.nn.Linear(64, 10)

    ctx = plugin.Context(flaky, d, c, seed=5)
    with pytest.raises(plugin.TrainerError, match=r"flaky.*trial 3: RuntimeError: out of memory"):
        plugin.multi_run_game(ctx, n_trials=6, run_dir=tmp_path, progress=False)
    recs = [json.loads(x) for x in (tmp_path / "trials.jsonl").read_text().splitlines()]
    assert [r["trial"] for r in recs] == [0, 1, 2]
    out = plugin.multi_run_game(ctx, n_trials=6, run_dir=tmp_path, progress=False)  # resumes: 3, 4, 5 only
    assert len(calls) == 4 + 3 and out.scores["loss"].shape == (6,)
    again = [json.loads(x) for x in (tmp_path / "trials.jsonl").read_text().splitlines()]
    assert again[:3] == recs


def test_unusable_trainers_name_the_trainer(tmp_path, small):
    d, c = small
    _write(tmp_path, "bad_trainers_mod")
    with pytest.raises(plugin.TrainerError, match=r"'no_such_module_xyz:train'.*cannot import"):
        plugin.load_trainer("no_such_module_xyz:train", tmp_path)
    with pytest.raises(plugin.TrainerError, match=r"has no attribute 'nope'"):
        plugin.load_trainer("bad_trainers_mod:nope", tmp_path)
    with pytest.raises(plugin.TrainerError, match=r"'bad_trainers_mod:wrong' has the wrong signature"):
        plugin.load_trainer("bad_trainers_mod:wrong", tmp_path)
    with pytest.raises(plugin.TrainerError, match=r"module:function"):
        plugin.load_trainer("just_a_name", tmp_path)
    ctx = plugin.Context("bad_trainers_mod:not_a_model", d, c, base_dir=str(tmp_path))
    with pytest.raises(plugin.TrainerError, match=r"'bad_trainers_mod:not_a_model', trial 0: must return a torch"):
        plugin.multi_run_game(ctx, n_trials=2, progress=False)
    ctx = plugin.Context(lambda x, y, *, seed: torch.nn.Flatten(0), d, c)  # returns (B*64,) not (B, K)
    with pytest.raises(plugin.TrainerError, match=r"trial 0: the returned model must map"):
        plugin.multi_run_game(ctx, n_trials=1, progress=False)


def test_run_trial_is_pure_and_shows_the_trainer_shuffled_float32_records(small):
    d, c = small
    seen = {}

    def spy(x, y, *, seed):
        seen["x"], seen["y"], seen["seed"] = x, y, seed
        torch.manual_seed(seed)
        return torch.nn.Linear(64, 10)

    ctx = plugin.Context(spy, d, c, seed=11, score="confidence")
    r1, r2 = plugin.run_trial(ctx, 7), plugin.run_trial(ctx, 7)
    assert r1 == r2 and r1["trial"] == 7 and set(r1["scores"]) == {"confidence"}
    assert seen["x"].dtype == torch.float32 and seen["y"].dtype == torch.int64
    assert seen["x"].shape[0] == d.n + int(r1["members"][0])
    members = [plugin.run_trial(ctx, i)["members"][0] for i in range(40)]
    assert 8 <= sum(members) <= 32  # each trial's canary is in with probability 1/2 (P(outside) < 1e-4)


def test_config_rejects_a_white_box_design_for_a_user_trainer():
    with pytest.raises(ValueError, match="audited in the black box"):
        config.loads('[training]\ntrainer = "m:f"\n[attack]\nthreat_model = "white_box"\n')


def test_white_box_gradient_canary_score_counts_the_sampled_steps(small):
    # A "trainer" whose update is exactly the canary's gradient when sampled (lr 1, no noise): the score
    # sum_t <theta_{t-1} - theta_t, c>/|c| is norm*C times the number of steps the canary was sampled.
    import accountants as acc

    d, _ = small
    audits = []

    def exact(x, y, *, seed, audit):
        model = torch.nn.Linear(64, 10)
        audits.append(audit)
        audit.record(model.parameters())
        for _ in range(6):
            c = audit.canary_gradient(list(model.parameters()))
            if c is not None:
                with torch.no_grad():
                    for p, ci in zip(model.parameters(), c, strict=True):
                        p -= ci
            audit.record(model.parameters())
        return model

    spec = acc.DPSGD(1.0, acc.Poisson(0.5), 6)
    ctx = plugin.Context(exact, d, plugin.DiracCanary(5, 2.0), score="inner_product", spec=spec, threat="white_box",
                         clip_norm=0.5)
    for i in range(8):
        rec = plugin.run_trial(ctx, i)
        wb = audits[-1]
        assert rec["scores"]["inner_product"][0] == pytest.approx(2.0 * 0.5 * sum(wb.sampled), abs=1e-6)
        assert rec["members"][0] or sum(wb.sampled) == 0  # an absent canary is never sampled


def test_white_box_input_canary_projects_updates_on_its_clipped_gradient(small):
    # A trainer that steps exactly -clip_C(grad of the canary's loss) when the canary is in: each step's
    # projection is |clip_C(g)|^2 / C = C whenever |g| >= C, so the score is T*C; out, it is 0.
    import accountants as acc

    d, c = small
    C = 0.1

    def exact(x, y, *, seed, audit):
        model = torch.nn.Linear(64, 10)
        audit.record(model.parameters())
        has = x.shape[0] > d.n
        for _ in range(4):
            if has:
                loss = torch.nn.functional.cross_entropy(model(c.x.float()), c.y)
                gs = torch.autograd.grad(loss, list(model.parameters()))
                n = torch.cat([g.reshape(-1) for g in gs]).norm()
                with torch.no_grad():
                    for p, g in zip(model.parameters(), gs, strict=True):
                        p -= g * min(1.0, C / float(n))
            audit.record(model.parameters())
        return model

    ctx = plugin.Context(exact, d, c, score="inner_product", spec=acc.DPSGD(1.0, acc.Poisson(0.5), 4),
                         threat="white_box", clip_norm=C)
    for i in range(6):
        rec = plugin.run_trial(ctx, i)
        want = 4 * C if rec["members"][0] else 0.0
        assert rec["scores"]["inner_product"][0] == pytest.approx(want, rel=1e-4, abs=1e-9)


def test_white_box_needs_the_audit_keyword_and_records(small):
    import accountants as acc

    d, c = small
    spec = acc.DPSGD(1.0, acc.Poisson(0.5), 4)
    ctx = plugin.Context(lambda x, y, *, seed: torch.nn.Linear(64, 10), d, c, score="inner_product", spec=spec,
                         threat="white_box")
    with pytest.raises(plugin.TrainerError, match="takes no keyword 'audit'"):
        plugin.multi_run_game(ctx, n_trials=1, progress=False)
    ctx = plugin.Context(lambda x, y, *, seed, audit: torch.nn.Linear(64, 10), d, c, score="inner_product",
                         spec=spec, threat="white_box")
    with pytest.raises(plugin.TrainerError, match=r"trial 0: a white-box trainer must call audit.record"):
        plugin.multi_run_game(ctx, n_trials=1, progress=False)


def test_audit_trainer_takes_a_callable(tmp_path):
    import accountants as acc
    from audit.score import audit_trainer

    def leaky(x, y, *, seed):  # no noise, no clipping: the final model remembers the canary
        model = torch.nn.Linear(64, 10)
        with torch.no_grad():
            model.weight.zero_()
            model.bias.zero_()
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        for _ in range(5):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y, reduction="sum").backward()
            opt.step()
        return model

    r = audit_trainer(leaky, acc.DPSGD(6.0, acc.Poisson(0.5), 5), trials=60, run_dir=tmp_path / "run")
    assert r["violation"] and [a["name"] for a in r["audits"]] == ["main", "mean_image"]  # the CLI's design
    assert r["config"]["training"]["trainer"].endswith("leaky")
    assert len((tmp_path / "run" / "audits" / "main" / "trials.jsonl").read_text().splitlines()) == 60


def test_device_and_memory_flags_are_refused_for_a_user_trainer_not_ignored(tmp_path):
    """A user trainer decides its own device and trains one model per call: --device cuda and --memory-gb used to be
    dropped silently; they are refused before any run folder exists, naming the flag. (--backend process/ray runs
    its trials: tests/attacks/test_plugin_backends.py.)"""
    _write(tmp_path)
    cfg = tmp_path / "own.toml"
    cfg.write_text('[training]\ntrainer = "my_trainer_mod:train"\nn_records = 30\nnoise_multiplier = 2.0\n'
                   'steps = 3\n[audit]\ntrials = 6\n', encoding="utf-8")
    with pytest.raises(runs.InputError, match="--device 'cuda'"):
        runs.execute(cfg, tmp_path / "run", progress=False, device="cuda")
    assert not (tmp_path / "run").exists()
    with pytest.raises(runs.InputError, match="--memory-gb"):
        runs.execute(cfg, tmp_path / "run", progress=False, memory_gb=4.0)
    runs._plugin_limits(config.load(cfg), None, "cpu")  # the default flags pass
