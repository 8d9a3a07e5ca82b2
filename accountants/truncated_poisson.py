"""Truncated Poisson sampling: the probabilities its dominating and realised pairs are built from.

A truncated Poisson step (:class:`accountants.TruncatedPoisson`) includes every record with
probability q and keeps a uniformly random B of them when more than B are drawn. For a record x
of a dataset of m records, let K ~ Bin(m − 1, q) be the number of *other* records drawn.

* π(m) = P(K ≥ B): the chance that the batch is truncated whether or not x is drawn;
* γ̄(m) = E[q·B/(K + 1) | K ≥ B] = B·P(Bin(m, q) ≥ B + 1) / (m·π(m)): the chance that x ends up in
  a truncated batch (identity Σ_{k≥B} C(m−1, k) q^{k+1}(1−q)^{m−1−k} B/(k+1) = (B/m) P(Bin(m, q) ≥ B+1));
* p(m) = q(1 − π(m)) + π(m)γ̄(m): the chance that x is in the batch.

The dominating pair (docs/dominating-pairs.md §4c) reveals the label {K ≥ B}: with probability
1 − π it is the Poisson pair (weight q, shift C), with probability π the replacement pair (weight γ̄,
shift 2C). The same split is the one of dp_accounting's ``from_truncated_subsampled_gaussian_mechanism``
(Ganesh 2025, arXiv 2508.15089), which uses the replace-one pair in the second label; dpaudit uses the
add/remove pair of each direction, which the same coupling proves. The realised pair of the certified
lower bound (other records' gradients 0) is the Poisson pair at rate p(m).

All three are evaluated with mpmath's regularised incomplete beta function at 40 digits
(P(Bin(m, q) ≥ k) = I_q(k, m − k + 1)), then rounded in the direction that keeps the bound sound:
γ̄ up (a larger weight dominates, §4 step 4), p down (the realised pair's ε grows with p), π to nearest
(the profile is linear in π, so its rounding moves δ by at most 2⁻⁵³ per step; said in the theorem).
"""

from __future__ import annotations

import math

import mpmath
import torch
from torch import Tensor

from .sampling import TruncatedPoisson

__all__ = ["inclusion_probability", "rdp_truncated_poisson_gaussian", "truncation_split"]

_DPS = 40


def _binom_sf(k: int, m: int, q: float) -> mpmath.mpf:
    """P(Bin(m, q) ≥ k) at 40 digits (1 for k ≤ 0, 0 for k > m)."""
    if k <= 0:
        return mpmath.mpf(1)
    if k > m:
        return mpmath.mpf(0)
    if q >= 1.0:
        return mpmath.mpf(1)
    return mpmath.betainc(k, m - k + 1, 0, mpmath.mpf(q), regularized=True)


def _split_mp(s: TruncatedPoisson, m: int) -> tuple[mpmath.mpf, mpmath.mpf]:
    b, q = int(s.max_batch_size), float(s.rate)
    pi = _binom_sf(b, m - 1, q)
    if pi == 0:
        return pi, mpmath.mpf(0)
    gamma = mpmath.mpf(b) * _binom_sf(b + 1, m, q) / (mpmath.mpf(m) * pi)
    return pi, min(gamma, mpmath.mpf(q))


def truncation_split(s: TruncatedPoisson, m: int) -> tuple[float, float]:
    """(π, γ̄) for a record of a dataset of ``m`` records (module docstring).

    π = P(Bin(m−1, q) ≥ B) rounded to nearest; γ̄ = E[qB/(K+1) | K ≥ B] rounded up (≤ q; 0 when π = 0).
    """
    if m < 1:
        raise ValueError(f"m must be >= 1; got {m}")
    with mpmath.workdps(_DPS):
        pi, gamma = _split_mp(s, m)
        g = float(gamma)
        if mpmath.mpf(g) < gamma:
            g = math.nextafter(g, math.inf)
        return float(pi), min(g, float(s.rate))


def inclusion_probability(s: TruncatedPoisson, m: int) -> float:
    """p(m) = P(x in the batch) = q(1 − π) + πγ̄ for a dataset of ``m`` records, rounded down."""
    if m < 1:
        raise ValueError(f"m must be >= 1; got {m}")
    with mpmath.workdps(_DPS):
        b, q = int(s.max_batch_size), mpmath.mpf(float(s.rate))
        # q·P(K ≤ B − 1) + (B/m)·P(Bin(m, q) ≥ B + 1), K ~ Bin(m − 1, q)
        p = q * (1 - _binom_sf(b, m - 1, float(s.rate))) + mpmath.mpf(b) * _binom_sf(b + 1, m, float(s.rate)) / m
        f = float(p)
        if mpmath.mpf(f) > p:
            f = math.nextafter(f, 0.0)
        return max(f, 0.0)


def _up(x: mpmath.mpf) -> float:
    f = float(x)
    return math.nextafter(f, math.inf) if mpmath.mpf(f) < x else f


def rdp_truncated_poisson_gaussian(alpha: Tensor, s: TruncatedPoisson, sigma: float) -> Tensor:
    """One-step RDP ε(α) of the truncated-Poisson subsampled Gaussian, add/remove.  Bound: upper.

    The labelled dominating pair of docs/dominating-pairs.md §4c bounds every Rényi divergence too
    (its proof uses only joint convexity and post-processing, which hold for e^{(α−1)D_α}), and for
    a label revealed with the same law on both sides e^{(α−1)D_α} is the mixture of the labels':

        ε(α) = max_{m ∈ {n, n+1}} log((1 − π)e^{(α−1)R₁} + π e^{(α−1)R₂}) / (α − 1),

    R₁ = the Poisson-subsampled Gaussian's RDP at (q, σ), R₂ at (γ̄, σ/2) (shift 2C), both
    :func:`accountants.rdp.poisson.rdp_poisson_gaussian` (Mironov, Talwar, Zhang 2019; removal
    dominates insertion, ibid. Thm 5, so each covers both directions). The weights 1 − π and π and
    γ̄ are rounded up (ε(α) increases in each).

    Args:
        alpha: orders > 1, shape (..., A).
        s: the sampling description.
        sigma: noise multiplier > 0.
    """
    from .rdp.poisson import rdp_poisson_gaussian

    q, b = float(s.rate), int(s.max_batch_size)
    r1 = rdp_poisson_gaussian(alpha, q, sigma)
    out: Tensor | None = None
    for m in (int(s.dataset_size), int(s.dataset_size) + 1):
        with mpmath.workdps(_DPS):
            pi = _binom_sf(b, m - 1, q)
            if pi == 0:
                val = r1
            else:
                gamma = min(mpmath.mpf(b) * _binom_sf(b + 1, m, q) / (mpmath.mpf(m) * pi), mpmath.mpf(q))
                w1, w2, g = _up(1 - pi), _up(pi), min(_up(gamma), q)
                r2 = rdp_poisson_gaussian(alpha, g, sigma / 2.0)
                am1 = alpha - 1.0
                parts = [am1 * r2 + math.log(w2)] + ([am1 * r1 + math.log(w1)] if w1 > 0 else [])
                val = torch.logsumexp(torch.stack(parts), dim=0) / am1
        out = val if out is None else torch.maximum(out, val)
    assert out is not None  # the loop ran over two dataset sizes
    return out


def _rdp_handler(spec, orders: Tensor) -> tuple[Tensor, str]:
    return (rdp_truncated_poisson_gaussian(orders, spec.sampling, spec.noise_multiplier),
            "truncated Poisson: the labelled pair of docs/dominating-pairs.md §4c in Renyi divergence "
            "(cut label revealed; Mironov-Talwar-Zhang 2019 per label)")


def register_handlers(register) -> None:
    """Register the truncated-Poisson RDP handler (add/remove) with the RDP dispatch table."""
    from .sampling import Neighbouring

    register(TruncatedPoisson, Neighbouring.ADD_REMOVE, _rdp_handler)
