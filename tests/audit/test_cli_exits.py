"""Issue 12 §4 and issue 11 §8: honest exit codes (0 / 1 violation / 2 input / 3 internal with a traceback),
one writer per run folder, nothing created for a bad configuration, resumes that refuse an empty or truncated
config.toml, output paths checked before the audit runs, documented limits, prefix abbreviations refused."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from audit import config, runs
from audit.cli import main

ROOT = Path(__file__).resolve().parents[2]

TINY = """
[training]
n_records = 20
noise_multiplier = 2.0
sample_rate = 1.0
steps = 2
[audit]
trials = 20
chunk_size = 20
"""


def _write(tmp_path: Path, text: str, name: str = "c.toml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def test_run_exits_1_on_a_violation(tmp_path, capsys):
    """`dpaudit run examples/faulty.toml` finds the injected fault: exit 1 (it exited 0 before)."""
    assert main(["run", str(ROOT / "examples" / "faulty.toml"), "--out", str(tmp_path / "r"), "--quiet"]) == 1
    assert "VIOLATION" in capsys.readouterr().err


def test_internal_error_exits_3_with_a_traceback(tmp_path, monkeypatch, capsys):
    def broken(*a, **k):
        raise KeyError("an internal bug")

    monkeypatch.setattr(runs, "audit_variant", broken)
    assert main(["run", str(_write(tmp_path, TINY)), "--out", str(tmp_path / "r"), "--quiet"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err and "KeyError: 'an internal bug'" in err and "internal error" in err
    # a TypeError or ValueError from a bug is not a usage error either (it was exit 2 before)
    monkeypatch.setattr("audit.commands.account.spec_from_args", lambda args: int("not a number"))
    assert main(["account", "--noise-multiplier", "1", "--steps", "1", "--delta", "1e-5", "--sample-rate", "0.1"]) == 3
    assert "Traceback" in capsys.readouterr().err


def test_check_never_exits_1_on_a_crash(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(runs, "audit_variant", lambda *a, **k: 1 / 0)
    assert main(["check", str(ROOT / "examples" / "claims.toml"), "--out", str(tmp_path / "run")]) == 3


def test_usage_error_exits_2_in_one_line(capsys):
    assert main(["account", "--noise-multiplier", "-1", "--steps", "1", "--delta", "1e-5", "--sample-rate", "0.1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "noise_multiplier" in err and "Traceback" not in err


def test_prefix_abbreviations_are_refused(capsys):
    with pytest.raises(SystemExit) as e:  # --sample would have matched --sample-rate
        main(["account", "--noise-multiplier", "1", "--steps", "1", "--delta", "1e-5", "--sample", "0.1"])
    assert e.value.code == 2
    with pytest.raises(SystemExit):
        main(["run", "--qui"])


def test_sample_rate_with_batch_or_dataset_size_is_refused(capsys):
    base = ["account", "--noise-multiplier", "1", "--steps", "10", "--delta", "1e-5", "--sample-rate", "0.1"]
    for extra in (["--batch-size", "10"], ["--dataset-size", "100"], ["--batch-size", "10", "--dataset-size", "100"]):
        assert main(base + extra) == 2
        assert "both set the Poisson rate" in capsys.readouterr().err
    # B/N alone still works, and equals --sample-rate B/N
    assert main([*base[:-2], "--batch-size", "10", "--dataset-size", "100", "--json"]) == 0
    assert '"rate": 0.1' in capsys.readouterr().out


BAD_CONFIGS = [
    '[training]\nsampling = "cyclic"',
    "[training]\nn_records = 5000",  # more than the 1797 digits: caught by building, not by the schema
    '[training]\ndataset = "breast_cancer"\nn_records = 1000',
    "[training]\nnoise_multiplier = inf",
    "[training]\nnoise_multiplier = nan",
    "[training]\nsteps = 1e3",
    "[training]\nsteps = 1000000",  # above the documented limit
    "[audit]\ntrials = 1000000000000",
    "[attack]\nn_shadow = 1000000000",
    "[audit]\nseed = 100000000000000000000",
    "[audit]\nthreshold = 'best'",
    '[canary]\nkind = "blank"',  # an input canary with the white-box threat model
    '[attack]\nthreat_model = "black_box"',  # a gradient canary in the black box
    '[audit]\ngame = "reconstruction"\n[canary]\ncount = 2\n[training]\nsampling = "fixed_size"\nbatch_size = 102',
    "[claim]\nepsilon = -1",
    '[claim]\nepsilon = "whatever"',
    "[[variant]]\nname = '..'",
    "[[variant]]\nname = 'a/b'",
    '[[variant]]\nname = "abc\\n"',  # a TOML basic string ending in a newline
    "[[variant]]\nname = 'x'\ntraining.n_records = 5000",
    "a = " + "[" * 3000 + "]" * 3000,
    "[training\nsteps = 1",
    "",  # empty is the default config: valid, so it is not in this list's spirit; replaced below
]
BAD_CONFIGS[-1] = "[unknown]\nx = 1"


@pytest.mark.parametrize("text", BAD_CONFIGS, ids=range(len(BAD_CONFIGS)))
def test_a_bad_config_exits_2_and_leaves_no_run_folder(tmp_path, capsys, text):
    cfg = _write(tmp_path, text)
    out = tmp_path / "runs" / "new"
    assert main(["run", str(cfg), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("dpaudit run: error:")
    assert not (tmp_path / "runs").exists()  # nothing created, not even the parent


def test_non_utf8_and_cr_only_files(tmp_path, capsys):
    p = tmp_path / "latin1.toml"
    p.write_bytes('[training]\ndataset = "d\xefgits"\n'.encode("latin-1"))
    assert main(["run", str(p), "--out", str(tmp_path / "x")]) == 2
    assert "not UTF-8" in capsys.readouterr().err
    lf = "[training]\nnoise_multiplier = 2.0\n[audit]\ntrials = 64\n"
    assert config.loads(lf.replace("\n", "\r")) == config.loads(lf) == config.loads(lf.replace("\n", "\r\n"))
    p = tmp_path / "cr.toml"
    p.write_bytes(b"[training]\rsteps = 0\r")  # read as lines, so the bad value is seen (not a comment)
    assert main(["run", str(p), "--out", str(tmp_path / "y")]) == 2
    assert "training.steps must be an integer" in capsys.readouterr().err


def test_limits_can_be_lifted_explicitly():
    with pytest.raises(config.InputError, match=r"audit.trials = 2000000 is above the documented limit 1000000"):
        config.loads("[audit]\ntrials = 2000000")
    assert config.loads("[audit]\ntrials = 2000000\nlift_limits = true").audit.trials == 2_000_000


def _started_run(tmp_path: Path) -> Path:
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.toml").write_text(config.dumps(config.loads(TINY)), encoding="utf-8")
    return out


def test_resume_refuses_an_empty_or_truncated_config(tmp_path, capsys):
    out = _started_run(tmp_path)
    full = (out / "config.toml").read_text()
    for text, needle in (("", "is empty"), (full[: len(full) // 2], "is truncated"),
                         (full.replace("trials = 20\n", ""), "lacks audit.trials")):
        (out / "config.toml").write_text(text)
        assert main(["run", "--resume", "--out", str(out), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert needle in err and "dpaudit run CONFIG --out" in err, err
        assert not (out / "audits").exists()  # nothing ran


def test_one_writer_per_run_folder(tmp_path, capsys):
    out = _started_run(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, os, sys, time
        fd = os.open({str(out / runs.LOCK_FILE)!r}, os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.pwrite(fd, f"{{os.getpid()}}\\n".encode(), 0)
        print("locked", flush=True)
        time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        assert main(["run", "--resume", "--out", str(out), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert f"in use by another dpaudit process (pid {holder.pid})" in err
        assert not (out / "audits").exists()
    finally:
        holder.kill()
        holder.wait()
    with runs.lock(out):  # the lock dies with its holder: no stale lock
        pass


def test_check_output_paths_are_checked_before_the_audit(tmp_path, monkeypatch, capsys):
    def must_not_run(*a, **k):
        raise AssertionError("the audit ran before the output path was checked")

    monkeypatch.setattr(runs, "execute", must_not_run)
    claims = str(ROOT / "examples" / "claims.toml")
    assert main(["check", claims, "--junit", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err
    assert main(["check", claims, "--junit", str(tmp_path / "missing" / "j.xml")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_claim_epsilon_accountant_and_zero(tmp_path, capsys):
    assert config.loads("").claim.epsilon == "accountant"
    assert config.loads("[claim]\nepsilon = 0").claim.epsilon == 0.0  # a real claim now
    cfg = _write(tmp_path, TINY + "[claim]\nepsilon = 0\n")
    # perfect privacy is not supported by any accountant
    assert main(["check", str(cfg), "--out", str(tmp_path / "run")]) == 1
    assert 'now written epsilon = "accountant"' in capsys.readouterr().err
