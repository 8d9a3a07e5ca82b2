"""Base mechanisms as frozen, validated descriptions.

A mechanism's parameter is expressed relative to the sensitivity of the query it privatises
*under add/remove of one record with clipping norm 1*; the neighbouring relation and the
sampling scheme in :class:`accountants.events.DPSGD` decide the actual sensitivity, so a user
never halves or doubles a parameter by hand.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from . import validate as check
from .serialise import Description, Kinds

__all__ = ["Gaussian", "Laplace", "RandomizedResponse"]


@dataclass(frozen=True, slots=True)
class Gaussian(Description):
    """Additive Gaussian noise N(0, (sigma·Δ)^2) on a query of sensitivity Δ.

    Attributes:
        sigma: noise standard deviation divided by the sensitivity (the noise multiplier).
    """

    KINDS: ClassVar[Kinds] = {"gaussian": {}}
    ROLE = "mechanism"

    sigma: float

    def __post_init__(self) -> None:
        check.positive(sigma=self.sigma)


@dataclass(frozen=True, slots=True)
class Laplace(Description):
    """Additive Laplace noise with scale ``b·Δ`` on a query of sensitivity Δ (pure ε = 1/b)."""

    KINDS: ClassVar[Kinds] = {"laplace": {}}
    ROLE = "mechanism"

    b: float

    def __post_init__(self) -> None:
        check.positive(b=self.b)


@dataclass(frozen=True, slots=True)
class RandomizedResponse(Description):
    """Binary randomized response: report the true bit with probability ``p`` > 1/2.

    Pure DP with ε = log(p / (1 - p)).
    """

    KINDS: ClassVar[Kinds] = {"randomized_response": {}}
    ROLE = "mechanism"

    p: float

    def __post_init__(self) -> None:
        check.in_range(0.5, 1.0, closed="neither", p=self.p)
