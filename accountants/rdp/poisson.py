"""RDP of the Poisson-subsampled Gaussian mechanism under add/remove.  Bound: exact.

Mironov, Talwar, Zhang, "Rényi Differential Privacy of the Sampled Gaussian Mechanism"
(arXiv:1908.10530v1). With μ0 = N(0, σ²), μ1 = N(1, σ²) and μ = (1-q)μ0 + qμ1, the RDP of
one step under add/remove is

    ε(α) = log A_α / (α - 1),   A_α = E_{z~μ0}[(1 - q + q L(z))^α],  L = μ1/μ0 = e^{(2z-1)/(2σ²)},

the removal direction D_α(μ‖μ0) dominating the addition direction for every α > 1
(ibid. Thm 5). Both evaluations below compute A_α − 1 as a sum of *non-negative* parts so that
tiny RDP values (q = 1e-7) keep full relative precision; the naive log(A_α) loses everything
to cancellation once A_α − 1 < 1e-10.

* Integer α (ibid. §3.3, Eq. (4)): A_α − 1 = Σ_{k=2}^{α} C(α,k)(1-q)^{α-k} q^k (e^{(k²-k)/(2σ²)} − 1),
  because Σ_k C(α,k)(1-q)^{α-k}q^k = 1. Every term is positive: one log-sum-exp.
* Fractional α (ibid. §3.3, the two erfc series split at z0 = σ² log((1-q)/q) + 1/2): we expand
  the non-negative integrand h = (1+q(L-1))^α − 1 − αq(L−1) (E_{μ0}[L − 1] = 0) on each side
  of z0. Beyond index ⌊α⌋+2 both series alternate with terms of strictly decreasing magnitude
  (binomial ratio |α−i|/(i+1) < 1, and the remaining ratio e^{−L+i/σ²}Φ((z0−i−1)/σ)/Φ((z0−i)/σ)
  is non-decreasing in i with limit 1, by (log Φ)'' ∈ (−1, 0)). So the remainder after N
  terms lies between 0 and the first omitted term; we add its positive part, and the result is
  a certified upper bound whatever N is. Terms are taken in doubling blocks until the remainder
  is below 1e-15 of the sum, or 4096 terms.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from .._numerics import as_float, log_expm1, log_ndtr

__all__ = ["log_a_minus_one", "rdp_poisson_gaussian"]

_MAX_ELEMS = 1 << 22  # tensor elements per chunk (≈ 32 MiB in float64) to bound memory
_SMALL_ELEMS = 1 << 16  # order buckets are merged up to this many padded elements (op overhead)
_BLOCK = 16  # series terms in the first block past ⌊α⌋ + 2; later blocks double
# Cap on series terms. The certified remainder keeps any truncation sound; the cap only costs
# tightness where the tail converges polynomially (α → 1 with z0 ≈ 0), e.g. ≤ 2e-10 relative at
# α = 1.01, q = 0.2, σ = 0.9, where ε at the optimal order is unaffected.
_MAX_TERMS = 4096
_REL_TOL = 1e-11
# Orders above this are bounded by the unsubsampled Gaussian α/(2σ²) (valid at every order, see
# :func:`rdp_poisson_gaussian`): the series would need ~α terms, and such orders are never optimal.
MAX_SERIES_ORDER = 1 << 14


def rdp_poisson_gaussian(alpha: Tensor | float, q: Tensor | float, sigma: Tensor | float) -> Tensor:
    """One-step RDP ε(α) of the Poisson-subsampled Gaussian, add/remove.  Bound: exact (upper).

    Mironov, Talwar, Zhang (arXiv:1908.10530v1) §3.3; fractional orders with a certified
    series remainder (see module docstring). ``sigma`` is the noise std divided by the clip
    norm (sensitivity 1 under add/remove).

    Args:
        alpha: orders > 1, shape (..., A) — any shape broadcastable with q and sigma.
        q: sampling rate in (0, 1].
        sigma: noise multiplier > 0.

    Returns:
        ε(α) with the broadcast shape, float64 unless the inputs are another float dtype,
        on the inputs' device.
    """
    alpha = as_float(alpha)
    q = as_float(q, like=alpha)
    sigma = as_float(sigma, like=alpha)
    alpha, q, sigma = torch.broadcast_tensors(alpha, q, sigma)
    # The unsubsampled Gaussian α/(2σ²) bounds the subsampled one at every order (joint
    # quasi-convexity of Rényi divergence, van Erven & Harremoës 2014 Thm 13: both directions are
    # mixtures of pairs at divergence 0 and α/(2σ²)). It is used where the series cannot be
    # evaluated: orders above MAX_SERIES_ORDER (including +inf) and σ so small that 1/σ²
    # overflows float64 (σ ≲ 1e-154); there it is +inf or huge, never an underflowed 0.
    gauss = alpha / (2.0 * sigma * sigma)
    series = (q < 1.0) & (alpha <= MAX_SERIES_ORDER) & torch.isfinite(gauss)
    out = gauss.clone()
    if bool(series.any()):
        lam1 = log_a_minus_one(alpha[series], q[series], sigma[series])
        # log A = log(1 + (A - 1)) = logaddexp(0, log(A - 1)), exact for tiny and huge A − 1.
        val = torch.logaddexp(torch.zeros_like(lam1), lam1) / (alpha[series] - 1.0)
        # A NaN means the series broke down (overflowing exponents): the Gaussian bound holds.
        out[series] = torch.where(torch.isnan(val), gauss[series], val)
    return out


def log_a_minus_one(alpha: Tensor, q: Tensor, sigma: Tensor) -> Tensor:
    """log(A_α − 1) for the Poisson-subsampled Gaussian (broadcast inputs of equal shape).

    Entries with q = 1 are returned as NaN-free placeholders; callers replace them. Orders above
    :data:`MAX_SERIES_ORDER` (or not finite) are not evaluated: NaN, which every caller maps to a
    valid fallback bound (never to 0).
    """
    shape = alpha.shape
    a = alpha.reshape(-1)
    qf = q.reshape(-1)
    s = sigma.reshape(-1)
    q_safe = torch.where(qf >= 1.0, torch.full_like(qf, 0.5), qf)
    out = torch.full_like(a, math.nan)
    evaluable = a <= MAX_SERIES_ORDER
    is_int = (a == torch.round(a)) & evaluable
    if bool(is_int.any()):
        idx = torch.nonzero(is_int).squeeze(-1)
        out[idx] = _integer(a[idx], q_safe[idx], s[idx])
    if bool((~is_int & evaluable).any()):
        idx = torch.nonzero(~is_int & evaluable).squeeze(-1)
        out[idx] = _fractional(a[idx], q_safe[idx], s[idx])
    return out.reshape(shape)


# --------------------------------------------------------------------------- integer orders


def _bucket_groups(alpha: Tensor, width: Callable[[float], int]) -> list[list[Tensor]]:
    """Indices of ``alpha`` by ⌈log₂ α⌉ bucket (ascending), so that a padded (element × term)
    tensor of a bucket wastes at most about 2×; ``width(max α)`` is a bucket's padded row length.

    Consecutive buckets are merged into one group (a list of the buckets' indices) while the
    group has at most ``_SMALL_ELEMS`` padded elements: for a few configurations the cost is per
    tensor operation, not per element.
    """
    hi = torch.ceil(torch.log2(alpha)).to(torch.int64)
    perm = torch.argsort(hi, stable=True)
    _, counts = torch.unique_consecutive(hi[perm], return_counts=True)
    groups: list[list[Tensor]] = []
    n = 0
    for part in torch.split(perm, counts.tolist()):
        w = width(float(alpha[part].max().item()))
        if not groups or (n + part.numel()) * w > _SMALL_ELEMS:
            groups.append([])
            n = 0
        groups[-1].append(part)
        n += part.numel()
    return groups


def _integer(alpha: Tensor, q: Tensor, sigma: Tensor) -> Tensor:
    """log Σ_{k=2}^{α} C(α,k)(1-q)^{α-k} q^k expm1((k²-k)/(2σ²)); 1-D inputs, integer α.

    Each term splits as LB[α, k] + α·log(1−q) + H[(q, σ), k] with LB = log C(α, k) and
    H = k·log(q/(1−q)) + log expm1((k²−k)/(2σ²)). LB is built once per call from one lgamma table
    of the integers (the same operations as :func:`log_binom`, so the same values), for the
    distinct orders of each bucket only; H once per distinct (q, σ). The
    (element × k) work is two gathers, two adds and an exp, in chunks of at most ``_MAX_ELEMS``.
    """
    out = torch.empty_like(alpha)
    kmax_all = int(alpha.max().item())
    # lgamma(j) for j = 0..kmax+1 (j = 0 is a pole, never gathered: k ≤ α below).
    lg = torch.lgamma(torch.arange(0, kmax_all + 2, dtype=alpha.dtype, device=alpha.device))
    l1q_e = torch.log1p(-q)
    cfg, ic = _unique_pairs(q, sigma)
    k_all = torch.arange(2, kmax_all + 1, dtype=alpha.dtype, device=alpha.device)
    # H for every k once per call (each group slices its first K columns), unless that is large.
    h_full = _h_table(cfg, k_all) if cfg.shape[0] * k_all.numel() <= _MAX_ELEMS else None
    # Bucket by α so that padding the k axis wastes at most 2× (the buckets are powers of two,
    # each evaluated as one padded tensor, chunked for memory; no loop over orders).
    for parts in _bucket_groups(alpha, lambda amax: int(amax) - 1):
        idx = parts[0] if len(parts) == 1 else torch.cat(parts)
        ua, ia = torch.unique(alpha[idx], return_inverse=True)
        kmax = int(ua[-1].item())
        k = torch.arange(2, kmax + 1, dtype=alpha.dtype, device=alpha.device)
        lb = _log_binom_table(lg, ua, k)  # (U, K), −inf where k > α
        step = max(1, _MAX_ELEMS // max(1, k.numel()))
        for start in range(0, idx.numel(), step):
            j = idx[start : start + step]
            if h_full is not None:
                h = h_full[ic[j], : k.numel()]
            else:  # many configurations: H for this chunk's distinct ones only (bounded memory)
                uc, inv = torch.unique(ic[j], return_inverse=True)
                h = _h_table(cfg[uc], k)[inv]
            terms = lb[ia[start : start + step]] + h
            out[j] = torch.logsumexp(terms, dim=-1) + alpha[j] * l1q_e[j]
    return out


def _unique_pairs(q: Tensor, sigma: Tensor) -> tuple[Tensor, Tensor]:
    """Distinct rows (q, σ) as a (C, 2) tensor and each element's row; 1-D sorts only (a
    row-wise ``unique(dim=0)`` is several times slower)."""
    uq, iq = torch.unique(q, return_inverse=True)
    us, is_ = torch.unique(sigma, return_inverse=True)
    key, ic = torch.unique(iq * us.numel() + is_, return_inverse=True)
    return torch.stack([uq[key // us.numel()], us[key % us.numel()]], dim=-1), ic


def _h_table(cfg: Tensor, k: Tensor) -> Tensor:
    """H[(q, σ), k] = k·log(q/(1−q)) + log expm1((k²−k)/(2σ²)) for rows (q, σ) of ``cfg``: (C, K)."""
    uq, us = cfg[:, 0:1], cfg[:, 1:2]
    return k * (torch.log(uq) - torch.log1p(-uq)) + log_expm1((k * k - k) / (2.0 * us * us))


def _log_binom_table(lg: Tensor, n: Tensor, k: Tensor) -> Tensor:
    """log C(n, k) for integer-valued n (U,) and k (K,) from the table lg[j] = lgamma(j).

    Bit-identical to ``log_binom(n[:, None], k)``: the same lgamma values combined in the same
    order, −inf where k > n (the pole of Γ(n − k + 1)).
    """
    ni = n.to(torch.int64)[:, None]
    ki = k.to(torch.int64)
    nk = ni - ki + 1  # (U, K)
    pole = nk <= 0
    out = lg[ni + 1] - lg[ki + 1] - lg[torch.where(pole, torch.ones_like(nk), nk)]
    return torch.where(pole, torch.full_like(out, -math.inf), out)


# ------------------------------------------------------------------------ fractional orders


def _e2_over_sq(u: Tensor) -> Tensor:
    """(e^{-u} − 1 + u)/u², accurate for small u ≥ 0."""
    small = u < 1e-3
    us = torch.where(small, torch.ones_like(u), u)
    direct = (torch.expm1(-us) + us) / (us * us)
    series = 0.5 - u / 6.0 + u * u / 24.0 - u**3 / 120.0
    return torch.where(small, series, direct)


def _r_over_sq(q: Tensor) -> Tensor:
    """−(log(1−q) + q)/q² = 1/2 + q/3 + q²/4 + …, accurate for small q; q < 1."""
    small = q < 1e-3
    qs = torch.where(small, torch.full_like(q, 0.5), q)
    direct = -(torch.log1p(-qs) + qs) / (qs * qs)
    series = 0.5 + q / 3.0 + q * q / 4.0 + q**3 / 5.0 + q**4 / 6.0
    return torch.where(small, series, direct)


def _expm1_over_x(x: Tensor) -> Tensor:
    """expm1(x)/x, equal to 1 at x = 0."""
    small = x.abs() < 1e-5
    xs = torch.where(small, torch.ones_like(x), x)
    return torch.where(small, 1.0 + x / 2.0 + x * x / 6.0, torch.expm1(xs) / xs)


def _signed_merge(la: Tensor, sa: Tensor, lb: Tensor, sb: Tensor) -> tuple[Tensor, Tensor]:
    """(log|x+y|, sign(x+y)) for x = sa·e^{la}, y = sb·e^{lb}."""
    m = torch.maximum(la, lb)
    m_safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    v = sa * torch.exp(la - m_safe) + sb * torch.exp(lb - m_safe)
    return m_safe + torch.log(v.abs()), torch.sign(v)


def _fractional(alpha: Tensor, q: Tensor, sigma: Tensor) -> Tensor:
    """log(A_α − 1) for non-integer α, 1-D inputs, 0 < q < 1; certified upper bound."""
    out = torch.empty_like(alpha)
    # The first block must reach ⌊α⌋ + 2, so orders are bucketed by ⌈log2 α⌉: a chunk never
    # pays for terms only its largest order needs. Each element's block schedule is its bucket's
    # (first block to the bucket's largest ⌊α⌋ + 2 + _BLOCK), also inside a merged group, so a
    # value does not depend on which other orders or configurations share the call.
    for parts in _bucket_groups(alpha, lambda amax: 2 * (math.floor(amax) + 3 + _BLOCK)):
        idx = parts[0] if len(parts) == 1 else torch.cat(parts)
        first = torch.cat(
            [torch.full_like(p, int(torch.floor(alpha[p]).max().item()) + 2 + _BLOCK) for p in parts]
        )
        step = max(1, _MAX_ELEMS // (2 * int(first.max().item())))
        for start in range(0, idx.numel(), step):
            j = idx[start : start + step]
            out[j] = _fractional_chunk(alpha[j], q[j], sigma[j], first[start : start + step])
    return out


def _block_terms(a: Tensor, q: Tensor, s: Tensor, z0: Tensor, i: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Log-magnitudes of the below-z0 and above-z0 series terms at indices i, and their sign.

    Shapes: a, q, s, z0 are (E, 1); i is (B,). Below: index i ≥ 2 (i = 0, 1 are folded into the
    constant terms); above: index j = i ≥ 0. Pieces that depend on one axis only are computed
    once on that axis (lgamma(α+1) per order, lgamma(i+1) per index).
    """
    ai = a - i  # (E, B); never a non-positive integer since α is not an integer
    lb = torch.lgamma(a + 1.0) - torch.lgamma(i + 1.0) - torch.lgamma(ai + 1.0)  # log|C(α, i)|
    neg = torch.clamp(i - torch.floor(a) - 1.0, min=0.0)  # number of negative factors of C(α, i)
    sg = 1.0 - 2.0 * torch.remainder(neg, 2.0)
    l1q, lq = torch.log1p(-q), torch.log(q)
    inv2s2 = 1.0 / (2.0 * s * s)
    below = lb + ai * l1q + i * lq + (i * i - i) * inv2s2 + log_ndtr((z0 - i) / s)
    below = torch.where(i >= 2, below, torch.full_like(below, -math.inf))
    above = lb + i * l1q + ai * lq + (ai * ai - ai) * inv2s2 + log_ndtr((ai - z0) / s)
    return below, above, sg


def _fractional_chunk(alpha: Tensor, q: Tensor, sigma: Tensor, first_end: Tensor) -> Tensor:
    a, qq, s = alpha[:, None], q[:, None], sigma[:, None]
    z0 = s * s * (torch.log1p(-qq) - torch.log(qq)) + 0.5  # crossover where qL = 1 − q
    u = a * qq
    # Constant parts of the below-z0 series (i = 0, 1, minus 1 + αq(L−1)):
    #   c0 = (1−q)^α − 1 + αq ≥ 0, written as q²[α² E2(αq)/(αq)² − α e^{−αq} R(q)(expm1(−αq²R)/(−αq²R))]
    r = _r_over_sq(qq)
    c0_over_q2 = a * a * _e2_over_sq(u) - a * torch.exp(-u) * r * _expm1_over_x(-a * qq * qq * r)
    log_c0 = 2.0 * torch.log(qq) + torch.log(torch.clamp(c0_over_q2, min=0.0))
    #   c1 = αq((1−q)^{α−1} − 1) ≤ 0
    log_c1 = torch.log(a) + torch.log(qq) + torch.log(-torch.expm1((a - 1.0) * torch.log1p(-qq)))
    # Constant parts of the above-z0 series: −(1 − αq)Φ(−z0/σ) − αqΦ((1 − z0)/σ).
    one_m_u = 1.0 - u
    const_l = torch.cat(
        [
            log_c0 + log_ndtr(z0 / s),
            log_c1 + log_ndtr((z0 - 1.0) / s),
            torch.log(one_m_u.abs()) + log_ndtr(-z0 / s),
            torch.log(u) + log_ndtr((1.0 - z0) / s),
        ],
        dim=-1,
    )
    const_s = torch.cat([torch.ones_like(u), -torch.ones_like(u), -torch.sign(one_m_u), -torch.ones_like(u)], dim=-1)
    acc_l, acc_s = _signed_logsumexp(const_l, const_s)

    # First block reaches past ⌊α⌋ + 2, where alternation and monotone decrease start; later
    # blocks double. Each element follows its own schedule [lo, hi] (equal within a bucket).
    tail = torch.full_like(alpha, -math.inf)  # log of the positive part of the remainder bound
    lo = torch.zeros_like(first_end)
    hi = first_end.clone()
    cap = torch.clamp(first_end, min=_MAX_TERMS)
    active = torch.arange(alpha.numel(), device=alpha.device)
    while active.numel() > 0:
        lo_a, hi_a = lo[active], hi[active]
        l0, l1, h0, h1 = (int(v) for v in torch.stack([lo_a.min(), lo_a.max(), hi_a.min(), hi_a.max()]).tolist())
        i = torch.arange(l0, h1 + 1, dtype=alpha.dtype, device=alpha.device)
        bounds = None if (l0 == l1 and h0 == h1) else (lo_a, hi_a)
        # Later blocks are up to _MAX_TERMS wide: split the active rows so that no temporary
        # exceeds _MAX_ELEMS elements (rows are independent, so the values do not depend on it).
        step = max(1, _MAX_ELEMS // (2 * i.numel()))
        done = torch.cat(
            [
                _series_block(
                    a, qq, s, z0, i, active[r : r + step], acc_l, acc_s, tail,
                    None if bounds is None else (bounds[0][r : r + step], bounds[1][r : r + step]),
                )
                for r in range(0, active.numel(), step)
            ]
        )
        done = done | (hi_a >= _MAX_TERMS)
        lo[active] = hi_a
        hi[active] = torch.minimum(hi_a + torch.clamp(hi_a - lo_a, min=_BLOCK) * 2, cap[active])
        active = active[~done]
    total_l, total_s = _signed_merge(acc_l, acc_s, tail[:, None].squeeze(-1), torch.ones_like(acc_s))
    # h ≥ 0 so A − 1 ≥ 0; a non-positive total can only come from rounding at a value ~0. A NaN
    # (overflowing exponents at tiny σ) is passed on, so the caller falls back to a valid bound.
    bad = torch.isnan(total_l) | torch.isnan(total_s)
    out = torch.where(total_s > 0, total_l, torch.full_like(total_l, -math.inf))
    return torch.where(bad, torch.full_like(total_l, math.nan), out)


def _series_block(
    a: Tensor,
    qq: Tensor,
    s: Tensor,
    z0: Tensor,
    i: Tensor,
    rows: Tensor,
    acc_l: Tensor,
    acc_s: Tensor,
    tail: Tensor,
    bounds: tuple[Tensor, Tensor] | None = None,
) -> Tensor:
    """Add the series terms lo ≤ i < hi of ``rows`` into (acc_l, acc_s) in place; set ``tail`` to
    the positive part of the remainder bound (the term at hi). Returns, per row, whether that
    remainder is below the relative tolerance. ``bounds``: per-row (lo, hi); None: lo = i[0] and
    hi = i[-1] for every row."""
    below, above, sg = _block_terms(a[rows], qq[rows], s[rows], z0[rows], i)
    sg = sg.expand_as(below)
    if bounds is None:
        body_l = torch.cat([below[:, :-1], above[:, :-1]], dim=-1)
        body_s = torch.cat([sg[:, :-1], sg[:, :-1]], dim=-1)
        last_sign, t_b, t_a = sg[:, -1], below[:, -1], above[:, -1]
    else:  # rows of merged buckets: mask each row to its own block, take its own last term
        lo, hi = bounds
        off = i[0]
        keep = (i >= lo[:, None]) & (i < hi[:, None])
        ninf = torch.full_like(below, -math.inf)
        body_l = torch.cat([torch.where(keep, below, ninf), torch.where(keep, above, ninf)], dim=-1)
        body_s = torch.cat([sg, sg], dim=-1)
        col = (hi.to(i.dtype) - off).to(torch.int64)[:, None]
        last_sign, t_b, t_a = (x.gather(1, col).squeeze(1) for x in (sg, below, above))
    bl, bs = _signed_logsumexp(body_l, body_s)
    acc_l[rows], acc_s[rows] = _signed_merge(acc_l[rows], acc_s[rows], bl, bs)
    # Remainder after index hi: between 0 and the term at index hi (each series).
    pos_b = torch.where(last_sign > 0, t_b, torch.full_like(t_b, -math.inf))
    pos_a = torch.where(last_sign > 0, t_a, torch.full_like(t_a, -math.inf))
    tail[rows] = torch.logaddexp(pos_b, pos_a)
    return torch.logaddexp(t_b, t_a) <= acc_l[rows] + math.log(_REL_TOL)


def _signed_logsumexp(log_abs: Tensor, sign: Tensor) -> tuple[Tensor, Tensor]:
    m = torch.amax(log_abs, dim=-1, keepdim=True)
    m_safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    v = torch.sum(sign * torch.exp(log_abs - m_safe), dim=-1)
    return m_safe.squeeze(-1) + torch.log(v.abs()), torch.sign(v)
