"""Discretisation of one step on the lattice {k·h}: a pessimistic PMF and a test for the lower bound.

For a pair (P, Q) with increasing loss L(x) = log p/q, the lattice points l_k = k·h cut the x-axis
at x_k = L⁻¹(l_k); bin k is [x_k, x_{k+1}), where L ∈ [l_k, l_{k+1}). Its exact masses p_k = P(bin)
and q_k = Q(bin) are CDF differences of the two Gaussian mixtures. Write U = e^{−L} (X ~ P); the
T-step profile is δ(ε) = E(1 − e^ε ΠU_i)_+, a convex non-increasing function of each U_i.

Upper (pessimistic) PMF — connect-the-dots (Doroshenko, Ghazi, Kamath, Kumar, Manurangsi,
PETS 2022, arXiv:2207.04380v1, §4): within bin k, U ∈ [e^{−l_{k+1}}, e^{−l_k}] is replaced by the
two-point variable on those ends with the same conditional mean E[U | bin] = q_k/p_k (masses a_k
at l_k and p_k − a_k at l_{k+1}). That is a mean-preserving spread of U, so by conditional Jensen,
one factor at a time, E(1 − e^ε ΠŨ_i)_+ ≥ δ(ε) for every ε and T (no accumulated rounding bias,
error O(T h²)). Mass with L below l_{k_lo} is raised to l_{k_lo}; mass with L ≥ l_{k_hi} goes to
+∞ (both monotone: they can only increase δ).

Lower PMFs — an explicit test: g(x) = the lattice point nearest to L(x) (clamped to the end
points of the lattice) is a function of the output, so for every threshold τ the event A_τ = {Σ g(x_i) ≥ τ} gives
δ(ε) ≥ P^T(A_τ) − e^ε Q^T(A_τ) (definition of the hockey-stick divergence). Both probabilities
come from the PMFs of g under P (``lower_p``) and under Q (``lower_q``), composed exactly. The best
τ is within O(h) of the Neyman–Pearson threshold, where dP ≈ e^ε dQ, so the loss is O(T h²) too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from .pairs import LabelledPair, MixturePair

__all__ = ["DiscreteStep", "discretise"]

_Q_TINY = 1e-280   # below this a bin's Q-mass is not trusted to relative precision


@dataclass(frozen=True)
class DiscreteStep:
    """One discretised step; index j of every PMF is the lattice point (k_lo + j)·h.

    Attributes:
        k_lo: lattice index of entry 0.
        upper: (n,) pessimistic (connect-the-dots) PMF of the loss; sums to 1 − p_inf.
        p_inf: mass of the pessimistic PMF at +∞.
        lower_p, lower_q: (n,) PMFs of the test statistic g under P and under Q (each sums to 1);
            ``lower_q_tilted`` = lower_q·e^{l} is what is composed (no underflow at large ε).
        h: lattice spacing.
    """

    k_lo: int
    upper: Tensor
    p_inf: float
    lower_p: Tensor
    lower_q: Tensor
    h: float

    @property
    def lower_q_tilted(self) -> Tensor:
        """q_k·e^{l_k}: the Q-PMF tilted to the scale of P (composes to e^{s}·Q^{*T}(s))."""
        return _tilted(self)


def _split_point(pair: MixturePair, of: str) -> float:
    """Where to switch from CDF to survival-function differences: the mixture mean (any point
    is exact; one near the median keeps both sides away from 1)."""
    comps = pair.p_components() if of == "p" else pair.q_components()
    return sum(w * m for w, m in comps)


def _masses(pair: MixturePair, x: Tensor, of: str) -> Tensor:
    """Mass of every interval [x_j, x_{j+1}) plus the two tails: (len(x) + 1,) entries
    [mass below x_0, bins..., mass above x_last]. CDF differences left of the median, survival
    function differences right of it (no cancellation near 1)."""
    med = _split_point(pair, of)
    upper = x > med
    t = pair.tail_mass(x, upper, of)
    left = t[1:] - t[:-1]
    right = t[:-1] - t[1:]
    across = 1.0 - t[:-1] - t[1:]
    inner = torch.where(upper[:-1], right, torch.where(upper[1:], across, left))
    below = torch.where(upper[0], 1.0 - t[0], t[0]).reshape(1)
    above = torch.where(upper[-1], t[-1], 1.0 - t[-1]).reshape(1)
    return torch.clamp(torch.cat([below, inner, above]), min=0.0)


def discretise(pair: MixturePair | LabelledPair, h: float, tail: float,
               device: torch.device | None = None) -> DiscreteStep:
    """Discretise one step of ``pair`` on the lattice {k·h} (see the module docstring).

    Args:
        pair: a dominating pair with increasing loss.
        h: lattice spacing > 0.
        tail: the lattice covers L on [L(x_lo), L(x_hi)] with P(X < x_lo), P(X > x_hi) ≤ tail; the
            pessimistic PMF sends the upper tail to +∞ (so ``p_inf`` ≤ tail).
        device: where the tensors live (default: torch's default device).

    Returns:
        A :class:`DiscreteStep`. Bound: ``upper`` dominates the step (Jensen), the lower PMFs
        describe an explicit test.
    """
    device = torch.empty(0).device if device is None else torch.device(device)
    if isinstance(pair, LabelledPair):
        return _discretise_labelled(pair, h, tail, device)
    k_lo, upper, p_inf, pm, qm = _raw(pair, h, tail, device)
    lower_p = pm[1:-1].clone()
    lower_q = qm[1:-1].clone()
    lower_p[0] += pm[0]
    lower_p[-1] += pm[-1]
    lower_q[0] += qm[0]
    lower_q[-1] += qm[-1]
    return DiscreteStep(k_lo=k_lo, upper=upper, p_inf=p_inf, lower_p=lower_p, lower_q=lower_q, h=h)


def _raw(pair: MixturePair, h: float, tail: float, device: torch.device) -> tuple[int, Tensor, float, Tensor, Tensor]:
    """(k_lo, pessimistic PMF, its mass at +∞, P- and Q-masses [below, n centred bins, above] of the test)."""
    f64: dict[str, Any] = {"dtype": torch.float64, "device": device}
    x_lo, x_hi = pair.x_range(tail)
    l_lo, l_hi = (float(v) for v in pair.loss(torch.tensor([x_lo, x_hi], **f64)))
    k_lo = math.floor(l_lo / h)
    k_hi = max(math.ceil(l_hi / h), k_lo + 1)
    k = torch.arange(k_lo, k_hi + 1, **f64)                 # n = k_hi − k_lo + 1 lattice points
    xe = pair.loss_inverse(k * h)                           # bin edges in x (±inf out of range)
    p = _masses(pair, xe, "p")                              # [below, n − 1 bins, above]
    q = _masses(pair, xe, "q")
    p_in, q_in = p[1:-1], q[1:-1]
    # Connect-the-dots split of bin k between l_k (a_k) and l_{k+1} (p_k − a_k), preserving
    # Q(bin) = a_k e^{−l_k} + (p_k − a_k) e^{−l_{k+1}}:
    #   a_k = (q_k e^{l_k} − p_k e^{−h}) / (1 − e^{−h}),   clamped to [0, p_k] against round-off.
    lk = k[:-1] * h
    # Where q_k is too small to carry relative precision (per-step losses ≳ 640 push it towards
    # the subnormals, and e^{l_k} overflows past 709) the whole bin is rounded up to l_{k+1}
    # (a_k = 0): rounding the loss up dominates too (δ is non-increasing in each U_i).
    tiny = q_in < _Q_TINY
    a = (q_in * torch.exp(torch.where(tiny, torch.zeros_like(lk), lk)) - p_in * math.exp(-h)) / -math.expm1(-h)
    a = torch.minimum(torch.clamp(a, min=0.0), p_in)
    a = torch.where(tiny, torch.zeros_like(a), a)
    zero = torch.zeros(1, **f64)
    upper = torch.cat([a, zero]) + torch.cat([zero, p_in - a])
    upper[0] += p[0]                                        # raise L < l_lo to l_lo
    # Test statistic g = the lattice point nearest to L(x) (bins centred on the lattice points,
    # end points outside). Its error against the bin's own loss is O(h²) with no O(h) bias, so
    # the composed statistic stays within O(√T·h²) of the likelihood ratio and no e^{Th/2}
    # factor amplifies the Q-side round-off.
    xm = pair.loss_inverse(torch.cat([k - 0.5, k[-1:] + 0.5]) * h)
    pm = _masses(pair, xm, "p")                             # [below, n centred bins, above]
    qm = _masses(pair, xm, "q")
    return k_lo, upper, float(p[-1]), pm, qm


def _discretise_labelled(pair: LabelledPair, h: float, tail: float, device: torch.device) -> DiscreteStep:
    """One lattice for every part of a labelled pair; the PMFs are the weighted sums of the parts'.

    Upper: each part's connect-the-dots PMF (each dominates its part, so the weighted sum dominates
    the labelled pair: H_α is linear in the label's law). Lower: the statistic is the lattice point
    nearest to L(i, x), clamped to the part's own top point above and to the *common* lowest point
    below, so that entry 0 alone holds mass whose loss is below its lattice point (``_tilted``
    bounds every other entry by e^{h/2}·p, which needs L ≥ l − h/2 there).
    """
    raws = [(w, _raw(p, h, tail, device)) for w, p in pair.parts]
    k_lo = min(r[0] for _, r in raws)
    k_hi = max(r[0] + r[1].numel() - 1 for _, r in raws)
    f64: dict[str, Any] = {"dtype": torch.float64, "device": device}
    upper, lower_p, lower_q = (torch.zeros(k_hi - k_lo + 1, **f64) for _ in range(3))
    p_inf = 0.0
    for w, (k0, up, pinf, pm, qm) in raws:
        a, n = k0 - k_lo, up.numel()
        upper[a:a + n] += w * up
        p_inf += w * pinf
        lower_p[a:a + n] += w * pm[1:-1]
        lower_q[a:a + n] += w * qm[1:-1]
        lower_p[0] += w * pm[0]
        lower_q[0] += w * qm[0]
        lower_p[a + n - 1] += w * pm[-1]
        lower_q[a + n - 1] += w * qm[-1]
    return DiscreteStep(k_lo=k_lo, upper=upper, p_inf=p_inf, lower_p=lower_p, lower_q=lower_q, h=h)


def _tilted(step: DiscreteStep) -> Tensor:
    """q_k·e^{l_k}, or its proved upper bound e^{h/2}·p_k where q_k is too small to carry relative
    precision (near float64's subnormal range; at per-step losses ≳ 700 it underflows to 0 and
    e^{l} overflows). On a centred bin k ≥ 1, L ≥ l_k − h/2 so q_k = ∫ e^{−L} dP ≤ e^{h/2 − l_k}p_k.
    An upper bound here only raises A_Q: the lower end of the bracket stays certified."""
    n = step.lower_q.numel()
    l = (step.k_lo + torch.arange(n, dtype=torch.float64, device=step.lower_q.device)) * step.h
    tiny = step.lower_q < _Q_TINY
    tiny[0] = False   # bin 0 also holds all mass with L below the lattice: no such bound
    direct = step.lower_q * torch.exp(torch.where(tiny, torch.zeros_like(l), l))
    return torch.where(tiny, math.exp(0.5 * step.h) * step.lower_p, direct)
