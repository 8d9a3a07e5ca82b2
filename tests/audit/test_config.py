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
    names = [v["name"] for v in config.variants(cfg)]
    assert names == ["white_box_poisson", "white_box_crafted_fixed_size", "black_box_loss"]
    fixed = config.variants(cfg)[1]
    assert fixed["training"]["sampling"] == "fixed_wor" and fixed["audit"]["seed"] == 0


@pytest.mark.parametrize(("text", "message"), [
    ('[training]\nsampling = "cyclic"',
     "training.sampling must be one of ['fixed_wor', 'poisson', 'shuffle']"),
    ("[training]\nsteps = 0", "training.steps must be an integer ≥ 1; got 0"),
    ("[training]\nsample_rate = 1.5", r"training.sample_rate must be a number in (0, 1]; got 1.5"),
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
        assert cfg["claim"]["delta"] > 0
    assert config.load(ROOT / "examples" / "faulty.toml")["training"]["fault"] == "noise_missing_factor"
