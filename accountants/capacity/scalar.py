"""Restricted α-divergence / Rényi (Lemma 3 + eq. 3) and KL (Lemma 1) of scalar output laws, and the
unrestricted values they are compared with.

Part of :mod:`accountants.capacity` (Chaudhuri, Imola, Machanavajjhala 2019, arXiv:1907.02159v1).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from .. import validate as check
from ..errors import InputTypeError, UnsupportedError
from .classes import LINEAR, Family, Polynomial, ScalarMixture, parse_class
from .closed_forms import alpha_divergence_to_renyi
from .newton import newton_maximise
from .quadrature import _Q, _base_breaks, _panel_rule, _q_nodes, polyval, powers

# Restricted α-divergence / Rényi (Lemma 3 + eq. 3), population values by quadrature
# ---------------------------------------------------------------------------------------------


def _ref(q: ScalarMixture) -> tuple[Tensor, Tensor]:
    """Reference coordinates z = (x − mean_Q)/sd_Q (the class is affine-invariant, so this only conditions)."""
    mean = q.mean()
    second = (q.weights * (q.scale**2 * (2.0 if q.family is Family.LAPLACE else 1.0) + q.loc**2)).sum(-1)
    return mean, (second - mean**2).clamp_min(1e-300).sqrt()


def alpha_terms(theta: Tensor, alpha: Tensor, m_p: Tensor, z: Tensor, w: Tensor, derivs: bool):
    """Scaled objective G(θ) = α θ·E_P[ψ] − (α−1) E_Q|h|^A, h = θ·ψ, A = α/(α−1), and its derivatives.

    With h = (α−1)·h_paper this is α(α−1)·(Lemma 3 objective) + 1, so D_{R,α}^H = log(sup G)/(α−1)
    (eq. 3) and the constant h = 1 (θ = e_0) gives G = 1, i.e. D = 0 (Fenchel–Young equality).
    """
    big_a = (alpha / (alpha - 1.0))[:, None]
    hz = polyval(theta, z)
    ab = hz.abs()
    val = alpha * (theta * m_p).sum(-1) - (alpha - 1.0) * (w * ab**big_a).sum(-1)
    if not derivs:
        return val
    psi = powers(z, theta.shape[-1] - 1)
    g1 = ab ** (big_a - 1.0) * torch.sign(hz)
    grad = alpha[:, None] * (m_p - torch.einsum("mn,mnp->mp", w * g1, psi))
    # |h|^{A−2} is an integrable singularity at a root when A < 2 that no fixed rule integrates well
    # (and a root may coincide with a panel edge, putting nodes at |h| ≈ 0). The Hessian only steers
    # Newton, so it is regularised by flooring |h| at 1e-4 of its Q-rms; the value and gradient are exact.
    rms = (w * hz * hz).sum(-1, keepdim=True).sqrt()
    h2 = torch.maximum(ab, 1e-4 * rms).clamp_min(1e-300) ** (big_a - 2.0)
    hess = -(alpha * (big_a[:, 0] - 1.0))[:, None, None] * torch.einsum("mn,mnp,mnq->mpq", w * h2, psi, psi)
    return val, grad, hess


def _solve_alpha(alpha: Tensor, m_p: Tensor, q: _Q, ref_loc: Tensor, ref_scale: Tensor):
    """sup_θ G(θ) for rows of problems; returns (θ* in z units (scaled h), G*, converged)."""
    p = m_p.shape[-1]

    def value_fn(theta: Tensor, rows: Tensor) -> Tensor:
        z, w = _q_nodes(q.rows(rows), ref_loc[rows], ref_scale[rows], theta)
        return alpha_terms(theta, alpha[rows], m_p[rows], z, w, False)

    def derivs_fn(theta: Tensor, rows: Tensor):
        z, w = _q_nodes(q.rows(rows), ref_loc[rows], ref_scale[rows], theta)
        return alpha_terms(theta, alpha[rows], m_p[rows], z, w, True)

    theta0 = torch.zeros(len(alpha), p, dtype=m_p.dtype, device=m_p.device)
    theta0[:, 0] = 1.0
    return newton_maximise(value_fn, derivs_fn, theta0)


def z_to_x(theta: Tensor, ref_loc: Tensor, ref_scale: Tensor) -> Tensor:
    """Coefficients of Σ θ_j ((x − μ)/s)^j as a polynomial in x; theta (..., p), μ, s (...)."""
    p = theta.shape[-1]
    out = torch.zeros_like(theta)
    for j in range(p):
        cj = theta[..., j] / ref_scale**j
        for i in range(j + 1):
            out[..., i] = out[..., i] + cj * math.comb(j, i) * (-ref_loc) ** (j - i)
    return out


class RestrictedValue(NamedTuple):
    """A restricted divergence computed by concave maximisation.  Bound: exact (numerical).

    Attributes:
        value: D^H(P, Q), shape (..., A) for Rényi/α (A orders) or (...) for KL.
        witness: optimal h ∈ H as polynomial coefficients in the output x, lowest degree first
            (h(x) = Σ_j witness[j]·x^j), shape (..., [A,] k+1), in the paper's normalisation
            (the maximiser of E_P h − E_Q f*(h)).
        converged: Newton decrement below tolerance, same shape as ``value``.
    """

    value: Tensor
    witness: Tensor
    converged: Tensor


def _check_pair(p: ScalarMixture, q: ScalarMixture) -> torch.Size:
    if not isinstance(p, ScalarMixture) or not isinstance(q, ScalarMixture):
        raise InputTypeError("P and Q must be ScalarMixture descriptions of scalar output laws")
    if p.family is not q.family:
        raise UnsupportedError(f"P ({p.family.value}) and Q ({q.family.value}) must belong to one family")
    return torch.broadcast_shapes(p.batch_shape, q.batch_shape)


def restricted_alpha_divergence(p: ScalarMixture, q: ScalarMixture, alpha: Tensor | float,
                                function_class: Polynomial | str = LINEAR) -> RestrictedValue:
    """Restricted α-divergence D_α^H(P, Q) for polynomial classes.  Bound: exact (numerical).

    Chaudhuri, Imola, Machanavajjhala (NeurIPS 2019, arXiv:1907.02159v1) Lemma 3:
    D_α^H = sup_{h∈H} E_P h − C_α E_Q|h|^{α/(α−1)} − 1/(α²−α) (absolute-value convention). The
    objective is concave in the coefficients of h; it is maximised by damped Newton with E_P from
    exact moments and E_Q by Gauss–Legendre panels split at every root of h (the kinks of |h|^A).

    Args:
        p, q: scalar output laws with broadcastable batch shapes (...).
        alpha: orders α > 1, shape (A,) (or scalar); the order is the last output dimension.
        function_class: :class:`Polynomial` or its name ("linear", "poly2", ...).

    Returns:
        :class:`RestrictedValue` with value (..., A).

    Raises:
        ValueError: α ≤ 1 or not finite. UnsupportedError: P and Q from different families.
    """
    return _restricted_alpha(p, q, alpha, function_class)


def restricted_renyi(p: ScalarMixture, q: ScalarMixture, alpha: Tensor | float,
                     function_class: Polynomial | str = LINEAR) -> RestrictedValue:
    """Restricted Rényi divergence D_{R,α}^H(P, Q) = log(1 + α(α−1) D_α^H)/(α−1).  Bound: exact (numerical).

    Chaudhuri et al. 2019 (arXiv:1907.02159v1) eq. (3) with Lemma 3; see
    :func:`restricted_alpha_divergence` for the method. NOT an RDP guarantee: never convert it to
    (ε, δ) or a trade-off curve (the conversions need indicator tests, which H lacks).

    >>> import accountants.capacity as cap
    >>> P, Q = cap.ScalarMixture.laplace(0.0, 1.0), cap.ScalarMixture.laplace(1.0, 1.0)
    >>> round(float(cap.restricted_renyi(P, Q, 2.0).value), 6)   # log 1.5 (alpha = 2 closed form)
    0.405465

    Args:
        p, q: scalar output laws with broadcastable batch shapes (...).
        alpha: orders α > 1, shape (A,) (or scalar); last output dimension.
        function_class: :class:`Polynomial` or its name.

    Returns:
        :class:`RestrictedValue` with value (..., A) (natural log).
    """
    rv = _restricted_alpha(p, q, alpha, function_class)
    a = _orders(alpha, rv.value)
    return RestrictedValue(alpha_divergence_to_renyi(rv.value, a), rv.witness, rv.converged)


def _orders(alpha: Tensor | float, like: Tensor) -> Tensor:
    a = torch.as_tensor(alpha, dtype=like.dtype, device=like.device)
    return a if a.ndim else a.reshape(())


def _restricted_alpha(p: ScalarMixture, q: ScalarMixture, alpha: Tensor | float,
                      function_class: Polynomial | str) -> RestrictedValue:
    fc = parse_class(function_class)
    shape = _check_pair(p, q)
    a = torch.as_tensor(alpha, dtype=q.loc.dtype, device=q.loc.device)
    check.finite(alpha=a)
    check.in_range(1.0, None, closed="neither", alpha=a)
    scalar_alpha = a.ndim == 0
    a = a.reshape(-1)
    n_a = a.shape[0]
    pe, qe = p.expand(shape), q.expand(shape)
    ref_loc, ref_scale = _ref(qe)
    m_p = pe.raw_moments(fc.degree, ref_loc, ref_scale)  # (..., k+1)
    # Flatten configurations × orders into rows.
    full = (*shape, n_a)
    rows_m = m_p[..., None, :].expand(*full, fc.degree + 1).reshape(-1, fc.degree + 1)
    k = qe.weights.shape[-1]
    qq = _Q(qe.family, *(t[..., None, :].expand(*full, k).reshape(-1, k) for t in (qe.weights, qe.loc, qe.scale)))
    rl = ref_loc[..., None].expand(full).reshape(-1)
    rs = ref_scale[..., None].expand(full).reshape(-1)
    aa = a.expand(full).reshape(-1)
    theta, g_star, conv = _solve_alpha(aa, rows_m, qq, rl, rs)
    d_alpha = (g_star - 1.0) / (aa * (aa - 1.0))
    wit = z_to_x(theta, rl, rs) / (aa - 1.0)[:, None]
    d_alpha = d_alpha.reshape(full)
    wit = wit.reshape(*full, fc.degree + 1)
    conv = conv.reshape(full)
    if scalar_alpha:
        d_alpha, wit, conv = d_alpha[..., 0], wit[..., 0, :], conv[..., 0]
    return RestrictedValue(d_alpha, wit, conv)


# ---------------------------------------------------------------------------------------------
# Restricted KL (Lemma 1): Donsker–Varadhan over the class, closed-form log-MGFs of the components
# ---------------------------------------------------------------------------------------------


def _log_half_line(gamma: Tensor, beta: Tensor) -> Tensor:
    """log ∫_0^∞ e^{−γu² − βu} du for γ ≥ 0 (+inf where divergent).

    γ > 0: ½√(π/γ)·erfcx(β/(2√γ)) (continuous in γ → 0+ where it tends to 1/β); γ = 0: 1/β for β > 0.
    Both branches see only safe inputs (pytorch#52248), so autograd stays finite where the value is.
    """
    pos = gamma > 0
    g_safe = torch.where(pos, gamma, torch.ones_like(gamma))
    x = beta / (2.0 * g_safe.sqrt())
    quad = 0.5 * math.log(math.pi) - math.log(2.0) - 0.5 * torch.log(g_safe) + torch.log(torch.special.erfcx(x))
    b_ok = beta > 0
    lin = -torch.log(torch.where(b_ok, beta, torch.ones_like(beta)))
    lin = torch.where(b_ok, lin, torch.full_like(lin, math.inf))
    return torch.where(pos, quad, lin)


def _log_mgf(q: _Q, ref_loc: Tensor, ref_scale: Tensor, a: Tensor) -> Tensor:
    """log E_Q exp(a_1 z + a_2 z²) (a has 1 or 2 columns), z = (x − ref_loc)/ref_scale; +inf if infinite.

    Per component (x = loc + scale·u) the exponent is c0 + c1 u + c2 u². Gaussian: finite iff c2 < 1/2,
    c0 + c1²/(2(1−2c2)) − ½log(1−2c2). Laplace: finite iff c2 < 0, or c2 = 0 and |c1| < 1;
    c0 + log(½[I(−c2, 1−c1) + I(−c2, 1+c1)]) with I the half-line Gaussian integral.
    """
    o = (q.loc - ref_loc[:, None]) / ref_scale[:, None]
    s = q.scale / ref_scale[:, None]
    a1 = a[:, :1]
    a2 = a[:, 1:2] if a.shape[-1] > 1 else torch.zeros_like(a1)
    c0 = a1 * o + a2 * o * o
    c1 = s * (a1 + 2.0 * a2 * o)
    c2 = a2 * s * s
    if q.family is Family.GAUSSIAN:
        ok = c2 < 0.5
        den = torch.where(ok, 1.0 - 2.0 * c2, torch.ones_like(c2))
        lm = c0 + c1 * c1 / (2.0 * den) - 0.5 * torch.log(den)
        lm = torch.where(ok, lm, torch.full_like(lm, math.inf))
    else:
        ok = c2 <= 0
        gam = torch.where(ok, -c2, torch.zeros_like(c2))
        both = torch.stack([_log_half_line(gam, 1.0 - c1), _log_half_line(gam, 1.0 + c1)], 0)
        lm = c0 + torch.logsumexp(both, 0) - math.log(2.0)
        lm = torch.where(ok, lm, torch.full_like(lm, math.inf))
    return torch.logsumexp(lm + torch.log(q.w), -1)


def _laplace_tilted_z2(q: _Q, ref_loc: Tensor, ref_scale: Tensor, a1: Tensor) -> Tensor:
    """E_Q[z² e^{a1 z}] / E_Q[e^{a1 z}] for a Laplace mixture (exact; needs |a1·s_j| < 1)."""
    o = (q.loc - ref_loc[:, None]) / ref_scale[:, None]
    s = q.scale / ref_scale[:, None]
    c1 = a1[:, None] * s
    c0 = a1[:, None] * o

    def mom(j: int) -> Tensor:  # E[u^j e^{c1 u}] under Lap(0, 1)
        return 0.5 * math.factorial(j) * ((1.0 - c1) ** -(j + 1) + (-1.0) ** j * (1.0 + c1) ** -(j + 1))

    e0 = torch.exp(c0) * q.w
    num = (e0 * (o * o * mom(0) + 2.0 * o * s * mom(1) + s * s * mom(2))).sum(-1)
    return num / (e0 * mom(0)).sum(-1)


def _solve_kl(m_p: Tensor, q: _Q, ref_loc: Tensor, ref_scale: Tensor, a0: Tensor):
    """sup_a a·E_P[ψ] − log E_Q e^{a·ψ}, ψ = (z[, z²]), by Newton with autograd derivatives."""

    def value_fn(a: Tensor, rows: Tensor) -> Tensor:
        return (a * m_p[rows]).sum(-1) - _log_mgf(q.rows(rows), ref_loc[rows], ref_scale[rows], a)

    def derivs_fn(a: Tensor, rows: Tensor):
        with torch.enable_grad():
            x = a.detach().clone().requires_grad_(True)
            v = value_fn(x, rows)
            (g,) = torch.autograd.grad(v.sum(), x, create_graph=True)
            hess = torch.stack([torch.autograd.grad(g[:, i].sum(), x, retain_graph=True)[0]
                                for i in range(a.shape[-1])], -2)
        return v.detach(), g.detach(), hess.detach()

    return newton_maximise(value_fn, derivs_fn, a0)


def restricted_kl(p: ScalarMixture, q: ScalarMixture, function_class: Polynomial | str = LINEAR) -> RestrictedValue:
    """Restricted KL divergence KL^H(P, Q) for polynomial classes of degree ≤ 3.  Bound: exact (numerical).

    Chaudhuri et al. 2019 (arXiv:1907.02159v1) Lemma 1: KL^H = sup_{h∈H} E_P h − E_Q e^{h−1}; with the
    bias optimised this is sup_a a·E_P[ψ] − log E_Q e^{a·ψ} (Donsker–Varadhan over the class). The
    log-MGF of each Gaussian/Laplace component is in closed form; the concave maximisation is
    Newton with autograd derivatives.

    Domain [D]: E_Q e^{h} = ∞ whenever the leading coefficient of h has odd degree ≥ 2 or even degree ≥ 2
    and the wrong sign for the tails (Laplace: any positive c_2; Gaussian: c_2 ≥ 1/(2 scale²)), for
    every Q here (two-sided unbounded support). Hence KL^{poly3} = KL^{poly2} on these laws, and for
    Laplace Q the c_2 ≤ 0 constraint is handled exactly by a KKT check at the linear optimum.

    Args:
        p, q: scalar output laws with broadcastable batch shapes (...).
        function_class: "linear", "poly2" or "poly3" (degree ≥ 4: UnsupportedError).

    Returns:
        :class:`RestrictedValue` with value (...) and the witness h(x) in the f-form normalisation
        (optimal bias b = 1 − log E_Q e^{a·ψ}).
    """
    fc = parse_class(function_class)
    if fc.degree > 3:
        raise UnsupportedError("restricted KL is implemented for linear, poly2 and poly3 classes only")
    shape = _check_pair(p, q)
    pe, qe = p.expand(shape), q.expand(shape)
    ref_loc, ref_scale = _ref(qe)
    kf = 1 if fc.degree == 1 else 2
    m_p = pe.raw_moments(kf, ref_loc, ref_scale)[..., 1:].reshape(-1, kf)
    k = qe.weights.shape[-1]
    qq = _Q(qe.family, *(t.reshape(-1, k) for t in (qe.weights, qe.loc, qe.scale)))
    rl, rs = ref_loc.reshape(-1), ref_scale.reshape(-1)
    n = rl.shape[0]
    a_lin, v_lin, c_lin = _solve_kl(m_p[:, :1], qq, rl, rs, torch.zeros(n, 1, dtype=rl.dtype, device=rl.device))
    if kf == 1:
        a, val, conv = a_lin, v_lin, c_lin
    elif qq.family is Family.GAUSSIAN:
        a, val, conv = _solve_kl(m_p, qq, rl, rs, torch.zeros(n, 2, dtype=rl.dtype, device=rl.device))
    else:
        # KKT at (a1*, 0): the feasible set is c2 ≤ 0, so the linear optimum is optimal for poly2 iff
        # ∂/∂a2 = E_P z² − E_{Q tilted} z² ≥ 0; otherwise the optimum is interior (a2 < 0).
        g2 = m_p[:, 1] - _laplace_tilted_z2(qq, rl, rs, a_lin[:, 0])
        a0 = torch.cat([a_lin, torch.where(g2 < 0, -1e-3, 0.0)[:, None].to(rl.dtype)], -1)
        interior = g2 < 0
        a = torch.cat([a_lin, torch.zeros_like(a_lin)], -1)
        val, conv = v_lin.clone(), c_lin.clone()
        if bool(interior.any()):
            idx = interior.nonzero().squeeze(-1)
            ai, vi, ci = _solve_kl(m_p[idx], qq.rows(idx), rl[idx], rs[idx], a0[idx])
            a[idx], val[idx], conv[idx] = ai, vi, ci
    bias = 1.0 - _log_mgf(qq, rl, rs, a)
    theta = torch.cat([bias[:, None], a, torch.zeros(n, fc.degree - kf, dtype=a.dtype, device=a.device)], -1)
    wit = z_to_x(theta, rl, rs)
    return RestrictedValue(val.reshape(shape), wit.reshape(*shape, fc.degree + 1), conv.reshape(shape))


# ---------------------------------------------------------------------------------------------
# Unrestricted values (the right-hand column of the comparison)
# ---------------------------------------------------------------------------------------------


def _union_nodes(p: ScalarMixture, q: ScalarMixture, ref_loc: Tensor, ref_scale: Tensor) -> tuple[Tensor, Tensor]:
    """Nodes x (..., N) and dx-weights (..., N) on the union of both laws' panel edges."""
    pp, qq = (_Q(m.family, m.weights, m.loc, m.scale) for m in (p, q))
    bb, _ = torch.sort(torch.cat([_base_breaks(pp, ref_loc, ref_scale), _base_breaks(qq, ref_loc, ref_scale)], -1), -1)
    z, w = _panel_rule(bb)
    return ref_loc[..., None] + ref_scale[..., None] * z, w * ref_scale[..., None]


def full_kl(p: ScalarMixture, q: ScalarMixture) -> Tensor:
    """Unrestricted KL(P, Q) = E_P log(p/q) by panel quadrature.  Bound: exact (numerical).

    The integrand p·log(p/q) lives where P does, so the union of both laws' windows covers it.
    Closed forms used as tests: Laplace ε − 1 + e^{−ε} (Chaudhuri et al. 2019 Thm 8), Gaussian Δ²/(2σ²).
    """
    shape = _check_pair(p, q)
    pe, qe = p.expand(shape), q.expand(shape)
    ref_loc, ref_scale = _ref(qe)
    x, w = _union_nodes(pe, qe, ref_loc, ref_scale)
    lp, lq = pe.log_density(x), qe.log_density(x)
    return (w * torch.exp(lp) * (lp - lq)).sum(-1)


def _renyi_bounded_ratio(p: ScalarMixture, q: ScalarMixture, alpha: Tensor) -> Tensor:
    """D_α(P, Q) by quadrature of p·(p/q)^{α−1}; valid only when p/q is bounded (e.g. N ‖ subsampled mix).

    With p/q ≤ 1/(1 − q_rate) the integrand is dominated by p, so P's window suffices.
    """
    ref_loc, ref_scale = _ref(q)
    x, w = _union_nodes(p, q, ref_loc, ref_scale)
    lp, lq = p.log_density(x), q.log_density(x)
    a = alpha[..., None]
    return torch.logsumexp(torch.log(w)[..., None, :] + lp[..., None, :] + (a - 1.0) * (lp - lq)[..., None, :],
                           -1) / (alpha - 1.0)
