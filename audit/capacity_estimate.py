"""Restricted divergences estimated from samples: a held-out lower confidence bound (judgment, not theory).

Moved here from ``accountants.capacity`` (issue 12 §7): the population values of
Chaudhuri, Imola, Machanavajjhala, *Capacity Bounded Differential Privacy* (NeurIPS 2019,
arXiv:1907.02159v1) stay in :mod:`accountants.capacity`; this randomised estimator fits an adversary
on one part of the samples and bounds its value on the other, so its output is a statistical lower
bound at a stated confidence, like the rest of :mod:`audit`. See docs/capacity-bounded.md.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from accountants import validate as check
from accountants.capacity.classes import LINEAR, Polynomial, as_float64, parse_class
from accountants.capacity.newton import newton_maximise
from accountants.capacity.quadrature import polyval, powers
from accountants.capacity.scalar import alpha_terms, z_to_x
from accountants.errors import InputError

__all__ = ["RestrictedLowerBound", "restricted_lower_bound"]


class RestrictedLowerBound(NamedTuple):
    """A one-sided LOWER confidence bound on a restricted divergence from samples.

    Attributes:
        lower: lower bound on D^H(P, Q) (KL, or Rényi at ``order``), holding with probability
            ≥ ``confidence`` asymptotically (normal approximation of the held-out mean), shape (...).
            Clamped at 0, which is valid because every class here contains the constant f′(1).
        confidence: the one-sided confidence level.
        held_out_estimate: the held-out value of the fitted adversary (an estimate of J(ĥ) ≤ D^H; not
            a bound), shape (...).
        witness: fitted h(x) coefficients (lowest degree first), shape (..., k+1).
        n_fit: (P, Q) sample counts used to fit; n_eval: counts used to evaluate.
    """

    lower: Tensor
    confidence: float
    held_out_estimate: Tensor
    witness: Tensor
    n_fit: tuple[int, int]
    n_eval: tuple[int, int]


def _kl_fform_terms(theta: Tensor, m_p: Tensor, z: Tensor, w: Tensor, derivs: bool):
    """J(θ) = θ·E_P ψ − E_Q e^{h−1} (Lemma 1, f-form) and derivatives; w are expectation weights."""
    e = torch.exp(polyval(theta, z) - 1.0)
    val = (theta * m_p).sum(-1) - (w * e).sum(-1)
    if not derivs:
        return val
    psi = powers(z, theta.shape[-1] - 1)
    grad = m_p - torch.einsum("mn,mnp->mp", w * e, psi)
    hess = -torch.einsum("mn,mnp,mnq->mpq", w * e, psi, psi)
    return val, grad, hess


def restricted_lower_bound(samples_p: Tensor, samples_q: Tensor, function_class: Polynomial | str = LINEAR,
                           divergence: str = "kl", alpha: float | None = None, *, confidence: float = 0.95,
                           fit_fraction: float = 0.5, ridge: float = 1e-6,
                           generator: torch.Generator | None = None) -> RestrictedLowerBound:
    """One-sided lower confidence bound on KL^H or D_{R,α}^H from samples (held-out, never plug-in).

    Chaudhuri et al. 2019 (arXiv:1907.02159v1) eq. (2) estimated as in digest §6.3: each sample is split
    at random into a fit part and an evaluation part; ĥ maximises the empirical f-form objective on the
    fit part (concave: Newton, with a small ridge on the non-constant coefficients); on the evaluation
    part the f-form value Ĵ = mean_P ĥ − mean_Q f*(ĥ) is linear in the empirical measures, hence
    unbiased for J(ĥ) ≤ D^H(P, Q), and its one-sided normal bound Ĵ − z_c·se is a lower confidence
    bound on D^H. (The in-sample maximum and the Donsker–Varadhan log-mean-exp form are biased upward
    and are never reported.) Rényi: mapped through the increasing eq. (3).

    Bound: lower, at ``confidence`` (asymptotic normal approximation; heavy tails of f*(ĥ) under Q make
    it unreliable: prefer bounded or light-tailed observables). In particular for KL with degree ≥ 2 on
    unbounded outputs the fitted ĥ can have E_Q e^{ĥ} = ∞ (any x³ term, or x² on Laplace-like tails),
    and then no finite sample certifies coverage.

    Args:
        samples_p: observations with the record (..., n_p); samples_q: without (..., n_q). Leading
            dimensions are independent problems (e.g. Monte-Carlo repetitions).
        function_class: :class:`Polynomial` or its name.
        divergence: "kl" or "renyi" (then ``alpha`` > 1).
        confidence: one-sided level in (0, 1).
        fit_fraction: share of each sample used to fit, in (0, 1).
        ridge: ridge weight on the non-constant coefficients during the fit (≥ 0).
        generator: randomness of the split.

    Returns:
        :class:`RestrictedLowerBound`.
    """
    fc = parse_class(function_class)
    if divergence not in ("kl", "renyi"):
        raise InputError(f"divergence must be 'kl' or 'renyi'; got {divergence!r}")
    if divergence == "renyi":
        if alpha is None:
            raise InputError("alpha is required for divergence='renyi'")
        check.in_range(1.0, None, closed="neither", alpha=alpha)
    elif alpha is not None:
        raise InputError("alpha must be None for divergence='kl'")
    check.in_range(0.0, 1.0, closed="neither", confidence=confidence, fit_fraction=fit_fraction)
    check.in_range(0.0, None, ridge=ridge)
    xp, xq = as_float64(samples_p), as_float64(samples_q)
    if xp.ndim == 0 or xq.ndim == 0:
        raise InputError("samples must have a last (sample) dimension")
    check.finite(samples_p=xp, samples_q=xq)
    shape = torch.broadcast_shapes(xp.shape[:-1], xq.shape[:-1])
    xp = xp.expand(*shape, xp.shape[-1]).reshape(-1, xp.shape[-1])
    xq = xq.expand(*shape, xq.shape[-1]).reshape(-1, xq.shape[-1])
    nfp, nfq = int(fit_fraction * xp.shape[-1]), int(fit_fraction * xq.shape[-1])
    if min(nfp, xp.shape[-1] - nfp, nfq, xq.shape[-1] - nfq) < fc.degree + 2:
        raise InputError("too few samples: each of the fit and evaluation parts needs > degree + 1 points")

    def split(x: Tensor, nf: int) -> tuple[Tensor, Tensor]:
        perm = torch.argsort(torch.rand(x.shape, generator=generator, dtype=x.dtype, device=x.device), -1)
        xs = torch.gather(x, -1, perm)
        return xs[:, :nf], xs[:, nf:]

    fp, ep = split(xp, nfp)
    fq, eq = split(xq, nfq)
    mu, sd = fq.mean(-1), fq.std(-1).clamp_min(1e-300)
    k = fc.degree

    def z(x: Tensor) -> Tensor:
        return (x - mu[:, None]) / sd[:, None]

    m_fit = powers(z(fp), k).mean(-2)
    zq = z(fq)
    wq = torch.full_like(zq, 1.0 / zq.shape[-1])
    n = mu.shape[0]
    a = torch.full((n,), float(alpha) if alpha is not None else 2.0, dtype=mu.dtype, device=mu.device)
    pen = torch.full((k + 1,), ridge, dtype=mu.dtype, device=mu.device)
    pen[0] = 0.0

    def terms(theta: Tensor, rows: Tensor, derivs: bool):
        if divergence == "renyi":
            out = alpha_terms(theta, a[rows], m_fit[rows], zq[rows], wq[rows], derivs)
        else:
            out = _kl_fform_terms(theta, m_fit[rows], zq[rows], wq[rows], derivs)
        if not derivs:
            return out - (pen * theta * theta).sum(-1)
        v, g, h = out
        return v - (pen * theta * theta).sum(-1), g - 2.0 * pen * theta, h - torch.diag_embed(2.0 * pen).expand_as(h)

    theta0 = torch.zeros(n, k + 1, dtype=mu.dtype, device=mu.device)
    theta0[:, 0] = 1.0
    theta, _, _ = newton_maximise(lambda t, r: terms(t, r, False), lambda t, r: terms(t, r, True), theta0)
    hp, hq = polyval(theta, z(ep)), polyval(theta, z(eq))
    if divergence == "renyi":
        big_a = a / (a - 1.0)
        xs, ys = a[:, None] * hp, (a - 1.0)[:, None] * hq.abs() ** big_a[:, None]
    else:
        xs, ys = hp, torch.exp(hq - 1.0)
    est = xs.mean(-1) - ys.mean(-1)
    se = (xs.var(-1) / xs.shape[-1] + ys.var(-1) / ys.shape[-1]).sqrt()
    zc = float(torch.special.ndtri(torch.tensor(confidence, dtype=torch.float64)))
    lo = est - zc * se
    # f*(ĥ) overflowing on held-out data (e.g. a fitted x³ term under KL) makes the estimate −∞ and the
    # normal bound undefined; 0 is then reported, which is valid because D^H ≥ 0 for these classes.
    lo = torch.where(torch.isfinite(lo), lo, torch.full_like(lo, -math.inf))
    if divergence == "renyi":  # est estimates G(ĥ) = α(α−1)·J(ĥ) + 1 (see alpha_terms); D_R = log(G)/(α−1)
        lower = torch.log(lo.clamp_min(1.0)) / (a - 1.0)
        held = torch.log(est.clamp_min(1e-300)) / (a - 1.0)
        wit = z_to_x(theta, mu, sd) / (a - 1.0)[:, None]
    else:
        lower, held, wit = lo.clamp_min(0.0), est, z_to_x(theta, mu, sd)
    return RestrictedLowerBound(lower.reshape(shape), float(confidence), held.reshape(shape),
                                wit.reshape(*shape, k + 1), (nfp, nfq), (ep.shape[-1], eq.shape[-1]))
