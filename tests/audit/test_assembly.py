"""One result-assembly path (audit.runs.assemble, issue 24 item 3): `run`, `check`, `score`, `runs.execute`,
`audit_scores` and `audit_trainer` write results of one shape that `RunResult.from_json` reads back, the same
scores give the same numbers through `check` and `score`, and a user trainer is loaded once per run."""

import dataclasses
import json
import textwrap

import numpy as np
import pytest
import torch

import accountants as acc
from attacks import plugin
from audit import config, model, runs, score, statistics
from audit.cli import main

TINY = "[training]\nn_records = 20\nsample_rate = 0.5\nnoise_multiplier = 2.0\nsteps = 4\n"
GAMES = {
    "multi_run": '[audit]\ntrials = 12\nchunk_size = 12\n',
    "one_run": '[canary]\ncount = 16\n[audit]\ngame = "one_run"\ntrials = 2\nchunk_size = 2\n',
    "reconstruction": '[canary]\ncount = 4\n[audit]\ngame = "reconstruction"\ntrials = 8\n',
}
CLAIM = "[claim]\nepsilon = 30\ndelta = 1e-5\n"
TRAINER = textwrap.dedent('''
    import torch

    def train(x, y, *, seed):
        """A tiny deterministic trainer: two full-batch gradient steps of logistic regression."""
        model = torch.nn.Linear(x.shape[1], 10)
        with torch.no_grad():
            model.weight.copy_(0.01 * torch.randn(model.weight.shape, generator=torch.Generator().manual_seed(seed)))
            model.bias.zero_()
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        for _ in range(2):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        return model
''')
USER = ('[training]\ntrainer = "seam_trainer:train"\nn_records = 20\nsample_rate = 0.5\nnoise_multiplier = 2.0\n'
        'steps = 4\n[canary]\nkind = "blank"\n[attack]\nthreat_model = "black_box"\nscore = "loss"\n'
        '[audit]\ntrials = 8\n[[variant]]\nname = "main"\n[[variant]]\nname = "second"\ncanary.kind = "mean_image"\n')
SPEC = acc.DPSGD(2.0, acc.Poisson(0.5), 4)
AUDIT_KEYS = {f.name for f in dataclasses.fields(model.AuditResult)} | {"spec_text"}
RUN_KEYS = {f.name for f in dataclasses.fields(model.RunResult)}


def _read_back(path):
    """result.json read by the strict reader, and written back unchanged."""
    obj = json.loads((path / "result.json").read_text(encoding="utf-8"))
    back = model.RunResult.from_json(obj)
    assert back.to_json() == obj
    assert set(obj) == RUN_KEYS and all(set(a) == AUDIT_KEYS for a in obj["audits"])
    return back


@pytest.fixture
def trainer_dir(tmp_path, monkeypatch):
    (tmp_path / "seam_trainer.py").write_text(TRAINER, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


@pytest.mark.parametrize("game", sorted(GAMES))
@pytest.mark.parametrize("command", ["run", "check", "python"])
def test_every_command_and_game_writes_one_result_shape(tmp_path, capsys, command, game):
    cfg = tmp_path / "c.toml"
    cfg.write_text(TINY + GAMES[game] + CLAIM, encoding="utf-8")
    out = tmp_path / "run"
    if command == "python":
        runs.execute(cfg, out, progress=False, claim=True)
    else:
        assert main([command, str(cfg), "--out", str(out), "--quiet"]) in (0, 1)
    capsys.readouterr()
    r = _read_back(out)
    (a,) = r.audits
    assert a.design == game
    claimed = command != "run" and game != "reconstruction"  # a reconstruction game decides no (ε, δ) claim
    assert (a.claim is not None) == claimed and (r.claim is not None) == claimed


@pytest.mark.parametrize("design", ["multi_run", "one_run"])
@pytest.mark.parametrize("command", ["score", "python"])
def test_score_results_share_the_shape(tmp_path, capsys, command, design):
    member = np.array([True, False] * 40)
    sc = np.where(member, 1.0, 0.0) + np.linspace(0, 1, 80)
    out = tmp_path / "o"
    if command == "python":
        score.audit_scores({"member": member, "score": sc}, SPEC, delta=1e-5, design=design, claim_epsilon=30.0,
                           out=out)
    else:
        csv = tmp_path / "s.csv"
        csv.write_text("member,score\n" + "".join(f"{int(m)},{float(s)!r}\n" for m, s in zip(member, sc, strict=True)))
        assert main(["score", str(csv), "--noise-multiplier", "2", "--steps", "4", "--sample-rate", "0.5",
                     "--delta", "1e-5", "--design", design, "--epsilon", "30", "--out", str(out)]) in (0, 1)
        capsys.readouterr()
    r = _read_back(out)
    assert r.audits[0].design == design and r.audits[0].claim is not None


def test_user_trainer_results_share_the_shape(tmp_path, capsys, trainer_dir):
    cfg = trainer_dir / "u.toml"
    cfg.write_text(USER + CLAIM, encoding="utf-8")
    assert main(["check", str(cfg), "--out", str(tmp_path / "cli"), "--quiet"]) in (0, 1)
    capsys.readouterr()
    cli = _read_back(tmp_path / "cli")
    r = score.audit_trainer("seam_trainer:train", acc.DPSGD(2.0, acc.Poisson(0.5), 4), trials=8, canary="blank",
                            threat="black_box", claim_epsilon=30, n_records=20, significance=0.025,
                            out=tmp_path / "py")  # the CLI's two audits: 0.05 / 2 each
    py = _read_back(tmp_path / "py")
    assert model.RunResult.from_json(r) == py  # the returned object is result.json's
    assert [a.name for a in cli.audits] == ["main", "second"] and [a.name for a in py.audits] == ["main"]
    assert py.audits[0].epsilon_lower == cli.audits[0].epsilon_lower  # the same trials: the same bound
    assert py.audits[0].claim == cli.audits[0].claim is not None


def test_user_trainer_is_loaded_once_per_run_and_builds_no_builtin_model(tmp_path, monkeypatch, trainer_dir):
    """Before: load_trainer ran once per variant (validation), per game and per trial, and `build` made a built-in
    model and canary twice per variant that the user trainer's game never used."""
    calls = {"load_trainer": 0, "build": 0}
    load, build = plugin.load_trainer, runs.build

    def counting_load(*a, **k):
        calls["load_trainer"] += 1
        return load(*a, **k)

    def counting_build(*a, **k):
        calls["build"] += 1
        return build(*a, **k)

    monkeypatch.setattr(plugin, "load_trainer", counting_load)
    monkeypatch.setattr(runs, "build", counting_build)
    cfg = trainer_dir / "u.toml"
    cfg.write_text(USER, encoding="utf-8")
    _, r = runs.execute(cfg, tmp_path / "run", progress=False)
    assert calls == {"load_trainer": 1, "build": 0}  # two audits of 8 trials each
    assert [a.trials for a in r.audits] == [8, 8]


@pytest.mark.parametrize("game", ["multi_run", "one_run"])
def test_check_and_score_assemble_the_same_numbers_from_the_same_scores(tmp_path, game):
    """The seam: a run's own scores handed to `audit_scores` give its ε_lower, ceiling, violation test and claim
    check (one assembly and one claim check; before, score's claim check was a drifted copy of the run's)."""
    cfg = config.loads(TINY + GAMES[game] + CLAIM.replace("epsilon = 30", "epsilon = 1.5"))
    _, r = runs.execute_config(cfg, tmp_path / "run", progress=False, claim=True)
    (a,) = r.audits
    lines = (tmp_path / "run" / "audits" / "main" / "trials.jsonl").read_text(encoding="utf-8").splitlines()
    recs = [json.loads(line) for line in lines]
    member = np.array([m for rec in recs for m in rec["members"]])
    sc = np.array([s for rec in recs for s in rec["scores"][a.score]])
    s = score.audit_scores_run({"member": member, "score": sc}, a.spec, delta=a.delta, significance=a.significance,
                               design=game, claim_epsilon=1.5)[0].audits[0]
    assert s.epsilon_lower == a.epsilon_lower and s.ceiling == a.ceiling
    assert s.violation == a.violation and s.claim == a.claim
    assert s.epsilon_rdp == a.epsilon_rdp and s.epsilon_tight == a.epsilon_tight
    if game == "one_run":  # score certifies one-run audits as the run does
        assert s.epsilon_certifiable == a.epsilon_certifiable and s.one_run_statistics == a.one_run_statistics


def test_claim_at_another_delta_is_checked_at_that_delta():
    """A claim's δ other than the audit's: the accountant's ε and ε_lower are recomputed at the claim's δ (and
    ε = 100 is a claim like any other: its float32 curve overflowed before, exit 3)."""
    member = np.array([True, False] * 100)
    sc = np.where(member, 5.0, 0.0)
    curves = runs.comparator.analytical_curves(SPEC, 1e-5)
    x, m = torch.as_tensor(sc), torch.as_tensor(member)
    cmp = runs.comparator.compare_membership(x[m], x[~m], SPEC, delta=1e-5, significance=0.05, curves=curves)
    asked = runs.Asked("a", runs.games.Design.MULTI_RUN, "user", "user", "user", "none", SPEC, 1e-5, 0.05, 0,
                       "bonferroni", 200)
    same = runs.check_claim(cmp, curves, model.ClaimConfig(100.0, 1e-5), x, m, asked)
    other = runs.check_claim(cmp, curves, model.ClaimConfig(100.0, 1e-2), x, m, asked)
    assert same.audit_epsilon_lower == cmp.epsilon_lower.value and same.accountant_epsilon == curves.epsilon_best
    # ε_lower = log((1 − δ − FNR)/FPR) falls as δ grows, and so does the accountant's ε
    assert other.audit_epsilon_lower < same.audit_epsilon_lower and other.accountant_epsilon < same.accountant_epsilon
    want = statistics.epsilon_lower_bound(x[m], x[~m], delta=1e-2, significance=0.05, strategy=statistics.Bonferroni())
    assert other.audit_epsilon_lower == want.value
    assert other.accountant_epsilon == min(float(acc.epsilon(SPEC, 1e-2, method=k).value) for k in acc.methods())
