"""RDP → (ε, δ) conversions.  Bound: upper (valid for every order; minimised over the grid).

Balle, Barthe, Gaboardi, Hsu, Sato, "Hypothesis testing interpretations and Rényi differential
privacy" (arXiv:1905.09982v2), Thm 21; equivalently Canonne, Kamath, Steinke (arXiv:2004.00010v5)
Prop. 12 / Asoodeh et al. (2020) Eq. (20):

    ε(δ) = min_α  RDP(α) + log((α−1)/α) − (log δ + log α)/(α − 1),
    δ(ε) = min_α  exp((α−1)(RDP(α) − ε + log(1 − 1/α)) − log α).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import torch
from torch import Tensor

from .._numerics import as_float
from ..orders import refine_orders

__all__ = ["OrderGridWarning", "delta_from_rdp", "eps_from_rdp", "eps_terms", "minimise_over_orders", "steps_factor"]


class OrderGridWarning(UserWarning):
    """The optimal RDP order sits at an edge of the order grid; a wider grid may give a smaller ε."""


def _warn_edge(best_idx: Tensor, orders: Tensor, finite: Tensor, what: str) -> None:
    n = orders.shape[-1]
    if n < 2:
        return
    lo = (best_idx == 0) & finite
    hi = (best_idx == n - 1) & finite
    if bool(lo.any()):
        warnings.warn(
            f"the optimal order for {what} is the smallest order of the grid "
            f"({orders.reshape(-1)[0].item():g}); extend the grid towards 1",
            OrderGridWarning,
            stacklevel=3,
        )
    if bool(hi.any()):
        warnings.warn(
            f"the optimal order for {what} is the largest order of the grid "
            f"({orders.reshape(-1)[-1].item():g}); extend the grid upwards",
            OrderGridWarning,
            stacklevel=3,
        )


def steps_factor(steps: int) -> float:
    """T as the float that multiplies a one-step RDP curve, rounded up.  Bound: upper.

    RDP composes additively (Mironov 2017 Prop. 1), so T·ε(α) is the composed curve; a T above
    2**53 is rounded to the next float up (never down), and a T beyond float64's range becomes
    +inf (a valid, if useless, bound) instead of an OverflowError.
    """
    try:
        f = float(steps)
    except OverflowError:
        return math.inf
    return math.nextafter(f, math.inf) if f < steps else f


def eps_terms(rdp: Tensor, orders: Tensor, delta: Tensor | float) -> Tensor:
    """The per-order ε of Balle et al. 2020 Thm 21 (before the minimum), NaN mapped to +inf."""
    rdp = as_float(rdp)
    a = as_float(orders, like=rdp)
    log_delta = torch.log(as_float(delta, like=rdp))[..., None]
    eps = rdp + torch.log1p(-1.0 / a) - (log_delta + torch.log(a)) / (a - 1.0)
    return torch.where(torch.isnan(eps), torch.full_like(eps, math.inf), eps)


def eps_from_rdp(rdp: Tensor, orders: Tensor, delta: Tensor | float, *, warn: bool = True) -> tuple[Tensor, Tensor]:
    """ε at δ from an RDP curve (Balle et al. 2020 Thm 21).  Bound: upper.

    Args:
        rdp: RDP values, shape (..., A); +inf entries are allowed (that order is unusable).
        orders: the orders α > 1, shape (A,) or broadcastable to ``rdp``.
        delta: target δ in (0, 1), broadcastable to ``rdp.shape[:-1]``.
        warn: emit :class:`OrderGridWarning` when the minimiser is at an edge of the grid.

    Returns:
        (ε, best order), each of shape ``rdp.shape[:-1]``; ε ≥ 0.
    """
    rdp = as_float(rdp)
    orders = as_float(orders, like=rdp)
    eps = eps_terms(rdp, orders, delta)
    a = orders
    best, idx = torch.min(eps, dim=-1)
    best_order = torch.broadcast_to(a, eps.shape).gather(-1, idx[..., None]).squeeze(-1)
    if warn:
        _warn_edge(idx, orders, torch.isfinite(best), "ε(δ)")
    return torch.clamp(best, min=0.0), best_order


def delta_from_rdp(rdp: Tensor, orders: Tensor, epsilon: Tensor | float, *, warn: bool = True) -> tuple[Tensor, Tensor]:
    """δ at ε from an RDP curve (Canonne, Kamath, Steinke 2020 Prop. 12).  Bound: upper.

    Returns:
        (δ, best order), each of shape ``rdp.shape[:-1]``; δ ∈ [0, 1].
    """
    rdp = as_float(rdp)
    orders = as_float(orders, like=rdp)
    eps = as_float(epsilon, like=rdp)[..., None]
    a = orders
    log_d = (a - 1.0) * (rdp - eps + torch.log1p(-1.0 / a)) - torch.log(a)
    log_d = torch.where(torch.isnan(log_d), torch.full_like(log_d, math.inf), log_d)
    best, idx = torch.min(log_d, dim=-1)
    best_order = torch.broadcast_to(a, log_d.shape).gather(-1, idx[..., None]).squeeze(-1)
    if warn:
        _warn_edge(idx, orders, best < 0.0, "δ(ε)")
    return torch.clamp(torch.exp(best), max=1.0), best_order


def minimise_over_orders(
    curve_at: Callable[[Tensor], Tensor],
    convert: Callable[..., tuple[Tensor, Tensor]],
    base: Tensor,
    *,
    low_extension: Tensor | None = None,
    refine: int = 8,
    warn: bool = True,
    what: str = "ε(δ)",
    curve_rows: Callable[[Tensor, Tensor], Tensor] | None = None,
) -> tuple[Tensor, Tensor]:
    """Minimise a conversion over orders: the base grid, a low extension, then local refinement.

    Every order gives a valid bound, so each stage can only lower the result.

    Args:
        curve_at: orders of shape (A,) or (..., A) ↦ RDP curve of shape (..., A).
        convert: (rdp, orders, warn=False) ↦ (value, best order), e.g. :func:`eps_from_rdp`
            with δ bound (use ``functools.partial``).
        base: sorted base grid (A,).
        low_extension: sorted orders below ``base[0]``, evaluated only when some configuration's
            best base order is ``base[0]``.
        refine: orders added on each side of the best one (0: none).
        warn: emit :class:`OrderGridWarning` when the optimum sits at an edge of the grid used.
        what: the quantity named in the warning.
        curve_rows: optional (orders (L,), mask of configurations) ↦ RDP curve of the selected
            configurations, shape (m, L). With it the low extension is evaluated only for the
            configurations whose best base order is ``base[0]`` (the others get +inf there, so
            their result is unchanged); without it, for all of them.

    Returns:
        (value, best order) with the configurations' shape.
    """
    grid = base
    curve = curve_at(grid)
    val, order = convert(curve, grid, warn=False)
    if low_extension is not None and low_extension.numel() and bool((order == grid[0]).any()):
        if curve_rows is None:
            low = curve_at(low_extension)
        else:
            at_edge = order == grid[0]
            shape = (*curve.shape[:-1], low_extension.numel())
            low = torch.full(shape, math.inf, dtype=curve.dtype, device=curve.device)
            low[at_edge] = curve_rows(low_extension, at_edge)
        grid = torch.cat([low_extension, grid])
        curve = torch.cat([low, curve], dim=-1)
        val, order = convert(curve, grid, warn=False)
    idx = torch.searchsorted(grid, order.contiguous())
    if warn:
        _warn_edge(idx, grid, torch.isfinite(val) & (val < 1.0 if what == "δ(ε)" else True), what)
    if refine:
        fine = refine_orders(grid, idx, refine)
        val_f, order_f = convert(curve_at(fine), fine, warn=False)
        better = val_f < val
        val, order = torch.where(better, val_f, val), torch.where(better, order_f, order)
    return val, order
