"""`dpaudit account`: output, JSON keys, exit codes."""

import json
import subprocess
import sys

import pytest

from audit.cli import main
from tests.oracles import reference_records


def test_json_keys_and_value(capsys):
    rc = main(
        [
            "account",
            "--noise-multiplier",
            "1.1",
            "--sample-rate",
            str(256 / 60000),
            "--steps",
            "14062",
            "--delta",
            "1e-5",
            "--json",
        ]
    )
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("epsilon", "delta", "method", "bound", "order", "format", "spec"):
        assert key in out
    assert out["bound"] == "upper" and out["method"] == "rdp"
    # Source: opacus 1.6.0 RDPAccountant 2.5965558689607486 (tests/data/reference_values.json, poisson_epsilon,
    # σ = 1.1, q = 256/60000, T = 14062); our order grid contains Opacus', so we are at most that
    (opacus,) = [r["values"]["eps_opacus_rdp"] for r in reference_records("poisson_epsilon")
                 if r["params"]["steps"] == 14062]
    assert 2.59 < out["epsilon"] <= opacus * (1 + 1e-6)


def test_text_output_says_upper_bound(capsys):
    assert (
        main(["account", "--noise-multiplier", "1.0", "--sample-rate", "0.01", "--steps", "1000", "--delta", "1e-5"])
        == 0
    )
    out = capsys.readouterr().out
    assert "upper bound" in out and "epsilon <=" in out


def test_delta_at_epsilon(capsys):
    assert (
        main(
            [
                "account",
                "--noise-multiplier",
                "1.0",
                "--sample-rate",
                "0.01",
                "--steps",
                "1000",
                "--epsilon",
                "2.2",
                "--json",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert 0 < out["delta"] < 1e-5


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--noise-multiplier", "-1", "--sample-rate", "0.1", "--steps", "3", "--delta", "1e-5"], "noise_multiplier"),
        (["--noise-multiplier", "1", "--sample-rate", "1.5", "--steps", "3", "--delta", "1e-5"], "rate"),
        (["--noise-multiplier", "1", "--sample-rate", "0.1", "--steps", "0", "--delta", "1e-5"], "steps"),
        (["--noise-multiplier", "1", "--sample-rate", "0.1", "--steps", "3", "--delta", "2"], "delta"),
        (["--noise-multiplier", "nan", "--sample-rate", "0.1", "--steps", "3", "--delta", "1e-5"], "noise_multiplier"),
        (["--noise-multiplier", "1", "--steps", "3", "--delta", "1e-5"], "--sample-rate"),
    ],
)
def test_bad_input_exits_2_with_one_line(capsys, args, needle):
    assert main(["account", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err


@pytest.mark.slow
def test_console_entry_point_runs_as_module():
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "audit",
            "account",
            "--noise-multiplier",
            "1",
            "--sample-rate",
            "0.01",
            "--steps",
            "10",
            "--delta",
            "1e-5",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["bound"] == "upper"
