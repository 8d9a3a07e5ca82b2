"""Threshold strategies of the multi-run design: how choosing the threshold from the scores is paid for."""

from __future__ import annotations

import math
from dataclasses import dataclass

from accountants.errors import InputError, InputTypeError

from ._checks import _ratio

MAX_SPLITS = 10_000
"""Cap on :class:`MultiSplit`'s k (each split costs a full bound)."""


def _frac_seed(frac: float, seed: int) -> None:
    if isinstance(frac, bool) or not isinstance(frac, (int, float)):
        raise InputTypeError(f"frac must be a number; got {type(frac).__name__}")
    if not 0.0 < frac < 1.0:
        raise InputError(f"frac must be in (0, 1); got {frac!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise InputError(f"seed must be an integer ≥ 0; got {seed!r}")


@dataclass(frozen=True, slots=True)
class Bonferroni:
    """Union bound over H candidate thresholds on geometric count grids (ratio r; see :func:`_grid`).

    H = #levels(n_out) + #levels(n_in) ≈ 2 log_r(n) + 2 is fixed by the design, not by the scores.
    """

    ratio: float = 2.0

    def __post_init__(self) -> None:
        _ratio(self.ratio)  # ≥ 1.01: ratio = 1 + 1e-12 used to loop for ~log(n)·1e12 steps


@dataclass(frozen=True, slots=True)
class Explicit:
    """A threshold fixed before the scores were seen: no correction."""

    threshold: float

    def __post_init__(self) -> None:
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, (int, float)):
            raise InputTypeError(f"threshold must be a number; got {type(self.threshold).__name__}")
        if math.isnan(self.threshold):
            raise InputError("threshold must not be NaN")


@dataclass(frozen=True, slots=True)
class Split:
    """Choose the threshold on a fraction ``frac`` of the scores, bound on the rest (seeded)."""

    frac: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        _frac_seed(self.frac, self.seed)


@dataclass(frozen=True, slots=True)
class MultiSplit:
    """k seeded splits, each bounded at level α/2; the lower median holds at level α."""

    k: int = 11
    frac: float = 0.5
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or not 1 <= self.k <= MAX_SPLITS:
            raise InputError(f"k must be an integer in [1, {MAX_SPLITS}] (MAX_SPLITS); got {self.k!r}")
        _frac_seed(self.frac, self.seed)


ThresholdStrategy = Bonferroni | Explicit | Split | MultiSplit
STRATEGIES = {"bonferroni": Bonferroni, "explicit": Explicit, "split": Split, "multi_split": MultiSplit}


def strategy_name(strategy: ThresholdStrategy) -> str:
    """A stable description, e.g. ``"split(frac=0.5, seed=0)"``."""
    match strategy:
        case Bonferroni(ratio=r):
            return "bonferroni" if r == 2.0 else f"bonferroni(ratio={r:g})"
        case Explicit(threshold=t):
            return f"explicit({t:g})"
        case Split(frac=f, seed=s):
            return f"split(frac={f:g}, seed={s})"
        case MultiSplit(k=k, frac=f, seed=s):
            return f"multi_split(k={k}, frac={f:g}, seed={s})"
    raise InputTypeError(f"strategy must be Bonferroni(), Explicit(t), Split(...) or MultiSplit(...); got {strategy!r}")
