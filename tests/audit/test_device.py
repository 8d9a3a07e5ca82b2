"""``--device cpu|cuda`` for ``dpaudit run`` and ``check`` (issue 15 §4): the trainer runs where the flag says,
the trials do not depend on it, and a device this machine lacks is an input error (exit 2) naming the flag."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import accountants as acc
from attacks import data, dpsgd, models
from audit.cli import main
from tests.accountants.test_device_transfers import _Transfers

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


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
@pytest.mark.parametrize("command", ["run", "check"])
def test_cuda_unavailable_is_an_input_error_naming_the_flag(tmp_path, capsys, command):
    cfg = tmp_path / "c.toml"
    cfg.write_text(TINY, encoding="utf-8")
    target = str(tmp_path / "claims.toml") if command == "check" else str(cfg)
    if command == "check":
        Path(target).write_text(TINY + "[claim]\nepsilon = 10.0\ndelta = 1e-5\n", encoding="utf-8")
    assert main([command, target, "--out", str(tmp_path / "r"), "--device", "cuda"]) == 2
    err = capsys.readouterr().err
    assert "--device 'cuda'" in err and "CUDA is not available" in err
    assert not (tmp_path / "r").exists()  # refused before any work


def test_unknown_device_is_an_input_error(tmp_path, capsys):
    cfg = tmp_path / "c.toml"
    cfg.write_text(TINY, encoding="utf-8")
    assert main(["run", str(cfg), "--out", str(tmp_path / "r"), "--device", "tpu"]) == 2
    assert "--device must be 'cpu' or 'cuda'" in capsys.readouterr().err


def test_device_cpu_flag_gives_the_default_run(tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text(TINY, encoding="utf-8")
    assert main(["run", str(cfg), "--out", str(tmp_path / "a"), "--quiet"]) == 0
    assert main(["run", str(cfg), "--out", str(tmp_path / "b"), "--quiet", "--device", "cpu"]) == 0
    for trials in Path(tmp_path / "a", "audits").rglob("trials.jsonl"):
        other = tmp_path / "b" / trials.relative_to(tmp_path / "a")
        assert trials.read_bytes() == other.read_bytes()
    ra, rb = (json.loads((tmp_path / f / "result.json").read_text()) for f in ("a", "b"))
    assert [a["epsilon_lower"] for a in ra["audits"]] == [a["epsilon_lower"] for a in rb["audits"]]


def test_trainer_step_loop_moves_no_array():
    """Every draw goes to the device once before the loop; with the data already there nothing moves at all,
    and the host reads (gather widths) do not grow with the number of steps."""
    d = data.digits().subset(slice(0, 100))
    reads = []
    for steps in (2, 8):
        spec = acc.DPSGD(1.0, acc.Poisson(0.2), steps=steps)
        with _Transfers() as t:
            dpsgd.train(spec, models.logistic_regression(64, 10), d, clip_norm=1.0, learning_rate=0.5, n_models=2,
                        generator=[torch.Generator().manual_seed(s) for s in (0, 1)], device="cpu")
        assert t.moves == []
        reads.append(t.reads)
    assert reads[0] == reads[1]
