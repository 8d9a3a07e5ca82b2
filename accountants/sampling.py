"""Sampling schemes and neighbouring relations (frozen, validated descriptions).

These are read both by the accountant (which theorem applies) and by the trainer in
``attacks`` (which batches are drawn), so what is trained and what is accounted cannot drift.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from . import _validate as check

__all__ = ["FixedSize", "Neighbouring", "Poisson", "Sampling"]


class Neighbouring(enum.Enum):
    """Neighbouring relation between datasets.

    ADD_REMOVE: D' = D ∪ {x} or D \\ {x}. Under Poisson sampling a clipped sum moves by ≤ C.
    REPLACE_ONE: D' replaces one record of D. A clipped sum moves by ≤ 2C.
    """

    ADD_REMOVE = "add_remove"
    REPLACE_ONE = "replace_one"

    @classmethod
    def parse(cls, value: str | Neighbouring) -> Neighbouring:
        """Accept an enum member or one of "add-remove", "add_remove", "replace-one", "replace_one"."""
        if isinstance(value, cls):
            return value
        key = str(value).strip().lower().replace("-", "_")
        for member in cls:
            if member.value == key:
                return member
        raise ValueError(f"neighbouring must be one of 'add-remove', 'replace-one'; got {value!r}")


@dataclass(frozen=True, slots=True)
class Poisson:
    """Poisson subsampling: each record is included independently with probability ``rate``.

    Attributes:
        rate: inclusion probability q in (0, 1].
    """

    rate: float

    def __post_init__(self) -> None:
        check.in_range(0.0, 1.0, closed="right", rate=self.rate)

    @property
    def expected_batch_size_fraction(self) -> float:
        """Expected batch size divided by the dataset size (= q)."""
        return float(self.rate)


@dataclass(frozen=True, slots=True)
class FixedSize:
    """Fixed-size batches of exactly ``batch_size`` records drawn fresh every step.

    Attributes:
        batch_size: b, the number of records (or draws) per step, 1 ≤ b ≤ n (when
            ``replace`` is False).
        dataset_size: n.
        replace: False: a uniform b-subset (without replacement) every step.
            True: b i.i.d. uniform indices (with replacement).

    Note: a DataLoader that shuffles once per epoch and iterates is *not* this sampler.
    """

    batch_size: int
    dataset_size: int
    replace: bool = False

    def __post_init__(self) -> None:
        check.integer(1, None, batch_size=self.batch_size, dataset_size=self.dataset_size)
        if not isinstance(self.replace, bool):
            raise TypeError(f"replace must be a bool; got {type(self.replace).__name__}")
        if not self.replace and self.batch_size > self.dataset_size:
            raise ValueError(
                f"batch_size must be in [1, dataset_size={self.dataset_size}] without replacement; "
                f"got {self.batch_size}"
            )

    @property
    def rate(self) -> float:
        """b / n, the expected fraction of the dataset per step."""
        return self.batch_size / self.dataset_size


Sampling = Poisson | FixedSize
