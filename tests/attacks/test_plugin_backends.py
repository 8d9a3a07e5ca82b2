"""A user's own trainer through the parallel backends (issue 13 "Workers", issue 15 §1).

``--backend process`` (and ``ray``, in tests/audit/test_backends.py) runs each trial of
attacks/plugin.py in a worker process; the driver alone writes ``trials.jsonl`` and sorts it by
trial at the end, so the run folder is the same bytes as with the local backend. A trainer error
crosses the worker boundary as the same one-line TrainerError; a worker that dies, or a driver
killed with SIGKILL, loses no finished trial, and ``--resume`` completes the run to the same bytes.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from attacks import canaries, data, games, plugin
from audit import backends
from audit.cli import main
from tests.audit.test_backends import _strip  # result.json without its wall-clock fields

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "own_training" / "torch_trainer.py"  # hand-written DP-SGD, white-box hook
DIE_TRIAL = 5


def _trainer_seed(seed: int, i: int) -> int:
    return games.trial_seed(seed, i, plugin._STREAM_TRAINER)


def _module(tmp_path: Path, game_seed: int = 0) -> None:
    """The example DP-SGD trainer plus twins that raise, die or dawdle on trial DIE_TRIAL."""
    shutil.copy(EXAMPLE, tmp_path / "torch_trainer.py")
    bad = _trainer_seed(game_seed, DIE_TRIAL)
    (tmp_path / "twins.py").write_text(textwrap.dedent(f'''
        import multiprocessing
        import os
        import time

        from torch_trainer import train as _train

        def raises(x, y, *, seed):
            if seed == {bad}:
                raise RuntimeError("CUDA out of memory")
            return _train(x, y, seed=seed)

        def dies(x, y, *, seed):
            if seed == {bad} and multiprocessing.parent_process() is not None:  # only in a pool's worker
                os._exit(3)  # the worker process vanishes without a word (OOM killer, segfault)
            return _train(x, y, seed=seed)

        def slow(x, y, *, seed):
            time.sleep(0.12)
            return _train(x, y, seed=seed)
    '''), encoding="utf-8")


def _config(tmp_path: Path, trainer: str, trials: int, name: str = "own.toml", design: str = "") -> Path:
    cfg = tmp_path / name
    cfg.write_text(f'[training]\ntrainer = "{trainer}"\nn_records = 100\nnoise_multiplier = 3.0\n'
                   f'sample_rate = 0.5\nsteps = 10\n[audit]\ntrials = {trials}\n{design}', encoding="utf-8")
    return cfg


def _bytes(run: Path) -> dict[str, bytes]:
    return {p.parent.name: p.read_bytes() for p in sorted((run / "audits").glob("*/trials.jsonl"))}


@pytest.fixture(scope="module")
def pool():
    with backends.Process(2) as p:  # one spawned pool for the tests that keep it alive
        yield p


@pytest.mark.slow
def test_process_backend_gives_the_local_bytes_white_and_black_box(tmp_path):
    """The example trainer's default design (white box: audit= hook, blank canary projected) and a
    black-box variant: trials.jsonl and result.json equal to the local backend's, trial by trial."""
    _module(tmp_path)
    black = '[[variant]]\nname = "white"\n[[variant]]\nname = "black"\nattack.threat_model = "black_box"\n' \
            'attack.score = "loss"\n'
    cfg = _config(tmp_path, "torch_trainer:train", 24, design=black)
    assert main(["run", str(cfg), "--out", str(tmp_path / "local"), "--quiet"]) == 0
    assert main(["run", str(cfg), "--out", str(tmp_path / "proc"), "--quiet", "--backend", "process",
                 "--workers", "2"]) == 0
    local, proc = _bytes(tmp_path / "local"), _bytes(tmp_path / "proc")
    assert set(local) == {"white", "black"} and local == proc
    assert [json.loads(x)["trial"] for x in proc["white"].splitlines()] == list(range(24))
    ra, rb = (json.loads((tmp_path / r / "result.json").read_text()) for r in ("local", "proc"))
    assert _strip(ra) == _strip(rb)


def test_a_trainer_error_in_a_worker_names_trainer_and_trial_and_keeps_finished_trials(tmp_path, pool):
    _module(tmp_path)
    d = data.digits().subset(slice(0, 100))
    c = canaries.blank(d, 1, generator=torch.Generator().manual_seed(0))
    ctx = plugin.Context("twins:raises", d, c, seed=0, base_dir=str(tmp_path))
    with pytest.raises(plugin.TrainerError, match=rf"'twins:raises' raised on trial {DIE_TRIAL}: RuntimeError: CUDA"):
        plugin.multi_run_game(ctx, n_trials=12, run_dir=tmp_path / "run", progress=False, backend=pool)
    kept = [json.loads(x)["trial"] for x in (tmp_path / "run" / "trials.jsonl").read_text().splitlines()]
    assert DIE_TRIAL not in kept and len(set(kept)) == len(kept)
    # the same trials as a clean run's, whichever finished before the error reached the driver
    ref = plugin.multi_run_game(plugin.Context("torch_trainer:train", d, c, seed=0, base_dir=str(tmp_path)),
                                n_trials=12, run_dir=tmp_path / "ref", progress=False)
    ref_lines = (tmp_path / "ref" / "trials.jsonl").read_text().splitlines()
    lines = {json.loads(x)["trial"]: json.loads(x) for x in ref_lines}
    for x in (tmp_path / "run" / "trials.jsonl").read_text().splitlines():
        r = json.loads(x)
        assert {k: v for k, v in r.items() if k != "game_id"} == \
            {k: v for k, v in lines[r["trial"]].items() if k != "game_id"}
    assert ref.scores["loss"].shape == (12,)


@pytest.mark.slow
def test_a_worker_that_dies_loses_no_finished_trial_and_resume_completes_the_same_bytes(tmp_path, capsys):
    _module(tmp_path)
    cfg = _config(tmp_path, "twins:dies", 16)  # dies on trial DIE_TRIAL in a pool worker only
    assert main(["run", str(cfg), "--out", str(tmp_path / "run"), "--quiet", "--backend", "process",
                 "--workers", "2"]) == 3
    err = capsys.readouterr().err  # one line naming --resume, no traceback (not a bug in dpaudit)
    assert "not finished" in err and "--resume" in err and "Traceback" not in err
    kept = [json.loads(x)["trial"] for x in (tmp_path / "run" / "audits" / "main" / "trials.jsonl")
            .read_text().splitlines()]
    assert DIE_TRIAL not in kept and len(kept) < 16
    # resumed in this process (the trainer does not die here): only the missing trials are trained
    assert main(["run", "--resume", "--out", str(tmp_path / "run"), "--quiet"]) == 0
    assert main(["run", str(cfg), "--out", str(tmp_path / "ref"), "--quiet"]) == 0
    assert _bytes(tmp_path / "run") == _bytes(tmp_path / "ref")


@pytest.mark.slow
def test_driver_killed_with_sigkill_then_resume_loses_no_finished_trial(tmp_path):
    """A real kill -9 of `dpaudit run --backend process` mid-run: every line written is a whole trial,
    and --resume (on the local backend) completes the file to the bytes of an uninterrupted run."""
    _module(tmp_path)
    cfg = _config(tmp_path, "twins:slow", 24)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "audit", "run", str(cfg), "--out", str(tmp_path / "run"),
                             "--quiet", "--backend", "process", "--workers", "2"], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    trials = tmp_path / "run" / "audits" / "main" / "trials.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not trials.exists() or trials.read_text().count("\n") < 4):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and its workers, at once
    proc.wait()
    text = trials.read_text()
    assert text.endswith("\n") and 4 <= text.count("\n") < 24  # whole lines only; the run was cut short
    assert main(["run", "--resume", "--out", str(tmp_path / "run"), "--quiet"]) == 0
    assert main(["run", str(cfg), "--out", str(tmp_path / "ref"), "--quiet"]) == 0
    assert _bytes(tmp_path / "run") == _bytes(tmp_path / "ref")


def _module_level_trainer(x, y, *, seed):
    torch.manual_seed(seed)
    return torch.nn.Linear(64, 10)


def test_a_trainer_workers_cannot_import_is_refused_with_the_fix(tmp_path, pool):
    d = data.digits().subset(slice(0, 20))
    c = canaries.blank(d, 1, generator=torch.Generator().manual_seed(0))

    def nested(x, y, *, seed):
        return torch.nn.Linear(64, 10)

    for fn in (nested, lambda x, y, *, seed: torch.nn.Linear(64, 10)):
        with pytest.raises(plugin.TrainerError, match="'module:function'"):
            plugin.multi_run_game(plugin.Context(fn, d, c), n_trials=2, run_dir=tmp_path, progress=False,
                                  backend=pool)
    assert not (tmp_path / "trials.jsonl").exists() or not (tmp_path / "trials.jsonl").read_text()  # no trial ran
    # a module-level function travels by reference (this test module is importable by the workers)
    out = plugin.multi_run_game(plugin.Context(_module_level_trainer, d, c), n_trials=4, progress=False,
                                backend=pool)
    assert out.scores["loss"].shape == (4,)
