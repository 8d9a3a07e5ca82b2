"""Group privacy for subsampled mechanisms in RDP (Schuchardt, Stoian, Kosmala, Günnemann 2024).

Schuchardt et al., "Group Privacy Amplification and Unified Amplification by Subsampling for
Rényi Differential Privacy" (arXiv:2403.04867). A group of K records is inserted into or
removed from the dataset (relation ≃_{±K}: x ⊂ x', |x'| = |x| + K, or the reverse). Under
Poisson subsampling with rate r the number of group members in a batch is Binomial(K, r), and
for the Gaussian mechanism the worst case reduces to one dimension (Thm 4.2, App. H):

    removal   Ψ_fwd(α) = E_{z~N(0,s²)}[R(z)^α],      insertion   Ψ_rev(α) = E_{z~N(0,s²)}[R(z)^{1−α}],
    R(z) = Σ_{k=0}^{K} Bin(k|K,r) exp((2kz − k²)/(2s²)),     ε(α) = log max(Ψ_fwd, Ψ_rev) / (α − 1),

with s = σ (noise multiplier; batch add/remove sensitivity = clip norm). The bound is tight
(Thm G.3). The baselines it improves on apply generic RDP group privacy to the tight single-record
bound: Mironov (arXiv:1702.07476v3) Prop. 2 (the paper's Prop. 2.10) and the Hölder recursion of
Mironov Prop. 11 (the paper's App. B.1, with the second coefficient corrected to 1).

Numerics (every evaluation returns Ψ − 1 ≥ 0 in log space, so tiny RDP values keep their relative
precision, as in :mod:`accountants.rdp.poisson`):

* Integer α, removal term: the multinomial closed form (App. G.5, α factors restored)
  Ψ_fwd = Σ_{l_0+…+l_K=α} (α; l) Π_k w_k^{l_k} exp((A² − Σ_k k² l_k)/(2s²)), A = Σ_k k l_k. Grouping
  the compositions by A turns it into the coefficients of two polynomial powers,
  Ψ_fwd − 1 = Σ_{A≥2} (e^{A²/(2s²)} [t^A](Σ_k w_k e^{−k²/(2s²)} t^k)^α − [t^A](Σ_k w_k t^k)^α),
  each summand ≥ 0 (A = 0, 1 contribute exactly 0). Used while α·K ≤ 128.
* Everything else (the insertion term, fractional α, large α·K): the trapezoid rule on a
  uniform grid, vectorised over configurations and grid points, of N(z|0,s²)·φ_β(R(z) − 1),
  φ_β(x) = (1+x)^β − 1 − βx ≥ 0 (β = α or 1 − α; E[R − 1] = 0). The grid covers
  [−40s, αK + 40s] for removal (the integrand peaks near z ≈ αK, far in the tail) and
  [−40s − z_rev, K + 40s] for insertion, where z_rev bounds how far left the insertion peak sits.
  The integrand is analytic in a strip: as a polynomial in u = e^{z/s²}, R has coefficients
  C(K,k) r^k (1−r)^{K−k} e^{−k²/(2s²)}, i.e. the real-rooted (1 − r + ru)^K multiplied by the
  sequence e^{−k²/(2s²)}, which preserves real roots (Laguerre: {q^{k²}}, 0 < q ≤ 1, is a multiplier
  sequence; also checked numerically for K ≤ 12). So all zeros in u are negative reals and the
  singularities of R^β sit at Im z = ±πs², whatever K. With each Gaussian bump of width s, the step
  h = min(s/2, 0.3 s²) keeps the trapezoid error ≲ e^{−60} relative (measured ≤ 1e-13 against
  finer grids and mpmath; integer-α removal needs only h = s/2: R^α is entire).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import torch
from torch import Tensor

from .. import validate as check
from .._numerics import as_float, log1mexp, log_binom, log_expm1
from ..errors import InputError, InputTypeError, UnsupportedError
from ..events import DPSGD
from ..results import EpsilonBound
from ..sampling import Neighbouring, Poisson
from .conversion import eps_from_rdp, steps_factor
from .poisson import rdp_poisson_gaussian

__all__ = [
    "compare_group_bounds",
    "rdp_fixed_size_gaussian_add_remove",
    "rdp_group_holder_recursive",
    "rdp_group_mironov",
    "rdp_poisson_gaussian_group",
    "rdp_poisson_gaussian_group_baseline",
    "rdp_poisson_gaussian_group_quadrature",
    "rdp_poisson_gaussian_group_removal_closed_form",
    "rdp_poisson_gaussian_group_terms",
    "rdp_poisson_randomized_response_group",
    "rdp_poisson_randomized_response_group_brute_force",
    "rdp_wor_randomized_response_substitution",
    "step_rdp_poisson_group",
]

MAX_GROUP_SIZE = 64  # largest K the accountant accepts: one default-grid curve takes ~7 s at K = 64, σ = 1
_MAX_ELEMS = 1 << 22  # tensor elements per chunk (≈ 32 MiB in float64)
_MAX_POINTS = 1 << 24  # quadrature points per order; beyond (σ ≲ 1e-3 at large α·K) the order gets +∞
_CLOSED_FORM_MAX_DEGREE = 128  # closed form while α·K ≤ this (its cost grows as (αK)²); quadrature beyond
_SERIES_TERMS = 24
_PESSIMISM = 1e-11  # relative upward margin on Ψ − 1 (see _to_rdp)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)

THEOREM_TIGHT = "Schuchardt et al. 2024 Thm 4.2 (tight group-K Poisson-subsampled Gaussian)"


# ------------------------------------------------------------------------------ validation


def _group_size(group_size: int) -> int:
    if not isinstance(group_size, numbers.Real):
        raise InputTypeError(f"group_size must be an integer; got {type(group_size).__name__}")
    # TypeError for bool or 2.5, ValueError outside [1, 1024] (memory grows as K·αK beyond that)
    check.integer(1, 1024, group_size=group_size)
    return int(group_size)


def _inputs(alpha: Tensor | float, q: Tensor | float, sigma: Tensor | float) -> tuple[Tensor, Tensor, Tensor]:
    alpha = as_float(alpha)
    q = as_float(q, like=alpha)
    sigma = as_float(sigma, like=alpha)
    check.in_range(1.0, None, closed="neither", alpha=alpha)
    check.finite(alpha=alpha)
    check.in_range(0.0, 1.0, closed="right", q=q)
    check.positive(sigma=sigma)
    return torch.broadcast_tensors(alpha, q, sigma)


def _log_weights(q: Tensor, K: int) -> Tensor:
    """log Bin(k | K, q), k = 0..K, on a new last axis; exact zeros (q = 1) give −inf, never NaN."""
    k = torch.arange(K + 1, dtype=q.dtype, device=q.device)
    qq = q[..., None]
    lq = torch.where(k > 0, k * torch.log(qq), torch.zeros_like(k * qq))
    l1q = torch.where(K - k > 0, (K - k) * torch.log1p(-torch.clamp(qq, max=1.0)), torch.zeros_like(k * qq))
    return log_binom(torch.full_like(k, float(K)), k) + lq + l1q


# ------------------------------------------------------------------------- closed form


def _log_psi_m1_closed(alpha: Tensor, q: Tensor, sigma: Tensor, K: int) -> Tensor:
    """log(Ψ_fwd − 1) by the multinomial closed form; flat inputs, integer α (module docstring)."""
    E = alpha.numel()
    amax = int(alpha.max().item())
    deg = amax * K + 1
    lw = _log_weights(q, K)  # (E, K+1)
    k = torch.arange(K + 1, dtype=q.dtype, device=q.device)
    lv = lw - k * k / (2.0 * sigma[:, None] ** 2)
    base = torch.cat([lv, lw], dim=0)  # (2E, K+1): both polynomials in one batch
    a2 = torch.cat([alpha, alpha])
    neg_inf = torch.full((2 * E, deg), -math.inf, dtype=q.dtype, device=q.device)
    coef = neg_inf.clone()
    coef[:, 0] = 0.0
    out = neg_inf.clone()
    # Repeated multiplication by the degree-K polynomial; the loop runs over the power, never
    # over configurations or orders (each step is one (2E, deg, K+1) log-sum-exp).
    for step in range(1, amax + 1):
        top = min(step * K + 1, deg)
        shifted = torch.stack(
            [torch.nn.functional.pad(coef[:, : top - j], (j, 0), value=-math.inf) for j in range(K + 1)], dim=-1
        )  # (2E, top, K+1): coef[n − j]
        new = torch.logsumexp(shifted + base[:, None, :], dim=-1)
        coef = neg_inf.clone()
        coef[:, :top] = new
        done = a2 == step
        out[done] = coef[done]
    log_c, log_p = out[:E], out[E:]
    A = torch.arange(deg, dtype=q.dtype, device=q.device)
    t1 = A * A / (2.0 * sigma[:, None] ** 2) + log_c
    # Each summand e^{t1} − e^{t2} ≥ 0 (A² ≥ Σ I_a²); rounding can only make t2 > t1 by ulps.
    diff = torch.where(torch.isfinite(t1), t1 + log1mexp(torch.clamp(log_p - t1, max=0.0)), t1)
    diff = torch.where(A >= 2, diff, torch.full_like(diff, -math.inf))
    return torch.logsumexp(diff, dim=-1)


# --------------------------------------------------------------------------- quadrature


def _log_phi(beta: Tensor, L: Tensor, x_near: Tensor, near: Tensor) -> Tensor:
    """log φ_β(x) = log((1+x)^β − 1 − βx) with log(1+x) = L; ``x_near`` is x where ``near``.

    Three regions: a binomial series when |x|·max(1, |β|) < 0.1 (no cancellation), else a signed
    log-sum-exp of e^{βL}, −1 and −βx (cancellation ≤ ~1e-12 relative there).
    """
    log_abs_x_far = torch.where(
        L > 0,
        log_expm1(torch.where(L > 0, L, torch.ones_like(L))),
        torch.log(-torch.expm1(torch.where(L < 0, L, -torch.ones_like(L)))),
    )
    log_abs_x = torch.where(near, torch.log(x_near.abs()), log_abs_x_far)
    sign_x = torch.where(near, torch.sign(x_near), torch.sign(L))
    L_acc = torch.where(near, torch.log1p(x_near), L)
    series = near & (x_near.abs() * torch.clamp(beta.abs(), min=1.0) < 0.1)
    xs = torch.where(series, x_near, torch.zeros_like(x_near))
    # φ = x² Σ_{j≥2} C(β, j) x^{j−2}
    term = beta * (beta - 1.0) / 2.0 * torch.ones_like(xs)
    acc = term.clone()
    for j in range(2, _SERIES_TERMS):
        term = term * (beta - j) / (j + 1) * xs
        acc = acc + term
    log_series = 2.0 * torch.log(xs.abs()) + torch.log(torch.clamp(acc, min=0.0))
    # direct: e^{βL} − 1 − βx
    t = torch.stack(
        [beta * L_acc, torch.zeros_like(L_acc), torch.log(beta.abs()) + log_abs_x], dim=-1
    )
    s = torch.stack([torch.ones_like(L_acc), -torch.ones_like(L_acc), -torch.sign(beta) * sign_x], dim=-1)
    m = torch.amax(t, dim=-1, keepdim=True)
    m_safe = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    v = torch.sum(s * torch.exp(t - m_safe), dim=-1)
    log_direct = torch.where(v > 0, m_safe.squeeze(-1) + torch.log(torch.clamp(v, min=1e-300)), -math.inf)
    return torch.where(series, log_series, log_direct)


def _log_psi_m1_quad(alpha: Tensor, q: Tensor, sigma: Tensor, K: int, reverse: bool) -> Tensor:
    """log(Ψ − 1) by the trapezoid rule (module docstring); flat inputs of equal length."""
    beta = 1.0 - alpha if reverse else alpha
    s = sigma
    is_int = alpha == torch.round(alpha)
    h_pole = 0.3 * s * s  # singularities of R^β at Im z = ±πs² (module docstring)
    h = torch.minimum(0.5 * s, h_pole)
    if not reverse:
        h = torch.where(is_int, 0.5 * s, h)
    # How far left of 0 the insertion peak z* < 0 can sit: z* = −(α−1)E_π[k](z*), π the posterior
    # of k at z*. E_π[k] ≤ K, and for z < 0 E_π[k] ≤ Σ_k k w_k e^{z/s²}/w_0 = M e^{z/s²} with
    # M = Kr/(1−r)^K, so |z*| ≥ s² implies |z*| ≤ s² log((α−1)M/s²).
    log_m = math.log(K) + torch.log(q) - K * torch.log1p(-q)  # q < 1 here (callers replace q = 1)
    log_ratio = torch.clamp(torch.log(alpha - 1.0) + log_m - 2.0 * torch.log(s), min=0.0)
    z_rev = torch.minimum((alpha - 1.0) * K, s * s * torch.clamp(log_ratio, min=1.0))
    lo = -40.0 * s - (z_rev if reverse else torch.zeros_like(s))
    hi = (K if reverse else alpha * K) + 40.0 * s
    n_f = torch.ceil((hi - lo) / h) + 1
    huge = ~(n_f <= _MAX_POINTS)  # σ ≲ 1e-4: h = 0.3σ² makes the grid astronomically long (int64 overflowed at 1e-10)
    n = torch.where(huge, torch.ones_like(n_f), n_f).to(torch.int64)
    lw = _log_weights(q, K)
    k = torch.arange(K + 1, dtype=alpha.dtype, device=alpha.device)
    out = torch.empty_like(alpha)
    bucket = torch.ceil(torch.log2(n.to(alpha.dtype))).to(torch.int64)
    for b in torch.unique(bucket).tolist():
        idx = torch.nonzero(bucket == b).squeeze(-1)
        nmax = int(n[idx].max().item())
        step = max(1, _MAX_ELEMS // (nmax * (K + 2)))
        grid = torch.arange(nmax, dtype=alpha.dtype, device=alpha.device)
        for start in range(0, idx.numel(), step):
            j = idx[start : start + step]
            z = lo[j, None] + h[j, None] * grid  # (B, n)
            valid = grid < n[j, None]
            ss = s[j, None, None]
            c = (2.0 * k * z[..., None] - k * k) / (2.0 * ss * ss)  # (B, n, K+1)
            lwj = lw[j, None, :]
            L = torch.logsumexp(lwj + c, dim=-1)
            near = L.abs() < 0.4
            x_near = torch.sum(torch.exp(lwj) * torch.expm1(torch.clamp(c, max=700.0)), dim=-1)
            x_near = torch.where(near, x_near, torch.zeros_like(x_near))
            lphi = _log_phi(beta[j, None], L, x_near, near)
            log_n = -z * z / (2.0 * s[j, None] ** 2) - torch.log(s[j, None]) - _LOG_SQRT_2PI
            f = torch.where(valid, lphi + log_n, torch.full_like(lphi, -math.inf))
            out[j] = torch.logsumexp(f, dim=-1) + torch.log(h[j])
    return torch.where(huge, torch.full_like(out, math.inf), out)  # +∞: sound; callers may take a smaller bound


# ---------------------------------------------------------------------- public: Thm 4.2


def _to_rdp(log_psi_m1: Tensor, alpha: Tensor) -> Tensor:
    # Round pessimistically: Ψ − 1 is inflated by 1e-11 relative, above the worst float64 error of
    # either evaluation (pointwise cancellation in φ ≲ 1e-12; measured ≤ 1e-14 against mpmath).
    log_psi_m1 = log_psi_m1 + _PESSIMISM
    return torch.logaddexp(torch.zeros_like(log_psi_m1), log_psi_m1) / (alpha - 1.0)


def _fwd_log_psi_m1(alpha: Tensor, q: Tensor, sigma: Tensor, K: int) -> Tensor:
    """log(Ψ_fwd − 1) on flat inputs: closed form at integer α with α·K small, else quadrature."""
    out = torch.empty_like(alpha)
    closed = (alpha == torch.round(alpha)) & (alpha * K <= _CLOSED_FORM_MAX_DEGREE)
    if bool(closed.any()):
        i = torch.nonzero(closed).squeeze(-1)
        out[i] = _log_psi_m1_closed(alpha[i], q[i], sigma[i], K)
    if bool((~closed).any()):
        i = torch.nonzero(~closed).squeeze(-1)
        out[i] = _log_psi_m1_quad(alpha[i], q[i], sigma[i], K, reverse=False)
    return out


def rdp_poisson_gaussian_group_terms(
    alpha: Tensor | float, q: Tensor | float, sigma: Tensor | float, group_size: int
) -> tuple[Tensor, Tensor]:
    """The removal and insertion terms of Thm 4.2, each as an RDP value.  Bound: exact (both directions).

    Schuchardt et al. (arXiv:2403.04867) Thm 4.2: removal = D_α(Σ_k Bin(k|K,r) N(k, s²) ‖ N(0, s²)),
    insertion = D_α(N(0, s²) ‖ Σ_k Bin(k|K,r) N(−k, s²)); s = σ (noise multiplier).

    Args:
        alpha: orders > 1, any shape broadcastable with ``q`` and ``sigma`` (α last by convention).
        q: Poisson rate r in (0, 1].
        sigma: noise multiplier > 0.
        group_size: K ≥ 1 (Python int).

    Returns:
        (removal, insertion) with the broadcast shape.
    """
    K = _group_size(group_size)
    alpha, q, sigma = _inputs(alpha, q, sigma)
    shape = alpha.shape
    a, qf, sf = (t.reshape(-1) for t in (alpha, q, sigma))
    full = qf >= 1.0  # no subsampling: a Gaussian with sensitivity K in both directions
    q_safe = torch.where(full, torch.full_like(qf, 0.5), qf)
    fwd = _to_rdp(_fwd_log_psi_m1(a, q_safe, sf, K), a)
    rev = _to_rdp(_log_psi_m1_quad(a, q_safe, sf, K, reverse=True), a)
    # the unsubsampled Gaussian of sensitivity K bounds both terms at any r (joint quasi-convexity of D_α over
    # the mixture Σ_k Bin(k|K,r)·N(±k, s²)), and replaces an order the quadrature cannot resolve (its +∞)
    exact = a * K * K / (2.0 * sf * sf)
    # (and an evaluation that failed: the closed form's e^{k²/2s²} terms overflow to ∞ − ∞ = NaN for s ≲ 1e-150)
    fwd = torch.where(full | torch.isnan(fwd), exact, torch.minimum(fwd, exact))
    rev = torch.where(full | torch.isnan(rev), exact, torch.minimum(rev, exact))
    return fwd.reshape(shape), rev.reshape(shape)


def rdp_poisson_gaussian_group(
    alpha: Tensor | float, q: Tensor | float, sigma: Tensor | float, group_size: int
) -> Tensor:
    """RDP of the Poisson-subsampled Gaussian for a group of K records (inserted or removed).  Bound: upper, tight.

    Schuchardt et al. (arXiv:2403.04867) Thm 4.2 (tightness: Thm G.3): ε(α) = max(removal,
    insertion) of :func:`rdp_poisson_gaussian_group_terms`. For K = 1 this is exactly
    :func:`accountants.rdp.poisson.rdp_poisson_gaussian` (Mironov, Talwar, Zhang 2019; the removal
    direction dominates, ibid. Thm 5), which is returned unchanged.

    Args:
        alpha: orders > 1, shape (..., A).
        q: Poisson rate in (0, 1], broadcastable.
        sigma: noise multiplier > 0 (noise std on the sum / clip norm), broadcastable.
        group_size: K ≥ 1 (Python int).

    Raises:
        ValueError: for α ≤ 1, q ∉ (0, 1], σ ≤ 0, K < 1; TypeError for a non-integer K.

    >>> round(float(rdp_poisson_gaussian_group(4.0, 0.001, 1.0, 4)), 10)
    5.67126e-05
    """
    K = _group_size(group_size)
    if K == 1:
        alpha, q, sigma = _inputs(alpha, q, sigma)
        return rdp_poisson_gaussian(alpha, q, sigma)
    fwd, rev = rdp_poisson_gaussian_group_terms(alpha, q, sigma, K)
    return torch.maximum(fwd, rev)


def rdp_poisson_gaussian_group_removal_closed_form(
    alpha: Tensor | float, q: Tensor | float, sigma: Tensor | float, group_size: int
) -> Tensor:
    """Removal term of Thm 4.2 at integer α by the multinomial closed form.  Bound: exact.

    Schuchardt et al. (arXiv:2403.04867) App. G.5 (with the α factors of the exponent restored):
    Ψ = Σ_{l_0+…+l_K=α} (α; l_0..l_K) Π_k w_k^{l_k} exp(((Σ_k k l_k)² − Σ_k k² l_k)/(2s²)).
    Evaluated by grouping compositions by A = Σ k l_k (module docstring). Cost O(α²K²) per
    configuration; exact for any α·K (no cut-off here).

    Raises:
        ValueError: when α is not an integer ≥ 2.
    """
    K = _group_size(group_size)
    alpha, q, sigma = _inputs(alpha, q, sigma)
    check.integer(2, None, alpha=alpha)
    shape = alpha.shape
    a, qf, sf = (t.reshape(-1) for t in (alpha, q, sigma))
    full = qf >= 1.0
    q_safe = torch.where(full, torch.full_like(qf, 0.5), qf)
    out = _to_rdp(_log_psi_m1_closed(a, q_safe, sf, K), a)
    return torch.where(full, a * K * K / (2.0 * sf * sf), out).reshape(shape)


def rdp_poisson_gaussian_group_quadrature(
    alpha: Tensor | float, q: Tensor | float, sigma: Tensor | float, group_size: int, *, removal: bool = True
) -> Tensor:
    """Removal (or insertion) term of Thm 4.2 by quadrature only, for cross-checks.  Bound: exact to ~1e-12."""
    K = _group_size(group_size)
    alpha, q, sigma = _inputs(alpha, q, sigma)
    shape = alpha.shape
    a, qf, sf = (t.reshape(-1) for t in (alpha, q, sigma))
    check.in_range(0.0, 1.0, closed="neither", q=qf)
    return _to_rdp(_log_psi_m1_quad(a, qf, sf, K, reverse=not removal), a).reshape(shape)


# ------------------------------------------------------------------------------ baselines


def rdp_group_mironov(rdp_single: Callable[[Tensor], Tensor], alpha: Tensor | float, group_size: int) -> Tensor:
    """Generic RDP group privacy: ε_K(α) = 3^{log2 K} ε_1(Kα) for α ≥ 2, K a power of 2.  Bound: upper.

    Mironov (arXiv:1702.07476v3) Prop. 2 = Schuchardt et al. (arXiv:2403.04867) Prop. 2.10: an
    (α, ε)-RDP mechanism is (α/K, 3^{log2 K} ε)-RDP for pairs at distance K when 2K ≤ α.

    Args:
        rdp_single: the single-record RDP curve ε_1 as a callable on orders.
        alpha: orders ≥ 2.
        group_size: K = 2^c.
    """
    K = _group_size(group_size)
    if K & (K - 1):
        raise InputError(f"group_size must be a power of 2 for Mironov's group property; got {K}")
    alpha = as_float(alpha)
    check.in_range(2.0, None, closed="left", alpha=alpha)
    c = K.bit_length() - 1  # log2 K
    return (3.0**c) * rdp_single(K * alpha)


def rdp_group_holder_recursive(
    rdp_single: Callable[[Tensor], Tensor], alpha: Tensor | float, group_size: int, *, monotone: bool = False
) -> Tensor:
    """Group RDP by the Hölder recursion applied log2 K times.  Bound: upper.

    Mironov (arXiv:1702.07476v3) Prop. 11 with p = q = 2 (Schuchardt et al. arXiv:2403.04867
    App. B.1, whose printed coefficient α/(α−1) of the second term is corrected to 1):
    ε_K(α) ≤ (α − 1/2)/(α − 1) · ε_{K/2}(2α) + ε_{K/2}(2α − 1), ε_1 = ``rdp_single``.

    Args:
        rdp_single: single-record RDP curve (callable on a tensor of orders > 1, any shape).
        alpha: orders > 1, shape (..., A).
        group_size: K = 2^c.
        monotone: take the running minimum from the right along the last axis (sound because a
            true RDP curve is non-decreasing in α; needs ``alpha`` sorted ascending on that axis).
    """
    K = _group_size(group_size)
    if K & (K - 1):
        raise InputError(f"group_size must be a power of 2 for the Hölder recursion; got {K}")
    alpha = as_float(alpha)
    check.in_range(1.0, None, closed="neither", alpha=alpha)

    def rec(a: Tensor, k: int) -> Tensor:
        if k == 1:
            return rdp_single(a)
        both = rec(torch.stack([2.0 * a, 2.0 * a - 1.0]), k // 2)  # one call per level
        return (a - 0.5) / (a - 1.0) * both[0] + both[1]

    out = rec(alpha, K)
    if monotone:
        if alpha.ndim == 0 or bool((torch.diff(alpha, dim=-1) < 0).any()):
            raise InputError("alpha must be sorted ascending along the last axis when monotone=True")
        out = torch.flip(torch.cummin(torch.flip(out, [-1]), dim=-1).values, [-1])
    return out


def rdp_poisson_gaussian_group_baseline(
    alpha: Tensor | float, q: Tensor | float, sigma: Tensor | float, group_size: int, *, monotone: bool = False
) -> Tensor:
    """Baseline group RDP: Hölder recursion on the exact single-record Poisson Gaussian RDP.  Bound: upper.

    Schuchardt et al. (arXiv:2403.04867) §5 baseline ("Zhu & Wang + B.1"); see
    :func:`rdp_group_holder_recursive`. Only K a power of 2. Not tight.
    """
    alpha, q, sigma = _inputs(alpha, q, sigma)
    return rdp_group_holder_recursive(lambda a: rdp_poisson_gaussian(a, q, sigma), alpha, group_size,
                                      monotone=monotone)


# ------------------------------------------------------------------- randomized response


def _rr_inputs(alpha: Tensor | float, w: Tensor | float, p: Tensor | float) -> tuple[Tensor, Tensor, Tensor]:
    alpha = as_float(alpha)
    w = as_float(w, like=alpha)
    p = as_float(p, like=alpha)
    check.in_range(1.0, None, closed="neither", alpha=alpha)
    check.finite(alpha=alpha)
    check.in_range(0.5, 1.0, closed="neither", p=p)
    return torch.broadcast_tensors(alpha, w, p)


def _log_psi_mixture(alpha: Tensor, num: Tensor, den: Tensor) -> Tensor:
    """log Σ_z num(z)^α den(z)^{1−α} for pmfs on the last axis (log-space inputs)."""
    return torch.logsumexp(alpha[..., None] * num + (1.0 - alpha[..., None]) * den, dim=-1)


def _rr_pmf(tau: Tensor) -> Tensor:
    """log pmf of RR output z ∈ {0, 1} with P(z = 0) = τ, on a new last axis."""
    return torch.stack([torch.log(tau), torch.log1p(-tau)], dim=-1)


def _rr_two_point(alpha: Tensor, w: Tensor, p: Tensor) -> Tensor:
    """max over both directions of Ψ between (1−w)P_p + wP_{1−p} and P_p, as RDP."""
    base = _rr_pmf(p)
    mix = torch.logaddexp(torch.log1p(-w)[..., None] + base, torch.log(w)[..., None] + _rr_pmf(1.0 - p))
    fwd = _log_psi_mixture(alpha, mix, base)
    rev = _log_psi_mixture(alpha, base, mix)
    return torch.maximum(fwd, rev) / (alpha - 1.0)


def rdp_poisson_randomized_response_group(
    alpha: Tensor | float, q: Tensor | float, p: Tensor | float, group_size: int
) -> Tensor:
    """RDP of Poisson-subsampled randomized response for a group of K (inserted or removed).  Bound: upper, tight.

    Schuchardt et al. (arXiv:2403.04867) Thm G.1 (tight: Thm G.2; second-term numerator
    exponent corrected to α). Ψ is convex in the mixture weight, so the maximum over the 2^{K+1}
    label patterns puts every batch that holds a group member on the opposite label: the bound
    equals the single-record two-point bound at the effective rate 1 − (1 − r)^K (checked against
    :func:`rdp_poisson_randomized_response_group_brute_force`). Any real α > 1.

    Args:
        alpha: orders > 1.
        q: Poisson rate in (0, 1].
        p: probability of reporting the true bit, in (1/2, 1).
        group_size: K ≥ 1.
    """
    K = _group_size(group_size)
    alpha, q, p = _rr_inputs(alpha, q, p)
    check.in_range(0.0, 1.0, closed="right", q=q)
    w = -torch.expm1(K * torch.log1p(-torch.clamp(q, max=1.0)))
    return _rr_two_point(alpha, w, p)


def rdp_poisson_randomized_response_group_brute_force(
    alpha: Tensor | float, q: Tensor | float, p: Tensor | float, group_size: int
) -> Tensor:
    """Thm G.1 by enumerating all 2^{K+1} label patterns τ_1..τ_{K+1} ∈ {p, 1−p}.  Bound: upper, tight.

    Schuchardt et al. (arXiv:2403.04867) Thm G.1: max over patterns of
    Σ_z (Σ_i w_i |z−τ_i|)^α / |z−τ_1|^{α−1} and Σ_z |z−τ_1|^α / (Σ_i w_i |z−τ_i|)^{α−1},
    w_i = Bin(i−1 | K, r). Cost 2^{K+1}; use for K ≤ 12.
    """
    K = _group_size(group_size)
    alpha, q, p = _rr_inputs(alpha, q, p)
    check.in_range(0.0, 1.0, closed="right", q=q)
    bits = torch.tensor(
        [[(m >> i) & 1 for i in range(K + 1)] for m in range(2 ** (K + 1))], dtype=alpha.dtype, device=alpha.device
    )  # (P, K+1)
    pp = p[..., None, None]
    tau = torch.where(bits > 0, 1.0 - pp, pp)  # (..., P, K+1)
    lw = _log_weights(q, K)[..., None, :]  # (..., 1, K+1)
    comp = _rr_pmf(tau)  # (..., P, K+1, 2)
    mix = torch.logsumexp(lw[..., None] + comp, dim=-2)  # (..., P, 2)
    first = comp[..., 0, :]  # τ_1, (..., P, 2)
    a = alpha[..., None]
    fwd = _log_psi_mixture(a, mix, first)
    rev = _log_psi_mixture(a, first, mix)
    return torch.amax(torch.maximum(fwd, rev), dim=-1) / (alpha - 1.0)


def rdp_wor_randomized_response_substitution(
    alpha: Tensor | float, batch_size: int, dataset_size: int, p: Tensor | float
) -> Tensor:
    """RDP of randomized response under fixed-size sampling without replacement, substitution.  Bound: upper, tight.

    Schuchardt et al. (arXiv:2403.04867) Thm 3.7 (tight: Thm F.1), w = q/N: the maximum over
    τ_1, τ_2, τ_4 ∈ {p, 1−p} of Σ_z ((1−w)|z−τ_1| + w|z−τ_2|)^α / ((1−w)|z−τ_1| + w|z−τ_4|)^{α−1},
    evaluated by enumerating the 8 patterns. Any real α > 1.
    """
    check.integer(1, None, batch_size=batch_size, dataset_size=dataset_size)
    if batch_size >= dataset_size:
        raise InputError(f"batch_size must be < dataset_size; got {batch_size} >= {dataset_size}")
    alpha, w, p = _rr_inputs(alpha, batch_size / dataset_size, p)
    pats = torch.tensor([[(m >> i) & 1 for i in range(3)] for m in range(8)], dtype=alpha.dtype, device=alpha.device)
    pp = p[..., None, None]
    tau = torch.where(pats > 0, 1.0 - pp, pp)  # (..., 8, 3): τ_1, τ_2, τ_4
    comp = _rr_pmf(tau)  # (..., 8, 3, 2)
    l1w = torch.log1p(-w)[..., None, None]
    lw = torch.log(w)[..., None, None]
    num = torch.logaddexp(l1w + comp[..., 0, :], lw + comp[..., 1, :])
    den = torch.logaddexp(l1w + comp[..., 0, :], lw + comp[..., 2, :])
    return torch.amax(_log_psi_mixture(alpha[..., None], num, den), dim=-1) / (alpha - 1.0)


# --------------------------------------------------------------------- fixed size (Thm F.3)


def rdp_fixed_size_gaussian_add_remove(
    alpha: Tensor | float, sigma: Tensor | float, batch_size: int, dataset_size_lower: int
) -> Tensor:
    """RDP of the Gaussian under fixed-size sampling without replacement, add/remove.  Bound: upper.

    Schuchardt et al. (arXiv:2403.04867) Thm F.3 (printed "Poisson subsampling with rate r" is
    a typo for WOR with batch size q; batch distance ≤ 2): for datasets with more than Q > q
    records, Ψ_α ≤ max_{N>Q} 2 Σ_{l=0}^{α} C(α,l) w^l (1−w)^{α−l} max_{d(y,y')≤2} Ψ_l, w = q/N.
    For the Gaussian, batch distance 2 is ℓ2 distance 2C, so Ψ_l = exp(2l(l−1)/σ²); the sum grows
    with w, so the maximum is at N = Q + 1. Integer α only. Not tight (factor 2).

    Args:
        alpha: integer orders ≥ 2.
        sigma: noise multiplier > 0.
        batch_size: q ≥ 1.
        dataset_size_lower: Q > q; every dataset has more than Q records.
    """
    check.integer(1, None, batch_size=batch_size, dataset_size_lower=dataset_size_lower)
    if dataset_size_lower <= batch_size:
        raise InputError(f"dataset_size_lower must be > batch_size; got {dataset_size_lower} <= {batch_size}")
    alpha = as_float(alpha)
    sigma = as_float(sigma, like=alpha)
    check.integer(2, None, alpha=alpha)
    check.positive(sigma=sigma)
    alpha, sigma = torch.broadcast_tensors(alpha, sigma)
    w = batch_size / (dataset_size_lower + 1)
    lmax = int(alpha.max().item())
    ell = torch.arange(lmax + 1, dtype=alpha.dtype, device=alpha.device)
    a = alpha[..., None]
    terms = (
        log_binom(a, ell)
        + ell * math.log(w)
        + (a - ell) * math.log1p(-w)
        + 2.0 * ell * (ell - 1.0) / sigma[..., None] ** 2  # log Ψ_l at ℓ2 distance 2: 4 l(l−1)/(2σ²)
    )
    terms = torch.where(ell <= a, terms, torch.full_like(terms, -math.inf))
    return (math.log(2.0) + torch.logsumexp(terms, dim=-1)) / (alpha - 1.0)


# ------------------------------------------------------------------ accountant integration


def step_rdp_poisson_group(spec: DPSGD, orders: Tensor) -> tuple[Tensor, str]:
    """One-step RDP handler for Poisson add/remove with ``spec.group_size`` = K ≥ 1.  Bound: upper.

    K = 1 is the exact single-record curve; K > 1 is Schuchardt et al. Thm 4.2 (relation: the
    group of K records is inserted into or removed from the dataset).
    """
    K = spec.group_size
    q = torch.as_tensor(spec.sampling.rate, dtype=orders.dtype, device=orders.device)
    s = torch.as_tensor(spec.noise_multiplier, dtype=orders.dtype, device=orders.device)
    curve = rdp_poisson_gaussian_group(orders, q, s, K)
    if K == 1:
        return curve, "Mironov-Talwar-Zhang 2019 (exact sampled Gaussian)"
    return curve, f"{THEOREM_TIGHT}, K={K}"


def _eps_refined(
    curve_fn: Callable[[Tensor], Tensor], orders: Tensor, delta: float, refine: bool
) -> tuple[float, float]:
    """min over ``orders`` of the Thm 21 conversion, then (``refine``) over 8 orders each side of the
    best one (every order gives a valid bound, so refining can only help; as accountants.api.RdpMethod)."""
    from ..orders import refine_orders

    eps, order = eps_from_rdp(curve_fn(orders), orders, delta)
    if not refine:
        return float(eps), float(order)
    fine = refine_orders(orders, torch.nonzero(orders == order)[0, 0], 8)
    eps_f, order_f = eps_from_rdp(curve_fn(fine), fine, delta, warn=False)
    if eps_f < eps:
        eps, order = eps_f, order_f
    return float(eps), float(order)


def compare_group_bounds(
    spec: DPSGD, delta: float, orders: Tensor | None = None, *, refine: bool = True
) -> dict[str, EpsilonBound]:
    """ε at δ for a Poisson add/remove DP-SGD run with group size K: tight vs baseline.  Bound: upper (both).

    Returns ``{"tight": EpsilonBound, "baseline": EpsilonBound}``: the tight bound (Schuchardt et al.
    Thm 4.2) and the Hölder-recursion baseline (made monotone in α), both composed over
    ``spec.steps`` and converted with Balle et al. 2020 Thm 21 on the same order grid (refined
    around each optimum as the RDP accountant does, so ``tight`` equals :func:`accountants.epsilon`
    on the default grid), so a user sees what the tight analysis buys. The baseline exists only
    for K a power of 2 (the key is absent otherwise); for K = 1 both are the exact single-record
    curve. ``refine=False`` evaluates the grid only (to reproduce numbers quoted on a given grid).

    Raises:
        UnsupportedError: unless ``spec`` is Poisson sampling under add/remove.
        ValueError: for δ outside (0, 1).
    """
    from ..orders import default_orders

    if not isinstance(spec.sampling, Poisson) or spec.neighbouring is not Neighbouring.ADD_REMOVE:
        raise UnsupportedError("compare_group_bounds covers only sampling=poisson with neighbouring=add-remove")
    check.in_range(0.0, 1.0, closed="neither", delta=delta)
    orders = default_orders() if orders is None else as_float(orders)
    check.in_range(1.0, None, closed="neither", orders=orders)
    q = torch.as_tensor(spec.sampling.rate, dtype=orders.dtype, device=orders.device)
    s = torch.as_tensor(spec.noise_multiplier, dtype=orders.dtype, device=orders.device)
    K = spec.group_size
    theorem = step_rdp_poisson_group(spec, orders[:1])[1]
    t = steps_factor(spec.steps)
    e_t, o_t = _eps_refined(lambda a: t * step_rdp_poisson_group(spec, a)[0], orders, delta, refine)
    out = {"tight": EpsilonBound(e_t, float(delta), order=o_t, theorem=theorem)}
    if K & (K - 1) == 0:
        e_b, o_b = _eps_refined(
            lambda a: t * rdp_poisson_gaussian_group_baseline(a, q, s, K, monotone=True),
            orders, delta, refine,
        )
        out["baseline"] = EpsilonBound(
            e_b, float(delta), order=o_b,
            theorem=f"Mironov 2017 Prop. 11 Hoelder recursion on the exact K=1 curve (baseline), K={K}",
        )
    return out
