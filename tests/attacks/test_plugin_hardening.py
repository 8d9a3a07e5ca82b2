"""A user's trainer must never decide the verdict by accident (issue 23 §1).

Whatever the user's code does (exit, hang, diverge, return odd shapes, leave Opacus hooks on the
model), ``dpaudit check`` ends with exit 2 and one line naming the trainer and the trial, never with
exit 0 or 1 (which CI reads as a verdict) and never with exit 3 (a dpaudit bug).
"""

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

CLAIM = 'n_records = 30\nnoise_multiplier = 2.0\nsteps = 3\n[audit]\ntrials = 4\n[claim]\nepsilon = 50.0\n'
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


@pytest.mark.parametrize("fn, trial", [("exits0", True), ("exits1", True), ("generator_exit", True),
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


@pytest.mark.parametrize("fn, white, words", [
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

    env = {"PYTHONPATH": str(Path(audit.__file__).resolve().parents[1]), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-m", "audit", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("fn, how", [("sleeps", "flag"), ("spins", "key"), ("sleeps", "process")])
def test_a_hanging_trial_stops_at_the_per_trial_timeout(tmp_path, fn, how):
    extra = "trial_timeout = 1.0\n" if how == "key" else ""
    cfg = _config(tmp_path, f"hard:{fn}")
    cfg.write_text(cfg.read_text().replace("trials = 4\n", "trials = 4\n" + extra), encoding="utf-8")
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
    with pytest.raises(acc.InputError, match="audit.trial_timeout applies to a user trainer"):
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
    assert config.load(sub)["training"]["trainer_dir"] == str((inner / "sub").resolve())
    explicit = inner / "explicit.toml"
    explicit.write_text(f'[training]\ntrainer = "far:train"\ntrainer_dir = "{outside}"\n'
                        + CLAIM.replace("trials = 4", "trials = 12"), encoding="utf-8")  # both members and not
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
