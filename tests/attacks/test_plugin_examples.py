"""examples/own_training: the correct trainers pass `dpaudit check`, their buggy twins fail it (exit 1).

Each TOML is run as shipped (200 trials). Measured on the 2-core development machine under load,
one torch thread: torch 22 s, torch_buggy 12 s, opacus 55 s, opacus_buggy 30 s, opacus_white_box
34 s (about 2.5 min together; most of it the accountants' curves and Opacus' per-step overhead).
Since issue 25 the white-box default adds the conformance audit: the two torch examples took 175 s together at load
average ~15 (seven agents on 2 cores).
torch_one_run (one training with 1,000 canaries, white box; issue 26): 9 s at load average 1, 19 s at 8.
"""

from pathlib import Path

import pytest
import torch

from audit.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "own_training"


@pytest.fixture(autouse=True)
def one_thread(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # check without --out keeps its run folder in runs/ of the working directory
    n = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: threads only add contention
    yield
    torch.set_num_threads(n)


@pytest.mark.parametrize(("name", "code"), [("torch", 0), ("torch_buggy", 1), ("torch_one_run", 0)])
def test_torch_example(name, code, tmp_path, capsys):
    assert main(["check", str(EXAMPLES / f"{name}.toml"), "--out", str(tmp_path / "run")]) == code
    if code:
        assert "bug or broken DP" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize(("name", "code"), [("opacus", 0), ("opacus_buggy", 1), ("opacus_white_box", 0)])
def test_opacus_example(name, code, tmp_path, capsys):
    pytest.importorskip("opacus")
    assert main(["check", str(EXAMPLES / f"{name}.toml"), "--out", str(tmp_path / "run")]) == code
    if code:
        assert "bug or broken DP" in capsys.readouterr().err
