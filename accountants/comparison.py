"""Mechanism comparison beyond the calibration point (Kaissis et al., ICML 2024).

Kaissis, Kolek, Balle, Hayes, Rueckert, "Beyond the Calibration Point: Mechanism Comparison in
Differential Privacy", arXiv:2406.08918v1. Every function takes :class:`~accountants.tradeoff.TradeOff`
objects and needs only their exact, vectorised ``bayes_risk``.

Directions (the paper's §3): M ⪰ M̃ ("M Blackwell-dominates M̃") means M is LESS private.
Δ(M‖M̃) = max_π [R_min(π) − R̃_min(π)] ≥ 0 is the worst-case regret of switching from M to M̃:
how much lower some adversary's Bayes error becomes. Δ(M‖M̃) = 0 ⇔ M ⪰ M̃.

Bound direction: these are properties of the two curves as given. When both curves are exact,
Δ is exact; when a curve is an accountant's lower bound, Δ compares guarantees, not mechanisms
(the digest's pitfall 13), and is labelled by the inputs' ``bound``.

Numerics: the maximum over π uses a grid of 4097 uniform plus 2049 logit-spaced priors (the
maxima can sit near 0 or 1, e.g. at π = 1/(1 + e^η) for a Laplace mechanism), then a
golden-section refinement of the best local maxima inside their grid brackets, so a kink between
grid points (Δ(Laplace‖Gaussian) peaks at one) costs nothing. R_min is 1-Lipschitz, so the grid
alone is within the grid spacing of the maximum; the refinement makes it ~1e-12 in practice.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from . import validate as check
from .errors import InputError, InputTypeError, UnsupportedError
from .tradeoff import GaussianTradeOff, PiecewiseLinearTradeOff, TradeOff

__all__ = [
    "Comparison",
    "DeltaDivergence",
    "EmergentDominance",
    "PLRVMoments",
    "bayes_risk",
    "blackwell_dominates",
    "blatantly_non_private",
    "compare",
    "crossing_priors",
    "delta_divergence",
    "emergent_dominance_bound",
    "gaussian_plrv_moments",
    "minimax_bayes_risk",
    "perfectly_private",
    "plrv_moments",
    "symmetric_delta_divergence",
]

Weight = Callable[[Tensor], Tensor] | str | None
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
_ZERO_TOL = 1e-12  # |R − R̃| at or below this is "equal" (float64 rounding of the closed forms)


# ------------------------------------------------------------------------------------------------
# Bayes error and the prior grid
# ------------------------------------------------------------------------------------------------


def _weight_fn(weight: Weight) -> tuple[Callable[[Tensor], Tensor] | None, str | None]:
    match weight:
        case None:
            return None, None
        case "jeffreys":  # Beta(½, ½) density
            return (lambda p: 1.0 / (math.pi * torch.sqrt(p * (1.0 - p)))), "jeffreys"
        case "uquadratic":  # UQuadratic[0, 1] density 12 (π − ½)²
            return (lambda p: 12.0 * (p - 0.5) ** 2), "uquadratic"
        case str():
            raise InputError(f"weight must be None, 'jeffreys', 'uquadratic' or a callable; got {weight!r}")
    if callable(weight):
        return weight, getattr(weight, "__name__", "custom")
    raise InputTypeError(f"weight must be None, a string or a callable; got {type(weight).__name__}")


def bayes_risk(m: TradeOff, pi: Tensor | float, weight: Weight = None) -> Tensor:
    """R_min(π) = min_α [π α + (1 − π) f(α)], optionally weighted by a hyper-prior density Ψ(π).

    Kaissis et al. 2024 Eq. (2); weighting §5.5 (R^Ψ(π) = Ψ(π) R_min(π); "jeffreys" = Beta(½, ½),
    "uquadratic" = 12(π − ½)², or a callable). A weighted value is not on the [0, ½] Bayes-error
    scale (Ψ is a density). Bound: lower on the adversary's error when ``m.bound == "lower"``.
    """
    r = m.bayes_risk(pi)
    fn, _ = _weight_fn(weight)
    if fn is None:
        return r
    p = torch.as_tensor(pi, dtype=r.dtype, device=r.device).expand_as(r)
    interior = (p > 0.0) & (p < 1.0)
    w = fn(torch.where(interior, p, torch.full_like(p, 0.5)))
    return torch.where(interior, w * r, torch.zeros_like(r))  # R(0) = R(1) = 0


def _prior_grid(dtype: torch.dtype = torch.float64) -> Tensor:
    uniform = torch.linspace(0.0, 1.0, 4097, dtype=dtype)
    tails = torch.sigmoid(torch.linspace(-36.0, 36.0, 2049, dtype=dtype))
    return torch.unique(torch.cat([uniform, tails]))  # sorted


def _maximise(fn: Callable[[Tensor], Tensor], n_refine: int = 8) -> tuple[float, float]:
    """max over π ∈ [0, 1] of fn (vectorised), and its argmax: grid, then golden section."""
    grid = _prior_grid()
    v = fn(grid)
    n = grid.numel()
    # Local maxima of the grid values (plateaus included), best first.
    left = torch.cat([v.new_full((1,), -math.inf), v[:-1]])
    right = torch.cat([v[1:], v.new_full((1,), -math.inf)])
    is_peak = (v >= left) & (v >= right)
    peaks = torch.nonzero(is_peak).reshape(-1)
    peaks = peaks[torch.argsort(v[peaks], descending=True)][:n_refine]
    a = grid[torch.clamp(peaks - 1, min=0)]
    b = grid[torch.clamp(peaks + 1, max=n - 1)]
    for _ in range(80):  # golden section: the bracket shrinks by 0.618 per step, to float64 spacing
        c = b - _GOLDEN * (b - a)
        d = a + _GOLDEN * (b - a)
        left_better = fn(c) >= fn(d)
        b = torch.where(left_better, d, b)
        a = torch.where(left_better, a, c)
    c = 0.5 * (a + b)
    fc = fn(c)
    cand_x = torch.cat([grid[peaks], c])
    cand_v = torch.cat([v[peaks], fc])
    i = int(torch.argmax(cand_v))
    return float(cand_v[i]), float(cand_x[i])


# ------------------------------------------------------------------------------------------------
# Δ-divergence, Blackwell order, crossings
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeltaDivergence:
    """Δ(M‖M̃) and where it is attained.

    Attributes:
        value: max_π [R_min(π) − R̃_min(π)] ≥ 0 (weighted by Ψ when ``weighting`` is set).
        worst_prior: the maximising prior π*, or None when the value is 0 (M ⪰ M̃).
        weighting: None, or the hyper-prior used ("jeffreys", "uquadratic", a callable's name);
            a weighted value is not a Δ-divergence (Kaissis et al. §5.5) and Theorem 2 does not
            apply to it.
    """

    value: float
    worst_prior: float | None
    weighting: str | None = None

    def __float__(self) -> float:
        return float(self.value)


def delta_divergence(m: TradeOff, m_tilde: TradeOff, weight: Weight = None) -> DeltaDivergence:
    """Δ(M‖M̃) = max_π [R_min(π) − R̃_min(π)]: the regret of switching from M to M̃.

    Kaissis et al. 2024 (arXiv:2406.08918v1) Def. 1 and Cor. 1 (Eq. 52); equivalently
    inf{κ ≥ 0 : f(α + κ) − κ ≤ f̃(α) ∀α} (Thm 2). Δ = 0 ⇔ M ⪰ M̃ (Thm 1).

    Args:
        m, m_tilde: the two curves.
        weight: optional hyper-prior (see :func:`bayes_risk`).

    Returns:
        :class:`DeltaDivergence`.

    >>> import accountants as acc
    >>> g, lap = acc.TradeOff.from_gdp(1.0), acc.TradeOff.from_mechanism(acc.Laplace(1.0))
    >>> round(delta_divergence(g, lap).value, 6), round(delta_divergence(lap, g).value, 6)
    (0.005272, 0.034139)
    """
    _, label = _weight_fn(weight)

    def diff(p: Tensor) -> Tensor:
        return bayes_risk(m, p, weight) - bayes_risk(m_tilde, p, weight)

    value, arg = _maximise(diff)
    value = max(value, 0.0)  # π ∈ {0, 1} gives 0 for both curves
    return DeltaDivergence(value, arg if value > _ZERO_TOL else None, label)


def symmetric_delta_divergence(m: TradeOff, m_tilde: TradeOff) -> float:
    """Δ↔ = max{Δ(M‖M̃), Δ(M̃‖M)} = ‖R_min − R̃_min‖_∞ (Kaissis et al. Def. 3, Eq. 6; a pseudometric)."""
    return max(delta_divergence(m, m_tilde).value, delta_divergence(m_tilde, m).value)


def crossing_priors(m: TradeOff, m_tilde: TradeOff, tol: float = _ZERO_TOL) -> tuple[float, ...]:
    """Priors where R_min − R̃_min changes sign (differences within ``tol`` count as 0), refined by bisection.

    Between two crossings one mechanism is strictly less private than the other for every
    adversary with a prior in that range (Kaissis et al. Thm 1, clause 3, restricted to an interval).
    """
    check.in_range(0.0, None, tol=tol)
    grid = _prior_grid()
    d = m.bayes_risk(grid) - m_tilde.bayes_risk(grid)
    sign = torch.where(d > tol, 1, torch.where(d < -tol, -1, 0))
    nz = torch.nonzero(sign).reshape(-1)
    if nz.numel() < 2:
        return ()
    s = sign[nz]
    change = torch.nonzero(s[1:] != s[:-1]).reshape(-1)
    if change.numel() == 0:
        return ()
    lo, hi = grid[nz[change]], grid[nz[change + 1]]
    s_lo = s[change].to(grid.dtype)
    for _ in range(60):  # bisection on the sign of the difference, vectorised over crossings
        mid = 0.5 * (lo + hi)
        dm = m.bayes_risk(mid) - m_tilde.bayes_risk(mid)
        same = dm * s_lo > 0
        lo = torch.where(same, mid, lo)
        hi = torch.where(same, hi, mid)
    return tuple(float(x) for x in 0.5 * (lo + hi))


def blackwell_dominates(m: TradeOff, m_tilde: TradeOff, tol: float = 1e-9) -> bool:
    """Whether M ⪰ M̃ (M is less private: f ≤ f̃ everywhere), up to ``tol`` in Bayes error.

    Kaissis et al. 2024 Thm 1: f ≤ f̃ ⇔ δ ≥ δ̃ ⇔ R_min ≤ R̃_min ⇔ Δ(M‖M̃) = 0.
    """
    check.in_range(0.0, None, tol=tol)
    return delta_divergence(m, m_tilde).value <= tol


@dataclass(frozen=True, slots=True)
class Comparison:
    """Both directions of the Δ-divergence between two mechanisms A and B.

    Attributes:
        delta_ab: Δ(A‖B), the regret of switching from A to B; ``worst_prior_ab`` its π*.
        delta_ba: Δ(B‖A); ``worst_prior_ba`` its π*.
        symmetric: Δ↔ = max of the two.
        crossings: priors where R_A − R_B changes sign.
        a_dominates_b: A ⪰ B (A is less private everywhere), i.e. Δ(A‖B) ≤ tol.
        b_dominates_a: B ⪰ A.
        bounds: the ``bound`` labels of A and B ("exact", "lower", "estimate").
    """

    delta_ab: float
    worst_prior_ab: float | None
    delta_ba: float
    worst_prior_ba: float | None
    symmetric: float
    crossings: tuple[float, ...]
    a_dominates_b: bool
    b_dominates_a: bool
    bounds: tuple[str, str]


def compare(a: TradeOff, b: TradeOff, tol: float = 1e-9) -> Comparison:
    """Δ both ways, the worst priors, the crossing priors and the Blackwell order of A and B."""
    ab = delta_divergence(a, b)
    ba = delta_divergence(b, a)
    return Comparison(
        delta_ab=ab.value,
        worst_prior_ab=ab.worst_prior,
        delta_ba=ba.value,
        worst_prior_ba=ba.worst_prior,
        symmetric=max(ab.value, ba.value),
        crossings=crossing_priors(a, b),
        a_dominates_b=ab.value <= tol,
        b_dominates_a=ba.value <= tol,
        bounds=(a.bound, b.bound),
    )


# ------------------------------------------------------------------------------------------------
# Extremal mechanisms (Lemmas 2–5)
# ------------------------------------------------------------------------------------------------


def perfectly_private() -> PiecewiseLinearTradeOff:
    """M_PP: P = Q, f(α) = 1 − α, R_min(π) = min{π, 1 − π}, δ(ε) = 0 for ε ≥ 0 (Kaissis et al. §3.4)."""
    one = torch.tensor([0.0, 1.0], dtype=torch.float64)
    return PiecewiseLinearTradeOff(
        one, one.flip(0), bound="exact", description="perfectly private (P = Q)", symmetric=True
    )


def blatantly_non_private() -> PiecewiseLinearTradeOff:
    """M_BNP: P ⟂ Q, f = 0, R_min = 0, δ = 1 (Kaissis et al. §3.4)."""
    x = torch.tensor([0.0, 1.0], dtype=torch.float64)
    return PiecewiseLinearTradeOff(
        x,
        torch.zeros(2, dtype=torch.float64),
        bound="exact",
        description="blatantly non-private (P ⟂ Q)",
        symmetric=True,
    )


def minimax_bayes_risk(m: TradeOff) -> tuple[float, float]:
    """(R*, π*): R* = max_π R_min(π) = Δ(M‖M_BNP) (Kaissis et al. Eq. 3, Lemma 4); π* = ½ for symmetric f."""
    value, arg = _maximise(m.bayes_risk)
    return value, arg


# ------------------------------------------------------------------------------------------------
# Composition: Theorem 3
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PLRVMoments:
    """Privacy-loss moments of one mechanism (Kaissis et al. Eqs. 9–11; Dong et al. 2022 §5).

    With L = log(P/Q) under P: v1 = E L = KL(P‖Q), v2 = E L², v3 = E|L − v1|³.
    """

    v1: float
    v2: float
    v3: float

    @property
    def eta(self) -> float:
        """η = v1 / √(v2 − v1²) (Eq. 8)."""
        return self.v1 / math.sqrt(self.v2 - self.v1**2)


def gaussian_plrv_moments(mu: float) -> PLRVMoments:
    """Moments for μ-GDP: L ~ N(μ²/2, μ²), so v1 = μ²/2, v2 = μ² + μ⁴/4, v3 = 2√(2/π) μ³ (η = μ/2)."""
    check.positive(mu=mu)
    return PLRVMoments(mu**2 / 2.0, mu**2 + mu**4 / 4.0, 2.0 * math.sqrt(2.0 / math.pi) * mu**3)


def plrv_moments(m: TradeOff) -> PLRVMoments:
    """v1, v2, v3 of Kaissis et al. Eqs. 9–11 from the curve: integrals of log|f′(x)| over [0, 1].

    Exact for μ-GDP (closed form) and for piecewise-linear curves (log|f′| is constant on each
    edge). A flat edge (f′ = 0: mass at infinite loss) makes the moments infinite.

    Raises:
        UnsupportedError: for other closed forms.
    """
    if isinstance(m, GaussianTradeOff):
        if m.mu.numel() != 1:
            raise InputError("plrv_moments needs a scalar mu")
        return gaussian_plrv_moments(float(m.mu))
    if isinstance(m, PiecewiseLinearTradeOff):
        w = m.alpha[1:] - m.alpha[:-1]
        if bool((m.slopes[w > 0] >= 0).any()):
            return PLRVMoments(math.inf, math.inf, math.inf)
        lg = torch.log(-m.slopes)
        v1 = float(-(w * lg).sum())
        v2 = float((w * lg**2).sum())
        v3 = float((w * torch.abs(lg + v1) ** 3).sum())
        return PLRVMoments(v1, v2, v3)
    raise UnsupportedError(f"plrv_moments supports GDP and piecewise-linear curves; got {type(m).__name__}")


@dataclass(frozen=True, slots=True)
class EmergentDominance:
    """Result of Theorem 3.

    Attributes:
        ordered: whether N η² ≥ Ñ η̃² (the theorem's hypothesis N/Ñ ≥ η̃²/η²).
        bound: when ``ordered``, an upper bound on Δ(M^{⊗N} ‖ M̃^{⊗Ñ}); else None.
        mu, mu_tilde: the CLT limits μ = 2√N η and μ̃ = 2√Ñ η̃ (Eqs. 77–78).
    """

    ordered: bool
    bound: float | None
    mu: float
    mu_tilde: float


def emergent_dominance_bound(m: PLRVMoments, n: int, m_tilde: PLRVMoments, n_tilde: int) -> EmergentDominance:
    """Kaissis et al. 2024 (arXiv:2406.08918v1) Thm 3, Eq. (14).  Bound: upper on Δ(M^{⊗N}‖M̃^{⊗Ñ}).

    If N/Ñ ≥ η̃²/η², then Δ(M^{⊗N} ‖ M̃^{⊗Ñ}) ≤ 0.56 (η³ v3/(√N v1³) + η̃³ ṽ3/(√Ñ ṽ1³)).
    (The proof text's "N/Ñ ≥ η/η̃" is a typo for the squared condition; digest §3.11.) The
    constant 0.56 is Dong et al.'s Berry–Esseen constant (arXiv:1905.02383v3 Thm 5).
    """
    check.integer(1, None, n=n, n_tilde=n_tilde)
    for name, v in (("m", m), ("m_tilde", m_tilde)):
        if not isinstance(v, PLRVMoments):
            raise InputTypeError(f"{name} must be PLRVMoments; got {type(v).__name__}")
        if not (v.v1 > 0 and v.v2 > v.v1**2 and math.isfinite(v.v3)):
            raise InputError(f"{name} needs 0 < v1, v1² < v2 and a finite v3; got {v}")
    eta, eta_t = m.eta, m_tilde.eta
    mu, mu_t = 2.0 * math.sqrt(n) * eta, 2.0 * math.sqrt(n_tilde) * eta_t
    ordered = n * eta**2 >= n_tilde * eta_t**2
    if not ordered:
        return EmergentDominance(False, None, mu, mu_t)
    gamma = 0.56 * eta**3 * m.v3 / (math.sqrt(n) * m.v1**3)
    gamma_t = 0.56 * eta_t**3 * m_tilde.v3 / (math.sqrt(n_tilde) * m_tilde.v1**3)
    return EmergentDominance(True, gamma + gamma_t, mu, mu_t)
