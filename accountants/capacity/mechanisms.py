"""Mechanism level: output-law pairs, both directions, restricted next to unrestricted.

Part of :mod:`accountants.capacity` (Chaudhuri, Imola, Machanavajjhala 2019, arXiv:1907.02159v1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from .. import validate as check
from ..errors import InputError, InputTypeError, UnsupportedError
from ..events import DPSGD
from ..mechanisms import Gaussian, Laplace
from ..rdp.mechanisms import rdp_gaussian, rdp_laplace
from ..rdp.poisson import rdp_poisson_gaussian
from ..sampling import Neighbouring, Poisson
from .classes import _DTYPE, Polynomial, ScalarMixture, parse_class
from .scalar import _renyi_bounded_ratio, full_kl, restricted_kl, restricted_renyi

# Mechanism level: pairs, both directions, restricted next to unrestricted
# ---------------------------------------------------------------------------------------------

WITH_WITHOUT = "with||without"
WITHOUT_WITH = "without||with"


def mechanism_pairs(mechanism: Gaussian | Laplace | DPSGD) -> dict[str, tuple[ScalarMixture, ScalarMixture]]:
    """The neighbouring output laws (P with the record, Q without) at sensitivity 1, both directions.

    * ``Gaussian(sigma)``: N(1, σ²) vs N(0, σ²); ``Laplace(b)``: Lap(1, b) vs Lap(0, b). Written as
      P centred at 0 and Q at 1 (affine invariance makes this the same problem, and the reflection
      x ↦ 1 − x maps polynomials of degree ≤ k to themselves, so both directions are equal [D]).
    * ``DPSGD`` with one step of Poisson sampling under add/remove (group size 1): with = (1−q)N(0, σ²)
      + qN(1, σ²), without = N(0, σ²); the two directions differ and both are returned.

    Raises:
        UnsupportedError: several steps (DP-SGD is adaptive; Thm 4 covers only non-adaptive
            composition), fixed-size sampling, replace-one, or group size > 1.
    """
    if isinstance(mechanism, Gaussian):
        pair = (ScalarMixture.gaussian(0.0, mechanism.sigma), ScalarMixture.gaussian(1.0, mechanism.sigma))
        return {WITH_WITHOUT: pair, WITHOUT_WITH: pair}
    if isinstance(mechanism, Laplace):
        pair = (ScalarMixture.laplace(0.0, mechanism.b), ScalarMixture.laplace(1.0, mechanism.b))
        return {WITH_WITHOUT: pair, WITHOUT_WITH: pair}
    if isinstance(mechanism, DPSGD):
        if mechanism.steps != 1:
            raise UnsupportedError("capacity bounds cover one DP-SGD step only: DP-SGD is adaptive and "
                                   "Chaudhuri et al. 2019 Thm 4 composes non-adaptive releases only")
        if not isinstance(mechanism.sampling, Poisson):
            raise UnsupportedError("capacity bounds for a DP-SGD step need Poisson sampling")
        if mechanism.neighbouring is not Neighbouring.ADD_REMOVE or mechanism.group_size != 1:
            raise UnsupportedError("capacity bounds for a DP-SGD step cover add/remove of one record only")
        mix = ScalarMixture.subsampled_gaussian(mechanism.sampling.rate, mechanism.noise_multiplier)
        base = ScalarMixture.gaussian(0.0, mechanism.noise_multiplier)
        return {WITH_WITHOUT: (mix, base), WITHOUT_WITH: (base, mix)}
    raise InputTypeError(
        f"mechanism must be Gaussian, Laplace or a one-step Poisson DPSGD; got {type(mechanism).__name__}"
    )


class CapacityResult(NamedTuple):
    """Restricted and unrestricted divergences of one mechanism, worst direction and per direction.

    NOT (ε, δ), NOT a trade-off curve: see the module docstring. ``restricted[c] ≤ unrestricted``.

    Attributes:
        divergence: "kl" or "renyi".
        orders: Rényi orders (A,) or None for KL.
        restricted: class name → max over directions, shape (A,) or ().
        unrestricted: max over directions of the unrestricted divergence (RDP at the orders, or KL).
        by_direction: {"restricted": {class: {direction: value}}, "unrestricted": {direction: value}}.
        converged: every optimisation reached its tolerance.
    """

    divergence: str
    orders: Tensor | None
    restricted: dict[str, Tensor]
    unrestricted: Tensor
    by_direction: dict
    converged: bool


def _unrestricted(mechanism: Gaussian | Laplace | DPSGD, orders: Tensor | None) -> dict[str, Tensor]:
    """The unrestricted divergences per direction: Rényi at ``orders``, or KL where ``orders`` is None."""
    pairs = mechanism_pairs(mechanism)
    if isinstance(mechanism, Gaussian):
        v = (rdp_gaussian(orders, torch.tensor(mechanism.sigma, dtype=_DTYPE)) if orders is not None
             else torch.tensor(0.5 / mechanism.sigma**2, dtype=_DTYPE))
        return {d: v for d in pairs}
    if isinstance(mechanism, Laplace):
        if orders is not None:  # Rényi (the caller gives orders exactly then)
            v = rdp_laplace(orders, torch.tensor(mechanism.b, dtype=_DTYPE))
        else:  # Thm 8: ε − 1 + e^{−ε}
            e = torch.tensor(1.0 / mechanism.b, dtype=_DTYPE)
            v = e - 1.0 + torch.exp(-e)
        return {d: v for d in pairs}
    out = {}
    for d, (p, q) in pairs.items():
        if orders is None:  # KL
            out[d] = full_kl(p, q)
        elif d == WITH_WITHOUT:
            out[d] = rdp_poisson_gaussian(orders, mechanism.sampling.rate, mechanism.noise_multiplier)
        else:
            out[d] = _renyi_bounded_ratio(p, q, orders)
    return out


# The domain where the quadrature and the Newton solver were fuzzed clean (no NaN, no restricted value above
# the unrestricted one; tests/accountants/test_capacity.py): outside it they produced NaN, negative values,
# ZeroDivisionError (σ = 1e-300) and OverflowError (σ = 1e300), so it is refused by name instead.
SCALE_RANGE = (0.03, 1e4)  # σ (Gaussian, DP-SGD noise multiplier) and b (Laplace), sensitivity 1
RATE_MIN = 1e-6  # DP-SGD sample rate
ORDER_MAX = 1e3  # Rényi order


def _check_domain(mechanism: Gaussian | Laplace | DPSGD, orders: Tensor | None) -> None:
    """InputError naming the parameter outside the domain where the values are numerically reliable."""
    lo, hi = SCALE_RANGE
    name, scale = (("sigma", mechanism.sigma) if isinstance(mechanism, Gaussian) else
                   ("b", mechanism.b) if isinstance(mechanism, Laplace) else
                   ("noise_multiplier", mechanism.noise_multiplier))
    if not lo <= scale <= hi:
        raise InputError(f"{name} must be in [{lo:g}, {hi:g}] for restricted divergences (the solver is not "
                         f"reliable outside); got {scale!r}")
    if isinstance(mechanism, DPSGD) and isinstance(mechanism.sampling, Poisson) \
            and mechanism.sampling.rate < RATE_MIN:
        raise InputError(f"sample_rate must be in [{RATE_MIN:g}, 1] for restricted divergences; got "
                         f"{mechanism.sampling.rate!r}")
    if orders is not None and bool((orders > ORDER_MAX).any()):
        raise InputError(f"orders must be in (1, {ORDER_MAX:g}] for restricted divergences; got "
                         f"{float(orders.max())!r}")


def _check_result(restricted: dict[str, Tensor], unrestricted: Tensor) -> dict[str, Tensor]:
    """Restricted values clipped at 0 (a constant test gives 0, so the supremum is ≥ 0; rounding gives −2e-16);
    UnsupportedError when a value is NaN or above the unrestricted one beyond rounding (a solver failure: never
    a wrong number)."""
    out = {}
    for c, v in restricted.items():
        bad = torch.isnan(v) | (v > unrestricted * (1 + 1e-6) + 1e-12) | torch.isnan(unrestricted)
        if bool(bad.any()):
            raise UnsupportedError(f"restricted {c} divergence: the solver did not reach a reliable value here "
                                   "(NaN, or above the unrestricted divergence); try an order or scale nearer 1")
        out[c] = torch.clamp(v, min=0.0)
    return out


def capacity_divergences(mechanism: Gaussian | Laplace | DPSGD,
                         function_classes: str | Polynomial | Sequence[str | Polynomial] = ("linear",),
                         divergence: str = "renyi", orders: Tensor | float | None = None) -> CapacityResult:
    """Restricted next to unrestricted divergence for one mechanism at sensitivity 1.  Bound: exact (numerical).

    Chaudhuri et al. 2019 (arXiv:1907.02159v1) Def. 3 with Lemmas 1 and 3: the (H, Γ) capacity
    parameter of the mechanism for neighbouring pair(s) from :func:`mechanism_pairs`, maximised over
    both directions. Unrestricted values: Gaussian αΔ²/(2σ²), Laplace eq. (4)/Thm 8, subsampled Gaussian
    :func:`accountants.rdp.poisson.rdp_poisson_gaussian` (with ‖ without) and quadrature (without ‖ with).

    Args:
        mechanism: ``Gaussian``, ``Laplace`` or a one-step Poisson ``DPSGD`` (add/remove).
        function_classes: names or :class:`Polynomial` instances.
        divergence: "kl" or "renyi".
        orders: Rényi orders α > 1 (A,) for "renyi"; must be None for "kl".

    Returns:
        :class:`CapacityResult`. Never convert its numbers to (ε, δ) or trade-off curves.

    Raises:
        InputError: σ or b outside ``SCALE_RANGE``, a sample rate below ``RATE_MIN``, an order above
            ``ORDER_MAX`` (where the solver was found unreliable).
        UnsupportedError: the solver gave NaN or a restricted value above the unrestricted one.
    """
    if divergence not in ("kl", "renyi"):
        raise InputError(f"divergence must be 'kl' or 'renyi'; got {divergence!r}")
    if isinstance(function_classes, (str, Polynomial)):
        function_classes = (function_classes,)
    classes = [parse_class(c) for c in function_classes]
    if divergence == "renyi":
        if orders is None:
            raise InputError("orders are required for divergence='renyi' (alpha > 1)")
        orders_t = torch.as_tensor(orders, dtype=_DTYPE).reshape(-1)
        check.finite(orders=orders_t)
        check.in_range(1.0, None, closed="neither", orders=orders_t)
    else:
        if orders is not None:
            raise InputError("orders must be None for divergence='kl'")
        orders_t = None
    _check_domain(mechanism, orders_t)
    pairs = mechanism_pairs(mechanism)
    symmetric = not isinstance(mechanism, DPSGD)
    by_class: dict[str, dict[str, Tensor]] = {}
    conv = True
    for fc in classes:
        per: dict[str, Tensor] = {}
        for d, (p, q) in pairs.items():
            if symmetric and d == WITHOUT_WITH:
                per[d] = per[WITH_WITHOUT]
                continue
            rv = restricted_renyi(p, q, orders_t, fc) if orders_t is not None else restricted_kl(p, q, fc)
            conv = conv and bool(rv.converged.all())
            per[d] = rv.value
        by_class[fc.name] = per
    unres = _unrestricted(mechanism, orders_t)
    unres_max = torch.maximum(unres[WITH_WITHOUT], unres[WITHOUT_WITH])
    restricted = _check_result({c: torch.maximum(v[WITH_WITHOUT], v[WITHOUT_WITH]) for c, v in by_class.items()},
                               unres_max)
    return CapacityResult(divergence, orders_t, restricted, unres_max,
                          {"restricted": by_class, "unrestricted": unres}, conv)
