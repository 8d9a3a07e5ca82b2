"""The default RDP order grid, and local refinement of the optimal order.

The base grid is a superset of Opacus' default grid (1.1…10.9 step 0.1, 12…63), so a minimum
over it can only be smaller: it adds 11, 64 and a geometric tail to 1024 for small-ε regimes.
The orders 1.01–1.07 (:data:`NEAR_ONE_ORDERS`, large-ε regimes) are evaluated only for a
configuration whose best base order is 1.1: their series converge slowly and they are never
the optimum otherwise. The conversion then refines around each configuration's best order
(:func:`refine_orders`). Every order gives a valid bound, so the refined minimum is a valid and
smaller upper bound, at the resolution of a 0.0125-step grid for a fraction of its cost.
"""

from __future__ import annotations

import torch
from torch import Tensor

__all__ = ["DEFAULT_ORDERS", "NEAR_ONE_ORDERS", "default_orders", "near_one_orders", "refine_orders"]


def default_orders(dtype: torch.dtype = torch.float64, device: torch.device | str | None = None) -> Tensor:
    """The default grid of RDP orders (sorted, all > 1) as a 1-D tensor."""
    fine = [round(1.0 + 0.1 * k, 1) for k in range(1, 100)]  # 1.1 … 10.9 (Opacus' fractional grid)
    integers = list(range(11, 65))
    tail = [72, 80, 96, 112, 128, 160, 192, 256, 320, 384, 512, 768, 1024]
    grid = sorted(set(fine + [float(x) for x in integers + tail]))
    return torch.tensor(grid, dtype=dtype, device=device)


def near_one_orders(dtype: torch.dtype = torch.float64, device: torch.device | str | None = None) -> Tensor:
    """Orders below the base grid, tried when the best base order is its smallest (1.1)."""
    return torch.tensor([1.01, 1.02, 1.03, 1.05, 1.07], dtype=dtype, device=device)


def refine_orders(orders: Tensor, best_index: Tensor, points: int = 8) -> Tensor:
    """Orders strictly between the neighbours of each best order, ``points`` per side.

    Args:
        orders: the sorted base grid, shape (A,).
        best_index: index of the best order per configuration, shape (...).
        points: new orders on each side of the best one.

    Returns:
        Shape (..., 2·points): evenly spaced orders in (orders[j−1], orders[j]) and
        (orders[j], orders[j+1]); at an edge of the grid the missing side repeats the best order.
    """
    n = orders.shape[-1]
    j = best_index
    left = orders[torch.clamp(j - 1, min=0)]
    mid = orders[j]
    right = orders[torch.clamp(j + 1, max=n - 1)]
    t = torch.arange(1, points + 1, dtype=orders.dtype, device=orders.device) / (points + 1)
    lo = left[..., None] + (mid - left)[..., None] * t
    hi = mid[..., None] + (right - mid)[..., None] * t
    return torch.cat([lo, hi], dim=-1)


DEFAULT_ORDERS = default_orders()
NEAR_ONE_ORDERS = near_one_orders()
