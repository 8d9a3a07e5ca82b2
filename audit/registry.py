"""What an audit configuration can name, registered once: scores, canaries, faults, threshold strategies.

Each entry has its name, what it needs (threat model, canary kind) and how it runs. The TOML
config's allowed values (:mod:`audit.config`), the consistency checks between keys, the run's
builder (:func:`audit.runs.build`) and ``dpaudit run --help`` all read these tables, so adding an
entry is one registered definition (plus its test) and nothing else:

- a score: :func:`attacks.membership.register_score` (threat model and canary kind it needs);
- a fault: :func:`attacks.faults.register_fault` (the trainer hooks it breaks);
- a canary kind: :func:`register_canary` here (gradient or input, and its builder);
- a threshold strategy: :func:`register_strategy` here (its builder from the audit seed).

>>> sorted(canaries())
['blank', 'dead_feature', 'dirac', 'dirac_slots', 'mean_image', 'mislabelled', 'out_of_distribution']
>>> score_names("black_box")
['confidence', 'lira', 'loss']
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from accountants.errors import InputError
from attacks import canaries as canaries_mod
from attacks import conformance_record
from attacks import faults as faults_mod
from attacks import membership as mia
from attacks.threat import BlackBox, HiddenState, Threat, WhiteBox

from . import statistics

__all__ = [
    "CanaryInfo",
    "StrategyInfo",
    "canaries",
    "choices_help",
    "fault_names",
    "register_canary",
    "register_strategy",
    "score_names",
    "strategies",
    "threat_of",
    "user_trainer_scores",
]

THREATS: dict[str, Threat] = {
    "white_box": WhiteBox(), "white_box_crafted_dataset": WhiteBox(crafted_dataset=True),
    "hidden_state": HiddenState(), "black_box": BlackBox(),
}


def threat_of(name: str) -> WhiteBox | HiddenState | BlackBox:
    """The threat model called ``name`` (a key of :data:`THREATS`)."""
    try:
        return THREATS[name]
    except KeyError:
        raise InputError(f"threat model must be one of {sorted(THREATS)}; got {name!r}") from None


@dataclass(frozen=True)
class CanaryInfo:
    """A canary kind: ``kind`` is "gradient" (white box) or "input" (black box); ``build`` makes m canaries.

    ``build(model, params0, data, m, norm, generator)``: ``norm`` is the gradient canaries' norm
    (clip norm units already applied); input canaries ignore it.
    """

    name: str
    kind: str
    build: Callable[..., Any]
    doc: str


@dataclass(frozen=True)
class StrategyInfo:
    """A threshold strategy (:mod:`audit.statistics`), built from the audit's seed."""

    name: str
    build: Callable[[int], statistics.ThresholdStrategy]
    doc: str


_CANARIES: dict[str, CanaryInfo] = {}
_STRATEGIES: dict[str, StrategyInfo] = {}


def register_canary(name: str, kind: str, build: Callable[..., Any], doc: str) -> None:
    """Register a canary kind once (``kind``: "gradient" or "input")."""
    if name in _CANARIES:
        raise InputError(f"canary kind {name!r} is already registered")
    if kind not in ("gradient", "input"):
        raise InputError(f"canary kind must be 'gradient' or 'input'; got {kind!r}")
    _CANARIES[name] = CanaryInfo(name, kind, build, doc)


def register_strategy(name: str, build: Callable[[int], statistics.ThresholdStrategy], doc: str) -> None:
    """Register a threshold strategy once."""
    if name in _STRATEGIES:
        raise InputError(f"threshold strategy {name!r} is already registered")
    _STRATEGIES[name] = StrategyInfo(name, build, doc)


def canaries() -> dict[str, CanaryInfo]:
    """The registered canary kinds."""
    return dict(_CANARIES)


def strategies() -> dict[str, StrategyInfo]:
    """The registered threshold strategies."""
    return dict(_STRATEGIES)


def score_names(threat: str | None = None) -> list[str]:
    """Registered score names (sorted), optionally only those a ``threat`` view allows (white or black box)."""
    return sorted(n for n, info in mia.SCORE_INFO.items()
                  if threat is None or type(info.threat) is type(threat_of(threat)))


def user_trainer_scores(threat: str | None = None) -> tuple[str, ...]:
    """The scores a user trainer's audit computes, in the black box, the white box or either (None): read from
    :mod:`attacks.plugin` (``SCORES``, ``WHITE_SCORES``), their one definition."""
    from attacks import plugin

    if threat == "black_box":
        return plugin.SCORES
    if threat == "white_box":
        return plugin.WHITE_SCORES
    return (*plugin.SCORES, *plugin.WHITE_SCORES)


def fault_names() -> list[str]:
    """``none`` and the registered faults."""
    return ["none", *faults_mod.fault_names()]


def _dirac(model, params0, data, m, norm, generator):
    dim = sum(v.numel() for v in params0.values())
    if m > dim:  # each Dirac canary needs its own coordinate (two on one coordinate would interact)
        raise InputError(f"canary.count = {m} Dirac canaries need {m} distinct coordinates; the model has {dim} "
                         f"parameters: choose canary.count ≤ {dim} (or a larger training.model)")
    return canaries_mod.dirac(canaries_mod.quiet_coordinates(model, params0, data, m), dim=dim, norm=norm)


register_canary("dirac", "gradient", _dirac, "a gradient on one quiet coordinate (white box, Nasr et al. 2023)")
register_canary("dirac_slots", "gradient", lambda model, p0, d, m, norm, g: canaries_mod.dirac_slots(model, norm=norm),
                "a gradient on its own slot, one of m parameters appended to dpaudit's model that the forward pass "
                "never reads (white box; collides with nothing, so the canaries do not interact: docs/worst-case.md)")
register_canary("mislabelled", "input", lambda model, p0, d, m, norm, g: canaries_mod.mislabelled(d, m, generator=g),
                "a natural record with a wrong label")
register_canary("blank", "input", lambda model, p0, d, m, norm, g: canaries_mod.blank(d, m, generator=g),
                "an all-zero input with a random label")
register_canary("mean_image", "input", lambda model, p0, d, m, norm, g: canaries_mod.mean_image(d, m, generator=g),
                "the data's mean record (x = 0 after standardisation), a random label: reads the bias")
register_canary("dead_feature", "input",
                lambda model, p0, d, m, norm, g: conformance_record.dead_feature(d, m, value=max(10.0, 10.0 * norm),
                                                                                 generator=g),
                "the mean record with a large value on a feature that is 0 in all data: the conformance tests' "
                "canary (white box: audit/conformance.py)")
register_canary("out_of_distribution", "input",
                lambda model, p0, d, m, norm, g: canaries_mod.out_of_distribution(d, m, generator=g),
                "an input far outside the data")

register_strategy("bonferroni", lambda seed: statistics.Bonferroni(),
                  "thresholds on fixed count grids chosen before any score is seen (default)")
register_strategy("split", lambda seed: statistics.Split(0.5, seed), "choose on one half, certify on the other")
register_strategy("multi_split", lambda seed: statistics.MultiSplit(11, 0.5, seed),
                  "11 random splits, combined")


def choices_help() -> str:
    """The registered choices, for ``dpaudit run --help`` and ``dpaudit check --help``."""
    lines = ["configuration choices (from the registries):"]
    for threat in THREATS:
        lines.append(f"  attack.score ({threat}): " + ", ".join(score_names(threat)))
    lines.append("  canary.kind: " + ", ".join(f"{n} ({c.kind})" for n, c in sorted(_CANARIES.items())))
    lines.append("  training.fault: " + ", ".join(fault_names()))
    lines.append("  audit.threshold: " + ", ".join(sorted(_STRATEGIES)))
    return "\n".join(lines)
