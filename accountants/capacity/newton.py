"""Concave maximisation: damped Newton with a vectorised line search, batched over problems.

Part of :mod:`accountants.capacity` (Chaudhuri, Imola, Machanavajjhala 2019, arXiv:1907.02159v1).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

# Concave maximisation (damped Newton with a vectorised line search)
# ---------------------------------------------------------------------------------------------

_STEPS = (4.0, 2.0, 1.0, 0.5, 0.25, 0.125, 1 / 16, 1 / 64, 1 / 256, 1 / 2048, 1 / 32768, 1 / 2**20)


def newton_maximise(value_fn, derivs_fn, theta: Tensor, *, max_iter: int = 200,
                    rtol: float = 1e-15) -> tuple[Tensor, Tensor, Tensor]:
    """Maximise independent concave objectives batched along dim 0.

    Args:
        value_fn: (θ (M, p), rows (M,)) → J (M,), −inf where infeasible; ``rows`` index the batch.
        derivs_fn: (θ (M, p), rows (M,)) → (J, grad (M, p), Hessian (M, p, p)).
        theta: feasible starting points (B, p).

    Returns:
        (θ*, J(θ*), converged) where converged means the Newton decrement g^T(−H)^{−1}g fell below
        rtol·max(1, |J|) (for a concave J this is ≈ 2·(J* − J)).
    """
    b, p = theta.shape
    steps = torch.tensor(_STEPS, dtype=theta.dtype, device=theta.device)
    grad_steps = 10.0 ** -torch.arange(len(_STEPS), dtype=theta.dtype, device=theta.device)
    val, g, h = derivs_fn(theta, torch.arange(b, device=theta.device))
    done = torch.zeros(b, dtype=torch.bool, device=theta.device)
    eye = torch.eye(p, dtype=theta.dtype, device=theta.device)
    for _ in range(max_iter):
        neg_h = -h
        # Tikhonov term relative to the Hessian's scale keeps the solve well posed on flat directions.
        ridge = 1e-13 * neg_h.diagonal(dim1=-2, dim2=-1).abs().amax(-1).clamp_min(1e-300)
        d = torch.linalg.solve(neg_h + ridge[:, None, None] * eye, g.unsqueeze(-1)).squeeze(-1)
        dec = (g * d).sum(-1)
        done = done | ~(dec > rtol * val.abs().clamp_min(1.0)) | ~torch.isfinite(dec)
        if bool(done.all()):
            break
        act = (~done).nonzero().squeeze(-1)
        th_a, d_a = theta[act], d[act]
        # Full Newton step first (cheap: one evaluation per row). Rows where it does not deliver a fair
        # share (10%) of the predicted gain dec/2 evaluate the whole grid: Newton steps of lengths _STEPS
        # and, for a poorly conditioned Newton direction (e.g. nearly coincident roots of h), steepest
        # ascent with lengths 10^0..10^-11 of max(‖θ‖, 1), whose scale does not depend on the Hessian.
        new_theta = th_a + d_a
        best_v = value_fn(new_theta, act)
        best_v = torch.where(torch.isnan(best_v), torch.full_like(best_v, -math.inf), best_v)
        good = (best_v - val[act]) >= 0.05 * dec[act]
        if not bool(good.all()):
            ls = (~good).nonzero().squeeze(-1)
            rows = act[ls]
            g_r = g[rows]
            gd = g_r / g_r.norm(dim=-1, keepdim=True).clamp_min(1e-300)
            gd = gd * theta[rows].norm(dim=-1, keepdim=True).clamp_min(1.0)
            cand = torch.cat([th_a[ls, None, :] + steps[None, :, None] * d_a[ls, None, :],
                              theta[rows][:, None, :] + grad_steps[None, :, None] * gd[:, None, :]], 1)
            n_c = cand.shape[1]
            cv = value_fn(cand.reshape(-1, p), rows.repeat_interleave(n_c)).reshape(len(ls), n_c)
            cv = torch.where(torch.isnan(cv), torch.full_like(cv, -math.inf), cv)
            bv, bi = cv.max(-1)
            take = bv > best_v[ls]
            new_theta[ls[take]] = cand[take, bi[take]]
            best_v[ls[take]] = bv[take]
        better = best_v > val[act]
        stuck = act[~better]
        done[stuck] = True
        upd = act[better]
        if len(upd):
            theta = theta.clone()
            theta[upd] = new_theta[better]
            v2, g2, h2 = derivs_fn(theta[upd], upd)
            val, g, h = val.clone(), g.clone(), h.clone()
            val[upd], g[upd], h[upd] = v2, g2, h2
    neg_h = -h
    ridge = 1e-13 * neg_h.diagonal(dim1=-2, dim2=-1).abs().amax(-1).clamp_min(1e-300)
    d = torch.linalg.solve(neg_h + ridge[:, None, None] * eye, g.unsqueeze(-1)).squeeze(-1)
    dec = (g * d).sum(-1)
    # Converged: the predicted remaining gain (≈ dec/2; the regularised Hessian over-estimates it) is
    # below 1e-9 relative. Stationarity in the raw gradient is not required: at extreme orders the
    # optimal coefficients reach 1e3-1e4 and the gradient's rounding noise grows with them.
    converged = dec <= 1e-9 * val.abs().clamp_min(1.0)
    return theta, val, converged
