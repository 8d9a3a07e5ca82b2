"""Quadrature: Gauss–Legendre panels with a sigmoidal map (endpoint singularities of |h|^A), polynomial helpers.

Part of :mod:`accountants.capacity` (Chaudhuri, Imola, Machanavajjhala 2019, arXiv:1907.02159v1).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from .classes import Family, _log_density

# Quadrature: Gauss–Legendre panels with a sigmoidal map (endpoint singularities of |h|^A)
# ---------------------------------------------------------------------------------------------

class _Q(NamedTuple):
    """Unvalidated flat view of a mixture used inside the solvers (rows = problems)."""

    family: Family
    w: Tensor
    loc: Tensor
    scale: Tensor

    def rows(self, idx: Tensor) -> _Q:
        return _Q(self.family, self.w[idx], self.loc[idx], self.scale[idx])


_GL_N = 32
# Breakpoints in component units u = (x − loc)/scale. Gaussian: e^{−14²/2} ≈ 3e−43 beyond the
# window; Laplace: e^{−90} ≈ 8e−40 (times |h|^A, polynomial in u: negligible). 0 is the Laplace kink.
_BREAKS = {
    Family.GAUSSIAN: (-14.0, -9.0, -6.0, -4.0, -2.5, -1.2, 0.0, 1.2, 2.5, 4.0, 6.0, 9.0, 14.0),
    Family.LAPLACE: (-90.0, -60.0, -40.0, -25.0, -15.0, -8.0, -4.0, -1.5, 0.0, 1.5, 4.0, 8.0, 15.0, 25.0,
                     40.0, 60.0, 90.0),
}
_GL_CACHE: dict[tuple[int, torch.dtype, torch.device], tuple[Tensor, Tensor]] = {}


def _gl_sigmoidal(n: int, dtype: torch.dtype, device: torch.device) -> tuple[Tensor, Tensor]:
    """Nodes/weights on [0, 1] of Gauss–Legendre composed with the quintic map w(t) = t³(10 − 15t + 6t²).

    w'(t) = 30 t²(1−t)² vanishes to second order at both ends, so an endpoint singularity |x − r|^A
    becomes t^{3A+2}: Gauss–Legendre then converges like n^{−(6A+6)} instead of n^{−(2A+2)}.
    """
    key = (n, dtype, device)
    if key not in _GL_CACHE:
        t, w = np.polynomial.legendre.leggauss(n)
        t = 0.5 * (t + 1.0)
        w = 0.5 * w
        x = t**3 * (10.0 - 15.0 * t + 6.0 * t * t)
        dx = 30.0 * t * t * (1.0 - t) ** 2
        _GL_CACHE[key] = (torch.tensor(x, dtype=dtype, device=device), torch.tensor(w * dx, dtype=dtype, device=device))
    return _GL_CACHE[key]


def _panel_rule(breaks: Tensor, n: int | None = None) -> tuple[Tensor, Tensor]:
    """Composite rule on sorted breakpoints (..., M): nodes and weights (..., (M−1)·n), n = _GL_N by default."""
    t, w = _gl_sigmoidal(_GL_N if n is None else n, breaks.dtype, breaks.device)
    lo, hi = breaks[..., :-1, None], breaks[..., 1:, None]
    width = hi - lo
    x = lo + width * t
    wt = width * w
    return x.flatten(-2), wt.flatten(-2)


def _base_breaks(q: _Q, ref_loc: Tensor, ref_scale: Tensor) -> Tensor:
    """Breakpoints of every component of q in reference units z = (x − ref_loc)/ref_scale: (..., K·nb)."""
    base = torch.tensor(_BREAKS[q.family], dtype=q.loc.dtype, device=q.loc.device)
    o = (q.loc - ref_loc[..., None]) / ref_scale[..., None]
    s = q.scale / ref_scale[..., None]
    return (o[..., None] + s[..., None] * base).flatten(-2)


def _poly_roots_real(theta: Tensor) -> Tensor:
    """Real parts of the roots of Σ_j θ_j z^j (..., p) → (..., p−1); non-finite entries become NaN."""
    k = theta.shape[-1] - 1
    if k == 1:
        return (-theta[..., :1] / theta[..., 1:2]).nan_to_num(nan=float("nan"), posinf=float("nan"),
                                                              neginf=float("nan"))
    scale = theta.abs().amax(-1, keepdim=True).clamp_min(1e-300)
    th = theta / scale
    lead = th[..., -1:]
    tiny = 1e-13
    lead = torch.where(lead.abs() < tiny, torch.where(lead < 0, -tiny, tiny) * torch.ones_like(lead), lead)
    comp = torch.zeros(*theta.shape[:-1], k, k, dtype=theta.dtype, device=theta.device)
    comp[..., 0, :] = -th[..., :-1].flip(-1) / lead
    if k > 1:
        idx = torch.arange(k - 1, device=theta.device)
        comp[..., idx + 1, idx] = 1.0
    roots = torch.linalg.eigvals(comp).real
    return torch.where(torch.isfinite(roots), roots, torch.full_like(roots, float("nan")))


def _q_nodes(q: _Q, ref_loc: Tensor, ref_scale: Tensor, theta: Tensor | None) -> tuple[Tensor, Tensor]:
    """Quadrature nodes z (..., N) and weights including the density of q in z units (..., N).

    Breakpoints: each component's fixed panel edges plus the real parts of the roots of h_θ (the kinks
    of |h|^A), clamped into the window; a breakpoint on a smooth stretch costs accuracy nothing.
    """
    bb = _base_breaks(q, ref_loc, ref_scale)
    if theta is not None and theta.shape[-1] > 1:
        lo, hi = bb.amin(-1, keepdim=True), bb.amax(-1, keepdim=True)
        r = _poly_roots_real(theta)
        r = torch.where(torch.isnan(r), lo, r)
        bb = torch.cat([bb, torch.minimum(torch.maximum(r, lo), hi)], -1)
    bb, _ = torch.sort(bb, -1)
    z, w = _panel_rule(bb)
    x = ref_loc[..., None] + ref_scale[..., None] * z
    logq = _log_density(q.family, q.w, q.loc, q.scale, x) + torch.log(ref_scale)[..., None]
    return z, w * torch.exp(logq)


def powers(z: Tensor, k: int) -> Tensor:
    """(..., N) → (..., N, k+1) with z^0..z^k."""
    out = [torch.ones_like(z)]
    for _ in range(k):
        out.append(out[-1] * z)
    return torch.stack(out, -1)


def polyval(theta: Tensor, z: Tensor) -> Tensor:
    """Σ_j θ_j z^j (Horner); theta (..., p), z (..., N)."""
    acc = theta[..., -1:].expand_as(z).clone()
    for j in range(theta.shape[-1] - 2, -1, -1):
        acc = acc * z + theta[..., j : j + 1]
    return acc
