"""A user's trainer must never decide the verdict by accident (issue 23 §1).

Whatever the user's code does (exit, hang, diverge, return odd shapes, leave Opacus hooks on the
model), ``dpaudit check`` ends with exit 2 and one line naming the trainer and the trial, never with
exit 0 or 1 (which CI reads as a verdict) and never with exit 3 (a dpaudit bug).
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import accountants as acc
from attacks import canaries, data, plugin
from audit import config
from audit.cli import main

ROOT = Path(__file__).resolve().parents[2]
OPACUS_EXAMPLE = ROOT / "examples" / "own_training" / "opacus_trainer.py"

TRAINERS = textwrap.dedent('''
    import sys
    import time

    import torch


    def _fit(x, y, seed):
        torch.manual_seed(seed)
        return torch.nn.Linear(x.shape[1], 10)


    def exits0(x, y, *, seed):
        sys.exit(0)


    def exits1(x, y, *, seed):
        sys.exit(1)


    def generator_exit(x, y, *, seed):
        raise GeneratorExit("user code")


    class _ExitingNet(torch.nn.Linear):
        def forward(self, x):
            sys.exit(0)


    def forward_exits(x, y, *, seed):
        return _ExitingNet(x.shape[1], 10)


    def sleeps(x, y, *, seed):
        try:
            time.sleep(600)
        except Exception:  # a trainer that swallows every exception is still stopped
            pass
        return _fit(x, y, seed)


    def spins(x, y, *, seed):
        while True:  # pure Python: only a signal on the main thread reaches it
            pass


    def nan_logits(x, y, *, seed):
        m = _fit(x, y, seed)
        with torch.no_grad():
            m.bias[3] = float("nan")
        return m


    def inf_logits(x, y, *, seed):
        m = _fit(x, y, seed)
        with torch.no_grad():
            m.bias[0] = float("inf")
        return m


    def no_logits(x, y, *, seed):
        return torch.nn.Linear(x.shape[1], 0)


    def nan_params(x, y, *, seed, audit=None):
        m = _fit(x, y, seed)
        audit.record(m.parameters())
        with torch.no_grad():
            m.weight[0, 0] = float("nan")
        audit.record(m.parameters())
        return m


    def growing_record(x, y, *, seed, audit=None):
        m = _fit(x, y, seed)
        audit.record(m.parameters())
        audit.record([*m.parameters(), torch.zeros(3)])
        return m


    def no_seed(x, y, *, audit=None):
        return torch.nn.Linear(x.shape[1], 10)


    def interrupted(x, y, *, seed):
        raise KeyboardInterrupt
''')

CLAIM = 'n_records = 30\nnoise_multiplier = 2.0\nsteps = 3\n[audit]\ntrials = 12\n[claim]\nepsilon = 50.0\n'
WHITE = '[canary]\nkind = "blank"\n[attack]\nthreat_model = "white_box"\nscore = "inner_product"\n'


def _config(tmp_path: Path, trainer: str, extra: str = "", src: str = TRAINERS, module: str = "hard") -> Path:
    (tmp_path / f"{module}.py").write_text(src, encoding="utf-8")
    cfg = tmp_path / f"{trainer.replace(':', '_').replace('/', '_').replace('.', '_')}.toml"
    cfg.write_text(f'[training]\ntrainer = "{trainer}"\n{CLAIM}{extra}', encoding="utf-8")
    return cfg


def _check(capsys, cfg: Path, out: Path, *flags: str) -> tuple[int, str]:
    """Exit code and the error line(s) of ``dpaudit check --quiet`` (the other line names the run folder)."""
    rc = main(["check", str(cfg), "--out", str(out), "--quiet", *flags])
    err = capsys.readouterr().err.strip().splitlines()
    return rc, "\n".join(line for line in err if not line.startswith("dpaudit check: run folder"))


@pytest.mark.parametrize(("fn", "trial"), [("exits0", True), ("exits1", True), ("generator_exit", True),
                                       ("forward_exits", True)])
def test_an_exit_from_train_or_forward_is_exit_2_naming_trainer_and_trial(tmp_path, capsys, fn, trial):
    """sys.exit(0) in user code made check exit 0 with no audit; sys.exit(1) read as a violation."""
    rc, err = _check(capsys, _config(tmp_path, f"hard:{fn}"), tmp_path / "run")
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and f"'hard:{fn}'" in err and "trial 0" in err


def test_an_exit_while_importing_the_trainer_module_is_exit_2(tmp_path, capsys):
    src = "import sys\nsys.exit(0)\n\ndef train(x, y, *, seed):\n    pass\n"
    rc, err = _check(capsys, _config(tmp_path, "exiting:train", src=src, module="exiting"), tmp_path / "run")
    assert rc == 2 and len(err.splitlines()) == 1
    assert "'exiting:train'" in err and "SystemExit" in err


def test_an_exit_inside_a_process_worker_is_exit_2_too(tmp_path, capsys):
    rc, err = _check(capsys, _config(tmp_path, "hard:exits0"), tmp_path / "run", "--backend", "process",
                     "--workers", "1")
    assert rc == 2 and "'hard:exits0'" in err and "trial" in err and "sys.exit(0)" in err


def test_keyboard_interrupt_still_interrupts(tmp_path, monkeypatch):
    (tmp_path / "hard.py").write_text(TRAINERS, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    d = data.digits().subset(slice(0, 30))
    ctx = plugin.Context("hard:interrupted", d, canaries.blank(d, 1, generator=torch.Generator().manual_seed(0)))
    with pytest.raises(KeyboardInterrupt):
        plugin.run_trial(ctx, 0)


@pytest.mark.parametrize(("fn", "white", "words"), [
    ("nan_logits", False, "NaN or inf logits"), ("inf_logits", False, "NaN or inf logits"),
    ("no_logits", False, "K = 0 logits"), ("nan_params", True, "parameters hold NaN or inf"),
    ("growing_record", True, "audit.record call 2 got 653 parameter numbers, the first call 650")])
def test_non_finite_or_odd_outputs_name_trainer_and_trial(tmp_path, capsys, fn, white, words):
    """Were "in_scores must be finite" (no trainer, no trial) or exit 3."""
    rc, err = _check(capsys, _config(tmp_path, f"hard:{fn}", WHITE if white else ""), tmp_path / "run")
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and f"'hard:{fn}'" in err and "trial 0" in err and words in err


def test_a_trainer_without_seed_is_told_it_lacks_seed(tmp_path, capsys):
    rc, err = _check(capsys, _config(tmp_path, "hard:no_seed"), tmp_path / "run")
    assert rc == 2 and "takes no keyword 'seed'" in err and "'audit'" not in err.split("seed'")[-1]


# --------------------------------------------------------------------------------------- timeout

def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """The CLI in a subprocess, so that a trial that is not stopped fails the test instead of hanging it."""
    import audit

    env = {"PYTHONPATH": str(Path(audit.__file__).resolve().parents[1]), "OMP_NUM_THREADS": "1",
           "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "audit", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize(("fn", "how"), [("sleeps", "flag"), ("spins", "key"), ("sleeps", "process")])
def test_a_hanging_trial_stops_at_the_per_trial_timeout(tmp_path, fn, how):
    extra = "trial_timeout = 1.0\n" if how == "key" else ""
    cfg = _config(tmp_path, f"hard:{fn}")
    cfg.write_text(cfg.read_text().replace("trials = 12\n", "trials = 12\n" + extra), encoding="utf-8")
    flags = {"flag": ["--trial-timeout", "1"], "key": [],
             "process": ["--trial-timeout", "1", "--backend", "process", "--workers", "1"]}[how]
    p = _cli(tmp_path, "check", str(cfg), "--out", str(tmp_path / "run"), *flags)
    assert p.returncode == 2, p.stderr
    assert f"'hard:{fn}', trial 0: ran past the per-trial timeout of 1 s" in p.stderr


def test_the_timeout_is_checked(tmp_path, capsys):
    cfg = _config(tmp_path, "hard:sleeps")
    for bad in ("0", "-1", "inf", "nan"):
        rc, err = _check(capsys, cfg, tmp_path / "run", "--trial-timeout", bad)
        assert rc == 2 and "--trial-timeout must be a finite number of seconds > 0" in err
    assert not (tmp_path / "run").exists()
    with pytest.raises(acc.InputError, match=r"audit\.trial_timeout applies to a user trainer"):
        config.loads("[audit]\ntrial_timeout = 5.0\n")


# ------------------------------------------------------------------------------ where code comes from

@pytest.mark.parametrize("ref", ["..hard:train", "/tmp/hard:train", "a/../hard:train", "hard:..x"])
def test_a_trainer_reference_is_dotted_names_not_a_path(tmp_path, capsys, ref):
    rc, err = _check(capsys, _config(tmp_path, ref), tmp_path / "run")
    assert rc == 2 and "must be dotted Python names" in err
    assert not (tmp_path / "run").exists()


def test_trainer_dir_stays_inside_the_config_folder_unless_absolute(tmp_path, capsys, monkeypatch):
    outside = tmp_path / "outside"
    (outside).mkdir()
    (outside / "far.py").write_text("import torch\n\ndef train(x, y, *, seed):\n    torch.manual_seed(seed)\n"
                                    "    return torch.nn.Linear(x.shape[1], 10)\n", encoding="utf-8")
    inner = tmp_path / "cfg"
    (inner / "sub").mkdir(parents=True)
    (inner / "sub" / "near.py").write_text((outside / "far.py").read_text(), encoding="utf-8")
    monkeypatch.chdir(outside)  # a relative trainer_dir is read from the config's folder, not the working directory
    bad = inner / "bad.toml"
    bad.write_text(f'[training]\ntrainer = "far:train"\ntrainer_dir = "../outside"\n{CLAIM}', encoding="utf-8")
    rc, err = _check(capsys, bad, tmp_path / "run")
    assert rc == 2 and "training.trainer_dir '../outside' leaves the configuration's folder" in err
    sub = inner / "sub.toml"
    sub.write_text(f'[training]\ntrainer = "near:train"\ntrainer_dir = "sub"\n{CLAIM}', encoding="utf-8")
    assert config.load(sub).training.trainer_dir == str((inner / "sub").resolve())
    explicit = inner / "explicit.toml"
    explicit.write_text(f'[training]\ntrainer = "far:train"\ntrainer_dir = "{outside}"\n'
                        + CLAIM, encoding="utf-8")
    rc, err = _check(capsys, explicit, tmp_path / "run2")
    assert rc == 0, err


# ------------------------------------------------------------------------------------ Opacus hooks

def _opacus_twin(tmp_path: Path) -> None:
    """The Opacus example, and a twin that returns the GradSampleModule (or its _module) without remove_hooks()."""
    src = OPACUS_EXAMPLE.read_text(encoding="utf-8")
    assert "    model.remove_hooks()" in src
    hooked = src.replace("    model.remove_hooks()", "    if RETURN == 'gsm':\n        return model").replace(
        "EXPECTED_BATCH = 50", "RETURN = 'gsm'\nEXPECTED_BATCH = 50")
    (tmp_path / "opacus_ok.py").write_text(src, encoding="utf-8")
    (tmp_path / "opacus_hooked.py").write_text(hooked, encoding="utf-8")


def test_opacus_hooks_left_on_the_returned_model_do_not_break_the_white_box(tmp_path, monkeypatch):
    """Was exit 3 ('Tensor' object has no attribute '_forward_counter', from functional_call): the hooks are
    set aside while dpaudit evaluates the model, so the score is the one of the model without them."""
    pytest.importorskip("opacus")
    _opacus_twin(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import opacus_hooked

    d = data.digits().subset(slice(0, 100))
    c = canaries.blank(d, 1, generator=torch.Generator().manual_seed(0))
    spec = acc.DPSGD(3.0, acc.Poisson(0.5), 10)

    def score(trainer: str) -> list[float]:
        ctx = plugin.Context(trainer, d, c, score="inner_product", spec=spec, threat="white_box")
        return [plugin.run_trial(ctx, i)["scores"]["inner_product"][0] for i in range(2)]

    want = score("opacus_ok:train")
    for ret in ("gsm", "_module"):  # the GradSampleModule itself, or the wrapped module with its hooks still on
        monkeypatch.setattr(opacus_hooked, "RETURN", ret)
        assert score("opacus_hooked:train") == want


def test_a_model_functional_call_cannot_evaluate_is_exit_2_saying_what_to_do(tmp_path, capsys):
    src = TRAINERS + textwrap.dedent('''
        class _Tagged(torch.nn.Linear):
            def forward(self, x):
                assert self.weight.tag  # an attribute of the Parameter, gone under functional_call
                return super().forward(x)


        def tagged(x, y, *, seed, audit=None):
            m = _Tagged(x.shape[1], 10)
            m.weight.tag = True
            audit.record(m.parameters())
            audit.record(m.parameters())
            return m
    ''')
    rc, err = _check(capsys, _config(tmp_path, "hard:tagged", WHITE, src=src), tmp_path / "run")
    assert rc == 2 and "'hard:tagged', trial 0" in err and "remove_hooks()" in err


# ------------------------------------------------------------------- audit_trainer is the CLI's check

LEAKY = textwrap.dedent('''
    import torch


    def leaky(x, y, *, seed):
        """No noise, no clipping, a fixed start: the final model remembers the canary."""
        model = torch.nn.Linear(x.shape[1], 10)
        with torch.no_grad():
            model.weight.zero_()
            model.bias.zero_()
        opt = torch.optim.SGD(model.parameters(), lr=1.0)
        for _ in range(5):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y, reduction="sum").backward()
            opt.step()
        return model
''')


def test_audit_trainer_runs_the_cli_design_and_gives_its_verdict(tmp_path, capsys, monkeypatch):
    """audit_trainer ran one black-box audit where check runs two (blank and mean image, Bonferroni): the
    same trainer could pass from Python and fail in CI. Now both give the same audits, bounds and verdict."""
    from audit.score import audit_trainer

    (tmp_path / "leaky_mod.py").write_text(LEAKY, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = tmp_path / "leaky.toml"
    cfg.write_text('[training]\ntrainer = "leaky_mod:leaky"\nnoise_multiplier = 6.0\nsteps = 5\n[audit]\n'
                   'trials = 60\n[claim]\nepsilon = "accountant"\n', encoding="utf-8")
    rc = main(["check", str(cfg), "--out", str(tmp_path / "cli"), "--quiet"])
    capsys.readouterr()
    cli = json.loads((tmp_path / "cli" / "result.json").read_text(encoding="utf-8"))
    spec = acc.DPSGD(6.0, acc.Poisson(0.5), 5)
    r = audit_trainer("leaky_mod:leaky", spec, trials=60, claim_epsilon="accountant", run_dir=tmp_path / "py")
    assert rc == 1 and r["violation"] and not r["claim"]["holds"]
    assert [a["name"] for a in r["audits"]] == [a["name"] for a in cli["audits"]] == ["main", "mean_image"]
    assert [a["significance"] for a in r["audits"]] == [a["significance"] for a in cli["audits"]] == [0.025, 0.025]
    assert [a["epsilon_lower"] for a in r["audits"]] == [a["epsilon_lower"] for a in cli["audits"]]
    assert r["violation"] == cli["violation"] and r["claim"]["holds"] == cli["claim"]["holds"]
    # a callable is the same trainer: same trials, same bounds
    import leaky_mod

    r2 = audit_trainer(leaky_mod.leaky, spec, trials=60, claim_epsilon="accountant")
    assert [a["epsilon_lower"] for a in r2["audits"]] == [a["epsilon_lower"] for a in r["audits"]]


def test_audit_trainer_refuses_an_existing_run_folder_like_the_cli(tmp_path, monkeypatch):
    from audit import runs
    from audit.score import audit_trainer

    (tmp_path / "leaky_mod.py").write_text(LEAKY, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = acc.DPSGD(6.0, acc.Poisson(0.5), 5)
    kw = dict(trials=10, canary="blank", threat="black_box", run_dir=tmp_path / "run")
    first = audit_trainer("leaky_mod:leaky", spec, **kw)
    lines = (tmp_path / "run" / "audits" / "main" / "trials.jsonl").read_text(encoding="utf-8")
    with pytest.raises(runs.RunError, match="already holds a run"):
        audit_trainer("leaky_mod:leaky", spec, **kw)
    again = audit_trainer("leaky_mod:leaky", spec, resume=True, **kw)
    assert again["audits"][0]["epsilon_lower"] == first["audits"][0]["epsilon_lower"]
    assert (tmp_path / "run" / "audits" / "main" / "trials.jsonl").read_text(encoding="utf-8") == lines


# ------------------------------------------------------------------ check shows what it does, and where

def test_check_without_out_shows_progress_and_a_resumable_run_folder(tmp_path, capsys, monkeypatch):
    """check without --out printed nothing for minutes and wrote into a temporary folder it then deleted."""
    cfg = _config(tmp_path, "hard:fitted", src=TRAINERS + textwrap.dedent('''
        def fitted(x, y, *, seed):
            return _fit(x, y, seed)
    '''))
    monkeypatch.chdir(tmp_path)
    rc = main(["check", str(cfg)])
    err = capsys.readouterr().err
    folder = next(line for line in err.splitlines() if "run folder" in line).split("'")[1]
    assert rc == 0 and "estimate: main: 12 trials of your trainer" in err and "trials (hard:fitted)" in err
    assert (tmp_path / folder / "result.json").is_file() and (tmp_path / folder / "report.html").is_file()
    assert main(["check", str(cfg), "--resume", "--out", folder, "--quiet"]) == 0
    assert main(["check", str(cfg), "--resume"]) == 2
    assert "--resume needs --out" in capsys.readouterr().err


# --------------------------------------------------------------------------- estimate before starting

@pytest.mark.parametrize(("keys", "words", "budget"), [
    # 0.146 GiB per model since the trainer draws noise per block of steps (0.87 GiB before): 0.1 GB is too little
    ("steps = 100000", "training.steps = 100000", "0.1"),
    ('model = "mlp"\nhidden = 4096', "training.hidden = 4096", "0.25")])
def test_a_model_that_cannot_fit_is_refused_naming_the_key(tmp_path, capsys, keys, words, budget):
    cfg = tmp_path / "big.toml"
    cfg.write_text(f"[training]\n{keys}\n[audit]\ntrials = 10\n", encoding="utf-8")
    rc = main(["run", str(cfg), "--out", str(tmp_path / "run"), "--memory-gb", budget])
    err = capsys.readouterr().err
    assert rc == 2 and "one model needs about" in err and words in err and "--memory-gb" in err
    assert not (tmp_path / "run").exists()  # refused before the run folder is made


@pytest.mark.parametrize("value", ["inf", "nan", "0", "-1", "1e9"])
def test_memory_gb_must_be_finite_and_fit_the_machine(tmp_path, capsys, value):
    """--memory-gb inf overflowed (exit 3); 1e9 GiB is more than any machine here has."""
    rc = main(["run", "--out", str(tmp_path / "run"), "--memory-gb", value, "--quiet"])
    assert rc == 2 and "--memory-gb" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_the_estimate_prints_time_and_memory_of_a_long_run():
    from audit import estimate

    cfg = config.loads("[training]\nsteps = 100000\n[audit]\ntrials = 1000000\nlift_limits = true\n")
    lines = estimate.describe(cfg)
    assert len(lines) == 1 and all("per model" in line and "time_estimate" in line for line in lines)
    assert all("days" in line for line in lines)  # 1e6 trials x 1e5 steps: about 2e6 s of one core at least
    big = config.loads('[audit]\ngame = "one_run"\ntrials = 1000000\nlift_limits = true\n[canary]\ncount = 10000\n')
    phys = estimate.physical_memory()
    if phys is not None and phys < 600 * 2**30:  # 1e10 score rows: about 640 GB
        with pytest.raises(acc.InputError, match=r"lower audit\.trials"):
            estimate.describe(big)


# --------------------------------------------------------------------------------------------- threads

THREADS = textwrap.dedent('''
    import torch

    AT_IMPORT = torch.get_num_threads()


    def train(x, y, *, seed):
        """Fails the trial unless torch's threads were set (by --threads, default 1) before this module was imported."""
        import os

        want = int(os.environ["DPAUDIT_TEST_THREADS"])
        if (AT_IMPORT, torch.get_num_threads()) != (want, want):
            raise RuntimeError(f"threads {AT_IMPORT}, {torch.get_num_threads()}; want {want}")
        torch.manual_seed(seed)
        return torch.nn.Linear(x.shape[1], 10)
''')


@pytest.mark.parametrize(("flag", "want"), [((), 1), (("--threads", "2"), 2)])
def test_threads_are_set_before_the_trainer_module_is_imported(tmp_path, capsys, monkeypatch, flag, want):
    monkeypatch.setenv("DPAUDIT_TEST_THREADS", str(want))
    n = torch.get_num_threads()
    torch.set_num_threads(3)  # what torch would pick on a bigger machine
    try:
        rc, err = _check(capsys, _config(tmp_path, f"threads_{want}:train", src=THREADS, module=f"threads_{want}"),
                         tmp_path / "run", *flag)
    finally:
        torch.set_num_threads(n)
    assert rc == 0, err


def test_a_run_folder_from_before_the_timeout_key_still_resumes(tmp_path):
    """config.toml files written before audit.trial_timeout existed lack the key; --resume must still read them."""
    text = config.dumps(config.loads(""))
    old = "".join(line + "\n" for line in text.splitlines() if not line.startswith("trial_timeout"))
    (tmp_path / "config.toml").write_text(old, encoding="utf-8")
    assert config.load_resolved(tmp_path / "config.toml").audit.trial_timeout == 0.0
