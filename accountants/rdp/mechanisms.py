"""RDP of the base (unsubsampled) mechanisms. Bound: exact (hence a valid upper bound).

Mironov, "Rényi Differential Privacy" (arXiv:1702.07476v3), Table II / Propositions 3, 5, 6.
All functions broadcast; α is conventionally the last dimension.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .._numerics import as_float, log_add

__all__ = ["rdp_gaussian", "rdp_laplace", "rdp_randomized_response"]


def rdp_gaussian(alpha: Tensor, sigma: Tensor, sensitivity: Tensor | float = 1.0) -> Tensor:
    """RDP of the Gaussian mechanism: α Δ² / (2 σ² ) with noise std σ·(unit).  Bound: exact.

    Mironov 2017, Prop. 7. ``sigma`` is the noise std divided by the unit in which
    ``sensitivity`` is measured.
    """
    alpha = as_float(alpha)
    sigma = as_float(sigma, like=alpha)
    return alpha * as_float(sensitivity, like=alpha) ** 2 / (2.0 * sigma**2)


def rdp_laplace(alpha: Tensor, b: Tensor) -> Tensor:
    """RDP of the Laplace mechanism with scale b (sensitivity 1).  Bound: exact.

    Mironov 2017, Prop. 6: for α > 1,
    D_α = 1/(α-1) · log( α/(2α-1) · e^{(α-1)/b} + (α-1)/(2α-1) · e^{-α/b} ).
    """
    alpha = as_float(alpha)
    b = as_float(b, like=alpha)
    t1 = torch.log(alpha) - torch.log(2.0 * alpha - 1.0) + (alpha - 1.0) / b
    t2 = torch.log(alpha - 1.0) - torch.log(2.0 * alpha - 1.0) - alpha / b
    return log_add(t1, t2) / (alpha - 1.0)


def rdp_randomized_response(alpha: Tensor, p: Tensor) -> Tensor:
    """RDP of binary randomized response with truth probability p > 1/2.  Bound: exact.

    Mironov 2017, Prop. 5: D_α = 1/(α-1) · log( p^α (1-p)^{1-α} + (1-p)^α p^{1-α} ).
    """
    alpha = as_float(alpha)
    p = as_float(p, like=alpha)
    lp, lq = torch.log(p), torch.log1p(-p)
    t1 = alpha * lp + (1.0 - alpha) * lq
    t2 = alpha * lq + (1.0 - alpha) * lp
    return log_add(t1, t2) / (alpha - 1.0)
