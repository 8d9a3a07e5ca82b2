"""General subsampling-without-replacement RDP bound of Wang, Balle, Kasiviswanathan (2019).  Bound: upper.

Wang, Balle, Kasiviswanathan, "Subsampled Rényi Differential Privacy and Analytical Moments
Accountant" (arXiv:1808.00087v2), Thm 9 with the Gaussian-specific Thm 27 terms, and Cor. 10
(convex interpolation of the cumulant generating function) at fractional orders. It holds for
any base mechanism under replace-one; here the base mechanism is one DP-SGD step on a
fixed-size batch, whose clipped sum moves by up to **2C** under replace-one. Its RDP is therefore
ε(j) = j·2²/(2σ²) = 2j/σ² with σ the noise multiplier (std/C).

IMPORTANT: peer libraries (dp_accounting ``SampledWithoutReplacementDpEvent`` with
``GaussianDpEvent(noise_multiplier)``) read σ as std/sensitivity and so evaluate this bound at
sensitivity C, which under-reports the RDP by ~4× (google/differential-privacy#378). Passing
σ/2 to them reproduces the numbers below; users of this function pass σ itself.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .. import validate as check
from .._numerics import as_float, log_binom, log_expm1
from ._moments import _gather, _tables  # the shared, cancellation-free moment engine

__all__ = ["rdp_wor_wang2019_gaussian"]

_MAX_ELEMS = 1 << 22


def _log_a_integer(alpha: Tensor, q: Tensor, sigma: Tensor) -> Tensor:
    """log A_α (= (α−1)·bound) at integer α ≥ 1 (1-D inputs), Thm 9 + Thm 27 terms.

    A_α = 1 + q² C(α,2) min{4(e^{ε(2)} − 1), 2e^{ε(2)}}
            + Σ_{j=3}^{α} q^j C(α,j) min{4 B̃_j, 2 e^{(j−1)ε(j)}},
    ε(j) = 2j/σ², B̃_j = M_j (j even) or (M_{j−1} M_{j+1})^{1/2} (j odd), M_j the j-th forward
    difference of ℓ ↦ e^{(ℓ−1)ε(ℓ)} at 0, i.e. Birrell et al.'s central moment M_{σ,j}.
    """
    out = torch.zeros_like(alpha)
    big = alpha >= 2
    if not bool(big.any()):
        return out
    idx = torch.nonzero(big).squeeze(-1)
    a, qq, s = alpha[idx], q[idx], sigma[idx]
    amax = int(a.max().item())
    tab = _tables(s, amax)
    eps2 = 4.0 / s**2
    lq = torch.log(qq)
    second = 2.0 * lq + log_binom(a, torch.full_like(a, 2.0)) + torch.minimum(
        math.log(4.0) + log_expm1(eps2), math.log(2.0) + eps2
    )
    res = torch.empty_like(a)
    j_all = torch.arange(3, max(amax, 3) + 1, dtype=a.dtype, device=a.device)
    step = max(1, _MAX_ELEMS // max(1, j_all.numel()))
    for st in range(0, a.numel(), step):
        sl = slice(st, st + step)
        aa, lqq, ss = a[sl, None], lq[sl, None], s[sl, None]
        j = j_all.expand(aa.shape[0], -1)
        lbj = _gather(tab.lb, tab.row[sl], j)
        term = torch.minimum(math.log(4.0) + lbj, math.log(2.0) + 2.0 * j * (j - 1.0) / ss**2)
        term = term + j * lqq + log_binom(aa, j)
        term = torch.where(j <= aa, term, torch.full_like(term, -math.inf))
        body = torch.logsumexp(torch.cat([second[sl, None], term], dim=-1), dim=-1)
        res[sl] = torch.logaddexp(torch.zeros_like(body), body)
    out[idx] = res
    return out


def rdp_wor_wang2019_gaussian(alpha: Tensor | float, sigma: Tensor | float, q: Tensor | float) -> Tensor:
    """One-step RDP of fixed-size WOR-subsampled DP-SGD under replace-one.  Bound: upper.

    Wang, Balle, Kasiviswanathan (arXiv:1808.00087v2) Thm 9 (with the Thm 27 terms for the
    Gaussian) at integer α; Cor. 10 (linear interpolation of (α−1)ε(α), valid because the CGF is
    convex) between integers; ε(2) for 1 < α < 2. ``sigma`` is the noise multiplier (std/C);
    the replace-one sensitivity 2C is applied here (base RDP 2α/σ²), so the result equals
    dp_accounting 0.6.0's ``SampledWithoutReplacementDpEvent`` at noise multiplier σ/2.

    Args:
        alpha: orders > 1; sigma: > 0; q = b/n in (0, 1]; broadcast together (orders last).

    Returns:
        The bound with the broadcast shape. q = 1 gives the unsubsampled 2α/σ².
    """
    a = as_float(alpha)
    s = as_float(sigma, like=a)
    q = as_float(q, like=a)
    check.in_range(1.0, None, closed="neither", alpha=a)
    check.finite(alpha=a)
    check.positive(sigma=s)
    check.in_range(0.0, 1.0, closed="right", q=q)
    a, s, q = torch.broadcast_tensors(a, s, q)
    shape = a.shape
    a, s, q = a.reshape(-1), s.reshape(-1), q.reshape(-1)
    lo = torch.clamp(torch.floor(a), min=1.0)
    hi = torch.clamp(torch.ceil(a), min=2.0)
    q_safe = torch.where(q >= 1.0, torch.full_like(q, 0.5), q)
    # One evaluation for both ends: stack (lo, hi) then split.
    both = _log_a_integer(torch.cat([lo, hi]), torch.cat([q_safe, q_safe]), torch.cat([s, s]))
    k_lo, k_hi = both[: a.numel()], both[a.numel():]
    t = torch.where(hi > lo, (a - lo) / (hi - lo), torch.zeros_like(a))
    out = ((1.0 - t) * k_lo + t * k_hi) / (a - 1.0)  # Cor. 10
    out = torch.where(q >= 1.0, 2.0 * a / s**2, out)
    return out.reshape(shape)
