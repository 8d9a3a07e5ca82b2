"""RDP of DP-SGD with random allocation (balls-in-bins at k = 1, reduced to it for k > 1).  Bound: upper.

Sampler (:class:`accountants.RandomAllocation`): every epoch of t steps assigns each record to
k of the t steps, a uniformly random k-subset drawn independently per record. Add/remove only.

**k = 1 (balls-in-bins).** One epoch of adaptive Gaussian steps with noise σ (sensitivity 1) is
dominated by the pair P = (1/t) Σ_j N(e_j, σ² I_t) (record present, in step j) and
Q = N(0, σ² I_t) (record absent) (Feldman & Shenfeld 2025, arXiv 2502.08202, the reduction of
random allocation to its non-adaptive Gaussian pair; Dong, Chen & Özgür 2025, arXiv 2503.03043).
With L_j = exp((x_j − 1/2)/σ²), i.i.d. under Q with E[L^a] = exp(a(a−1)/(2σ²)), P/Q = avg_j L_j.

* Remove direction D_α(P‖Q), integer α = m — exact (F&S 2025, Cor. 6.2 first part; derived
  here from the multinomial expansion): E_Q[(Σ_j L_j)^m] = m! [z^m] f(z)^t with
  f(z) = Σ_a exp(a(a−1)/(2σ²)) z^a / a!, so D_m = (log(m! [z^m] f^t) − m log t)/(m − 1).
  f^t is formed by binary powering of the series truncated at degree ``MAX_EXACT_ORDER`` in log
  space (all coefficients are positive: no cancellation). Fractional α between integers m < α <
  m+1: (α−1)D_α is convex in α (a cumulant generating function) and 0 at α = 1, so the chord
  through the neighbouring integers bounds it; α ∈ (1, 2) uses the chord from (1, 0) to 2.
  Above ``MAX_EXACT_ORDER``: α/(2σ²) (joint convexity: no worse than one Gaussian step).
* Add direction D_α(Q‖P) = log E_Q[A^{−β}]/(α − 1), A = avg_j L_j, β = α − 1: the smaller of
  (i) Jensen, log A ≥ avg_j log L_j, so the loss is at most 1/(2σ²) − S/(tσ²) with S ~ N(0, tσ²):
  D_α ≤ (α + t − 1)/(2tσ²) (F&S 2025, Cor. 6.2 second part, as the authors' code cites it); it does
  not vanish as t grows, so it is only the fallback;
  (ii) :func:`add_rdp_quadrature`, a certified numerical upper bound through the Laplace transform
  A^{−β} = Γ(β)^{−1} ∫ s^{β−1} e^{−sA} ds, E e^{−sA} = φ(s/t)^t (its docstring has the proof). Within
  1e-4 of the exact value for t = 2 and inside a Monte Carlo interval at t = 50 (tests).
  (A closed-form add bound attributed to Dong, Chen & Özgür 2025, as transcribed from F&S's comparison
  code, fell BELOW the exact t = 2 value here, e.g. 0.550 < 0.569 at σ = 1, α = 2 — a transcription
  error or another relation — so it is not used.)
* An epoch costs the larger of the two directions; T steps are ⌈T/t⌉ epochs (the steps of a
  partial epoch are a post-processing of the whole epoch).

**k = t** (every record in every step): T Gaussian steps, α/(2σ²) each — exact.

**1 < k < t** (reduction to k = 1). The epoch's Gaussian pair is P_k = avg_{|S|=k} N(1_S, σ²I_t) against Q
(the allocation of the Gaussian randomizer: F&S 2025 analyse k-out-of-t allocation; their accountant and
dp_accounting PR #414 start from this pair for every k — the theorem's text for k > 1 was not retrieved). Write
t = (k − r)·a + r·(a + 1), a = ⌊t/k⌋, r = t mod k, and cut the t coordinates by a uniformly random ordered
partition π into k blocks of those sizes; one uniform coordinate from each block is a uniform k-subset
(its law is permutation-invariant and supported on k-subsets), so P_k = E_π P_π. Given π, (P_π, Q) is up to
a permutation of coordinates the product of k − r balls-in-bins pairs of a steps and r of a + 1 steps.
Q does not depend on π, so joint convexity of the hockey-stick divergence and of e^{(α−1)D_α} gives, in
both orders, D_α(P_k‖Q) ≤ (k − r)·D_α^{(a)} + r·D_α^{(a+1)} and the same for D_α(Q‖P_k), with D^{(m)} the
k = 1 bounds above (RDP of a product is the sum). This is the reduction Feldman & Shenfeld's code applies
(github moshenfeld/PLD_accounting at commit 952e91a, ``allocation_directional_PLD``: 1-out-of-⌊t/k⌋
composed k − r times and 1-out-of-⌈t/k⌉ composed r times; their earlier ``random_allocation`` package
composed k copies of ⌊t/k⌋); the proof here is self-contained given the k-out-of-t dominating pair.
Checked against the exact D_α(P_k‖Q) (integer α, exact expansion) for t ≤ 7 in the tests. The result is
also capped, order by order, by plain composition of the k·⌊T/t⌋ + min(k, T mod t) Gaussian releases
(both bounds are sound; the cap matters at small σ and for a short partial epoch).

Replace-one and group sizes > 1 are not covered (UnsupportedError from the dispatch).
Every value is rounded up by a relative 1e-9 plus 1e-13 to cover float64 rounding.
"""

from __future__ import annotations

import functools
import math

import torch
from torch import Tensor

from ..events import DPSGD
from ..sampling import Neighbouring, RandomAllocation

__all__ = [
    "MAX_EXACT_ORDER",
    "add_rdp_jensen",
    "add_rdp_quadrature",
    "blocks",
    "epoch_rdp_balls_in_bins",
    "epoch_rdp_random_allocation",
    "log_moments_remove",
    "register_handlers",
    "remove_rdp_balls_in_bins",
]

MAX_EXACT_ORDER = 512  # integer orders with the exact remove-direction moment
_REL, _ABS = 1e-9, 1e-13  # rounding margin (float64 log-space sums of ≤ 2·log2(t) convolutions)


def _log_mul(a: Tensor, b: Tensor) -> Tensor:
    """Log-coefficients of the product of two power series, truncated at their common length."""
    n = a.shape[0]
    i = torch.arange(n)
    idx = i[:, None] - i[None, :]  # row m, column j: b_{m−j}
    terms = a[None, :] + b[idx.clamp(min=0)]
    terms = terms.masked_fill(idx < 0, -math.inf)
    return torch.logsumexp(terms, dim=1)


@functools.lru_cache(maxsize=64)
def _log_moments(sigma: float, t: int, n_max: int) -> Tensor:
    a = torch.arange(n_max + 1, dtype=torch.float64)
    log_f = a * (a - 1) / (2 * sigma**2) - torch.lgamma(a + 1)
    result = torch.full_like(log_f, -math.inf)
    result[0] = 0.0
    base, e = log_f, t
    while e:
        if e & 1:
            result = _log_mul(result, base)
        e >>= 1
        if e:
            base = _log_mul(base, base)
    return torch.lgamma(a + 1) + result - a * math.log(t)


def log_moments_remove(sigma: float, t: int, n_max: int = MAX_EXACT_ORDER) -> Tensor:
    """log E_Q[(avg_j L_j)^m] for m = 0..n_max (exact up to float64 rounding), shape (n_max + 1,)."""
    return _log_moments(float(sigma), int(t), int(n_max)).clone()


def remove_rdp_balls_in_bins(orders: Tensor, sigma: float, t: int) -> Tensor:
    """Remove-direction RDP D_α(P‖Q) of one balls-in-bins epoch: exact at integer α ≤ 512, else a chord bound."""
    orders = torch.as_tensor(orders, dtype=torch.float64)
    gauss = orders / (2 * sigma**2)
    logm = log_moments_remove(sigma, t).to(orders.device)  # logm[m] = (m − 1) D_m
    n_max = logm.shape[0] - 1
    lo = torch.floor(orders).clamp(1, n_max - 1)
    hi = lo + 1
    w = (orders - lo).clamp(0.0, 1.0)
    c_lo = torch.where(lo <= 1, torch.zeros_like(lo), logm[lo.long()])
    chord = ((1 - w) * c_lo + w * logm[hi.long()]) / (orders - 1)
    inside = orders <= n_max
    exact = torch.where(inside, torch.minimum(chord, gauss), gauss)
    return exact.clamp(min=0.0)


def add_rdp_jensen(orders: Tensor, sigma: float, t: int) -> Tensor:
    """Add direction, k = 1: D_α(Q‖P) ≤ (α + t − 1)/(2tσ²) (Jensen; module docstring)."""
    return (orders + t - 1) / (2 * t * sigma**2)


# ------------------------------------------------------------------ add direction, certified quadrature

_Z_RANGE = 15.0  # trapezoid nodes on [-15, 15]: the omitted terms are >= 0, so leaving them out keeps a lower bound
_TW_EXPONENT = 90.0  # 2πa/h: the Trefethen-Weideman error factor is e^-90
_S_MIN, _S_MAX, _S_RATIO = 1e-12, 1e15, 1.01


def _log_phi_upper(u: Tensor, sigma: float) -> Tensor:
    """Upper bound on log φ(u), φ(u) = E exp(−u L), L = exp(Z/σ − 1/(2σ²)), Z ~ N(0, 1).

    1 − φ(u) = ∫ (1 − exp(−u e^{z/σ − c})) ϕ(z) dz is bounded BELOW by the truncated trapezoid sum
    (non-negative terms) minus the Trefethen & Weideman 2014 (SIAM Rev., Thm 5.1) error 2M/(e^{2πa/h} − 1):
    in the strip |Im z| < a ≤ πσ/2 the exponent keeps a non-negative real part, so |integrand| ≤ 2ϕ(x)e^{a²/2}
    and M ≤ 2e^{a²/2}. φ itself is bounded ABOVE the same way (M ≤ e^{a²/2}, plus the omitted tail ≤ 1e-45).
    """
    a = min(math.pi * sigma / 2, 4.0)
    h = 2 * math.pi * a / _TW_EXPONENT
    z = torch.arange(-math.ceil(_Z_RANGE / h), math.ceil(_Z_RANGE / h) + 1, dtype=torch.float64) * h
    w = h * torch.exp(-0.5 * z**2) / math.sqrt(2 * math.pi)
    x = u[:, None] * torch.exp(z / sigma - 0.5 / sigma**2)[None, :]
    tw = 2 * math.exp(a * a / 2) / math.expm1(_TW_EXPONENT)
    one_minus = (-torch.expm1(-x) * w).sum(-1) * (1 - 1e-10) - 2 * tw  # 1e-10: summation of ≤ 3e4 terms
    phi_direct = (torch.exp(-x) * w).sum(-1) * (1 + 1e-10) + tw + 1e-45
    log_phi = torch.minimum(torch.log1p(-one_minus.clamp(0.0, 1.0)), torch.log(phi_direct)).clamp(max=0.0)
    # Large u: φ(u) ≤ P(L ≤ e^y) + exp(−u e^y) for every y (the floor of the quadrature bound is ~1e-39).
    y = torch.linspace(-80.0, 5.0, 171, dtype=torch.float64)
    log_cdf = torch.special.log_ndtr(sigma * (y + 0.5 / sigma**2))
    chernoff = torch.logaddexp(log_cdf[None, :], -u[:, None] * torch.exp(y)[None, :]).amin(-1) + 1e-9
    return torch.minimum(log_phi, chernoff)


@functools.lru_cache(maxsize=32)
def _log_psi_grid(sigma: float, t: int) -> tuple[Tensor, Tensor]:
    """Grid s_i and upper bounds on log ψ(s_i), ψ(s) = E exp(−s A) = φ(s/t)^t, A = avg_j L_j."""
    n = math.ceil(math.log(_S_MAX / _S_MIN) / math.log(_S_RATIO))
    s = _S_MIN * torch.exp(torch.arange(n + 1, dtype=torch.float64) * math.log(_S_RATIO))
    nodes = 2 * _Z_RANGE * _TW_EXPONENT / (2 * math.pi * min(math.pi * sigma / 2, 4.0))
    chunk = max(16, int(4e6 / nodes))  # ≤ ~4e6 elements per temporary (small σ needs many nodes)
    log_psi = torch.cat([t * _log_phi_upper(c, sigma) for c in torch.split(s / t, chunk)])
    return s, log_psi


def _log_tail(beta: Tensor, sigma: float, t: int, s_max: float) -> Tensor:
    """log of an upper bound on E[A^−β Q(β, s_max A)] (the part of E[A^−β] from s > s_max).

    A ≥ G = exp(Y), Y ~ N(μ, v), μ = −1/(2σ²), v = 1/(tσ²) (AM ≥ GM), both factors decrease in A; split
    at G = g0: g0^−β Q(β, s_max g0) + E[G^−β; G < g0] = ... + e^{−βμ + β²v/2} Φ((log g0 − μ + βv)/√v).
    """
    mu, v = -0.5 / sigma**2, 1.0 / (t * sigma**2)
    log_scale = -beta * mu + beta**2 * v / 2
    zq = torch.sqrt(2 * (log_scale.clamp(min=0) + 40.0))
    log_g0 = mu - beta * v - zq * math.sqrt(v)
    first = -beta * log_g0 + _log_q_upper(beta, s_max * torch.exp(log_g0))
    second = log_scale + torch.special.log_ndtr(-zq) + 1e-6
    return torch.logaddexp(first, second)


def _log_q_upper(a: Tensor, x: Tensor) -> Tensor:
    """log of an upper bound on Q(a, x) = Γ(a, x)/Γ(a), a ≥ 1: log s ≤ log x + (s − x)/x under the integral gives
    Γ(a, x) ≤ x^{a−1} e^{−x} x/(x − a + 1) for x > a − 1; otherwise Q ≤ 1."""
    ok = x > a
    xs = torch.where(ok, x, a + 1)
    bound = (a - 1) * torch.log(xs) - xs + torch.log(xs / (xs - a + 1)) - torch.lgamma(a)
    return torch.where(ok, bound.clamp(max=0.0), torch.zeros_like(bound))


def add_rdp_quadrature(orders: Tensor, sigma: float, t: int) -> Tensor:
    """Add direction, k = 1: certified upper bound on D_α(Q‖P) = log E_Q[A^{−(α−1)}]/(α−1).

    E[A^−β] = (1/Γ(β)) ∫_0^∞ s^{β−1} ψ(s) ds (Laplace transform of x^−β). On each geometric bin of s,
    ψ ≤ the chord of log ψ through the upper bounds at the bin ends (ψ is log-convex: an MGF) and
    s^{β−1} ≤ its tangent at the bin's geometric mean (log-concave for β ≥ 1), so the bin's integral is
    bounded in closed form; [0, 1e-12] adds ≤ s^β/Γ(β+1), (1e15, ∞) is :func:`_log_tail`. Orders in (1, 2)
    take the value at 2 (D_α is non-decreasing in α). +inf where the bound is not finite.
    """
    orders = torch.as_tensor(orders, dtype=torch.float64)
    beta = (orders.clamp(min=2.0) - 1)[:, None]
    s, lp = _log_psi_grid(float(sigma), int(t))
    lo, hi, l_lo, l_hi = s[:-1], s[1:], lp[:-1], lp[1:]
    width = hi - lo
    m = torch.sqrt(lo * hi)
    slope = (beta - 1) / m + (l_hi - l_lo) / width
    c = (beta - 1) * (torch.log(m) + (lo - m) / m) + l_lo
    xw = slope * width
    log_ratio = torch.where(xw.abs() < 1e-8, xw / 2, torch.log(torch.expm1(xw) / xw))
    log_bins = c + torch.log(width) + log_ratio - torch.lgamma(beta)
    b = beta[:, 0]
    head = b * math.log(_S_MIN) - torch.lgamma(b + 1)
    parts = torch.cat([log_bins, head[:, None], _log_tail(b, sigma, t, _S_MAX)[:, None]], dim=1)
    log_m = torch.logsumexp(parts, dim=1) + 1e-10
    out = log_m.clamp(min=0.0) / b
    return torch.where(torch.isfinite(out), out, torch.full_like(out, math.inf))


def epoch_rdp_balls_in_bins(orders: Tensor, sigma: float, t: int) -> Tensor:
    """One balls-in-bins epoch (k = 1): max(remove, add), rounded up."""
    orders = torch.as_tensor(orders, dtype=torch.float64)
    rem = remove_rdp_balls_in_bins(orders, sigma, t)
    add = torch.minimum(add_rdp_jensen(orders, sigma, t), add_rdp_quadrature(orders, sigma, t))
    return torch.maximum(rem, add) * (1 + _REL) + _ABS


def blocks(t: int, k: int) -> tuple[tuple[int, int], ...]:
    """The k-of-t reduction (module doc): ((block size, how many blocks), …), sizes ⌊t/k⌋ and ⌈t/k⌉.

    >>> blocks(100, 2), blocks(10, 3), blocks(7, 1)
    (((50, 2),), ((3, 2), (4, 1)), ((7, 1),))
    """
    a, r = divmod(t, k)
    return tuple((size, count) for size, count in ((a, k - r), (a + 1, r)) if count)


def _add_rdp(orders: Tensor, sigma: float, t: int) -> Tensor:
    return torch.minimum(add_rdp_jensen(orders, sigma, t), add_rdp_quadrature(orders, sigma, t))


def epoch_rdp_random_allocation(orders: Tensor, sigma: float, t: int, k: int) -> Tensor:
    """One epoch of k-of-t random allocation: each direction summed over the blocks of :func:`blocks`, then
    the larger direction, rounded up (k = 1: :func:`epoch_rdp_balls_in_bins`)."""
    orders = torch.as_tensor(orders, dtype=torch.float64)
    parts = blocks(int(t), int(k))
    rem = sum(c * remove_rdp_balls_in_bins(orders, sigma, m) for m, c in parts)
    add = sum(c * _add_rdp(orders, sigma, m) for m, c in parts)
    assert isinstance(rem, Tensor) and isinstance(add, Tensor)
    return torch.maximum(rem, add) * (1 + _REL) + _ABS


def _epochs(steps: int, t: int) -> int:
    return -(-steps // t)


def _handler(spec: DPSGD, orders: Tensor) -> tuple[Tensor, str]:
    """Per-step RDP such that ``steps ×`` it bounds the whole run (the dispatch multiplies by steps)."""
    s: RandomAllocation = spec.sampling  # type: ignore[assignment]
    sigma, t, k, steps = spec.noise_multiplier, s.steps_per_epoch, s.k, spec.steps
    gauss = orders / (2 * sigma**2)
    if k == t:
        return gauss, "random allocation with k = t: every step a Gaussian release (exact)"
    if k > 1:
        epochs = _epochs(steps, t)
        releases = k * (steps // t) + min(k, steps % t)
        amplified = epochs * epoch_rdp_random_allocation(orders.cpu(), sigma, t, k).to(orders)
        total = torch.minimum(amplified, releases * gauss)
        parts = " + ".join(f"{c}×{m}" for m, c in blocks(t, k))
        thm = (f"random allocation k={k} of t={t}, {epochs} epoch{'s' if epochs != 1 else ''}: each epoch ≤ "
               f"balls-in-bins over blocks of {parts} steps composed (uniform k-subset = one step per block of a "
               "random partition; joint convexity; Feldman-Shenfeld 2025 exact remove RDP, certified add "
               f"quadrature), capped order-wise by {releases} Gaussian releases composed")
    else:
        epochs = _epochs(steps, t)
        total = epochs * epoch_rdp_balls_in_bins(orders.cpu(), sigma, t).to(orders)
        thm = (f"balls-in-bins (random allocation, k=1 of t={t}), {epochs} epoch{'s' if epochs != 1 else ''}: "
               "Feldman-Shenfeld 2025 exact remove RDP; add: certified Laplace-transform quadrature")
    per_step = torch.nextafter(total / steps, torch.full_like(total, math.inf))
    return per_step, thm


def register_handlers(register) -> None:
    """Register the random-allocation handler (add/remove only) with the RDP dispatch table."""
    register(RandomAllocation, Neighbouring.ADD_REMOVE, _handler)
