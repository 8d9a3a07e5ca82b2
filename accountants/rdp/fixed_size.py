"""RDP of DP-SGD with fixed-size batches, with and without replacement.  Bound: upper.

Birrell, Ebrahimi, Behnia, Pacheco, "Differentially Private Stochastic Gradient Descent with
Fixed-Size Minibatches: Tighter RDP Guarantees with or without Replacement", NeurIPS 2024
(arXiv:2408.10456v1). Notation: ``sigma`` is the noise multiplier (noise std on the SUM of
clipped per-example gradients divided by the clip norm C, Opacus' convention); a fixed-size
batch changes by a *replacement* under both relations, so the batch sum moves by up to 2C and
every bound below is written with σ̃/r = σ/2 (ibid. Eq. (37)). Users never halve σ themselves.

Samplers covered (each step independent of the previous ones):

* FSwoR: a uniformly random b-subset of the n records at every step (``FixedSize(b, n)``).
* FSwR: b i.i.d. uniform indices at every step (``FixedSize(b, n, replace=True)``).
* Poisson (replace-one only here; add/remove is in :mod:`accountants.rdp.poisson`).

A DataLoader that shuffles once per epoch and walks through disjoint batches is NOT any of
these (it is a shuffling mechanism) and is not covered.

Theorems (one function each):

* :func:`rdp_fswor_add_remove` — Thm 3.1 evaluated exactly: (1/(α−1)) log H_{α,σ}(q), where
  H_{α,σ}(q) is the Poisson-subsampled-Gaussian moment at noise σ/2 (App. B Eq. (39); Mironov et
  al. 2019). Exact for every real α (certified series), hence the tightest a/r bound here.
* :func:`rdp_fswor_add_remove_taylor` — Thm 3.2/3.3: Taylor expansion of H to order m with
  the computable remainder bound (App. B Eqs. (41)–(54)).
* :func:`rdp_fswor_replace_one` — Thm 3.4 (App. C Eq. (91)).
* :func:`rdp_poisson_replace_one` — Thm C.9 (App. C.1 Eq. (98)).
* :func:`rdp_fswr_add_remove_upper` — Thm 3.6 / App. D.1 general form (Eqs. (106)–(108)).
* :func:`rdp_fswr_add_remove_lower` — Thm 3.7 / App. D.2 (Eqs. (116)–(125)); a LOWER bound on
  the worst-case one-step RDP, integer orders only, to show the with-replacement phase transition.
* :func:`fixed_size_step_rdp` — the tightest valid bound per order (elementwise minimum over the
  applicable theorems) and which theorem attained it; the accountant's handlers call this.

Numerics: the central moments M_{σ,k} = E[(e^Y − 1)^k], Y ~ N(−2/σ², 4/σ²) (Eq. (44)) are an
alternating binomial sum that loses every digit to cancellation in float64 for large σ or k (the
authors' code returns NaN at σ = 50). :func:`log_central_moments` (private module
:mod:`._moments`, shared with :mod:`.without_replacement`) evaluates the sum directly only
where its cancellation costs < 2 digits, and otherwise by trapezoidal quadrature of the entire
integrand (e^y − 1)^k φ(y) in log space, which converges geometrically (both agree with 50-digit
mpmath to ~1e-15 relative; see the tests). Tables are cached per σ and gathered by index, so
the bounds are vectorised over orders and configurations. Everything is in log space; a
Taylor bound that fails (non-positive or non-finite) is +inf and loses the minimum.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from typing import NamedTuple

import torch
from torch import Tensor

from .. import validate as check
from .._numerics import as_float, binom_sign, log_binom, log_expm1, logsumexp_signed
from ..errors import InputError, UnsupportedError
from ..sampling import Neighbouring
from ._moments import _gather, _Tables, _tables, log_central_moments
from .poisson import MAX_SERIES_ORDER, log_a_minus_one, rdp_poisson_gaussian
from .without_replacement import rdp_wor_wang2019_gaussian

__all__ = [
    "DEFAULT_M",
    "FixedSizeRdp",
    "fixed_size_step_rdp",
    "log_central_moments",
    "poisson_replace_one_step_rdp",
    "rdp_fswor_add_remove",
    "rdp_fswor_add_remove_taylor",
    "rdp_fswor_replace_one",
    "rdp_fswr_add_remove_lower",
    "rdp_fswr_add_remove_upper",
    "rdp_gaussian_replacement",
    "rdp_poisson_replace_one",
]

DEFAULT_M = (3, 4, 5, 6)
"""Taylor orders whose minimum is taken by default. Every m ≥ 3 is valid; larger m is not always
better (σ = 2, q = 0.01, α = 5.5: m = 3 gives 0.00355, m = 5 gives 0.742), so take the minimum."""

_MAX_ELEMS = 1 << 22  # tensor elements per chunk (≈ 32 MiB in float64)
_LOWER_MAX_STATES = 1 << 24  # cap on (levels × sum-states × indices) for the exact lower bound


# ------------------------------------------------------------------------------- helpers


def _flat(alpha: Tensor | float, *others: Tensor | float) -> tuple[tuple[int, ...], list[Tensor]]:
    a = as_float(alpha)
    rest = [as_float(o, like=a) for o in others]
    out = torch.broadcast_tensors(a, *rest)
    return tuple(out[0].shape), [t.reshape(-1) for t in out]


def _check_common(alpha: Tensor, sigma: Tensor, q: Tensor | None = None, *, q_below_one: bool = False,
                  max_order: float | None = MAX_SERIES_ORDER) -> None:
    check.in_range(1.0, max_order, closed="neither" if max_order is None else "right", alpha=alpha)
    if max_order is not None:   # the step bounds (max_order=None) answer α = +inf with 2α/σ² = inf
        check.finite(alpha=alpha)
    check.positive(sigma=sigma)
    if q is not None:
        if q_below_one:
            check.in_range(0.0, 1.0, closed="neither", q=q)
        else:
            check.in_range(0.0, 1.0, closed="right", q=q)


def _m_values(m: int | Iterable[int]) -> tuple[int, ...]:
    ms = (m,) if isinstance(m, int) and not isinstance(m, bool) else tuple(m)  # type: ignore[arg-type]
    if not ms:
        raise InputError("m must be an integer >= 3 or a non-empty iterable of them; got an empty iterable")
    for v in ms:
        check.integer(3, None, m=v)
    return tuple(int(v) for v in ms)


def _rdp_from_log_hm1(log_hm1: Tensor, sign: Tensor, alpha: Tensor) -> Tensor:
    """(1/(α−1)) log(1 + (H − 1)) from log|H − 1| and its sign; +inf where the sign is not +.

    H ≥ 1 always (Jensen), so a non-positive bound on H − 1 can only come from rounding in a
    failing expansion; +inf makes another theorem win the minimum instead.
    """
    val = torch.logaddexp(torch.zeros_like(log_hm1), log_hm1) / (alpha - 1.0)
    ok = (sign > 0) & ~torch.isnan(val)
    return torch.where(ok, val, torch.full_like(val, math.inf))


def rdp_gaussian_replacement(alpha: Tensor | float, sigma: Tensor | float) -> Tensor:
    """RDP of one unsubsampled step whose batch sum moves by ≤ 2C: 2α/σ².  Bound: upper (exact).

    Mironov 2017 (arXiv:1702.07476v3) Prop. 7 with sensitivity 2 in units of C. Valid for FSwoR
    under both relations and for Poisson under replace-one, whatever q (sampling only helps).
    """
    alpha = as_float(alpha)
    sigma = as_float(sigma, like=alpha)
    return 2.0 * alpha / sigma / sigma  # not / sigma**2: it overflows for σ ≳ 1e154, and ∞/∞ = NaN at α = ∞


# ----------------------------------------------------------------- FSwoR, add/remove


def rdp_fswor_add_remove(alpha: Tensor | float, sigma: Tensor | float, q: Tensor | float) -> Tensor:
    """One-step RDP of FSwoR DP-SGD under add/remove, Thm 3.1 evaluated exactly.  Bound: upper.

    Birrell et al. (arXiv:2408.10456v1) Thm 3.1 / App. A Eq. (38)–(39): ε(α) ≤ (1/(α−1)) log
    H_{α,σ}(q), q = b/n, and H_{α,σ}(q) is exactly the Poisson-subsampled Gaussian moment A_α at
    noise σ/2 (Mironov et al. 2019), evaluated by :func:`rdp_poisson_gaussian` (exact at integer
    α, certified series at fractional α). At integer α the bound is attained (App. A: all other
    gradients anti-parallel), so it is also the exact worst-case RDP there.

    Args:
        alpha: orders > 1; sigma: noise multipliers > 0; q: b/n in (0, 1]. Broadcast together.
            n is the size of the training set; the bound covers neighbours of size n ± 1 in
            both orders (App. A, Eqs. (34)–(36): the add case uses b/(n+1) ≤ b/n).
    """
    alpha = as_float(alpha)
    sigma = as_float(sigma, like=alpha)
    q = as_float(q, like=alpha)
    _check_common(alpha, sigma, q)
    return rdp_poisson_gaussian(alpha, q, sigma / 2.0)


def _taylor_log_hm1(a: Tensor, q: Tensor, tab: _Tables, m: int) -> tuple[Tensor, Tensor]:
    """log|bound on H_{α,σ}(q) − 1| and sign, Thm 3.2 (Eqs. (41), (48)–(54)); 1-D inputs, q < 1."""
    lq = torch.log(q)
    # Σ_{k=2}^{m−1} q^k C(α,k) M_k  (Eq. (41): q^k/k! Π_{j<k}(α−j) = q^k C(α,k)), signed.
    k = torch.arange(2, m, dtype=a.dtype, device=a.device)
    terms = k * lq[:, None] + log_binom(a[:, None], k) + _gather(tab.lm, tab.row, k.expand(a.numel(), -1))
    signs = binom_sign(a[:, None], k) * _gather(tab.sm, tab.row, k.expand(a.numel(), -1))
    # Remainder |R_{α,σ,m}(q)| (Eqs. (48)–(54)), P_m = Π_{j<m}|α−j| = m!|C(α,m)| (0 for integer α < m).
    log_pm = math.lgamma(m + 1) + log_binom(a, torch.full_like(a, float(m)))
    lbm = _gather(tab.lb, tab.row, torch.full_like(a, m))
    case1 = a > m
    ca = torch.ceil(a)
    big = ca - m  # ⌈α⌉ − m ≥ 1 in case 1
    lmax = int(big.max().item()) if bool(case1.any()) else 0
    ell = torch.arange(0, max(lmax, 0) + 1, dtype=a.dtype, device=a.device)
    bigc = torch.where(case1, big, torch.zeros_like(big))[:, None]
    coef = (ell * lq[:, None] + torch.lgamma(bigc + 1.0) - torch.lgamma(torch.clamp(bigc - ell + 1.0, min=1.0))
            - torch.lgamma(m + ell + 1.0) + _gather(tab.lb, tab.row, (ell + m).expand(a.numel(), -1)))
    coef = torch.where(ell <= bigc, coef, torch.full_like(coef, -math.inf))
    inner1 = torch.logaddexp(torch.logsumexp(coef, dim=-1), lbm - math.lgamma(m + 1))
    r1 = m * lq + log_pm + inner1  # Eq. (50)
    r2 = m * lq - math.lgamma(m + 1) + (a - m) * torch.log1p(-q) + log_pm + lbm  # Eq. (54) with B̃
    log_r = torch.where(case1, r1, r2)
    all_l = torch.cat([terms, log_r[:, None]], dim=-1)
    all_s = torch.cat([signs, torch.ones_like(log_r)[:, None]], dim=-1)
    return logsumexp_signed(all_l, all_s, dim=-1)


def rdp_fswor_add_remove_taylor(
    alpha: Tensor | float, sigma: Tensor | float, q: Tensor | float, m: int | Iterable[int] = DEFAULT_M
) -> Tensor:
    """One-step RDP of FSwoR DP-SGD under add/remove, Taylor form.  Bound: upper.

    Birrell et al. (arXiv:2408.10456v1) Thm 3.2 + Thm 3.3 with T = 1 (App. B Eqs. (41)–(54)):
    H_{α,σ}(q) ≤ 1 + Σ_{k=2}^{m−1} q^k C(α,k) M_{σ,k} + |R|bound, the remainder in the form of
    Eq. (50) when α > m and Eq. (54) (with the computable B̃, not B) when α ≤ m. Exact at integer
    α < m. With several m the elementwise minimum is returned (each is valid).
    Never tighter than :func:`rdp_fswor_add_remove`, which evaluates H exactly; kept because it is
    the paper's published accountant and a check on the exact kernel.

    Args:
        alpha: orders > 1; sigma: > 0; q: in (0, 1); broadcast together.
        m: expansion order(s), integers ≥ 3.

    Returns:
        The bound with the broadcast shape; +inf where the expansion fails numerically.
    """
    ms = _m_values(m)
    shape, (a, s, qq) = _flat(alpha, sigma, q)
    _check_common(a, s, qq, q_below_one=True)
    tab = _tables(s, int(torch.ceil(a).max().item()) + 1)
    out = torch.full_like(a, math.inf)
    for mm in ms:
        lh, sg = _taylor_log_hm1(a, qq, tab, mm)
        out = torch.minimum(out, _rdp_from_log_hm1(lh, sg, a))
    return out.reshape(shape)


# ------------------------------------------------------------ replace-one (FSwoR and Poisson)


def _ro_log_fm1(a: Tensor, q: Tensor, tab: _Tables, m: int, log_second: Tensor) -> Tensor:
    """log of the bound on F_α(q) − 1 in Eq. (91) (or (98)); all terms are positive. 1-D inputs."""
    lq = torch.log(q)
    l1q = torch.log1p(-q)
    parts = [2.0 * lq + torch.log(a) + torch.log(a - 1.0) + log_second]
    # Σ_{k=3}^{m−1} (q^k/k!) F̃_{α,σ,k} (Eqs. (79)–(83)), F̃_k = (α−1)α^{k−1} B̃_k [c_k + Σ_j C(k,j)|X_j − 1|],
    # c_k = 4 (k even) or 3 (k odd), X_j = (α/(α−1)) Π_{ℓ<j}(1 − ℓ/α) Π_{ℓ<k−j}(1 + (ℓ−1)/α).
    for k in range(3, m):
        inner = torch.full_like(a, 4.0 if k % 2 == 0 else 3.0)
        for j in range(0, k + 1):
            x = a / (a - 1.0)
            for ell in range(j):
                x = x * (1.0 - ell / a)
            for ell in range(k - j):
                x = x * (1.0 + (ell - 1.0) / a)
            inner = inner + math.comb(k, j) * (x - 1.0).abs()
        lbk = _gather(tab.lb, tab.row, torch.full_like(a, k))
        parts.append(k * lq - math.lgamma(k + 1) + torch.log(a - 1.0) + (k - 1) * torch.log(a) + lbk + torch.log(inner))
    # Ẽ_{α,σ,m}(q) (Eqs. (84)–(90)):
    # (q^m/m!) Σ_{j=0}^{m} (1−q)^{−(α+m−j−1)} C(m,j) [Π_{ℓ<j}|α−ℓ|] [Π_{ℓ<m−j}(α+ℓ−1)] K_j.
    lbm = _gather(tab.lb, tab.row, torch.full_like(a, m))
    ca = torch.ceil(a)
    e = a.numel()
    ell_max = int(ca.max().item()) + 1
    ell = torch.arange(0, ell_max, dtype=a.dtype, device=a.device)
    lb_ell = _gather(tab.lb, tab.row, (ell + m).expand(e, -1))  # (E, L)
    e_terms = []
    for j in range(0, m + 1):
        jj = torch.full_like(a, float(j))
        log_fall = math.lgamma(j + 1) + log_binom(a, jj)  # log Π_{ℓ<j}|α−ℓ|; −inf if integer α < j
        log_rise = torch.lgamma(a + m - j - 1.0) - torch.lgamma(a - 1.0)  # log Π_{ℓ<m−j}(α+ℓ−1)
        top = torch.clamp(ca - j, min=0.0)[:, None]  # ⌈α⌉ − j
        coef = (ell * lq[:, None] + torch.lgamma(top + 1.0) + math.lgamma(m + 1)
                - torch.lgamma(torch.clamp(top - ell + 1.0, min=1.0)) - torch.lgamma(m + ell + 1.0) + lb_ell)
        coef = torch.where(ell <= top, coef, torch.full_like(coef, -math.inf))
        k_pos = torch.logaddexp(lbm, torch.logsumexp(coef, dim=-1))
        k_neg = (a - j) * l1q + lbm
        log_k = torch.where(a - j > 0, k_pos, k_neg)
        e_terms.append(-(a + m - j - 1.0) * l1q + math.log(math.comb(m, j)) + log_fall + log_rise + log_k)
    log_e = m * lq - math.lgamma(m + 1) + torch.logsumexp(torch.stack(e_terms, dim=-1), dim=-1)
    parts.append(log_e)
    return torch.logsumexp(torch.stack(parts, dim=-1), dim=-1)


def _ro_bound(alpha: Tensor | float, sigma: Tensor | float, q: Tensor | float, m: int | Iterable[int],
              poisson: bool) -> Tensor:
    ms = _m_values(m)
    shape, (a, s, qq) = _flat(alpha, sigma, q)
    _check_common(a, s, qq, q_below_one=True)
    if poisson:
        # Thm C.9: second-order term e^{1/σ²} − e^{−1/σ²} = e^{−1/σ²} expm1(2/σ²); σ → 2σ elsewhere.
        log_second = -1.0 / s**2 + log_expm1(2.0 / s**2)
        tab = _tables(2.0 * s, int(torch.ceil(a).max().item()) + max(ms) + 1)
    else:
        # Thm 3.4: e^{4/σ²} − e^{2/σ²} = e^{2/σ²} expm1(2/σ²).
        log_second = 2.0 / s**2 + log_expm1(2.0 / s**2)
        tab = _tables(s, int(torch.ceil(a).max().item()) + max(ms) + 1)
    out = torch.full_like(a, math.inf)
    for mm in ms:
        lf = _ro_log_fm1(a, qq, tab, mm, log_second)
        out = torch.minimum(out, _rdp_from_log_hm1(lf, torch.ones_like(lf), a))
    return out.reshape(shape)


def rdp_fswor_replace_one(
    alpha: Tensor | float, sigma: Tensor | float, q: Tensor | float, m: int | Iterable[int] = DEFAULT_M
) -> Tensor:
    """One-step RDP of FSwoR DP-SGD under replace-one.  Bound: upper.

    Birrell et al. (arXiv:2408.10456v1) Thm 3.4 / App. C Eq. (91): (1/(α−1)) log[1 +
    q²α(α−1)(e^{4/σ²} − e^{2/σ²}) + Σ_{k=3}^{m−1} (q^k/k!) F̃_{α,σ,k} + Ẽ_{α,σ,m}(q)], with F̃
    from Eqs. (79)–(83) and Ẽ from Eqs. (84)–(90). Minimum over the given m (each valid). The
    replace-one sensitivity 2C is built in (σ̃/r = σ/2). Not exact even at integer α.

    Args:
        alpha: orders > 1; sigma: > 0; q = b/n in (0, 1); broadcast together.
        m: expansion order(s), integers ≥ 3.
    """
    return _ro_bound(alpha, sigma, q, m, poisson=False)


def rdp_poisson_replace_one(
    alpha: Tensor | float, sigma: Tensor | float, q: Tensor | float, m: int | Iterable[int] = DEFAULT_M
) -> Tensor:
    """One-step RDP of Poisson-subsampled DP-SGD under replace-one.  Bound: upper.

    Birrell et al. (arXiv:2408.10456v1) Thm C.9 / App. C.1 Eq. (98): as Thm 3.4 with the exact
    second-order coefficient 2α(α−1)(e^{1/σ²} − e^{−1/σ²}) (Eq. (96), attained by anti-parallel
    records) and σ → 2σ in F̃ and Ẽ. Minimum over the given m.

    Args:
        alpha: orders > 1; sigma: > 0; q: Poisson rate in (0, 1); broadcast together.
        m: expansion order(s), integers ≥ 3.
    """
    return _ro_bound(alpha, sigma, q, m, poisson=True)


# ------------------------------------------------------------------------------ FSwR


def _log_binomial_weights(b: int, n: int, dtype: torch.dtype, device: torch.device | None) -> Tensor:
    """log a_j = log[C(b,j) n^{−j} (1 − 1/n)^{b−j}], j = 0..b (App. D Eq. (105))."""
    j = torch.arange(0, b + 1, dtype=dtype, device=device)
    bb = torch.tensor(float(b), dtype=dtype, device=device)
    return log_binom(bb, j) - j * math.log(n) + (b - j) * math.log1p(-1.0 / n)


# Largest batch for sampling with replacement: Thm 3.6 with K = b evaluates b mixture components
# per order, each with its own moment table, so cost and memory grow like b² (b = 1,024 already
# takes about a minute and several GB); b = 1e18 used to ask for 8e18 bytes.
MAX_WR_BATCH = 1 << 10


def _check_wr(b: int, n: int, cap: int | None = MAX_WR_BATCH) -> None:
    check.integer(1, cap, batch_size=b)
    check.integer(2, None, dataset_size=n)


def rdp_fswr_add_remove_upper(
    alpha: Tensor | float,
    sigma: Tensor | float,
    batch_size: int,
    dataset_size: int,
    *,
    K: int | None = None,
    m: int | Iterable[int] | None = 4,
) -> Tensor:
    """One-step RDP of FSwR DP-SGD (b i.i.d. uniform indices) under add/remove.  Bound: upper.

    Birrell et al. (arXiv:2408.10456v1) Thm 3.6 in the general form of App. D.1 Eqs. (106)–(108),
    with q̃ = (1 + a_0/Σ_{j=1}^{K} a_j)^{−1} (so ã_0 = 0), written as in the authors' code:

        (1/(α−1)) log[1 + Σ_{j≤K} ã_j min(H_{α,σ/j}(q̃) − 1, e^{2α(α−1)j²/σ²} − 1)
                        + Σ_{j>K} a_j (e^{2α(α−1)j²/σ²} − 1)],

    a_j = C(b,j) n^{−j}(1 − 1/n)^{b−j}, ã_j = a_j/q̃. (The min is valid since H(q̃) ≤ H(1).) The
    decomposition (107) is an identity for every 1 ≤ K ≤ b, so K = 1 is allowed too.

    Args:
        alpha: orders > 1; sigma: > 0 (broadcast together).
        batch_size: b ≥ 1 draws per step; dataset_size: n ≥ 2 (covers neighbours n ± 1).
        K: mixture components bounded by H; default: the per-order minimum over K = min(max(m) − 1, b)
            (the authors' default) and K = b (the theorem as stated).
        m: Taylor order(s) ≥ 3 used to bound H_{α,σ/j}(q̃) (the paper's accountant); ``None``
            evaluates H exactly instead (H_{α,σ/j} is the Poisson moment at noise σ/(2j)), which
            is never looser.

    Returns:
        The bound with the broadcast shape of alpha and sigma. Beyond the phase transition (see
        :func:`rdp_fswr_add_remove_lower`) it is huge but correct.
    """
    _check_wr(batch_size, dataset_size)
    b, n = int(batch_size), int(dataset_size)
    ms = None if m is None else _m_values(m)
    shape, (a, s) = _flat(alpha, sigma)
    _check_common(a, s)
    if K is None:
        # Eq. (107) is an identity for every 1 ≤ K ≤ b, so each K gives a valid bound: take the
        # per-order minimum of the authors' default and K = b (up to 22 % tighter on held-out
        # settings, e.g. σ = 3.3, b = 13, n = 7700, α = 3: 34.94 → 28.56). Every K would cost
        # b evaluations; these two are the ones that win in practice.
        ks = sorted({min((max(ms) if ms else 4) - 1, b), b})
        vals = torch.stack([_fswr_upper_k(a, s, b, n, k, ms) for k in ks])
        vals = torch.where(torch.isnan(vals), torch.full_like(vals, math.inf), vals)
        return vals.amin(0).reshape(shape)
    check.integer(1, b, K=K)
    return _fswr_upper_k(a, s, b, n, int(K), ms).reshape(shape)


def _fswr_upper_k(a: Tensor, s: Tensor, b: int, n: int, K: int, ms: tuple[int, ...] | None) -> Tensor:
    """The bound of :func:`rdp_fswr_add_remove_upper` at one K (1-D inputs)."""
    la = _log_binomial_weights(b, n, a.dtype, a.device)  # (b+1,)
    j = torch.arange(0, b + 1, dtype=a.dtype, device=a.device)
    # Worst case of component j: log(e^{2α(α−1)j²/σ²} − 1), shape (E, b+1).
    lw = log_expm1(torch.clamp(2.0 * (a * (a - 1.0) / s**2)[:, None] * j**2, min=1e-300))
    log_s1k = torch.logsumexp(la[1 : K + 1], dim=0)
    log_qt = log_s1k - torch.logaddexp(la[0], log_s1k)  # log q̃
    qt = torch.exp(log_qt)
    parts = [la[K + 1 :] + lw[:, K + 1 :]] if K < b else []
    jk = torch.arange(1, K + 1, dtype=a.dtype, device=a.device)
    ee = a.numel()
    aa = a[:, None].expand(ee, K).reshape(-1)
    ss = (s[:, None] / jk).reshape(-1)
    qq = torch.full_like(aa, float(qt))
    if ms is None:
        lh = log_a_minus_one(aa, qq, ss / 2.0)
        lh = torch.where(qq >= 1.0, log_expm1(2.0 * aa * (aa - 1.0) / ss**2), lh)
    elif float(qt) < 1.0:
        tab = _tables(ss, int(torch.ceil(aa).max().item()) + 1)
        lh = torch.full_like(aa, math.inf)
        for mm in ms:
            l_m, s_m = _taylor_log_hm1(aa, qq, tab, mm)
            lh = torch.minimum(lh, torch.where(s_m > 0, l_m, torch.full_like(l_m, math.inf)))
    else:
        lh = torch.full_like(aa, math.inf)
    lh = torch.minimum(lh.reshape(ee, K), lw[:, 1 : K + 1])
    parts.append(la[1 : K + 1] - log_qt + lh)
    total = torch.logsumexp(torch.cat(parts, dim=-1), dim=-1)
    return torch.logaddexp(torch.zeros_like(total), total) / (a - 1.0)


def rdp_fswr_add_remove_lower(
    alpha: Tensor | float,
    sigma: Tensor | float,
    batch_size: int,
    dataset_size: int,
    *,
    indices: Iterable[int] | None = None,
) -> Tensor:
    """Worst-case one-step RDP of FSwR DP-SGD under add/remove, from below.  Bound: lower.

    Birrell et al. (arXiv:2408.10456v1) Thm 3.7 / App. D.2: for the pair where every record of D′
    has the same clipped gradient and the added record the opposite one, Eq. (104) is an
    equality and at integer α (Eq. (119))

        ε(α) ≥ (1/(α−1)) log E_{j_1..j_α iid Bin(b, 1/n)}[exp((4/σ²) Σ_{i<i'} j_i j_{i'})].

    Evaluated by the recursion of Eqs. (121)–(125) run forwards as a dynamic programme over the
    running sum s = j_1 + … (appending j multiplies by a_j e^{(4/σ²) s j}), with the last two
    draws in closed form F_2 (Eq. (122)). With ``indices=None`` every j is kept (the exact value
    of (119)); otherwise draws 1..α−2 are restricted to ``indices`` (the truncation T_k of Eq.
    (124), still a valid lower bound). Integer orders only; NaN at other orders.

    This shows the phase transition of sampling with replacement: beyond a threshold order (or
    batch size at fixed b/n) the RDP jumps by orders of magnitude, because the added record can
    be drawn many times. Use it to see where :func:`rdp_fswr_add_remove_upper` is meaningful.

    Args:
        alpha: orders (integers ≥ 2 give values; others NaN), any shape; sigma: scalar > 0.
        batch_size: b ≥ 1; dataset_size: n ≥ 2.
        indices: optional subset of {0..b} for the truncated recursion.

    Raises:
        ValueError: when the exact programme would exceed ~1.6e7 state updates (use ``indices``).
    """
    _check_wr(batch_size, dataset_size, cap=None)  # the programme has its own size limit
    b, n = int(batch_size), int(dataset_size)
    a = as_float(alpha)
    s = as_float(sigma, like=a)
    if s.numel() != 1:
        raise InputError(f"sigma must be a scalar for the lower bound; got shape {tuple(s.shape)}")
    check.positive(sigma=s)
    check.in_range(1.0, None, closed="neither", alpha=a)
    c = 4.0 / float(s.reshape(())) ** 2
    la = _log_binomial_weights(b, n, a.dtype, a.device)
    if indices is None:
        idx = torch.arange(0, b + 1, device=a.device)
    else:
        idx = torch.tensor(sorted(set(int(i) for i in indices)), device=a.device, dtype=torch.long)
        if idx.numel() == 0 or int(idx.min()) < 0 or int(idx.max()) > b:
            raise InputError(f"indices must be a non-empty subset of [0, {b}]")
    flat = a.reshape(-1)
    is_int = (flat == torch.round(flat)) & (flat >= 2)
    amax = int(flat[is_int].max().item()) if bool(is_int.any()) else 2
    levels = amax - 2
    work = levels * (levels * int(idx.max()) + 1) * idx.numel()
    if work > _LOWER_MAX_STATES:
        raise InputError(
            f"the lower bound at order {amax} with batch_size={b} needs ~{work:.2g} state updates "
            f"(limit {_LOWER_MAX_STATES:.2g}); pass indices=(0, 1, 2, {b}) for a truncated lower bound"
        )
    jf = torch.arange(0, b + 1, dtype=a.dtype, device=a.device)

    def f2(ssum: Tensor) -> Tensor:
        # log F_2(c, c·s) = log Σ_j a_j e^{c s j} (1 − p + p e^{c j + c s})^b, p = 1/n (Eq. (122)).
        d = c * ssum[:, None]
        x = c * jf + d  # (S, b+1), ≥ 0
        log_mgf = b * (x + torch.log(1.0 / n + (1.0 - 1.0 / n) * torch.exp(-x)))  # b log(1 − p + p e^x)
        return torch.logsumexp(la + d * jf + log_mgf, dim=-1)

    # value[L] for L = number of restricted draws already made (order α = L + 2).
    results = {0: f2(torch.zeros(1, dtype=a.dtype, device=a.device))[0]}
    logw = torch.zeros(1, dtype=a.dtype, device=a.device)  # log weight per running sum s = 0..
    idx_f = idx.to(a.dtype)
    la_idx = la[idx]
    for lvl in range(1, levels + 1):
        smax_old = logw.numel() - 1
        new = torch.full((smax_old + int(idx.max()) + 1,), -math.inf, dtype=a.dtype, device=a.device)
        sv = torch.arange(0, smax_old + 1, dtype=a.dtype, device=a.device)
        # appending draw j to running sum s multiplies by a_j e^{c s j}
        contrib = logw[:, None] + la_idx + c * sv[:, None] * idx_f  # (S_old, |idx|)
        for t, jv in enumerate(idx.tolist()):
            new[jv : jv + smax_old + 1] = torch.logaddexp(new[jv : jv + smax_old + 1], contrib[:, t])
        logw = new
        sv_new = torch.arange(0, logw.numel(), dtype=a.dtype, device=a.device)
        keep = torch.isfinite(logw)
        results[lvl] = torch.logsumexp(logw[keep] + f2(sv_new[keep]), dim=0)
    out = torch.full_like(flat, math.nan)
    for i in torch.nonzero(is_int).squeeze(-1).tolist():
        av = int(flat[i].item())
        out[i] = results[av - 2] / (av - 1.0)
    return out.reshape(a.shape)


# ----------------------------------------------------------------- tightest valid bound


class FixedSizeRdp(NamedTuple):
    """The tightest valid one-step RDP per order and which theorem attained it.

    Attributes:
        rdp: the bound, shape of the broadcast inputs (orders last).  Bound: upper.
        source: integer tensor of the same shape indexing ``names``.
        names: the theorems considered, in order.
    """

    rdp: Tensor
    source: Tensor
    names: tuple[str, ...]

    def theorem(self) -> str:
        """Names of the theorems that attained the minimum somewhere, with their order counts."""
        counts = torch.bincount(self.source.reshape(-1), minlength=len(self.names)).tolist()
        used = [f"{nm} ({cnt} orders)" for nm, cnt in zip(self.names, counts, strict=True) if cnt]
        return "min over valid bounds: " + "; ".join(used)


THM_31 = "Birrell et al. 2024 Thm 3.1 (exact H, = Poisson a/r at sigma/2)"
THM_33 = "Birrell et al. 2024 Thm 3.3 (Taylor, m in {3..6})"
THM_34 = "Birrell et al. 2024 Thm 3.4 (Taylor, m in {3..6})"
THM_C9 = "Birrell et al. 2024 Thm C.9 (Taylor, m in {3..6})"
THM_36_TAYLOR = "Birrell et al. 2024 Thm 3.6 (general form D.1, Taylor H, m in {3..6}, min over K in {m-1, b})"
THM_36_EXACT = ("Birrell et al. 2024 Thm 3.6 (general form D.1, exact H, min over K in {1..8, b}) at integer orders, "
                "interpolated by convexity (Wang et al. 2019 Cor. 10)")
WANG = "Wang-Balle-Kasiviswanathan 2019 Thm 9 (sensitivity 2C)"
GAUSS_2C = "unsubsampled Gaussian, sensitivity 2C (2*alpha/sigma^2)"
GAUSS_2BC = "unsubsampled Gaussian, sensitivity 2bC (the added record drawn b times: 2*alpha*b^2/sigma^2)"
_TAYLOR_ORDER_CAP = 256.0  # orders above this skip the Taylor bounds (cost ∝ order); other theorems still apply


def _fswr_taylor(alpha: Tensor, sigma: Tensor, q: Tensor, *, b: int, n: int, m: int) -> Tensor:
    return rdp_fswr_add_remove_upper(alpha, sigma, b, n, m=m)


def _fswr_exact_int(alpha: Tensor, sigma: Tensor, *, b: int, n: int) -> Tensor:
    cands = [rdp_fswr_add_remove_upper(alpha, sigma, b, n, K=k, m=None) for k in sorted({*range(1, min(b, 8) + 1), b})]
    return _stack_min(cands)[0]


def _interpolate_integer(fn, alpha: Tensor, sigma: Tensor) -> Tensor:
    """Upper bound at real orders from an upper bound ``fn`` valid at integer orders ≥ 2.

    (α−1)·ε(α) is the log-moment of a privacy-loss variable, convex in α with value 0 at α = 1,
    so (α−1)ε(α) ≤ (1−t)(⌊α⌋−1)ε(⌊α⌋) + t(⌈α⌉−1)ε(⌈α⌉) for every pair of neighbouring datasets
    (Wang et al. 2019, arXiv:1808.00087v2, Cor. 10); below 2 this gives ε(2). Upper bounds at the
    integers give an upper bound in between.
    """
    lo = torch.floor(alpha)
    hi = torch.clamp(torch.ceil(alpha), min=2.0)
    lo_eval = torch.clamp(lo, min=2.0)
    vals = fn(torch.cat([lo_eval, hi]), torch.cat([sigma, sigma]))
    k_lo = torch.where(lo >= 2.0, vals[: alpha.numel()] * (lo_eval - 1.0), torch.zeros_like(alpha))
    k_hi = vals[alpha.numel():] * (hi - 1.0)
    t = torch.where(hi > lo, (alpha - lo) / torch.clamp(hi - lo, min=1.0), torch.zeros_like(alpha))
    return ((1.0 - t) * k_lo + t * k_hi) / (alpha - 1.0)


def _stack_min(cands: list[Tensor]) -> tuple[Tensor, Tensor]:
    st = torch.stack([torch.where(torch.isnan(c), torch.full_like(c, math.inf), c) for c in cands], dim=0)
    val, src = torch.min(st, dim=0)
    return val, src


def _taylor_or_inf(fn, alpha: Tensor, sigma: Tensor, q: Tensor) -> Tensor:
    if float(q.max()) >= 1.0:
        return torch.full_like(alpha, math.inf)
    ok = alpha <= _TAYLOR_ORDER_CAP
    if not bool(ok.any()):
        return torch.full_like(alpha, math.inf)
    out = torch.full_like(alpha, math.inf)
    out[ok] = fn(alpha[ok], sigma[ok], q[ok])
    return out


def fixed_size_step_rdp(
    alpha: Tensor | float,
    sigma: Tensor | float,
    batch_size: int,
    dataset_size: int,
    *,
    replace: bool = False,
    neighbouring: Neighbouring | str = Neighbouring.ADD_REMOVE,
) -> FixedSizeRdp:
    """Tightest valid one-step RDP of fixed-size DP-SGD: elementwise minimum over theorems.  Bound: upper.

    * without replacement, add/remove: min(Thm 3.1 exact, 2α/σ²) — the Taylor form (Thm 3.3)
      bounds the same H from above, so it can never win and is not evaluated here.
    * without replacement, replace-one: min(Thm 3.4 over m ∈ {3..6}, Wang et al. 2019 Thm 9 at
      sensitivity 2C, 2α/σ²).
    * with replacement, add/remove: min of Thm 3.6 with Taylor-bounded H (m ∈ {3..6}, K ∈ {m − 1, b}; the paper's
      accountant; orders ≤ 256) and Thm 3.6 with exact H at integer orders (min over K ∈ {1..8, b}),
      interpolated by convexity in between. :func:`rdp_fswr_add_remove_lower` shows where the
      bound jumps (the phase transition); beyond it the values are huge but correct.
    * with replacement, replace-one: no theorem (raises UnsupportedError).

    Args:
        alpha: orders > 1; sigma: noise multipliers > 0; broadcast together (orders last).
        batch_size, dataset_size: b and n (q = b/n).
        replace: sampling with replacement.
        neighbouring: the relation.

    Returns:
        :class:`FixedSizeRdp` (rdp, source index per order, theorem names).

    Raises:
        UnsupportedError: with replacement under replace-one.
        ValueError: for b > n without replacement, or orders/σ out of range.

    >>> import torch
    >>> r = fixed_size_step_rdp(torch.tensor([2.0], dtype=torch.float64), 6.0, 120, 50_000,
    ...                         neighbouring="replace-one")
    >>> f"{r.rdp.item():.4e}", r.names[int(r.source[0])]
    ('7.0075e-07', 'Birrell et al. 2024 Thm 3.4 (Taylor, m in {3..6})')
    """
    rel = Neighbouring.parse(neighbouring)
    check.integer(1, None, batch_size=batch_size, dataset_size=dataset_size)
    b, n = int(batch_size), int(dataset_size)
    shape, (a, s) = _flat(alpha, sigma)
    _check_common(a, s, max_order=None)
    if not replace and b > n:
        raise InputError(f"batch_size must be in [1, dataset_size={n}] without replacement; got {b}")
    if replace and rel is Neighbouring.REPLACE_ONE:
        raise UnsupportedError(
            "fixed-size sampling with replacement under replace-one is not covered by any implemented "
            "theorem (Birrell et al. 2024 bound it under add/remove only)"
        )
    if replace and n < 2:
        raise UnsupportedError("fixed-size sampling with replacement needs dataset_size >= 2 under add/remove")
    if replace and b > MAX_WR_BATCH:
        raise UnsupportedError(_wr_batch_reason(b))
    if replace:
        res = _beyond_series(lambda aa, ss: _fixed_size_min(aa, ss, b, n, replace, rel), a, s,
                             trivial=(2.0 * b * b, GAUSS_2BC))
    else:
        res = _beyond_series(lambda aa, ss: _fixed_size_min(aa, ss, b, n, replace, rel), a, s)
    return FixedSizeRdp(res.rdp.reshape(shape), res.source.reshape(shape), res.names)


def _beyond_series(fn, a: Tensor, s: Tensor, *rest: Tensor,
                   trivial: tuple[float, str] = (2.0, GAUSS_2C)) -> FixedSizeRdp:
    """``fn`` at orders ≤ MAX_SERIES_ORDER with σ² in float64's range; elsewhere (α = +inf, huge
    orders, σ ≲ 1e-154 or ≳ 1e154) the unsubsampled Gaussian bound c·α/σ² of the sampler
    (c = 2: batch sum moves by ≤ 2C; c = 2b²: with replacement, ≤ 2bC), named as that theorem."""
    coef, name = trivial
    triv = coef * a / s / s  # not / (s * s): s² overflows for s ≳ 1e154, and ∞/∞ = NaN at α = ∞
    ok = (a <= MAX_SERIES_ORDER) & (triv > 0) & torch.isfinite(triv)
    if bool(ok.all()):
        return fn(a, s, *rest)
    if not bool(ok.any()):
        return FixedSizeRdp(triv, torch.zeros_like(a, dtype=torch.long), (name,))
    part = fn(a[ok], s[ok], *(r[ok] for r in rest))
    names = part.names if name in part.names else (*part.names, name)
    src = torch.full_like(a, names.index(name), dtype=torch.long)
    val = triv.clone()
    val[ok], src[ok] = part.rdp, part.source
    return FixedSizeRdp(val, src, names)


def _fixed_size_min(a: Tensor, s: Tensor, b: int, n: int, replace: bool, rel: Neighbouring) -> FixedSizeRdp:
    if replace:
        cands = [_taylor_or_inf(functools.partial(_fswr_taylor, b=b, n=n, m=mm), a, s, torch.zeros_like(a))
                 for mm in DEFAULT_M]
        cands.append(_interpolate_integer(functools.partial(_fswr_exact_int, b=b, n=n), a, s))
        val, src = _stack_min(cands)
        src = torch.where(src < len(DEFAULT_M), torch.zeros_like(src), torch.ones_like(src))
        return FixedSizeRdp(val, src, (THM_36_TAYLOR, THM_36_EXACT))
    q = torch.full_like(a, b / n)
    triv = rdp_gaussian_replacement(a, s)
    if rel is Neighbouring.ADD_REMOVE:
        cands = [rdp_fswor_add_remove(a, s, q), triv]
        names: tuple[str, ...] = (THM_31, GAUSS_2C)
    else:
        cands = [_taylor_or_inf(rdp_fswor_replace_one, a, s, q), rdp_wor_wang2019_gaussian(a, s, q), triv]
        names = (THM_34, WANG, GAUSS_2C)
    val, src = _stack_min(cands)
    return FixedSizeRdp(val, src, names)


def poisson_replace_one_step_rdp(alpha: Tensor | float, sigma: Tensor | float, q: Tensor | float) -> FixedSizeRdp:
    """Tightest valid one-step RDP of Poisson DP-SGD under replace-one.  Bound: upper.

    Elementwise min(Thm C.9 over m ∈ {3..6}, 2α/σ²); q = 1 gives 2α/σ² (no subsampling).
    """
    shape, (a, s, q) = _flat(alpha, sigma, q)
    _check_common(a, s, q, max_order=None)

    def both(aa: Tensor, ss: Tensor, qq: Tensor) -> FixedSizeRdp:
        val, src = _stack_min([_taylor_or_inf(rdp_poisson_replace_one, aa, ss, qq), rdp_gaussian_replacement(aa, ss)])
        return FixedSizeRdp(val, src, (THM_C9, GAUSS_2C))

    res = _beyond_series(both, a, s, q)
    return FixedSizeRdp(res.rdp.reshape(shape), res.source.reshape(shape), res.names)


# ------------------------------------------------------------------ accountant handlers


def _orders_and_sigma(spec, orders: Tensor) -> tuple[Tensor, Tensor]:
    return orders, torch.full_like(orders, spec.noise_multiplier)


def _fixed_size_handler(spec, orders: Tensor) -> tuple[Tensor, str]:
    a, s = _orders_and_sigma(spec, orders)
    smp = spec.sampling
    res = fixed_size_step_rdp(a, s, smp.batch_size, smp.dataset_size, replace=smp.replace,
                              neighbouring=spec.neighbouring)
    kind = "fixed-size with replacement" if smp.replace else "fixed-size without replacement"
    return res.rdp, f"{kind}, {spec.neighbouring.label}: {res.theorem()}"


def _fixed_size_unsupported(spec) -> str | None:
    smp = spec.sampling
    if smp.replace and spec.neighbouring is Neighbouring.REPLACE_ONE:
        return ("sampling=fixed-wr with neighbouring=replace-one is not covered by any implemented theorem "
                "(Birrell et al. 2024 bound sampling with replacement under add-remove only)")
    if smp.replace and smp.dataset_size < 2:
        return "sampling=fixed-wr needs dataset_size >= 2 (the add-remove neighbour must be non-empty)"
    if smp.replace and smp.batch_size > MAX_WR_BATCH:
        return _wr_batch_reason(smp.batch_size)
    return None


def _wr_batch_reason(b: int) -> str:
    return (f"sampling=fixed-wr is covered by the RDP accountant for batch_size <= {MAX_WR_BATCH} "
            f"(Birrell et al. 2024 Thm 3.6 costs ~b^2 per order); got batch_size={b}")


def _poisson_replace_one_handler(spec, orders: Tensor) -> tuple[Tensor, str]:
    a, s = _orders_and_sigma(spec, orders)
    res = poisson_replace_one_step_rdp(a, s, torch.full_like(a, spec.sampling.rate))
    return res.rdp, f"poisson, replace-one: {res.theorem()}"


def register_handlers(register) -> None:
    """Register the fixed-size and Poisson replace-one handlers with the RDP dispatch table."""
    from ..sampling import FixedSize, Poisson

    register(FixedSize, Neighbouring.ADD_REMOVE, _fixed_size_handler, unsupported=_fixed_size_unsupported)
    register(FixedSize, Neighbouring.REPLACE_ONE, _fixed_size_handler, unsupported=_fixed_size_unsupported)
    register(Poisson, Neighbouring.REPLACE_ONE, _poisson_replace_one_handler)
