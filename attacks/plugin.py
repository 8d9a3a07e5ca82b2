"""Audit the user's own training function: the trainer protocol and its black-box membership game.

The unit that gets audited is a function (docs/own-training.md)::

    def train(x: torch.Tensor, y: torch.Tensor, *, seed: int) -> torch.nn.Module:
        '''Train on these records with the DP-SGD the claim describes; return the final model.'''

- ``x``: (N, *feature_shape) float32 in model-input (standardised) space: the natural records plus
  this trial's canaries, in a random order the trainer must not rely on; ``y``: (N,) int64 labels.
- ``seed``: the trial's 63-bit seed; a trainer that seeds all its randomness from it is
  reproducible, and resumed runs give the same trials.
- The returned module maps a batch of inputs to logits (B, K); dpaudit calls it in eval mode
  under ``torch.no_grad()`` on the canaries only (the black-box threat model: the final model).

**White box** (the adversary sees every update, as the DP-SGD analysis allows): a trainer that
takes a keyword ``audit`` is handed a :class:`WhiteBoxAudit` and calls, in its training loop,

- ``audit.record(model.parameters())`` once before the first step and after every step (the
  per-step parameters the white-box adversary sees);
- with a gradient canary (:class:`DiracCanary`), ``g = audit.canary_gradient(params)`` once per
  step, between the per-example gradients and the clipping: ``g`` is None when the canary is not
  in this step's batch, else one tensor per parameter that the trainer appends as one more
  per-example gradient, so its own clipping, summing and noise process it. In the conformance game
  (canary kind ``dead_feature``, a Poisson claim) the hook hands out a *probe* instead, at each step
  with probability ½ (:class:`attacks.conformance_record.ProbeHook`; its architecture from one extra
  trial of the trainer per process, :func:`_template`).

Scores: with a gradient canary, Σ_t ⟨θ_{t−1} − θ_t, c⟩/‖c‖ (``inner_product``), or the spread of
those per-step projections a_t around their mean, Σ_t (a_t − ā)² (``step_spread``: with noise
drawn afresh at every step it is noise plus the canary's on/off pattern; with noise reused across
steps the noise cancels and only the canary's pattern is left, which the sum cannot see); with an
input canary, Σ_t ⟨θ_{t−1} − θ_t, clip_C(∇ℓ(θ_{t−1}; canary))⟩/C, the update projected on the
canary's clipped gradient at the previous parameters (``inner_product`` too). Higher ⇒ member.
Every score is a function of what the white-box adversary sees, so the audit is sound whichever
is chosen; they differ in which bugs they see (docs/fault-detection.md). In the black box the
canary is scored by the final model's loss (``loss``), its logit-scaled confidence
(``confidence``), or its final parameters along the canary's per-tensor clipped gradient averaged over
canary-free template models (``projection``, :func:`projection_directions`, :func:`projection_scores`; the
canary then takes the label those models find least likely, :func:`least_likely_labels`).

Referenced as ``"module:function"`` (TOML ``[training] trainer``): the module is imported from
``base_dir`` (the configuration file's folder) first, then from ``sys.path``. A callable works
too. A trainer that cannot be imported, has the wrong signature, raises or exits (any
``BaseException`` but ``KeyboardInterrupt``), runs past ``Context.timeout``, or returns something
else than an ``nn.Module`` giving finite (B, K) logits raises :class:`TrainerError` naming the
trainer and the trial; the trials finished before it are kept in ``trials.jsonl``. The reference
is dotted names only, looked up in ``trainer_dir`` (:func:`trainer_folder`) first.

The game is written as one pure function per trial, :func:`run_trial` ``(context, i) -> record``:
everything trial i draws comes from ``trial_seed(seed, i)``, so any backend that maps it over
the missing trials (this process, a process pool, Ray: ``audit.backends``) gives the same
records, and the driver alone appends them to ``trials.jsonl`` (same line format as
:mod:`attacks.games`, plus nothing else), so a killed run loses no finished trial.

>>> import torch
>>> from attacks import canaries, data
>>> d = data.digits().subset(slice(0, 20))
>>> def train(x, y, *, seed):
...     torch.manual_seed(seed)
...     return torch.nn.Linear(64, 10)
>>> ctx = Context(train, d, canaries.blank(d, 1, generator=torch.Generator().manual_seed(0)), seed=0)
>>> out = multi_run_game(ctx, n_trials=4, progress=False)
>>> tuple(out.scores["loss"].shape), out.design.value
((4,), 'multi_run')
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib
import importlib.util
import inspect
import json
import math
import pickle
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from accountants import validate as check
from accountants.errors import InputError, InputTypeError
from accountants.events import DPSGD
from accountants.sampling import Poisson

from . import conformance_record
from .canaries import InputCanaries
from .data import Dataset
from .games import TRIALS_FILE, AttackOutcome, Design, _append, _canonical_order, _read_trials, trial_seed

__all__ = ["SCORES", "Context", "DiracCanaries", "DiracCanary", "TrainerError", "WhiteBoxAudit", "least_likely_labels",
           "load_trainer", "multi_run_game", "one_run_game", "projection_directions", "projection_scores", "run_trial",
           "trainer_folder", "trainer_name"]

SCORES = ("loss", "confidence", "projection")  # black box (the final model; "projection" reads its parameters)
WHITE_SCORES = ("inner_product", "step_spread")
_STREAM_TRAINER = 3  # the trainer's own seed stream (games use 0-2)
_STREAM_PROBE = 4  # the conformance probe's coins (dpaudit's own, never the trainer's)
_STREAM_TEMPLATE = 5  # the seeds of the canary-free template trials (the probe's architecture, the projection's d)
TEMPLATE_TRIALS = 8  # the projection score's template trials per process (its canary's label and directions)
_CACHE: dict[tuple[str, str], Callable] = {}
_TEMPLATES: dict[str, tuple[nn.Module | None, str | None]] = {}  # per process, by game: (model, why not)
_DIRECTIONS: dict[str, tuple[InputCanaries, list[list[Tensor]]]] = {}  # per process, by game: the projection
# score's canary (its label chosen by the template models) and directions


class TrainerError(InputError):
    """A user trainer that cannot be used (import, signature, exception, return value); names trainer and trial."""


def trainer_name(trainer: str | Callable) -> str:
    """ "module:function" for a reference or a callable (for messages and the game identity)."""
    if isinstance(trainer, str):
        return trainer
    mod = getattr(trainer, "__module__", None) or "?"
    return f"{mod}:{getattr(trainer, '__qualname__', type(trainer).__name__)}"


def _import(module: str, base_dir: str | None) -> Any:
    if base_dir:
        root = Path(base_dir)
        parts = module.split(".")
        for cand in (root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")):
            if cand.is_file():
                # a private name, so a module of the same name elsewhere on sys.path is not shadowed
                name = f"dpaudit_trainer_{hashlib.sha256(str(cand.resolve()).encode()).hexdigest()[:12]}"
                if name in sys.modules:
                    return sys.modules[name]
                spec = importlib.util.spec_from_file_location(name, cand)
                mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
                sys.modules[name] = mod
                sys.path.insert(0, str(root))  # the trainer's own sibling imports resolve from its folder
                try:
                    spec.loader.exec_module(mod)  # type: ignore[union-attr]
                except BaseException:
                    del sys.modules[name]
                    raise
                finally:
                    sys.path.remove(str(root))
                return mod
    return importlib.import_module(module)


def trainer_folder(trainer_dir: Any, config_dir: str | Path | None) -> Any:
    """Where a trainer's module is looked up first: ``[training] trainer_dir`` checked and resolved.

    A configuration names code to run, so it is as trusted as code (docs/own-training.md). Empty:
    the configuration's folder. Relative: a folder inside the configuration's folder (``..`` is
    refused). Absolute: another folder, named explicitly — the one way to import from outside it.
    A value that is not a string is returned as is (the schema check reports it).
    """
    if not isinstance(trainer_dir, str):
        return trainer_dir
    if not trainer_dir:
        return "" if config_dir is None else str(Path(config_dir).resolve())
    p = Path(trainer_dir)
    if p.is_absolute():
        return str(p)
    if ".." in p.parts:
        raise TrainerError(f"training.trainer_dir {trainer_dir!r} leaves the configuration's folder ('..'); give a "
                           "folder inside it, or an absolute path to import a trainer from elsewhere explicitly")
    return str((Path(config_dir).resolve() if config_dir is not None else Path.cwd()) / p)


def load_trainer(trainer: str | Callable, base_dir: str | Path | None = None) -> Callable:
    """The trainer callable, imported and its signature checked.  Raises :class:`TrainerError`.

    Args:
        trainer: ``"module:function"`` (dotted module, dotted attribute path) or a callable.
        base_dir: folder searched first for the module (the configuration file's folder).
    """
    if callable(trainer):
        fn = trainer
    elif isinstance(trainer, str):
        if trainer.count(":") != 1 or not all(trainer.split(":")):
            raise TrainerError(f"trainer must be 'module:function'; got {trainer!r}")
        key = (trainer, str(base_dir or ""))
        if key in _CACHE:
            return _CACHE[key]
        module, attr = trainer.split(":")
        _check_reference(trainer, module, attr)
        try:
            obj = _import(module, None if base_dir is None else str(base_dir))
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # SystemExit, GeneratorExit, ... from the module's own code: never an exit
            where = f" (searched {str(base_dir)!r} first, then sys.path)" if base_dir else " (searched sys.path)"
            raise TrainerError(f"trainer {trainer!r}: cannot import module {module!r}{where}: "
                               f"{type(exc).__name__}: {exc}") from exc
        for part in attr.split("."):
            if not hasattr(obj, part):
                raise TrainerError(f"trainer {trainer!r}: module {module!r} has no attribute {attr!r}")
            obj = getattr(obj, part)
        if not callable(obj):
            raise TrainerError(f"trainer {trainer!r} is not callable (a {type(obj).__name__})")
        fn = obj
    else:
        raise TrainerError(f"trainer must be 'module:function' or a callable; got {type(trainer).__name__}")
    try:
        sig = inspect.signature(fn)
    except ValueError:  # no signature (some builtins): try it at the first trial
        return fn
    try:
        try:
            sig.bind(None, None, seed=0)
        except TypeError:
            sig.bind(None, None, seed=0, audit=None)  # a white-box-only trainer
    except TypeError as exc:
        lacks = "seed" not in sig.parameters and all(p.kind != p.VAR_KEYWORD for p in sig.parameters.values())
        raise TrainerError(f"trainer {trainer_name(trainer)!r} has the wrong signature {_sig(fn)}: " + (
            "it takes no keyword 'seed'" if lacks else str(exc)) + "; expected train(x, y, *, seed) -> "
            "torch.nn.Module") from None
    if isinstance(trainer, str):
        _CACHE[(trainer, str(base_dir or ""))] = fn  # only a trainer whose signature passed (a cached one skips it)
    return fn


def _check_reference(trainer: str, module: str, attr: str) -> None:
    """A "module:function" reference names a dotted module, never a path: no "..mod", "/abs/mod", "a/../b".

    The module is looked up in the configuration's folder (or ``trainer_dir``) and on ``sys.path``, so
    a relative or absolute path in the reference would import code from elsewhere by accident.
    """
    for what, dotted in (("module", module), ("function", attr)):
        if not all(part.isidentifier() for part in dotted.split(".")):
            raise TrainerError(f"trainer {trainer!r}: the {what} {dotted!r} must be dotted Python names (e.g. "
                               "'my_trainer:train' or 'pkg.mod:train'); relative ('..mod') and file paths are "
                               "refused: put the module in the configuration's folder, or name another folder "
                               "with [training] trainer_dir")


@dataclass(frozen=True)
class DiracCanaries:
    """m gradient canaries for the white-box hook in ONE run: canary j is ``norm``·C on flat parameter
    ``coordinates[j]`` (distinct coordinates, so no two canaries share a parameter).

    The one-run game (:func:`one_run_game`) with ``canary.kind = "dirac"`` puts canary j on flat parameter j
    (``parameters()`` order). A trainer hands them over with :meth:`WhiteBoxAudit.canary_gradients`, one
    per-example gradient per sampled canary. Coordinates that natural records touch lower the power, never
    the soundness of Steinke et al.'s bound (each canary is a record of fixed gradient, clipped and noised
    like any record).
    """

    coordinates: tuple[int, ...]
    norm: float = 1.0
    kind: str = "dirac"

    def __post_init__(self) -> None:
        if not isinstance(self.coordinates, tuple) or not self.coordinates:
            raise InputError(f"coordinates must be a non-empty tuple of integers; got {self.coordinates!r}")
        for k in self.coordinates:
            check.integer(0, None, coordinate=k)
        if len(set(self.coordinates)) != len(self.coordinates):
            raise InputError("coordinates must be distinct (two canaries on one parameter would interact)")
        check.positive(norm=self.norm)

    @property
    def m(self) -> int:
        return len(self.coordinates)


@dataclass(frozen=True)
class DiracCanary:
    """A gradient canary for the white-box hook: ``norm``·C on the flat parameter ``coordinate``.

    Choose a coordinate natural records never touch (a weight on an input feature that is
    constant in the data: for digits, flat index 0 of a first ``Linear`` layer is the weight of
    pixel 0, constant 0 after standardisation), so the projection reads the canary and the noise only.
    """

    coordinate: int = 0
    norm: float = 1.0
    kind: str = "dirac"

    def __post_init__(self) -> None:
        check.integer(0, None, coordinate=self.coordinate)
        check.positive(norm=self.norm)

    @property
    def m(self) -> int:
        return 1


_GRADIENT = (DiracCanary, DiracCanaries)


class WhiteBoxAudit:
    """What a white-box trainer receives as ``audit=`` (module doc): records parameters, supplies the canary.

    Attributes:
        trace: the recorded parameter vectors θ_0, θ_1, … (float64, flattened, in ``parameters()`` order).
        sampled: per call of :meth:`canary_gradient`, whether the canary was in that step's batch.
    """

    def __init__(self, canary: DiracCanary | DiracCanaries | None, present: bool | Tensor,
                 sample_rate: float | None, clip_norm: float, generator: torch.Generator) -> None:
        self._canary, self._present, self._q, self._c, self._gen = canary, present, sample_rate, clip_norm, generator
        self.trace: list[Tensor] = []
        self.sampled: list[Any] = []  # per call: a bool (DiracCanary) or an (m,) bool tensor (DiracCanaries)
        self.updates: list[list[Tensor]] = []  # audit.record_update (attacks/conformance_record.py)
        self.probe: conformance_record.ProbeHook | None = None  # the conformance game's probe (no canary here)

    def record_update(self, privatised: Iterable[Tensor]) -> None:
        """Record this step's privatised gradient (the noisy clipped sum, or a constant multiple, one tensor
        per parameter, before the optimizer): the conformance tests then read it instead of θ_{t−1} − θ_t, so
        a stateful optimizer (momentum, Adam) is audited correctly. Call once per step, or never."""
        self.updates.append([t.detach().to(torch.float64).clone() for t in privatised])

    def record(self, params: Iterable[Tensor]) -> None:
        """Record the current parameters (call before the first step and after every step).

        Raises InputError (reported naming the trainer and the trial) when they are not finite or
        their number changes between calls.
        """
        flat = torch.cat([p.detach().reshape(-1).to(torch.float64) for p in params]).clone()
        if self.trace and flat.numel() != self.trace[0].numel():
            raise InputError(f"audit.record call {len(self.trace) + 1} got {flat.numel()} parameter numbers, the "
                             f"first call {self.trace[0].numel()}: record the same parameters (model.parameters()) "
                             "every time")
        if not bool(torch.isfinite(flat).all()):
            raise InputError(f"audit.record call {len(self.trace) + 1}: the parameters hold NaN or inf (the training "
                             "diverged: check the learning rate, the noise and the clipping)")
        self.trace.append(flat)

    def canary_gradient(self, params: Iterable[Tensor]) -> list[Tensor] | None:
        """The canary's per-example gradient at this step (shapes and dtypes of ``params``), or None.

        Call once per step. The canary is in a step's batch with the claimed Poisson rate when it
        is a member of this trial (drawn from the trial's seed), never otherwise.
        """
        params = list(params)
        if isinstance(self._canary, DiracCanaries):
            if self._canary.m > 1:
                raise InputError(f"canary.count = {self._canary.m} gradient canaries: several may be in one step's "
                                 "batch, so call audit.canary_gradients(params) (one per-example gradient per "
                                 "sampled canary) instead of audit.canary_gradient")
            got = self.canary_gradients(params)
            return None if got is None else [t[0] for t in got]
        if self._canary is None:
            return None if self.probe is None else self.probe.gradient(params, len(self.trace) - 1)
        assert self._q is not None  # a DiracCanary needs Poisson sampling (Context.__post_init__)
        draw = bool(torch.rand((), generator=self._gen, dtype=torch.float64) < self._q)
        sampled = self._present and draw
        self.sampled.append(sampled)
        if not sampled:
            return None
        out = [torch.zeros_like(p) for p in params]
        k = self._canary.coordinate
        for t in out:
            if k < t.numel():
                t.view(-1)[k] = self._canary.norm * self._c
                return [t.detach() for t in out]
            k -= t.numel()
        raise InputError(f"DiracCanary.coordinate must be < {sum(p.numel() for p in params)} (the model's "
                         f"parameter count); got {self._canary.coordinate}")

    def canary_gradients(self, params: Iterable[Tensor]) -> list[Tensor] | None:
        """The sampled canaries' per-example gradients at this step, or None when none is in the batch.

        Call once per step, between the per-example gradients and the clipping; append the result to them
        (``[torch.cat([g, c]) for g, c in zip(grads, got)]``). One tensor per parameter of shape
        (k, *shape), k ≥ 1 the number of canaries in this step's batch: each member canary is in with the
        claimed Poisson rate, independently (drawn from the trial's seed), a non-member never. Works for
        one canary too (k = 1), with the same draws as :meth:`canary_gradient`.
        """
        params = list(params)
        c = self._canary
        if c is None:
            got = None if self.probe is None else self.probe.gradient(params, len(self.trace) - 1)
            return None if got is None else [t[None] for t in got]
        if isinstance(c, DiracCanary):
            one = self.canary_gradient(params)
            return None if one is None else [t[None] for t in one]
        dim = sum(p.numel() for p in params)
        if max(c.coordinates) >= dim:
            raise InputError(f"canary.count = {c.m} Dirac canaries need {c.m} distinct parameters (canary j on flat "
                             f"parameter j); the model has {dim}: choose canary.count ≤ {dim}")
        assert self._q is not None  # gradient canaries need Poisson sampling (Context.__post_init__)
        draw = torch.rand(c.m, generator=self._gen, dtype=torch.float64) < self._q
        sampled = torch.as_tensor(self._present, dtype=torch.bool) & draw
        self.sampled.append(sampled)
        rows = torch.nonzero(sampled).reshape(-1)
        if rows.numel() == 0:
            return None
        flat = torch.zeros(rows.numel(), dim, dtype=torch.float64)
        flat[torch.arange(rows.numel()), torch.as_tensor(c.coordinates)[rows]] = c.norm * self._c
        out, k = [], 0
        for p in params:
            out.append(flat[:, k:k + p.numel()].reshape(rows.numel(), *p.shape).to(p.dtype).detach())
            k += p.numel()
        return out


def _sig(fn: Callable) -> str:
    try:
        return str(inspect.signature(fn))
    except (TypeError, ValueError):
        return "(?)"


@dataclass(frozen=True, eq=False)
class Context:
    """Everything a trial needs: picklable when ``trainer`` is a reference or a module-level function.

    Attributes:
        trainer: ``"module:function"`` or a callable (the protocol in the module doc).
        data: the natural records.
        canaries: input-space canaries (m = 1 for the multi-run game), or a :class:`DiracCanary`
            (white box only, through the gradient-canary hook), or :class:`DiracCanaries` (m of them, the
            one-run game).
        seed: the game's base seed; trial i uses ``trial_seed(seed, i)``.
        score: black box "loss" (−cross-entropy) or "confidence" (logit-scaled confidence) of the
            canary, or "projection" (the final parameters on the canary's gradient direction,
            :func:`projection_directions`); white box "inner_product" (module doc).
        base_dir: where ``trainer``'s module is looked up first.
        spec: the claimed DP-SGD description (recorded; the trainer is what is run). The gradient
            canary is sampled at its Poisson rate.
        threat: "black_box" (the final model) or "white_box" (every update, ``audit=`` keyword).
        clip_norm: C (the gradient canary's norm unit and the input canary's clipping).
        timeout: seconds one trial (training and scoring) may take, or None; not part of the game's
            identity (:func:`run_trial`).
        fn: ``trainer`` already resolved by :func:`load_trainer` (the runner loads it once per run and
            hands it here); None: each trial resolves it. Never sent to worker processes, which resolve
            ``trainer`` themselves (a module imported from ``base_dir`` has a private name there).
    """

    trainer: str | Callable
    data: Dataset
    canaries: InputCanaries | DiracCanary | DiracCanaries
    seed: int = 0
    score: str = "loss"
    base_dir: str | None = None
    spec: DPSGD | None = None
    threat: str = "black_box"
    clip_norm: float = 1.0
    timeout: float | None = None
    fn: Callable | None = dataclasses.field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.threat not in ("black_box", "white_box"):
            raise InputError(f"threat must be 'black_box' or 'white_box'; got {self.threat!r}")
        allowed = SCORES if self.threat == "black_box" else WHITE_SCORES
        if self.score not in allowed:
            raise InputError(f"score must be one of {list(allowed)} for a user trainer audited in the "
                             f"{self.threat.replace('_', ' ')}; got {self.score!r}")
        if self.score == "step_spread" and not isinstance(self.canaries, _GRADIENT):
            raise InputError("score 'step_spread' reads the gradient-canary hook's per-step updates: it needs a "
                             "DiracCanary (canary kind 'dirac'); an input canary is scored by 'inner_product'")
        if isinstance(self.canaries, _GRADIENT):
            if self.threat != "white_box":
                raise InputError("a gradient canary has no input: it needs threat 'white_box' (the hook)")
            if self.spec is None or not isinstance(self.spec.sampling, Poisson):
                raise InputError("the gradient-canary hook samples the canary at the claim's Poisson rate: spec must "
                                 "be an accountants.DPSGD with Poisson sampling")
        elif not isinstance(self.canaries, InputCanaries):
            raise InputTypeError("a user trainer is audited with input-space canaries (mislabelled, blank, "
                                 f"out_of_distribution) or a DiracCanary; got {type(self.canaries).__name__}")
        check.integer(0, None, seed=self.seed)
        check.positive(clip_norm=self.clip_norm)
        if self.timeout is not None:
            check.positive(timeout=self.timeout)
            if not math.isfinite(self.timeout):
                raise InputError(f"timeout must be a finite number of seconds > 0 (or None); got {self.timeout!r}")

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Travel to worker processes with tensors as plain arrays (by value).

        Sent once per trial by a process pool, a tensor would take torch's shared-memory reduction
        (~2 ms per task for this context); its ~56 KB of arrays copy in microseconds.
        """
        fields = [None if f.name == "fn" else getattr(self, f.name) for f in dataclasses.fields(self)]
        return _rebuild_context, tuple(_as_arrays(v) for v in fields)

    def game_id(self, design: Design) -> str:
        """Hash of the game's identity (trainer reference, data, canaries, score, seed, claim)."""
        c = self.canaries
        h = hashlib.sha256(json.dumps({"design": design.value, "trainer": trainer_name(self.trainer),
                                       "data": [self.data.name, self.data.n], "canary": repr(c) if
                                       isinstance(c, _GRADIENT) else c.kind, "m": c.m, "score": self.score,
                                       "seed": int(self.seed), "spec": repr(self.spec), "threat": self.threat,
                                       "clip_norm": float(self.clip_norm)}, sort_keys=True).encode())
        tensors = () if isinstance(c, _GRADIENT) else (c.x, c.y)
        for t in (self.data.x, self.data.y, *tensors):
            h.update(t.detach().contiguous().cpu().numpy().tobytes())
        return "u" + h.hexdigest()[:15]


def _as_arrays(value: Any) -> Any:
    """A dataclass holding tensors as (type, {field: numpy array or value}); anything else unchanged."""
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return value
    items = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if not any(isinstance(v, Tensor) for v in items.values()):
        return value
    return (_ArraysOf, type(value), {k: v.detach().cpu().numpy() if isinstance(v, Tensor) else v
                                     for k, v in items.items()})


class _ArraysOf:
    """Marker of a dataclass sent as arrays by :func:`_as_arrays`."""


def _rebuild_context(*values: Any) -> Context:
    def back(v: Any) -> Any:
        if isinstance(v, tuple) and len(v) == 3 and v[0] is _ArraysOf:
            return v[1](**{k: torch.from_numpy(a) if isinstance(a, np.ndarray) else a for k, a in v[2].items()})
        return v

    return Context(*(back(v) for v in values))


def _user_error(exc: BaseException, what: str) -> TrainerError:
    """Any exception *or exit* from user code as one TrainerError (exit 2 at the CLI), never a verdict.

    ``SystemExit`` (``sys.exit(0)`` would end the audit with exit 0 and no result), ``GeneratorExit``
    and other ``BaseException``s count too; only ``KeyboardInterrupt`` still interrupts (callers re-raise it).
    """
    if isinstance(exc, SystemExit):
        return TrainerError(f"{what}: it called sys.exit({exc.code!r}) (SystemExit); a trainer must return the model "
                            "or raise an exception, never exit")
    return TrainerError(f"{what}: {type(exc).__name__}: {exc}")


@contextlib.contextmanager
def _user_code(what: str) -> Iterator[None]:
    """Run a user model's code: its exceptions and exits become one :func:`_user_error` naming ``what``;
    a keyboard interrupt, a trial timeout and dpaudit's own TrainerError pass through unchanged."""
    try:
        yield
    except (KeyboardInterrupt, _TrialTimeout, TrainerError):
        raise
    except BaseException as exc:
        raise _user_error(exc, what) from exc


class _TrialTimeout(BaseException):
    """Raised into a trial by the per-trial alarm: a BaseException, so a trainer's ``except Exception`` keeps it."""


@contextlib.contextmanager
def _deadline(seconds: float | None, name: str, i: int) -> Iterator[None]:
    """Stop trial ``i`` after ``seconds`` (SIGALRM on the main thread of a POSIX process: the local backend and
    every process or Ray worker). Elsewhere a trial that ran past it is refused when it returns. Code stuck
    inside native code that never returns to Python is interrupted only when it does (docs/own-training.md)."""
    if seconds is None:
        yield
        return
    msg = (f"trainer {name!r}, trial {i}: ran past the per-trial timeout of {seconds:g} s (audit.trial_timeout, "
           "--trial-timeout); raise it, or find what hangs")
    alarm = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    t0 = time.monotonic()
    if alarm:
        def _fire(signum: int, frame: Any) -> None:
            raise _TrialTimeout()

        old = signal.signal(signal.SIGALRM, _fire)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _TrialTimeout:
        raise TrainerError(msg) from None
    finally:
        if alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)
    if time.monotonic() - t0 > seconds:
        raise TrainerError(msg)


def _finite_scores(scores: list[float], name: str, i: int, what: str) -> list[float]:
    if not all(math.isfinite(v) for v in scores):
        raise TrainerError(f"trainer {name!r}, trial {i}: {what} is not finite ({scores}); the training diverged or "
                           "the model returns NaN/inf")
    return scores


def _scores(model: nn.Module, x: Tensor, y: Tensor, kind: str, name: str, i: int) -> list[float]:
    was = model.training
    model.eval()
    try:
        with _user_code(f"trainer {name!r}, trial {i}: the returned model fails on the canary input of shape "
                        f"{tuple(x.shape)}"), torch.no_grad(), _hook_free(model):
            z = model(x)
    finally:
        model.train(was)
    if not isinstance(z, Tensor) or z.ndim != 2 or z.shape[0] != x.shape[0]:
        raise TrainerError(f"trainer {name!r}, trial {i}: the returned model must map (B, ...) inputs to (B, K) "
                           f"logits; got {type(z).__name__} {tuple(z.shape) if isinstance(z, Tensor) else ''}")
    need = max(2, int(y.max()) + 1)
    if z.shape[1] < need:
        raise TrainerError(f"trainer {name!r}, trial {i}: the returned model gives K = {z.shape[1]} logits per input; "
                           f"the labels need K ≥ {need} (one logit per class)")
    z = z.detach().to(torch.float64)
    if not bool(torch.isfinite(z).all()):
        raise TrainerError(f"trainer {name!r}, trial {i}: the returned model gives NaN or inf logits on the canary "
                           "(the training diverged: check the learning rate, the noise and the clipping)")
    zy = z.gather(1, y.view(-1, 1)).squeeze(1)
    if kind == "loss":
        s = zy - torch.logsumexp(z, dim=1)  # −cross-entropy: higher ⇒ member
    else:
        s = zy - torch.logsumexp(z.scatter(1, y.view(-1, 1), -math.inf), dim=1)
    return _finite_scores([float(v) for v in s], name, i, f"the {kind} score")


def _training_hooks(model: nn.Module) -> list[tuple[dict, Any, Any]]:
    """The module hooks Opacus' GradSampleModule left on ``model`` (``remove_hooks()`` not called).

    They count and capture activations at every forward pass and break ``torch.func.functional_call``.
    Returns (hook dict, key, hook) for each, so they can be put back.
    """
    found = []
    for sub in model.modules():
        for attr in ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks"):
            hooks = getattr(sub, attr, None)
            if not hooks:
                continue
            for key, fn in list(hooks.items()):
                inner = getattr(fn, "func", fn)  # functools.partial (Opacus' backward hook)
                owner = getattr(inner, "__self__", None)
                mod = getattr(owner if owner is not None else inner, "__module__", "") or ""
                if mod.split(".")[0] == "opacus":
                    found.append((hooks, key, fn))
    return found


@contextlib.contextmanager
def _hook_free(model: nn.Module) -> Iterator[nn.Module]:
    """``model`` without the training hooks of :func:`_training_hooks` while dpaudit evaluates it; put back after."""
    found = _training_hooks(model)
    for hooks, key, _ in found:
        del hooks[key]
    try:
        yield model
    finally:
        for hooks, key, fn in found:
            hooks[key] = fn


def _canary_gradient(model: nn.Module, named: Sequence[tuple[str, Tensor]], flat: Tensor, x: Tensor, y: Tensor,
                     name: str, i: int) -> Tensor:
    """∇ℓ(θ; canary) at the recorded flat parameters θ (float64), by ``torch.func.functional_call``."""
    params, k = {}, 0
    for key, p in named:
        params[key] = flat[k:k + p.numel()].view_as(p).to(p.dtype).requires_grad_(True)
        k += p.numel()
    with _user_code(f"trainer {name!r}, trial {i}: dpaudit cannot evaluate the returned model at the recorded "
                    "parameters (torch.func.functional_call); return the plain module, without training hooks "
                    "(Opacus: call model.remove_hooks() and return model._module)"):
        loss = nn.functional.cross_entropy(torch.func.functional_call(model, params, (x,)), y)
        g = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
    return torch.cat([(torch.zeros_like(p) if v is None else v).reshape(-1) for v, (_, p) in zip(g, named, strict=True)]
                     ).to(torch.float64)


def _white_scores(ctx: Context, wb: WhiteBoxAudit, model: nn.Module, name: str, i: int) -> list[float]:
    if len(wb.trace) < 2:
        raise TrainerError(f"trainer {name!r}, trial {i}: a white-box trainer must call audit.record(parameters) "
                           f"before the first step and after every step; it recorded {len(wb.trace)} time(s)")
    theta = torch.stack(wb.trace)  # (T+1, D)
    u = theta[:-1] - theta[1:]  # θ_{t−1} − θ_t: +η·(sum of clipped gradients + noise)/B
    c = ctx.canaries
    if isinstance(c, DiracCanary):
        if len(wb.sampled) != u.shape[0]:
            raise TrainerError(f"trainer {name!r}, trial {i}: audit.canary_gradient must be called once per step; "
                               f"{len(wb.sampled)} calls for {u.shape[0]} steps")
        a = u[:, c.coordinate]  # the per-step projections on the canary
        if ctx.score == "step_spread":
            return _finite_scores([float(((a - a.mean()) ** 2).sum())], name, i, "the step_spread score")
        return _finite_scores([float(a.sum())], name, i, "the inner_product score")
    if isinstance(c, DiracCanaries):
        if len(wb.sampled) != u.shape[0]:
            raise TrainerError(f"trainer {name!r}, trial {i}: audit.canary_gradients must be called once per step; "
                               f"{len(wb.sampled)} calls for {u.shape[0]} steps")
        a = u[:, list(c.coordinates)]  # (T, m): the per-step projections on each canary
        if ctx.score == "step_spread":
            return _finite_scores(((a - a.mean(dim=0)) ** 2).sum(dim=0).tolist(), name, i, "the step_spread score")
        return _finite_scores(a.sum(dim=0).tolist(), name, i, "the inner_product score")
    with _hook_free(model):
        named = [(k, p) for k, p in model.named_parameters()]
        if sum(p.numel() for _, p in named) != theta.shape[1]:
            raise TrainerError(f"trainer {name!r}, trial {i}: the recorded parameters ({theta.shape[1]} numbers) are "
                               f"not those of the returned model ({sum(p.numel() for _, p in named)})")
        x, y = c.x.to(torch.float32), c.y
        scores = []
        for j in range(c.m):
            total = 0.0
            for t in range(u.shape[0]):
                g = _canary_gradient(model, named, theta[t], x[j:j + 1], y[j:j + 1], name, i)
                g = g * min(1.0, ctx.clip_norm / max(float(g.norm()), 1e-300))  # clip_C, as the trainer would
                total += float(u[t] @ g) / ctx.clip_norm
            scores.append(total)
    return _finite_scores(scores, name, i, "the inner_product score")


def projection_directions(model: nn.Module, x: Tensor, y: Tensor, clip_norm: float) -> list[list[Tensor]]:
    """The ``projection`` score's directions: per canary j, per parameter tensor l, clip_C(∇_l ℓ(θ; x_j, y_j))/C.

    θ is ``model``'s own parameters (one of the game's template models, :func:`_projection_game`, never an audited
    trial's). Each tensor's gradient is clipped to C on its own, so a tensor whose gradient is small is read with a
    small weight, and an excess a per-tensor clipping lets through (up to C in *every* tensor) is read in full; a tensor
    with no gradient (the mean image's weight) gets direction 0. float64, detached.
    """
    named = list(model.named_parameters())
    if not named:
        raise InputError("the projection score reads the final model's parameters; the model has none (use score "
                         "'loss')")
    out = []
    with _hook_free(model):
        for j in range(x.shape[0]):
            params = {k: p.detach().clone().requires_grad_(True) for k, p in named}
            loss = nn.functional.cross_entropy(torch.func.functional_call(model, params, (x[j:j + 1],)), y[j:j + 1])
            grads = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
            dirs = []
            for gl, (_, p) in zip(grads, named, strict=True):
                gl = torch.zeros_like(p, dtype=torch.float64) if gl is None else gl.detach().to(torch.float64)
                dirs.append(gl * (min(1.0, clip_norm / max(float(gl.norm()), 1e-300)) / clip_norm))
            out.append(dirs)
    return out


def projection_scores(model: nn.Module, directions: list[list[Tensor]], name: str, i: int) -> list[float]:
    """−Σ_l ⟨θ_T,l, d_l⟩ for each canary's directions d (:func:`projection_directions`): higher ⇒ member.

    Gradient descent moves θ along −∇ℓ(canary) when the canary is trained on, so a member's final parameters
    project lower on d. The score reads the final model only (post-processing: any fixed d is valid), and a
    constant shift of the start θ_0 shifts every trial's score by the same amount (the ranks, hence the
    audit, are unchanged); ⟨θ_0 − θ_T, d⟩ with θ_0 known would be the hidden-state score of Cebere et al.
    (ICLR 2025, §4), whose θ_0 dpaudit does not know.
    """
    named = list(model.named_parameters())
    if not named:
        raise TrainerError(f"trainer {name!r}, trial {i}: the returned model has no parameters; the projection score "
                           "reads the final parameters (use score 'loss')")
    if not all(bool(torch.isfinite(p.detach()).all()) for _, p in named):
        raise TrainerError(f"trainer {name!r}, trial {i}: the returned model's parameters hold NaN or inf (the "
                           "training diverged: check the learning rate, the noise and the clipping)")
    scores = []
    for dirs in directions:
        if len(dirs) != len(named) or any(d.shape != p.shape for d, (_, p) in zip(dirs, named, strict=False)):
            raise TrainerError(f"trainer {name!r}, trial {i}: the returned model's parameters "
                               f"{[tuple(p.shape) for _, p in named]} are not the template trial's "
                               f"{[tuple(d.shape) for d in dirs]}: the projection score needs one architecture")
        scores.append(-sum(float((p.detach().to(torch.float64) * d).sum()) for d, (_, p) in
                           zip(dirs, named, strict=True)))
    return _finite_scores(scores, name, i, "the projection score")


def least_likely_labels(models: Sequence[nn.Module], x: Tensor) -> Tensor:
    """Each input's least likely class on average over ``models``: argmin of the mean log-softmax (ties: the smallest).

    The projection score's canary takes this label over the canary-free template models: an example the trainer's
    models keep getting wrong keeps a large gradient in every tensor while training runs (its softmax residual
    p − e_y stays near its largest norm), so its clipped contribution stays at C in each tensor and turns little,
    which is where an excess over C (per-tensor clipping, a contribution scaled by B/|B_t|) shows in the final
    parameters. The mean over several models is a steadier estimate of that class than one noisy model.
    """
    logp = []
    for model in models:
        with torch.no_grad(), _hook_free(model):
            logp.append(torch.log_softmax(model(x).to(torch.float64), dim=1))
    return torch.stack(logp).mean(dim=0).argmin(dim=1).to(torch.int64)


def _template_models(ctx: Context, fn: Callable, i: int) -> list[nn.Module]:
    """The projection score's :data:`TEMPLATE_TRIALS` canary-free runs of the trainer (each checked as a trial is)."""
    c = ctx.canaries
    assert isinstance(c, InputCanaries)
    name = trainer_name(ctx.trainer)
    models = []
    for k in range(TEMPLATE_TRIALS):
        where = f"trainer {name!r}, trial {i} (the projection score's template trial {k}, on the natural records alone)"
        with _deadline(ctx.timeout, name, i):
            try:
                model = fn(ctx.data.x.to(torch.float32), ctx.data.y, seed=trial_seed(ctx.seed, k, _STREAM_TEMPLATE))
            except (KeyboardInterrupt, _TrialTimeout):
                raise
            except BaseException as exc:
                raise _user_error(exc, f"{where}: the trainer raised") from exc
        if not isinstance(model, nn.Module):
            raise TrainerError(f"{where}: must return a torch.nn.Module (the final model); got {type(model).__name__}")
        _scores(model, c.x.to(torch.float32), c.y, "loss", name, i)  # its outputs checked as every trial's are
        if not list(model.parameters()):
            raise TrainerError(f"{where}: the returned model has no parameters; the projection score reads the final "
                               "parameters (use score 'loss')")
        models.append(model)
    return models


def _projection_game(ctx: Context, fn: Callable, i: int) -> tuple[InputCanaries, list[list[Tensor]]]:
    """The projection score's canary and directions for this game, from extra runs of the trainer (per process).

    :data:`TEMPLATE_TRIALS` template trials train on the natural records alone (no canary), each with its own
    seed from a stream no audited trial uses, before the first audited trial this process plays. From their models
    come the canary's label (:func:`least_likely_labels`; the input is the configured canary's) and the directions
    (:func:`projection_directions` at that label, averaged over the models: the canary's expected clipped
    gradient over the trainer's final models). Both are fixed before, and independent of, every audited trial: the
    neighbouring pair is fixed and the score is one fixed function of the final model (the audit's validity needs
    nothing more). Its errors name trial ``i`` (the one that needed it) and the template trial.
    """
    key = ctx.game_id(Design.MULTI_RUN)
    if key not in _DIRECTIONS:
        c = ctx.canaries
        assert isinstance(c, InputCanaries)
        models = _template_models(ctx, fn, i)
        x = c.x.to(torch.float32)
        where = f"trainer {trainer_name(ctx.trainer)!r}, trial {i} (the projection score's template trials)"
        with _user_code(f"{where}: dpaudit cannot evaluate or differentiate the returned model's loss on the canary "
                        "(torch.func.functional_call)"):
            c = InputCanaries(c.x, least_likely_labels(models, x), c.kind)
            each = [projection_directions(model, x, c.y, ctx.clip_norm) for model in models]
        dirs = [[torch.stack(ts).mean(dim=0) for ts in zip(*per_canary, strict=True)]
                for per_canary in zip(*each, strict=True)]
        if any(all(float(d.abs().max()) == 0.0 for d in ds) for ds in dirs):
            raise TrainerError(f"{where}: the canary's loss has zero gradient at the template models, so the "
                               "projection score would read nothing (use score 'loss')")
        _DIRECTIONS[key] = (c, dirs)
    return _DIRECTIONS[key]


def _trainer_of(ctx: Context) -> Callable:
    """The trainer callable: the one the runner resolved (``ctx.fn``), else resolved here (cached by reference)."""
    return ctx.fn if ctx.fn is not None else load_trainer(ctx.trainer, ctx.base_dir)


def run_trial(ctx: Context, i: int) -> dict[str, Any]:
    """Trial ``i``: draw the canaries' membership, call the trainer, score the canaries.  Pure in (ctx, i).

    Returns the ``trials.jsonl`` record (without ``game_id``; the driver adds it). Anything the
    user's code raises or exits with (``SystemExit`` included, ``KeyboardInterrupt`` excepted), a
    trial past ``ctx.timeout`` and non-finite logits, parameters or scores raise :class:`TrainerError`
    naming the trainer and the trial.
    """
    name = trainer_name(ctx.trainer)
    fn = _trainer_of(ctx)
    s = trial_seed(ctx.seed, i)
    g = torch.Generator().manual_seed(s)
    c = ctx.canaries
    members = torch.rand(c.m, generator=g, dtype=torch.float64) < 0.5
    directions = None
    if ctx.threat == "black_box" and ctx.score == "projection":
        c, directions = _projection_game(ctx, fn, i)
    if isinstance(c, _GRADIENT):
        x, y = ctx.data.x.to(torch.float32), ctx.data.y
    else:
        x, y = torch.cat([ctx.data.x, c.x[members]]).to(torch.float32), torch.cat([ctx.data.y, c.y[members]])
    perm = torch.randperm(x.shape[0], generator=g)
    x, y = x[perm].contiguous(), y[perm].contiguous()
    kwargs: dict[str, Any] = {"seed": trial_seed(ctx.seed, i, _STREAM_TRAINER)}
    wb = None
    if ctx.threat == "white_box":
        rate = ctx.spec.sampling.rate if ctx.spec is not None and isinstance(ctx.spec.sampling, Poisson) else None
        present = members if isinstance(c, DiracCanaries) else bool(members[0])
        wb = WhiteBoxAudit(c if isinstance(c, _GRADIENT) else None, present, rate, ctx.clip_norm, g)
        if getattr(c, "kind", None) == conformance_record.KIND and rate is not None:
            wb.probe = _probe(ctx, fn, i)
        kwargs["audit"] = wb
    with _deadline(ctx.timeout, name, i):
        try:
            model = fn(x, y, **kwargs)
        except InputError as exc:  # dpaudit's own checks inside the hooks
            raise TrainerError(f"trainer {name!r}, trial {i}: {exc}") from exc
        except (KeyboardInterrupt, _TrialTimeout):
            raise
        except BaseException as exc:  # SystemExit included: user code never decides the exit code
            raise _user_error(exc, f"trainer {name!r} raised on trial {i}") from exc
        if not isinstance(model, nn.Module):
            raise TrainerError(f"trainer {name!r}, trial {i}: must return a torch.nn.Module (the final model); got "
                               f"{type(model).__name__}")
        if wb is not None:
            scores = _white_scores(ctx, wb, model, name, i)
        else:
            assert isinstance(c, InputCanaries)  # a DiracCanary needs the white box (Context.__post_init__)
            if directions is not None:  # the outputs are checked as for every black-box score, then θ_T is read
                _scores(model, c.x.to(torch.float32), c.y, "loss", name, i)
                scores = projection_scores(model, directions, name, i)
            else:
                scores = _scores(model, c.x.to(torch.float32), c.y, ctx.score, name, i)
    rec = {"trial": int(i), "seed": s, "members": [bool(b) for b in members], "scores": {ctx.score: scores}}
    if directions is not None and isinstance(c, InputCanaries):  # the projection's label, on this process's templates
        rec["canary_label"] = int(c.y[0])
    if wb is not None and getattr(c, "kind", None) == conformance_record.KIND:
        rec["conformance"] = _conformance_stats(ctx, wb, model, name, i, bool(members[0]))
    return rec


def _probe(ctx: Context, fn: Callable, i: int) -> conformance_record.ProbeHook:
    """Trial ``i``'s conformance probe: its coins from the trial's own probe stream, the architecture from the
    game's template model (:func:`_template`)."""
    template, why = _template(ctx, fn)
    return conformance_record.ProbeHook(template, ctx.data.x.to(torch.float32), ctx.data.y, ctx.clip_norm,
                                        torch.Generator().manual_seed(trial_seed(ctx.seed, i, _STREAM_PROBE)), why)


def _template(ctx: Context, fn: Callable) -> tuple[nn.Module | None, str | None]:
    """The model one extra trial of the trainer returns (a null audit: no canary, no probe; its own seed), kept
    per process and game: only its architecture is used (the probe evaluates it at the hook's parameters).
    A trainer that fails here leaves the probe disabled with the reason (the trial itself reports the error)."""
    key = ctx.game_id(Design.MULTI_RUN)
    if key not in _TEMPLATES:
        null = WhiteBoxAudit(None, False, None, ctx.clip_norm, torch.Generator().manual_seed(0))
        name = trainer_name(ctx.trainer)
        try:
            with _deadline(ctx.timeout, name, -1):
                model = fn(ctx.data.x.to(torch.float32), ctx.data.y, seed=trial_seed(ctx.seed, 0, _STREAM_TEMPLATE),
                           audit=null)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # never a verdict: the probe is skipped, the trials report the trainer's error
            _TEMPLATES[key] = (None, f"the probe's template trial failed ({type(exc).__name__}: {exc})")
        else:
            if isinstance(model, nn.Module):
                for hooks, k, _ in _training_hooks(model):  # Opacus' leftover hooks break functional_call
                    del hooks[k]
                _TEMPLATES[key] = (model, None)
            else:
                _TEMPLATES[key] = (None, f"the probe's template trial returned a {type(model).__name__}, not an "
                                         "nn.Module")
    return _TEMPLATES[key]


def _conformance_stats(ctx: Context, wb: WhiteBoxAudit, model: nn.Module, name: str, i: int,
                       member: bool) -> dict[str, Any]:
    """The trial's premise statistics (attacks/conformance_record.py), errors naming trainer and trial."""
    assert isinstance(ctx.canaries, InputCanaries)  # the conformance record is an input canary
    try:
        return conformance_record.trial_stats(model, wb.trace, wb.updates, ctx.data, ctx.canaries, ctx.clip_norm,
                                              member, wb.probe, "the claim's sampling is not Poisson: no probe")
    except InputError as exc:
        raise TrainerError(f"trainer {name!r}, trial {i}: {exc}") from exc


def _check_portable(ctx: Context) -> None:
    """A parallel backend sends ``ctx`` to worker processes: refuse, naming the fix, a trainer they cannot import.

    A ``"module:function"`` reference always travels (each worker imports it, from ``base_dir`` first).
    A callable travels by its module and name, so it must be defined at the top level of a module that
    a fresh process can import: not a lambda, a nested function, or a function typed into an
    interactive session.
    """
    t = ctx.trainer
    if isinstance(t, str):
        return
    name = trainer_name(t)
    fix = ("; with --backend process|ray pass it as 'module:function' (TOML [training] trainer) or define it at the "
           "top level of an importable module")
    qual = getattr(t, "__qualname__", "")
    if "<lambda>" in qual or "<locals>" in qual:
        raise TrainerError(f"trainer {name!r} is a lambda or a nested function, which worker processes cannot "
                           f"import{fix}")
    if getattr(t, "__module__", None) == "__main__" and not getattr(sys.modules.get("__main__"), "__file__", None):
        raise TrainerError(f"trainer {name!r} is defined in an interactive session, which worker processes cannot "
                           f"import{fix}")
    try:
        pickle.dumps(t)  # only to see that it can be sent; nothing is ever loaded with pickle here
    except Exception as exc:
        raise TrainerError(f"trainer {name!r} cannot be sent to worker processes ({type(exc).__name__}: {exc})"
                           f"{fix}") from None


def _check_keywords(fn: Callable, ctx: Context) -> None:
    """The trainer takes what this audit passes (``seed``; ``audit`` in the white box), or a TrainerError naming
    the keyword it lacks."""
    white = ctx.threat == "white_box"
    try:
        sig = inspect.signature(fn)
    except ValueError:
        return
    try:
        sig.bind(None, None, seed=0, **({"audit": None} if white else {}))
        return
    except TypeError:
        pass
    kinds = {p.kind for p in sig.parameters.values()}
    takes = {k for k, p in sig.parameters.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}
    name = f"trainer {trainer_name(ctx.trainer)!r} {_sig(fn)}"
    if "seed" not in takes and inspect.Parameter.VAR_KEYWORD not in kinds:
        raise TrainerError(f"{name} takes no keyword 'seed'; expected train(x, y, *, seed) -> torch.nn.Module (seed "
                           "all its randomness from seed)")
    raise TrainerError(f"{name} " + (
        "takes no keyword 'audit'; a white-box audit needs train(x, y, *, seed, audit)" if white else
        "needs the keyword 'audit'; give it the default None for a black-box audit"))


def _local(fn: Callable, ctx: Any, items: Iterable[int]) -> Iterator[tuple[int, Any]]:
    for i in items:
        yield i, fn(ctx, i)


def _play(ctx: Context, design: Design, n_trials: int, run_dir: str | Path | None, progress: bool,
          backend: Any) -> AttackOutcome:
    check.integer(1, None, n_trials=n_trials)
    fn = _trainer_of(ctx)  # import and signature errors before any trial
    _check_keywords(fn, ctx)
    game_id = ctx.game_id(design)
    path = None if run_dir is None else Path(run_dir) / TRIALS_FILE
    done: dict[int, dict] = {}
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        done = {k: v for k, v in _read_trials(path, game_id).items() if k < n_trials}
    missing = [i for i in range(n_trials) if i not in done]
    if backend is not None and missing:
        _check_portable(ctx)
    # one task per trial: a worker that dies loses only the trial it was training
    runner = _local(run_trial, ctx, missing) if backend is None else backend.map(run_trial, ctx, missing)
    fh = None if path is None else open(path, "a", encoding="utf-8")
    try:
        with tqdm(total=n_trials, initial=len(done), desc=f"trials ({trainer_name(ctx.trainer)})",
                  disable=not progress, leave=False) as bar:
            for i, rec in runner:
                rec = {"game_id": game_id, **rec}
                if fh is not None:
                    _append(fh, rec)  # flushed and fsynced: a killed run loses no finished trial
                done[int(i)] = rec
                bar.update(1)
    finally:
        if fh is not None:
            fh.close()
    if path is not None:
        _canonical_order(path)  # trials from parallel workers arrive out of order: same bytes as local
    recs = [done[i] for i in range(n_trials)]
    m = ctx.canaries.m
    scores = {ctx.score: torch.tensor([r["scores"][ctx.score] for r in recs], dtype=torch.float64).reshape(-1)}
    truth = torch.tensor([r["members"] for r in recs], dtype=torch.bool).reshape(-1)
    seeds = torch.tensor([r["seed"] for r in recs], dtype=torch.int64)
    meta = {"trainer": trainer_name(ctx.trainer), "canary_kind": ctx.canaries.kind, "seed": int(ctx.seed),
            "game_id": game_id, "m": m}
    if all("conformance" in r for r in recs):  # the dead_feature canary in the white box: audit/conformance.py
        meta["conformance"] = [r["conformance"] for r in recs]
    labels = sorted({int(r["canary_label"]) for r in recs if "canary_label" in r})
    if labels:  # the projection's least-likely label; more than one: the worker processes' templates differed
        meta["canary_labels"] = labels
    return AttackOutcome(design, ctx.threat, scores, truth, torch.arange(n_trials).repeat_interleave(m),
                         torch.arange(m).repeat(n_trials), seeds.repeat_interleave(m), meta, ctx.spec,
                         primary_score=ctx.score)


def multi_run_game(ctx: Context, *, n_trials: int = 1000, run_dir: str | Path | None = None, progress: bool = True,
                   backend: Any = None) -> AttackOutcome:
    """K runs of the user's trainer, each with the single canary in with probability ½; one score per run.

    Args:
        ctx: :class:`Context` (trainer, data, one canary, seed, score).
        n_trials: K.
        run_dir: folder of ``trials.jsonl`` (resumable; None keeps nothing on disk).
        progress: tqdm bar.
        backend: an ``audit.backends`` backend (``map(fn, context, items)``); None runs here, in order.
    """
    if ctx.canaries.m != 1:
        raise InputError(f"the multi-run game takes exactly one canary; got m={ctx.canaries.m} (use one_run_game)")
    return _play(ctx, Design.MULTI_RUN, n_trials, run_dir, progress, backend)


def one_run_game(ctx: Context, *, n_runs: int = 1, run_dir: str | Path | None = None, progress: bool = True,
                 backend: Any = None) -> AttackOutcome:
    """Runs of the user's trainer with m canaries each, every one in with probability ½ (Steinke et al. 2023).

    Usually ``n_runs`` = 1: the model that can be trained once. ``ctx.canaries``: m input canaries (black box:
    one score per canary from the final model; white box: each update projected on each canary's clipped
    gradient) or :class:`DiracCanaries` (white box, through :meth:`WhiteBoxAudit.canary_gradients`). Each run
    is one trial of :func:`run_trial` (one line of ``trials.jsonl`` holding the m memberships and scores), so
    an interrupted audit of several runs resumes without losing a finished one. The outcome's rows are the
    n_runs·m canaries; the one-run statistics (:func:`audit.comparator.compare_one_run`) read them.
    """
    return _play(ctx, Design.ONE_RUN, n_runs, run_dir, progress, backend)
