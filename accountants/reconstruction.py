"""Reconstruction robustness (ReRo) bounds from a trade-off curve.

An informed adversary knows every training record but the target z, drawn from a prior π over
candidates, and outputs a guess; its baseline success without observing the mechanism is
κ = sup_{z₀} P_{z∼π}[ℓ(z, z₀) ≤ η] (κ = 1/n for a uniform prior over n candidates and exact match).

Hayes, Mahloujifar, Balle, "Bounding Training Data Reconstruction in DP-SGD" (NeurIPS 2023,
arXiv:2302.07225v3), Thm 2 / Cor. 3: with (P, Q) a dominating pair of the mechanism, every
reconstruction attack succeeds with probability at most B_κ(P, Q) = sup{Q(E) : P(E) ≤ κ}
(the Neyman–Pearson blow-up), which equals 1 − T(P, Q)(κ). Kaissis, Hayes, Ziller, Rueckert
(arXiv:2307.03928v1) state it for any f-DP mechanism: success ≤ 1 − f(κ).
"""

from __future__ import annotations

from torch import Tensor

from . import validate as check
from .errors import InputTypeError
from .tradeoff import TradeOff, _as_input

__all__ = ["rero_bound"]


def rero_bound(tradeoff: TradeOff, kappa: Tensor | float, *, symmetrise: bool = True) -> Tensor:
    """Upper bound 1 − f(κ) on an informed adversary's reconstruction success at baseline κ.

    Hayes, Mahloujifar, Balle 2023 (arXiv:2302.07225v3) Thm 2; Kaissis et al. 2023
    (arXiv:2307.03928v1). Bound: upper on the success probability when ``tradeoff.bound`` is
    "lower" or "exact" (a lower f gives a larger, still valid bound); an estimate otherwise.

    Args:
        tradeoff: the mechanism's curve, e.g. ``TradeOff.from_spec(spec)``.
        kappa: baseline success probability κ ∈ [0, 1]; any shape (vectorised).
        symmetrise: use conv(min(f, f⁻¹)) (a no-op for the symmetric curves accountants return), so
            the bound covers both orderings of the dominating pair whatever ``tradeoff`` is.

    Returns:
        Tensor of the shape of ``kappa``: bounds in [κ, 1].

    >>> import accountants as acc
    >>> round(float(rero_bound(acc.TradeOff.from_gdp(1.0), 0.01)), 6)
    0.092362
    """
    if not isinstance(tradeoff, TradeOff):
        raise InputTypeError(f"tradeoff must be an accountants.TradeOff; got {type(tradeoff).__name__}")
    k = _as_input("kappa", kappa)
    check.in_range(0.0, 1.0, kappa=k)
    f = tradeoff.symmetrised() if symmetrise and not tradeoff.is_symmetric else tradeoff
    return 1.0 - f(k)
