"""Central moments M_{σ,k} of the Gaussian likelihood ratio, shared by the fixed-size bounds.

Private module: the cancellation-free moment engine of Birrell et al. 2024 (arXiv:2408.10456v1)
App. B Eq. (44), used by :mod:`.fixed_size` (Thm 3.3/3.4/3.6/C.9) and :mod:`.without_replacement`
(Wang et al. 2019 Thm 27 terms). It lives apart so that neither of those modules imports the other.

M_{σ,k} = E[(e^Y − 1)^k], Y ~ N(−2/σ², 4/σ²), is an alternating binomial sum that loses every
digit to cancellation in float64 for large σ or k. It is evaluated directly only where the
cancellation costs < 2 digits, and otherwise by trapezoidal quadrature of the entire integrand
(e^y − 1)^k φ(y) in log space, which converges geometrically (both agree with 50-digit mpmath to
~1e-15 relative; see the tests). Tables are cached per σ and gathered by index.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch
from torch import Tensor

from .. import validate as check
from .._numerics import as_float, log_expm1, logsumexp_signed
from .poisson import _log_binom_table

__all__ = ["log_central_moments"]

_LOG_2PI = math.log(2.0 * math.pi)
_DIRECT_MAX_LOSS = math.log(100.0)  # direct sum accepted when cancellation costs < 2 digits
_QUAD_WIDTH = 40.0  # half-width of the quadrature window, in standard deviations √c
_QUAD_PER_SD = 10.0  # nodes per standard deviation (aliasing error ~ e^{-2π²·100})
_MAX_ELEMS = 1 << 22  # tensor elements per chunk (≈ 32 MiB in float64)


def _direct_moments(c: Tensor, kmax: int) -> tuple[Tensor, Tensor, Tensor]:
    """log|M_k|, sign(M_k) and the cancellation loss log(Σ|terms|/|Σ terms|), k = 0..kmax.

    M_k = Σ_{ℓ=0}^{k} (−1)^{k−ℓ} C(k,ℓ) e^{cℓ(ℓ−1)/2}  (ibid. Eq. (44), c = 4/σ²). c: (U,).
    """
    k = torch.arange(0, kmax + 1, dtype=c.dtype, device=c.device)
    ll = k
    # (K, L); −inf for ℓ > k. From one lgamma table of the integers: the values of
    # log_binom(k[:, None], ll[None, :]) (bit for bit) at a fraction of the cold cost.
    lb = _log_binom_table(torch.lgamma(torch.arange(0, kmax + 2, dtype=c.dtype, device=c.device)), k, ll)
    sg = torch.where(torch.remainder(k[:, None] - ll[None, :], 2.0) == 0, 1.0, -1.0).to(c.dtype)
    t = lb[None] + c[:, None, None] * (ll * (ll - 1.0) / 2.0)  # (U, K, L)
    mag, sign = logsumexp_signed(t, sg.expand_as(t), dim=-1)
    loss = torch.logsumexp(t, dim=-1) - mag
    return mag, sign, loss


def _mode(c: Tensor, k: Tensor, positive: bool) -> Tensor:
    """Mode of g(y) = k log|e^y − 1| − (y + c/2)²/(2c) on y > 0 (or y < 0), by bisection.

    g is strictly concave on each half-line (log|e^y − 1| is concave there), so g' is decreasing
    and has one root per side. The bisection runs until the bracket is below 1e-6 √c (the
    quadrature's node spacing is √c/10): the modes are ≈ ±√(kc) for small c, and a fixed count
    of halvings of the O(10) bracket left them ~1e-35 off at c = 4e-80 (σ = 1e40), which then
    cost ~1e6 quadrature nodes per moment.
    """
    span = k * c + 10.0 * torch.sqrt(c) + c + 10.0
    lo = torch.zeros_like(span) if positive else -span
    hi = span if positive else torch.zeros_like(span)
    # ≤ ~1,100 halvings even at c ≈ 1e-308 (every float64 c > 0 here: tinier c is answered apart).
    steps = int(torch.ceil(torch.log2((span / (1e-6 * torch.sqrt(c))).max())).item()) if c.numel() else 0
    for _ in range(max(120, steps + 1)):
        mid = 0.5 * (lo + hi)
        if positive:
            g = k / (-torch.expm1(-mid)) - (mid + 0.5 * c) / c
        else:
            g = -k / torch.expm1(-mid) - (mid + 0.5 * c) / c
        up = g > 0
        lo = torch.where(up, mid, lo)
        hi = torch.where(up, hi, mid)
    return 0.5 * (lo + hi)


def _quad_moments(c: Tensor, k: Tensor) -> tuple[Tensor, Tensor]:
    """log|M_k| and sign by trapezoidal quadrature of (e^y − 1)^k φ(y), Y ~ N(−c/2, c).

    c, k: 1-D of equal length (one moment per entry). The integrand is entire, so the trapezoid
    rule on a window of ±40 s.d. around both one-sided modes (outside it the integrand is below
    e^{-800} of its peak, by the concavity of g) converges geometrically; 10 nodes per s.d. put
    the aliasing error far below float64 resolution for every k we need.
    """
    sc = torch.sqrt(c)
    a = _mode(c, k, positive=False) - _QUAD_WIDTH * sc
    b = _mode(c, k, positive=True) + _QUAD_WIDTH * sc
    n = int(torch.ceil(((b - a) / (sc / _QUAD_PER_SD)).max()).item()) + 1
    out_l = torch.empty_like(c)
    out_s = torch.empty_like(c)
    step = max(1, _MAX_ELEMS // n)
    u = torch.linspace(0.0, 1.0, n, dtype=c.dtype, device=c.device)
    for s in range(0, c.numel(), step):
        sl = slice(s, s + step)
        cc, kk, aa, bb = c[sl, None], k[sl, None], a[sl, None], b[sl, None]
        y = aa + (bb - aa) * u
        pos = y > 0
        # log|e^y − 1| without overflow: y + log(1 − e^{−y}) for y > 0, log(1 − e^y) for y < 0.
        yp = torch.where(pos, y, torch.ones_like(y))
        yn = torch.where(pos, -torch.ones_like(y), y)
        la = torch.where(pos, yp + torch.log(-torch.expm1(-yp)), torch.log(-torch.expm1(yn)))
        lg = kk * la - (y + 0.5 * cc) ** 2 / (2.0 * cc) - 0.5 * (_LOG_2PI + torch.log(cc))
        odd = torch.remainder(kk, 2.0) == 1.0
        sg = torch.where((~pos) & odd, -torch.ones_like(y), torch.ones_like(y))
        mag, sign = logsumexp_signed(lg, sg, dim=-1)
        out_l[sl] = mag + torch.log((bb - aa).squeeze(-1) / (n - 1))
        out_s[sl] = sign
    return out_l, out_s


@functools.lru_cache(maxsize=64)
def _moment_table(sigmas: tuple[float, ...], kmax: int) -> tuple[Tensor, Tensor]:
    """(log|M_{σ,k}|, sign) for each σ in ``sigmas`` and k = 0..kmax, float64 on the CPU."""
    c = 4.0 / torch.tensor(sigmas, dtype=torch.float64) ** 2
    # Outside (0, inf) the moments are not evaluable in float64 (σ ≳ 1e154: c underflows to 0, the
    # true M_k ≤ e^{k²c}−1 is below every float; σ ≲ 1e-154: c overflows): rows are answered as
    # M_k = 0 (k ≥ 1) or +inf, and the callers' other bounds (2α/σ², = 0 or +inf there) decide.
    tiny, huge = c <= 0.0, ~torch.isfinite(c)
    c = torch.where(tiny | huge, torch.ones_like(c), c)
    mag, sign, loss = _direct_moments(c, kmax)
    # M_0 = 1, M_1 = 0 exactly; M_2 = e^c − 1 in closed form (no cancellation with expm1).
    mag[:, 0], sign[:, 0] = 0.0, 1.0
    if kmax >= 1:
        mag[:, 1], sign[:, 1] = -math.inf, 0.0
    if kmax >= 2:
        mag[:, 2], sign[:, 2] = log_expm1(c), 1.0
    bad = loss > _DIRECT_MAX_LOSS
    bad[:, :3] = False
    if bool(bad.any()):
        iu, ik = torch.nonzero(bad, as_tuple=True)
        ql, qs = _quad_moments(c[iu], ik.to(torch.float64))
        mag[iu, ik], sign[iu, ik] = ql, qs
    mag[tiny, 1:], sign[tiny, 1:] = -math.inf, 0.0
    mag[huge, 2:], sign[huge, 2:] = math.inf, 1.0
    return mag, sign


def log_central_moments(sigma: Tensor | float, kmax: int) -> tuple[Tensor, Tensor]:
    """log|M_{σ,k}| and sign(M_{σ,k}) for k = 0..kmax.  Exact to ~1e-14 relative.

    Birrell et al. (arXiv:2408.10456v1) App. B Eq. (44): M_{σ,k} = ∫(ρ − 1)^k N_{0,σ²/4},
    ρ = N_{1,σ²/4}/N_{0,σ²/4}; equivalently E[(e^Y − 1)^k] with Y ~ N(−2/σ², 4/σ²).

    Args:
        sigma: noise multipliers > 0, any shape S.
        kmax: largest k ≥ 0.

    Returns:
        (log|M|, sign), each of shape S + (kmax + 1,), float64 on ``sigma``'s device.
    """
    sigma = as_float(sigma)
    check.positive(sigma=sigma)
    check.integer(0, None, kmax=kmax)
    flat = sigma.detach().reshape(-1).to(torch.float64).cpu()
    uniq, inv = torch.unique(flat, return_inverse=True)
    mag, sign = _moment_table(tuple(uniq.tolist()), int(kmax))
    shape = (*tuple(sigma.shape), int(kmax) + 1)
    return (mag[inv].reshape(shape).to(sigma.device, sigma.dtype),
            sign[inv].reshape(shape).to(sigma.device, sigma.dtype))


class _Tables(NamedTuple):
    """Moment tables for the unique σ of a call, and the row of each element."""

    lm: Tensor  # (U, K+2) log|M_k|
    sm: Tensor  # (U, K+2) sign M_k
    lb: Tensor  # (U, K+1) log B̃_k (Eq. (47))
    row: Tensor  # (E,) row per element


def _tables(sigma: Tensor, kmax: int) -> _Tables:
    """Moment tables up to k = kmax + 1 and B̃ up to kmax for the 1-D tensor ``sigma``."""
    # bucket for cache hits: multiples of 128 (powers of two padded kmax = 1,025 to 2,048, 4× the table)
    kmax = 128 * math.ceil(max(kmax, 8) / 128)
    flat = sigma.detach().to(torch.float64).cpu()
    uniq, inv = torch.unique(flat, return_inverse=True)
    mag, sign = _moment_table(tuple(uniq.tolist()), kmax + 1)
    mag = mag.to(sigma.device, sigma.dtype)
    sign = sign.to(sigma.device, sigma.dtype)
    # B̃_j = M_j for even j; (M_{j−1} M_{j+1})^{1/2} for odd j (Cauchy–Schwarz, Eq. (47)).
    j = torch.arange(0, kmax + 1, device=sigma.device)
    odd = (j % 2) == 1
    lb = torch.where(odd, 0.5 * (mag[:, (j - 1).clamp(min=0)] + mag[:, j + 1]), mag[:, j])
    return _Tables(mag, sign, lb, inv.to(sigma.device))


def _gather(table: Tensor, row: Tensor, idx: Tensor) -> Tensor:
    """table[row[e], idx[e, ...]] with idx clamped into range (masked by the caller)."""
    idx = idx.clamp(0, table.shape[1] - 1).to(torch.long)
    r = row.reshape((-1,) + (1,) * (idx.dim() - 1))
    return table[r, idx]
