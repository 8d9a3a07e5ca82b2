"""Run folders: resolved config, append-only trial records, resume, results.

Layout of ``runs/NAME/`` (DESIGN.md "Run folders")::

    config.toml                  the fully resolved configuration, seeds included
    audits/<variant>/trials.jsonl  one flushed JSON line per finished trial (attacks.games format)
    result.json                  versioned results (audit.model.RunResult, format audit.model.RESULT_FORMAT)
    report.md, report.html, figures/*.png

Each ``[[variant]]`` is one audit game, so each has its own trials file (a game refuses the
lines of another). Resume: :func:`execute` with ``resume=True`` reads ``config.toml`` from the
folder and calls the games again with the same run folders and seeds; the games keep every
finished trial and run only the missing ones (attacks.games module doc), so an interrupted run
loses nothing and ends with the same result. Nothing is loaded with pickle: only TOML and JSON.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import functools
import json
import math
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

import accountants as acc
from accountants import describe
from accountants.errors import InputError
from accountants.events import DPSGD
from accountants.sampling import Poisson
from attacks import canaries as canaries_mod
from attacks import conformance_record, dpsgd, games, models, plugin, replay, worst_case
from attacks import data as data_mod
from attacks import faults as faults_mod
from attacks import membership as mia

from . import comparator, conformance, model, registry, statistics, tightness
from . import config as config_mod
from . import formatting as fmt
from .runconfig import AuditConfig, ClaimConfig, RunConfig, VariantConfig

__all__ = ["CERTIFIABLE_REPLICATES", "Asked", "BuiltIn", "Prepared", "RunError", "UserTrainer", "assemble",
           "audit_variant", "build", "certifiable_curves", "check_claim", "execute", "execute_config", "game_input",
           "independence_vouched",
           "load_result", "prepare", "spec_of"]

CONFIG_FILE, RESULT_FILE = "config.toml", model.RESULT_FILE
SLOT_CANARY = "dirac_slots"  # the canary kind whose model :func:`build` pads with one quiet slot per canary


class RunError(InputError):
    """A run folder that cannot be used as asked (exists without --resume, config mismatch, in use, ...)."""


def spec_of(v: VariantConfig) -> DPSGD:
    """The claimed DP-SGD description of a variant (dataset_size counts the larger neighbour).

    Built through :mod:`accountants.describe`, the one vocabulary of TOML, CLI and JSON.
    """
    t = v.training
    extra = 1 if v.audit.game == "reconstruction" else v.canary.count
    kind = describe.parse_sampling_kind(t.sampling, key="training.sampling")
    if kind == "poisson":
        sampling = describe.make_sampling(kind, sample_rate=t.sample_rate, key="training.sampling")
    elif kind == "random_allocation":
        sampling = describe.make_sampling(kind, k=t.k, steps_per_epoch=t.steps_per_epoch, key="training.sampling")
    elif kind == "truncated_poisson":
        sampling = describe.make_sampling(kind, sample_rate=t.sample_rate, max_batch_size=t.max_batch_size,
                                          dataset_size=t.n_records + extra, key="training.sampling")
    else:
        sampling = describe.make_sampling(kind, batch_size=t.batch_size, dataset_size=t.n_records + extra,
                                          key="training.sampling")
    return acc.DPSGD(t.noise_multiplier, sampling, t.steps,
                     neighbouring=describe.parse_neighbouring(t.neighbouring, key="training.neighbouring"))


def _records(v: VariantConfig) -> data_mod.Dataset:
    """The variant's natural records: the first n_records, or under a Poisson claim with the conformance canary
    (``dead_feature``) the audit's own dataset, copies of one record and one of each other class
    (:func:`attacks.conformance_record.copied_records`; audit.conformance, "The audit's dataset")."""
    t = v.training
    d = data_mod.load(t.dataset)
    if t.n_records > d.n:
        raise InputError(f"training.n_records must be ≤ {d.n} for dataset {t.dataset!r}; got {t.n_records}")
    if v.canary.kind == conformance_record.KIND and \
            describe.parse_sampling_kind(t.sampling, key="training.sampling") == "poisson":
        return conformance_record.copied_records(d, t.n_records)
    return d.subset(slice(0, t.n_records))


def build(v: VariantConfig) -> tuple[games.Setup, Any, Any, list]:
    """(Setup, canaries, threat, scores) of dpaudit's own game for one resolved variant; seeded by audit.seed.

    Canaries, scores, faults and the threat model come from their registries (:mod:`audit.registry`).
    A user trainer's variant has no built-in model: :func:`game_input` makes its trial context instead.
    """
    t, can, att, aud = v.training, v.canary, v.attack, v.audit
    d = _records(v)
    in_features = int(np.prod(d.feature_shape))
    match t.model:
        case "logistic_regression":
            model = models.logistic_regression(in_features, d.num_classes)
        case "mlp":
            model = models.mlp(in_features, t.hidden, d.num_classes)
        case "cnn":
            side = math.isqrt(in_features)
            if len(d.feature_shape) != 1 or side * side != in_features or side % 2:
                raise InputError(f"training.model = 'cnn' needs square one-channel images of even side (digits: "
                                 f"8x8); dataset {t.dataset!r} has {in_features} features")
            d = d.as_images(side)
            model = models.small_cnn(d.num_classes, channels=t.hidden, side=side)
    gen = torch.Generator().manual_seed(int(aud.seed))
    crafted = att.threat_model == "white_box_crafted_dataset"
    if crafted:  # every record is crafted (docs/worst-case.md): n_records gradient records beside the canary
        p0 = {k: val[0] for k, val in models.init_params(model, 1, gen).items()}
        dim = sum(val.numel() for val in p0.values())
        c = worst_case.crafted(spec_of(v), dim, clip_norm=can.norm * t.clip_norm)
        d = d.subset(slice(0, 0))  # Poisson needs no other record; fixed size: all n_records are crafted
    else:  # the canary kind's registered builder
        if can.kind == SLOT_CANARY:  # m parameters the forward pass never reads, one canary on each
            model = models.with_slots(model, can.count)
        info_c = registry.canaries()[can.kind]
        p0 = {k: val[0] for k, val in models.init_params(model, 1, gen).items()} if info_c.kind == "gradient" \
            else None
        c = info_c.build(model, p0, d, can.count, can.norm * t.clip_norm, gen)
    threat = registry.threat_of(att.threat_model)
    info = mia.score_info(att.score)
    scores = [info.cls(**{f: getattr(att, key) for f, key in info.config.items()})]
    setup = games.Setup(spec_of(v), model, d, clip_norm=t.clip_norm, learning_rate=t.learning_rate,
                        fault=_fault(v))
    return setup, c, threat, scores


@dataclass(frozen=True)
class BuiltIn:
    """The game input of dpaudit's own vectorised DP-SGD: what :func:`build` makes of a variant."""

    setup: games.Setup
    canaries: Any
    threat: Any
    scores: list


@dataclass(frozen=True)
class UserTrainer:
    """The game input of a user trainer (attacks/plugin.py): the trial context, its trainer loaded once per run.

    ``sequential``: ``audit.max_trials > 0``, the trials are played in blocks up to the sequential test's decision.
    """

    context: plugin.Context
    sequential: bool = False


@dataclass(frozen=True)
class Prepared:
    """One audit of a run, checked and ready to play: its resolved variant and its game input."""

    variant: VariantConfig
    game: BuiltIn | UserTrainer


def game_input(v: VariantConfig, *, trainer: str | Callable | None = None, fn: Callable | None = None,
               trial_timeout: float | None = None) -> BuiltIn | UserTrainer:
    """The game input of one resolved variant: dpaudit's own DP-SGD, or the user trainer the variant names.

    ``trainer``: stands for ``training.trainer`` (:func:`audit.score.audit_trainer` passes the callable itself);
    ``fn``: that trainer already loaded (:func:`prepare` loads it once per run); ``trial_timeout``: the
    ``--trial-timeout`` flag (None: ``audit.trial_timeout``).
    """
    if not v.training.trainer:
        return BuiltIn(*build(v))
    return _user_trainer(v, trainer if trainer is not None else v.training.trainer, fn, trial_timeout)


def _fault(v: VariantConfig) -> faults_mod.FaultBase | None:
    """The variant's deliberately broken trainer (None: ``training.fault = "none"``), its fields from [training]."""
    t = v.training
    return faults_mod.fault_from_name(t.fault, {f.name: getattr(t, f.name) for f in dataclasses.fields(t)})


def _user_trainer(v: VariantConfig, trainer: str | Callable, fn: Callable | None,
                  trial_timeout: float | None) -> UserTrainer:
    """The trial context of a user trainer's variant: its natural records, canaries and claim (no built-in model)."""
    t, can, att, aud = v.training, v.canary, v.attack, v.audit
    d = _records(v)
    c: Any
    if registry.canaries()[can.kind].kind == "gradient":  # the hook's Dirac canaries (docs/own-training.md)
        c = plugin.DiracCanaries(tuple(range(can.count)), can.norm) if aud.game == "one_run" \
            else plugin.DiracCanary(0, can.norm)  # one run: canary j on flat parameter j; else parameter 0
    else:  # an input canary goes through the trainer's whole pipeline
        c = registry.canaries()[can.kind].build(None, None, d, can.count, can.norm * t.clip_norm,
                                                torch.Generator().manual_seed(int(aud.seed)))
    timeout = trial_timeout if trial_timeout is not None else (aud.trial_timeout or None)  # the flag, else the key
    ctx = plugin.Context(trainer, d, c, int(aud.seed), att.score, t.trainer_dir or None, spec_of(v),
                         att.threat_model, t.clip_norm, timeout, fn=fn)
    return UserTrainer(ctx, sequential=bool(aud.max_trials))


INDEPENDENCE_REASON = (
    "dpaudit's own DP-SGD with Poisson sampling (independent inclusion), distinct Dirac canaries on slots the "
    "forward pass never reads, no fault, and a white-box score that reads each canary's own coordinate only: each "
    "canary's observations are its own draws plus its own noise, independent of every other canary's bit "
    "(docs/auditing.md, 'When dpaudit vouches')")
"""Why :func:`independence_vouched` vouches (the text result.json and the report carry)."""

_OWN_COORDINATE_SCORES = ("llr", "inner_product")  # white-box scores that read each canary's own observations only


def independence_vouched(game: BuiltIn | UserTrainer, v: VariantConfig, score: str) -> str | None:
    """Why the one-run canaries of this audit do not interact (:data:`INDEPENDENCE_REASON`), or None.

    dpaudit vouches exactly when the structure guarantees it: its own trainer (never a user's), the
    one-run game, honest Poisson sampling (not fixed size, shuffle, truncated Poisson or random
    allocation, whose batches couple the canaries), no fault of :mod:`attacks.faults`, the white-box
    threat model with ``dirac_slots`` canaries (:class:`attacks.canaries.DiracCanaries` on the slots of a
    :class:`attacks.models.Slotted` model), and a score that reads each canary's own observations
    (``llr``, ``inner_product``). Then canary j's observation at step t is (its draws)·a + σ·z_{t,j} with
    z_{t,j} the noise of its own coordinate, E|B| = qN fixed: a function of its own bit and of randomness
    no other canary sees.
    """
    if not isinstance(game, BuiltIn) or v.audit.game != "one_run":
        return None
    setup, c = game.setup, game.canaries
    if type(setup.spec.sampling) is not Poisson or setup.fault is not None:
        return None
    if v.attack.threat_model != "white_box" or score not in _OWN_COORDINATE_SCORES:
        return None
    if not isinstance(c, canaries_mod.DiracCanaries) or not isinstance(setup.model, models.Slotted):
        return None
    if not torch.equal(c.coordinates, models.slot_coordinates(setup.model)):
        return None
    return INDEPENDENCE_REASON


def _plugin_game(ctx: plugin.Context, aud: AuditConfig, run_dir: Path, progress: bool, backend: Any = None,
                 n_trials: int | None = None) -> games.AttackOutcome:
    if aud.game == "one_run":
        return plugin.one_run_game(ctx, n_runs=aud.trials, run_dir=run_dir, progress=progress, backend=backend)
    return plugin.multi_run_game(ctx, n_trials=n_trials or aud.trials, run_dir=run_dir, progress=progress,
                                 backend=backend)


def _builtin_game(game: BuiltIn, aud: AuditConfig, run_dir: Path, progress: bool,
                  backend: Any) -> games.AttackOutcome:
    setup, c = game.setup, game.canaries
    common = dict(threat=game.threat, seed=int(aud.seed), run_dir=run_dir, progress=progress, backend=backend)
    match aud.game:
        case "multi_run":
            return games.multi_run_game(setup, c, scores=game.scores, n_trials=aud.trials,
                                        chunk_size=aud.chunk_size, **common)
        case "one_run":
            return games.one_run_game(setup, c, scores=game.scores, n_runs=aud.trials,
                                      chunk_size=aud.chunk_size, **common)
        case "reconstruction":
            return games.reconstruction_game(setup, c, n_trials=aud.trials, chunk_size=aud.chunk_size, **common)
    raise InputError(f"audit.game must be one of ['multi_run', 'one_run', 'reconstruction']; got {aud.game!r}")


SEQUENTIAL_BLOCK = 250  # trials played between two checks of the time budget (at least; a quarter of those played)


def _sequential_game(ctx: plugin.Context, aud: AuditConfig, run_dir: Path, progress: bool, backend: Any,
                     curves: comparator.Curves,
                     claim: ClaimConfig | None) -> tuple[games.AttackOutcome, model.Sequential]:
    """Play a user trainer's multi-run game in blocks up to the sequential test's decision (statistics.sequential).

    The looks are replayed over the trials in ``trials.jsonl`` after every block, so a resumed audit
    reaches the same decision (a time budget aside: it counts this process's seconds). Returns the
    outcome of the deciding look's first n trials and what the test did.
    """
    spec = curves.spec
    f = curves.best
    if f is None:
        raise InputError(f"audit.max_trials (the sequential design): no accounting method gives a trade-off curve "
                         f"for {describe.describe(spec)}; set audit.max_trials = 0")
    curve = _numpy_curve(f)
    reject = _claim_test(claim, spec, aud) if claim is not None else None
    budget = float(aud.time_budget) or None
    looks = statistics.look_schedule(aud.max_trials)
    t0, target, stopped = time.monotonic(), looks[0], None
    while True:
        out = _plugin_game(ctx, aud, run_dir, progress, backend, n_trials=target)
        res = statistics.sequential_test(out.scores[_primary(out)], out.truth, curve, significance=aud.significance,
                                         max_trials=aud.max_trials, futility_z=aud.futility_z, reject=reject)
        if res.stopped != "continue":
            break
        if budget is not None and time.monotonic() - t0 >= budget and res.evaluated:
            stopped = "time_budget"
            break
        next_look = res.next_look if res.next_look is not None else target  # "continue" names its next look
        target = min(next_look, target + max(SEQUENTIAL_BLOCK, target // 4))
    played = int(out.truth.numel())
    if played != res.trials:
        out = _plugin_game(ctx, aud, run_dir, False, None, n_trials=res.trials)  # read back, none played
    if res.level is None:  # a decision or a time budget (which needs an evaluated look) always has a look's level
        raise RuntimeError("the sequential test stopped without a look; a bug in dpaudit")
    seq = model.Sequential(aud.max_trials, res.looks, res.levels, tuple(
        model.SequentialLook(x.n, x.level, _finite(x.margin), x.decision, x.p_value) for x in res.evaluated),
        stopped or res.stopped, res.trials, played, float(res.level), _sequential_reason(res, stopped, budget), budget)
    return out, seq


def _primary(out: games.AttackOutcome) -> str:
    """The outcome's primary score (every game of dpaudit's and of attacks/plugin.py names one)."""
    if out.primary_score is None:
        raise RuntimeError("the game's outcome names no primary score; a bug in dpaudit")
    return out.primary_score


def _sequential_reason(res: statistics.SequentialResult, stopped: str | None, budget: float | None) -> str:
    k, m = len(res.evaluated), res.looks[-1]
    match stopped or res.stopped:
        case "violation":
            return f"a violation at look {k} of {len(res.looks)}"
        case "futility":
            return (f"futility at look {k} of {len(res.looks)}: even if the rates seen held, {m} trials would not "
                    "show a violation")
        case "ceiling":
            return f"the ceiling: all {m} trials played, no violation at any of the {len(res.looks)} looks"
        case _:
            return f"the time budget of {budget:g} s ran out after look {k}; no violation at the looks reached"


_numpy_curve = comparator.numpy_curve


def _claim_test(claim: ClaimConfig, spec: DPSGD, aud: AuditConfig) -> Callable[[np.ndarray, np.ndarray, float], bool]:
    """The claim part of :func:`check_claim` at one look: ε_lower > claim, or the exact threshold test rejects the
    claim's curve (:mod:`audit.statistics.threshold_test`; its partition holds the ε bound's corners, so with the
    Bonferroni strategy the first implies the second, and both imply the test against the PLD curve whenever the
    claim is no stronger than the accountant: the union costs no level, up to the p-values' 1e-12 rounding
    allowance)."""
    d, eps = claim.delta, claim.epsilon
    if eps == "accountant":  # as check_claim: the smallest ε of the methods that cover the spec
        best = _accountant_epsilon(spec, d)
        eps = math.inf if best is None else best
    if not math.isfinite(float(eps)):
        return lambda xin, xout, level: False
    claim_curve = _numpy_curve(_claim_curve(float(eps), d))
    strategy = _strategy(aud.threshold, int(aud.seed))

    def test(xin: np.ndarray, xout: np.ndarray, level: float) -> bool:
        lb = statistics.epsilon_lower_bound(xin, xout, delta=d, significance=level, strategy=strategy).value
        return lb > float(eps) or statistics.threshold_test(xin, xout, claim_curve, significance=level).rejects(level)

    return test


def _claim_curve(eps: float, delta: float) -> acc.TradeOff:
    """The claim's (ε, δ) trade-off curve, in float64: in float32, ε ≥ 89 overflowed (exit 3) and the curve's
    rounding lifted it (f(0) = 1 instead of 1 − δ at ε = 30), a box below it then a false finding."""
    return acc.TradeOff.from_dp_pairs(torch.tensor([eps], dtype=torch.float64),
                                      torch.tensor([delta], dtype=torch.float64))


def _strategy(name: str, seed: int) -> statistics.ThresholdStrategy:
    strategies = registry.strategies()
    if name not in strategies:
        raise InputError(f"audit.threshold must be one of {sorted(strategies)}; got {name!r}")
    return strategies[name].build(seed)


def _curve_samples(f: acc.TradeOff | None) -> model.CurveSamples | None:
    if f is None:
        return None
    a = torch.cat([torch.logspace(-6, -2, 60, dtype=torch.float64), torch.linspace(0.01, 1.0, 140,
                                                                                     dtype=torch.float64)])
    return model.CurveSamples(tuple(a.tolist()), tuple(f(a).tolist()))


def _steps_curve(spec: DPSGD, delta: float) -> model.StepsCurve:
    """ε(δ) of every registered accounting method against the number of steps, for the steps figure."""
    T = spec.steps
    steps = tuple(sorted({max(1, round(T * f)) for f in (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)}))
    series = []
    for m in acc.methods():
        try:
            eps, note = _steps_epsilons(spec, delta, steps, m), None
        except acc.UnsupportedError as exc:
            eps, note = None, str(exc)
        series.append(model.StepsSeries(m, acc.method_label(m), eps, note))
    return model.StepsCurve(steps, series=tuple(series))


def _steps_epsilons(spec: DPSGD, delta: float, steps: tuple[int, ...], method: str) -> tuple[float, ...]:
    """``method``'s ε at δ after each number of ``steps``: a method with an RDP curve composes its one-step
    curve (T × RDP at every order of the default grid, then Balle et al. 2020 Thm 21; no order refinement),
    any other is asked at each T."""
    from accountants.rdp.conversion import eps_from_rdp

    if hasattr(acc.get_method(method), "curve"):
        orders = acc.default_orders()
        r1 = acc.rdp_curve(dataclasses.replace(spec, steps=1), orders, method=method)
        return tuple(float(eps_from_rdp(r1 * s, orders, delta)[0]) for s in steps)
    return tuple(float(acc.epsilon(dataclasses.replace(spec, steps=s), delta, method=method).value) for s in steps)


def _method_epsilons(curves: comparator.Curves) -> tuple[model.MethodEpsilon, ...]:
    """One record per accounting method that covers the spec (registry order); the tightest is marked."""
    best = curves.best_method
    return tuple(model.MethodEpsilon(m, curves.labels.get(m, m), _finite(e), _finite(curves.epsilon_lower.get(m)),
                                     model.TIGHTEST if m == best else model.UPPER)
                 for m, e in curves.epsilon.items())


def _accountant_fields(curves: comparator.Curves) -> dict[str, Any]:
    """The accountant side of an :class:`audit.model.AuditResult`: every registered method's ε, curve and
    ε-against-steps series (the registry decides which; the ones that do not cover the spec are named in
    ``accountant_notes``)."""
    return dict(
        epsilons=_method_epsilons(curves), accountant_notes=tuple(curves.notes),
        curves={m: c for m, c in ((m, _curve_samples(f)) for m, f in sorted(curves.curves.items()))
                if c is not None},  # keyed by accounting method name: every registered method that covers the spec
        steps_curve=_steps_curve(curves.spec, curves.delta))


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


CHUNKING_FILE = "chunking.json"


def _chunking(v: VariantConfig, game: BuiltIn | UserTrainer, run_dir: Path, memory_gb: float | None) -> dict:
    """How many models a chunk trains at once: audit.chunk_size at most, and what fits the memory budget.

    The first run of a variant decides and writes ``chunking.json``; a resume reads it, since the
    partition into chunks is part of the game's identity (whatever --memory-gb says then).
    """
    path = Path(run_dir) / CHUNKING_FILE
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    if memory_gb is not None and not (isinstance(memory_gb, (int, float)) and memory_gb > 0):
        raise InputError(f"--memory-gb must be a number > 0; got {memory_gb!r}")
    if isinstance(game, UserTrainer):  # a user's trainer: one model per call, one trial per task
        rec: dict[str, Any] = {"models_at_once": 1, "user_trainer": True}
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rec, sort_keys=True) + "\n", encoding="utf-8")
        return rec
    setup, c = game.setup, game.canaries
    where = setup.device if setup.device is not None else setup.data.x.device
    budget = int(memory_gb * 2**30) if memory_gb is not None else dpsgd.default_memory_bytes(where)
    per = dpsgd.bytes_per_model(setup.spec, setup.model, setup.data, m=getattr(c, "records", c.m), probes=c.m)
    cap = v.audit.chunk_size
    if v.audit.game == "one_run":
        cap = min(cap, v.audit.trials)
    rec = {"models_at_once": dpsgd.models_that_fit(budget, per, cap=cap), "bytes_per_model_estimate": per,
           "memory_budget_bytes": budget, "chunk_size_cap": cap}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec, sort_keys=True) + "\n", encoding="utf-8")
    return rec


def _histogram(name: str, inside: np.ndarray, outside: np.ndarray, labels: tuple[str, str],
               bins: int = 40) -> model.ScoreHistogram | None:
    """Counts of the in and out scores on one common grid of ``bins`` equal bins (finite scores only)."""
    inside, outside = inside[np.isfinite(inside)], outside[np.isfinite(outside)]
    both = np.concatenate([inside, outside])
    if both.size == 0:
        return None
    lo, hi = float(both.min()), float(both.max())
    if hi <= lo:
        lo, hi = lo - 0.5, hi + 0.5
    edges = np.linspace(lo, hi, bins + 1)
    return model.ScoreHistogram(name, tuple(edges.tolist()), tuple(np.histogram(inside, edges)[0].tolist()),
                                tuple(np.histogram(outside, edges)[0].tolist()), *labels)


def _violation(v: comparator.Violation | None) -> model.ViolationTest:
    if v is None:
        return model.ViolationTest(False, None, "no analytical curve to test against")
    return model.ViolationTest(v.violated, v.against, v.message, v.confidence, v.margin, v.threshold, v.fpr_upper,
                               v.fnr_upper, v.curve_fnr, v.p_value)


def _boxes(p: statistics.EmpiricalTradeOff) -> model.ConfidenceBoxes:
    def floats(x: np.ndarray) -> tuple[float, ...]:
        return tuple(float(v) for v in x.tolist())

    return model.ConfidenceBoxes(tuple(_finite(float(x)) for x in p.thresholds.tolist()), floats(p.fpr),
                                 floats(p.fnr), floats(p.fpr_lo), floats(p.fpr_hi), floats(p.fnr_lo), floats(p.fnr_hi),
                                 int(p.n_in), int(p.n_out), float(p.confidence))


def audit_variant(v: VariantConfig, run_dir: Path, *, progress: bool = False,
                  claim: ClaimConfig | None = None, backend: Any = None,
                  memory_gb: float | None = None, device: str = "cpu",
                  trial_timeout: float | None = None, game: BuiltIn | UserTrainer | None = None) -> model.AuditResult:
    """Play one variant's game in ``run_dir`` (resuming what is there), compare it with the accountants and
    :func:`assemble` its result.

    ``device``: where dpaudit's own trainer runs ("cpu", "cuda"); the game's draws and records do not depend on it.
    ``game``: the variant's game input (:func:`prepare`, trainer loaded once per run); None: made here.
    """
    t0 = time.perf_counter()
    game = game_input(v, trial_timeout=trial_timeout) if game is None else game
    if isinstance(game, BuiltIn):
        game = dataclasses.replace(game, setup=dataclasses.replace(game.setup, device=device))
    chunking = _chunking(v, game, run_dir, memory_gb)
    aud = dataclasses.replace(v.audit, chunk_size=int(chunking["models_at_once"]))
    spec = spec_of(v)
    curves = comparator.analytical_curves(spec, aud.delta)
    seq = None
    match game:  # the game input decides the game: no guard on the trainer key
        case UserTrainer(sequential=True):  # the sequential design (audit.max_trials)
            out, seq = _sequential_game(game.context, aud, run_dir, progress, backend, curves, claim)
            aud = dataclasses.replace(aud, significance=seq.level, trials=seq.trials)  # the deciding look's test
        case UserTrainer():
            out = _plugin_game(game.context, aud, run_dir, progress, backend)
        case BuiltIn():
            out = _builtin_game(game, aud, run_dir, progress, backend)
    name = _primary(out)  # the score the outcome documents as its own (issue 12 §5)
    t_game = time.perf_counter() - t0
    conf = None
    if out.metadata.get("conformance"):  # the premise tests share this audit's significance with its ε audit
        aud = dataclasses.replace(aud, significance=aud.significance / 2)
        conf = conformance.run_tests(out.metadata["conformance"], spec, aud.significance, int(aud.seed),
                                     replayed=replay.observe(game.context) if isinstance(game, UserTrainer) else None)
    s = aud.significance
    sc = out.scores[name]
    cmp: comparator.MembershipComparison | comparator.ReconstructionComparison
    if out.design is games.Design.RECONSTRUCTION:
        cmp = comparator.compare_reconstruction(out.successes(name), float(out.metadata["kappa"]), curves,
                                                significance=s)
    else:
        _check_both_sides(v.name, out.truth, out.design)
        if out.design is games.Design.MULTI_RUN:
            cmp = comparator.compare_membership(sc[out.truth], sc[~out.truth], spec, delta=aud.delta,
                                                significance=s, strategy=_strategy(aud.threshold, int(aud.seed)),
                                                curves=curves, exact=seq is not None)
        else:
            why = independence_vouched(game, v, name)
            cmp = comparator.compare_one_run(sc, out.truth, spec, delta=aud.delta, significance=s, curves=curves,
                                             independent_canaries=why is not None,
                                             sgm_family=why is not None and aud.delta > 0)
            if why is not None:  # the result and the report say why the order statistic entered ε_lower
                cmp.one_run_statistics = tuple(
                    dataclasses.replace(x, assumption=f"{x.assumption}; vouched by dpaudit: {why}")
                    if x.in_epsilon_lower and x.assumption else x for x in cmp.one_run_statistics)
        if seq is not None:  # computed at the deciding look's level; all looks hold jointly at the audit's confidence
            cmp = _restated(cmp, 1 - v.audit.significance)
    asked = Asked(v.name, out.design, out.threat, name, v.canary.kind, faults_mod.describe(_fault(v)), spec,
                  aud.delta, s, int(aud.seed), aud.threshold, int(aud.trials),
                  reported_significance=v.audit.significance if seq is not None else None)
    return assemble(asked, curves, sc, out.truth, cmp, claim=claim, started=t0, game_s=t_game,
                    models_at_once=int(chunking["models_at_once"]), conformance=conf, sequential=seq,
                    natural_records=int(v.training.n_records),
                    canary_labels=tuple(out.metadata["canary_labels"]) if out.metadata.get("canary_labels") else None)


# ------------------------------------------------------------------------------------------ assembly


@dataclass(frozen=True)
class Asked:
    """What one audit was asked and how its statistics ran: the head of its :class:`audit.model.AuditResult`.

    ``significance`` is the level its statistics ran at (a sequential audit: the deciding look's);
    ``reported_significance``, when given, is the one its result states (a sequential audit: all looks jointly).
    ``threshold`` names the threshold strategy (:mod:`audit.registry`), built from ``seed``.
    """

    name: str
    design: games.Design
    threat_model: str
    score: str
    canary: str
    fault: str
    spec: DPSGD
    delta: float
    significance: float
    seed: int
    threshold: str
    trials: int
    reported_significance: float | None = None


def assemble(asked: Asked, curves: comparator.Curves, scores: torch.Tensor, truth: torch.Tensor,
             cmp: comparator.MembershipComparison | comparator.ReconstructionComparison, *,
             claim: model.ClaimConfig | None = None, certify: bool = True, started: float, game_s: float = 0.0,
             models_at_once: int | None = None, nonfinite: model.NonFinite | None = None,
             conformance: model.Conformance | None = None, sequential: model.Sequential | None = None,
             natural_records: int | None = None, canary_labels: tuple[int, ...] | None = None) -> model.AuditResult:
    """The one result-assembly path (``run``, ``check``, ``score``, :func:`audit.score.audit_trainer`).

    From what was asked, the accountants' curves, the scores with their truth (membership: a bool per row;
    reconstruction: the true candidate's index), the comparison and the claim, the typed result of one audit.
    ``certify``: compute ε_certifiable (simulated optimal audits; ``dpaudit score`` skips it where it
    is costly); ``started``: ``time.perf_counter()`` at the audit's start (the runtime's total).
    """
    delta = asked.delta
    head: dict[str, Any] = dict(
        name=asked.name, design=asked.design.value, threat_model=asked.threat_model, score=asked.score,
        canary=asked.canary, fault=asked.fault, spec=asked.spec,
        significance=asked.significance if asked.reported_significance is None else asked.reported_significance,
        delta=delta, seed=asked.seed, trials=asked.trials, models_at_once=models_at_once, nonfinite=nonfinite,
        conformance=conformance, sequential=sequential, natural_records=natural_records, canary_labels=canary_labels,
        **_accountant_fields(curves),  # the ε columns (accountant methods: issue 24 item 4)
    )
    if isinstance(cmp, comparator.ReconstructionComparison):
        body = _reconstruction_fields(cmp, asked, scores, truth)
    else:
        body = _membership_fields(cmp, asked, curves, scores, truth, certify)
        if claim is not None:
            chk = check_claim(cmp, curves, claim, scores, truth, asked)
            if conformance is not None and conformance.rejected:  # a broken premise refutes the claim too
                chk = dataclasses.replace(chk, holds=False, reasons=chk.reasons + tuple(
                    f"conformance: {t.premise} ({t.name}): {t.finding} (p = {t.p_value:.3g} <= {t.level:.3g})"
                    for t in conformance.tests if t.rejected))
            body["claim"] = chk
    runtime = model.Runtime(round(game_s, 2), round(time.perf_counter() - started, 2))
    return model.AuditResult(**{**head, **body}, runtime_s=runtime)  # reconstruction: trials as played


def _reconstruction_fields(rc: comparator.ReconstructionComparison, asked: Asked, scores: torch.Tensor,
                           truth: torch.Tensor) -> dict[str, Any]:
    s = asked.significance
    bound = "n/a" if rc.bound is None else fmt.upper(rc.bound, 4)
    target = torch.nn.functional.one_hot(truth, scores.shape[1]).to(torch.bool)
    return dict(
        trials=rc.trials, reconstruction=model.Reconstruction(
            rc.trials, rc.successes, rc.success_rate, rc.success_lower, rc.kappa, rc.bound, rc.confidence, rc.violated),
        histogram=_histogram(asked.score, scores[target].numpy(), scores[~target].numpy(),
                             ("true candidate", "other candidates")),
        violation=model.ViolationTest(
            rc.violated, "ReRo bound 1 - f(kappa)",
            (f"VIOLATION: reconstruction success ≥ {fmt.lower(rc.success_lower, 4)} "
             f"(at {comparator.format_confidence(1 - s)}) exceeds the bound {bound}: bug or broken DP")
            if rc.violated else
            f"no violation: success ≥ {fmt.lower(rc.success_lower, 4)} within the bound {bound}", 1 - s))


def _membership_fields(cmp: comparator.MembershipComparison, asked: Asked, curves: comparator.Curves,
                       scores: torch.Tensor, truth: torch.Tensor, certify: bool) -> dict[str, Any]:
    viol = next((x for x in cmp.violations if x.violated), cmp.violations[0] if cmp.violations else None)
    res: dict[str, Any] = dict(
        rows=int(scores.numel()), n_in=cmp.epsilon_lower.n_in, n_out=cmp.epsilon_lower.n_out,
        epsilon_lower=cmp.epsilon_lower, ceiling=_finite(cmp.ceiling),
        tightness_tight=_finite(cmp.tightness_tight), tightness_rdp=_finite(cmp.tightness_rdp),
        gdp_estimate=cmp.gdp, gdp_lower_one_run=cmp.gdp_lower, violation=_violation(viol),
        delta_theory_empirical_estimate=_finite(cmp.delta_theory_empirical_estimate),
        delta_empirical_theory_estimate=_finite(cmp.delta_empirical_theory_estimate),
        points=_boxes(cmp.points) if cmp.points else None,
        roc=model.Roc(tuple(cmp.points.roc_fpr.tolist()), tuple(cmp.points.roc_tpr.tolist()))
        if cmp.points else None,
        histogram=_histogram(asked.score, scores[truth].numpy(), scores[~truth].numpy(), ("canary in", "canary out")),
    )
    if certify:
        res.update(_certifiable(cmp.epsilon_lower, curves, asked))
    if asked.design is games.Design.ONE_RUN:
        res["one_run_statistics"] = one_run_statistics(cmp, curves if certify else None,
                                                       res.get("epsilon_certifiable"))
    return res


def _check_both_sides(name: str, truth: torch.Tensor, design: games.Design) -> None:
    """A membership audit needs canaries both in and out; say which audit lacked one and what to change."""
    n_in = int(truth.sum())
    n_out = int(truth.numel()) - n_in
    if n_in and n_out:
        return
    unit = "runs" if design is games.Design.MULTI_RUN else "canaries"
    raise RunError(f"audit {name!r}: its {truth.numel()} {unit} hold {n_in} with the canary in and {n_out} with it "
                   "out (each is in with probability 1/2); the statistics need both: raise audit.trials "
                   "(hundreds or more; 2,000 is the default)")


def _restated(cmp: comparator.MembershipComparison, confidence: float) -> comparator.MembershipComparison:
    """``cmp`` with its confidence labels (ε_lower, boxes, violations) set to ``confidence``.

    A sequential audit computes the deciding look's statistics at that look's α_k; the look was chosen
    by the data, so they hold at 1 − Σ α_k (every look jointly), which is what the labels must say.
    """
    cmp.epsilon_lower = dataclasses.replace(cmp.epsilon_lower, confidence=confidence)
    if cmp.points is not None:
        cmp.points = dataclasses.replace(cmp.points, confidence=confidence)
    cmp.violations = [dataclasses.replace(x, confidence=confidence) for x in cmp.violations]
    return cmp


def one_run_statistics(cmp: comparator.MembershipComparison, curves: comparator.Curves | None,
                       lower_certifiable: float | None = None) -> tuple[model.OneRunStatistic, ...]:
    """Every one-run statistic of ``cmp`` (which certified what), with its own ε_certifiable.

    ε_certifiable of an ε statistic is the median of :func:`audit.tightness.certifiable_one_run_replicates`
    on the curves of :func:`certifiable_curves` (per ordered direction where PLD is tightest; the largest
    median) at that statistic's own confidence; the one behind ε_lower reuses ``lower_certifiable`` (already
    computed with the same seed).
    None without a curve (``curves`` None: not computed) and for GDP μ bounds.
    """
    on = None if curves is None else certifiable_curves(curves)
    out = []
    for x in cmp.one_run_statistics:
        b = x.result
        if isinstance(b, statistics.GdpLowerBound):
            out.append(model.OneRunStatistic(x.name, b.bound, b.mu_lower, b.refuted_curve_epsilon, b.confidence,
                                             x.in_epsilon_lower, b.guesses, b.correct, x.assumption))
            continue
        ec = None
        if b is cmp.epsilon_lower and lower_certifiable is not None:
            ec = lower_certifiable
        elif on and b.n_in and b.n_out and x.name in tightness.ONE_RUN_STATISTICS:
            assert curves is not None
            steps, n_rep = _replay_args(x.name, curves.spec)
            _, reps = tightness.best_direction(on, functools.partial(
                tightness.certifiable_one_run_replicates, m=b.n_in + b.n_out, delta=b.delta,
                significance=1 - b.confidence, statistic=x.name, steps=steps, replicates=n_rep))
            ec = float(np.median(reps))
        out.append(model.OneRunStatistic(x.name, b.bound, b.value, b.value, b.confidence, x.in_epsilon_lower,
                                         b.guesses, b.correct, x.assumption, ec))
    return tuple(out)


def _replay_args(statistic: str, spec: DPSGD) -> tuple[int | None, int]:
    """(steps, replicates) of a one-run replay: "order_family" needs the family's T and takes fewer replicates
    (:data:`audit.tightness.FAMILY_REPLICATES`; seconds each), the others 21 and no T."""
    if statistic != "order_family":
        return None, 21
    return int(spec.steps), tightness.FAMILY_REPLICATES


CERTIFIABLE_REPLICATES = 101
"""Seeded optimal audits behind a multi-run ε_certifiable (their median; one-run keeps
:func:`audit.tightness.certifiable_one_run_replicates`' 21). 101 per direction cost about 0.4–0.65 s per audit
at 2,000 trials (the default run, load 7 on 2 cores: +1.5 s on ~70 s) and halve the median's noise of 21
(white_box_poisson: 2.475 with 21, 2.366 with 101, 2.414 with 401 replicates)."""


def certifiable_curves(curves: comparator.Curves) -> dict[str, acc.TradeOff]:
    """The curves ε_certifiable is simulated on, by label; empty when no method covers the spec.

    Where the tightest method (:func:`audit.comparator.tightest_method`) is PLD and covers the spec, each
    ordered direction's curve (:func:`audit.tightness.directional_curves`; "pld, direction remove"): an
    audit, multi-run or one-run, reads one ordered pair (D, D′) per canary, and the symmetric curve covers
    both orderings of every pair at once, which no single pair realises (docs/worst-case.md, "ε_certifiable
    per direction"). Otherwise (RDP-only specs, other registered methods) the tightest method's curve.
    """
    which, curve = curves.best_method, curves.best
    if which is None or curve is None:
        return {}
    if which == "pld":
        d = tightness.directional_curves(curves.spec)
        if d:
            return {f"pld, direction {k}": f for k, f in d.items()}
    return {which: curve}


def _certifiable(lb: statistics.EpsilonLowerBound, curves: comparator.Curves, asked: Asked) -> dict[str, Any]:
    """ε_certifiable on :func:`certifiable_curves` (the direction that certifies most) and ε_lower / ε_certifiable."""
    on, design = certifiable_curves(curves), asked.design
    if design not in (games.Design.MULTI_RUN, games.Design.ONE_RUN) or not on or not lb.n_in or not lb.n_out:
        return {"epsilon_certifiable": None, "certifiable_ratio": None, "certifiable_curve": None}
    replicates: Callable[[acc.TradeOff], np.ndarray]
    if design is games.Design.ONE_RUN:  # m canaries in one run: the same guesses statistic on canonical scores
        sig = asked.significance if lb.confidence == 1 - asked.significance else 1 - lb.confidence  # a split s
        stat = tightness.ONE_RUN_METHOD_STATISTIC.get(lb.method, "steinke")  # the bound behind ε_lower

        steps, n_rep = _replay_args(stat, asked.spec)

        def replicates(f: acc.TradeOff) -> np.ndarray:
            return tightness.certifiable_one_run_replicates(f, lb.n_in + lb.n_out, delta=asked.delta,
                                                            significance=sig, statistic=stat, steps=steps,
                                                            replicates=n_rep)
    else:
        def replicates(f: acc.TradeOff) -> np.ndarray:
            return tightness.certifiable_replicates(f, lb.n_in, lb.n_out, delta=asked.delta,
                                                    significance=asked.significance,
                                                    strategy=_strategy(asked.threshold, int(asked.seed)),
                                                    replicates=CERTIFIABLE_REPLICATES)
    which, reps = tightness.best_direction(on, replicates)
    ec = float(np.median(reps))
    return {"epsilon_certifiable": ec,
            "certifiable_ratio": tightness.certifiable_ratio(lb.value, ec),
            "certifiable_curve": which,
            "certifiable_range": (float(reps[0]), float(reps[-1]))}


def check_claim(cmp: comparator.MembershipComparison, curves: comparator.Curves, claim: model.ClaimConfig,
                scores: torch.Tensor, truth: torch.Tensor, asked: Asked) -> model.ClaimCheck:
    """Does the claim (ε, δ) hold, by the accountant and by the audit? (``check``, ``score --epsilon``, Python)

    Accountant: the smallest ε of every registered method that covers the spec, at the claim's δ (each is a
    sound upper bound), must not exceed the claim. Audit: ε_lower at the claim's δ (the audit's own ε_lower when
    the δ's agree, else recomputed: multi-run with the audit's threshold strategy, one-run Steinke et al.'s bound,
    sound for any canaries) must not exceed it, no multi-run confidence box may lie below the claim's curve, and
    the audit's own violation test must not fire.
    """
    d, spec = claim.delta, asked.spec
    acc_eps = curves.epsilon_best if d == curves.delta else _accountant_epsilon(spec, d)
    eps_claim: float | str = claim.epsilon
    if eps_claim == "accountant":  # the accountants' own ε at the claim's δ
        if acc_eps is None:
            raise InputError(f"[claim] epsilon = \"accountant\": no accounting method covers {describe.describe(spec)}"
                             "; write the claimed epsilon as a number")
        eps_claim = acc_eps
    eps = float(eps_claim)
    claimed = fmt.exact(eps)
    accountant_ok = acc_eps is not None and acc_eps <= eps * (1 + 1e-9)
    s = asked.significance
    if d == cmp.epsilon_lower.delta:
        lb = cmp.epsilon_lower.value
    elif asked.design is games.Design.MULTI_RUN:
        lb = statistics.epsilon_lower_bound(scores[truth], scores[~truth], delta=d, significance=s,
                                            strategy=_strategy(asked.threshold, asked.seed)).value
    else:
        lb = statistics.epsilon_one_run(scores, truth, delta=d, significance=s).value
    if asked.design is games.Design.MULTI_RUN and cmp.points is not None:
        claim_curve, against = _claim_curve(eps, d), f"claim (eps={claimed}, delta={d:g})"
        v = (comparator.exact_violation_test(scores[truth], scores[~truth], claim_curve, significance=s,
                                             against=against)
             if asked.reported_significance is not None else  # the sequential design's test
             comparator.violation_test(cmp.points, claim_curve, against=against))
        audit_ok = not v.violated and lb <= eps
        msg = v.message if v.violated else (f"epsilon_lower {fmt.lower(lb, 4)} > claimed {claimed}" if lb > eps
                                            else "")
    else:
        audit_ok = lb <= eps
        msg = "" if audit_ok else f"one-run epsilon_lower {fmt.lower(lb, 4)} > claimed {claimed}"
    reasons = []
    if not accountant_ok:
        acc_words = fmt.upper(acc_eps) if acc_eps is not None else "unavailable"
        reasons.append(f"accountant: epsilon {acc_words} at delta={d:g} "
                       f"exceeds the claimed {claimed}" + (
                           " (epsilon = 0 is a claim of perfect privacy; before dpaudit 0.2 it meant the "
                           "accountant's own epsilon, now written epsilon = \"accountant\")" if eps == 0 else ""))
    if not audit_ok:
        reasons.append(f"audit: {msg}")
    if cmp.violated:
        reasons.append("audit: " + next(x.message for x in cmp.violations if x.violated))
    return model.ClaimCheck(eps, d, acc_eps, accountant_ok, lb, audit_ok and not cmp.violated, not reasons,
                            tuple(reasons))


def _accountant_epsilon(spec: DPSGD, delta: float) -> float | None:
    """The smallest ε at ``delta`` of every registered accounting method that covers ``spec`` (None: none does)."""
    eps = None
    for method in acc.methods():
        try:
            val = float(acc.epsilon(spec, delta, method=method).value)
        except acc.UnsupportedError:
            continue
        eps = val if eps is None else min(eps, val)
    return eps


def execute(config_path: str | Path | None, out: str | Path | None, *, resume: bool = False,
            progress: bool = True, claim: bool = False,
            on_variant: Callable[[model.AuditResult], None] | None = None,
            backend: Any = None, memory_gb: float | None = None,
            device: str = "cpu", trial_timeout: float | None = None,
            on_start: Callable[[RunConfig, Path, list[Prepared]], None] | None = None,
            finish: Callable[[Path, model.RunResult], Any] | None = None) -> tuple[Path, model.RunResult]:
    """Run (or resume) every audit of a configuration in a run folder; write config.toml and result.json.

    Args:
        config_path: TOML file, or None for the embedded default.
        out: run folder (default ``runs/<config stem>-<UTC time>``).
        resume: continue the run in ``out`` (its config.toml decides; a given config must match it).
        progress: tqdm bars.
        claim: also decide the configuration's [claim] (``dpaudit check``).
        on_variant: called with each variant's result as soon as it is done.
        backend: where chunks of trials run (:mod:`audit.backends`; None: this process).
        memory_gb: memory one chunk may take (GiB); None: a safe share of the machine
            (:func:`attacks.dpsgd.default_memory_bytes`). Decides how many models train at once.
        device: where the DP-SGD trainer runs, "cpu" or "cuda[:N]" (``--device``); checked first.
        trial_timeout: seconds per trial of a user trainer (``--trial-timeout``; None: ``audit.trial_timeout``).
        on_start: called with the resolved configuration, the run folder and the audits' game inputs
            (:func:`prepare`) once everything is checked and before the folder is created (the CLI prints the
            estimate from those inputs and the folder; an InputError it raises leaves no run folder behind).
        finish: called with (run folder, result) while the run folder is still locked (the report:
            a ``--resume`` started meanwhile is refused until the report and figures are written).

    Returns:
        (run folder, :class:`audit.model.RunResult`).
    """
    device = str(dpsgd.resolve_device(device, "--device"))  # before any work: InputError names the flag
    if out is None:
        stem = "default" if config_path is None else Path(config_path).stem[:64]
        out = Path("runs") / f"{stem}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    out = Path(out)
    cfg_file = _run_config_file(out, resume)
    # a resume without CONFIG continues the folder's config.toml; with one, execute_config compares the two
    cfg = config_mod.load_resolved(cfg_file) if resume and config_path is None else config_mod.load(config_path)
    return execute_config(cfg, out, resume=resume, progress=progress, claim=claim, on_variant=on_variant,
                          backend=backend, memory_gb=memory_gb, device=device, trial_timeout=trial_timeout,
                          on_start=on_start, finish=finish)


def _run_config_file(out: Path, resume: bool) -> Path:
    """``out``'s config.toml, after checking that ``out`` is a folder or absent, and that it exists for a resume."""
    cfg_file = out / CONFIG_FILE
    if _exists(out, "--out") and not out.is_dir():
        raise RunError(f"run folder {str(out)!r} exists and is not a folder")
    if resume and not cfg_file.is_file():
        raise RunError(f"--resume: {str(cfg_file)!r} does not exist; nothing to resume")
    return cfg_file


def execute_config(cfg: RunConfig, out: Path, *, resume: bool = False, progress: bool = True,
                   claim: bool = False, on_variant: Callable[[model.AuditResult], None] | None = None,
                   backend: Any = None, memory_gb: float | None = None, device: str = "cpu",
                   trial_timeout: float | None = None,
                   on_start: Callable[[RunConfig, Path, list[Prepared]], None] | None = None,
                   finish: Callable[[Path, model.RunResult], Any] | None = None,
                   trainer: Callable | None = None) -> tuple[Path, model.RunResult]:
    """:func:`execute` of a resolved configuration (``resume``: the one in ``out``'s config.toml).

    ``trainer``: a callable that stands for every variant's ``training.trainer`` (:func:`audit.score.audit_trainer`).
    Everything is checked and every game input made (:func:`prepare`) before the run folder is created.
    """
    cfg_file = _run_config_file(out, resume)
    # Validate everything before creating anything: a bad configuration leaves no run folder behind.
    if resume:  # the typed configurations compared (RunConfig.source, where each came from, aside)
        if config_mod.load_resolved(cfg_file) != cfg:
            raise RunError(f"--resume: {cfg.source or 'the configuration'} differs from the configuration in "
                           f"{str(cfg_file)!r}")
    elif cfg_file.exists() or (out / "audits").exists():
        raise RunError(f"run folder {str(out)!r} already holds a run; pass --resume to continue it, or choose "
                       "another --out")
    audits = prepare(cfg, claim=claim, trainer=trainer, trial_timeout=trial_timeout)
    _plugin_limits(cfg, backend, device, memory_gb, trial_timeout)
    if on_start is not None:
        on_start(cfg, out, audits)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RunError(f"cannot create the run folder {str(out)!r}: {exc.strerror or exc}") from None
    with lock(out):
        if not resume:
            if cfg_file.exists() or (out / "audits").exists():  # another process started here meanwhile
                raise RunError(f"run folder {str(out)!r} already holds a run; pass --resume to continue it, or "
                               "choose another --out")
            cfg_file.write_text(config_mod.dumps(cfg), encoding="utf-8")
        result = _run_audits(cfg, audits, out, progress=progress, claim=claim, on_variant=on_variant,
                             backend=backend, memory_gb=memory_gb, device=device, trial_timeout=trial_timeout)
        if finish is not None:
            finish(out, result)
        return out, result


def _exists(path: Path, what: str) -> bool:
    """``path.exists()``, with an unusable name (too long, NUL byte) an input error naming ``what``."""
    try:
        return path.exists()
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise RunError(f"{what} {str(path)[:80]!r}{'...' if len(str(path)) > 80 else ''} cannot be used: "
                       f"{reason}") from None


LOCK_FILE = ".lock"


@contextlib.contextmanager
def lock(folder: Path) -> Iterator[None]:
    """Hold an exclusive lock on a run folder (one writer at a time); RunError names the holder's pid.

    ``fcntl.flock`` on ``folder/.lock``: the lock dies with its process, so a killed run never
    leaves a stale lock behind.
    """
    path = Path(folder) / LOCK_FILE
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise RunError(f"run folder {str(folder)!r} is in use by another dpaudit process (pid {holder}); wait "
                           "for it to finish, or choose another --out") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _plugin_limits(cfg: RunConfig, backend: Any, device: str, memory_gb: float | None = None,
                   trial_timeout: float | None = None) -> None:
    """Refuse, before any work, the flags a user's own trainer does not honour (never ignore them silently).

    A trainer named by ``[training] trainer`` decides its own device and trains one model per call,
    so ``--device`` other than cpu and ``--memory-gb`` would otherwise be dropped without a word.
    (``--backend process|ray`` runs its trials in workers, one trial per task.)
    """
    if not any(v.training.trainer for v in cfg.audits()):
        if trial_timeout is not None:
            raise InputError("--trial-timeout applies to a user trainer ([training] trainer) only")
        return
    if memory_gb is not None:
        raise InputError("--memory-gb sizes chunks of dpaudit's own vectorised trainer; a user trainer "
                         "([training] trainer) trains one model per call: leave --memory-gb out")
    if device != "cpu":
        raise InputError(f"--device {device!r}: a user trainer ([training] trainer) decides its own device; "
                         "move tensors inside your train function and use --device cpu")


def validate(cfg: RunConfig, *, claim: bool = False) -> None:
    """Check what the TOML schema cannot: every variant's game input builds (data size, spec, canaries, trainer)."""
    prepare(cfg, claim=claim)


def prepare(cfg: RunConfig, *, claim: bool = False, trainer: Callable | None = None,
            trial_timeout: float | None = None) -> list[Prepared]:
    """Every audit of ``cfg`` checked and its game input made, each user trainer loaded once for the whole run.

    A bad trainer reference, import or signature is an InputError here (exit 2 before any run folder exists).
    ``trainer``: a callable standing for every variant's ``training.trainer`` (:func:`audit.score.audit_trainer`).
    """
    loaded: dict[tuple[Any, str], Callable] = {}
    out = []
    for v in cfg.audits():
        ref: str | Callable = v.training.trainer
        fn = None
        if ref:
            ref = trainer if trainer is not None else ref
            key = (ref, v.training.trainer_dir)
            if key not in loaded:  # the run's one load of this trainer
                loaded[key] = plugin.load_trainer(ref, v.training.trainer_dir or None)
            fn = loaded[key]
        where = f"variant {v.name!r}: " if cfg.variants else ""
        try:
            game = game_input(v, trainer=ref or None, fn=fn, trial_timeout=trial_timeout)
            _strategy(v.audit.threshold, int(v.audit.seed))
            spec = spec_of(v)
            if claim and cfg.claim.epsilon == "accountant" and \
                    all(acc.get_method(m).unsupported(spec) is not None for m in acc.methods()):
                raise InputError(f"[claim] epsilon = \"accountant\": no accounting method covers "
                                 f"{describe.describe(spec)}; write the claimed epsilon as a number")
        except InputError as exc:
            raise type(exc)(f"{where}{exc}") from None
        out.append(Prepared(v, game))
    return out


def _run_audits(cfg: RunConfig, audits: list[Prepared], out: Path, *, progress: bool, claim: bool,
                on_variant: Callable[[model.AuditResult], None] | None, backend: Any = None,
                memory_gb: float | None = None, device: str = "cpu",
                trial_timeout: float | None = None) -> model.RunResult:
    results = []
    for p in audits:
        # The configured significance is family-wise for the whole run: each of the k audits runs at
        # significance/k (Bonferroni), so the run's verdict (any violation, the claim check, the max
        # epsilon_lower) holds at 1 − significance however many variants the config defines.
        v = dataclasses.replace(p.variant, audit=dataclasses.replace(
            p.variant.audit, significance=p.variant.audit.significance / len(audits)))
        r = audit_variant(v, out / "audits" / v.name, progress=progress, claim=cfg.claim if claim else None,
                          backend=backend, memory_gb=memory_gb, device=device, trial_timeout=trial_timeout,
                          game=p.game)
        results.append(r)
        if on_variant is not None:
            on_variant(r)
    result = summarise(cfg, results)
    (out / RESULT_FILE).write_text(model.dumps(result), encoding="utf-8")
    return result


def summarise(cfg: RunConfig, audits: list[model.AuditResult]) -> model.RunResult:
    """The run's result (what result.json holds) from its resolved configuration and audits."""
    s = cfg.audit.significance
    lbs = [(a.epsilon_lower.value, a.name) for a in audits if a.epsilon_lower is not None]
    k = max(1, len(lbs))
    best = max(lbs) if lbs else (None, None)
    checked = [(a.name, a.claim) for a in audits if a.claim is not None]
    return model.RunResult(
        created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        significance=s, delta=cfg.audit.delta,
        violation=any(a.violation.violated or (a.conformance is not None and a.conformance.rejected)
                      for a in audits),
        epsilon_lower=model.RunEpsilonLower(
            best[0], best[1], 1 - s, f"max over {k} audits, each at significance {s:g}/{k} (Bonferroni): "
                                     f"holds at {1 - s:.4g} jointly"),
        claim=model.ClaimSummary(all(c.holds for _, c in checked),
                                 tuple(f"{name}: {r}" for name, c in checked for r in c.reasons))
        if checked else None,
        audits=tuple(audits),
        config=cfg,
    )


def load_result(run: str | Path) -> model.RunResult:
    """The result of a finished run, read from its result.json (JSON only; never pickle)."""
    return model.load_result(run)
