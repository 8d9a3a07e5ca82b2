"""Time and memory of a run, estimated before it starts; what cannot fit is refused (issue 23 §2).

``dpaudit run`` and ``check`` print :func:`describe`'s lines before the first trial and refuse,
with an :class:`accountants.InputError` naming the keys (exit 2, no run folder left behind), a
configuration whose single model does not fit the memory budget, whose scores do not fit the
machine, or a ``--memory-gb`` above the machine's memory. The figures are estimates
(``*_estimate``): memory from :func:`attacks.dpsgd.bytes_per_model` (an upper estimate), time from
a rough cost model of dpaudit's own vectorised trainer fitted on the 2-core development machine
(idle): about 2e-5 s per model and step plus 7e-9 s per example-parameter product of a step. A
user's own trainer is timed by the progress bar once its first trial is done.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from accountants.errors import InputError
from attacks import dpsgd, samplers

from .runconfig import SEQUENTIAL_FIRST_LOOK, RunConfig, TrainingConfig, VariantConfig

if TYPE_CHECKING:
    from .runs import BuiltIn, UserTrainer

__all__ = ["VariantEstimate", "describe", "estimate"]

_STEP_S, _PRODUCT_S = 2e-5, 7e-9  # seconds per model-step and per example x parameter (module doc)
_ROW_BYTES = 64  # a score row in memory: score, truth, trial, canary and seed tensors, float64/int64
_TRIAL_BYTES = 400  # a trial's JSON record kept while a game runs
_GB = 2**30


@dataclass(frozen=True)
class VariantEstimate:
    """One audit's estimate. ``bytes_per_model_estimate`` and ``seconds_estimate`` are None for a user trainer."""

    name: str
    trials: int
    chunk_size: int
    rows: int
    bytes_per_model_estimate: int | None
    scores_bytes_estimate: int
    seconds_estimate: float | None


def physical_memory() -> int | None:
    """This machine's memory in bytes (None where the OS does not say)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return None


def estimate(cfg: RunConfig, built: Mapping[str, BuiltIn | UserTrainer] | None = None) -> list[VariantEstimate]:
    """Per audit of a resolved configuration: memory per model, memory of the scores, time (module doc).

    ``built``: each audit's game input by name, as :func:`audit.runs.prepare` made it (the run's one build);
    an audit not in it is built here.
    """
    from . import runs  # runs imports this module's callers, not this module

    out = []
    for v in cfg.audits():
        aud = v.audit
        rows, scores = _scores_bytes(v)
        if v.training.trainer:
            out.append(VariantEstimate(v.name, aud.max_trials or aud.trials, 1, rows, None, scores, None))
            continue
        game = (built or {}).get(v.name)
        setup, c = (game.setup, game.canaries) if isinstance(game, runs.BuiltIn) else runs.build(v)[:2]
        per = dpsgd.bytes_per_model(setup.spec, setup.model, setup.data, m=getattr(c, "records", c.m), probes=c.m)
        n = setup.data.n + getattr(c, "records", c.m)
        batch = min(n, max(1.0, float(samplers.expected_batch_size(setup.spec.sampling, n))))
        params = sum(p.numel() for p in setup.model.parameters())
        seconds = aud.trials * setup.spec.steps * (_STEP_S + _PRODUCT_S * batch * params)
        out.append(VariantEstimate(v.name, aud.trials, min(aud.chunk_size, aud.trials), rows, per, scores, seconds))
    return out


def _scores_bytes(v: VariantConfig) -> tuple[int, int]:
    """(score rows, bytes the game's records and scores take in memory) of one resolved variant."""
    aud = v.audit
    m = v.canary.count if aud.game == "one_run" else 1
    trials = max(aud.trials, aud.max_trials)  # the sequential design's ceiling
    rows = trials * m
    return rows, rows * _ROW_BYTES + trials * (_TRIAL_BYTES + 24 * m)


def _size(n: float) -> str:
    return f"{n / _GB:.3g} GiB" if n >= _GB / 10 else f"{n / 2**20:.3g} MiB"


def _duration(s: float) -> str:
    for unit, length in (("days", 86400), ("h", 3600), ("min", 60)):
        if s >= 2 * length:
            return f"{s / length:.3g} {unit}"
    return f"{s:.2g} s"


def _culprits(cfg: RunConfig) -> str:
    """The [training] keys that set one model's memory, with their values (the ones to lower)."""
    t = cfg.training
    keys = ("steps", "hidden", "n_records", "batch_size", "sample_rate") if not t.trainer else ()
    default = {f.name: f.default for f in dataclasses.fields(TrainingConfig)}
    names = [f"training.{k} = {getattr(t, k)}" for k in keys if getattr(t, k) != default[k]]
    return ", ".join(names) or "training.model = " + repr(t.model)


def describe(cfg: RunConfig, *, memory_gb: float | None = None, device: str = "cpu",
             built: Mapping[str, BuiltIn | UserTrainer] | None = None) -> list[str]:
    """The estimate's lines for the terminal; InputError naming the keys for what cannot fit (module doc).

    ``built``: each audit's game input by name (:func:`audit.runs.prepare`), reused rather than built again.
    """
    phys = physical_memory() if str(device) == "cpu" else None
    if memory_gb is not None and phys is not None and memory_gb * _GB > phys:
        raise InputError(f"--memory-gb {memory_gb:g} is more than this machine's memory ({_size(phys)}); give at "
                         f"most {phys / _GB:.3g}")
    budget = int(memory_gb * _GB) if memory_gb is not None else dpsgd.default_memory_bytes(device)
    for v in cfg.audits():  # before building anything
        rows, scores = _scores_bytes(v)
        if phys is not None and scores > phys // 2:
            raise InputError(f"audit {v.name!r}: the scores of audit.trials = {v.audit.trials} ({rows} rows) "
                             f"would take about {_size(scores)}, more than half this machine's memory "
                             f"({_size(phys)}): lower audit.trials (or canary.count)")
    lines = []
    for e in estimate(cfg, built):
        if e.bytes_per_model_estimate is None:
            seq = next(v.audit.max_trials for v in cfg.audits() if v.name == e.name)
            count = (f"{SEQUENTIAL_FIRST_LOOK} to {seq} trials (sequential: it stops at the first look "
                     "that decides)") if seq else f"{e.trials} trials"
            lines.append(f"{e.name}: {count} of your trainer; its time and memory are its own (the progress "
                         "bar shows the rate once the first trial is done)")
            continue
        if e.bytes_per_model_estimate > budget:
            where = "--memory-gb" if memory_gb is not None else "a quarter of this machine's memory; --memory-gb"
            raise InputError(f"audit {e.name!r}: one model needs about {_size(e.bytes_per_model_estimate)} "
                             f"(estimate), more than the memory budget {_size(budget)} ({where}): lower "
                             f"{_culprits(cfg)}")
        at_once = dpsgd.models_that_fit(budget, e.bytes_per_model_estimate, cap=e.chunk_size)
        lines.append(f"{e.name}: {e.trials} trials, about {_size(e.bytes_per_model_estimate)} per model, "
                     f"{at_once} at once; time_estimate {_duration(e.seconds_estimate or 0.0)} "
                     "(one idle core; rough)")
    return lines
