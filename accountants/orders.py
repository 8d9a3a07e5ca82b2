"""The default RDP order grid.

A superset of Opacus' default grid (1.1…10.9 step 0.1, 12…63), so a minimum over it can only be
smaller: fractional orders every 0.05 in (1, 11), orders 1.01–1.04 for large-ε regimes, every
integer to 64, and a geometric tail to 1024 for small-ε regimes.
"""

from __future__ import annotations

import torch

__all__ = ["DEFAULT_ORDERS", "default_orders"]


def default_orders(dtype: torch.dtype = torch.float64, device: torch.device | str | None = None) -> torch.Tensor:
    """The default grid of RDP orders (sorted, all > 1) as a 1-D tensor."""
    near_one = [1.01, 1.02, 1.03, 1.04]
    fine = [round(1.0 + 0.05 * k, 2) for k in range(1, 200)]  # 1.05 … 10.95
    integers = list(range(11, 65))
    tail = [72, 80, 96, 112, 128, 160, 192, 256, 320, 384, 512, 768, 1024]
    grid = sorted(set(near_one + fine + [float(x) for x in integers + tail]))
    return torch.tensor(grid, dtype=dtype, device=device)


DEFAULT_ORDERS = default_orders()
