"""Backends (audit.backends): the process pool and Ray give the same trials.jsonl and result.json
as the local backend, byte for byte on this machine, and a killed worker or driver loses no
finished chunk (--resume completes the run to the same bytes)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import accountants as acc
from attacks import canaries, data, games, models
from audit import backends
from audit.cli import main

ROOT = Path(__file__).resolve().parents[2]

SMALL = """
[training]
n_records = 40
steps = 4
[audit]
trials = 48
chunk_size = 12
[[variant]]
name = "white_box"
[[variant]]
name = "black_box_loss"
canary.kind = "blank"
attack.threat_model = "black_box"
attack.score = "loss"
"""


def _strip(x):
    """result.json without what varies between two runs of the same audit (wall-clock times)."""
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in x.items() if k not in ("created", "runtime_s")}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    return x


def _same_run(a: Path, b: Path) -> None:
    ra, rb = (json.loads((p / "result.json").read_text()) for p in (a, b))
    assert _strip(ra) == _strip(rb)
    for variant in ("white_box", "black_box_loss"):
        ta, tb = ((p / "audits" / variant / "trials.jsonl").read_bytes() for p in (a, b))
        assert ta == tb and ta.count(b"\n") == 48


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("backends")
    cfg = root / "small.toml"
    cfg.write_text(SMALL)
    assert main(["run", str(cfg), "--out", str(root / "local"), "--quiet"]) == 0
    return cfg, root / "local"


def test_local_backend_is_in_order():
    assert [r for _, r in backends.Local().map(pow, 2, [3, 1, 4])] == [8, 2, 16]


@pytest.mark.slow
def test_process_backend_same_result_as_local(local_run, tmp_path):
    cfg, local = local_run
    out = tmp_path / "process"
    assert main(["run", str(cfg), "--out", str(out), "--quiet", "--backend", "process", "--workers", "2"]) == 0
    _same_run(local, out)


# ---------------------------------------------------------------------- killed worker, killed driver


def _die_on(fn, die_at, ctx, start):
    if start == die_at:
        os._exit(3)  # the worker process dies without a word
    return fn(ctx, start)


class _DyingProcess(backends.Process):
    """A process pool whose worker dies on the chunk starting at ``die_at``."""

    def __init__(self, die_at: int) -> None:
        super().__init__(2)
        self.die_at = die_at

    def map(self, fn, context, items):
        import functools

        return super().map(functools.partial(_die_on, fn, self.die_at), context, items)


class _DriverKilledAfter(backends.Local):
    """The driver is interrupted after ``k`` chunks have come back."""

    def __init__(self, k: int) -> None:
        self.k = k

    def map(self, fn, context, items):
        for n, (item, res) in enumerate(super().map(fn, context, items)):
            if n == self.k:
                raise KeyboardInterrupt
            yield item, res


def _fail_or_sleep(context, item):
    """Item 0 fails at once; every other item would sleep for ten minutes."""
    if item == 0:
        raise ValueError("trial 0 failed")
    time.sleep(600)
    return item


def test_a_failed_item_stops_the_pool_instead_of_waiting_for_queued_ones():
    """After an error the process backend terminates its workers: a graceful shutdown waited for the chunk already
    queued to the worker (here 10 minutes), and `check --backend process --trial-timeout 1` on a sleeping trainer
    printed its error and stayed alive until killed."""
    b = backends.Process(1)
    t0 = time.monotonic()
    with pytest.raises(ValueError, match="trial 0 failed"):
        for _ in b.map(_fail_or_sleep, None, range(4)):
            pass
    assert time.monotonic() - t0 < 60 and b._pool is None
    b.close()  # idempotent after the abort


def _game(run_dir, backend=None):
    d = data.digits().subset(slice(0, 40))
    setup = games.Setup(acc.DPSGD(1.0, acc.Poisson(0.5), steps=3), models.logistic_regression(64, 10), d)
    return games.multi_run_game(setup, canaries.dirac([0], dim=650), n_trials=40, chunk_size=10, seed=3,
                                run_dir=run_dir, progress=False, backend=backend)


@pytest.mark.slow
def test_killed_worker_then_resume_loses_nothing(tmp_path):
    ref = _game(tmp_path / "ref")
    with _DyingProcess(die_at=20) as dying, pytest.raises(backends.BackendError, match="--resume"):
        _game(tmp_path / "run", dying)
    kept = (tmp_path / "run" / "trials.jsonl").read_text().splitlines()
    assert len(kept) % 10 == 0 and len(kept) < 40  # whole chunks only, and not the dead one
    assert all(json.loads(line)["trial"] // 10 != 2 for line in kept)
    out = _game(tmp_path / "run")  # resume on any backend
    assert (tmp_path / "run" / "trials.jsonl").read_bytes() == (tmp_path / "ref" / "trials.jsonl").read_bytes()
    assert out.scores["llr"].tolist() == ref.scores["llr"].tolist()


def test_killed_driver_then_resume_loses_nothing(tmp_path):
    _game(tmp_path / "ref")
    with pytest.raises(KeyboardInterrupt):
        _game(tmp_path / "run", _DriverKilledAfter(2))
    assert len((tmp_path / "run" / "trials.jsonl").read_text().splitlines()) == 20  # both finished chunks kept
    _game(tmp_path / "run")
    assert (tmp_path / "run" / "trials.jsonl").read_bytes() == (tmp_path / "ref" / "trials.jsonl").read_bytes()


def test_out_of_order_chunks_are_written_in_trial_order(tmp_path):
    class Reversed(backends.Local):
        def map(self, fn, context, items):
            return super().map(fn, context, list(items)[::-1])

    _game(tmp_path / "ref")
    _game(tmp_path / "rev", Reversed())
    assert (tmp_path / "rev" / "trials.jsonl").read_bytes() == (tmp_path / "ref" / "trials.jsonl").read_bytes()


# ------------------------------------------------------------------------------------ CLI errors


@pytest.mark.slow
def test_backend_usage_errors_exit_2(local_run, tmp_path, capsys):
    cfg, _ = local_run
    assert main(["run", str(cfg), "--out", str(tmp_path / "a"), "--workers", "2"]) == 2
    assert "--workers applies to --backend process" in capsys.readouterr().err
    assert main(["run", str(cfg), "--out", str(tmp_path / "b"), "--backend", "process", "--workers", "0"]) == 2
    assert "workers" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", str(cfg), "--backend", "spark"])
    with pytest.raises(acc.InputError, match="backend must be one of"):
        backends.from_name("spark")


# ------------------------------------------------------------------------------------------- Ray


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        # workers must import this checkout (not another installed copy of dpaudit)
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    yield ray
    ray.shutdown()


@pytest.mark.slow
def test_ray_backend_same_result_as_local(ray_cluster, local_run, tmp_path):
    cfg, local = local_run
    out = tmp_path / "ray"
    assert main(["run", str(cfg), "--out", str(out), "--quiet", "--backend", "ray"]) == 0
    _same_run(local, out)


@pytest.mark.slow
def test_ray_backend_default_config_same_result_as_local(ray_cluster, tmp_path):
    """Issue 15's done-when: `dpaudit run examples/default.toml --backend ray` gives the local result.json
    (all three default variants, crafted datasets included) and the same trials.jsonl bytes."""
    cfg = ROOT / "examples" / "default.toml"
    assert main(["run", str(cfg), "--out", str(tmp_path / "local"), "--quiet"]) == 0
    assert main(["run", str(cfg), "--out", str(tmp_path / "ray"), "--quiet", "--backend", "ray"]) == 0
    ra, rb = (json.loads((tmp_path / r / "result.json").read_text()) for r in ("local", "ray"))
    assert _strip(ra) == _strip(rb) and len(ra["audits"]) == 3
    for p in sorted((tmp_path / "local" / "audits").glob("*/trials.jsonl")):
        assert p.read_bytes() == (tmp_path / "ray" / "audits" / p.parent.name / "trials.jsonl").read_bytes()


@pytest.mark.slow
def test_ray_backend_runs_a_user_trainer_to_the_local_bytes(ray_cluster, tmp_path):
    """A user's own trainer ([training] trainer, imported from the config's folder by each Ray worker):
    same trials.jsonl as local; a trainer error comes back as the one-line TrainerError (exit 2)."""
    import shutil

    shutil.copy(ROOT / "examples" / "own_training" / "torch_trainer.py", tmp_path / "torch_trainer.py")
    (tmp_path / "broken.py").write_text("def train(x, y, *, seed):\n    raise RuntimeError('no GPU here')\n",
                                        encoding="utf-8")
    cfg = tmp_path / "own.toml"
    cfg.write_text('[training]\ntrainer = "torch_trainer:train"\nn_records = 100\nnoise_multiplier = 3.0\n'
                   'sample_rate = 0.5\nsteps = 10\n[audit]\ntrials = 16\n', encoding="utf-8")
    assert main(["run", str(cfg), "--out", str(tmp_path / "local"), "--quiet"]) == 0
    assert main(["run", str(cfg), "--out", str(tmp_path / "ray"), "--quiet", "--backend", "ray"]) == 0
    local, ray_ = ((tmp_path / r / "audits" / "main" / "trials.jsonl").read_bytes() for r in ("local", "ray"))
    assert local == ray_ and local.count(b"\n") == 16
    cfg.write_text(cfg.read_text().replace("torch_trainer:train", "broken:train"), encoding="utf-8")
    assert main(["run", str(cfg), "--out", str(tmp_path / "broken"), "--quiet", "--backend", "ray"]) == 2


class _FakeRay:
    """Ray's surface as Ray.map uses it, failing the way a killed RuntimeEnvAgent or raylet makes it fail
    (simulated: a real kill -9 of Ray's agent is too slow and flaky for the suite)."""

    def __init__(self, failure: BaseException) -> None:
        import ray.exceptions

        self.exceptions, self.failure = ray.exceptions, failure

    def is_initialized(self) -> bool:
        return True

    def put(self, value):
        return value

    def remote(self, **_):
        return lambda fn: type("Task", (), {"remote": staticmethod(lambda *a: object())})

    def wait(self, refs, num_returns=1):
        raise self.failure

    def get(self, ref):
        raise self.failure

    def cancel(self, ref):
        pass


def _ray_failures():
    import ray.exceptions as rex

    return [rex.RuntimeEnvSetupError("agent killed"), rex.LocalRayletDiedError(), SystemExit(1)]


@pytest.mark.parametrize("index", [0, 1, 2], ids=["runtime_env_agent", "raylet", "system_exit"])
def test_a_ray_crash_is_not_finished_exit_3_never_a_violation(tmp_path, monkeypatch, capsys, index):
    """Before: kill -9 of Ray's RuntimeEnvAgent made the driver exit 1 (what CI reads as a violation) with no
    message. Any Ray failure (RayError, or SystemExit from Ray's internals) is now exit 3 "not finished"."""
    pytest.importorskip("ray")
    failure = _ray_failures()[index]
    monkeypatch.setattr(backends, "_import_ray", lambda: _FakeRay(failure))
    cfg = tmp_path / "c.toml"
    cfg.write_text("[training]\nn_records = 20\nsample_rate = 1.0\nsteps = 2\n[audit]\ntrials = 20\nchunk_size = 10\n")
    assert main(["run", str(cfg), "--out", str(tmp_path / "run"), "--backend", "ray", "--quiet"]) == 3
    err = capsys.readouterr().err
    assert "not finished" in err and "--resume" in err and "Traceback" not in err
    with pytest.raises(backends.BackendError, match="--resume"):
        backends._ray_get(_FakeRay(failure), object())


def test_threads_default_to_one_per_worker_and_are_checked(tmp_path, capsys):
    """Issue 23 §2: a worker with cores // workers intra-op threads oversubscribed a busy machine (a 200-trial check
    did not finish in 1,200 s on a loaded 2-core machine; 31 s with one thread). One thread per worker and per
    local trial unless --threads says otherwise."""
    assert backends.default_threads(1) == backends.default_threads(8) == 1
    assert backends.Process(2).threads == 1 and backends.Process(2, threads=3).threads == 3
    assert backends.from_name("process", workers=2, threads=2).threads == 2
    for bad in ("0", "-2"):
        assert main(["run", "--out", str(tmp_path / "r"), "--threads", bad]) == 2
        assert "--threads must be an integer ≥ 1" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


_KILLED_DRIVER = """
import os, signal
import ray
from audit import backends
backends.Ray(threads=1)._connect()
print(os.path.basename(ray._private.worker._global_node.get_session_dir_path()), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _session_processes(session: str) -> list[int]:
    """Pids whose command line or open files name the Ray session ``session``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                hit = session.encode() in f.read()
            fds = f"/proc/{pid}/fd"
            hit = hit or any(session in os.readlink(os.path.join(fds, fd)) for fd in os.listdir(fds))
        except OSError:
            continue
        if hit:
            found.append(int(pid))
    return found


@pytest.mark.slow
def test_ray_processes_do_not_outlive_a_sigkilled_driver(tmp_path):
    """Issue 23 §3: after a SIGKILL of the driver, the local Ray's agents (ray::DashboardAgent,
    ray::RuntimeEnvAgent) stayed alive. The watcher started with a local Ray now kills them."""
    pytest.importorskip("ray")
    if not os.path.isdir("/proc"):
        pytest.skip("the watcher reads /proc (Linux)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(backends.__file__).parents[1]),
                                                          os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", _KILLED_DRIVER], env=env, capture_output=True, text=True,
                         timeout=300, cwd=tmp_path)
    assert out.returncode == -signal.SIGKILL
    session = out.stdout.strip()
    assert session.startswith("session_")
    for _ in range(60):  # the watcher polls each second, then sweeps three times two seconds apart
        if not _session_processes(session):
            break
        time.sleep(1.0)
    assert _session_processes(session) == []
