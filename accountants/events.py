"""The description of a training run, read by the accountant and executed by the trainer."""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import ClassVar

from . import validate as check
from .errors import InputError, InputTypeError
from .sampling import FixedSize, Neighbouring, Poisson, RandomAllocation, Shuffle, TruncatedPoisson
from .serialise import Description, Kinds

__all__ = ["DPSGD", "Composed"]


@dataclass(frozen=True, slots=True)
class DPSGD(Description):
    """DP-SGD: T steps of a subsampled Gaussian mechanism on clipped per-example gradients.

    Attributes:
        noise_multiplier: σ, the std of the noise added to the SUM of clipped per-example
            gradients divided by the clip norm C (Opacus' convention). The sensitivity of a
            step follows from ``sampling`` × ``neighbouring`` inside the bound.
        sampling: :class:`Poisson` or :class:`FixedSize`.
        steps: T ≥ 1.
        neighbouring: add/remove (default) or replace-one.
        group_size: K ≥ 1 records protected together (group privacy).
    """

    KINDS: ClassVar[Kinds] = {"dpsgd": {}}
    FORMAT = True

    noise_multiplier: float
    sampling: Poisson | FixedSize | Shuffle | RandomAllocation | TruncatedPoisson
    steps: int
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    group_size: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.noise_multiplier, bool) or not isinstance(self.noise_multiplier, numbers.Real):
            raise InputTypeError(f"noise_multiplier must be a real number; got {type(self.noise_multiplier).__name__}")
        check.positive(noise_multiplier=self.noise_multiplier)
        if not isinstance(self.sampling, (Poisson, FixedSize, Shuffle, RandomAllocation, TruncatedPoisson)):
            raise InputTypeError(
                "sampling must be accountants.Poisson, accountants.FixedSize, accountants.Shuffle, "
                "accountants.RandomAllocation or accountants.TruncatedPoisson; "
                f"got {type(self.sampling).__name__}"
            )
        check.integer(1, None, steps=self.steps, group_size=self.group_size)
        object.__setattr__(self, "neighbouring", Neighbouring.parse(self.neighbouring))
        object.__setattr__(self, "steps", int(self.steps))
        object.__setattr__(self, "group_size", int(self.group_size))
        object.__setattr__(self, "noise_multiplier", float(self.noise_multiplier))

    @property
    def sample_rate(self) -> float:
        """q for Poisson, b/n for fixed-size sampling."""
        return float(self.sampling.rate)

    def with_noise(self, noise_multiplier: float) -> DPSGD:
        """The same run with another noise multiplier (used by calibration)."""
        return DPSGD(noise_multiplier, self.sampling, self.steps, self.neighbouring, self.group_size)

    def with_steps(self, steps: int) -> DPSGD:
        """The same run with another number of steps."""
        return DPSGD(self.noise_multiplier, self.sampling, steps, self.neighbouring, self.group_size)


@dataclass(frozen=True, slots=True)
class Composed(Description):
    """Heterogeneous training: the composition of several DP-SGD phases, applied in order.

    All phases must share the neighbouring relation and group size (the guarantee is about one
    pair of neighbouring datasets).
    """

    KINDS: ClassVar[Kinds] = {"composed": {}}
    FORMAT = True

    parts: tuple[DPSGD, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        parts = tuple(self.parts)
        for i, p in enumerate(parts):
            if not isinstance(p, DPSGD):
                raise InputTypeError(f"parts[{i}] must be a DPSGD; got {type(p).__name__}")
        if parts:
            rel = {p.neighbouring for p in parts}
            grp = {p.group_size for p in parts}
            if len(rel) > 1:
                raise InputError(f"parts must share one neighbouring relation; got {sorted(r.value for r in rel)}")
            if len(grp) > 1:
                raise InputError(f"parts must share one group_size; got {sorted(grp)}")
        object.__setattr__(self, "parts", parts)

    @property
    def steps(self) -> int:
        """Total number of steps over all phases."""
        return sum(p.steps for p in self.parts)
