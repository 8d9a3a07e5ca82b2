"""Printing bounds so that the printed digits keep the bound's direction.

An upper bound printed to nearest can come out *below* the value it prints: the accountant's
ε = 2.36613 shown as "2.366" and copied into a claim (``--epsilon 2.366``) then fails the claim
check. Every number dpaudit prints goes through one of three functions:

- :func:`upper`: an upper bound (accountant ε or δ, a ceiling, an ``≤`` side), rounded **up**, so
  the printed number is still an upper bound;
- :func:`lower`: a lower bound (audit ε_lower, a certified lower end, a ``≥`` side), rounded
  **down**, so the printed number is still a lower bound;
- :func:`nearest`: estimates, ratios and exact inputs, rounded to nearest.

``digits`` counts significant digits (``"g"`` style) by default, or decimals with ``fixed=True``.
Rounding is done in decimal arithmetic (:class:`decimal.Decimal`) on the float's shortest repr,
which reads back as the same float, so ``float(upper(x)) >= x`` and ``float(lower(x)) <= x`` hold
for every finite float ``x`` (what a claim check compares), and 0.1 prints as 0.1, not 0.101.

>>> upper(2.3661234, 4), lower(2.3661234, 4), nearest(2.3661234, 4)
('2.367', '2.366', '2.366')
>>> upper(0.1, 3, fixed=True), lower(-0.12345, 2, fixed=True)
('0.100', '-0.13')
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Context, Decimal

__all__ = ["exact", "lower", "nearest", "upper"]

_CONTEXT = Context(prec=800)  # wide enough for any double in fixed notation (1e308 has 309 digits)


def _round(x: float, digits: int, fixed: bool, rounding: str) -> str:
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return str(x)
    x = float(x)
    if not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    d = Decimal(repr(x))  # the shortest decimal that reads back as x
    if fixed:
        q = d.quantize(Decimal(1).scaleb(-digits), rounding=rounding, context=_CONTEXT)
        return f"{q:f}" if q or not q.is_signed() else f"{-q:f}"  # never "-0.000"
    if x == 0:
        return "0"
    exponent = d.adjusted() - (digits - 1)  # keep `digits` significant digits
    q = d.quantize(Decimal(1).scaleb(exponent), rounding=rounding, context=_CONTEXT)
    # q has at most digits + 1 significant digits (9.99 rounded up is 10.0); "g" of its float
    # reproduces those decimal digits exactly (they round-trip through a double for digits <= 15).
    out = f"{float(q):.{digits + 1}g}"
    return out if Decimal(out) == q else f"{q:g}"


def upper(x: float, digits: int = 6, *, fixed: bool = False) -> str:
    """An upper bound, rounded up: the printed number is ≥ ``x``."""
    return _round(x, digits, fixed, ROUND_CEILING)


def lower(x: float, digits: int = 6, *, fixed: bool = False) -> str:
    """A lower bound, rounded down: the printed number is ≤ ``x``."""
    return _round(x, digits, fixed, ROUND_FLOOR)


def nearest(x: float, digits: int = 6, *, fixed: bool = False) -> str:
    """An estimate, a ratio or an exact value, rounded to nearest."""
    return _round(x, digits, fixed, ROUND_HALF_EVEN)


def exact(x: float) -> str:
    """A user's input (a claimed ε, a δ) as given: the shortest text that reads back as ``x``."""
    if not isinstance(x, (int, float)) or isinstance(x, bool):
        return str(x)
    return f"{x:g}" if float(f"{x:g}") == x else repr(float(x))
