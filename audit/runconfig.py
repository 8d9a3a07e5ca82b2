"""The typed configuration of a run: one frozen dataclass per TOML section, each field's constraint beside it.

:func:`audit.config.loads` parses TOML into these once; every later hop (``runs``, ``estimate``, the CLI,
the report, resume) reads them. A field is declared with :func:`setting`: its default, its constraint
(a small record: :class:`Choice`, :class:`Integer`, :class:`Real`, ...) and, for counts, the documented
limit that ``[audit] lift_limits = true`` lifts. :func:`check_section` is the one validator that reads
them; the checks between keys (a canary kind and a threat model, ...) are :mod:`audit.config`'s.

>>> t = check_section(TrainingConfig, {"noise_multiplier": 2, "sampling": "fixed-size"}, "training")
>>> t.noise_multiplier, t.sampling, t.steps
(2.0, 'fixed_wor', 10)
>>> check_section(AuditConfig, {"significance": 0.7}, "audit")
Traceback (most recent call last):
...
accountants.InputError: audit.significance must be a number in (0, 0.5); got 0.7
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from accountants import describe
from accountants.errors import InputError

from .jsontypes import JSONObject, JSONValue

__all__ = ["SECTIONS", "VARIANT_SECTIONS", "AttackConfig", "AuditConfig", "CanaryConfig", "Choice", "ClaimConfig",
           "ClaimEpsilon", "Constraint", "Flag", "Integer", "MaxTrials", "Neighbouring", "Real", "RunConfig",
           "SamplingKind", "Text", "TrainingConfig", "VariantConfig", "canonical", "check_section", "constraint",
           "limits", "parse_choice", "setting", "show"]


def canonical(value: str) -> str:
    """The one spelling rule of every enumerated value: case and surrounding space ignored, '-' = '_'."""
    return value.strip().lower().replace("-", "_")


def show(value: object) -> str:
    """A value for an error message, cut short (a fuzzed config may hold a megabyte of text)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def parse_choice(value: object, allowed: tuple[str, ...], *, key: str) -> str:
    """``value`` as the canonical member of ``allowed`` (any spelling :func:`canonical` maps to it)."""
    if isinstance(value, str) and value in allowed:
        return value
    if isinstance(value, str) and canonical(value) in allowed:
        return canonical(value)
    raise InputError(f"{key} must be one of {list(allowed)}; got {show(value)}")


# ------------------------------------------------------------------------------------------ constraints


class Constraint:
    """What one key accepts; :meth:`check` returns the value in its canonical form or raises naming ``key``."""

    def check(self, key: str, value: object) -> Any:  # pragma: no cover - every constraint overrides it
        raise NotImplementedError


@dataclass(frozen=True)
class Choice(Constraint):
    """One of ``allowed`` (a tuple, or a registry read when a config is checked: a new entry is valid)."""

    allowed: tuple[str, ...] | Callable[[], Iterable[str]]

    def values(self) -> tuple[str, ...]:
        return tuple(sorted(self.allowed() if callable(self.allowed) else self.allowed))

    def check(self, key: str, value: object) -> str:
        return parse_choice(value, self.values(), key=key)


@dataclass(frozen=True)
class SamplingKind(Constraint):
    """A sampling kind an audit trains, in any spelling :mod:`accountants.describe` accepts (its aliases too)."""

    kinds: tuple[str, ...]

    def check(self, key: str, value: object) -> str:
        if not isinstance(value, str):
            raise InputError(f"{key} must be one of {list(self.kinds)}; got {show(value)}")
        try:
            kind = describe.parse_sampling_kind(value[:80], key=key)
        except InputError:
            raise InputError(f"{key} must be one of {list(self.kinds)} ('-' and '_' are the same; aliases: "
                             f"fixed_size = without_replacement = fixed_wor, balls_in_bins = random_allocation); "
                             f"got {show(value)}") from None
        if kind not in self.kinds:
            raise InputError(f"{key} = {show(value)} is accounted (dpaudit account) but not trained by an audit; "
                             f"choose one of {list(self.kinds)}")
        return kind


@dataclass(frozen=True)
class Neighbouring(Constraint):
    """A neighbouring relation in any spelling of :data:`accountants.describe.NEIGHBOURING_NAMES`."""

    def check(self, key: str, value: object) -> str:
        if not isinstance(value, str):
            raise InputError(f"{key} must be one of {list(describe.NEIGHBOURING_NAMES)}; got {show(value)}")
        return describe.parse_neighbouring(value[:80], key=key).value


@dataclass(frozen=True)
class Integer(Constraint):
    """An integer ≥ ``low`` (≤ ``hard`` where given: a limit no flag lifts)."""

    low: int
    hard: int | None = None

    def check(self, key: str, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < self.low or \
                (self.hard is not None and value > self.hard):
            rng = f"an integer ≥ {self.low}" + (f" and ≤ {self.hard}" if self.hard is not None else "")
            raise InputError(f"{key} must be {rng}; got {show(value)}")
        return value


@dataclass(frozen=True)
class MaxTrials(Constraint):
    """0 (the fixed design) or the sequential design's ceiling, at least its first look."""

    first_look: int

    def check(self, key: str, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or (value != 0 and value < self.first_look):
            raise InputError(f"{key} must be 0 (the fixed design: audit.trials trials) or an integer ≥ "
                             f"{self.first_look} (the sequential design's ceiling; its first look is "
                             f"{self.first_look} trials); got {show(value)}")
        return value


def _interval(lo: float | None, hi: float | None, closed: str) -> str:
    left = "[" if closed in ("both", "left") else "("
    right = "]" if closed in ("both", "right") else ")"
    return f"{left}{'-inf' if lo is None else f'{lo:g}'}, {'inf' if hi is None else f'{hi:g}'}{right}"


@dataclass(frozen=True)
class Real(Constraint):
    """A finite number in the interval (``low``, ``high``); ``closed``: "open", "both", "left" or "right"."""

    low: float | None
    high: float | None = None
    closed: str = "open"

    def check(self, key: str, value: object) -> float:
        where = _interval(self.low, self.high, self.closed)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise InputError(f"{key} must be a finite number in {where}; got {show(value)}")
        v = float(value)
        ok = (self.low is None or (v > self.low if self.closed in ("open", "right") else v >= self.low)) and \
             (self.high is None or (v < self.high if self.closed in ("open", "left") else v <= self.high))
        if not ok:
            raise InputError(f"{key} must be a number in {where}; got {show(value)}")
        return v


@dataclass(frozen=True)
class Flag(Constraint):
    """true or false."""

    def check(self, key: str, value: object) -> bool:
        if not isinstance(value, bool):
            raise InputError(f"{key} must be true or false; got {show(value)}")
        return value


@dataclass(frozen=True)
class Text(Constraint):
    """Any string."""

    def check(self, key: str, value: object) -> str:
        if not isinstance(value, str):
            raise InputError(f"{key} must be a string; got {value!r}")
        return value


@dataclass(frozen=True)
class ClaimEpsilon(Constraint):
    """A number ≥ 0, or "accountant" (the accountants' own ε at the claim's δ)."""

    def check(self, key: str, value: object) -> float | str:
        if value == "accountant":
            return "accountant"
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise InputError(f"{key} must be a number ≥ 0 or \"accountant\" (the accountants' own epsilon at "
                             f"the claim's delta); got {show(value)}")
        return float(value)


def setting(default: Any, rule: Constraint, *, limit: int | None = None, doc: str = "") -> Any:
    """A configuration field: its default, its :class:`Constraint` and, for a count, its documented ``limit``."""
    return field(default=default, metadata={"constraint": rule, "limit": limit, "doc": doc})


def constraint(f: dataclasses.Field) -> Constraint:
    """The constraint declared beside a configuration field."""
    return f.metadata["constraint"]


# ------------------------------------------------------------------------------------------ registries (lazy)


def _faults() -> list[str]:
    from . import registry

    return registry.fault_names()


def _canaries() -> list[str]:
    from . import registry

    return list(registry.canaries())


def _scores() -> list[str]:
    from . import registry

    return sorted({*registry.score_names(), *registry.user_trainer_scores()})


def _threats() -> list[str]:
    from . import registry

    return list(registry.THREATS)


def _strategies() -> list[str]:
    from . import registry

    return list(registry.strategies())


# The sampling kinds an audit trains (accountants.describe spells them; its aliases are accepted).
TRAINED_SAMPLING = ("fixed_wor", "poisson", "random_allocation", "shuffle", "truncated_poisson")
SEQUENTIAL_FIRST_LOOK = 250  # audit.statistics.sequential.FIRST_LOOK (not imported: the config stays light)
GAMES = ("multi_run", "one_run", "reconstruction")

# ------------------------------------------------------------------------------------------ sections


@dataclass(frozen=True)
class TrainingConfig:
    """``[training]``: what is trained (the claimed spec is built from these keys, :func:`audit.runs.spec_of`)."""

    dataset: str = setting("digits", Choice(("digits", "breast_cancer", "gaussian_classes")))
    n_records: int = setting(100, Integer(2), limit=1_000_000)
    model: str = setting("logistic_regression", Choice(("logistic_regression", "mlp", "cnn")))
    hidden: int = setting(32, Integer(1), limit=4096, doc="mlp hidden width; cnn channels")
    noise_multiplier: float = setting(1.0, Real(0.0))
    sampling: str = setting("poisson", SamplingKind(TRAINED_SAMPLING))
    # ≥ 1e-9: the trainer divides by the expected batch size q·N, which underflows for subnormal q
    sample_rate: float = setting(0.5, Real(1e-9, 1.0, "both"))
    batch_size: int = setting(50, Integer(1), limit=1_000_000)
    steps_per_epoch: int = setting(10, Integer(1), limit=100_000)
    k: int = setting(1, Integer(1), doc="random_allocation: steps per epoch a record joins, ≤ steps_per_epoch")
    max_batch_size: int = setting(0, Integer(0), doc="truncated Poisson's largest batch; 0: unset (other kinds)")
    steps: int = setting(10, Integer(1), limit=100_000)
    clip_norm: float = setting(1.0, Real(0.0))
    learning_rate: float = setting(0.5, Real(0.0))
    neighbouring: str = setting("add_remove", Neighbouring())
    fault: str = setting("none", Choice(_faults))
    fault_factor: float = setting(2.0, Real(1.0))
    trainer: str = setting("", Text(), doc='a user trainer "module:function" (docs/own-training.md); the keys '
                                          "above stay the claim")
    trainer_dir: str = setting("", Text(), doc="where its module is looked up first (the config's folder)")


@dataclass(frozen=True)
class CanaryConfig:
    """``[canary]``."""

    kind: str = setting("dirac", Choice(_canaries))
    norm: float = setting(1.0, Real(0.0), doc="gradient canaries: norm in units of clip_norm")
    count: int = setting(1, Integer(1), limit=10_000, doc="canaries per run (one_run game: m)")


@dataclass(frozen=True)
class AttackConfig:
    """``[attack]``."""

    threat_model: str = setting("white_box", Choice(_threats))
    score: str = setting("llr", Choice(_scores))
    n_shadow: int = setting(16, Integer(2), limit=1024, doc="lira only")


@dataclass(frozen=True)
class AuditConfig:
    """``[audit]``."""

    game: str = setting("multi_run", Choice(GAMES))
    trials: int = setting(2000, Integer(1), limit=1_000_000, doc="≥ 2 but for audit.game 'one_run'")
    significance: float = setting(0.05, Real(0.0, 0.5))
    delta: float = setting(1e-5, Real(0.0, 1.0))
    seed: int = setting(0, Integer(0, hard=2**63 - 1), doc="must fit in 63 bits: a hard limit")
    threshold: str = setting("bonferroni", Choice(_strategies))
    chunk_size: int = setting(500, Integer(1), limit=100_000)
    lift_limits: bool = setting(False, Flag(), doc="true: allow counts above the documented limits")
    trial_timeout: float = setting(0.0, Real(0.0, None, "left"), doc="seconds per trial of a user trainer; 0: none")
    max_trials: int = setting(0, MaxTrials(SEQUENTIAL_FIRST_LOOK), limit=1_000_000,
                              doc="the sequential design's ceiling (audit/statistics/sequential.py); 0: fixed")
    time_budget: float = setting(0.0, Real(0.0, None, "left"), doc="seconds the sequential design may play; 0: none")
    futility_z: float = setting(0.0, Real(-2.0, 2.0, "both"),
                                doc="the sequential design's futility z (audit/statistics/sequential.py): larger "
                                    "passes sooner, with less power; no effect on the false-alarm bound")


@dataclass(frozen=True)
class ClaimConfig:
    """``[claim]``: the (ε, δ) that ``dpaudit check`` decides."""

    epsilon: float | str = setting("accountant", ClaimEpsilon())
    delta: float = setting(1e-5, Real(0.0, 1.0))


SECTIONS: dict[str, type] = {"training": TrainingConfig, "canary": CanaryConfig, "attack": AttackConfig,
                             "audit": AuditConfig, "claim": ClaimConfig}
VARIANT_SECTIONS = ("training", "canary", "attack", "audit")  # what a [[variant]] may change ([claim] is global)

S = TypeVar("S")
Scalar = bool | int | float | str  # what a configuration key holds


def check_section(cls: type[S], table: Mapping[str, object], section: str, where: str = "") -> S:
    """The one validator: every key of ``table`` checked by the constraint declared beside its field; defaults
    fill the rest; an unknown key is an error naming the allowed ones."""
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    names = sorted(f.name for f in fields)
    unknown = sorted(set(table) - set(names))
    if unknown:
        raise InputError(f"{where}unknown key {section}.{show(unknown[0])[1:-1]}; allowed keys: {names}")
    return cls(**{f.name: constraint(f).check(f"{where}{section}.{f.name}", table.get(f.name, f.default))
                  for f in fields})


def limits() -> dict[str, int]:
    """The documented limits on counts, ``"section.key" -> limit`` (``[audit] lift_limits = true`` lifts them)."""
    return {f"{s}.{f.name}": f.metadata["limit"] for s, cls in SECTIONS.items() for f in dataclasses.fields(cls)
            if f.metadata.get("limit") is not None}


# ------------------------------------------------------------------------------------------ a run's audits


@dataclass(frozen=True)
class VariantConfig:
    """One audit of a run: its name and the five sections, the base merged with its ``[[variant]]`` once."""

    name: str
    training: TrainingConfig = field(default_factory=TrainingConfig)
    canary: CanaryConfig = field(default_factory=CanaryConfig)
    attack: AttackConfig = field(default_factory=AttackConfig)
    audit: AuditConfig = field(default_factory=AuditConfig)
    claim: ClaimConfig = field(default_factory=ClaimConfig)


def _section_json(x: object) -> JSONObject:
    return {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}  # type: ignore[arg-type]


@dataclass(frozen=True)
class RunConfig:
    """The fully resolved configuration of a run (what ``config.toml`` holds), seeds included.

    The base sections, and ``variants``: each ``[[variant]]`` already merged with the base (empty: one audit,
    ``main``, of the base; :meth:`audits`). ``source`` says where it came from (a file, or ``<default>``);
    it does not take part in equality, so a resume compares the configurations only.
    """

    training: TrainingConfig = field(default_factory=TrainingConfig)
    canary: CanaryConfig = field(default_factory=CanaryConfig)
    attack: AttackConfig = field(default_factory=AttackConfig)
    audit: AuditConfig = field(default_factory=AuditConfig)
    claim: ClaimConfig = field(default_factory=ClaimConfig)
    variants: tuple[VariantConfig, ...] = ()
    source: str = field(default="", compare=False)

    @property
    def base(self) -> VariantConfig:
        """The base sections as one audit named ``main``."""
        return VariantConfig("main", self.training, self.canary, self.attack, self.audit, self.claim)

    def audits(self) -> tuple[VariantConfig, ...]:
        """The audits of the run: the ``[[variant]]``s, or ``main`` (the base) when there is none."""
        return self.variants or (self.base,)

    def overrides(self, v: VariantConfig) -> dict[str, dict[str, Scalar]]:
        """The keys ``v`` changes from the base, by section (what its ``[[variant]]`` table writes)."""
        out: dict[str, dict[str, Scalar]] = {}
        for s in VARIANT_SECTIONS:
            mine, base = getattr(v, s), getattr(self, s)
            diff = {f.name: getattr(mine, f.name) for f in dataclasses.fields(mine)
                    if getattr(mine, f.name) != getattr(base, f.name)}
            if diff:
                out[s] = diff
        return out

    def to_json(self) -> JSONObject:
        """The JSON form (``result.json``'s ``config``): every key of the base, each variant as its overrides."""
        out: JSONObject = {s: _section_json(getattr(self, s)) for s in SECTIONS}
        variants: list[JSONValue] = []
        for v in self.variants:
            entry: JSONObject = {"name": v.name}
            for s, d in self.overrides(v).items():
                table: JSONObject = {k: val for k, val in d.items()}
                entry[s] = table
            variants.append(entry)
        out["variant"] = variants
        return out
