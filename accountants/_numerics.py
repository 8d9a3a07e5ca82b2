"""Log-space primitives in torch: the only place such tricks live.

All functions are float64-friendly, broadcast, and follow the device and dtype of their inputs.
Branches are guarded so that the branch not taken never sees a NaN- or inf-making input
(pytorch#52248), which keeps autograd clean for calibration.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .errors import InputError

__all__ = [
    "LN2",
    "as_float",
    "log1mexp",
    "log_add",
    "log_binom",
    "log_expm1",
    "log_ndtr",
    "log_sub",
    "logsumexp_signed",
]

LN2 = math.log(2.0)


def as_float(x: Tensor | float, like: Tensor | None = None) -> Tensor:
    """Convert to a floating tensor: float64 unless ``x`` (or ``like``) is already floating."""
    if isinstance(x, Tensor):
        if x.is_floating_point():
            return x
        return x.to(torch.float64)
    if like is not None and like.is_floating_point():
        return torch.as_tensor(x, dtype=like.dtype, device=like.device)
    device = like.device if like is not None else None
    return torch.as_tensor(x, dtype=torch.float64, device=device)


def log1mexp(x: Tensor) -> Tensor:
    """log(1 - e^x) for x <= 0, accurate on both sides of -ln 2 (Mächler 2012).

    Returns -inf at x = 0 and NaN for x > 0.
    """
    near = x > -LN2
    a = torch.where(near, x, torch.full_like(x, -1.0))
    b = torch.where(near, torch.full_like(x, -1.0), x)
    return torch.where(near, torch.log(-torch.expm1(a)), torch.log1p(-torch.exp(b)))


def log_expm1(x: Tensor) -> Tensor:
    """log(e^x - 1) for x > 0, without overflow for large x or cancellation for small x."""
    big = x > 30.0
    small = torch.where(big, torch.ones_like(x), x)
    return torch.where(
        big, x + torch.log1p(-torch.exp(-torch.where(big, x, torch.ones_like(x)))), torch.log(torch.expm1(small))
    )


def log_add(a: Tensor, b: Tensor) -> Tensor:
    """log(e^a + e^b), with -inf handled (log_add(-inf, -inf) = -inf)."""
    m = torch.maximum(a, b)
    finite = torch.isfinite(m)
    m_safe = torch.where(finite, m, torch.zeros_like(m))
    out = m_safe + torch.log(torch.exp(a - m_safe) + torch.exp(b - m_safe))
    return torch.where(finite, out, m)


def log_sub(a: Tensor, b: Tensor) -> Tensor:
    """log(e^a - e^b) for a >= b. Raises ValueError if any b > a (a negative difference)."""
    if bool((b > a).any()):
        raise InputError("log_sub: the second argument exceeds the first (log of a negative number)")
    a_safe = torch.where(torch.isfinite(a), a, torch.zeros_like(a))
    d = torch.where(torch.isfinite(a), b - a_safe, torch.full_like(a, -math.inf))
    out = a_safe + log1mexp(torch.clamp(d, max=0.0))
    return torch.where(torch.isneginf(a), a, out)


def logsumexp_signed(log_abs: Tensor, sign: Tensor, dim: int = -1) -> tuple[Tensor, Tensor]:
    """Signed log-sum-exp: returns (log|Σ s_i e^{l_i}|, sign of the sum) along ``dim``.

    Entries with log_abs = -inf contribute nothing. A sum that is exactly zero returns
    (-inf, 0).
    """
    m = torch.amax(log_abs, dim=dim, keepdim=True)
    m_safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    s = torch.sum(sign * torch.exp(log_abs - m_safe), dim=dim)
    m_out = m_safe.squeeze(dim)
    return m_out + torch.log(torch.abs(s)), torch.sign(s)


def log_binom(n: Tensor, k: Tensor) -> Tensor:
    """log |C(n, k)| for real n >= 0 and integer k >= 0 via lgamma.

    For integer n and k > n the coefficient is 0 and -inf is returned. For real n the
    generalised coefficient n(n-1)…(n-k+1)/k! is used; its sign is (-1)^(k - ceil(n)) for
    k > n and + otherwise (see :func:`binom_sign`).
    """
    n = as_float(n)
    k = as_float(k, like=n)
    # |Γ(n+1)/(Γ(k+1)Γ(n-k+1))|, with lgamma returning log|Γ| for negative non-integers.
    nk = n - k + 1.0
    is_pole = (nk <= 0) & (nk == torch.round(nk))
    nk_safe = torch.where(is_pole, torch.ones_like(nk), nk)
    out = torch.lgamma(n + 1.0) - torch.lgamma(k + 1.0) - torch.lgamma(nk_safe)
    return torch.where(is_pole, torch.full_like(out, -math.inf), out)


def binom_sign(n: Tensor, k: Tensor) -> Tensor:
    """Sign of the generalised binomial coefficient C(n, k) for real n >= 0, integer k >= 0."""
    n = as_float(n)
    k = as_float(k, like=n)
    # For k <= n every factor (n - j), j < k, is positive. For k > n the number of negative
    # factors is k - floor(n) - 1 (the factors n - j with j > n).
    neg = torch.clamp(k - torch.floor(n) - 1.0, min=0.0)
    return torch.where(torch.remainder(neg, 2.0) == 1.0, -torch.ones_like(neg), torch.ones_like(neg))


def log_ndtr(x: Tensor) -> Tensor:
    """log Φ(x), accurate in both tails (torch.special.log_ndtr)."""
    return torch.special.log_ndtr(x)
