"""PLD accounting of a DP-SGD description: certified brackets on δ(ε) and ε(δ), and the method.

Direction and accuracy. Every function returns a certified bracket lower ≤ true ≤ upper (module
:mod:`.compose`); the public single-number results are the *upper* ends. Both ends are off by
O(T·h²) (connect-the-dots above, a threshold test below), so ``eps_error`` sets the first lattice
spacing to h = 2√(0.8·eps_error / T) (δ queries, not refined: 0.35 of that); ε brackets are then
refined (h ← h·√(0.8·eps_error/width)) until upper − lower ≤ eps_error, while the FFT stays below
``max_points`` (beyond that the wider bracket is returned: still sound). ``delta_error`` is the δ
budget for the truncated tails and the FFT window (each ≤ delta_error/10). Single queries are
composed under the Chernoff-optimal exponential tilt (:func:`.compose.chernoff_tilt`), so the
float64 round-off is relative to the tail near the answer (docs/dominating-pairs.md §6).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import mpmath
import torch
from torch import Tensor

from .. import validate as check
from ..errors import InputError, InputTypeError, UnsupportedError
from ..events import DPSGD, Composed
from ..results import DeltaBound, EpsilonBound
from ..sampling import Poisson
from .compose import ComposedPLD, chernoff_tilt, compose, fast_length, window
from .discretise import discretise
from .gaussian import gdp_delta_bracket, gdp_epsilon_bracket
from .pairs import GaussianShift, LabelledPair, MixturePair, step_pairs, unsupported_reason

if TYPE_CHECKING:
    from ..tradeoff import PiecewiseLinearTradeOff

__all__ = [
    "PLDBracket",
    "PLDMethod",
    "PLDProfile",
    "pld_delta_bracket",
    "pld_epsilon_bracket",
    "pld_privacy_profile",
    "pld_profile",
]

Spec = DPSGD | Composed
MAX_POINTS = 1 << 20
MAX_STEP_POINTS = 1 << 16
MAX_SPACING = 1.0
"""Coarsest lattice spacing h; a step whose loss range needs more is left to RDP (UnsupportedError)."""
MAX_SIGMA = 1e100
"""Lattice points of one discretised step; beyond it h is coarsened (the bracket widens, still sound)."""


def _parts(spec: Spec) -> tuple[DPSGD, ...]:
    if isinstance(spec, DPSGD):
        return (spec,)
    if isinstance(spec, Composed):
        return spec.parts
    raise InputTypeError(f"spec must be accountants.DPSGD or accountants.Composed; got {type(spec).__name__}")


MAX_STEPS = 2**53
"""Most composed steps the PLD lattice takes (float64 integers are exact up to here); beyond, RDP answers."""


def _limits(spec: Spec) -> None:
    """Float64 limits of the PLD lattice (UnsupportedError naming the parameter; the method then
    answers with the RDP bound, labelled): σ above MAX_SIGMA makes σ² overflow and every loss 0."""
    total = sum(p.steps for p in _parts(spec))
    if total > MAX_STEPS:
        raise UnsupportedError(f"pld: steps={total} is above {MAX_STEPS:.3g}, beyond float64's exact integers "
                               "(the composition's exponents overflow); use method='rdp'")
    for p in _parts(spec):
        if p.noise_multiplier > MAX_SIGMA:
            raise UnsupportedError(
                f"pld: noise_multiplier={p.noise_multiplier:g} is above {MAX_SIGMA:g}, where the per-step privacy "
                "loss underflows float64; use method='rdp'"
            )


def _unsupported(spec: Spec) -> str | None:
    for p in _parts(spec):
        reason = unsupported_reason(p)
        if reason is not None:
            return reason
    return None


def _directions(spec: Spec) -> tuple[dict[str, list[tuple[MixturePair | LabelledPair, int]]], str]:
    """Per ordered direction, the (pair, steps) of every part; symmetric runs have one direction."""
    reason = _unsupported(spec)
    if reason is not None:
        raise UnsupportedError(reason)
    _limits(spec)
    parts = [(step_pairs(p), p.steps) for p in _parts(spec)]
    theorem = "; ".join(dict.fromkeys(sp.theorem for sp, _ in parts))
    remove = [(sp.remove, t) for sp, t in parts]
    extra = list(dict.fromkeys(name for sp, _ in parts for name, _ in sp.more))
    if all(sp.symmetric for sp, _ in parts) and not extra:
        return {"remove": remove}, theorem
    dirs = {"remove": remove, "add": [(sp.add, t) for sp, t in parts]}
    # Further directions (truncated Poisson: the record added to n records): parts without them use
    # their own pair of the same orientation (the same pair of datasets in every part).
    for name in extra:
        dirs[name] = [(dict(sp.more).get(name, sp.add if name.startswith("add") else sp.remove), t) for sp, t in parts]
    return dirs, theorem


@dataclass(frozen=True)
class PLDProfile:
    """Composed PLDs of every ordered direction of a run; the profile is their maximum.

    Attributes:
        directions: ``{"remove": ComposedPLD, "add": ComposedPLD}`` (one entry when symmetric).
        theorem: which dominating pairs were used.
        h: lattice spacing.
        pair_realised: whether a dataset realises the dominating pairs composed here, so that the
            lower ends bound the mechanism; False for truncated Poisson, whose lower ends bound only
            the pair (:func:`pld_epsilon_bracket` and :func:`pld_delta_bracket` then take the lower
            end from a realised run instead).
    """

    directions: dict[str, ComposedPLD]
    theorem: str
    h: float
    points: int = field(default=0)
    pair_realised: bool = field(default=True)

    def delta_upper(self, eps: Tensor) -> Tensor:
        """Certified upper bound on δ(ε) (maximum over directions).  Bound: upper."""
        return torch.stack([d.delta_upper(eps) for d in self.directions.values()]).amax(0)

    def delta_lower(self, eps: Tensor) -> Tensor:
        """Certified lower bound on the pairs' δ(ε) (the mechanism's where ``pair_realised``).  Bound: lower."""
        return torch.stack([d.delta_lower(eps) for d in self.directions.values()]).amax(0)

    def epsilon_upper(self, delta: float) -> float:
        """Certified upper bound on ε(δ).  Bound: upper."""
        return max(d.epsilon_upper(delta) for d in self.directions.values())

    def epsilon_lower(self, delta: float) -> float:
        """Certified lower bound on the pairs' ε(δ) (the mechanism's where ``pair_realised``).  Bound: lower."""
        return max(d.epsilon_lower(delta) for d in self.directions.values())


@dataclass(frozen=True)
class PLDBracket:
    """A certified bracket ``lower ≤ true ≤ upper`` and how it was computed."""

    lower: float
    upper: float
    h: float
    points: int
    theorem: str

    @property
    def width(self) -> float:
        return self.upper - self.lower


def _loss_span(pair: MixturePair | LabelledPair, tail: float) -> float:
    """Width of the loss range that :func:`discretise` puts on the lattice for ``pair``."""
    if isinstance(pair, LabelledPair):
        lo, hi = pair.loss_range(tail)
        return hi - lo
    x_lo, x_hi = pair.x_range(tail)
    lo, hi = (float(v) for v in pair.loss(torch.tensor([x_lo, x_hi], dtype=torch.float64)))
    return hi - lo


def _gaussian_mu(spec: Spec) -> tuple[float, str] | None:
    """μ of the composition when every step is an unsubsampled Gaussian (exactly μ-GDP), else None."""
    if _unsupported(spec) is not None:
        return None
    parts = [(step_pairs(p), p.steps) for p in _parts(spec)]
    # every direction must be a Gaussian: truncated Poisson's further directions (`more`) may not be
    if not parts or not all(isinstance(sp.remove, GaussianShift) and not sp.more for sp, _ in parts):
        return None
    # μ = √(Σ T_i (s_i/σ_i)²) in 30-digit mpmath (no over- or underflow at σ near 1e±300), then
    # rounded to float64: within one unit in the last place, far inside _MU_REL.
    terms = [(t, r.shift, r.sigma) for sp, t in parts if t > 0 and isinstance(r := sp.remove, GaussianShift)]
    if not terms:
        return None
    with mpmath.workdps(30):
        mu_mp = mpmath.sqrt(mpmath.fsum(mpmath.mpf(t) * (mpmath.mpf(s) / mpmath.mpf(sg)) ** 2 for t, s, sg in terms))
        mu = float(mu_mp) if mu_mp < mpmath.mpf("1e300") else math.inf
    theorem = "; ".join(dict.fromkeys(sp.theorem for sp, _ in parts))
    return mu, theorem + "; composed exactly as mu-GDP (Dong-Roth-Su 2022 Cor. 3.3, profile Balle-Wang 2018 Thm 8)"


_MU_REL = 1e-14
"""Relative error allowed for the float64 μ = √(Σ T s²/σ²) (a few roundings of ≤ 2⁻⁵³ each)."""


def _gdp_bracket(fn, x: float, mu: float) -> tuple[float, float]:
    """A μ-GDP bracket (ε at δ, or δ at ε: both increase with μ) that also covers the rounding of
    μ: the lower end at μ(1 − 1e-14), the upper end at μ(1 + 1e-14)."""
    if not math.isfinite(mu):
        return 0.0, math.inf
    lo = fn(x, mu * (1.0 - _MU_REL))[0]
    mu_up = mu * (1.0 + _MU_REL)
    up = fn(x, mu_up)[1] if mu_up <= 1e6 else math.inf
    return lo, up


def _realised(spec: Spec) -> Spec | None:
    """The run a dataset realises exactly, for runs with truncated-Poisson parts (else None).

    The dominating pair of truncated Poisson (docs/dominating-pairs.md §4c) is not realised by any
    dataset, so its bracket's lower end says nothing about the mechanism. A dataset whose other
    records have gradient 0 (and the record C·e, or ±C·e under replace-one) realises the Poisson pair
    at the record's inclusion probability p(n) (rounded down): each truncated part becomes Poisson(p(n)).
    The lower end of a truncated run is that run's certified lower end.
    """
    from ..sampling import TruncatedPoisson
    from ..truncated_poisson import inclusion_probability

    parts = _parts(spec)
    if not any(isinstance(p.sampling, TruncatedPoisson) for p in parts):
        return None
    out = []
    for p in parts:
        s = p.sampling
        if isinstance(s, TruncatedPoisson):
            rate = inclusion_probability(s, int(s.dataset_size))
            p = DPSGD(p.noise_multiplier, Poisson(rate), p.steps, p.neighbouring, p.group_size)
        out.append(p)
    return out[0] if isinstance(spec, DPSGD) else Composed(tuple(out))


def _check_order(lower: float, upper: float) -> None:
    """A certified lower end above the certified upper end is a bug, never a number to print."""
    if not lower <= upper:
        raise RuntimeError(f"pld: internal error: certified lower end {lower!r} above the upper end {upper!r}")


def _resolve_device(device: torch.device | str | None) -> torch.device:
    return torch.empty(0).device if device is None else torch.device(device)


def _auto_h(steps: int, eps_error: float) -> float:
    # ε brackets start here and refine from the measured width (width ∝ h²); δ queries, which are
    # not refined, use 0.35 of it (width ≈ c·T·h² with c ≈ 0.6–1.05 at the benchmark settings).
    return min(0.05, 2.0 * math.sqrt(0.8 * eps_error / steps))


def pld_profile(
    spec: Spec,
    *,
    h: float,
    delta_error: float = 1e-12,
    device: torch.device | str | None = None,
    max_points: int = MAX_POINTS,
    at_delta: float | None = None,
    at_epsilon: float | None = None,
) -> PLDProfile:
    """Discretise and compose every direction of ``spec`` on the lattice of spacing ``h``.

    Args:
        spec: a :class:`DPSGD` or a non-empty :class:`Composed`.
        h: lattice spacing (coarsened if the FFT would exceed ``max_points``).
        delta_error: δ budget of the truncated tails (≤ delta_error/10 in the upper bound) and of
            the FFT window (≤ delta_error/10 per side and PMF).
        device: where to compute (default: torch's default device).
        at_delta, at_epsilon: the query the profile is for (at most one): each direction is
            then composed under the exponential tilt whose Chernoff bound is tightest there, so
            the FFT round-off is relative to the tail near the answer rather than to 1. The
            profile then answers only at ε ≥ its window start (δ ≤ 1 below).

    Raises:
        UnsupportedError: when a part has no proved dominating pair.
    """
    check.positive(h=h)
    check.in_range(0.0, 1.0, closed="neither", delta_error=delta_error)
    dirs, theorem = _directions(spec)
    total = sum(p.steps for p in _parts(spec))
    if total == 0:
        raise InputError("spec must contain at least one step")
    dev = _resolve_device(device)
    tail = delta_error / (10.0 * total)      # +∞ mass of the pessimistic PMF ≤ delta_error/10
    gamma = delta_error / 10.0
    # Cap the work of one step: its loss range over h must stay ≤ MAX_STEP_POINTS (tiny σ has a
    # range ~1/σ²); a coarser h only widens the bracket.
    span = max(_loss_span(pair, tail) for ps in dirs.values() for pair, _ in ps)
    if not math.isfinite(span):
        raise UnsupportedError(
            f"pld: the privacy loss range of one step is not finite in float64 (noise multiplier too small; "
            f"span {span}); use method='rdp'"
        )
    h = max(h, span / MAX_STEP_POINTS)
    if h > MAX_SPACING:
        raise UnsupportedError(
            f"pld: one step's privacy loss spans {span:.3g} (noise multiplier too small), which needs a lattice "
            f"spacing h={h:.3g} > {MAX_SPACING}; use method='rdp'"
        )
    need = 0
    for _ in range(8):
        disc = {name: [(discretise(pair, h, tail, dev), t) for pair, t in parts] for name, parts in dirs.items()}
        tilts = {name: (0.0, 0.0) if at_delta is None and at_epsilon is None else
                 chernoff_tilt(d, delta=at_delta, epsilon=at_epsilon) for name, d in disc.items()}
        windows = {name: window(d, gamma, *tilts[name]) for name, d in disc.items()}
        need = max(fast_length(w[1] - w[0] + 1) for w in windows.values())
        if need <= max_points:
            break
        h *= 1.05 * need / max_points
    else:
        raise UnsupportedError(
            f"pld: the composed PLD needs an FFT of {need} points, above the cap max_points={max_points}, "
            f"even at lattice spacing h={h:.3g}; use method='rdp'"
        )
    composed = {name: compose(d, gamma, windows[name]) for name, d in disc.items()}
    return PLDProfile(composed, theorem, h, points=max(c.points for c in composed.values()),
                      pair_realised=_realised(spec) is None)


def pld_epsilon_bracket(
    spec: Spec,
    delta: float,
    *,
    eps_error: float = 0.01,
    delta_error: float | None = None,
    device: torch.device | str | None = None,
) -> PLDBracket:
    """Certified bracket on ε(δ) = inf{ε ≥ 0 : δ(ε) ≤ δ}.  Bound: [lower, upper].

    Args:
        spec: the run.
        delta: δ in (0, 1).
        eps_error: requested width upper − lower (reached unless the FFT size cap or the float64
            round-off floor binds); for ε below 20·eps_error the width is also kept ≤ 5 % of ε.
        delta_error: δ budget of tails and window (default δ/1000); must be < δ.
        device: where to compute.

    >>> import accountants as acc
    >>> spec = acc.DPSGD(1.0, acc.Poisson(0.01), steps=1000)
    >>> b = pld_epsilon_bracket(spec, 1e-5)
    >>> b.lower <= 1.8282 <= b.upper and b.width <= 0.01
    True
    """
    check.in_range(0.0, 1.0, closed="neither", delta=delta)
    check.positive(eps_error=eps_error)
    beta = delta * 1e-3 if delta_error is None else float(delta_error)
    check.in_range(0.0, delta, closed="neither", delta_error=beta)
    gauss = _gaussian_mu(spec)
    if gauss is not None:        # exact: no lattice, no FFT round-off floor
        mu, theorem = gauss
        if mu < 1e-300 and mu <= delta:     # δ(0) = 2Φ(μ/2) − 1 ≤ μ/√(2π) ≤ δ: ε = 0 (σ ≳ 1e300)
            lo, up = 0.0, 0.0
        else:
            lo, up = _gdp_bracket(gdp_epsilon_bracket, delta, mu)
        return PLDBracket(lo, up, 0.0, 0, theorem)
    total = sum(p.steps for p in _parts(spec))
    h = _auto_h(total, eps_error)
    lo, up, prof = -math.inf, math.inf, None
    for _ in range(8):
        prof = pld_profile(spec, h=h, delta_error=beta, device=device, at_delta=delta)
        # Every pass is certified, so the intersection of the brackets is too.
        new_up, new_lo = prof.epsilon_upper(delta), prof.epsilon_lower(delta)
        previous = up - lo
        up, lo = min(up, new_up), max(lo, new_lo)
        width = up - lo
        # For tiny ε an absolute eps_error would say nothing: also ask for 5 % of ε (cheap there).
        target = min(eps_error, max(0.05 * up, 1e-6))
        # Stop when done, when the FFT cap binds, or when refining stops paying (the float64
        # FFT round-off floor is reached: then the bracket is returned as it is, still sound).
        if not math.isfinite(width) or width <= target or prof.h > h or width > 0.8 * previous:
            break
        h = prof.h * min(0.9, max(0.1, math.sqrt(0.8 * target / width)))
    assert prof is not None
    realised = _realised(spec)
    if realised is not None:   # the pair is not realised: the lower end comes from a realised one
        lo = pld_epsilon_bracket(realised, delta, eps_error=eps_error, delta_error=beta, device=device).lower
    _check_order(lo, up)
    return PLDBracket(lo, up, prof.h, prof.points, _with_lower_source(prof.theorem, realised))


def pld_delta_bracket(
    spec: Spec,
    epsilon: float,
    *,
    eps_error: float = 0.01,
    delta_error: float = 1e-12,
    device: torch.device | str | None = None,
) -> PLDBracket:
    """Certified bracket on δ(ε).  Bound: [lower, upper].

    ``eps_error`` sets the lattice as for :func:`pld_epsilon_bracket` (no refinement);
    ``delta_error`` is the δ budget of tails and window.
    """
    check.in_range(0.0, None, closed="left", epsilon=epsilon)
    check.finite(epsilon=epsilon)
    check.positive(eps_error=eps_error)
    gauss = _gaussian_mu(spec)
    if gauss is not None and 1e-300 <= gauss[0] <= 1e6:     # exact μ-GDP profile (see pld_epsilon_bracket)
        lo, up = _gdp_bracket(gdp_delta_bracket, float(epsilon), gauss[0])
        return PLDBracket(lo, up, 0.0, 0, gauss[1])
    total = sum(p.steps for p in _parts(spec))
    prof = pld_profile(spec, h=0.35 * _auto_h(total, eps_error), delta_error=delta_error, device=device,
                       at_epsilon=float(epsilon))
    e = torch.tensor([float(epsilon)], dtype=torch.float64, device=_resolve_device(device))
    lo, up = float(prof.delta_lower(e)[0]), float(prof.delta_upper(e)[0])
    realised = _realised(spec)
    if realised is not None:   # the pair is not realised: the lower end comes from a realised one
        lo = pld_delta_bracket(realised, epsilon, eps_error=eps_error, delta_error=delta_error, device=device).lower
    _check_order(lo, up)
    return PLDBracket(lo, up, prof.h, prof.points, _with_lower_source(prof.theorem, realised))


def _with_lower_source(theorem: str, realised: Spec | None) -> str:
    if realised is None:
        return theorem
    return theorem + ("; lower end: the realised pair of a dataset whose other records have gradient 0 "
                      "(Poisson at the record's inclusion probability)")


def pld_privacy_profile(
    spec: Spec,
    eps_grid: Tensor,
    *,
    eps_error: float = 0.01,
    delta_error: float = 1e-12,
) -> Tensor:
    """Sound upper bounds on the privacy profile δ(ε) at every ε of ``eps_grid``.  Bound: upper.

    The maximum over the ordered directions (add and remove) where they differ. Computed on the
    device of ``eps_grid``; ε may be any finite real (δ(ε) ≥ 1 − e^ε for ε < 0).

    Args:
        spec: the run.
        eps_grid: (…,) tensor of ε values.
        eps_error: accuracy knob (see :func:`pld_delta_bracket`).
        delta_error: additive δ slack.

    Returns:
        δ upper bounds with the shape of ``eps_grid`` (float64).
    """
    if not isinstance(eps_grid, Tensor):
        raise InputTypeError(f"eps_grid must be a torch.Tensor; got {type(eps_grid).__name__}")
    check.finite(eps_grid=eps_grid)
    check.positive(eps_error=eps_error)
    from .random_allocation import covers, random_allocation_pld

    if covers(spec):
        assert isinstance(spec, DPSGD)
        ra = random_allocation_pld(spec, delta_error=delta_error)
        flat = eps_grid.to(torch.float64).reshape(-1).cpu()
        prof = torch.stack([d.delta_upper(flat) for d in ra.directions.values()]).amax(0)
        return prof.reshape(eps_grid.shape).to(eps_grid.device)
    total = sum(p.steps for p in _parts(spec))
    prof = pld_profile(spec, h=0.35 * _auto_h(total, eps_error), delta_error=delta_error, device=eps_grid.device)
    flat = eps_grid.to(torch.float64).reshape(-1)
    return prof.delta_upper(flat).reshape(eps_grid.shape)


def pld_directional_profiles(
    spec: Spec,
    eps_grid: Tensor,
    *,
    eps_error: float = 0.01,
    delta_error: float = 1e-12,
) -> dict[str, Tensor]:
    """Sound upper bounds on δ(ε) of every ordered direction, not maximised.  Bound: upper.

    Per direction d (``"remove"``: the record is in D, not in D'; ``"add"``: the other order; truncated
    Poisson adds ``"remove_n+1"``, ``"add_n+1"``, docs/dominating-pairs.md §4c), δ_d(ε) ≥ H_{e^ε}(M(D)‖M(D'))
    for every pair (D, D') of that direction, with D the first dataset of the pair (Zhu, Dong, Wang 2022,
    Def. 7 and Thm 10). ε may be any finite real. :func:`pld_privacy_profile` is their maximum. A symmetric run
    has one direction, ``"remove"``. Same composition and arguments as :func:`pld_privacy_profile`.
    """
    if not isinstance(eps_grid, Tensor):
        raise InputTypeError(f"eps_grid must be a torch.Tensor; got {type(eps_grid).__name__}")
    check.finite(eps_grid=eps_grid)
    check.positive(eps_error=eps_error)
    from .random_allocation import covers, random_allocation_pld

    flat = eps_grid.to(torch.float64).reshape(-1)
    if covers(spec):
        assert isinstance(spec, DPSGD)
        ra = random_allocation_pld(spec, delta_error=delta_error)
        return {k: d.delta_upper(flat.cpu()).reshape(eps_grid.shape).to(eps_grid.device)
                for k, d in ra.directions.items()}
    total = sum(p.steps for p in _parts(spec))
    prof = pld_profile(spec, h=0.35 * _auto_h(total, eps_error), delta_error=delta_error, device=eps_grid.device)
    return {k: d.delta_upper(flat).reshape(eps_grid.shape) for k, d in prof.directions.items()}


def directional_tradeoff_curves(
    spec: DPSGD | Composed, *, eps_grid: Tensor | None = None, pld_options: dict[str, float] | None = None
) -> dict[str, PiecewiseLinearTradeOff]:
    """Sound lower bounds on T(M(D'), M(D)) per ordered direction of the PLD accountant.  Bound: lower.

    D is the dataset *with* the record, D' the one without: α is the error under M(D') (a false positive
    of a membership test), β under M(D). Each direction's profile δ_d(ε) over ε ∈ [−80, 80]
    (:func:`pld_directional_profiles`) gives the one-ordering curve of
    :meth:`PiecewiseLinearTradeOff.from_privacy_profile` (``symmetric=False``; Dong, Roth, Su 2022
    Prop. 2.12 for one ordering); an ``"add"`` direction bounds H(M(D')‖M(D)), so its curve bounds
    T(M(D), M(D')) and is returned inverted. :func:`tradeoff_curve` is the symmetric curve of the
    maximum profile, which lies below every one of these: it covers both orderings of every neighbouring
    pair at once, which no single pair (D, D') need realise (audit/tightness.py uses these for the
    optimal audit of one pair). δ is raised to 1 − e^ε where rounding left it lower (sound: a larger δ
    only lowers a line).

    Raises:
        UnsupportedError: when the PLD accountant does not cover ``spec``.
    """
    from ..tradeoff import PiecewiseLinearTradeOff, _as_input, default_profile_grid  # pld → tradeoff, one way

    reason = PLDMethod().unsupported(spec)
    if reason is not None:
        raise UnsupportedError(f"method 'pld' does not cover this spec: {reason}")
    g = default_profile_grid() if eps_grid is None else _as_input("eps_grid", eps_grid).reshape(-1)
    eps = torch.cat([-g.flip(0), g]).unique()
    out = {}
    for name, d in pld_directional_profiles(spec, eps, **(pld_options or {})).items():
        d = torch.clamp(torch.maximum(d.to(torch.float64), -torch.expm1(eps)), 0.0, 1.0)
        f = PiecewiseLinearTradeOff.from_privacy_profile(eps, d, symmetric=False,
                                                         description=f"pld lower bound, direction {name}")
        out[name] = f.inverse() if name.startswith("add") else f
    return out


class PLDMethod:
    """Privacy-loss-distribution accounting with a certified bracket (registered as "pld")."""

    name = "pld"
    label = "tight (PLD)"

    def __init__(self, eps_error: float = 0.01) -> None:
        check.positive(eps_error=eps_error)
        self.eps_error = float(eps_error)

    def unsupported(self, spec: Spec) -> str | None:
        from .random_allocation import covers

        return None if covers(spec) else _unsupported(spec)

    def tradeoff(self, spec: Spec, *, eps_grid: Tensor | None = None, options: dict | None = None):
        """The tight PLD lower trade-off curve: :func:`pld_privacy_profile` on ``eps_grid`` (default
        :func:`accountants.tradeoff.default_profile_grid`) through ``TradeOff.from_privacy_profile``, symmetric
        since the profile bounds every ordered neighbouring pair. (This module imports ``tradeoff``; ``tradeoff``
        reaches PLD only through the method registry, never by importing this package.)"""
        from ..tradeoff import PiecewiseLinearTradeOff, _as_input, default_profile_grid

        grid = default_profile_grid() if eps_grid is None else _as_input("eps_grid", eps_grid)
        delta = torch.as_tensor(pld_privacy_profile(spec, grid, **(options or {})), dtype=torch.float64)
        return PiecewiseLinearTradeOff.from_privacy_profile(grid, torch.clamp(delta, 0.0, 1.0), symmetric=True)

    def epsilon(self, spec: Spec, delta: float) -> EpsilonBound:
        check.in_range(0.0, 1.0, closed="neither", delta=delta)
        from .random_allocation import covers

        if covers(spec):
            assert isinstance(spec, DPSGD)
            return _random_allocation_epsilon(spec, float(delta))
        if not _parts(spec):
            return EpsilonBound(0.0, float(delta), method=self.name, lower=0.0, theorem="empty composition")
        try:
            b = pld_epsilon_bracket(spec, float(delta), eps_error=self.eps_error)
        except UnsupportedError as e:
            rdp = _rdp_fallback(spec, lambda m: m.epsilon(spec, float(delta)))
            if rdp is None:
                raise
            return EpsilonBound(rdp.value, float(delta), method=self.name, lower=0.0,
                                theorem=_fallback_theorem(e, rdp), upper_source="rdp")
        rdp = _rdp_fallback(spec, lambda m: m.epsilon(spec, float(delta))) if _rdp_may_help(b, self.eps_error) else None
        upper, theorem, source = _intersect_rdp(b, rdp)
        return EpsilonBound(upper, float(delta), method=self.name, lower=b.lower, theorem=theorem,
                            upper_source=source)

    def delta(self, spec: Spec, epsilon: float) -> DeltaBound:
        check.in_range(0.0, None, closed="left", epsilon=epsilon)
        check.finite(epsilon=epsilon)
        from .random_allocation import covers

        if covers(spec):
            assert isinstance(spec, DPSGD)
            return _random_allocation_delta(spec, float(epsilon))
        if not _parts(spec):
            return DeltaBound(0.0, float(epsilon), method=self.name, lower=0.0, theorem="empty composition")
        try:
            b = pld_delta_bracket(spec, float(epsilon), eps_error=self.eps_error)
        except UnsupportedError as e:
            rdp = _rdp_fallback(spec, lambda m: m.delta(spec, float(epsilon)))
            if rdp is None:
                raise
            return DeltaBound(rdp.value, float(epsilon), method=self.name, lower=0.0,
                              theorem=_fallback_theorem(e, rdp), upper_source="rdp")
        rdp = _rdp_fallback(spec, lambda m: m.delta(spec, float(epsilon))) if _rdp_may_help(b, 0.05 * b.upper) else None
        upper, theorem, source = _intersect_rdp(b, rdp)
        return DeltaBound(upper, float(epsilon), method=self.name, lower=b.lower, theorem=theorem,
                          upper_source=source)


def _random_allocation_epsilon(spec: DPSGD, delta: float) -> EpsilonBound:
    """Balls-in-bins: the smaller of the PLD upper bound (:mod:`.random_allocation`) and the RDP bound
    (both sound), with the certified lower end of the realised pair (:mod:`accountants.random_allocation`)."""
    from ..random_allocation import random_allocation_lower_epsilon
    from .random_allocation import random_allocation_pld_epsilon, theorem

    rdp = _rdp_fallback(spec, lambda m: m.epsilon(spec, delta))
    assert rdp is not None
    lower = random_allocation_lower_epsilon(spec, delta)
    try:
        up = random_allocation_pld_epsilon(spec, delta)
    except UnsupportedError as e:
        return EpsilonBound(rdp.value, delta, method="pld", lower=lower,
                            theorem=_fallback_theorem(e, rdp), upper_source="rdp")
    bracket = PLDBracket(lower, up, 0.0, 0, theorem(spec) + "; lower: max-statistic of the realised pair "
                         "(Chua et al. 2024)")
    value, thm, source = _intersect_rdp(bracket, rdp)
    return EpsilonBound(value, delta, method="pld", lower=lower, theorem=thm, upper_source=source)


def _random_allocation_delta(spec: DPSGD, epsilon: float) -> DeltaBound:
    """δ(ε) counterpart of :func:`_random_allocation_epsilon`."""
    from ..random_allocation import random_allocation_lower_delta
    from .random_allocation import random_allocation_pld_delta, theorem

    rdp = _rdp_fallback(spec, lambda m: m.delta(spec, epsilon))
    assert rdp is not None
    lower = random_allocation_lower_delta(spec, epsilon)
    try:
        up = random_allocation_pld_delta(spec, epsilon)
    except UnsupportedError as e:
        return DeltaBound(rdp.value, epsilon, method="pld", lower=lower,
                          theorem=_fallback_theorem(e, rdp), upper_source="rdp")
    bracket = PLDBracket(lower, up, 0.0, 0, theorem(spec) + "; lower: max-statistic of the realised pair "
                         "(Chua et al. 2024)")
    value, thm, source = _intersect_rdp(bracket, rdp)
    return DeltaBound(value, epsilon, method="pld", lower=lower, theorem=thm, upper_source=source)


def _rdp_may_help(bracket: PLDBracket, allowed: float) -> bool:
    """Whether the RDP bound is worth computing: it is ≥ the truth ≥ the PLD lower end, so it can
    beat the PLD upper end by at most the bracket's width; up to ``allowed`` (eps_error for ε,
    5 % of the upper end for δ) that gain is not worth its cost (≈ 20 ms at T = 1e3)."""
    width = bracket.upper - bracket.lower
    return not (math.isfinite(width) and width <= allowed)


def _fallback_theorem(err: Exception, rdp) -> str:
    """The theorem line of a PLD answer that fell back to RDP: says so, and why."""
    return f"FALLBACK to the RDP bound ({rdp.theorem}): the PLD accountant cannot answer here ({err})"


def _intersect_rdp(bracket, rdp) -> tuple[float, str, str | None]:
    """(upper, theorem, upper_source) of a PLD bracket intersected with the RDP bound (None: no RDP bound).

    The PLD upper end is never worse than the RDP bound: both are sound upper bounds on the same
    quantity (ε at δ, or δ at ε), so the smaller is one too; ``upper_source`` says "rdp" when it won.
    """
    if rdp is None or not rdp.value < bracket.upper:
        return bracket.upper, bracket.theorem, None
    return rdp.value, (f"{bracket.theorem}; upper end from the RDP bound ({rdp.theorem}), tighter than PLD's "
                       f"{bracket.upper:.6g}"), "rdp"


def _rdp_fallback(spec: Spec, query):
    """The RDP method's answer for ``spec`` (None where RDP does not cover it)."""
    from ..api import get_method

    m = get_method("rdp")
    if m.unsupported(spec) is not None:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return query(m)
