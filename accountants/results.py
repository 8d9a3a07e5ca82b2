"""Result types whose direction is part of the type."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BracketError", "DeltaBound", "EpsilonBound", "check_bracket"]


class BracketError(AssertionError):
    """A certified lower end above the upper end: a bug in dpaudit, never a result (the CLI exits 3).

    Raised by :func:`check_bracket`, which every :class:`EpsilonBound` and :class:`DeltaBound` runs at
    construction, so no method can return such a bracket. Not an ``InputError``: the input is not at fault.
    """


def check_bracket(lower: float | None, upper: float, what: str) -> None:
    """Raise :class:`BracketError` unless ``lower`` is None or 0 ≤ lower ≤ upper (NaN fails)."""
    if lower is None:
        return
    if not (0.0 <= lower <= upper):
        raise BracketError(f"internal error: certified lower {what} {lower!r} is not in [0, upper {what} "
                           f"{upper!r}]; this is a bug in dpaudit, not a bound")


@dataclass(frozen=True, slots=True)
class EpsilonBound:
    """An ε at a given δ.

    Attributes:
        value: the reported ε. For ``bound="upper"`` it is a sound upper bound.
        delta: the δ it holds at.
        bound: direction of ``value``: "upper" for every accountant.
        method: the accounting method ("rdp", "pld", …).
        order: the optimal RDP order (RDP methods), else None.
        lower: a certified lower end of a bracket on the true ε, where the method has one.
        theorem: which theorem produced the bound.
        upper_source: where ``value`` comes from when not from ``method`` itself: "rdp" when the
            PLD method's upper end is the (tighter) RDP bound; None otherwise.
    """

    value: float
    delta: float
    bound: str = "upper"
    method: str = "rdp"
    order: float | None = None
    lower: float | None = None
    theorem: str | None = None
    upper_source: str | None = None

    def __post_init__(self) -> None:
        if self.bound == "upper":
            check_bracket(self.lower, self.value, "epsilon")

    def __float__(self) -> float:
        return float(self.value)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dictionary (keys: epsilon, delta, bound, method, order, lower, theorem, and
        upper_source where set)."""
        return {
            "epsilon": self.value,
            "delta": self.delta,
            "bound": self.bound,
            "method": self.method,
            "order": self.order,
            "lower": self.lower,
            "theorem": self.theorem,
            **({"upper_source": self.upper_source} if self.upper_source is not None else {}),
        }


@dataclass(frozen=True, slots=True)
class DeltaBound:
    """A δ at a given ε; ``value`` is a sound upper bound when ``bound="upper"``."""

    value: float
    epsilon: float
    bound: str = "upper"
    method: str = "rdp"
    order: float | None = None
    lower: float | None = None
    theorem: str | None = None
    upper_source: str | None = None

    def __post_init__(self) -> None:
        if self.bound == "upper":
            check_bracket(self.lower, self.value, "delta")

    def __float__(self) -> float:
        return float(self.value)

    def to_dict(self) -> dict[str, object]:
        return {
            "delta": self.value,
            "epsilon": self.epsilon,
            "bound": self.bound,
            "method": self.method,
            "order": self.order,
            "lower": self.lower,
            "theorem": self.theorem,
            **({"upper_source": self.upper_source} if self.upper_source is not None else {}),
        }
