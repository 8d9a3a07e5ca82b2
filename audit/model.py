"""The typed result model of a run: frozen dataclasses with a versioned JSON form.

``result.json`` is :meth:`RunResult.to_json` (format :data:`RESULT_FORMAT`); the Markdown and
HTML reports (:mod:`audit.report`) render a :class:`RunResult` through templates and never read
each other. Everything is a frozen dataclass; :func:`to_dict` / :func:`from_dict` convert
between a model object and JSON-ready dicts generically from the field types, so a field added
here is written, read and checked without further code.

Directions are in the names: ``epsilon_lower`` (and its ``bound: "lower"``) holds at the stated
confidence; ``epsilons`` (one :class:`MethodEpsilon` per registered accounting method) are
accountant upper bounds, ``epsilon_rdp``/``epsilon_tight`` the two built-in ones repeated under
their old names; ``*_estimate`` values are estimates and never pass or fail anything.

Versions. ``dpaudit.result/2`` (this module) replaced the hand-built dict of
``dpaudit.result/1``. A ``/1`` file is refused with a message naming both versions and the
recovery: ``dpaudit run --resume --out RUN`` rebuilds ``result.json`` from the trial files
(nothing is retrained).

>>> check_name("white_box_poisson")
'white_box_poisson'
>>> check_name("x/../../NAME")
Traceback (most recent call last):
...
accountants.InputError: name must be 1-64 characters of [A-Za-z0-9_.-], not starting with '.'; got 'x/../../NAME'
>>> h = ScoreHistogram("llr", (0.0, 1.0, 2.0), (3, 7), (8, 2))
>>> from_dict(ScoreHistogram, to_dict(h)) == h
True
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from accountants.describe import describe
from accountants.describe import from_dict as spec_from_dict
from accountants.errors import InputError, InputTypeError
from accountants.events import DPSGD

from .jsontypes import JSONObject
from .runconfig import SECTIONS, VARIANT_SECTIONS, ClaimConfig, RunConfig, VariantConfig
from .statistics import EpsilonLowerBound, GdpEstimate, GdpLowerBound

__all__ = [
    "RESULT_FORMAT",
    "AuditResult",
    "ClaimCheck",
    "ClaimConfig",
    "ClaimSummary",
    "ConfidenceBoxes",
    "Conformance",
    "CurveSamples",
    "MethodEpsilon",
    "NonFinite",
    "PremiseTest",
    "Reconstruction",
    "Roc",
    "RunConfig",
    "RunEpsilonLower",
    "RunResult",
    "Runtime",
    "ScoreHistogram",
    "Sequential",
    "SequentialLook",
    "StepsCurve",
    "StepsSeries",
    "ViolationTest",
    "check_name",
    "dumps",
    "from_dict",
    "load_result",
    "to_dict",
]

RESULT_FORMAT = "dpaudit.result/2"
RESULT_FILE = "result.json"
_OLDER = {"dpaudit.result/1"}

# An audit (variant) name: also a folder name (audits/<name>/) and part of figure file names.
_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}")  # used with fullmatch; no leading "." ("." and "..")


def check_name(name: Any, where: str = "name") -> str:
    """An audit/variant name, checked the same way wherever it is read (TOML or result.json).

    Full match (never ``$``, which lets a trailing newline through) of 1-64 characters of
    ``[A-Za-z0-9_.-]`` not starting with ``.`` (so no ``/``, no newline, never ``.`` or ``..``): the
    name becomes a folder and part of file names inside the run folder.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InputError(f"{where} must be 1-64 characters of [A-Za-z0-9_.-], not starting with '.'; got {name!r}")
    return name


# ------------------------------------------------------------------------------------------ config


# The typed configuration (audit/runconfig.py) is part of the result: RunResult.config is the run's RunConfig,
# written in its JSON form (every key of the base, each variant as the keys it changes) and read back by
# _run_config below.


# ------------------------------------------------------------------------------------------ one audit


@dataclass(frozen=True)
class CurveSamples:
    """An analytical trade-off curve sampled for figures: β = f(α)."""

    alpha: tuple[float, ...]
    beta: tuple[float, ...]


TIGHTEST, UPPER = "tightest", "upper"  # the roles of an accountant's ε in a result


@dataclass(frozen=True)
class MethodEpsilon:
    """One registered accounting method's ε at the audit's δ for the claimed spec.  Bound: upper.

    ``role`` is ``"tightest"`` for the one method whose ε is the smallest (:func:`audit.comparator.tightest_method`):
    the audit's reported upper bound, whose curve the violation test, the reconstruction bound and
    ε_certifiable use; ``"upper"`` for every other (sound, looser or equal). ``lower``: the certified
    lower end of the method's bracket, where it has one; ``value`` None: not finite.
    """

    method: str
    label: str
    value: float | None
    lower: float | None = None
    role: str = UPPER

    def __post_init__(self) -> None:
        if self.role not in (TIGHTEST, UPPER):
            raise InputError(f"role must be {TIGHTEST!r} or {UPPER!r}; got {self.role!r}")


@dataclass(frozen=True)
class StepsSeries:
    """One method's ε (upper bounds) at each of :attr:`StepsCurve.steps`; ``note`` says why it is missing."""

    method: str
    label: str
    epsilon: tuple[float, ...] | None = None
    note: str | None = None


# The fields that carried the two built-in methods before the registry drove every column (result.json
# still holds them, derived from the per-method records; older files are read through them).
_LEGACY = (("pld", "tight (PLD)"), ("rdp", "rdp"))


@dataclass(frozen=True)
class StepsCurve:
    """Accountant ε (upper bounds) against the number of steps, for the ε-against-steps figure.

    ``series`` has one entry per registered accounting method (its ε at each of ``steps``, or why
    not); ``epsilon_rdp``/``epsilon_tight`` and ``rdp_note``/``pld_note`` repeat the two built-in
    ones and are filled from it (a file without ``series`` is read through them).
    """

    steps: tuple[int, ...]
    epsilon_rdp: tuple[float, ...] | None = None
    epsilon_tight: tuple[float, ...] | None = None
    rdp_note: str | None = None
    pld_note: str | None = None
    series: tuple[StepsSeries, ...] = ()

    def __post_init__(self) -> None:
        legacy = {"pld": (self.epsilon_tight, self.pld_note), "rdp": (self.epsilon_rdp, self.rdp_note)}
        if not self.series:  # written before the series existed: the two built-in methods
            object.__setattr__(self, "series", tuple(
                StepsSeries(m, label, *legacy[m]) for m, label in _LEGACY if legacy[m] != (None, None)))
            return
        by = {x.method: x for x in self.series}
        for m, (eps, note) in legacy.items():
            x = by.get(m)
            derived = (None, None) if x is None else (x.epsilon, x.note)
            if (eps, note) == (None, None):
                object.__setattr__(self, "epsilon_tight" if m == "pld" else "epsilon_rdp", derived[0])
                object.__setattr__(self, f"{m}_note", derived[1])
            elif (eps, note) != derived:
                raise InputError(f"steps_curve: the {m} fields must repeat its series entry; got {(eps, note)} "
                                 f"and {derived}")


@dataclass(frozen=True)
class ConfidenceBoxes:
    """Empirical (FPR, FNR) points with simultaneous confidence boxes (multi-run design)."""

    thresholds: tuple[float | None, ...]
    fpr: tuple[float, ...]
    fnr: tuple[float, ...]
    fpr_lo: tuple[float, ...]
    fpr_hi: tuple[float, ...]
    fnr_lo: tuple[float, ...]
    fnr_hi: tuple[float, ...]
    n_in: int
    n_out: int
    confidence: float


@dataclass(frozen=True)
class Roc:
    """The full empirical ROC (every threshold); for figures only."""

    fpr: tuple[float, ...]
    tpr: tuple[float, ...]


@dataclass(frozen=True)
class ScoreHistogram:
    """Counts of the primary score per bin, for rows whose canary was in and was out.

    For the reconstruction game "in" is the true candidate's score and "out" every other
    candidate's. ``edges`` has one more entry than each count vector.
    """

    score: str
    edges: tuple[float, ...]
    in_counts: tuple[int, ...]
    out_counts: tuple[int, ...]
    in_label: str = "canary in"
    out_label: str = "canary out"


@dataclass(frozen=True)
class ViolationTest:
    """The sound test of one audit: did the run leak more than its accountant (or bound) allows?

    ``violated`` is a finding at ``confidence``: "bug or broken DP", never noise. The worst box
    (``threshold``, ``fpr_upper``, ``fnr_upper`` against ``curve_fnr``) is kept when there is one.
    """

    violated: bool
    against: str | None
    message: str
    confidence: float | None = None
    margin: float | None = None
    threshold: float | None = None
    fpr_upper: float | None = None
    fnr_upper: float | None = None
    curve_fnr: float | None = None
    p_value: float | None = None  # the exact threshold test's (the sequential design); None: the box test


@dataclass(frozen=True)
class Reconstruction:
    """Reconstruction success against the ReRo bound 1 − f(κ) (Hayes et al. 2023 Thm 2)."""

    trials: int
    successes: int
    success_rate_estimate: float
    success_lower: float
    kappa: float
    rero_bound_upper: float | None
    confidence: float
    violated: bool


@dataclass(frozen=True)
class ClaimCheck:
    """``dpaudit check``: does the claim (ε, δ) hold, by the accountant and by the audit?"""

    epsilon: float
    delta: float
    accountant_epsilon: float | None
    accountant_holds: bool
    audit_epsilon_lower: float | None
    audit_holds: bool
    holds: bool
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class OneRunStatistic:
    """One statistic of a one-run audit: which statistic certified what.

    Attributes:
        name: "steinke" (Steinke et al. 2023), "order" (Xiang et al. 2025, (ε, δ) form), "scores" (threshold
            boxes on the scores), "order_family" (Xiang et al.'s statistic under the composite T-fold
            subsampled-Gaussian null; only in dpaudit's own vouched audit), "fdp_gdp" (Mahloujifar et al. 2024,
            a GDP μ bound), "order_gdp" (Xiang et al.,
            μ-GDP form, a GDP μ bound) or "scores_gdp" (the boxes' μ-GDP form, a GDP μ bound).
        bound: "lower" (an ε lower bound) or "gdp_mu_lower" (a lower bound on the GDP μ, never an ε_lower).
        value: the bound (ε for "lower", μ for "gdp_mu_lower").
        epsilon: ε at δ: the bound itself, or the ε of the refuted GDP curve.
        confidence: the confidence this statistic holds at on its own (after any split of the significance).
        guesses, correct: the released guesses that attained it.
        in_epsilon_lower: whether it entered the audit's ε_lower (the max over the entered statistics).
        assumption: what its soundness assumes beyond the one-run game ("" for nothing).
        epsilon_certifiable: the median ε this statistic certifies for the optimal attack on the accountant's
            curve with the same canaries, δ and confidence (:func:`audit.tightness.certifiable_one_run_replicates`);
            None when not computed.
    """

    name: str
    bound: str
    value: float
    epsilon: float
    confidence: float
    in_epsilon_lower: bool
    guesses: int | None = None
    correct: int | None = None
    assumption: str = ""
    epsilon_certifiable: float | None = None


@dataclass(frozen=True)
class PremiseTest:
    """One conformance test of a premise of the DP-SGD proof (:mod:`audit.conformance`).

    ``rejected`` is a finding at level ``level`` (the premise is broken: a bug, never noise);
    ``skipped`` says why a test was not run (then ``p_value`` is None and it rejects nothing).
    """

    name: str
    premise: str
    null: str
    statistic_name: str
    statistic: float | None
    p_value: float | None
    level: float
    rejected: bool
    finding: str
    skipped: str | None = None


@dataclass(frozen=True)
class Conformance:
    """The premise tests of one white-box audit: they share ``significance``, each at ``level`` (Bonferroni)."""

    significance: float
    level: float
    tests: tuple[PremiseTest, ...]
    rejected: bool
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class SequentialLook:
    """One look of the sequential test (:mod:`audit.statistics.sequential`) that the audit reached."""

    n: int
    level: float
    margin: float | None  # max over the look's boxes of f(FPR_ub) − FNR_ub (> 0: a box below the curve)
    decision: str  # violation | futility | ceiling | continue
    p_value: float | None = None  # the exact threshold test's (≤ level: a violation); None in results before it


@dataclass(frozen=True)
class Sequential:
    """How a sequential audit spent its trials and why it stopped (docs/fault-detection.md, "Sequential").

    ``looks`` and ``levels`` were fixed before any trial (Σ levels = the audit's significance); every
    statistic of the audit is computed on the first ``trials`` trials at ``level`` and holds at the
    audit's confidence (all looks jointly). ``played``: trials in the trial file (a time budget can end
    between looks); ``stopped``: violation, futility, ceiling or time_budget.
    """

    max_trials: int
    looks: tuple[int, ...]
    levels: tuple[float, ...]
    evaluated: tuple[SequentialLook, ...]
    stopped: str
    trials: int
    played: int
    level: float
    reason: str
    time_budget: float | None = None


@dataclass(frozen=True)
class Runtime:
    """Seconds spent playing the game and in total (game + comparison)."""

    game: float
    total: float


@dataclass(frozen=True)
class NonFinite:
    """How ±inf scores of a score file were ranked (:func:`audit.score.map_nonfinite`): ``pos_inf``
    scores as ``pos_inf_as`` (above every finite one), ``neg_inf`` as ``neg_inf_as`` (below)."""

    pos_inf: int
    neg_inf: int
    pos_inf_as: float
    neg_inf_as: float
    note: str


@dataclass(frozen=True)
class AuditResult:
    """Everything one audit (one ``[[variant]]``) found.

    Lower bounds: ``epsilon_lower`` (membership games, at ``delta``, confidence 1 − significance).
    Upper bounds: ``epsilon_rdp`` and ``epsilon_tight`` (PLD), the accountants' ε for the claimed
    spec (``epsilon_tight_lower``: the PLD bracket's certified lower end; ``accountant_notes``:
    why a method is missing). ``ceiling`` is the largest ε_lower this design could certify
    whatever the scores; ``epsilon_certifiable`` (when filled) the largest it could certify against
    this spec's own trade-off curve; ``tightness_*`` and ``certifiable_ratio`` are ratios of the two
    kinds (``certifiable_curve``: the accountant curve the optimal attack was simulated on;
    ``certifiable_range``: the replicates' range). ``gdp_estimate`` and the Δ's are estimates.
    ``gdp_lower_one_run`` (one-run game) bounds the GDP μ, never ε: it is not an ε_lower.
    ``one_run_statistics`` (one-run game) lists every one-run statistic: which certified what.
    ``score`` is the outcome's primary score
    (:attr:`attacks.games.AttackOutcome.primary_score`).

    ``epsilons`` holds every registered accounting method that covers the spec (the others are named
    in ``accountant_notes``); ``epsilon_rdp``, ``epsilon_tight`` and ``epsilon_tight_lower`` repeat
    the built-in methods' entries and are filled from it (a file without ``epsilons`` is read
    through them). :attr:`epsilon_upper` is the tightest.
    """

    name: str
    design: str
    threat_model: str
    score: str
    canary: str
    fault: str
    spec: DPSGD
    significance: float
    delta: float
    seed: int
    trials: int
    violation: ViolationTest
    runtime_s: Runtime
    epsilons: tuple[MethodEpsilon, ...] = ()
    epsilon_rdp: float | None = None
    epsilon_tight: float | None = None
    epsilon_tight_lower: float | None = None
    accountant_notes: tuple[str, ...] = ()
    rows: int | None = None
    n_in: int | None = None
    n_out: int | None = None
    epsilon_lower: EpsilonLowerBound | None = None
    ceiling: float | None = None
    epsilon_certifiable: float | None = None
    certifiable_ratio: float | None = None
    certifiable_curve: str | None = None
    certifiable_range: tuple[float, ...] | None = None
    tightness_tight: float | None = None
    tightness_rdp: float | None = None
    gdp_estimate: GdpEstimate | None = None
    gdp_lower_one_run: GdpLowerBound | None = None
    one_run_statistics: tuple[OneRunStatistic, ...] = ()
    delta_theory_empirical_estimate: float | None = None
    delta_empirical_theory_estimate: float | None = None
    points: ConfidenceBoxes | None = None
    roc: Roc | None = None
    curves: dict[str, CurveSamples] = field(default_factory=dict)
    steps_curve: StepsCurve | None = None
    histogram: ScoreHistogram | None = None
    reconstruction: Reconstruction | None = None
    claim: ClaimCheck | None = None
    models_at_once: int | None = None  # models one chunk trained at once (1: a user trainer, one per trial)
    natural_records: int | None = None  # the natural records each trial's training set held (None: not recorded)
    canary_labels: tuple[int, ...] | None = None  # the projection canary's label(s) (None: not chosen or recorded)
    nonfinite: NonFinite | None = None  # dpaudit score: how ±inf scores were ranked
    conformance: Conformance | None = None  # the premise tests (white-box user trainer, dead_feature canary)
    sequential: Sequential | None = None  # the sequential design: looks, trials spent, why it stopped

    def __post_init__(self) -> None:
        check_name(self.name, "audit name")
        if not self.epsilons:  # written before the per-method records: the two built-in methods
            object.__setattr__(self, "epsilons", _legacy_epsilons(self.epsilon_tight, self.epsilon_tight_lower,
                                                                  self.epsilon_rdp))
            return
        if sum(e.role == TIGHTEST for e in self.epsilons) != 1:
            raise InputError(f"audit {self.name!r}: epsilons must name exactly one method with role {TIGHTEST!r}")
        by = {e.method: e for e in self.epsilons}
        pld, rdp = by.get("pld"), by.get("rdp")
        derived = {"epsilon_tight": None if pld is None else pld.value,
                   "epsilon_tight_lower": None if pld is None else pld.lower,
                   "epsilon_rdp": None if rdp is None else rdp.value}
        given = {k: getattr(self, k) for k in derived}
        if all(v is None for v in given.values()):
            for k, v in derived.items():
                object.__setattr__(self, k, v)
        elif given != derived:
            raise InputError(f"audit {self.name!r}: {sorted(given)} must repeat the pld and rdp entries of epsilons; "
                             f"got {given}, epsilons say {derived}")

    @property
    def epsilon_upper(self) -> MethodEpsilon | None:
        """The tightest accountant ε (role ``"tightest"``): the audit's upper bound, with the method it is by."""
        return next((e for e in self.epsilons if e.role == TIGHTEST), None)

    @property
    def spec_text(self) -> str:
        """The claimed spec in words (``accountants.describe``), never a Python repr."""
        return describe(self.spec)


def _legacy_epsilons(tight: float | None, tight_lower: float | None, rdp: float | None
                     ) -> tuple[MethodEpsilon, ...]:
    """The per-method records of a result written before them (its ``epsilon_tight``/``epsilon_rdp``)."""
    from .comparator import tightest_method

    values = {"pld": (tight, tight_lower), "rdp": (rdp, None)}
    present = {m: v for m, (v, _) in values.items() if v is not None}
    best = tightest_method(present)
    return tuple(MethodEpsilon(m, label, values[m][0], values[m][1], TIGHTEST if m == best else UPPER)
                 for m, label in _LEGACY if m in present)


# ------------------------------------------------------------------------------------------ the run


@dataclass(frozen=True)
class RunEpsilonLower:
    """The run's ε_lower: the max over its audits, holding jointly at ``confidence`` (union bound)."""

    value: float | None
    audit: str | None
    confidence: float
    note: str
    bound: str = "lower"


@dataclass(frozen=True)
class ClaimSummary:
    """The claim's verdict over every audit (``dpaudit check``)."""

    holds: bool
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class RunResult:
    """A finished run: what ``result.json`` holds and what the reports render."""

    created: str
    significance: float
    delta: float
    violation: bool
    epsilon_lower: RunEpsilonLower
    audits: tuple[AuditResult, ...]
    config: RunConfig
    claim: ClaimSummary | None = None
    format: str = RESULT_FORMAT

    def __post_init__(self) -> None:
        if self.format != RESULT_FORMAT:
            raise InputError(f"format must be {RESULT_FORMAT!r}; got {self.format!r}")
        names = [a.name for a in self.audits]
        if len(set(names)) != len(names):
            raise InputError(f"audit names must be distinct; got {names}")

    @property
    def verdict(self) -> str:
        """``"VIOLATION"``, ``"claim not supported"`` or ``"no violation"`` (the report's banner)."""
        if self.violation:
            return "VIOLATION"
        if self.claim is not None and not self.claim.holds:
            return "claim not supported"
        return "no violation"

    def to_json(self) -> JSONObject:
        """The JSON-ready object of ``result.json`` (non-finite floats become null)."""
        return to_dict(self)

    @classmethod
    def from_json(cls, obj: Any, *, where: str = "result.json") -> RunResult:
        """Read a ``result.json`` object; an older or unknown format is an ``InputError`` naming it."""
        if not isinstance(obj, dict):
            raise InputTypeError(f"{where} must hold a JSON object; got {type(obj).__name__}")
        fmt = obj.get("format")
        if fmt in _OLDER:
            raise InputError(f"{where} has format {fmt!r}, written by an older dpaudit; this dpaudit reads "
                             f"{RESULT_FORMAT!r}. Rebuild it from the trial files (nothing is retrained) with "
                             "`dpaudit run --resume --out RUN`")
        if fmt != RESULT_FORMAT:
            raise InputError(f"{where} has format {fmt!r}; this dpaudit reads {RESULT_FORMAT!r}")
        return from_dict(cls, obj, where=where)


# ------------------------------------------------------------------------------------------ JSON I/O


def _plain(x: Any) -> Any:
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None  # JSON has no ±inf/NaN: say nothing
    if isinstance(x, DPSGD):
        return x.to_dict()
    if isinstance(x, RunConfig):
        return _plain(x.to_json())
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        d = {f.name: _plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
        if isinstance(x, AuditResult):
            d["spec_text"] = x.spec_text  # for people reading the JSON; ignored on reading
        return d
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return [_plain(v) for v in x.tolist()]
    return x


def to_dict(obj: Any) -> JSONObject:
    """A model object (any dataclass here) as a JSON-ready dict; non-finite floats become None."""
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        raise InputTypeError(f"to_dict takes a model dataclass; got {type(obj).__name__}")
    return _plain(obj)


_DERIVED = {"spec_text"}  # written for readers, recomputed on reading


def _decode(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None:
            if type(None) in args:
                return None
            raise InputError(f"{where} must not be null")
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _decode(a, value, where)
            except (InputError, InputTypeError) as exc:
                errors.append(str(exc))
        raise InputError(errors[0] if len(errors) == 1 else f"{where}: {'; '.join(errors)}")
    if origin is tuple:
        if not isinstance(value, list):
            raise InputTypeError(f"{where} must be a list; got {type(value).__name__}")
        (item, _ellipsis) = typing.get_args(tp)
        return tuple(_decode(item, v, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise InputTypeError(f"{where} must be an object; got {type(value).__name__}")
        _k, item = typing.get_args(tp)
        return {str(k): _decode(item, v, f"{where}.{k}") for k, v in value.items()}
    if tp is DPSGD:
        spec = spec_from_dict(value, where=where)
        if not isinstance(spec, DPSGD):
            raise InputTypeError(f"{where} must describe one DPSGD; got {type(spec).__name__}")
        return spec
    if tp is RunConfig:
        return _run_config(value, where)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return from_dict(tp, value, where=where)
    if tp is float:
        if value is None:
            raise InputError(f"{where} must be a number; got null")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InputTypeError(f"{where} must be a number; got {value!r}")
        return float(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputTypeError(f"{where} must be an integer; got {value!r}")
        return value
    if tp in (str, bool):
        if not isinstance(value, tp):
            raise InputTypeError(f"{where} must be a {tp.__name__}; got {value!r}")
        return value
    raise InputTypeError(f"{where}: cannot read type {tp!r}")  # pragma: no cover - a model bug


def from_dict(cls: type, obj: Any, *, where: str = "result") -> Any:
    """Inverse of :func:`to_dict` for model class ``cls``; an unknown or missing key is an ``InputError`` naming it."""
    if not isinstance(obj, dict):
        raise InputTypeError(f"{where} must be an object; got {type(obj).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(obj) - set(fields) - _DERIVED)
    if unknown:
        raise InputError(f"{where} has unknown key {unknown[0]!r}; allowed: {sorted(fields)}")
    kwargs = {}
    for name, f in fields.items():
        if not f.init:
            continue
        if name not in obj:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise InputError(f"{where} is missing the key {name!r}")
            continue
        kwargs[name] = _decode(hints[name], obj[name], f"{where}.{name}")
    try:
        return cls(**kwargs)
    except (InputError, InputTypeError) as exc:
        raise InputError(f"{where}: {exc}") from None


def _run_config(obj: Any, where: str) -> RunConfig:
    """The :class:`RunConfig` of a ``result.json`` (:meth:`RunConfig.to_json`): each variant merged with the base."""
    if not isinstance(obj, dict):
        raise InputTypeError(f"{where} must be an object; got {type(obj).__name__}")
    unknown = sorted(set(obj) - {*SECTIONS, "variant"})
    if unknown:
        raise InputError(f"{where} has unknown key {unknown[0]!r}; allowed: {sorted([*SECTIONS, 'variant'])}")
    for s in SECTIONS:
        if s not in obj:
            raise InputError(f"{where} is missing the key {s!r}")
    base = RunConfig(**{s: from_dict(cls, obj[s], where=f"{where}.{s}") for s, cls in SECTIONS.items()})
    entries = obj.get("variant", [])
    if not isinstance(entries, list):
        raise InputTypeError(f"{where}.variant must be a list; got {type(entries).__name__}")
    variants = []
    for i, v in enumerate(entries):
        at = f"{where}.variant[{i}]"
        if not isinstance(v, dict):
            raise InputTypeError(f"{at} must be an object; got {type(v).__name__}")
        bad = sorted(set(v) - {"name", *VARIANT_SECTIONS})
        if bad:
            raise InputError(f"{at} has unknown key {bad[0]!r}; allowed: {sorted(['name', *VARIANT_SECTIONS])}")
        name = check_name(v.get("name"), f"{at}.name")
        sections: dict[str, Any] = {}
        for s in VARIANT_SECTIONS:  # the base with the keys this variant changes
            diff = v.get(s, {})
            if not isinstance(diff, dict):
                raise InputTypeError(f"{at}.{s} must be an object; got {type(diff).__name__}")
            sections[s] = from_dict(SECTIONS[s], {**to_dict(getattr(base, s)), **diff}, where=f"{at}.{s}")
        variants.append(VariantConfig(name, claim=base.claim, **sections))
    return dataclasses.replace(base, variants=tuple(variants), source=where)


def dumps(result: RunResult) -> str:
    """The text of ``result.json`` (sorted keys, no NaN)."""
    return json.dumps(result.to_json(), indent=1, sort_keys=True, allow_nan=False) + "\n"


def load_result(run: str | Path) -> RunResult:
    """The :class:`RunResult` in ``run/result.json`` (JSON only; never pickle)."""
    p = Path(run) / RESULT_FILE
    if not p.is_file():
        raise InputError(f"{str(p)!r} does not exist; is {str(run)!r} a finished run folder? (dpaudit run --resume "
                         "finishes an interrupted one)")
    try:
        obj = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{str(p)!r} is not valid JSON: {exc}") from None
    return RunResult.from_json(obj, where=str(p))
