"""Trade-off curves f(α) and the conversions between f(α), δ(ε) and R_min(π).

Conventions (one meaning each, everywhere): α = FPR (type I error, the test says "member" when
the record was out), β = FNR; a trade-off function f is convex, continuous, non-increasing, with
f(α) ≤ 1 − α and f(1) = 0 (Dong, Roth, Su, arXiv:1905.02383v3, Def. 2.1 / Prop. 2.2).

The direction of every curve is part of the object: ``TradeOff.bound`` is

* ``"exact"``: the trade-off function of a tightly dominating pair (closed forms: μ-GDP, Laplace,
  randomized response, the extremal mechanisms);
* ``"lower"``: a pointwise LOWER bound on the true trade-off function, i.e. a sound privacy
  guarantee. Everything built from an accountant (a privacy profile, (ε, δ) pairs, an RDP curve,
  ``from_spec``) is of this kind, and its derived quantities point the safe way: ``delta`` and
  ``epsilon`` are upper bounds, ``bayes_risk`` is a lower bound on the adversary's Bayes error;
* ``"estimate"``: anything else (e.g. the convex hull of empirical attack points); never used to
  pass or fail.

The bridges (Kaissis, Kolek, Balle, Hayes, Rueckert, ICML 2024, arXiv:2406.08918v1, Eqs. 2, 4,
25 and App. A; Dong et al. 2022 Prop. 2.12):

    R_min(π) = min_{α∈[0,1]} [π α + (1 − π) f(α)]                     (Eq. 2; π weights α)
    δ(ε)     = max_{α∈[0,1]} [1 − f(α) − e^ε α]   = H_{e^ε}(Q‖P)         (Eq. 25, conjugate on [0,1])
    f(α)     = max{0, sup_ε [1 − δ(ε) − e^ε α]}                         (Dong et al. Prop. 2.12)
    R_min(π) = (1 − π) (1 − δ(logit π))

IMPORTANT: ``bayes_risk(pi)`` follows the paper's Eq. (1): π multiplies α, the error made when
the record is OUT. For symmetric curves (every curve an accountant returns) R_min(π) = R_min(1 − π)
and the distinction disappears.

Representations: closed forms (:class:`GaussianTradeOff`, :class:`LaplaceTradeOff`) evaluate
everything exactly; every other curve is an exact convex piecewise-linear function stored by its
vertices (:class:`PiecewiseLinearTradeOff`), on which f, δ, ε and R_min are exact and evaluated
by binary search over the edge slopes (O(log K) per point for K vertices).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from . import validate as check
from ._numerics import as_float, log1mexp
from .errors import InputError, InputTypeError, UnsupportedError
from .mechanisms import Gaussian, Laplace, RandomizedResponse

if TYPE_CHECKING:  # pragma: no cover
    from .events import DPSGD, Composed

__all__ = [
    "BOUNDS",
    "GaussianTradeOff",
    "LaplaceTradeOff",
    "PiecewiseLinearTradeOff",
    "TradeOff",
    "default_profile_grid",
    "lower_convex_hull",
    "rdp_tradeoff_lines",
    "tradeoff_curve",
]

BOUNDS = ("exact", "lower", "estimate")
_SQRT2 = math.sqrt(2.0)
_ULP = torch.finfo(torch.float64).eps  # absolute resolution of a vertex near β = 1
_MAX_EXP = 700.0  # e^700 ≈ 1e304: finite, so e^ε·0 never becomes inf·0 = NaN


def _ndtr(x: Tensor) -> Tensor:
    # Φ(x) through log Φ: torch.special.ndtr loses all accuracy below x ≈ −5 (it returns 0 at −10,
    # and is off by 7e-6 relative at −7.3), while exp(log_ndtr) keeps ~1e-14 relative to −37.
    return torch.exp(torch.special.log_ndtr(x))


def _as_input(name: str, value: Tensor | float, like: Tensor | None = None) -> Tensor:
    if isinstance(value, bool):
        raise InputTypeError(f"{name} must be a number or a tensor of numbers; got bool")
    if isinstance(value, Tensor):
        if value.dtype == torch.bool or value.is_complex():
            raise InputTypeError(f"{name} must be a real tensor; got dtype {value.dtype}")
        return as_float(value)
    try:
        return as_float(torch.as_tensor(value, dtype=torch.float64), like=like)
    except (TypeError, ValueError, RuntimeError):
        raise InputTypeError(
            f"{name} must be a number, a sequence of numbers or a tensor; got {type(value).__name__}"
        ) from None


# ------------------------------------------------------------------------------------------------
# Convex-geometry kernels
# ------------------------------------------------------------------------------------------------


def lower_convex_hull(x: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    """Vertices of the lower convex hull of the points (x_i, y_i), sorted by x.

    Points sharing an x keep only the lowest. Each pass removes, all at once, every interior
    point lying on or above the chord of its two current neighbours; such a point is never a
    hull vertex (for a run of adjacent removed points the chord inequalities form an M-matrix
    system whose solution keeps every removed point above the chord of the surviving ends), so
    the hull is unchanged. The loop stops when the chain is locally, hence globally, convex.
    Each pass is one vectorised O(n) step; near-convex inputs (privacy profiles, tangent lines)
    need a handful of passes.

    Args:
        x, y: 1-D tensors of the same length n ≥ 1, finite.

    Returns:
        (x_hull, y_hull): 1-D tensors, x strictly increasing, slopes non-decreasing.
    """
    if x.ndim != 1 or y.shape != x.shape or x.numel() == 0:
        raise InputError(f"x and y must be non-empty 1-D tensors of one length; got {tuple(x.shape)}, {tuple(y.shape)}")
    check.finite(x=x, y=y)
    order = torch.argsort(y, stable=True)
    x, y = x[order], y[order]
    order = torch.argsort(x, stable=True)
    x, y = x[order], y[order]
    first = torch.ones_like(x, dtype=torch.bool)
    first[1:] = x[1:] != x[:-1]
    x, y = x[first], y[first]
    for _ in range(x.numel()):
        if x.numel() <= 2:
            break
        t = (x[1:-1] - x[:-2]) / (x[2:] - x[:-2])  # in (0, 1): relative position, no overflow
        chord = y[:-2] + t * (y[2:] - y[:-2])
        drop = y[1:-1] >= chord
        if not bool(drop.any()):
            break
        keep = torch.ones_like(x, dtype=torch.bool)
        keep[1:-1] = ~drop
        x, y = x[keep], y[keep]
    return x, y


def _envelope_of_lines(intercept: Tensor, slope: Tensor) -> tuple[Tensor, Tensor]:
    """Vertices on [0, 1] of f(α) = max(0, max_j intercept_j + slope_j α).

    The upper envelope of lines is the convex conjugate of the lower hull of the dual points
    (slope_j, −intercept_j): consecutive hull points k, k+1 meet at α = (d_{k+1} − d_k)/(s_{k+1} − s_k).
    """
    s = torch.cat([slope.reshape(-1), slope.new_zeros(1)])
    d = torch.cat([-intercept.reshape(-1), intercept.new_zeros(1)])  # the line 0 (f ≥ 0)
    hs, hd = lower_convex_hull(s, d)
    f0 = -hd.min()
    f1 = torch.clamp((hs - hd).max(), min=0.0)
    if hs.numel() < 2:
        xs = torch.stack([hs.new_zeros(()), hs.new_ones(())])
        return xs, torch.stack([f0, f1])
    xb = (hd[1:] - hd[:-1]) / (hs[1:] - hs[:-1])  # non-decreasing breakpoints
    vb = hs[:-1] * xb - hd[:-1]
    inside = (xb > 0.0) & (xb < 1.0)
    xs = torch.cat([hs.new_zeros(1), xb[inside], hs.new_ones(1)])
    ys = torch.cat([f0.reshape(1), vb[inside], f1.reshape(1)])
    return xs, ys


# ------------------------------------------------------------------------------------------------
# The TradeOff interface
# ------------------------------------------------------------------------------------------------


class TradeOff:
    """A trade-off curve β = f(α) with its privacy profile δ(ε) and Bayes-error function R_min(π).

    Build one with the constructors below; every method broadcasts over tensors and follows their
    device and dtype (float64 by default).

    Attributes:
        bound: "exact", "lower" (a sound privacy guarantee: f ≤ the true trade-off) or "estimate".
        description: what the curve is, e.g. ``"GDP mu=1"``.

    >>> import accountants as acc
    >>> f = acc.TradeOff.from_gdp(1.0)
    >>> round(float(f(0.1)), 6), round(float(f.delta(1.0)), 6), round(float(f.bayes_risk(0.5)), 6)
    (0.610856, 0.126937, 0.308538)
    """

    bound: str = "estimate"
    description: str = ""

    # -- interface ------------------------------------------------------------------------------
    def __call__(self, alpha: Tensor | float) -> Tensor:
        """β = f(α) for α in [0, 1]."""
        alpha = _as_input("alpha", alpha)
        check.in_range(0.0, 1.0, alpha=alpha)
        return self._f(alpha)

    def delta(self, eps: Tensor | float) -> Tensor:
        """The privacy profile δ(ε) = max_α [1 − f(α) − e^ε α], for real ε.

        Bound: upper when ``self.bound == "lower"`` (a lower f gives a larger δ).
        """
        eps = _as_input("eps", eps)
        check.in_range(None, None, eps=eps)  # rejects NaN
        return self._delta(eps)

    def epsilon(self, delta: Tensor | float) -> Tensor:
        """The smallest ε ≥ 0 with δ(ε) ≤ ``delta``; +inf when no finite ε reaches it.

        Bound: upper when ``self.bound == "lower"``.
        """
        delta = _as_input("delta", delta)
        check.in_range(0.0, 1.0, delta=delta)
        return self._epsilon(delta)

    def bayes_risk(self, pi: Tensor | float) -> Tensor:
        """R_min(π) = min_α [π α + (1 − π) f(α)], the minimum Bayes error at prior π.

        Kaissis et al. 2024 (arXiv:2406.08918v1) Eq. (2). Concave, in [0, ½], zero at π ∈ {0, 1}.
        Bound: lower on the adversary's error when ``self.bound == "lower"``.
        """
        pi = _as_input("pi", pi)
        check.in_range(0.0, 1.0, pi=pi)
        return self._bayes_risk(pi)

    def inverse(self) -> TradeOff:
        """f⁻¹ = T(Q, P): the curve of the swapped pair (Dong et al. 2022 Lemma A.2)."""
        raise NotImplementedError

    def symmetrised(self) -> TradeOff:
        """conv(min(f, f⁻¹)): the curve that bounds both orderings of the pair (Dong et al. Prop. F.2).

        A lower bound stays a lower bound for both orderings.
        """
        raise NotImplementedError

    @property
    def is_symmetric(self) -> bool:
        """True when f = f⁻¹ by construction."""
        return False

    def total_variation(self) -> Tensor:
        """TV(P, Q) = δ(0) = max_α (1 − α − f(α)), the membership advantage (Kaissis et al. Eq. 29)."""
        return self.delta(0.0)

    # -- implementation hooks -------------------------------------------------------------------
    def _f(self, alpha: Tensor) -> Tensor:
        raise NotImplementedError

    def _delta(self, eps: Tensor) -> Tensor:
        raise NotImplementedError

    def _epsilon(self, delta: Tensor) -> Tensor:
        raise NotImplementedError

    def _bayes_risk(self, pi: Tensor) -> Tensor:
        raise NotImplementedError

    def _f_extended(self, alpha: Tensor) -> Tensor:
        """f extended to ℝ by 1 left of 0 and 0 right of 1 (Kaissis et al. §2, for κ-shifts)."""
        inside = self._f(torch.clamp(alpha, 0.0, 1.0))
        return torch.where(
            alpha < 0.0, torch.ones_like(inside), torch.where(alpha > 1.0, torch.zeros_like(inside), inside)
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.description!r}, bound={self.bound!r})"

    # -- constructors ---------------------------------------------------------------------------
    @staticmethod
    def from_gdp(mu: float | Tensor) -> GaussianTradeOff:
        """μ-GDP: f = G_μ(α) = Φ(Φ⁻¹(1 − α) − μ) exactly (Dong et al. 2022 Def. 2.7)."""
        return GaussianTradeOff(mu)

    @staticmethod
    def from_mechanism(mechanism: Gaussian | Laplace | RandomizedResponse, sensitivity: float = 1.0) -> TradeOff:
        """The exact trade-off of a base mechanism on a query of the given sensitivity.

        Gaussian(sigma): μ = sensitivity/σ. Laplace(b): η = sensitivity/b. Randomized response(p):
        f_{ε,0} with ε = log(p/(1−p)) (Kairouz, Oh, Viswanath 2015; Dong et al. Prop. 2.5).
        """
        check.positive(sensitivity=sensitivity)
        match mechanism:
            case Gaussian(sigma=s):
                return GaussianTradeOff(sensitivity / s, description=f"Gaussian sigma={s:g} (mu={sensitivity / s:g})")
            case Laplace(b=b):
                return LaplaceTradeOff(sensitivity / b, description=f"Laplace b={b:g} (eta={sensitivity / b:g})")
            case RandomizedResponse(p=p):
                if sensitivity != 1.0:
                    raise InputError(
                        f"randomized response has no sensitivity parameter; got sensitivity={sensitivity:g}"
                    )
                eps = math.log(p / (1.0 - p))
                f64 = torch.float64
                out = PiecewiseLinearTradeOff.from_dp_pairs(torch.tensor([eps], dtype=f64), torch.zeros(1, dtype=f64))
                return PiecewiseLinearTradeOff(
                    out.alpha, out.beta, bound="exact", description=f"randomized response p={p:g}", symmetric=True
                )
        raise InputTypeError(
            f"mechanism must be accountants.Gaussian, Laplace or RandomizedResponse; got {type(mechanism).__name__}"
        )

    @staticmethod
    def from_points(
        alpha: Tensor, beta: Tensor, *, bound: str = "estimate", description: str = ""
    ) -> PiecewiseLinearTradeOff:
        """The convex hull of achievable (α, β) points: the tightest curve they imply.

        Randomised tests achieve convex combinations, the trivial tests give (0, 1) and (1, 0),
        and the complement of a test achieving (α, β) achieves (1 − α, 1 − β); the curve is the
        lower convex hull of all of these.
        """
        return PiecewiseLinearTradeOff.from_points(alpha, beta, bound=bound, description=description)

    @staticmethod
    def from_privacy_profile(
        eps: Tensor, delta: Tensor, *, symmetric: bool = True, description: str = "privacy profile"
    ) -> PiecewiseLinearTradeOff:
        """Lower trade-off bound from an upper privacy profile δ(ε_j) on any finite ε grid.

        See :meth:`PiecewiseLinearTradeOff.from_privacy_profile`. Bound: lower.
        """
        return PiecewiseLinearTradeOff.from_privacy_profile(eps, delta, symmetric=symmetric, description=description)

    @staticmethod
    def from_dp_pairs(eps: Tensor, delta: Tensor) -> PiecewiseLinearTradeOff:
        """The weakest curve consistent with (ε_i, δ_i)-DP for every i: max_i f_{ε_i, δ_i}.  Bound: lower."""
        return PiecewiseLinearTradeOff.from_dp_pairs(eps, delta)

    @staticmethod
    def from_rdp(orders: Tensor, rdp: Tensor, *, n_alpha: int = 600, margin: float = 1e-12) -> PiecewiseLinearTradeOff:
        """Lower trade-off bound from an RDP curve, over all orders at once.  Bound: lower.

        See :func:`rdp_tradeoff_lines` for the formula and its proof.
        """
        return PiecewiseLinearTradeOff.from_rdp(orders, rdp, n_alpha=n_alpha, margin=margin)

    @staticmethod
    def from_spec(
        spec: DPSGD | Composed,
        method: str = "pld",
        *,
        eps_grid: Tensor | None = None,
        pld_options: dict[str, float] | None = None,
    ) -> PiecewiseLinearTradeOff:
        """Lower trade-off bound for a DP-SGD description, from a registered accounting method.  Bound: lower.

        The accounting-method registry (:func:`accountants.register_method`) supplies the curve:
        a method with a ``tradeoff(spec, *, eps_grid, options)`` method builds its own ("pld": the
        tight privacy profile of ``accountants.pld`` turned into a curve by
        :meth:`from_privacy_profile`, symmetric since the profile bounds every ordered neighbouring
        pair); a method with an RDP curve ``curve(spec, orders)`` gets :meth:`from_rdp` on it over
        the default order grid ("rdp"). Any other method's δ(ε) upper bounds on ``eps_grid`` (default: 0 to 80 in 59
        points) give a sound, coarser curve the same way. So a newly registered method has a curve,
        and shows up in ``dpaudit compare`` and the audit's curves, with no edit here.

        Args:
            spec: :class:`accountants.DPSGD` or :class:`accountants.Composed`.
            method: a registered accounting method (:func:`accountants.methods`).
            eps_grid: ε grid for a privacy profile (PLD default :func:`default_profile_grid`).
            pld_options: keyword arguments for the method's curve (for "pld":
                ``accountants.pld.pld_privacy_profile``, e.g. ``{"eps_error": 1e-3}``).

        Raises:
            InputError: an unknown method.
            UnsupportedError: when the method does not cover ``spec`` or is not available.
        """
        from .api import get_method, methods
        from .describe import describe
        from .shuffle import has_shuffle, reduce_shuffle

        if method not in methods():
            raise InputError(f"method must be one of {methods()}; got {method!r}")
        m = get_method(method)
        shown = spec
        if has_shuffle(spec):  # shuffled phases: the full-batch Gaussian epochs that dominate them (docs/shuffle.md)
            spec = reduce_shuffle(spec)
        reason = m.unsupported(spec)
        if reason is not None:
            raise UnsupportedError(f"method {method!r} does not cover this spec: {reason}")
        build = getattr(m, "tradeoff", None)
        rdp = getattr(m, "curve", None)
        if build is not None:
            out = build(spec, eps_grid=eps_grid, options=pld_options)
        elif rdp is not None:
            out = TradeOff._from_rdp_curve(spec, rdp)
        else:
            grid = (torch.cat([torch.linspace(0.0, 10.0, 41, dtype=torch.float64),
                               torch.arange(12.0, 81.0, 4.0, dtype=torch.float64)])
                    if eps_grid is None else _as_input("eps_grid", eps_grid))
            delta = torch.tensor([float(m.delta(spec, float(e)).value) for e in grid.reshape(-1)], dtype=torch.float64)
            out = PiecewiseLinearTradeOff.from_privacy_profile(grid.reshape(-1), torch.clamp(delta, 0.0, 1.0),
                                                               symmetric=True)
        out.description = f"{method} lower bound for {describe(shown)}" + (
            " (shuffled phases as full-batch Gaussian epochs, no amplification)" if shown is not spec else "")
        return out

    @staticmethod
    def _from_rdp_curve(
        spec: DPSGD | Composed, rdp: Callable[..., tuple[Tensor, str | None]]
    ) -> PiecewiseLinearTradeOff:
        """:meth:`from_rdp` on a method's composed RDP curve ``rdp(spec, orders)`` over the default orders."""
        from .orders import default_orders

        orders = default_orders()
        return PiecewiseLinearTradeOff.from_rdp(orders, rdp(spec, orders)[0])


def default_profile_grid(dtype: torch.dtype = torch.float64) -> Tensor:
    """ε grid for turning a privacy profile into a curve: step 2e-3 on [0, 10), 0.05 on [10, 80]."""
    return torch.cat([torch.arange(0, 5000, dtype=dtype) * 2e-3, 10.0 + torch.arange(0, 1401, dtype=dtype) * 0.05])


def tradeoff_curve(
    spec: DPSGD | Composed,
    method: str = "pld",
    *,
    eps_grid: Tensor | None = None,
    pld_options: dict[str, float] | None = None,
) -> PiecewiseLinearTradeOff:
    """A sound lower bound on the trade-off curve of ``spec`` (see :meth:`TradeOff.from_spec`).  Bound: lower."""
    return TradeOff.from_spec(spec, method, eps_grid=eps_grid, pld_options=pld_options)


# ------------------------------------------------------------------------------------------------
# Closed forms
# ------------------------------------------------------------------------------------------------


class GaussianTradeOff(TradeOff):
    """μ-GDP: the exact trade-off of N(0, 1) vs N(μ, 1).  Bound: exact.

    Dong, Roth, Su (arXiv:1905.02383v3) Def. 2.7; profile: Balle & Wang 2018 (arXiv:1805.06530v2)
    Thm 8 / Dong et al. Cor. 2.13: δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ).
    ``mu`` may be a tensor; it broadcasts against the arguments.
    """

    bound = "exact"

    def __init__(self, mu: float | Tensor, *, description: str | None = None) -> None:
        mu_t = _as_input("mu", mu)
        check.positive(mu=mu_t)
        self.mu = mu_t
        self.description = (
            description
            if description is not None
            else (f"GDP mu={float(mu_t):g}" if mu_t.numel() == 1 else f"GDP mu (shape {tuple(mu_t.shape)})")
        )

    @property
    def is_symmetric(self) -> bool:
        return True

    def inverse(self) -> GaussianTradeOff:
        return self

    def symmetrised(self) -> GaussianTradeOff:
        return self

    def _mu(self, like: Tensor) -> Tensor:
        return self.mu.to(dtype=like.dtype, device=like.device)

    def _f(self, alpha: Tensor) -> Tensor:
        # Φ⁻¹(1 − α) = −Φ⁻¹(α): exact for tiny α, where 1 − α would round.
        return _ndtr(-torch.special.ndtri(alpha) - self._mu(alpha))

    def _delta(self, eps: Tensor) -> Tensor:
        mu = self._mu(eps)
        a = mu / 2.0 - eps / mu
        b = -mu / 2.0 - eps / mu
        # a < 0: both terms are deep in the lower tail. With Φ(x) = ½ erfcx(−x/√2) e^{−x²/2} and
        # b² = a² + 2ε, δ = ½ e^{−a²/2} [erfcx(−a/√2) − erfcx(−b/√2)] (no overflow, no underflow
        # before the result itself underflows).
        neg = a < 0.0
        a_n = torch.where(neg, a, -torch.ones_like(a))
        b_n = torch.where(neg, b, -torch.ones_like(b))
        tail = (
            0.5 * torch.exp(-0.5 * a_n**2) * (torch.special.erfcx(-a_n / _SQRT2) - torch.special.erfcx(-b_n / _SQRT2))
        )
        # a ≥ 0 (ε ≤ μ²/2): Φ(a) ≥ ½ and δ is not in a far tail; the direct difference loses at most
        # ~log10(1/μ) digits (2e-14 relative against the mpmath values of the tradeoff_gaussian family).
        eps_p = torch.where(neg, torch.zeros_like(eps), eps)
        head = _ndtr(torch.where(neg, torch.zeros_like(a), a)) - torch.exp(eps_p) * _ndtr(torch.where(neg, -mu, b))
        return torch.clamp(torch.where(neg, tail, head), 0.0, 1.0)

    def _epsilon(self, delta: Tensor) -> Tensor:
        mu = self._mu(delta)
        delta, mu = torch.broadcast_tensors(delta, mu)
        d0 = self._delta(torch.zeros_like(delta))
        # δ(ε) ≤ Φ(μ/2 − ε/μ), so ε_hi = μ(μ/2 − Φ⁻¹(δ)) has δ(ε_hi) ≤ δ.
        safe = torch.clamp(delta, min=1e-300)
        hi = torch.clamp(mu * (mu / 2.0 - torch.special.ndtri(safe)), min=0.0)
        lo = torch.zeros_like(hi)
        for _ in range(200):  # bisection: δ(ε) is decreasing; keep δ(hi) ≤ δ (return hi: pessimistic)
            mid = 0.5 * (lo + hi)
            ok = self._delta(mid) <= delta
            hi = torch.where(ok, mid, hi)
            lo = torch.where(ok, lo, mid)
        out = torch.where(delta >= d0, torch.zeros_like(hi), hi)
        return torch.where(delta <= 0.0, torch.full_like(hi, math.inf), out)

    def _bayes_risk(self, pi: Tensor) -> Tensor:
        mu = self._mu(pi)
        interior = (pi > 0.0) & (pi < 1.0)
        p = torch.where(interior, pi, torch.full_like(pi, 0.5))
        e = torch.log(p) - torch.log1p(-p)
        r = (1.0 - p) * _ndtr(e / mu - mu / 2.0) + p * _ndtr(-e / mu - mu / 2.0)
        return torch.where(interior, r, torch.zeros_like(r))


class LaplaceTradeOff(TradeOff):
    """Laplace mechanism with η = sensitivity / b: the exact trade-off of Lap(0, 1) vs Lap(η, 1).  Bound: exact.

    Dong et al. 2022 (arXiv:1905.02383v3) Eq. (after Prop. 2.5); Kaissis et al. 2024 App. B.3:
    f(α) = 1 − e^η α (α < e^{−η}/2), e^{−η}/(4α) (α ≤ ½), e^{−η}(1 − α) (α > ½);
    δ(ε) = max(0, 1 − e^{(ε−η)/2}) for ε ≥ 0.
    """

    bound = "exact"

    def __init__(self, eta: float, *, description: str | None = None) -> None:
        check.positive(eta=eta)
        self.eta = float(eta)
        self.description = description if description is not None else f"Laplace eta={self.eta:g}"

    @property
    def is_symmetric(self) -> bool:
        return True

    def inverse(self) -> LaplaceTradeOff:
        return self

    def symmetrised(self) -> LaplaceTradeOff:
        return self

    def _f(self, alpha: Tensor) -> Tensor:
        eta = min(self.eta, _MAX_EXP)  # beyond e^700 the curve is 0 on (0, 1] in float64 anyway
        c = math.exp(-eta)
        mid = torch.clamp(alpha, min=max(c / 2.0, 1e-300))  # the branch not taken never divides by 0
        first = 1.0 - math.exp(eta) * alpha
        return torch.where(alpha <= c / 2.0, first, torch.where(alpha <= 0.5, c / (4.0 * mid), c * (1.0 - alpha)))

    def _delta_pos(self, eps: Tensor) -> Tensor:
        return torch.clamp(-torch.expm1((eps - self.eta) / 2.0), min=0.0) + 0.0  # + 0.0: no −0.0 in reports

    def _delta(self, eps: Tensor) -> Tensor:
        a = torch.abs(eps)
        d = self._delta_pos(a)
        # Symmetric pair: δ(−ε) = 1 − e^{−ε} + e^{−ε} δ(ε) (Kaissis et al. App. B, derived in the digest §3.3).
        neg = -torch.expm1(-a) + torch.exp(-a) * d
        return torch.where(eps >= 0.0, d, neg)

    def _epsilon(self, delta: Tensor) -> Tensor:
        e = self.eta + 2.0 * torch.log1p(-torch.clamp(delta, max=1.0))
        return torch.clamp(e, min=0.0)

    def _bayes_risk(self, pi: Tensor) -> Tensor:
        p = torch.maximum(pi, 1.0 - pi)  # symmetric: R(π) = R(1 − π); evaluate on π ≥ ½ (ε ≥ 0)
        interior = p < 1.0
        ps = torch.where(interior, p, torch.full_like(p, 0.5))
        e = torch.log(ps) - torch.log1p(-ps)
        r = (1.0 - ps) * torch.clamp(torch.exp((e - self.eta) / 2.0), max=1.0)  # (1 − π)(1 − δ(ε))
        return torch.where(interior, r, torch.zeros_like(r))


# ------------------------------------------------------------------------------------------------
# Exact convex piecewise-linear curves
# ------------------------------------------------------------------------------------------------


class PiecewiseLinearTradeOff(TradeOff):
    """A convex piecewise-linear trade-off curve stored by its vertices (exact in every operation).

    Invariants (established by the constructors): α strictly increasing from 0 to 1, edge slopes
    non-decreasing and ≤ 0, β(1) = 0, 0 ≤ β ≤ 1 − α.

    Attributes:
        alpha, beta: vertex coordinates, 1-D float64 tensors of length K ≥ 2.
        slopes: edge slopes, length K − 1 (non-decreasing).
    """

    def __init__(
        self, alpha: Tensor, beta: Tensor, *, bound: str, description: str = "", symmetric: bool | None = None
    ) -> None:
        if bound not in BOUNDS:
            raise InputError(f"bound must be one of {BOUNDS}; got {bound!r}")
        alpha = _as_input("alpha", alpha).reshape(-1)
        beta = _as_input("beta", beta, like=alpha).reshape(-1).to(alpha)
        if alpha.numel() < 2 or float(alpha[0]) != 0.0 or float(alpha[-1]) != 1.0:
            raise InputError("vertices must start at alpha=0 and end at alpha=1 (use TradeOff.from_points)")
        check.in_range(0.0, 1.0, beta=beta)
        if bool((alpha[1:] <= alpha[:-1]).any()):
            raise InputError("vertex alpha must be strictly increasing (use TradeOff.from_points)")
        slopes = (beta[1:] - beta[:-1]) / (alpha[1:] - alpha[:-1])
        # The binary searches over edge slopes need a convex, non-increasing chain ending at β = 0.
        # (Tolerances absorb the rounding of nearly collinear hull vertices; the searches check ±1 vertex.)
        reversed_ = slopes[1:] < slopes[:-1] - 1e-9 * torch.abs(slopes[:-1]) - 1e-12
        if float(beta[-1]) != 0.0 or bool((slopes > 1e-12).any()) or bool(reversed_.any()):
            raise InputError(
                "vertices must form a convex, non-increasing curve ending at (1, 0) (use TradeOff.from_points)"
            )
        self.alpha = alpha
        self.beta = beta
        self.slopes = slopes
        self.bound = bound
        self.description = description
        self._symmetric = symmetric  # True when built symmetric; None: decide numerically

    # -- constructors ---------------------------------------------------------------------------
    @classmethod
    def from_points(
        cls, alpha: Tensor, beta: Tensor, *, bound: str = "estimate", description: str = ""
    ) -> PiecewiseLinearTradeOff:
        """Lower convex hull of the points, their complements (1 − α, 1 − β), (0, 1) and (1, 0)."""
        a = _as_input("alpha", alpha).reshape(-1)
        b = _as_input("beta", beta, like=a).reshape(-1).to(a)
        if a.shape != b.shape:
            raise InputError(f"alpha and beta must have one length; got {a.numel()} and {b.numel()}")
        check.in_range(0.0, 1.0, alpha=a, beta=b)
        ends = torch.tensor([0.0, 1.0], dtype=a.dtype, device=a.device)
        xs = torch.cat([a, 1.0 - a, ends])
        ys = torch.cat([b, 1.0 - b, ends.flip(0)])
        hx, hy = lower_convex_hull(xs, ys)
        return cls(hx, hy, bound=bound, description=description or f"convex hull of {a.numel()} points")

    @classmethod
    def from_lines(
        cls, intercept: Tensor, slope: Tensor, *, bound: str, description: str = "", symmetric: bool | None = None
    ) -> PiecewiseLinearTradeOff:
        """f(α) = max(0, max_j intercept_j + slope_j α) on [0, 1], lines of slope ≤ 0 (exact envelope)."""
        c = _as_input("intercept", intercept).reshape(-1)
        s = _as_input("slope", slope, like=c).reshape(-1).to(c)
        check.finite(intercept=c, slope=s)
        check.in_range(None, 0.0, slope=s)
        xs, ys = _envelope_of_lines(c, s)
        # Keep f ≤ 1 − α (always true for valid profiles; guards rounding) and prune collinear vertices.
        # f ≥ 0 holds for every trade-off, so lifting a −1e-45 rounding residue to 0 stays sound.
        ys = torch.clamp(torch.minimum(ys, 1.0 - xs), min=0.0)
        hx, hy = lower_convex_hull(
            torch.cat([xs, xs.new_tensor([0.0, 1.0])]), torch.cat([ys, ys.new_tensor([1.0, 0.0])])
        )
        return cls(hx, hy, bound=bound, description=description, symmetric=symmetric)

    @classmethod
    def from_privacy_profile(
        cls, eps: Tensor, delta: Tensor, *, symmetric: bool = True, description: str = "privacy profile"
    ) -> PiecewiseLinearTradeOff:
        """Lower trade-off bound from upper privacy-profile values δ_j ≥ δ(ε_j).  Bound: lower.

        Dong, Roth, Su (arXiv:1905.02383v3) Prop. 2.12: a mechanism that is (ε, δ(ε))-DP for
        every ε in a set E is f-DP with f(α) = max{0, sup_{ε∈E} [1 − δ(ε) − e^ε α]}, and, because
        DP quantifies over both orderings of a neighbouring pair, also with the mirrored lines
        e^{−ε}(1 − δ(ε) − α) (Dong et al. Prop. 2.5, f_{ε,δ}). A finite grid E only drops lines,
        and a larger δ_j only lowers its line, so the curve is a sound lower bound for any grid
        and any upper profile. Exact envelope of the lines, no interpolation.

        Args:
            eps: ε grid, 1-D (any reals; negative ε are allowed for one-directional profiles).
            delta: δ values in [0, 1] at ``eps``, upper bounds on the profile.
            symmetric: add the mirrored lines (valid when ``delta`` bounds both orderings, as a
                mechanism's privacy profile does). False: the curve bounds T(P, Q) for the one
                ordering whose hockey-stick divergence H_{e^ε}(Q‖P) ``delta`` bounds.
        """
        e = _as_input("eps", eps).reshape(-1)
        d = _as_input("delta", delta, like=e).reshape(-1).to(e)
        if e.shape != d.shape:
            raise InputError(f"eps and delta must have one length; got {e.numel()} and {d.numel()}")
        check.finite(eps=e)
        check.in_range(0.0, 1.0, delta=d)
        impossible = d < -torch.expm1(e) - 1e-12  # every profile has δ(ε) ≥ 1 − e^ε
        if bool(impossible.any()):
            i = int(torch.nonzero(impossible)[0])
            raise InputError(
                f"delta must be >= 1 - exp(eps) (no pair of distributions has a smaller hockey-stick divergence); "
                f"got delta={float(d[i]):g} at eps={float(e[i]):g} (index {i})"
            )
        e = torch.clamp(e, max=_MAX_EXP)
        one_m = 1.0 - d
        c = [one_m]
        s = [-torch.exp(e)]
        if symmetric:
            c.append(torch.exp(-e) * one_m)
            s.append(-torch.exp(-e))
        return cls.from_lines(
            torch.cat(c), torch.cat(s), bound="lower", description=description, symmetric=True if symmetric else None
        )

    @classmethod
    def from_dp_pairs(cls, eps: Tensor, delta: Tensor) -> PiecewiseLinearTradeOff:
        """max_i f_{ε_i, δ_i}: the weakest curve consistent with every (ε_i, δ_i)-DP claim.  Bound: lower.

        Dong et al. 2022 Prop. 2.5: f_{ε,δ}(α) = max{0, 1 − δ − e^ε α, e^{−ε}(1 − δ − α)}.
        """
        e = _as_input("eps", eps).reshape(-1)
        check.in_range(0.0, None, eps=e)
        return cls.from_privacy_profile(e, delta, symmetric=True, description="(eps, delta) pairs")

    @classmethod
    def from_rdp(
        cls, orders: Tensor, rdp: Tensor, *, n_alpha: int = 600, margin: float = 1e-12
    ) -> PiecewiseLinearTradeOff:
        """Lower trade-off bound from an RDP curve, all orders at once.  Bound: lower.

        See :func:`rdp_tradeoff_lines` (formula and proof).
        """
        c, s = rdp_tradeoff_lines(orders, rdp, n_alpha=n_alpha, margin=margin)
        # Also the lines of the (ε, δ) conversion (Balle et al. 2020 Thm 21 / Canonne et al. 2020
        # Prop. 12) on an ε grid: sound as well, and they keep ε(δ) of the curve at or below the
        # one-number conversion wherever the finite tangent set would lose a few 1e-6.
        from .rdp.conversion import delta_from_rdp, eps_from_rdp

        o = _as_input("orders", orders).reshape(-1)
        r = _as_input("rdp", rdp, like=o).reshape(-1).to(o)
        fin = torch.isfinite(r)
        levels = torch.logspace(0.0, -60.0, 1200, dtype=o.dtype, device=o.device)
        e_top = eps_from_rdp(r[fin].expand(levels.numel(), -1), o[fin], levels, warn=False)[0]
        grid = torch.cat([e_top, torch.linspace(0.0, float(e_top.max()), 1000, dtype=o.dtype, device=o.device)])
        d_grid = delta_from_rdp(r[fin].expand(grid.numel(), -1), o[fin], grid, warn=False)[0]
        e_pos = torch.clamp(grid, max=_MAX_EXP)
        one_m = 1.0 - torch.clamp(d_grid, 0.0, 1.0)
        c = torch.cat([c, one_m, torch.exp(-e_pos) * one_m])
        s = torch.cat([s, -torch.exp(e_pos), -torch.exp(-e_pos)])
        return cls.from_lines(c, s, bound="lower", description="RDP lower bound", symmetric=True)

    # -- properties -----------------------------------------------------------------------------
    @property
    def is_symmetric(self) -> bool:
        """Built symmetric, or f = f⁻¹ to 1e-12 at the vertices of both (where they can differ)."""
        if self._symmetric is None:
            inv = self.inverse()
            pts = torch.cat([self.alpha, inv.alpha])
            self._symmetric = bool(torch.allclose(self._f(pts), inv._f(pts), rtol=0.0, atol=1e-12))
        return self._symmetric

    def inverse(self) -> PiecewiseLinearTradeOff:
        return PiecewiseLinearTradeOff.from_points(
            self.beta, self.alpha, bound=self.bound, description=f"inverse of {self.description}"
        )

    def symmetrised(self) -> PiecewiseLinearTradeOff:
        if self._symmetric:
            return self
        out = PiecewiseLinearTradeOff.from_points(
            torch.cat([self.alpha, self.beta]),
            torch.cat([self.beta, self.alpha]),
            bound=self.bound,
            description=f"symmetrised {self.description}",
        )
        out._symmetric = True
        return out

    # -- evaluation -----------------------------------------------------------------------------
    def _vert(self, like: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return (
            self.alpha.to(dtype=like.dtype, device=like.device),
            self.beta.to(dtype=like.dtype, device=like.device),
            self.slopes.to(dtype=like.dtype, device=like.device),
        )

    def _f(self, alpha: Tensor) -> Tensor:
        x, y, _ = self._vert(alpha)
        i = torch.clamp(torch.searchsorted(x, alpha.contiguous(), right=True) - 1, 0, x.numel() - 2)
        x0, x1, y0, y1 = x[i], x[i + 1], y[i], y[i + 1]
        t = (alpha - x0) / (x1 - x0)
        return torch.clamp(y0 + t * (y1 - y0), 0.0, 1.0)

    def _argbest(self, slopes: Tensor, threshold: Tensor) -> Tensor:
        # The vertex where the edge slopes cross ``threshold`` minimises π α + (1−π) β for
        # threshold = −π/(1−π) (and maximises 1 − β − e^ε α for threshold = −e^ε).
        return torch.searchsorted(slopes, threshold.contiguous())

    def _candidates(self, idx: Tensor) -> Tensor:
        k = self.alpha.numel()
        return torch.stack([torch.clamp(idx + j, 0, k - 1) for j in (-1, 0, 1)], dim=-1)

    def _bayes_risk(self, pi: Tensor) -> Tensor:
        x, y, sl = self._vert(pi)
        thr = -pi / (1.0 - pi)  # −inf at π = 1: picks vertex 0
        idx = self._candidates(self._argbest(sl, thr))
        val = pi[..., None] * x[idx] + (1.0 - pi[..., None]) * y[idx]
        return torch.clamp(val.min(dim=-1).values, min=0.0)

    def _delta(self, eps: Tensor) -> Tensor:
        x, y, sl = self._vert(eps)
        ee = torch.exp(torch.clamp(eps, max=_MAX_EXP))
        idx = self._candidates(self._argbest(sl, -ee))
        val = 1.0 - y[idx] - ee[..., None] * x[idx]
        return torch.clamp(val.max(dim=-1).values, 0.0, 1.0)

    def _epsilon(self, delta: Tensor) -> Tensor:
        # δ(ε) ≤ δ ⇔ for every vertex i: 1 − β_i − e^ε α_i ≤ δ, i.e. ε ≥ log((1 − β_i − δ)/α_i).
        x, y, _ = self._vert(delta)
        flat = delta.reshape(-1)
        rows = max(1, 4_000_000 // x.numel())
        out = []
        for start in range(0, flat.numel(), rows):  # chunks bound the (N, K) memory, not a kernel loop
            d = flat[start : start + rows, None]
            # Vertices carry ~1 ulp of absolute error (β ≈ 1 near α = 0); a gap within it is 0.
            gap = 1.0 - y - d
            pos = gap > _ULP
            safe_x = torch.where(x > 0.0, x, torch.ones_like(x))
            need = torch.where(
                pos & (x > 0.0),
                torch.log(torch.where(pos, gap, torch.ones_like(gap))) - torch.log(safe_x),
                torch.full_like(gap, -math.inf),
            )
            need = torch.where(pos & (x == 0.0), torch.full_like(gap, math.inf), need)
            out.append(torch.clamp(need.max(dim=-1).values, min=0.0))
        return torch.cat(out).reshape(delta.shape) if out else torch.zeros_like(delta)


# ------------------------------------------------------------------------------------------------
# RDP → trade-off (all orders)
# ------------------------------------------------------------------------------------------------


def _rdp_boundary(t: Tensor, rho: Tensor, n_alpha: int, iters: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """β̲ ≤ β_t(α) on a logit-spaced α grid by bisection in log β (see :func:`rdp_tradeoff_lines`).

    Returns (α (1, n), log β̲ (A, n), β̲ (A, n), binding (A, n)); binding is False where the order
    puts no constraint on β > e^{−700} (β_t treated as 0: a dropped constraint).
    """
    z = torch.linspace(-30.0, 30.0, n_alpha, dtype=t.dtype, device=t.device)
    log_a = torch.nn.functional.logsigmoid(z)[None, :]  # log α
    log_1ma = torch.nn.functional.logsigmoid(-z)[None, :]  # log(1 − α)
    tt = t[:, None]
    log_c = (tt - 1.0) * rho[:, None]

    def log_g(u: Tensor) -> Tensor:  # log[α^t (1−β)^{1−t} + (1−α)^t β^{1−t}], β = e^u
        return torch.logaddexp(tt * log_a + (1.0 - tt) * log1mexp(u), tt * log_1ma + (1.0 - tt) * u)

    hi = log_1ma.repeat(t.numel(), 1)  # β = 1 − α: g = 1 ≤ e^{(t−1)ρ}, feasible
    lo = torch.full_like(hi, -700.0)
    binding = log_g(lo) > log_c
    for _ in range(iters):  # bisection; log g decreases in β on (0, 1 − α]
        mid = 0.5 * (lo + hi)
        feas = log_g(mid) <= log_c
        hi = torch.where(feas, mid, hi)
        lo = torch.where(feas, lo, mid)
    return torch.exp(log_a), lo, torch.exp(lo), binding


def rdp_tradeoff_lines(
    orders: Tensor, rdp: Tensor, *, n_alpha: int = 600, margin: float = 1e-12
) -> tuple[Tensor, Tensor]:
    """Supporting lines of the RDP trade-off lower bound, over all orders.  Bound: lower.

    Formula (Balle, Barthe, Gaboardi, Hsu, Sato, arXiv:1905.09982v2, Thm 4 / Lemma 21's proof;
    Zhu, Dong, Wang, arXiv:2106.08567v3, §4; the digest's §7.13): a mechanism whose RDP curve
    is ρ(t) at orders t > 1 has, for every neighbouring ordered pair (P, Q) and every α,

        T(P, Q)(α) ≥ f_RDP(α) := max_t max{ β_t(α), β_t⁻¹(α) },
        β_t(α) := min{ β ∈ [0, 1 − α] : α^t (1 − β)^{1−t} + (1 − α)^t β^{1−t} ≤ e^{(t−1)ρ(t)} }.

    Proof. Fix a test φ with type-I error α and type-II error β. Post-processing P and Q by φ
    gives Bernoulli(α) and Bernoulli(1 − β), and Rényi divergence obeys the data-processing
    inequality, so (1/(t−1)) log[α^t (1−β)^{1−t} + (1−α)^t β^{1−t}] = D_t(Bern(α)‖Bern(1−β))
    ≤ D_t(P‖Q) ≤ ρ(t). On β ∈ (0, 1 − α] the left side decreases in β (a Bernoulli Rényi
    divergence grows as the parameters move apart), so β ≥ β_t(α). RDP bounds every ordered
    neighbouring pair, so the same applies to (Q, P), where the complementary test 1 − φ has
    errors (β, α): α ≥ β_t(β), i.e. β ≥ β_t⁻¹(α). Take the infimum over φ and the max over t.
    Each constraint set {(α, β): g_t ≤ e^{(t−1)ρ}} is convex (p^t q^{1−t} is jointly convex for
    t > 1), so β_t is convex and every tangent line of β_t lies below β_t ≤ T(P, Q); the same
    holds for the reflected tangents of β_t⁻¹. A finite order grid and finitely many tangents
    only remove constraints, so the envelope of the returned lines is ≤ f_RDP ≤ T(P, Q).

    Numerics: β_t(α) is found by bisection in log β and the lower (infeasible) end is kept, so
    the tangent point lies on or below the curve; the slope is the implicit derivative
    dβ/dα = −(t/(t−1)) (β/(1−α)) (1 − r^{t−1})/(1 − r^t), r = αβ/((1−α)(1−β)) < 1; each intercept
    is lowered by ``margin`` to absorb the O(ulp) error of that slope.

    Args:
        orders: orders t > 1, shape (A,).
        rdp: RDP values ρ(t) ≥ 0, shape (A,); non-finite entries are skipped.
        n_alpha: tangent points per order, logit-spaced on α ∈ (e^{−30}, 1 − e^{−30}).
        margin: downward shift of every line.

    Returns:
        (intercepts, slopes): 1-D tensors of the supporting lines (slopes < 0).
    """
    t = _as_input("orders", orders).reshape(-1)
    rho = _as_input("rdp", rdp, like=t).reshape(-1).to(t)
    if t.shape != rho.shape:
        raise InputError(f"orders and rdp must have one length; got {t.numel()} and {rho.numel()}")
    check.in_range(1.0, None, closed="neither", orders=t)
    check.integer(2, None, n_alpha=n_alpha)
    check.in_range(0.0, None, margin=margin)
    ok = torch.isfinite(rho)
    if bool((rho[ok] < 0).any()):
        raise InputError("rdp must be >= 0")
    t, rho = t[ok], rho[ok]
    if t.numel() == 0:
        raise UnsupportedError("no finite RDP value: the RDP curve gives no trade-off bound")
    # Stage 1: every order on a coarse α grid, to find the orders that bind somewhere (a
    # selection only: dropping orders drops constraints, so any subset stays sound).
    _, _, b1, _ = _rdp_boundary(t, rho, 64, iters=40)
    best = b1.argmax(dim=0)
    sel = torch.unique(torch.cat([best - 1, best, best + 1]).clamp(0, t.numel() - 1))
    # Stage 2: the binding orders on the fine grid; keep the two best orders per tangent point.
    alpha, u_lo, beta, binding = _rdp_boundary(t[sel], rho[sel], n_alpha, iters=48)
    ts = t[sel][:, None]
    log_a, log_1ma = torch.log(alpha), torch.log1p(-alpha)
    log_r = log_a + u_lo - log_1ma - log1mexp(u_lo)
    ratio = torch.expm1((ts - 1.0) * log_r) / torch.expm1(ts * log_r)
    slope = -(ts / (ts - 1.0)) * torch.exp(u_lo - log_1ma) * ratio
    intercept = beta - slope * alpha - margin
    keep = binding & torch.isfinite(slope) & torch.isfinite(intercept) & (slope < 0.0)
    score = torch.where(keep, beta, torch.full_like(beta, -1.0))
    top = torch.topk(score, k=min(2, score.shape[0]), dim=0).indices  # (2, n_alpha)
    cols = torch.arange(n_alpha, device=t.device).expand_as(top)
    kk = keep[top, cols]
    c, s = intercept[top, cols][kk], slope[top, cols][kk]
    # Reflections: β = c + s α  ⇔  α = c + s β  ⇔  β = −c/s + α/s (the lines of β_t⁻¹).
    c_all = torch.cat([c, -c / s])
    s_all = torch.cat([s, 1.0 / s])
    fin = torch.isfinite(c_all) & torch.isfinite(s_all)
    return c_all[fin], s_all[fin]
