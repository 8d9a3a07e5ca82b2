"""dpaudit run / check / report: every fault in attacks/faults.py is caught by `dpaudit check` (exit 1)
at a budget where the correct trainer passes (exit 0); usage errors exit 2; kill-and-resume of a run
gives the same result; report re-renders and the HTML is self-contained."""

import json
from pathlib import Path

import pytest

from attacks import games
from audit import runs
from audit.cli import main

ROOT = Path(__file__).resolve().parents[2]

SMALL = """
[training]
n_records = {n}
noise_multiplier = {sigma}
sample_rate = {q}
steps = {steps}
fault = "{fault}"
[canary]
norm = {norm}
[audit]
trials = 300
chunk_size = 300
[claim]
epsilon = "accountant"   # the accountants' own epsilon
delta = 1e-5
"""
# Budgets chosen so that the honest trainer passes and the faulty one fails (seeded, so deterministic).
CASES = {
    "noise_missing_factor": dict(n=20, sigma=2.0, q=1.0, steps=4, norm=1.0),  # μ = 1 claimed, 2 trained
    "no_clipping": dict(n=20, sigma=2.0, q=1.0, steps=4, norm=3.0),  # a canary of norm 3C stays 3C
    "shuffled_batches": dict(n=9, sigma=0.3, q=0.1, steps=10, norm=1.0),  # in exactly once, never absent
}


@pytest.mark.slow
@pytest.mark.parametrize("fault", sorted(CASES))
def test_check_catches_fault_where_correct_passes(fault, tmp_path, capsys):
    for f, expected in (("none", 0), (fault, 1)):
        path = tmp_path / f"{f}.toml"
        path.write_text(SMALL.format(fault=f, **CASES[fault]))
        junit = tmp_path / f"{f}.xml"
        assert main(["check", str(path), "--junit", str(junit), "--out", str(tmp_path / f)]) == expected, (fault, f)
        captured = capsys.readouterr()
        if expected == 1:
            assert "VIOLATION" in captured.err and "bug or broken DP" in captured.err
            assert "<failure" in junit.read_text()
        else:
            assert "holds" in captured.out


@pytest.mark.slow
def test_check_shipped_examples(tmp_path, capsys):
    assert main(["check", str(ROOT / "examples" / "claims.toml"), "--out", str(tmp_path / "claims")]) == 0
    assert main(["check", str(ROOT / "examples" / "faulty.toml"), "--out", str(tmp_path / "faulty")]) == 1


def test_usage_errors_exit_2(tmp_path, capsys):
    assert main(["check", str(tmp_path / "missing.toml")]) == 2
    bad = tmp_path / "bad.toml"
    bad.write_text('[training]\nsampling = "cyclic"\n')
    assert main(["check", str(bad)]) == 2
    assert "training.sampling must be one of" in capsys.readouterr().err
    assert main(["run", "--resume"]) == 2
    assert main(["report", str(tmp_path)]) == 2


@pytest.mark.slow
def test_kill_and_resume_gives_the_same_result(tmp_path, monkeypatch, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text(SMALL.format(fault="none", **CASES["noise_missing_factor"]).replace("chunk_size = 300",
                                                                                        "chunk_size = 100"))
    full = tmp_path / "full"
    assert main(["run", str(cfg), "--out", str(full), "--quiet"]) == 0
    real, calls = games.train, {"n": 0}

    def dies_on_second_chunk(*a, **k):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt  # killed in the middle of the run
        return real(*a, **k)

    monkeypatch.setattr(games, "train", dies_on_second_chunk)
    killed = tmp_path / "killed"
    with pytest.raises(KeyboardInterrupt):
        main(["run", str(cfg), "--out", str(killed), "--quiet"])
    monkeypatch.setattr(games, "train", real)
    assert len((killed / "audits" / "main" / "trials.jsonl").read_text().splitlines()) == 100
    assert main(["run", str(cfg), "--out", str(killed), "--quiet"]) == 2  # exists: needs --resume
    assert main(["run", "--out", str(killed), "--resume", "--quiet"]) == 0
    a, b = runs.load_result(full), runs.load_result(killed)
    assert a.audits[0].epsilon_lower == b.audits[0].epsilon_lower
    assert a.audits[0].points == b.audits[0].points
    assert len((killed / "audits" / "main" / "trials.jsonl").read_text().splitlines()) == 300
    # re-render: the HTML embeds every figure, the JSON has the versioned keys
    (killed / "report.html").unlink()
    assert main(["report", str(killed)]) == 0
    page = (killed / "report.html").read_text()
    # trade-off plane, ROC, ε against steps and the score histogram, all embedded
    assert page.count("data:image/png;base64,") == 4 and "figures/" not in page
    res = json.loads((killed / "result.json").read_text())
    assert res["format"] == "dpaudit.result/2"
    for key in ("epsilon_lower", "epsilon_rdp", "epsilon_tight", "ceiling", "violation", "trials", "threat_model",
                "significance", "delta"):
        assert key in res["audits"][0], key
    assert res["audits"][0]["epsilon_lower"]["bound"] == "lower"
    assert (killed / "config.toml").read_text().count("seed = 0") == 1


def test_check_without_out_writes_under_the_working_folder_not_the_repository(tmp_path, monkeypatch, capsys):
    """`check` without --out writes runs/<stem>-<UTC time> under the working folder and prints it. Tests must
    pass --out or chdir (issue 23 §6): this one chdirs into tmp_path, and the repository's runs/ gains nothing."""
    repo_runs = ROOT / "runs"
    before = sorted(p.name for p in repo_runs.iterdir()) if repo_runs.is_dir() else []
    cfg = tmp_path / "tiny.toml"
    cfg.write_text(SMALL.format(fault="none", n=20, sigma=2.0, q=1.0, steps=2, norm=1.0)
                   .replace("trials = 300", "trials = 20").replace("chunk_size = 300", "chunk_size = 20"))
    monkeypatch.chdir(tmp_path)
    assert main(["check", str(cfg), "--quiet"]) == 0
    made = sorted((tmp_path / "runs").iterdir())
    assert len(made) == 1 and made[0].name.startswith("tiny-") and (made[0] / "result.json").is_file()
    assert f"runs/{made[0].name}" in capsys.readouterr().err  # the folder is printed
    assert (sorted(p.name for p in repo_runs.iterdir()) if repo_runs.is_dir() else []) == before
