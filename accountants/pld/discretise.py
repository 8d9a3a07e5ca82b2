"""Discretisation of a one-step privacy-loss distribution on the lattice {k·h}, with a certificate.

For a pair (P, Q) with increasing loss L(x) = log p/q, Y = L(X), X ~ P, the discretised step is

* inside the region R = [x_lo, x_hi] (P(X < x_lo), P(X > x_hi) ≤ ``tail``): Y is rounded to the
  *nearest* lattice point; the bin masses are exact CDF differences of P at the inverse images
  of the bin edges (k ± ½)h, so the rounding error e = Ỹ − Y lies in [−h/2, h/2];
* below R: the mass is *raised* to the lattice point ⌈L(x_lo)/h⌉·h (≥ every loss there);
* above R: the mass is sent to +∞.

Both tails together form the truncation event of a step, of probability ``p_trunc``. On it we
set e = 0, so the e_i are i.i.d., bounded in an interval of length h, with mean
μ = E[e] = Σ_k k·h·m_k − ∫_R L dP (``mu_lo ≤ μ ≤ mu_hi``: the integral is a composite
Gauss–Legendre quadrature whose error is estimated by halving the panels). That is what
:mod:`.compose` needs for the certified bracket (Hoeffding on Σ e_i; see its docstring).

This is the discretisation of Gopi, Lee, Wutschitz (NeurIPS 2021, arXiv:2106.02848v6, §5:
round to a grid, bound the composed rounding error by concentration), with the tails handled
by a monotone coupling as in Meiser & Mohammadi (CCS 2018) / dp_accounting's pessimistic PLD.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from .pairs import MixturePair

__all__ = ["DiscreteStep", "discretise"]

_U = 2.0**-52  # float64 unit round-off (machine epsilon)


@dataclass(frozen=True)
class DiscreteStep:
    """One discretised step: ``pmf[j]`` is the mass at lattice point (k_lo + j)·h.

    Attributes:
        k_lo: lattice index of ``pmf[0]``.
        pmf: (n,) finite part of the distribution (raised lower tail included); sums to 1 − p_inf.
        p_inf: mass at +∞ (the upper tail).
        p_trunc: probability of the truncation event (both tails).
        mu_lo, mu_hi: an interval containing the mean rounding error μ = E[e].
        h: lattice spacing.
    """

    k_lo: int
    pmf: Tensor
    p_inf: float
    p_trunc: float
    mu_lo: float
    mu_hi: float
    h: float


def _gauss_legendre(n: int, dtype: torch.dtype, device: torch.device) -> tuple[Tensor, Tensor]:
    x, w = np.polynomial.legendre.leggauss(n)
    return torch.as_tensor(x, dtype=dtype, device=device), torch.as_tensor(w, dtype=dtype, device=device)


def _integral_loss(pair: MixturePair, a: float, b: float, panels: int, device: torch.device) -> float:
    """∫_a^b L(x) p(x) dx by composite 20-point Gauss–Legendre on ``panels`` equal panels."""
    nodes, weights = _gauss_legendre(20, torch.float64, device)
    edges = torch.linspace(a, b, panels + 1, dtype=torch.float64, device=device)
    half = 0.5 * (edges[1:] - edges[:-1])
    mid = 0.5 * (edges[1:] + edges[:-1])
    x = mid[:, None] + half[:, None] * nodes[None, :]
    f = pair.loss(x) * pair.pdf(x)
    return float((half[:, None] * weights[None, :] * f).sum())


def _mass_between(pair: MixturePair, x: Tensor) -> Tensor:
    """P(x_j < X ≤ x_{j+1}) for consecutive entries of x, from the CDF where it is below 1/2
    and from the survival function elsewhere (no cancellation near 1)."""
    # Left of the median use CDF differences, right of it survival-function differences; the
    # one bin that straddles the median is computed as 1 − P(X ≤ x_j) − P(X > x_{j+1}).
    med = _median(pair)
    upper = x > med
    t = pair.tail_mass(x, upper)
    left = t[1:] - t[:-1]
    right = t[:-1] - t[1:]
    across = 1.0 - t[:-1] - t[1:]
    out = torch.where(upper[:-1], right, torch.where(upper[1:], across, left))
    return torch.clamp(out, min=0.0)


def _median(pair: MixturePair) -> float:
    """A point m with P(X ≤ m) ≈ 1/2 (bisection on the mixture CDF; any m works for accuracy)."""
    lo, hi = pair.x_range(0.25)
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if float(pair.cdf(torch.tensor(mid, dtype=torch.float64))) < 0.5:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def discretise(pair: MixturePair, h: float, tail: float, device: torch.device | None = None) -> DiscreteStep:
    """Discretise one step of ``pair`` on the lattice {k·h} (see the module docstring).

    Args:
        pair: a dominating pair with increasing loss.
        h: lattice spacing > 0.
        tail: mass allowed below and above the region R (each side).
        device: where the tensors live (default: torch's default device).

    Returns:
        A :class:`DiscreteStep`. Bound: its rounding error is certified (|e| ≤ h/2 on R).
    """
    device = torch.empty(0).device if device is None else torch.device(device)
    f64 = dict(dtype=torch.float64, device=device)
    x_lo, x_hi = pair.x_range(tail)
    ends = torch.tensor([x_lo, x_hi], **f64)
    l_lo, l_hi = (float(v) for v in pair.loss(ends))
    k_lo = math.floor(l_lo / h + 0.5)
    k_hi = math.floor(l_hi / h + 0.5) + 1            # one spare point for the raised tail
    n = k_hi - k_lo + 1
    # Inner bin edges (k + ½)h for k = k_lo .. k_hi-1, mapped back to x; clamp to R.
    edges_l = (torch.arange(k_lo, k_hi, **f64) + 0.5) * h
    xe = torch.clamp(pair.loss_inverse(edges_l), min=x_lo, max=x_hi)
    x_all = torch.cat([ends[:1], xe, ends[1:]])            # n + 1 points from x_lo to x_hi
    masses = _mass_between(pair, x_all)                    # (n,), rounding to nearest inside R
    p_lo = float(pair.cdf(ends[:1])[0])
    p_hi = float(pair.sf(ends[1:])[0])
    # μ = Σ_k l_k m_k − ∫_R L dP, computed before the raised tail is added (e = 0 there).
    lattice = torch.arange(k_lo, k_hi + 1, **f64) * h
    disc_mean = float((lattice * masses).sum())
    # Panels resolve both the density (scale σ) and the loss's transition (scale σ²/shift).
    scale = min(pair.sigma, pair.sigma**2 / float(getattr(pair, "shift", 1.0)))
    panels = max(64, math.ceil((x_hi - x_lo) / (0.5 * scale)))
    i1 = _integral_loss(pair, x_lo, x_hi, panels, device)
    i2 = _integral_loss(pair, x_lo, x_hi, 2 * panels, device)
    abs_mean = float((lattice.abs() * masses).sum())
    # Quadrature error estimate (×10), round-off of the two sums, and of the n CDF differences.
    err = 10.0 * abs(i1 - i2) + 8.0 * _U * abs_mean + _U * n * float(lattice.abs().max())
    mu = disc_mean - i2
    # Raise the lower tail to the first lattice point ≥ L(x_lo) (monotone coupling, upper side).
    k_raise = math.ceil(l_lo / h) - k_lo
    masses = masses.clone()
    masses[k_raise] += p_lo
    return DiscreteStep(k_lo=k_lo, pmf=masses, p_inf=p_hi, p_trunc=p_lo + p_hi, mu_lo=mu - err, mu_hi=mu + err, h=h)
