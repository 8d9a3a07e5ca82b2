"""Base mechanisms as frozen, validated descriptions.

A mechanism's parameter is expressed relative to the sensitivity of the query it privatises
*under add/remove of one record with clipping norm 1*; the neighbouring relation and the
sampling scheme in :class:`accountants.events.DPSGD` decide the actual sensitivity, so a user
never halves or doubles a parameter by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import validate as check
from .errors import InputTypeError

__all__ = ["Gaussian", "Laplace", "RandomizedResponse"]


@dataclass(frozen=True, slots=True)
class Gaussian:
    """Additive Gaussian noise N(0, (sigma·Δ)^2) on a query of sensitivity Δ.

    Attributes:
        sigma: noise standard deviation divided by the sensitivity (the noise multiplier).
    """

    sigma: float

    def __post_init__(self) -> None:
        check.positive(sigma=self.sigma)

    def to_dict(self) -> dict:
        """Lossless dict form (:func:`accountants.describe.to_dict`)."""
        from .describe import to_dict

        return to_dict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Gaussian:
        """Inverse of :meth:`to_dict` (:func:`accountants.describe.from_dict`); checks the kind."""
        from .describe import from_dict

        obj = from_dict(d, where="mechanism")
        if not isinstance(obj, cls):
            raise InputTypeError(f"mechanism describes a {type(obj).__name__}, not a {cls.__name__}")
        return obj


@dataclass(frozen=True, slots=True)
class Laplace:
    """Additive Laplace noise with scale ``b·Δ`` on a query of sensitivity Δ (pure ε = 1/b)."""

    b: float

    def __post_init__(self) -> None:
        check.positive(b=self.b)

    def to_dict(self) -> dict:
        """Lossless dict form (:func:`accountants.describe.to_dict`)."""
        from .describe import to_dict

        return to_dict(self)

    @classmethod
    def from_dict(cls, d: dict) -> Laplace:
        """Inverse of :meth:`to_dict` (:func:`accountants.describe.from_dict`); checks the kind."""
        from .describe import from_dict

        obj = from_dict(d, where="mechanism")
        if not isinstance(obj, cls):
            raise InputTypeError(f"mechanism describes a {type(obj).__name__}, not a {cls.__name__}")
        return obj


@dataclass(frozen=True, slots=True)
class RandomizedResponse:
    """Binary randomized response: report the true bit with probability ``p`` > 1/2.

    Pure DP with ε = log(p / (1 - p)).
    """

    p: float

    def __post_init__(self) -> None:
        check.in_range(0.5, 1.0, closed="neither", p=self.p)

    def to_dict(self) -> dict:
        """Lossless dict form (:func:`accountants.describe.to_dict`)."""
        from .describe import to_dict

        return to_dict(self)

    @classmethod
    def from_dict(cls, d: dict) -> RandomizedResponse:
        """Inverse of :meth:`to_dict` (:func:`accountants.describe.from_dict`); checks the kind."""
        from .describe import from_dict

        obj = from_dict(d, where="mechanism")
        if not isinstance(obj, cls):
            raise InputTypeError(f"mechanism describes a {type(obj).__name__}, not a {cls.__name__}")
        return obj
