"""FFT composition of discretised steps and the certified bracket on δ(ε) and ε(δ).

One ordered direction is composed over all its steps (heterogeneous parts: Π_i φ_i^{T_i} of the
parts' discrete Fourier transforms) by one batched real FFT of length N in float64 on the device
of the step PMFs; three PMFs are composed at once: the pessimistic one (upper bound) and the
test statistic under P and under Q (lower bound), see :mod:`.discretise`.

Window and wrap-around. The N lattice points are chosen by Chernoff bounds from the exact
discrete moment generating functions, so that the mass of each composed PMF outside the window
is bounded (γ's below); that mass wraps around in the circular convolution. With A_P, A_Q the
computed masses of {S̃ ≥ s_i} under P and Q,

    δ(ε) ≤ δ̃_up(ε) + γ_up + r_up                                    (upper)
    δ(ε) ≥ max_i [A_P(i) − γ_P − r_P − e^ε (A_Q(i) + γ_Q + r_Q)]      (lower)

where γ_up bounds the pessimistic mass outside the window (both sides), γ_P the P-mass outside
the window, γ_Q the Q-mass above it, and r an allowance for FFT round-off: ten times the largest
negative entry of the computed PMF (whose true entries are ≥ 0) per entry, summed over the
entries of each tail sum; on the Q side weighted by e^{−s_j} (tilted composition).
This allowance is an estimate of the float64 FFT error, not a proof (documented caveat). Both sides are
inverted exactly for ε(δ): δ̃_up is piecewise a − b·e^x between lattice points, and the lower
bound is a maximum of lines in e^ε.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from .discretise import DiscreteStep

__all__ = ["ComposedPLD", "compose", "fast_length", "window"]


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


def _power(z: Tensor, t: int) -> Tensor:
    """z**t for a spectrum; entries with |z|^t below 1e-300 are set to 0 without computing them
    (they are below float64's normal range anyway, and denormals make torch.pow slow)."""
    keep = torch.log(z.abs()) * t > -690.0
    out = torch.zeros_like(z)
    out[keep] = torch.pow(z[keep], t)
    return out


def _rev_cumsum(x: Tensor) -> Tensor:
    """out[i] = Σ_{j ≥ i} x[j], with out[N] = 0 appended."""
    z = torch.zeros(1, dtype=x.dtype, device=x.device)
    return torch.cat([torch.flip(torch.cumsum(torch.flip(x, [0]), 0), [0]), z])


def _log_rev_exp_tail(x: Tensor, s: Tensor) -> Tensor:
    """log Σ_{j≥i} x_j e^{−s_j} (x ≥ 0), with −inf appended at i = N."""
    if float(s[-1] - s[0]) < 600.0:
        # = log(Σ_{j≥i} x_j e^{s_0 − s_j}) − s_0: no overflow, no underflow.
        return torch.log(_rev_cumsum(x * torch.exp(s[0] - s))) - s[0]
    terms = torch.log(x) - s
    rev = torch.flip(torch.logcumsumexp(torch.flip(terms, [0]), 0), [0])
    return torch.cat([rev, torch.full((1,), -math.inf, dtype=x.dtype, device=x.device)])


def _rev_exp_tail(x: Tensor, s: Tensor) -> Tensor:
    """Σ_{j≥i} x_j e^{−s_j}, with 0 appended at i = N."""
    return torch.exp(_log_rev_exp_tail(x, s))


@dataclass(frozen=True)
class ComposedPLD:
    """The composed discrete PLDs of one ordered direction, with the certificate.

    Entry i of every array is the lattice point s_i = (k_start + i)·h.
    """

    k_start: int
    h: float
    p_inf: float
    slack_up: float        # γ_up: pessimistic mass outside the window
    slack_p: float         # γ_P: P-mass outside the window
    noise_up: float        # per-entry FFT round-off allowance, pessimistic PMF
    noise_p: float         # per-entry FFT round-off allowance, P-PMF of the test statistic
    _tail: Tensor          # Σ_{j ≥ i} up_j                  (N + 1,)
    _log_tail_exp: Tensor  # log Σ_{j ≥ i} up_j e^{−s_j}     (N + 1,)
    _tail_p: Tensor        # P(S̃ ≥ s_i) (computed)           (N + 1,)
    _tail_q: Tensor        # upper bound on Q(S̃ ≥ s_i)        (N + 1,)

    @property
    def points(self) -> int:
        return self._tail.numel() - 1

    @property
    def support(self) -> Tensor:
        """The lattice values s_i = (k_start + i)·h."""
        return (self.k_start + torch.arange(self.points, dtype=torch.float64, device=self._tail.device)) * self.h

    # ---- upper -------------------------------------------------------------------------------
    def delta_tilde(self, x: Tensor) -> Tensor:
        """δ̃_up(x) = p_inf + Σ_{s_i > x} up_i (1 − e^{x − s_i}) at every entry of x."""
        i = torch.searchsorted(self.support, x.contiguous(), right=True)
        b = torch.exp(torch.clamp(x + self._log_tail_exp[i], max=700.0))
        return torch.clamp(self.p_inf + self._tail[i] - b, min=0.0)

    def _noise_above(self, x: Tensor) -> Tensor:
        """Round-off allowance of the pessimistic tail sum over the entries s_j > x."""
        i = torch.searchsorted(self.support, x.contiguous(), right=True)
        return (self.points - i).to(torch.float64) * self.noise_up

    def solve(self, target: float) -> float:
        """The x with δ̃_up(x) = target (continuous, non-increasing); ±inf at the ends."""
        if target <= self.p_inf:
            return math.inf
        if target >= self.p_inf + float(self._tail[0]):
            return -math.inf
        s = self.support
        d = self.p_inf + self._tail[1:] - torch.exp(torch.clamp(s + self._log_tail_exp[1:], max=700.0))
        # The round-off allowance over the active entries is added to δ̃ before comparing.
        n = self.points
        d = d + (n - 1 - torch.arange(n, device=d.device)).to(d.dtype) * self.noise_up
        below = d < target
        if not bool(below.any()):
            return math.inf
        i = int(torch.argmax(below.to(torch.int8)))
        # i: first lattice point with δ̃_up + r < target; on [s_{i−1}, s_i) the active set is {j ≥ i}.
        rest = self.p_inf + float(self._tail[i]) + (n - i) * self.noise_up - target
        if rest <= 0.0:
            return float(s[i - 1]) if i > 0 else -math.inf
        return math.log(rest) - float(self._log_tail_exp[i])

    def delta_upper(self, eps: Tensor) -> Tensor:
        """Certified upper bound on δ(ε) of this direction."""
        return torch.clamp(self.delta_tilde(eps) + self._noise_above(eps) + self.slack_up, max=1.0)

    def epsilon_upper(self, delta: float) -> float:
        """Certified upper bound on ε(δ) = inf{ε ≥ 0 : δ(ε) ≤ δ} of this direction."""
        target = delta - self.slack_up
        if target <= 0.0:
            return math.inf
        return max(0.0, self.solve(target))

    # ---- lower -------------------------------------------------------------------------------
    def _noise_p_tail(self) -> Tensor:
        n = self.points
        return (n - torch.arange(n + 1, device=self._tail_p.device)).to(torch.float64) * self.noise_p

    def delta_lower(self, eps: Tensor, chunk: int = 1 << 22) -> Tensor:
        """Certified lower bound on δ(ε) of this direction (best threshold test)."""
        a = self._tail_p - self.slack_p - self._noise_p_tail()
        b = self._tail_q
        flat = eps.reshape(-1)
        out = torch.empty_like(flat)
        step = max(1, chunk // a.numel())
        for j in range(0, flat.numel(), step):
            e = torch.exp(flat[j : j + step])[:, None]
            out[j : j + step] = torch.clamp((a[None, :] - e * b[None, :]).amax(1), min=0.0)
        return out.reshape(eps.shape)

    def epsilon_lower(self, delta: float) -> float:
        """Certified lower bound on ε(δ): δ_lower(ε) ≤ δ ⇔ ε ≥ max_i log((A_P − δ)/A_Q)."""
        num = self._tail_p - self.slack_p - self._noise_p_tail() - delta
        ok = num > 0
        if not bool(ok.any()):
            return 0.0
        den = self._tail_q
        vals = torch.where(ok, torch.log(torch.where(ok, num, 1.0)) - torch.log(den), -math.inf)
        return max(0.0, float(vals.max()))


def _chernoff(
    pmfs: list[tuple[Tensor, int, int]], h: float, lo: float, hi: float
) -> tuple[float, float]:
    """Bounds on the composed mass below ``lo`` and above ``hi`` (a sub-probability is fine):
    P(S ≥ b) ≤ e^{K(λ) − λb}, P(S ≤ a) ≤ e^{K(−λ) + λa}, K = Σ T_i log M_i, at ten λ's per side
    (2⁻⁸…2 times the Gaussian optimum: heavy right tails need small λ)."""
    device = pmfs[0][0].device
    prepared = []
    mean = var = 0.0
    for pmf, k_lo, t in pmfs:
        l = (k_lo + torch.arange(pmf.numel(), dtype=pmf.dtype, device=device)) * h
        mass = float(pmf.sum())
        m1 = float((pmf * l).sum()) / mass
        mean += t * m1
        var += t * float((pmf * (l - m1) ** 2).sum()) / mass
        prepared.append((torch.log(pmf), l, t))
    sd = math.sqrt(max(var, h * h))
    scale = 2.0 ** torch.arange(-8.0, 2.0, dtype=torch.float64, device=device)
    lams = []
    for sign, edge in ((-1.0, lo), (1.0, hi)):
        dist = max(sign * (edge - mean), sd)
        lams.append(sign * (dist / (sd * sd)) * scale)
    lam = torch.cat(lams)                                   # (20,): ten negative, ten positive
    k = sum(t * torch.logsumexp(logp[None, :] + lam[:, None] * l[None, :], dim=1) for logp, l, t in prepared)
    edge = torch.cat([torch.full((10,), lo, dtype=torch.float64, device=device),
                      torch.full((10,), hi, dtype=torch.float64, device=device)])
    log_bound = k - lam * edge
    below = math.exp(min(0.0, float(log_bound[:10].min())))
    above = math.exp(min(0.0, float(log_bound[10:].min())))
    return below, above


def _moments(steps: list[tuple[DiscreteStep, int]], which: str) -> tuple[float, float]:
    h = steps[0][0].h
    mean = var = 0.0
    for st, t in steps:
        pmf = getattr(st, which)
        l = (st.k_lo + torch.arange(pmf.numel(), dtype=pmf.dtype, device=pmf.device)) * h
        mass = float(pmf.sum())
        m1 = float((pmf * l).sum()) / mass
        mean += t * m1
        var += t * float((pmf * (l - m1) ** 2).sum()) / mass
    return mean, math.sqrt(max(var, h * h))


_WHICH = ("upper", "lower_p", "lower_q_tilted")


def _tails(steps: list[tuple[DiscreteStep, int]], k_a: int, n: int) -> list[tuple[float, float]]:
    """Certified (below, above) composed masses outside lattice indices [k_a, k_a + n) per PMF."""
    h = steps[0][0].h
    lo_edge, hi_edge = (k_a - 0.5) * h, (k_a + n - 0.5) * h
    return [_chernoff([(getattr(st, w), st.k_lo, t) for st, t in steps], h, lo_edge, hi_edge) for w in _WHICH]


Window = tuple[int, int, list[tuple[float, float]]]


def window(steps: list[tuple[DiscreteStep, int]], gamma: float) -> Window:
    """Lattice indices [k_a, k_b] outside which every composed PMF has certified mass ≤ γ per
    side (Gaussian start, widened until the Chernoff bounds hold; at most 12 widenings), and the
    certified (below, above) masses of the three PMFs for that window."""
    h = steps[0][0].h
    z = math.sqrt(2.0 * math.log(1.0 / gamma)) + 1.0
    stats = [_moments(steps, w) for w in _WHICH]
    lo = min(m - z * sd for m, sd in stats)
    hi = max(m + z * sd for m, sd in stats)
    for _ in range(12):
        k_a, k_b = math.floor(lo / h) - 1, math.ceil(hi / h) + 1
        tails = _tails(steps, k_a, k_b - k_a + 1)
        below = max(b for b, _ in tails)
        above = max(a for _, a in tails)
        if below <= gamma and above <= gamma:
            break
        span = hi - lo
        lo -= 0.5 * span if below > gamma else 0.0
        hi += 0.5 * span if above > gamma else 0.0
    return k_a, k_b, tails


def compose(steps: list[tuple[DiscreteStep, int]], gamma: float, win: Window | None = None) -> ComposedPLD:
    """Compose discretised steps (each ``(step, count)``) of one ordered direction by FFT.

    Args:
        steps: the parts, all on the same lattice spacing h and device.
        gamma: target tail mass outside the window (the certified masses are computed and paid).
        win: ``window(steps, gamma)`` when the caller has it already.

    Returns:
        A :class:`ComposedPLD` carrying the certified bracket.
    """
    h = steps[0][0].h
    device = steps[0][0].upper.device
    k_a, k_b, tails = window(steps, gamma) if win is None else win
    n = fast_length(k_b - k_a + 1)
    k_a = k_b + 1 - n        # use the whole FFT length; extending downwards keeps ``tails`` valid
    spectrum = torch.ones(3, n // 2 + 1, dtype=torch.complex128, device=device)
    k0 = 0
    for st, t in steps:
        # Centre the step at index 0 (its mean lattice point): the spectrum then has a small
        # phase, and the T-th power does not multiply a large phase's round-off by T.
        pmf3 = torch.stack([st.upper, st.lower_p, st.lower_q_tilted])
        lat = st.k_lo + torch.arange(st.upper.numel(), device=device)
        centre = round(float((st.lower_p * lat.to(torch.float64)).sum()))
        arr = torch.zeros(3, n, dtype=torch.float64, device=device)
        arr.index_add_(1, (lat - centre) % n, pmf3)               # circular; folds long PMFs
        spectrum = spectrum * _power(torch.fft.rfft(arr, dim=1), t)
        k0 += t * centre
    circ = torch.fft.irfft(spectrum, n=n, dim=1)
    pmf = torch.roll(circ, shifts=-((k_a - k0) % n), dims=1)   # pmf[:, i] ↔ lattice k_a + i
    # FFT round-off allowance: per entry ten times the largest negative entry (true entries ≥ 0).
    per_entry = torch.clamp(-pmf.amin(1), min=0.0) * 10.0
    pmf = torch.clamp(pmf, min=0.0)
    up, pp, qt = pmf[0], pmf[1], pmf[2]
    r_up, r_p, r_q = (float(v) for v in per_entry)
    # Certified out-of-window masses of the three composed PMFs (Chernoff, exact discrete MGFs).
    (u_lo, u_hi), (gp_lo, gp_hi), (_, gq_hi) = tails
    s = (k_a + torch.arange(n, dtype=torch.float64, device=device)) * h
    # Q-masses from the tilted composition: Q̃^{*T}(s) = e^{−s}·(q e^l)^{*T}(s) (exact identity).
    # A_Q(i) ≤ Σ_{j≥i} e^{−s_j}(qt_j + r_q) + e^{−b}·γ_q above the window edge b.
    hi_edge = (k_a + n - 0.5) * h
    tail_q = _rev_exp_tail(qt + r_q, s) + math.exp(-hi_edge) * gq_hi
    p_inf = -math.expm1(sum(t * math.log1p(-st.p_inf) for st, t in steps))
    return ComposedPLD(
        k_start=k_a,
        h=h,
        p_inf=p_inf,
        slack_up=u_lo + u_hi,
        slack_p=gp_lo + gp_hi,
        noise_up=r_up,
        noise_p=r_p,
        _tail=_rev_cumsum(up),
        _log_tail_exp=_log_rev_exp_tail(up, s),
        _tail_p=_rev_cumsum(pp),
        _tail_q=tail_q,
    )
