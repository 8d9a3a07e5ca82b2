"""Sampling schemes and neighbouring relations (frozen, validated descriptions).

These are read both by the accountant (which theorem applies) and by the trainer in
``attacks`` (which batches are drawn), so what is trained and what is accounted cannot drift.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar

from . import validate as check
from .errors import InputError, InputTypeError
from .serialise import Description, Kinds

__all__ = ["FixedSize", "Neighbouring", "Poisson", "RandomAllocation", "Sampling", "Shuffle", "TruncatedPoisson"]


class Neighbouring(enum.Enum):
    """Neighbouring relation between datasets.

    ADD_REMOVE: D' = D ∪ {x} or D \\ {x}. Under Poisson sampling a clipped sum moves by ≤ C.
    REPLACE_ONE: D' replaces one record of D. A clipped sum moves by ≤ 2C.
    """

    ADD_REMOVE = "add_remove"
    REPLACE_ONE = "replace_one"

    @classmethod
    def parse(cls, value: str | Neighbouring, *, key: str = "neighbouring") -> Neighbouring:
        """An enum member, or its value in any case with ``-`` for ``_``; ``InputError`` names ``key``."""
        if isinstance(value, Neighbouring):
            return value
        if not isinstance(value, str):
            raise InputTypeError(f"expected a name (string); got {type(value).__name__} {value!r}")
        name = value.strip().lower().replace("-", "_")
        for member in cls:
            if member.value == name:
                return member
        raise InputError(f"{key} must be one of {[m.value for m in cls]}; got {value!r}")

    @property
    def label(self) -> str:
        """The spelling of messages, reports and the CLI flag (``add-remove``, ``replace-one``).

        >>> Neighbouring.REPLACE_ONE.label
        'replace-one'
        """
        return self.value.replace("_", "-")


@dataclass(frozen=True, slots=True)
class Poisson(Description):
    """Poisson subsampling: each record is included independently with probability ``rate``.

    Attributes:
        rate: inclusion probability q in (0, 1].
    """

    KINDS: ClassVar[Kinds] = {"poisson": {}}
    ROLE = "sampling"

    rate: float

    def __post_init__(self) -> None:
        check.in_range(0.0, 1.0, closed="right", rate=self.rate)

    @property
    def expected_batch_size_fraction(self) -> float:
        """Expected batch size divided by the dataset size (= q)."""
        return float(self.rate)


@dataclass(frozen=True, slots=True)
class FixedSize(Description):
    """Fixed-size batches of exactly ``batch_size`` records drawn fresh every step.

    Attributes:
        batch_size: b, the number of records (or draws) per step, 1 ≤ b ≤ n (when
            ``replace`` is False).
        dataset_size: n.
        replace: False: a uniform b-subset (without replacement) every step.
            True: b i.i.d. uniform indices (with replacement).

    Note: a DataLoader that shuffles once per epoch and iterates is *not* this sampler.
    """

    KINDS: ClassVar[Kinds] = {"fixed_wor": {"replace": False}, "fixed_wr": {"replace": True}}
    ALIASES: ClassVar[dict[str, str]] = {
        "fixed_size": "fixed_wor", "fixed_size_wor": "fixed_wor", "fixed_size_wr": "fixed_wr",
        "without_replacement": "fixed_wor", "with_replacement": "fixed_wr",
    }
    ROLE = "sampling"

    batch_size: int
    dataset_size: int
    replace: bool = False

    def __post_init__(self) -> None:
        check.integer(1, None, batch_size=self.batch_size, dataset_size=self.dataset_size)
        if not isinstance(self.replace, bool):
            raise InputTypeError(f"replace must be a bool; got {type(self.replace).__name__}")
        if not self.replace and self.batch_size > self.dataset_size:
            raise InputError(
                f"batch_size must be in [1, dataset_size={self.dataset_size}] without replacement; "
                f"got {self.batch_size}"
            )

    @property
    def rate(self) -> float:
        """b / n, the expected fraction of the dataset per step."""
        return self.batch_size / self.dataset_size


@dataclass(frozen=True, slots=True)
class Shuffle(Description):
    """Shuffle once per epoch, then iterate: what a shuffling DataLoader does.

    Every epoch draws a uniformly random permutation of the n records and cuts it into
    ⌊n/b⌋ batches of exactly b (the n mod b records left over are dropped for that epoch), so
    each record is used at most once per epoch. Accounted by :mod:`accountants.shuffle`: a sound
    upper bound (epochs compose without amplification) and a certified lower bound (Chua et al.,
    ICML 2024 and NeurIPS 2024), never as Poisson sampling.

    Attributes:
        batch_size: b, 1 ≤ b ≤ n.
        dataset_size: n.
    """

    KINDS: ClassVar[Kinds] = {"shuffle": {}}
    ALIASES: ClassVar[dict[str, str]] = {"shuffled": "shuffle"}
    ROLE = "sampling"

    batch_size: int
    dataset_size: int

    def __post_init__(self) -> None:
        check.integer(1, None, batch_size=self.batch_size, dataset_size=self.dataset_size)
        if self.batch_size > self.dataset_size:
            raise InputError(f"batch_size must be in [1, dataset_size={self.dataset_size}]; got {self.batch_size}")

    @property
    def rate(self) -> float:
        """b / n, the fraction of the dataset per step (the q a Poisson analysis would quote)."""
        return self.batch_size / self.dataset_size

    @property
    def steps_per_epoch(self) -> int:
        """⌊n/b⌋ batches per epoch."""
        return self.dataset_size // self.batch_size


@dataclass(frozen=True, slots=True)
class RandomAllocation(Description):
    """Random allocation: every epoch assigns each record to ``k`` of its ``steps_per_epoch`` steps.

    The k steps are a uniformly random k-subset of the t steps of the epoch, drawn independently
    for every record (k = 1 is *balls-in-bins*: each record lands in one uniformly random batch,
    so batch sizes are Binomial(n, 1/t) and every record is used exactly once per epoch). Accounted
    by :mod:`accountants.rdp.random_allocation` (Feldman & Shenfeld 2025, arXiv 2502.08202; Dong,
    Chen & Özgür 2025, arXiv 2503.03043) and by :mod:`accountants.pld.random_allocation` (``method="pld"``);
    k > 1 through a reduction to k balls-in-bins blocks of ⌊t/k⌋ or ⌈t/k⌉ steps (the RDP module's doc),
    never as Poisson sampling.

    Attributes:
        k: steps per epoch in which a record takes part, 1 ≤ k ≤ steps_per_epoch.
        steps_per_epoch: t ≥ 1.
    """

    KINDS: ClassVar[Kinds] = {"random_allocation": {}}
    ALIASES: ClassVar[dict[str, str]] = {"balls_in_bins": "random_allocation"}
    ROLE = "sampling"

    k: int
    steps_per_epoch: int

    def __post_init__(self) -> None:
        check.integer(1, None, k=self.k, steps_per_epoch=self.steps_per_epoch)
        if self.k > self.steps_per_epoch:
            raise InputError(f"k must be in [1, steps_per_epoch={self.steps_per_epoch}]; got {self.k}")

    @property
    def rate(self) -> float:
        """k / t, the fraction of the epoch's steps a record takes part in (the q of a Poisson analogue)."""
        return self.k / self.steps_per_epoch


@dataclass(frozen=True, slots=True)
class TruncatedPoisson(Description):
    """Truncated Poisson: a Poisson batch of rate q, cut to at most ``max_batch_size`` records.

    Every record is included independently with probability ``rate``; when more than B = ``max_batch_size``
    records are drawn, a uniformly random B of them are kept (the truncated batch of dp_accounting's
    ``TruncatedSubsampledGaussianDpEvent``; Ganesh 2025, arXiv 2508.15089). Unlike Poisson sampling the
    privacy depends on the dataset size n: the chance that a record is cut depends on how many others are
    drawn. Accounted in PLD (and RDP, add/remove; docs/dominating-pairs.md §4c): the bound covers datasets of
    sizes (n, n − 1) and (n + 1, n), i.e. a record removed from or added to a dataset of n records.

    Attributes:
        rate: inclusion probability q in (0, 1].
        max_batch_size: B ≥ 1, the largest batch kept.
        dataset_size: n ≥ 1, the training set's size.
    """

    KINDS: ClassVar[Kinds] = {"truncated_poisson": {}}
    ALIASES: ClassVar[dict[str, str]] = {"truncated": "truncated_poisson",
                                         "truncated_poisson_sampling": "truncated_poisson"}
    ROLE = "sampling"

    rate: float
    max_batch_size: int
    dataset_size: int

    def __post_init__(self) -> None:
        check.in_range(0.0, 1.0, closed="right", rate=self.rate)
        check.integer(1, None, max_batch_size=self.max_batch_size, dataset_size=self.dataset_size)


Sampling = Poisson | FixedSize | Shuffle | RandomAllocation | TruncatedPoisson
