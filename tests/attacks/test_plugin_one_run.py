"""The one-run game for a user's trainer (docs/own-training.md, "Audit in one training run"): m canaries in one
call of the trainer, black box, white box with input canaries, and gradient canaries through the hook."""

import json
import math
from pathlib import Path

import pytest
import torch

import accountants as acc
from attacks import canaries, data, plugin
from audit import comparator, config, report, runs, statistics

ROOT = Path(__file__).resolve().parents[2]
SPEC = acc.DPSGD(3.0, acc.Poisson(0.5), 10)
LR, B, C, T, Q, SPARE = 0.5, 10.0, 1.0, 10, 0.5, 500
CALLS: list[int] = []  # the sizes of x handed to `train`, one per call
FAIL_ON_CALL: list[int] = []  # `train` raises on these call numbers (1-based), to interrupt an audit


def train(x, y, *, seed, audit=None, noise=3.0):
    """A tiny hand-written DP-SGD (softmax regression; Poisson rate Q, clip C, Gaussian noise·C on the sum, T steps).

    Its first parameter ``spare`` (SPARE numbers) never enters the model's output, so the natural records'
    gradients are 0 there: Dirac canaries on flat parameters 0..SPARE − 1 collide with nothing.
    """
    CALLS.append(int(x.shape[0]))
    if len(CALLS) in FAIL_ON_CALL:
        raise RuntimeError("interrupted")
    g = torch.Generator().manual_seed(seed)
    spare = torch.zeros(SPARE)
    w, b = torch.zeros(10, x.shape[1]), torch.zeros(10)
    if audit is not None:
        audit.record([spare, w, b])
    for _ in range(T):
        mask = torch.rand(x.shape[0], generator=g) < Q
        xb, yb = x[mask], y[mask]
        r = torch.softmax(xb @ w.T + b, dim=1) - torch.nn.functional.one_hot(yb, 10).float()
        grads = [torch.zeros(xb.shape[0], SPARE), r[:, :, None] * xb[:, None, :], r]
        if audit is not None:
            c = audit.canary_gradients([spare, w, b])
            if c is not None:
                grads = [torch.cat([gi, ci]) for gi, ci in zip(grads, c, strict=True)]
        norms = torch.cat([gi.flatten(1) for gi in grads], dim=1).norm(dim=1)
        factor = torch.clamp(C / (norms + 1e-12), max=1.0)
        sums = [(gi * factor.view(-1, *[1] * (gi.ndim - 1))).sum(dim=0) for gi in grads]
        noisy = [s + noise * C * torch.randn(s.shape, generator=g) for s in sums]
        spare, w, b = (p - LR * n / B for p, n in zip((spare, w, b), noisy, strict=True))
        if audit is not None:
            audit.record([spare, w, b])
    model = _Model(x.shape[1])
    with torch.no_grad():
        model.spare.copy_(spare)
        model.lin.weight.copy_(w)
        model.lin.bias.copy_(b)
    return model


class _Model(torch.nn.Module):
    """The returned model: parameters (spare, weight, bias) in the recorded order; spare is unused."""

    def __init__(self, features):
        super().__init__()
        self.spare = torch.nn.Parameter(torch.zeros(SPARE))
        self.lin = torch.nn.Linear(features, 10)

    def forward(self, x):
        return self.lin(x)


def train_no_noise(x, y, *, seed, audit=None):
    """The same trainer with its noise left out (the bug a one-run audit must catch)."""
    return train(x, y, seed=seed, audit=audit, noise=0.0)


def black_box(x, y, *, seed):
    return train(x, y, seed=seed)


@pytest.fixture
def digits20():
    return data.digits().subset(slice(0, 20))


def _ood(d, m):
    return canaries.out_of_distribution(d, m, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize(("fn", "threat", "score"), [(black_box, "black_box", "loss"),
                                                      (train, "white_box", "inner_product")])
def test_input_canaries_enter_one_call_each_with_probability_half(digits20, fn, threat, score):
    m = 40
    ctx = plugin.Context(fn, digits20, _ood(digits20, m), seed=3, score=score, spec=SPEC, threat=threat)
    CALLS.clear()
    out = plugin.one_run_game(ctx, n_runs=1, progress=False)
    assert out.design.value == "one_run" and out.scores[score].shape == (m,) and out.truth.shape == (m,)
    # one call of the trainer, holding the natural records and exactly the member canaries
    assert CALLS == [20 + int(out.truth.sum())]
    assert 0 < int(out.truth.sum()) < m and all(math.isfinite(v) for v in out.scores[score].tolist())


def test_dirac_canaries_through_the_hook_read_each_canary_alone(digits20):
    """Without noise, canary j's score is LR·C/B times the steps it was sampled in (0 when out): the hook hands
    every sampled canary its own per-example gradient on its own coordinate, clipped like any record."""
    m = 100
    ctx = plugin.Context(train_no_noise, digits20, plugin.DiracCanaries(tuple(range(m))), seed=5,
                         score="inner_product", spec=SPEC, threat="white_box")
    rec = plugin.run_trial(ctx, 0)
    s = torch.tensor(rec["scores"]["inner_product"], dtype=torch.float64)
    member = torch.tensor(rec["members"])
    k = s / (LR * C / B)  # steps sampled
    assert torch.allclose(k, k.round(), atol=1e-5) and k.min() >= 0 and k.max() <= T
    assert (s[~member] == 0).all() and (k[member] >= 1).all()  # (1 − Q)^T = 1e-3: every member was sampled
    # Poisson at rate Q per step and member: the mean count is Q·T = 5 (binomial sd of the mean ≈ 0.22 here)
    assert abs(float(k[member].mean()) - Q * T) < 1.5


def test_a_trainer_without_noise_is_caught_in_one_run(digits20):
    """Perfectly separated scores certify far above the claim's ε (2.37): the one-run violation test fires."""
    m = 400
    ctx = plugin.Context(train_no_noise, digits20, plugin.DiracCanaries(tuple(range(m))), seed=7,
                         score="inner_product", spec=SPEC, threat="white_box")
    out = plugin.one_run_game(ctx, progress=False)
    sc = out.scores["inner_product"]
    assert sc.shape == (m,)
    cmp = comparator.compare_one_run(sc, out.truth, SPEC, delta=1e-5)
    # every member sampled at least once ((1 − Q)^T ≈ 1e-3 each): perfect separation, no wrong guess (the
    # scores are multiples of LR·C/B, so r = 200 moves down to the end of a tie group)
    assert cmp.epsilon_lower.correct == cmp.epsilon_lower.guesses > 100
    assert cmp.epsilon_lower.value > 3.0 > cmp.curves.epsilon_tight and cmp.violated


def test_dirac_hook_refuses_what_it_cannot_do(digits20):
    ctx = plugin.Context(train, digits20, plugin.DiracCanaries(tuple(range(2000))), score="inner_product",
                         spec=SPEC, threat="white_box")
    with pytest.raises(plugin.TrainerError, match=r"canary.count = 2000 .*model has 1150: choose canary.count ≤ 1150"):
        plugin.run_trial(ctx, 0)

    def singular(x, y, *, seed, audit):
        audit.record([torch.zeros(3)])
        audit.canary_gradient([torch.zeros(3)])

    ctx = plugin.Context(singular, digits20, plugin.DiracCanaries((0, 1)), score="inner_product", spec=SPEC,
                         threat="white_box")
    with pytest.raises(plugin.TrainerError, match=r"call audit.canary_gradients\(params\)"):
        plugin.run_trial(ctx, 0)
    with pytest.raises(acc.InputError, match="distinct"):
        plugin.DiracCanaries((3, 3))


def test_one_call_of_canary_gradients_per_step_is_checked(digits20):
    def skips(x, y, *, seed, audit):
        p = torch.zeros(5)
        audit.record([p])
        audit.record([p + 1])  # one step, no canary_gradients call
        return torch.nn.Linear(64, 10)

    ctx = plugin.Context(skips, digits20, plugin.DiracCanaries((0, 1)), score="inner_product", spec=SPEC,
                         threat="white_box")
    with pytest.raises(plugin.TrainerError, match=r"canary_gradients must be called once per step; 0 calls for 1"):
        plugin.run_trial(ctx, 0)


def test_an_interrupted_one_run_audit_loses_no_finished_run(digits20, tmp_path):
    """Three runs; the trainer fails in the second: the first stays in trials.jsonl and --resume trains only the
    two missing runs, ending with the records of an uninterrupted audit."""
    ctx = plugin.Context(train, digits20, plugin.DiracCanaries(tuple(range(30))), seed=2, score="inner_product",
                         spec=SPEC, threat="white_box")
    whole = plugin.one_run_game(ctx, n_runs=3, run_dir=tmp_path / "whole", progress=False)
    CALLS.clear()
    FAIL_ON_CALL[:] = [2]
    try:
        with pytest.raises(plugin.TrainerError, match="raised on trial 1"):
            plugin.one_run_game(ctx, n_runs=3, run_dir=tmp_path / "cut", progress=False)
        lines = (tmp_path / "cut" / "trials.jsonl").read_text().splitlines()
        assert [json.loads(x)["trial"] for x in lines] == [0]
        CALLS.clear()
        FAIL_ON_CALL.clear()
        again = plugin.one_run_game(ctx, n_runs=3, run_dir=tmp_path / "cut", progress=False)
    finally:
        FAIL_ON_CALL.clear()
    assert len(CALLS) == 2  # only the missing runs were trained
    assert torch.equal(again.scores["inner_product"], whole.scores["inner_product"])
    assert torch.equal(again.truth, whole.truth)
    assert (tmp_path / "cut" / "trials.jsonl").read_bytes() == (tmp_path / "whole" / "trials.jsonl").read_bytes()


TRAINER_ONLY = """
[training]
trainer = "torch_trainer:train"
trainer_dir = "{dir}"
noise_multiplier = 3.0
sample_rate = 0.5
steps = 10
[audit]
game = "one_run"
{extra}
"""


def _cfg(extra="", trainer_dir=None):
    d = trainer_dir or str(ROOT / "examples" / "own_training")
    return config.loads(TRAINER_ONLY.format(dir=d, extra=extra))


def test_check_chooses_the_one_run_game_and_fills_only_missing_keys():
    c = _cfg()  # only the trainer, the claim and game = "one_run": the recommended one-run design
    assert c.audit.game == "one_run" and c.audit.trials == 1 and c.variants == ()
    assert c.canary.kind == "out_of_distribution" and c.canary.count == 1000
    assert (c.attack.threat_model, c.attack.score) == ("white_box", "inner_product")  # takes audit=
    # keys the configuration writes win over the recommended ones
    c = _cfg('trials = 3\n[canary]\nkind = "mislabelled"\ncount = 50\n[attack]\nthreat_model = "black_box"\n'
             'score = "confidence"')
    assert (c.audit.trials, c.canary.kind, c.canary.count) == (3, "mislabelled", 50)
    assert (c.attack.threat_model, c.attack.score) == ("black_box", "confidence")
    c = _cfg('[canary]\nkind = "dirac"\ncount = 600')
    assert (c.canary.kind, c.canary.count, c.attack.threat_model) == ("dirac", 600, "white_box")


def test_a_trainer_without_audit_gets_the_black_box_one_run(tmp_path):
    (tmp_path / "bb.py").write_text("def train(x, y, *, seed):\n    raise RuntimeError\n", encoding="utf-8")
    c = config.loads(TRAINER_ONLY.format(dir=tmp_path, extra="").replace("torch_trainer:train", "bb:train"))
    assert (c.attack.threat_model, c.attack.score, c.canary.kind) == \
        ("black_box", "loss", "out_of_distribution")


@pytest.mark.parametrize(("extra", "message"), [
    ('[canary]\nkind = "mislabelled"\ncount = 101',
     r"canary.count must be ≤ training.n_records = 100 for canary.kind 'mislabelled'.*got 101"),
    ("[canary]\ncount = 10001", r"canary.count = 10001 is above the documented limit 10000"),
])
def test_one_run_config_errors_name_the_key_and_the_range(extra, message):
    with pytest.raises(acc.InputError, match=message):
        _cfg(extra)


def test_multi_run_config_errors_name_the_key():
    base = TRAINER_ONLY.format(dir=ROOT / "examples" / "own_training", extra="").replace('"one_run"', '"multi_run"')
    with pytest.raises(acc.InputError, match=r"canary.count must be 1 for audit.game 'multi_run'; got 5"):
        config.loads(base + '[canary]\nkind = "blank"\ncount = 5\n[attack]\nthreat_model = "black_box"\n'
                     'score = "loss"')
    with pytest.raises(acc.InputError, match=r"audit.trials must be an integer ≥ 2 for audit.game 'multi_run'"):
        config.loads(base.replace('game = "multi_run"', 'game = "multi_run"\ntrials = 1'))
    with pytest.raises(acc.InputError, match=r"audit.trials must be an integer ≥ 1; got 0"):
        _cfg("trials = 0")
    hook = '[canary]\nkind = "dirac"\ncount = 5\n[attack]\nthreat_model = "white_box"\nscore = "inner_product"'
    assert config.loads(TRAINER_ONLY.format(dir=ROOT, extra="") + hook).canary.count == 5  # Poisson: fine
    fixed = TRAINER_ONLY.format(dir=ROOT, extra="").replace("[audit]", 'sampling = "fixed_wor"\nbatch_size = 50\n'
                                                            "[audit]") + hook
    with pytest.raises(acc.InputError, match=r"hook of a user trainer needs training.sampling 'poisson'"):
        config.loads(fixed)


def test_the_built_in_dirac_one_run_names_the_parameter_count():
    with pytest.raises(acc.InputError, match=r"canary.count = 700 Dirac canaries need 700 distinct coordinates; "
                                             r"the model has 650 parameters"):
        runs.validate(config.loads('[canary]\ncount = 700\n[audit]\ngame = "one_run"'))


@pytest.mark.parametrize("kind", ["dirac", "out_of_distribution"])
def test_check_audits_the_example_trainer_in_one_run(tmp_path, kind):
    """End to end (runs.execute, what `dpaudit check` runs): one training of examples/own_training/torch_trainer.py
    with 300 canaries, the white box; the result says which one-run statistic certified what."""
    toml = TRAINER_ONLY.format(dir=ROOT / "examples" / "own_training", extra="") + \
        f'[canary]\nkind = "{kind}"\ncount = 300\n[claim]\ndelta = 1e-5\n'
    (tmp_path / "c.toml").write_text(toml, encoding="utf-8")
    _, res = runs.execute(tmp_path / "c.toml", tmp_path / "run", progress=False, claim=True, finish=report.render)
    (a,) = res.audits
    assert (a.design, a.threat_model, a.trials, a.rows) == ("one_run", "white_box", 1, 300)
    stats = {s.name: s for s in a.one_run_statistics}
    assert set(stats) == {"steinke", "order", "scores", "fdp_gdp", "order_gdp", "scores_gdp"}
    # Steinke et al.'s bound holds for any canaries and is ε_lower; the order statistic assumes canaries that
    # do not interact, which a user's trainer cannot be shown to give: reported, not used
    assert stats["steinke"].in_epsilon_lower and a.epsilon_lower.value == stats["steinke"].value
    assert not stats["order"].in_epsilon_lower and "do not interact" in stats["order"].assumption
    assert stats["steinke"].epsilon_certifiable == a.epsilon_certifiable is not None
    assert stats["order"].epsilon_certifiable is not None
    assert a.epsilon_lower.value <= a.epsilon_tight and not a.violation.violated and a.claim.holds
    # the same lower bound, recomputed from the trials file (nothing else is used)
    rec = json.loads((tmp_path / "run" / "audits" / "main" / "trials.jsonl").read_text())
    b = statistics.epsilon_one_run(rec["scores"]["inner_product"], rec["members"], delta=1e-5, significance=0.05)
    assert b.value == a.epsilon_lower.value
    md = (tmp_path / "run" / "report.md").read_text()
    assert "\n  - steinke: ε ≥" in md and "\n  - order: ε ≥" in md


FLAKY = '''
from pathlib import Path

import torch_trainer

HERE = Path(__file__).parent


def train(x, y, *, seed, audit=None):
    """torch_trainer.train, logging each call; raises while the file 'fail' exists (an interruption)."""
    with open(HERE / "calls.log", "a") as fh:
        fh.write("call\\n")
    if (HERE / "fail").exists() and len((HERE / "calls.log").read_text().split()) == 2:
        raise RuntimeError("interrupted")
    return torch_trainer.train(x, y, seed=seed, audit=audit)
'''


def test_check_resume_of_an_interrupted_one_run_audit_trains_only_the_missing_runs(tmp_path):
    """As `dpaudit check --resume --out RUN`: two training runs of 50 canaries; the second raises; the resumed
    audit trains it alone and ends with the result of an uninterrupted audit."""
    (tmp_path / "torch_trainer.py").write_bytes((ROOT / "examples" / "own_training" / "torch_trainer.py").read_bytes())
    (tmp_path / "flaky.py").write_text(FLAKY, encoding="utf-8")
    toml = TRAINER_ONLY.format(dir=tmp_path, extra="trials = 2").replace("torch_trainer:train", "flaky:train") + \
        "[canary]\ncount = 50\n"
    (tmp_path / "c.toml").write_text(toml, encoding="utf-8")
    (tmp_path / "fail").write_text("")
    with pytest.raises(plugin.TrainerError, match="raised on trial 1: RuntimeError: interrupted"):
        runs.execute(tmp_path / "c.toml", tmp_path / "run", progress=False)
    assert len((tmp_path / "run" / "audits" / "main" / "trials.jsonl").read_text().splitlines()) == 1
    (tmp_path / "fail").unlink()
    _, res = runs.execute(None, tmp_path / "run", resume=True, progress=False)
    assert (tmp_path / "calls.log").read_text().split() == ["call"] * 3  # run 0, run 1 (raised), run 1 again
    (tmp_path / "calls.log").unlink()
    _, whole = runs.execute(tmp_path / "c.toml", tmp_path / "whole", progress=False)
    assert res.audits[0].rows == 100 and res.audits[0].epsilon_lower == whole.audits[0].epsilon_lower
    assert (tmp_path / "run" / "audits" / "main" / "trials.jsonl").read_bytes() == \
        (tmp_path / "whole" / "audits" / "main" / "trials.jsonl").read_bytes()
