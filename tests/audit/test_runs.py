"""audit.runs: one-run and reconstruction games end to end, the run folder contract (no overwrite,
resume only with the same configuration), and a report rendered from result.json alone."""

import json
from pathlib import Path

import pytest
import torch

from audit import config, model, report, runs

Q1 = "[training]\nn_records = 20\nsample_rate = 1.0\nnoise_multiplier = 2.0\nsteps = 4\n"


def test_one_run_game_uses_one_run_bounds(tmp_path):
    cfg = config.loads(Q1 + '[canary]\ncount = 32\n[audit]\ngame = "one_run"\ntrials = 4\nchunk_size = 4\n')
    r = runs.audit_variant(config.variants(cfg)[0], tmp_path)
    assert r.design == "one_run" and r.epsilon_lower.method == "one_run"
    assert r.points is None  # no multi-run boxes for the canaries of one run
    assert 0 <= r.epsilon_lower.value <= r.ceiling and r.epsilon_lower.value < r.epsilon_tight
    assert r.gdp_lower_one_run.method == "one_run_fdp" and not r.violation.violated
    assert r.gdp_lower_one_run.bound == "gdp_mu_lower" and not hasattr(r, "epsilon_lower_fdp")


def test_reconstruction_game_against_rero(tmp_path):
    cfg = config.loads(Q1 + '[canary]\ncount = 10\n[audit]\ngame = "reconstruction"\ntrials = 100\n')
    r = runs.audit_variant(config.variants(cfg)[0], tmp_path)
    rc = r.reconstruction
    assert rc.kappa == pytest.approx(0.1) and rc.success_lower <= rc.success_rate_estimate
    assert rc.success_lower <= rc.rero_bound_upper and not r.violation.violated
    assert r.score == "llr"  # white-box reconstruction's documented score


def test_run_folder_contract(tmp_path):
    c1, c2 = tmp_path / "a.toml", tmp_path / "b.toml"
    c1.write_text(Q1 + "[audit]\ntrials = 40\nchunk_size = 40\n")
    c2.write_text(Q1 + "[audit]\ntrials = 40\nchunk_size = 40\nseed = 1\n")
    out = tmp_path / "run"
    folder, res = runs.execute(c1, out, progress=False)
    with pytest.raises(runs.RunError, match="--resume"):
        runs.execute(c1, out, progress=False)
    with pytest.raises(runs.RunError, match="differs"):
        runs.execute(c2, out, resume=True, progress=False)
    _, again = runs.execute(c1, out, resume=True, progress=False)  # nothing missing: same numbers
    assert again.audits[0].epsilon_lower == res.audits[0].epsilon_lower
    assert "seed = 0" in (out / "config.toml").read_text()
    # the report needs result.json only
    loaded = model.RunResult.from_json(json.loads((out / "result.json").read_text()))
    paths = report.render(folder, loaded)
    assert paths["html"].stat().st_size > 10_000 and (out / "figures").is_dir()
    assert "eps_lower" in report.summary_table(loaded)


def test_check_on_a_reconstruction_game_exits_0_not_3(tmp_path, capsys):
    """Before: `dpaudit check` read `a.claim.epsilon` of a reconstruction audit (None): AttributeError, exit 3.
    A reconstruction game decides no (ε, δ) claim; its violation test is its verdict (none here: σ = 2)."""
    from audit.cli import main

    cfg = tmp_path / "c.toml"
    cfg.write_text(Q1 + '[canary]\ncount = 4\n[audit]\ngame = "reconstruction"\ntrials = 20\n[claim]\nepsilon = 50\n')
    assert main(["check", str(cfg), "--out", str(tmp_path / "run")]) == 0
    out = capsys.readouterr()
    assert "internal error" not in out.err and "main: no violation" in out.out


def test_the_run_folder_lock_covers_the_report(tmp_path, monkeypatch):
    """Before: the lock was released before report.md and figures were written, so a --resume started then
    rendered its report beside the first run's. Now `run`, `check --out` and `report` render under the lock."""
    from audit.cli import main

    cfg = tmp_path / "c.toml"
    cfg.write_text(Q1 + "[audit]\ntrials = 40\nchunk_size = 40\n")
    run = tmp_path / "run"
    held = []
    real = report.render

    def render(folder, result=None):
        with pytest.raises(runs.RunError, match="in use by another dpaudit process"):
            with runs.lock(Path(folder)):  # a second opener (a --resume) is refused while the report is written
                pass
        held.append(True)
        return real(folder, result)

    monkeypatch.setattr(report, "render", render)
    assert main(["run", str(cfg), "--out", str(run), "--quiet"]) == 0
    assert main(["report", str(run)]) == 0
    assert held == [True, True] and (run / "report.md").is_file()


def test_an_audit_whose_trials_are_all_on_one_side_names_the_audit_and_the_fix():
    """2 trials can both lack the canary; the error names the audit and audit.trials (not an internal statistic)."""
    from attacks.games import Design
    from audit.runs import RunError, _check_both_sides

    with pytest.raises(RunError, match=r"audit 'main': its 2 runs hold 0 with the canary in and 2 .*audit\.trials"):
        _check_both_sides("main", torch.tensor([False, False]), Design.MULTI_RUN)
    with pytest.raises(RunError, match=r"3 canaries hold 3 with the canary in and 0"):
        _check_both_sides("one", torch.tensor([True, True, True]), Design.ONE_RUN)
    _check_both_sides("main", torch.tensor([True, False]), Design.MULTI_RUN)  # both sides: no error
