"""FFT composition of discretised steps and the certified bracket on δ(ε) and ε(δ).

Composition. One ordered direction is composed over all its steps (heterogeneous parts allowed:
Π_i φ_i^{T_i} of the parts' discrete Fourier transforms) with one real FFT of length N in
float64 on the device of the step PMFs. The window of N lattice points is chosen by a Chernoff
bound computed from the exact discrete moment generating functions, so that at most γ of mass
lies below and at most γ above it; that mass wraps around (circular convolution) and is paid
for in the bracket.

Certificate (one ordered direction, T steps, lattice spacing h). Let S = ΣY_i be the true
composed loss, S̃ = ΣỸ_i the discretised one, e_i = Ỹ_i − Y_i outside the truncation event E
(e_i = 0 on it) with E[e_i] = μ_i ∈ [μ_lo, μ_hi] and e_i in an interval of length h. With
f_ε(s) = (1 − e^{ε−s})_+, δ(ε) = E f_ε(S) (pairs: Zhu-Dong-Wang 2022 Thm 10). Hoeffding (1963,
Thm 2) gives P(|Σ(e_i − μ_i)| ≥ t) ≤ β for t = h·√(T·log(1/β)/2), and f is monotone in s, so

    δ(ε) ≤ δ̃(ε + Σμ_lo − t) + β + 2γ + r                      (upper; the tails are coupled
    δ(ε) ≥ δ̃(ε + Σμ_hi + t) − β − 2γ − P(E) − r                 monotonically, see discretise)

with δ̃ the profile of the computed discrete distribution and r an allowance for FFT round-off
(ten times N times the largest negative entry of the computed PMF, whose true entries are ≥ 0).
This is the argument of Gopi, Lee, Wutschitz (arXiv:2106.02848v6, Thm 5.5) with the tails and
the mean shift handled explicitly. ε(δ) brackets follow by inverting both sides exactly: δ̃ is
piecewise of the form a − b·e^x between lattice points.

Caveat (documented, not certified): float64 round-off in the CDF differences of the bin masses
(≲ n·2⁻⁵³ per step in total variation, in practice far smaller) is not part of r.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from .discretise import DiscreteStep

__all__ = ["ComposedPLD", "compose", "fast_length"]


def fast_length(n: int) -> int:
    """The smallest m ≥ n whose prime factors are 2, 3 and 5 (fast FFT sizes)."""
    best = 1 << max(0, (n - 1).bit_length())
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            m = p35
            while m < n:
                m *= 2
            best = min(best, m)
            p35 *= 3
        p5 *= 5
    return best


@dataclass(frozen=True)
class ComposedPLD:
    """The composed discrete privacy loss of one ordered direction, with its certificate.

    ``pmf[i]`` is the mass at (k_start + i)·h. δ_upper(ε) = δ̃(ε + shift_lo) + slack_up and
    δ_lower(ε) = δ̃(ε + shift_hi) − slack_low (module docstring).
    """

    k_start: int
    pmf: Tensor
    h: float
    p_inf: float
    steps: int
    shift_lo: float
    shift_hi: float
    slack_up: float
    slack_low: float
    _tail: Tensor          # A_i = Σ_{j ≥ i} pmf_j                (N + 1,), A_N = 0
    _log_tail_exp: Tensor  # log Σ_{j ≥ i} pmf_j e^{−s_j}         (N + 1,), −inf at N

    @property
    def support(self) -> Tensor:
        """The lattice values s_i = (k_start + i)·h of ``pmf``."""
        return (self.k_start + torch.arange(self.pmf.numel(), dtype=self.pmf.dtype, device=self.pmf.device)) * self.h

    def delta_tilde(self, x: Tensor) -> Tensor:
        """δ̃(x) = p_inf + Σ_{s_i > x} pmf_i (1 − e^{x − s_i}) at every entry of x."""
        s = self.support
        i = torch.searchsorted(s, x.contiguous(), right=True)
        a = self._tail[i]
        b = torch.exp(torch.clamp(x + self._log_tail_exp[i], max=700.0))
        return torch.clamp(self.p_inf + a - b, min=0.0)

    def solve(self, target: float) -> float:
        """The x with δ̃(x) = target (δ̃ is continuous and non-increasing); ±inf at the ends."""
        if target <= self.p_inf:
            return math.inf
        total = self.p_inf + float(self._tail[0])
        if target >= total:
            return -math.inf
        s = self.support
        # D_i = δ̃(s_i); find the last i with D_i ≥ target, then solve on [s_i, s_{i+1}).
        d = self.p_inf + self._tail[1:] - torch.exp(torch.clamp(s + self._log_tail_exp[1:], max=700.0))
        below = d < target
        i = int(torch.argmax(below.to(torch.int8))) if bool(below.any()) else d.numel()
        # i = first grid point with D < target; the root lies in [s_{i-1}, s_i) (or before s_0).
        a = self.p_inf + float(self._tail[i])
        return math.log(a - target) - float(self._log_tail_exp[i])

    def delta_upper(self, eps: Tensor) -> Tensor:
        """Certified upper bound on δ(ε) of this direction."""
        return torch.clamp(self.delta_tilde(eps + self.shift_lo) + self.slack_up, max=1.0)

    def delta_lower(self, eps: Tensor) -> Tensor:
        """Certified lower bound on δ(ε) of this direction."""
        return torch.clamp(self.delta_tilde(eps + self.shift_hi) - self.slack_low, min=0.0)

    def epsilon_upper(self, delta: float) -> float:
        """Certified upper bound on ε(δ) = inf{ε ≥ 0: δ(ε) ≤ δ} of this direction."""
        target = delta - self.slack_up
        if target <= 0.0:
            return math.inf
        return max(0.0, self.solve(target) - self.shift_lo)

    def epsilon_lower(self, delta: float) -> float:
        """Certified lower bound on ε(δ) of this direction."""
        return max(0.0, self.solve(delta + self.slack_low) - self.shift_hi)


def _log_mgf(step: DiscreteStep, lam: Tensor) -> Tensor:
    """log Σ_j pmf_j e^{λ l_j} for every λ (the finite part; a sub-probability)."""
    pmf = step.pmf
    l = (step.k_lo + torch.arange(pmf.numel(), dtype=pmf.dtype, device=pmf.device)) * step.h
    logp = torch.log(pmf)
    return torch.logsumexp(logp[None, :] + lam[:, None] * l[None, :], dim=1)


def _window(steps: list[tuple[DiscreteStep, int]], gamma: float) -> tuple[int, int]:
    """Lattice indices [k_a, k_b] with P(S̃ < k_a·h) ≤ γ and P(S̃ > k_b·h) ≤ γ (Chernoff)."""
    h = steps[0][0].h
    mean = 0.0
    var = 0.0
    for st, t in steps:
        pmf = st.pmf
        mass = float(pmf.sum())
        l = (st.k_lo + torch.arange(pmf.numel(), dtype=pmf.dtype, device=pmf.device)) * h
        m1 = float((pmf * l).sum()) / mass
        m2 = float((pmf * (l - m1) ** 2).sum()) / mass
        mean += t * m1
        var += t * m2
    log_gamma = math.log(gamma)
    lam_star = math.sqrt(2.0 * -log_gamma / max(var, h * h))
    device = steps[0][0].pmf.device
    lam = lam_star * torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64, device=device)
    k_pos = torch.zeros_like(lam)
    k_neg = torch.zeros_like(lam)
    for st, t in steps:
        k_pos = k_pos + t * _log_mgf(st, lam)
        k_neg = k_neg + t * _log_mgf(st, -lam)
    upper = float(torch.min((k_pos - log_gamma) / lam))   # P(S̃ ≥ B) ≤ e^{K(λ) − λB} ≤ γ
    lower = float(torch.max((log_gamma - k_neg) / lam))   # P(S̃ ≤ A) ≤ e^{K(−λ) + λA} ≤ γ
    upper = max(upper, mean)
    lower = min(lower, mean)
    return math.floor(lower / h) - 1, math.ceil(upper / h) + 1


def compose(
    steps: list[tuple[DiscreteStep, int]], beta: float, gamma: float, window: tuple[int, int] | None = None
) -> ComposedPLD:
    """Compose discretised steps (each ``(step, count)``) of one ordered direction by FFT.

    Args:
        steps: the parts, all on the same lattice spacing h and device.
        beta: the Hoeffding failure probability (an additive δ slack).
        gamma: the window's tail mass on each side (an additive δ slack, ×2).
        window: ``_window(steps, gamma)`` when the caller has it already.

    Returns:
        A :class:`ComposedPLD` carrying the certified bracket.
    """
    h = steps[0][0].h
    device = steps[0][0].pmf.device
    total_steps = sum(t for _, t in steps)
    k_a, k_b = _window(steps, gamma) if window is None else window
    n = fast_length(k_b - k_a + 1)
    spectrum = torch.ones(n // 2 + 1, dtype=torch.complex128, device=device)
    k0 = 0
    for st, t in steps:
        arr = torch.zeros(n, dtype=torch.float64, device=device)
        idx = torch.arange(st.pmf.numel(), device=device) % n   # fold a long step PMF (circular)
        arr.index_add_(0, idx, st.pmf)
        spectrum = spectrum * torch.pow(torch.fft.rfft(arr), t)
        k0 += t * st.k_lo
    circ = torch.fft.irfft(spectrum, n=n)
    j_a = k_a - k0
    pmf = torch.roll(circ, shifts=-(j_a % n))
    noise = max(0.0, -float(pmf.min()))
    fft_allow = 10.0 * n * noise
    pmf = torch.clamp(pmf, min=0.0)
    s = (k_a + torch.arange(n, dtype=torch.float64, device=device)) * h
    zero = torch.zeros(1, dtype=torch.float64, device=device)
    tail = torch.cat([torch.flip(torch.cumsum(torch.flip(pmf, [0]), 0), [0]), zero])
    if n * h < 600.0:
        # Σ_{j≥i} p_j e^{−s_j} = e^{−s_0} Σ_{j≥i} p_j e^{s_0 − s_j}: no overflow, no underflow.
        scaled = torch.flip(torch.cumsum(torch.flip(pmf * torch.exp(s[0] - s), [0]), 0), [0])
        log_tail_exp = torch.cat([torch.log(scaled) - s[0], torch.full_like(zero, -math.inf)])
    else:
        logterms = torch.log(pmf) - s
        log_tail_exp = torch.cat(
            [torch.flip(torch.logcumsumexp(torch.flip(logterms, [0]), 0), [0]), torch.full_like(zero, -math.inf)]
        )
    t_hoeff = h * math.sqrt(total_steps * math.log(1.0 / beta) / 2.0)
    mu_lo = sum(t * st.mu_lo for st, t in steps)
    mu_hi = sum(t * st.mu_hi for st, t in steps)
    p_inf = -math.expm1(sum(t * math.log1p(-st.p_inf) for st, t in steps))
    p_trunc = min(1.0, sum(t * st.p_trunc for st, t in steps))
    return ComposedPLD(
        k_start=k_a,
        pmf=pmf,
        h=h,
        p_inf=p_inf,
        steps=total_steps,
        shift_lo=mu_lo - t_hoeff,
        shift_hi=mu_hi + t_hoeff,
        slack_up=beta + 2.0 * gamma + fft_allow,
        slack_low=beta + 2.0 * gamma + p_trunc + fft_allow,
        _tail=tail,
        _log_tail_exp=log_tail_exp,
    )
