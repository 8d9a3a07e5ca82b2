"""audit.config: defaults, round trip, the shipped example, errors that name the key and the allowed values."""

import re
from pathlib import Path

import pytest

from audit import config

ROOT = Path(__file__).resolve().parents[2]


def test_default_round_trip_and_example_file():
    cfg = config.load(None)
    assert config.loads(config.dumps(cfg)) == cfg
    assert (ROOT / "examples" / "default.toml").read_text() == config.DEFAULT_TOML
    names = [v.name for v in config.variants(cfg)]
    assert names == ["white_box_poisson", "white_box_crafted_fixed_size", "black_box_loss"]
    fixed = config.variants(cfg)[1]
    assert fixed.training.sampling == "fixed_wor" and fixed.audit.seed == 0


@pytest.mark.parametrize(("text", "message"), [
    ('[training]\nsampling = "cyclic"',
     "training.sampling must be one of ['fixed_wor', 'poisson', 'random_allocation', 'shuffle', 'truncated_poisson']"),
    ("[training]\nsteps = 0", "training.steps must be an integer ≥ 1; got 0"),
    ("[training]\nsample_rate = 1.5", r"training.sample_rate must be a number in [1e-09, 1]; got 1.5"),
    ("[audit]\nsignificance = 0.7", r"audit.significance must be a number in (0, 0.5); got 0.7"),
    ("[audit]\ntrails = 10", "unknown key audit.trails; allowed keys:"),
    ("[trainig]\nsteps = 1", "unknown section [trainig]"),
    ('[canary]\nkind = "blank"', "needs a gradient canary"),
    ('[attack]\nscore = "loss"', "attack.score must be one of ['inner_product', 'llr', 'update_norm']"),
    ('[[variant]]\nname = "a b"', "variant[0].name"),
    ('[[variant]]\nname = "x"\ntraining.steps = -1', "variant 'x': training.steps must be an integer ≥ 1"),
    ("[training\n", "invalid TOML"),
])
def test_errors_name_key_and_allowed_values(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        config.loads(text)


def test_shipped_examples_load():
    for name in ("claims.toml", "faulty.toml", "default.toml"):
        cfg = config.load(ROOT / "examples" / name)
        assert cfg.claim.delta > 0
    assert config.load(ROOT / "examples" / "faulty.toml").training.fault == "noise_missing_factor"


@pytest.mark.parametrize(("text", "key"), [
    ("[audit]\ndelta = 0.0", "audit.delta must be a number in (0, 1)"),
    ("[claim]\ndelta = 0.0", "claim.delta must be a number in (0, 1)"),
    ("[training]\nsample_rate = 1e-320", "training.sample_rate must be a number in [1e-09, 1]"),
    ("[audit]\ntrials = " + "9" * 5000, "a number is too long"),
], ids=["audit_delta_0", "claim_delta_0", "sample_rate_1e-320", "int_5000_digits"])
def test_refused_before_a_run_folder_exists(tmp_path, capsys, text, key):
    """Before: delta = 0 and sample_rate = 1e-320 exited 2 after creating the run folder (the second with
    "in_scores must be finite", naming no key), and a 5,000-digit integer exited 3."""
    from audit.cli import main

    cfg = tmp_path / "c.toml"
    cfg.write_text(text)
    with pytest.raises(ValueError, match=re.escape(key)):
        config.loads(text)
    assert main(["run", str(cfg), "--out", str(tmp_path / "run"), "--quiet"]) == 2
    assert key in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_over_long_paths_are_input_errors(tmp_path, capsys):
    from audit.cli import main

    long = "a" * 5000
    assert main(["run", str(tmp_path / f"{long}.toml"), "--quiet"]) == 2
    assert "cannot be used" in capsys.readouterr().err
    cfg = tmp_path / "c.toml"
    cfg.write_text("[audit]\ntrials = 10")
    assert main(["run", str(cfg), "--out", str(tmp_path / long), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "cannot be used" in err and len(err) < 400
