"""Where the chunks of an audit game are trained: this process, a worker pool, or a Ray cluster.

A game (:mod:`attacks.games`) splits its trials into a fixed partition of chunks (``chunk_size``
consecutive trials) and trial i draws all its randomness from ``trial_seed(seed, i)``, so a chunk's
records are a pure function of the game's context and the chunk's first trial. A backend only
decides *where* that function runs::

    backend.map(fn, context, items)  ->  yields (item, fn(context, item)) as each finishes

The driver process is the single writer: it appends each finished chunk to ``trials.jsonl`` and
flushes it as soon as it arrives, so killing a worker or the driver loses no finished chunk, and
``--resume`` runs only the missing ones. When chunks arrived out of order the file is rewritten
sorted by trial at the end (atomically), so ``trials.jsonl`` and ``result.json`` are the same
bytes as with the local backend on the same machine.

- :class:`Local`: in order, in this process (the default).
- :class:`Process`: a pool of ``workers`` spawned processes on this machine (``spawn``, never
  ``fork``: safe with torch's threads). The context travels with each task; a context sent per
  trial (a user trainer's, :class:`attacks.plugin.Context`) carries its tensors as plain arrays,
  since torch's shared-memory reduction of each tensor costs ~2 ms per task.
- :class:`Ray`: one Ray task per chunk, on the cluster at ``address`` (default: start a local
  one). Ray is optional: ``pip install 'dpaudit[ray]'``. A task whose worker dies is retried by
  Ray (``max_retries``).

The context travels to workers in memory through the engine's own serialisation (pickle for the
process pool, Ray's object store); nothing is ever *loaded* from a file with pickle.

>>> b = from_name("local")
>>> [r for _, r in b.map(pow, 2, [3, 4])]
[8, 16]
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import multiprocessing as mp
import os
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from accountants import validate as check
from accountants.errors import InputError

from .jsontypes import JSONObject

__all__ = ["NAMES", "Backend", "BackendError", "Local", "Process", "Ray", "from_name"]

NAMES = ("local", "process", "ray")


class BackendError(RuntimeError):
    """A backend lost work it cannot recover itself (a worker process died): resume the run."""


class Backend:
    """Runs ``fn(context, item)`` for every item; yields ``(item, result)`` as each finishes."""

    name = "backend"

    def map(self, fn: Callable[[Any, Any], Any], context: Any, items: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        raise NotImplementedError

    def describe(self) -> JSONObject:
        """JSON-ready description (recorded in result.json; not part of a game's identity)."""
        return {"name": self.name}


class Local(Backend):
    """In order, in this process."""

    name = "local"

    def map(self, fn, context, items):
        for item in items:
            yield item, fn(context, item)


# ------------------------------------------------------------------------------------ process pool

def _init_worker(threads: int) -> None:
    torch.set_num_threads(threads)



DEFAULT_THREADS = 1


def default_threads(workers: int) -> int:
    """Torch intra-op threads per worker: 1 (:data:`DEFAULT_THREADS`), whatever ``workers`` is.

    Each worker trains whole trials, so the workers already use the cores; a worker with several
    intra-op threads oversubscribes them, and on a loaded machine torch's spinning threads make
    every trial many times slower (docs/scale.md, measured in issue 23).
    """
    check.integer(1, None, workers=workers)
    return DEFAULT_THREADS


def set_threads(threads: int | None) -> int:
    """Set this process's torch intra-op threads (``--threads``; None: :data:`DEFAULT_THREADS`); returns it.

    Called by ``dpaudit run``/``check`` before any configuration is read, so before a user
    trainer's module is imported or called.
    """
    n = DEFAULT_THREADS if threads is None else threads
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError(f"--threads must be an integer ≥ 1; got {threads!r}")
    torch.set_num_threads(n)
    return n


class Process(Backend):
    """A pool of ``workers`` spawned processes on this machine, started at the first map and kept
    for the next ones (one start-up per audit, not per variant); :meth:`close` or ``with`` ends it.

    Args:
        workers: processes (≥ 1).
        threads: torch intra-op threads per worker (default 1: :func:`default_threads`).
    """

    name = "process"

    def __init__(self, workers: int = 2, *, threads: int | None = None) -> None:
        check.integer(1, None, workers=workers)
        if threads is not None:
            check.integer(1, None, threads=threads)
        self.workers = int(workers)
        self.threads = default_threads(self.workers) if threads is None else int(threads)
        self._pool: cf.ProcessPoolExecutor | None = None

    def describe(self) -> JSONObject:
        return {"name": self.name, "workers": self.workers, "threads": self.threads}

    def _executor(self) -> cf.ProcessPoolExecutor:
        if self._pool is None:
            self._pool = cf.ProcessPoolExecutor(max_workers=self.workers, mp_context=mp.get_context("spawn"),
                                                initializer=_init_worker, initargs=(self.threads,))
            weakref.finalize(self, self._pool.shutdown, wait=True, cancel_futures=True)
        return self._pool

    def close(self) -> None:
        """Stop the worker processes."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> Process:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def map(self, fn, context, items):
        items = list(items)
        if not items:
            return
        pool = self._executor()
        futures = {pool.submit(fn, context, item): item for item in items}
        try:
            for fut in cf.as_completed(futures):
                try:
                    result = fut.result()
                except cf.process.BrokenProcessPool as err:
                    self._pool = None
                    raise BackendError("a worker process of the process backend died; every finished chunk is "
                                       "saved: run again with --resume to train the missing ones") from err
                yield futures[fut], result
        except BaseException:  # an error, an interrupt or a consumer that stopped early: nothing more is wanted
            self._abort()
            raise
        finally:
            for fut in futures:
                fut.cancel()

    def _abort(self) -> None:
        """Stop the pool now: terminate its workers instead of waiting for the chunks already queued to them.

        A graceful shutdown after a failed trial waited for the worker's queued chunk, and the interpreter's exit
        for the pool's manager thread: a trainer hung in native code, or an executor stuck in its own shutdown,
        kept the driver alive past its error (seen: ``check --backend process --trial-timeout 1`` on a sleeping
        trainer printed its error and stayed until killed). Finished chunks are already on disk."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        procs = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            p.terminate()
        for p in procs:
            p.join(timeout=5)


# ------------------------------------------------------------------------------------------ Ray


def _import_ray():
    try:
        import ray  # optional dependency
    except ImportError:
        raise ImportError("the ray backend needs Ray: pip install 'dpaudit[ray]' (or pip install 'ray>=2')") from None
    return ray


def _ray_task(fn: Callable[[Any, Any], Any], context: Any, item: Any, threads: int) -> Any:
    torch.set_num_threads(threads)
    return fn(context, item)


def _ray_get(ray: Any, ref: Any) -> Any:
    """``ray.get``, with a task's own input error re-raised as itself (one line at the CLI, exit 2) and a
    worker lost beyond its retries as :class:`BackendError` (the finished chunks are saved)."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as err:
        cause = getattr(err, "cause", None)
        if isinstance(cause, InputError):  # e.g. attacks.plugin.TrainerError from a user trainer
            raise cause from None
        raise
    except (ray.exceptions.RayError, SystemExit) as err:  # a worker, the raylet or an agent died (never a verdict)
        raise BackendError(f"Ray failed ({type(err).__name__}); every finished chunk is saved: run again with "
                           "--resume to train the missing ones") from err


def _ray_wait(ray: Any, refs: list[Any]) -> list[Any]:
    """``ray.wait`` for one ready task; Ray's own failure (its agent killed, the raylet lost: a RayError, or a
    SystemExit from Ray's internals) is a :class:`BackendError`, so the CLI exits 3 "not finished", never 1."""
    try:
        return ray.wait(refs, num_returns=1)[0]
    except (ray.exceptions.RayError, SystemExit) as err:
        raise BackendError(f"Ray failed ({type(err).__name__}); every finished chunk is saved: run again with "
                           "--resume to train the missing ones") from err


_REAPER = """
import os, signal, sys, time
parent, session = int(sys.argv[1]), sys.argv[2]
while True:
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        break
    time.sleep(1.0)
def ours(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        if session.encode() in f.read():
            return True
    fds = f"/proc/{pid}/fd"
    return any(session in os.readlink(os.path.join(fds, fd)) for fd in os.listdir(fds))
for _ in range(3):  # agents a dying raylet leaves behind may still be starting up
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                if ours(pid):
                    os.kill(int(pid), signal.SIGKILL)
            except OSError:
                pass
    time.sleep(2.0)
"""


def _reap_on_driver_death(session_dir: str | None) -> None:
    """Best effort (Linux): a watcher that kills the local Ray this driver started once the driver is gone.

    Ray's own atexit hook stops its processes on a normal exit, but after a SIGKILL of the driver its
    raylet, GCS and agents stayed alive (issue 23 §3). The watcher polls the driver's pid each second,
    then SIGKILLs every process whose command line or open files name this Ray session's folder (its
    agents rename themselves ``ray::…`` but keep their logs there open; no other Ray's processes).
    """
    if not session_dir or not os.path.isdir("/proc"):
        return
    import subprocess
    import sys

    subprocess.Popen([sys.executable, "-c", _REAPER, str(os.getpid()), os.path.basename(session_dir)],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                     start_new_session=True)


class Ray(Backend):
    """One Ray task per chunk.

    Args:
        address: a running cluster ("auto", "ray://host:10001", ...); None starts a local Ray
            (or uses the one this process already started with ``ray.init``).
        threads: torch threads per task (default 1; a task reserves one CPU).
        max_retries: how often Ray re-runs a task whose worker died.
    """

    name = "ray"

    def __init__(self, address: str | None = None, *, threads: int = 1, max_retries: int = 3) -> None:
        check.integer(1, None, threads=threads)
        check.integer(0, None, max_retries=max_retries)
        self.address, self.threads, self.max_retries = address, int(threads), int(max_retries)
        _import_ray()  # fail early, with the extra's name

    def describe(self) -> JSONObject:
        return {"name": self.name, "address": self.address, "threads": self.threads}

    def _connect(self):
        ray = _import_ray()
        if not ray.is_initialized():
            kwargs: dict[str, Any] = {}
            if self.address is None:
                # a local Ray: its workers import the same dpaudit as this driver (a checkout included)
                root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
                path = os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])
                kwargs["runtime_env"] = {"env_vars": {"PYTHONPATH": path}}
            # a remote cluster's nodes need dpaudit installed (pip install 'dpaudit[ray]')
            info = ray.init(address=self.address, include_dashboard=False, log_to_driver=False, **kwargs)
            if self.address is None:
                _reap_on_driver_death(getattr(info, "address_info", {}).get("session_dir"))
        return ray

    def map(self, fn, context, items):
        items = list(items)
        if not items:
            return
        ray = self._connect()
        task = ray.remote(num_cpus=self.threads, max_retries=self.max_retries)(_ray_task)
        ctx_ref = ray.put(context)
        pending = {task.remote(fn, ctx_ref, item, self.threads): item for item in items}
        try:
            while pending:
                ready = _ray_wait(ray, list(pending))
                for ref in ready:
                    item = pending.pop(ref)
                    yield item, _ray_get(ray, ref)
        finally:
            for ref in pending:
                ray.cancel(ref)


def from_name(name: str, *, workers: int | None = None, ray_address: str | None = None,
              threads: int | None = None) -> Backend:
    """The backend called ``name`` ("local", "process" or "ray"), as the CLI's --backend names it.

    ``threads``: torch intra-op threads per worker (None: 1).
    """
    match name:
        case "local":
            return Local()
        case "process":
            return Process(2 if workers is None else workers, threads=threads)
        case "ray":
            return Ray(ray_address, threads=DEFAULT_THREADS if threads is None else threads)
    raise InputError(f"backend must be one of {list(NAMES)}; got {name!r}")


def add_arguments(parser: Any) -> None:
    """Add --backend, --workers, --ray-address, --memory-gb, --device, --threads and --trial-timeout to an
    argparse (sub)parser."""
    parser.add_argument("--backend", choices=NAMES, default="local",
                        help="where chunks of trials are trained: this process (local), a pool of --workers "
                             "processes (process), or Ray tasks (ray; pip install 'dpaudit[ray]'); the result is "
                             "the same")
    parser.add_argument("--workers", type=int, default=None, help="process backend: worker processes (default 2)")
    parser.add_argument("--ray-address", default=None,
                        help="ray backend: cluster address (default: start a local Ray)")
    parser.add_argument("--memory-gb", type=float, default=None,
                        help="memory one chunk of models may take, in GiB (default: a quarter of this machine's "
                             "memory, half a GPU's); decides how many models train at once")
    parser.add_argument("--device", default="cpu",
                        help="where the DP-SGD trainer runs: cpu (default) or cuda / cuda:N; the trials, and so "
                             "the results, are the same draws on every device")
    parser.add_argument("--threads", type=int, default=None, metavar="N",
                        help=f"torch intra-op threads of this process (local backend) or of each worker "
                             f"(process, ray); default {DEFAULT_THREADS}: more oversubscribes a busy machine. Set "
                             "before a user trainer's code runs")
    parser.add_argument("--trial-timeout", type=float, default=None, metavar="SECONDS",
                        help="a user trainer's trial that runs longer stops the run with an error naming the trial "
                             "(default: [audit] trial_timeout; 0 there means none)")


def from_args(args: Any) -> Backend | None:
    """The backend the CLI arguments ask for (None for local: the games' own in-order loop)."""
    name = getattr(args, "backend", "local")
    if getattr(args, "workers", None) is not None and name != "process":
        raise InputError(f"--workers applies to --backend process only; got --backend {name}")
    if getattr(args, "ray_address", None) is not None and name != "ray":
        raise InputError(f"--ray-address applies to --backend ray only; got --backend {name}")
    set_threads(getattr(args, "threads", None))  # this process, before any user code runs
    memory = getattr(args, "memory_gb", None)
    if memory is not None and not (math.isfinite(memory) and memory > 0):
        raise InputError(f"--memory-gb must be a finite number of GiB > 0; got {memory!r}")
    timeout = getattr(args, "trial_timeout", None)
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise InputError(f"--trial-timeout must be a finite number of seconds > 0; got {timeout!r}")
    if name == "local":
        return None
    return from_name(name, workers=args.workers, ray_address=args.ray_address, threads=getattr(args, "threads", None))
