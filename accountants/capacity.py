"""Capacity-bounded privacy: restricted KL and Rényi divergences against a bounded adversary class.

Chaudhuri, Imola, Machanavajjhala, *Capacity Bounded Differential Privacy*, NeurIPS 2019
(arXiv:1907.02159v1). A restricted f-divergence (eq. 2) replaces "all functions" in the
variational form of an f-divergence by a class H of tests::

    D_f^H(P, Q) = sup_{h in H}  E_P[h] - E_Q[f*(h)]

dpaudit implements the classes that are linear in their parameters: ``Polynomial(k)``, i.e.
h(x) = c_0 + c_1 x + ... + c_k x^k on a scalar output (``LINEAR = Polynomial(1)`` is the paper's
affine class "lin" with its bias). For such classes the objective is concave in (c_0, ..., c_k),
so the supremum is computed *exactly* (up to quadrature and optimiser tolerance, measured at
≲ 1e-10 relative against closed forms) by damped Newton, batched in torch over configurations
and orders. The paper's printed (lin, Rényi) "upper bounds" (Table 1 rows 3-6, Thm 13, Cor 2,
Thm 5) are NOT valid bounds (counterexamples in the tests and in docs/capacity-bounded.md); this
module never uses them. :func:`paper_claimed_lin_renyi_bound` returns them only so that tests can
show where they fail.

IMPORTANT: these numbers are NOT (ε, δ) guarantees and NOT trade-off curves, and no function
here converts them into either. The standard RDP → (ε, δ) / RDP → f-DP conversions use data
processing over indicator functions (all events), which a restricted class does not contain;
the paper gives restricted divergences no hypothesis-testing meaning. A number from this module
says: "no test statistic in H separates the two output laws by more than this, measured by this
divergence." A linear score followed by a threshold is NOT a linear adversary.

Conventions:
    * P is the output law on the dataset WITH the record, Q WITHOUT (mechanism pairs: P centred at
      0, Q centred at the sensitivity Δ = 1, as in values.json ``capacity_bounded``). D(P, Q) is
      directional; mechanism-level functions report both directions and their maximum.
    * α-divergence: f_α(t) = (|t|^α − 1)/(α² − α) WITH the absolute value (the paper's convention;
      the (t)_+ convention gives larger restricted values), so
      f*(s) = C_α |s|^{α/(α−1)} + 1/(α² − α), C_α = (α−1)^{α/(α−1)}/α  (Lemma 3, sign fixed).
    * Restricted Rényi (eq. 3): D_{R,α}^H = log(1 + α(α−1) D_α^H)/(α−1), natural logarithms.
    * Restricted KL (Lemma 1): KL^H = sup_h E_P h − E_Q e^{h−1}; with a bias this is the
      Donsker–Varadhan form restricted to the class.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from . import _validate as check
from ._validate import InputError, InputTypeError, UnsupportedError
from .events import DPSGD
from .mechanisms import Gaussian, Laplace
from .rdp.mechanisms import rdp_gaussian, rdp_laplace
from .rdp.poisson import rdp_poisson_gaussian
from .sampling import Neighbouring, Poisson

__all__ = [
    "LINEAR",
    "WITHOUT_WITH",
    "WITH_WITHOUT",
    "CapacityResult",
    "Family",
    "Polynomial",
    "RestrictedLowerBound",
    "RestrictedValue",
    "ScalarMixture",
    "alpha_divergence_to_renyi",
    "capacity_divergences",
    "compose_nonadaptive",
    "compose_parallel",
    "f_star",
    "full_kl",
    "mechanism_pairs",
    "paper_claimed_lin_renyi_bound",
    "parse_class",
    "post_process_polynomial",
    "renyi_to_alpha_divergence",
    "restricted_alpha_divergence",
    "restricted_kl",
    "restricted_kl_gaussian_nd",
    "restricted_kl_laplace_product",
    "restricted_lower_bound",
    "restricted_renyi",
    "restricted_renyi_gaussian_nd",
    "restricted_renyi_laplace_product",
]

_DTYPE = torch.float64


# ---------------------------------------------------------------------------------------------
# Descriptions: function classes and scalar output laws
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Polynomial:
    """Adversary class of polynomials of degree ≤ ``degree`` in the scalar output, WITH a constant.

    h(x) = c_0 + c_1 x + ... + c_k x^k. ``Polynomial(1)`` is the paper's "lin" (affine: the bias is
    part of the class; every closed form depends on it). The class is a linear space containing the
    constants, so it is convex and translation invariant (hypotheses of Thms 3 and 4).
    """

    degree: int

    def __post_init__(self) -> None:
        check.integer(1, 8, degree=self.degree)
        object.__setattr__(self, "degree", int(self.degree))

    @property
    def name(self) -> str:
        return "linear" if self.degree == 1 else f"poly{self.degree}"


LINEAR = Polynomial(1)


def parse_class(name: str | Polynomial) -> Polynomial:
    """``"linear"``/``"lin"``/``"poly1"`` → Polynomial(1); ``"polyK"`` → Polynomial(K) (1 ≤ K ≤ 8)."""
    if isinstance(name, Polynomial):
        return name
    if not isinstance(name, str):
        raise InputTypeError(f"function class must be a str or Polynomial; got {type(name).__name__}")
    key = name.strip().lower()
    if key in ("linear", "lin"):
        return LINEAR
    if key.startswith("poly") and key[4:].isdigit():
        return Polynomial(int(key[4:]))
    raise InputError(f"unknown function class {name!r}; choose from linear, poly2, poly3, ... poly8")


class Family(Enum):
    """Location-scale family of the components of a :class:`ScalarMixture`."""

    GAUSSIAN = "gaussian"
    LAPLACE = "laplace"


@dataclass(frozen=True, slots=True)
class ScalarMixture:
    """A finite mixture Σ_j w_j · F((x − loc_j)/scale_j)/scale_j of one location-scale family.

    Tensors have shape (..., K): leading dimensions are configurations, the last indexes the K
    components. Laplace components have density e^{−|x−loc|/scale}/(2·scale).

    Attributes:
        family: :class:`Family`.
        weights, loc, scale: broadcastable tensors (..., K); weights ≥ 0 summing to 1, scale > 0.
    """

    family: Family
    weights: Tensor
    loc: Tensor
    scale: Tensor

    def __post_init__(self) -> None:
        if not isinstance(self.family, Family):
            raise InputTypeError(f"family must be a Family; got {type(self.family).__name__}")
        w = torch.as_tensor(self.weights, dtype=_DTYPE) if not isinstance(self.weights, Tensor) else self.weights
        loc = torch.as_tensor(self.loc, dtype=w.dtype, device=w.device)
        scale = torch.as_tensor(self.scale, dtype=w.dtype, device=w.device)
        check.in_range(0.0, 1.0, weights=w)
        check.finite(loc=loc)
        check.positive(scale=scale)
        w, loc, scale = torch.broadcast_tensors(w, loc, scale)
        if w.ndim == 0:
            raise InputError("weights, loc, scale must have a last (component) dimension; got scalars")
        if not bool(torch.allclose(w.sum(-1), torch.ones((), dtype=w.dtype, device=w.device), atol=1e-12)):
            raise InputError("weights must sum to 1 over the last dimension")
        object.__setattr__(self, "weights", w)
        object.__setattr__(self, "loc", loc)
        object.__setattr__(self, "scale", scale)

    @property
    def batch_shape(self) -> torch.Size:
        return self.weights.shape[:-1]

    @classmethod
    def gaussian(cls, loc: Tensor | float, scale: Tensor | float) -> ScalarMixture:
        """One Gaussian N(loc, scale²) per configuration."""
        loc_t, scale_t = _aligned(loc, scale)
        return cls(Family.GAUSSIAN, torch.ones_like(loc_t)[..., None], loc_t[..., None], scale_t[..., None])

    @classmethod
    def laplace(cls, loc: Tensor | float, scale: Tensor | float) -> ScalarMixture:
        """One Laplace Lap(loc, scale) per configuration."""
        loc_t, scale_t = _aligned(loc, scale)
        return cls(Family.LAPLACE, torch.ones_like(loc_t)[..., None], loc_t[..., None], scale_t[..., None])

    @classmethod
    def subsampled_gaussian(cls, q: Tensor | float, sigma: Tensor | float, shift: float = 1.0) -> ScalarMixture:
        """(1 − q)·N(0, σ²) + q·N(shift, σ²): one Poisson-subsampled Gaussian step with the record."""
        q_t, s_t = _aligned(q, sigma)
        check.in_range(0.0, 1.0, closed="right", q=q_t)
        w = torch.stack([1.0 - q_t, q_t], -1)
        loc = torch.stack([torch.zeros_like(q_t), torch.full_like(q_t, float(shift))], -1)
        return cls(Family.GAUSSIAN, w, loc, torch.stack([s_t, s_t], -1))

    def expand(self, shape: torch.Size) -> ScalarMixture:
        k = self.weights.shape[-1]
        return ScalarMixture(self.family, self.weights.expand(*shape, k), self.loc.expand(*shape, k),
                             self.scale.expand(*shape, k))

    def mean(self) -> Tensor:
        return (self.weights * self.loc).sum(-1)

    def log_density(self, x: Tensor) -> Tensor:
        """log density at x (..., N) for configurations (...)."""
        return _log_density(self.family, self.weights, self.loc, self.scale, x)

    def raw_moments(self, k: int, ref_loc: Tensor, ref_scale: Tensor) -> Tensor:
        """E[z^j], j = 0..k, for z = (x − ref_loc)/ref_scale; shape (..., k+1). Exact (binomial expansion)."""
        o = (self.loc - ref_loc[..., None]) / ref_scale[..., None]
        s = self.scale / ref_scale[..., None]
        um = [_unit_moment(self.family, i) for i in range(k + 1)]
        out = []
        for j in range(k + 1):
            acc = torch.zeros_like(o)
            for i in range(j + 1):
                if um[i] != 0.0:
                    acc = acc + math.comb(j, i) * o ** (j - i) * s**i * um[i]
            out.append((self.weights * acc).sum(-1))
        return torch.stack(out, -1)


def _log_density(family: Family, w: Tensor, loc: Tensor, scale: Tensor, x: Tensor) -> Tensor:
    w, m, s = (t[..., None, :] for t in (w, loc, scale))
    u = (x[..., None] - m) / s
    if family is Family.GAUSSIAN:
        lc = -0.5 * u * u - 0.5 * math.log(2 * math.pi) - torch.log(s)
    else:
        lc = -u.abs() - math.log(2.0) - torch.log(s)
    return torch.logsumexp(lc + torch.log(w), -1)


def _unit_moment(family: Family, i: int) -> float:
    """E u^i for the standard member (Gaussian N(0,1): (i−1)!!; Laplace Lap(0,1): i!) of the family."""
    if i % 2:
        return 0.0
    if family is Family.GAUSSIAN:
        return float(math.prod(range(i - 1, 0, -2))) if i else 1.0
    return float(math.factorial(i))


def _aligned(*xs: Tensor | float) -> list[Tensor]:
    """float64 tensors on the device of the first tensor argument, broadcast together."""
    dev = next((x.device for x in xs if isinstance(x, Tensor)), None)
    return list(torch.broadcast_tensors(*(_t(x).to(dev) if dev is not None else _t(x) for x in xs)))


def _t(x: Tensor | float) -> Tensor:
    return x.to(_DTYPE) if isinstance(x, Tensor) and not x.is_floating_point() else torch.as_tensor(x, dtype=_DTYPE)


# ---------------------------------------------------------------------------------------------
# Conjugates and the Rényi map
# ---------------------------------------------------------------------------------------------


def f_star(kind: str, s: Tensor, alpha: Tensor | float | None = None, *, positive_part: bool = False) -> Tensor:
    """Fenchel conjugate f*(s) of the generator of KL or of the α-divergence.

    Chaudhuri et al. 2019, Lemma 1 (KL: e^{s−1}) and Lemma 3 (α: C_α|s|^{α/(α−1)} + 1/(α²−α), with
    the intermediate display's sign typo fixed).

    Args:
        kind: ``"kl"`` or ``"alpha"``.
        s: points (...).
        alpha: order α > 1 (kind ``"alpha"`` only), broadcast against ``s``.
        positive_part: use the (t)_+ domain convention f(t) = (t^α − 1)/(α²−α) on t ≥ 0, whose
            conjugate is C_α (s)_+^{α/(α−1)} + 1/(α²−α). Exposed for comparison only: every
            restricted value in dpaudit uses the paper's absolute-value convention.
    """
    s = _t(s)
    if kind == "kl":
        return torch.exp(s - 1.0)
    if kind != "alpha":
        raise InputError(f"kind must be 'kl' or 'alpha'; got {kind!r}")
    if alpha is None:
        raise InputError("alpha is required for kind='alpha'")
    a = torch.as_tensor(alpha, dtype=s.dtype, device=s.device)
    check.in_range(1.0, None, closed="neither", alpha=a)
    big_a = a / (a - 1.0)
    c = (a - 1.0) ** big_a / a
    base = s.clamp_min(0.0) if positive_part else s.abs()
    return c * base**big_a + 1.0 / (a * a - a)


def alpha_divergence_to_renyi(d_alpha: Tensor, alpha: Tensor) -> Tensor:
    """Eq. (3): D_R = log(1 + α(α−1)·D_α)/(α−1). Increasing in D_α, so bounds carry through."""
    return torch.log1p(alpha * (alpha - 1.0) * d_alpha) / (alpha - 1.0)


def renyi_to_alpha_divergence(d_renyi: Tensor, alpha: Tensor) -> Tensor:
    """Inverse of eq. (3): η_α(ε) = (e^{(α−1)ε} − 1)/(α(α−1))."""
    return torch.expm1((alpha - 1.0) * d_renyi) / (alpha * (alpha - 1.0))


# ---------------------------------------------------------------------------------------------
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


def _powers(z: Tensor, k: int) -> Tensor:
    """(..., N) → (..., N, k+1) with z^0..z^k."""
    out = [torch.ones_like(z)]
    for _ in range(k):
        out.append(out[-1] * z)
    return torch.stack(out, -1)


def _polyval(theta: Tensor, z: Tensor) -> Tensor:
    """Σ_j θ_j z^j (Horner); theta (..., p), z (..., N)."""
    acc = theta[..., -1:].expand_as(z).clone()
    for j in range(theta.shape[-1] - 2, -1, -1):
        acc = acc * z + theta[..., j : j + 1]
    return acc


# ---------------------------------------------------------------------------------------------
# Concave maximisation (damped Newton with a vectorised line search)
# ---------------------------------------------------------------------------------------------

_STEPS = (4.0, 2.0, 1.0, 0.5, 0.25, 0.125, 1 / 16, 1 / 64, 1 / 256, 1 / 2048, 1 / 32768, 1 / 2**20)


def _newton(value_fn, derivs_fn, theta: Tensor, *, max_iter: int = 200,
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


# ---------------------------------------------------------------------------------------------
# Restricted α-divergence / Rényi (Lemma 3 + eq. 3), population values by quadrature
# ---------------------------------------------------------------------------------------------


def _ref(q: ScalarMixture) -> tuple[Tensor, Tensor]:
    """Reference coordinates z = (x − mean_Q)/sd_Q (the class is affine-invariant, so this only conditions)."""
    mean = q.mean()
    second = (q.weights * (q.scale**2 * (2.0 if q.family is Family.LAPLACE else 1.0) + q.loc**2)).sum(-1)
    return mean, (second - mean**2).clamp_min(1e-300).sqrt()


def _alpha_terms(theta: Tensor, alpha: Tensor, m_p: Tensor, z: Tensor, w: Tensor, derivs: bool):
    """Scaled objective G(θ) = α θ·E_P[ψ] − (α−1) E_Q|h|^A, h = θ·ψ, A = α/(α−1), and its derivatives.

    With h = (α−1)·h_paper this is α(α−1)·(Lemma 3 objective) + 1, so D_{R,α}^H = log(sup G)/(α−1)
    (eq. 3) and the constant h = 1 (θ = e_0) gives G = 1, i.e. D = 0 (Fenchel–Young equality).
    """
    big_a = (alpha / (alpha - 1.0))[:, None]
    hz = _polyval(theta, z)
    ab = hz.abs()
    val = alpha * (theta * m_p).sum(-1) - (alpha - 1.0) * (w * ab**big_a).sum(-1)
    if not derivs:
        return val
    psi = _powers(z, theta.shape[-1] - 1)
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
        return _alpha_terms(theta, alpha[rows], m_p[rows], z, w, False)

    def derivs_fn(theta: Tensor, rows: Tensor):
        z, w = _q_nodes(q.rows(rows), ref_loc[rows], ref_scale[rows], theta)
        return _alpha_terms(theta, alpha[rows], m_p[rows], z, w, True)

    theta0 = torch.zeros(len(alpha), p, dtype=m_p.dtype, device=m_p.device)
    theta0[:, 0] = 1.0
    return _newton(value_fn, derivs_fn, theta0)


def _z_to_x(theta: Tensor, ref_loc: Tensor, ref_scale: Tensor) -> Tensor:
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
    wit = _z_to_x(theta, rl, rs) / (aa - 1.0)[:, None]
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

    return _newton(value_fn, derivs_fn, a0)


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
    wit = _z_to_x(theta, rl, rs)
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


# ---------------------------------------------------------------------------------------------
# Mechanism level: pairs, both directions, restricted next to unrestricted
# ---------------------------------------------------------------------------------------------

WITH_WITHOUT = "with||without"
WITHOUT_WITH = "without||with"


def mechanism_pairs(mechanism: Gaussian | Laplace | DPSGD) -> dict[str, tuple[ScalarMixture, ScalarMixture]]:
    """The neighbouring output laws (P with the record, Q without) at sensitivity 1, both directions.

    * ``Gaussian(sigma)``: N(1, σ²) vs N(0, σ²); ``Laplace(b)``: Lap(1, b) vs Lap(0, b). Written as
      P centred at 0 and Q at 1 (affine invariance makes this the same problem, and the reflection
      x ↦ 1 − x maps polynomials of degree ≤ k to themselves, so both directions are equal [D]).
    * ``DPSGD`` with one step of Poisson sampling under add/remove (group size 1): with = (1−q)N(0, σ²)
      + qN(1, σ²), without = N(0, σ²); the two directions differ and both are returned.

    Raises:
        UnsupportedError: several steps (DP-SGD is adaptive; Thm 4 covers only non-adaptive
            composition), fixed-size sampling, replace-one, or group size > 1.
    """
    if isinstance(mechanism, Gaussian):
        pair = (ScalarMixture.gaussian(0.0, mechanism.sigma), ScalarMixture.gaussian(1.0, mechanism.sigma))
        return {WITH_WITHOUT: pair, WITHOUT_WITH: pair}
    if isinstance(mechanism, Laplace):
        pair = (ScalarMixture.laplace(0.0, mechanism.b), ScalarMixture.laplace(1.0, mechanism.b))
        return {WITH_WITHOUT: pair, WITHOUT_WITH: pair}
    if isinstance(mechanism, DPSGD):
        if mechanism.steps != 1:
            raise UnsupportedError("capacity bounds cover one DP-SGD step only: DP-SGD is adaptive and "
                                   "Chaudhuri et al. 2019 Thm 4 composes non-adaptive releases only")
        if not isinstance(mechanism.sampling, Poisson):
            raise UnsupportedError("capacity bounds for a DP-SGD step need Poisson sampling")
        if mechanism.neighbouring is not Neighbouring.ADD_REMOVE or mechanism.group_size != 1:
            raise UnsupportedError("capacity bounds for a DP-SGD step cover add/remove of one record only")
        mix = ScalarMixture.subsampled_gaussian(mechanism.sampling.rate, mechanism.noise_multiplier)
        base = ScalarMixture.gaussian(0.0, mechanism.noise_multiplier)
        return {WITH_WITHOUT: (mix, base), WITHOUT_WITH: (base, mix)}
    raise InputTypeError(
        f"mechanism must be Gaussian, Laplace or a one-step Poisson DPSGD; got {type(mechanism).__name__}"
    )


class CapacityResult(NamedTuple):
    """Restricted and unrestricted divergences of one mechanism, worst direction and per direction.

    NOT (ε, δ), NOT a trade-off curve: see the module docstring. ``restricted[c] ≤ unrestricted``.

    Attributes:
        divergence: "kl" or "renyi".
        orders: Rényi orders (A,) or None for KL.
        restricted: class name → max over directions, shape (A,) or ().
        unrestricted: max over directions of the unrestricted divergence (RDP at the orders, or KL).
        by_direction: {"restricted": {class: {direction: value}}, "unrestricted": {direction: value}}.
        converged: every optimisation reached its tolerance.
    """

    divergence: str
    orders: Tensor | None
    restricted: dict[str, Tensor]
    unrestricted: Tensor
    by_direction: dict
    converged: bool


def _unrestricted(mechanism: Gaussian | Laplace | DPSGD, divergence: str, orders: Tensor | None) -> dict[str, Tensor]:
    pairs = mechanism_pairs(mechanism)
    if isinstance(mechanism, Gaussian):
        v = (rdp_gaussian(orders, torch.tensor(mechanism.sigma, dtype=_DTYPE)) if divergence == "renyi"
             else torch.tensor(0.5 / mechanism.sigma**2, dtype=_DTYPE))
        return {d: v for d in pairs}
    if isinstance(mechanism, Laplace):
        if divergence == "renyi":
            v = rdp_laplace(orders, torch.tensor(mechanism.b, dtype=_DTYPE))
        else:  # Thm 8: ε − 1 + e^{−ε}
            e = torch.tensor(1.0 / mechanism.b, dtype=_DTYPE)
            v = e - 1.0 + torch.exp(-e)
        return {d: v for d in pairs}
    out = {}
    for d, (p, q) in pairs.items():
        if divergence == "kl":
            out[d] = full_kl(p, q)
        elif d == WITH_WITHOUT:
            out[d] = rdp_poisson_gaussian(orders, mechanism.sampling.rate, mechanism.noise_multiplier)
        else:
            out[d] = _renyi_bounded_ratio(p, q, orders)
    return out


def capacity_divergences(mechanism: Gaussian | Laplace | DPSGD,
                         function_classes: str | Polynomial | Sequence[str | Polynomial] = ("linear",),
                         divergence: str = "renyi", orders: Tensor | float | None = None) -> CapacityResult:
    """Restricted next to unrestricted divergence for one mechanism at sensitivity 1.  Bound: exact (numerical).

    Chaudhuri et al. 2019 (arXiv:1907.02159v1) Def. 3 with Lemmas 1 and 3: the (H, Γ) capacity
    parameter of the mechanism for neighbouring pair(s) from :func:`mechanism_pairs`, maximised over
    both directions. Unrestricted values: Gaussian αΔ²/(2σ²), Laplace eq. (4)/Thm 8, subsampled Gaussian
    :func:`accountants.rdp.poisson.rdp_poisson_gaussian` (with ‖ without) and quadrature (without ‖ with).

    Args:
        mechanism: ``Gaussian``, ``Laplace`` or a one-step Poisson ``DPSGD`` (add/remove).
        function_classes: names or :class:`Polynomial` instances.
        divergence: "kl" or "renyi".
        orders: Rényi orders α > 1 (A,) for "renyi"; must be None for "kl".

    Returns:
        :class:`CapacityResult`. Never convert its numbers to (ε, δ) or trade-off curves.
    """
    if divergence not in ("kl", "renyi"):
        raise InputError(f"divergence must be 'kl' or 'renyi'; got {divergence!r}")
    if isinstance(function_classes, (str, Polynomial)):
        function_classes = (function_classes,)
    classes = [parse_class(c) for c in function_classes]
    if divergence == "renyi":
        if orders is None:
            raise InputError("orders are required for divergence='renyi' (alpha > 1)")
        orders_t = torch.as_tensor(orders, dtype=_DTYPE).reshape(-1)
        check.finite(orders=orders_t)
        check.in_range(1.0, None, closed="neither", orders=orders_t)
    else:
        if orders is not None:
            raise InputError("orders must be None for divergence='kl'")
        orders_t = None
    pairs = mechanism_pairs(mechanism)
    symmetric = not isinstance(mechanism, DPSGD)
    by_class: dict[str, dict[str, Tensor]] = {}
    conv = True
    for fc in classes:
        per: dict[str, Tensor] = {}
        for d, (p, q) in pairs.items():
            if symmetric and d == WITHOUT_WITH:
                per[d] = per[WITH_WITHOUT]
                continue
            rv = restricted_renyi(p, q, orders_t, fc) if divergence == "renyi" else restricted_kl(p, q, fc)
            conv = conv and bool(rv.converged.all())
            per[d] = rv.value
        by_class[fc.name] = per
    unres = _unrestricted(mechanism, divergence, orders_t)
    restricted = {c: torch.maximum(v[WITH_WITHOUT], v[WITHOUT_WITH]) for c, v in by_class.items()}
    return CapacityResult(divergence, orders_t, restricted,
                          torch.maximum(unres[WITH_WITHOUT], unres[WITHOUT_WITH]),
                          {"restricted": by_class, "unrestricted": unres}, conv)


# ---------------------------------------------------------------------------------------------
# Multi-dimensional outputs
# ---------------------------------------------------------------------------------------------


def _mahalanobis_shift(v: Tensor, sigma: Tensor | float | None, cov: Tensor | None) -> Tensor:
    v = _t(v)
    if v.ndim == 0:
        raise InputError("v must have a last (coordinate) dimension")
    check.finite(v=v)
    if (sigma is None) == (cov is None):
        raise InputError("give exactly one of sigma (isotropic noise std) or cov (noise covariance)")
    if sigma is not None:
        s = _t(sigma)
        check.positive(sigma=s)
        return torch.linalg.vector_norm(v, dim=-1) / s
    c = _t(cov)
    if c.ndim < 2 or c.shape[-1] != c.shape[-2] or c.shape[-1] != v.shape[-1]:
        raise InputError(f"cov must have shape (..., d, d) with d = {v.shape[-1]}; got {tuple(c.shape)}")
    chol, info = torch.linalg.cholesky_ex(c)
    if bool((info != 0).any()):
        raise InputError("cov must be symmetric positive definite")
    y = torch.linalg.solve_triangular(chol, v.unsqueeze(-1), upper=False).squeeze(-1)
    return torch.linalg.vector_norm(y, dim=-1)


def restricted_renyi_gaussian_nd(v: Tensor, alpha: Tensor | float, *, sigma: Tensor | float | None = None,
                                 cov: Tensor | None = None) -> RestrictedValue:
    """(lin, Rényi) of N(0, Σ) vs N(v, Σ) on ℝ^d (both directions equal).  Bound: exact (numerical).

    Reduction [D, digest §4.6]: an affine h sees only u·x, which is N(u·mean, u^TΣu) under both laws,
    and the 1-D value is non-decreasing in the standardised shift, so the supremum over directions is
    the 1-D value at μ = ‖Σ^{−1/2}v‖ (isotropic: ‖v‖₂/σ). Dimension-free: there is no 2^d factor
    (the paper's Cor. 2 / Table 1 row 6 bound is not valid). Polynomial classes in d > 1 variables
    are not implemented.

    Args:
        v: sensitivity vectors (..., d).
        alpha: orders α > 1 (A,).
        sigma: isotropic noise std (...), or
        cov: noise covariance (..., d, d).

    Returns:
        :class:`RestrictedValue`, value (..., A); witness is for the 1-D projection u·x standardised.
    """
    mu = _mahalanobis_shift(v, sigma, cov)
    return restricted_renyi(ScalarMixture.gaussian(0.0, 1.0), ScalarMixture.gaussian(mu, 1.0), alpha, LINEAR)


def restricted_kl_gaussian_nd(v: Tensor, *, sigma: Tensor | float | None = None,
                              cov: Tensor | None = None) -> RestrictedValue:
    """(lin, KL) of N(0, Σ) vs N(v, Σ) on ℝ^d via the same 1-D reduction.  Bound: exact (numerical).

    Equals the unrestricted KL ½ v^TΣ^{−1}v (Thm 10: the log-likelihood ratio is affine); kept as a
    computed value so that tests can compare it with that closed form.
    """
    mu = _mahalanobis_shift(v, sigma, cov)
    return restricted_kl(ScalarMixture.gaussian(0.0, 1.0), ScalarMixture.gaussian(mu, 1.0), LINEAR)


_GL_N_2D = 16  # per panel and dimension: agrees with 32 to ~1e-12 on the tests' cases at 1/16 of the cost


def _laplace2_nodes(theta: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """2-D rule for the standard Laplace product law, split at the kinks of |θ0 + θ1 u1 + θ2 u2|^A.

    Outer panels in u2 break at the Laplace kink and where the inner mean t = θ0 + θ2 u2 vanishes
    (the only non-smooth point of t ↦ E|t + θ1 U1|^A); inner panels in u1 break at the kink and at
    the root u1 = −t/θ1. Returns u1, u2 (M, N) and weights including both densities (M, N).
    """
    base = torch.tensor(_BREAKS[Family.LAPLACE], dtype=theta.dtype, device=theta.device)
    lo, hi = base[0], base[-1]
    m = theta.shape[0]

    def split(extra: Tensor) -> tuple[Tensor, Tensor]:
        e = torch.where(torch.isfinite(extra), extra, lo).clamp(lo, hi)
        bb, _ = torch.sort(torch.cat([base.expand(*e.shape[:-1], len(base)), e], -1), -1)
        return _panel_rule(bb, _GL_N_2D)

    u2, w2 = split((-theta[:, 0] / theta[:, 2])[:, None])  # (M, N2)
    t = theta[:, 0:1] + theta[:, 2:3] * u2  # (M, N2)
    u1, w1 = split((-t / theta[:, 1:2])[..., None])  # (M, N2, N1)
    dens = 0.25 * torch.exp(-u1.abs() - u2.abs()[..., None])
    w = w2[..., None] * w1 * dens
    return u1.reshape(m, -1), u2[..., None].expand_as(u1).reshape(m, -1), w.reshape(m, -1)


def _alpha_terms_2d(theta: Tensor, alpha: Tensor, m_p: Tensor, derivs: bool):
    """:func:`_alpha_terms` for the affine class on ℝ² with Q the standard Laplace product."""
    u1, u2, w = _laplace2_nodes(theta)
    psi = torch.stack([torch.ones_like(u1), u1, u2], -1)
    big_a = (alpha / (alpha - 1.0))[:, None]
    hz = (psi * theta[:, None, :]).sum(-1)
    ab = hz.abs()
    val = alpha * (theta * m_p).sum(-1) - (alpha - 1.0) * (w * ab**big_a).sum(-1)
    if not derivs:
        return val
    grad = alpha[:, None] * (m_p - torch.einsum("mn,mnp->mp", w * ab ** (big_a - 1.0) * torch.sign(hz), psi))
    rms = (w * hz * hz).sum(-1, keepdim=True).sqrt()
    h2 = torch.maximum(ab, 1e-4 * rms).clamp_min(1e-300) ** (big_a - 2.0)
    hess = -(alpha * (big_a[:, 0] - 1.0))[:, None, None] * torch.einsum("mn,mnp,mnq->mpq", w * h2, psi, psi)
    return val, grad, hess


def restricted_renyi_laplace_product(v: Tensor, b: Tensor | float, alpha: Tensor | float) -> RestrictedValue:
    """(lin, Rényi) of Lap_d(0, b) vs Lap_d(v, b), i.i.d. coordinates, d ≤ 2.  Bound: exact (numerical).

    Chaudhuri et al. 2019 (arXiv:1907.02159v1) Lemma 3 with h(x) = c + a·x on ℝ^d. The projection a·x
    is a sum of Laplaces with no convenient closed form, so for d = 2 the expectation under Q is a
    nested (tensor-product) Gauss–Legendre rule split at the kinks of |h| (see :func:`_laplace2_nodes`);
    the concave problem in (c, a1, a2) is solved by the same Newton method. Both directions are equal
    (coordinate-wise reflection). Test closed form at α = 2: log(1 + ‖v‖²/(2b²)) (digest §7.4). The
    paper's Table 1 row 5 "bound" log(1 + 2^{d(α−1)}(‖v‖_α/b)^α)/(α−1) is not valid.

    Args:
        v: sensitivity vectors (..., d) with d ∈ {1, 2}; b: Laplace scale (...) ; alpha: orders (A,).

    Returns:
        :class:`RestrictedValue` with value (..., A); witness (..., A, d+1) = (c, a_1, ..., a_d) in x units.

    Raises:
        UnsupportedError: d > 2 (the nested rule costs N^{d−1}; no exact method is implemented).
    """
    v = _t(v)
    if v.ndim == 0:
        raise InputError("v must have a last (coordinate) dimension")
    check.finite(v=v)
    d = v.shape[-1]
    if d > 2:
        raise UnsupportedError("(lin, Rényi) for product Laplace noise is implemented for d ≤ 2 outputs only")
    b_t = _t(b).to(v.device)
    check.positive(b=b_t)
    a = _t(alpha).to(v.device)
    check.finite(alpha=a)
    check.in_range(1.0, None, closed="neither", alpha=a)
    if d == 1:
        return restricted_renyi(ScalarMixture.laplace(v[..., 0], b_t), ScalarMixture.laplace(0.0, b_t), a, LINEAR)
    scalar_alpha = a.ndim == 0
    a = a.reshape(-1)
    shape = torch.broadcast_shapes(v.shape[:-1], b_t.shape)
    full = (*shape, a.shape[0])
    mu = (v.expand(*shape, 2) / b_t.expand(shape)[..., None]).abs()  # P's mean in Q's standard units
    m_p = torch.cat([torch.ones_like(mu[..., :1]), mu], -1)[..., None, :].expand(*full, 3).reshape(-1, 3)
    aa = a.expand(full).reshape(-1)
    theta0 = torch.zeros(aa.shape[0], 3, dtype=v.dtype, device=v.device)
    theta0[:, 0] = 1.0
    theta, g_star, conv = _newton(lambda t, r: _alpha_terms_2d(t, aa[r], m_p[r], False),
                                  lambda t, r: _alpha_terms_2d(t, aa[r], m_p[r], True), theta0)
    value = alpha_divergence_to_renyi((g_star - 1.0) / (aa * (aa - 1.0)), aa).reshape(full)
    sign = torch.sign(v.expand(*shape, 2)).clamp_min(0.0) * 2.0 - 1.0  # undo |v| (reflection per coordinate)
    wit = theta / (aa - 1.0)[:, None]
    wit = wit.reshape(*full, 3)
    wit = torch.cat([wit[..., :1], wit[..., 1:] * sign[..., None, :] / b_t.expand(shape)[..., None, None]], -1)
    conv = conv.reshape(full)
    if scalar_alpha:
        value, wit, conv = value[..., 0], wit[..., 0, :], conv[..., 0]
    return RestrictedValue(value, wit, conv)


def restricted_kl_laplace_product(v: Tensor, b: Tensor | float) -> Tensor:
    """(lin, KL) of Lap_d(0, b) vs Lap_d(v, b) (i.i.d. coordinates).  Bound: exact (numerical).

    [D, digest §4.3]: only P's mean enters and log E_Q e^{a·x} splits over independent coordinates, so
    the d-dimensional supremum is the sum of d scalar suprema, each computed by :func:`restricted_kl`.
    Test closed form: Σ_i k(|v_i|/b), k(t) = √(1+t²) − 1 − log((1+√(1+t²))/2).

    Args:
        v: sensitivity vectors (..., d); b: Laplace scale (...).

    Returns:
        values (...).
    """
    v = _t(v)
    if v.ndim == 0:
        raise InputError("v must have a last (coordinate) dimension")
    check.finite(v=v)
    b_t = _t(b)
    check.positive(b=b_t)
    b_t = b_t[..., None].expand_as(v) if b_t.ndim else b_t.expand_as(v)
    rv = restricted_kl(ScalarMixture.laplace(torch.zeros_like(v), b_t), ScalarMixture.laplace(v.abs(), b_t), LINEAR)
    return rv.value.sum(-1)


# ---------------------------------------------------------------------------------------------
# Properties that hold (Thms 1, 3, 4), with their conditions
# ---------------------------------------------------------------------------------------------


def post_process_polynomial(value: Tensor, function_class: Polynomial | str,
                            map_degree: int) -> tuple[Tensor, Polynomial]:
    """Post-processing (Chaudhuri et al. 2019 Thm 1): the parameter carries over to a smaller class.

    If a release A is (poly_k, Γ)-bounded with parameter ``value`` and g is a polynomial map of degree
    m of the (scalar) output, then g∘A is (poly_{⌊k/m⌋}, Γ)-bounded with the same parameter, because
    i∘g ∈ poly_k for every i ∈ poly_{⌊k/m⌋} (hypothesis of Thm 1). m = 1 (affine maps, including
    linear maps between output spaces for the lin class) keeps the class.

    NOT covered: thresholding, clipping, training a model on the release, or any map that is not a
    polynomial (Thm 1 needs i∘g ∈ H); this function raises for them by construction (map_degree
    must be a positive integer) and for m > k.

    Args:
        value: restricted KL or Rényi value(s) of A for ``function_class``.
        function_class: the class the value was computed for.
        map_degree: degree m ≥ 1 of the polynomial post-processing map.

    Returns:
        (value, class for which it holds after post-processing).
    """
    fc = parse_class(function_class)
    check.integer(1, None, map_degree=map_degree)
    if map_degree > fc.degree:
        raise UnsupportedError(f"a degree-{map_degree} map of a {fc.name} release leaves no polynomial class "
                               "covered by Thm 1 (need map degree ≤ class degree)")
    return _t(value), Polynomial(fc.degree // int(map_degree))


def compose_parallel(values: Tensor, dim: int = -1) -> Tensor:
    """Parallel composition (Chaudhuri et al. 2019 Thm 3): max of the parameters.  Bound: upper.

    Conditions: the releases use DISJOINT parts of the data; each class is convex and translation
    invariant (every Polynomial class is); the joint class is the separable sum H1 ⊕ H2
    ({h1(o1) + h2(o2)}; for lin classes this is lin on the concatenated output); Γ is KL, or Rényi
    with all values at the SAME order α > 1.
    """
    v = _t(values)
    check.in_range(0.0, None, values=v)
    return v.amax(dim)


def compose_nonadaptive(values: Tensor, dim: int = -1) -> Tensor:
    """Non-adaptive sequential composition (Chaudhuri et al. 2019 Thm 4): sum.  Bound: upper.

    Conditions: the releases are NON-ADAPTIVE (no release may depend on another's output; DP-SGD steps
    are adaptive and are NOT covered, nor is any amplification by subsampling); each class is convex,
    translation invariant and contains the constants (every Polynomial class does); the joint class is
    H1 ⊕ H2 (separable sums; for lin: lin on the concatenated output); Γ is KL, or Rényi with all
    values at the SAME order α > 1.
    """
    v = _t(values)
    check.in_range(0.0, None, values=v)
    return v.sum(dim)


def paper_claimed_lin_renyi_bound(mechanism: Gaussian | Laplace, alpha: Tensor | float,
                                  v: Tensor | None = None) -> Tensor:
    """The (lin, Rényi) "upper bound" PRINTED in Table 1 / Thm 13 / Cor. 2. NOT A VALID BOUND.

    Chaudhuri et al. 2019 Table 1 rows 3-6 (d-dim rows; d = 1 when ``v`` is None):
    Laplace: log(1 + 2^{d(α−1)}·(ε‖v‖_α)^α)/(α−1) with ε = 1/b;
    Gaussian: log(1 + 2^{d(α−1)}·√(π/2)^{α−1}·‖v‖_α^α/σ^α)/(α−1).
    The proof of Thm 13 drops a factor 2^{−d} on b^A, and the exact values exceed these numbers at
    small ε / large σ with α ≳ 4 (e.g. Gaussian σ = 4, α = 10: exact 0.109697 > 0.000413). Returned
    only so that tests and docs can show the failure; dpaudit never uses it as a bound.
    """
    a = _t(alpha)
    if v is None:
        v = torch.ones(1, dtype=a.dtype)
    v = _t(v)
    d = v.shape[-1]
    norm_aa = (v.abs() ** a[..., None]).sum(-1)  # ‖v‖_α^α
    if isinstance(mechanism, Laplace):
        term = 2.0 ** (d * (a - 1.0)) * norm_aa / mechanism.b**a
    elif isinstance(mechanism, Gaussian):
        term = 2.0 ** (d * (a - 1.0)) * math.sqrt(math.pi / 2.0) ** (a - 1.0) * norm_aa / mechanism.sigma**a
    else:
        raise InputTypeError(f"mechanism must be Gaussian or Laplace; got {type(mechanism).__name__}")
    return torch.log1p(term) / (a - 1.0)


# ---------------------------------------------------------------------------------------------
# Estimation from samples: fit the adversary on one split, lower-bound on the other
# ---------------------------------------------------------------------------------------------


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
    e = torch.exp(_polyval(theta, z) - 1.0)
    val = (theta * m_p).sum(-1) - (w * e).sum(-1)
    if not derivs:
        return val
    psi = _powers(z, theta.shape[-1] - 1)
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
    xp, xq = _t(samples_p), _t(samples_q)
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

    m_fit = _powers(z(fp), k).mean(-2)
    zq = z(fq)
    wq = torch.full_like(zq, 1.0 / zq.shape[-1])
    n = mu.shape[0]
    a = torch.full((n,), float(alpha) if alpha is not None else 2.0, dtype=mu.dtype, device=mu.device)
    pen = torch.full((k + 1,), ridge, dtype=mu.dtype, device=mu.device)
    pen[0] = 0.0

    def terms(theta: Tensor, rows: Tensor, derivs: bool):
        if divergence == "renyi":
            out = _alpha_terms(theta, a[rows], m_fit[rows], zq[rows], wq[rows], derivs)
        else:
            out = _kl_fform_terms(theta, m_fit[rows], zq[rows], wq[rows], derivs)
        if not derivs:
            return out - (pen * theta * theta).sum(-1)
        v, g, h = out
        return v - (pen * theta * theta).sum(-1), g - 2.0 * pen * theta, h - torch.diag_embed(2.0 * pen).expand_as(h)

    theta0 = torch.zeros(n, k + 1, dtype=mu.dtype, device=mu.device)
    theta0[:, 0] = 1.0
    theta, _, _ = _newton(lambda t, r: terms(t, r, False), lambda t, r: terms(t, r, True), theta0)
    hp, hq = _polyval(theta, z(ep)), _polyval(theta, z(eq))
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
    if divergence == "renyi":  # est estimates G(ĥ) = α(α−1)·J(ĥ) + 1 (see _alpha_terms); D_R = log(G)/(α−1)
        lower = torch.log(lo.clamp_min(1.0)) / (a - 1.0)
        held = torch.log(est.clamp_min(1e-300)) / (a - 1.0)
        wit = _z_to_x(theta, mu, sd) / (a - 1.0)[:, None]
    else:
        lower, held, wit = lo.clamp_min(0.0), est, _z_to_x(theta, mu, sd)
    return RestrictedLowerBound(lower.reshape(shape), float(confidence), held.reshape(shape),
                                wit.reshape(*shape, k + 1), (nfp, nfq), (ep.shape[-1], eq.shape[-1]))
