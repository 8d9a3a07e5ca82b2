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
the window, γ_Q the Q-mass above it, and r the float64 round-off of the FFT composition: a
bound R ≥ ‖computed − exact‖₂ per composed PMF (:func:`fft_compose`, proved from the standard
FFT error analysis, Higham 2002 Thm 24.2, under the model stated in :func:`fft_relative_error`),
paid as √(number of entries)·R on a tail sum (Cauchy–Schwarz; on the Q side with the weights
e^{−s_j}), plus the cumulative-sum round-off γ_N·(mass). Entries are clamped at 0 (true ≥ 0).
Both sides are inverted exactly for ε(δ): δ̃_up is piecewise a − b·e^x between lattice points, and the lower
bound is a maximum of lines in e^ε.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from .._validate import InputError, UnsupportedError
from .discretise import DiscreteStep

__all__ = [
    "ComposedPLD", "compose", "fast_length", "fft_compose", "fft_relative_error", "fft_stages",
    "window",
]


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


_U = 2.0 ** -53                 # unit round-off of float64
_MU = 4.0 * _U                  # assumed error of each computed twiddle factor (Higham (24.2))


def _gamma(k: float) -> float:
    """γ_k = k·u / (1 − k·u) (Higham, eq. (3.8))."""
    return k * _U / (1.0 - k * _U)


def fft_stages(n: int) -> int:
    """Radix-2-equivalent stage count t of an FFT of length n = 2^a·3^b·5^c: a + 2b + 3c (a radix-3
    or radix-5 butterfly is charged as ⌈log₂ 3⌉ = 2 or ⌈log₂ 5⌉ = 3 radix-2 stages)."""
    t = 0
    for p, w in ((2, 1), (3, 2), (5, 3)):
        while n % p == 0:
            n //= p
            t += w
    if n != 1:
        raise InputError(f"n must have prime factors 2, 3, 5 only (got factor {n})")
    return t


def fft_relative_error(n: int) -> float:
    """A-priori normwise relative error ε_F of a float64 FFT of length n: ‖fl(Fx) − Fx‖₂ ≤ ε_F‖Fx‖₂.

    Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed. (2002), Thm 24.2: for the
    radix-2 Cooley–Tukey FFT with t = log₂ n stages and computed twiddles within μ of the exact
    ones, ε_F = tη/(1 − tη) with η = μ + γ₄(√2 + μ). We use μ = 4u and t = :func:`fft_stages`
    (mixed radix charged as radix-2 stages), plus u for the 1/n scaling of the inverse transform.
    Bound: upper, *assuming* torch's FFT (pocketfft on CPU, cuFFT on CUDA) obeys this standard
    stage-wise bound — the one non-proved modelling step; the observed errors are checked to be
    far below it (``tests/accountants/test_pld.py::test_fft_error_bound_holds_and_is_not_absurd``).
    """
    eta = _MU + _gamma(4) * (math.sqrt(2.0) + _MU)
    te = fft_stages(n) * eta
    if te >= 0.5:
        raise InputError(f"FFT length n={n} too large for the a-priori error bound")
    return te / (1.0 - te) + 2.0 * _U


def _power(z: Tensor, t: int) -> tuple[Tensor, Tensor]:
    """(z**t, kept) for a spectrum, by binary exponentiation: every complex product has relative
    error ≤ ρ = √2·γ₂ (Higham Lemma 3.5), so the computed power is within (1+ρ)^{t−1} − 1 relative
    error of z^t. Entries with |z|^t < e^{−690} are set to 0 up front (``kept`` False): the
    intermediate powers of the others stay in float64's normal range (no denormals)."""
    keep = torch.log(z.abs()) * t > -690.0
    base = torch.where(keep, z, torch.zeros_like(z))
    out = None
    while t:
        if t & 1:
            out = base if out is None else out * base
        t >>= 1
        if t:
            base = base * base
    return out, keep


def fft_compose(arrs: list[tuple[Tensor, int]]) -> tuple[Tensor, list[float], list[float]]:
    """Circular composition c = F⁻¹ Π_i (F a_i)^{t_i} of non-negative rows, with a proved bound
    on the float64 round-off of the computed ĉ.

    Args:
        arrs: pairs (a_i, t_i), a_i of shape (rows, n) float64, all ≥ 0, same n and device.

    Returns:
        (ĉ, R, C): the computed (rows, n) composition; per row R ≥ ‖ĉ − c‖₂ and C ≥ Σ_j c_j.
        Bound: R upper, under the FFT error model of :func:`fft_relative_error`.

    Derivation. Let y_i = F a_i and ŷ_i = fl(F a_i) (rfft). (1) *Componentwise forward error*:
    every output of a radix-2 FFT is y_k = Σ over t stages of butterflies x₁ + w·x₂; the local
    round-off of a butterfly is ≤ η(|x₁| + |x₂|) (η as in Higham Thm 24.2), the nodes of one stage
    feeding y_k are partial DFTs over a partition of the indices (so Σ(|x₁| + |x₂|) ≤ ‖a‖₁), and
    errors propagate through twiddles of modulus 1: |ŷ_k − y_k| ≤ ε_F‖a‖₁ =: E for every k (ε_F
    absorbs the second-order terms; ‖a‖₁ = Σa as a ≥ 0). (2) *Powers*: with B_i[k] =
    (|ŷ_i[k]| + E_i)^{t_i} ≥ max(|y_i[k]|, |ŷ_i[k]|)^{t_i}, |a^t − b^t| ≤ t|a − b|max(|a|,|b|)^{t−1}
    and telescoping over the parts, |Π ŷ_i^{t_i} − Y| ≤ ΠB_i · Σ_i t_i E_i/(|ŷ_i| + E_i) entrywise,
    Y = Π y_i^{t_i}. (3) The Σt_i − 1 complex products (binary powers, then across parts) add a
    relative θ = (1+ρ)^{Σt_i} − 1 of Π|ŷ_i|^{t_i} ≤ ΠB_i; an entry zeroed by :func:`_power` is off
    by |Y_k| ≤ ΠB_i[k]. (4) Parseval on the full (Hermitian) spectrum: the exact inverse of the
    computed spectrum Ŝ is within Δ = ‖Ŝ − Y‖₂/√n of c, and the computed inverse FFT adds
    ε_F‖F⁻¹Ŝ‖₂ = ε_F‖Ŝ‖₂/√n (Higham Thm 24.2, normwise). So R = (1 + ε_F)Δ + ε_F‖Ŝ‖₂/√n, times
    1 + 10⁻⁶ for the float64 evaluation of R itself (relative error ≪ 10⁻⁹). A sum Σ_{j∈J} w_j ĉ_j
    with |w_j| ≤ 1 is then within √|J|·R of the exact one (Cauchy–Schwarz).
    """
    rows, n = arrs[0][0].shape
    device = arrs[0][0].device
    nh = n // 2 + 1
    eps_f = fft_relative_error(n)
    rho = math.sqrt(2.0) * _gamma(2)
    spectrum = torch.ones(rows, nh, dtype=torch.complex128, device=device)
    log_b = torch.zeros(rows, nh, dtype=torch.float64, device=device)
    ratio = torch.zeros(rows, nh, dtype=torch.float64, device=device)
    zeroed = torch.zeros(rows, nh, dtype=torch.bool, device=device)
    mass = torch.ones(rows, dtype=torch.float64, device=device)
    total = 0
    for a, t in arrs:
        m = a.sum(1) * (1.0 + _gamma(n))                     # ≥ ‖a‖₁ despite summation round-off
        y = torch.fft.rfft(a, dim=1)
        e = (eps_f * m)[:, None]
        ay = y.abs() + e
        log_b += t * torch.log(ay)
        ratio += t * e / ay
        power, kept = _power(y, t)
        zeroed |= ~kept
        spectrum = spectrum * power
        mass = mass * m**t
        total += t
    circ = torch.fft.irfft(spectrum, n=n, dim=1)
    theta = math.expm1(total * math.log1p(rho))
    big_b = torch.exp(log_b)
    err = torch.where(zeroed, big_b, big_b * (theta + (1.0 + theta) * ratio))
    weight = torch.full((nh,), 2.0, dtype=torch.float64, device=device)   # conjugate partners
    weight[0] = 1.0
    if n % 2 == 0:
        weight[-1] = 1.0
    delta = torch.sqrt((weight * err**2).sum(1) / n)
    norm_s = torch.sqrt((weight * spectrum.abs() ** 2).sum(1) / n)
    bound = ((1.0 + eps_f) * delta + eps_f * norm_s) * (1.0 + 1e-6)
    return circ, bound.tolist(), mass.tolist()


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
    noise_up: float        # R_up: bound on ‖computed − exact‖₂ of the pessimistic PMF (FFT round-off)
    noise_p: float         # R_P: the same for the P-PMF of the test statistic
    sum_up: float          # bound on the summation round-off of any tail sum of the pessimistic PMF
    sum_p: float           # the same for the P-PMF
    _tail: Tensor          # Σ_{j ≥ i} up_j                  (N + 1,)
    _log_tail_exp: Tensor  # log Σ_{j ≥ i} up_j e^{−s_j}     (N + 1,)
    _tail_p: Tensor        # P(S̃ ≥ s_i) (computed)           (N + 1,)
    _log_tail_q: Tensor    # log of an upper bound on Q(S̃ ≥ s_i) (N + 1,); in logs: Q-tails
                           # at large ε are below float64's range (e^{−1000}) and must not become 0

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

    def _allow_up(self, count: Tensor) -> Tensor:
        """Round-off allowance of a pessimistic tail sum over ``count`` entries (weights in [0, 1]):
        √count·R_up (Cauchy–Schwarz) plus the summation error."""
        return torch.sqrt(count.to(torch.float64)) * self.noise_up + self.sum_up

    def _noise_above(self, x: Tensor) -> Tensor:
        """Round-off allowance of the pessimistic tail sum over the entries s_j > x."""
        i = torch.searchsorted(self.support, x.contiguous(), right=True)
        return self._allow_up(self.points - i)

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
        d = d + self._allow_up(n - 1 - torch.arange(n, device=d.device))
        below = d < target
        if not bool(below.any()):
            return math.inf
        i = int(torch.argmax(below.to(torch.int8)))
        # i: first lattice point with δ̃_up + r < target; on [s_{i−1}, s_i) the active set is {j ≥ i}.
        rest = self.p_inf + float(self._tail[i]) + math.sqrt(n - i) * self.noise_up + self.sum_up - target
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
        count = (n - torch.arange(n + 1, device=self._tail_p.device)).to(torch.float64)
        return torch.sqrt(count) * self.noise_p + self.sum_p

    def delta_lower(self, eps: Tensor, chunk: int = 1 << 22) -> Tensor:
        """Certified lower bound on δ(ε) of this direction (best threshold test)."""
        a = self._tail_p - self.slack_p - self._noise_p_tail()
        log_b = self._log_tail_q
        flat = eps.reshape(-1)
        out = torch.empty_like(flat)
        step = max(1, chunk // a.numel())
        for j in range(0, flat.numel(), step):
            eb = torch.exp(flat[j : j + step, None] + log_b[None, :])      # e^ε·A_Q (inf: no evidence)
            out[j : j + step] = torch.clamp((a[None, :] - eb).amax(1), min=0.0)
        return out.reshape(eps.shape)

    def epsilon_lower(self, delta: float) -> float:
        """Certified lower bound on ε(δ): δ_lower(ε) ≤ δ ⇔ ε ≥ max_i log((A_P − δ)/A_Q)."""
        num = self._tail_p - self.slack_p - self._noise_p_tail() - delta
        ok = num > 0
        if not bool(ok.any()):
            return 0.0
        vals = torch.where(ok, torch.log(torch.where(ok, num, 1.0)) - self._log_tail_q, -math.inf)
        return max(0.0, float(torch.nan_to_num(vals, nan=-math.inf).max()))


_WHICH = ("upper", "lower_p", "lower_q_tilted")


def _lambda_grid(steps: list[tuple[DiscreteStep, int]], log_inv_gamma: float) -> Tensor:
    """Positive tilts λ for the Chernoff bounds: a factor-√2 geometric grid from 2⁻¹² (heavy tails
    of subsampled steps need λ of order 1, the RDP order minus one) up to 4× the Gaussian optimum
    √(2 log(1/γ))/sd of the composed loss (light, concentrated tails need λ ≫ 1)."""
    h = steps[0][0].h
    var = 0.0
    for st, t in steps:
        pmf = st.lower_p
        l = (st.k_lo + torch.arange(pmf.numel(), dtype=pmf.dtype, device=pmf.device)) * h
        m1 = float((pmf * l).sum())
        var += t * max(float((pmf * (l - m1) ** 2).sum()), 0.0)
    sd = math.sqrt(max(var, h * h))
    top = max(4.0 * math.sqrt(2.0 * log_inv_gamma) / sd, 16.0)
    n = max(2, math.ceil(2.0 * math.log2(top / 2.0**-12)) + 1)
    return 2.0 ** torch.linspace(-12.0, math.log2(top), n, dtype=torch.float64, device=steps[0][0].upper.device)


def _log_mgf(steps: list[tuple[DiscreteStep, int]], lam: Tensor) -> Tensor:
    """K(λ) = Σ_i T_i log Σ_k p_{i,k} e^{λ l_k} of the three composed PMFs, (3, len(λ)): the exact
    cumulant generating function of the composed discrete measures (sub- or super-probability
    measures included; log 0 = −inf entries drop out)."""
    h = steps[0][0].h
    out = torch.zeros(3, lam.numel(), dtype=torch.float64, device=lam.device)
    for st, t in steps:
        pmf3 = torch.stack([getattr(st, w) for w in _WHICH])             # (3, n)
        l = (st.k_lo + torch.arange(pmf3.shape[1], dtype=torch.float64, device=lam.device)) * h
        logp = torch.log(pmf3)
        for j in range(0, lam.numel(), 16):                               # bounded memory
            lj = lam[j : j + 16]
            out[:, j : j + 16] += t * torch.logsumexp(logp[:, None, :] + lj[None, :, None] * l, dim=2)
    return out


@dataclass(frozen=True)
class _Cgf:
    """The composed CGFs at a grid of tilts ±λ, for Chernoff bounds on the three composed PMFs:
    mass(S ≥ b) ≤ e^{K(λ) − λb} and mass(S ≤ a) ≤ e^{K(−λ) + λa} for every λ > 0 (Markov's
    inequality applied to e^{±λS}; valid for any non-negative measure)."""

    lam: Tensor        # (m,) λ > 0
    k_pos: Tensor      # (3, m) K(+λ)
    k_neg: Tensor      # (3, m) K(−λ)

    def log_above(self, b: float) -> Tensor:
        """(3,) log of certified bounds on the composed masses at S ≥ b."""
        return torch.clamp((self.k_pos - self.lam * b).nan_to_num(nan=math.inf).amin(1), max=0.0)

    def log_below(self, a: float) -> Tensor:
        """(3,) log of certified bounds on the composed masses at S ≤ a."""
        return torch.clamp((self.k_neg + self.lam * a).nan_to_num(nan=math.inf).amin(1), max=0.0)

    def edges(self, log_inv_gamma: float) -> tuple[float, float]:
        """(a, b) with every bound at S ≤ a and at S ≥ b at most γ: b = min_λ (K(λ) + log 1/γ)/λ."""
        b = ((self.k_pos + log_inv_gamma) / self.lam).nan_to_num(nan=math.inf).amin(1).amax()
        a = (-(self.k_neg + log_inv_gamma) / self.lam).nan_to_num(nan=-math.inf).amax(1).amin()
        return float(a), float(b)


def _cgf(steps: list[tuple[DiscreteStep, int]], gamma: float) -> _Cgf:
    lam = _lambda_grid(steps, math.log(1.0 / gamma))
    return _Cgf(lam, _log_mgf(steps, lam), _log_mgf(steps, -lam))


def _up_exp(x: Tensor) -> list[float]:
    """e^x rounded so it never falls below the true value (underflow gives the least subnormal)."""
    return torch.where(x > -math.inf, torch.exp(x).clamp(min=5e-324), torch.zeros_like(x)).tolist()


def _tails(cgf: _Cgf, h: float, k_a: int, n: int) -> tuple[list[tuple[float, float]], float]:
    """Certified (below, above) composed masses outside lattice indices [k_a, k_a + n) per PMF,
    and the log of the bound above for the tilted Q-PMF (kept in logs)."""
    lo_edge, hi_edge = (k_a - 0.5) * h, (k_a + n - 0.5) * h
    log_above = cgf.log_above(hi_edge)
    below, above = _up_exp(cgf.log_below(lo_edge)), _up_exp(log_above)
    return list(zip(below, above, strict=True)), float(log_above[2])


Window = tuple[int, int, _Cgf]


def window(steps: list[tuple[DiscreteStep, int]], gamma: float) -> Window:
    """Lattice indices [k_a, k_b] outside which every composed PMF has certified mass ≤ γ per side,
    read off the Chernoff bounds of the composed CGFs (:class:`_Cgf`), and the certified
    (below, above) masses of the three PMFs for that window."""
    h = steps[0][0].h
    cgf = _cgf(steps, gamma)
    lo, hi = cgf.edges(math.log(1.0 / gamma))
    if not (math.isfinite(lo) and math.isfinite(hi) and math.isfinite(lo / h) and math.isfinite(hi / h)):
        raise UnsupportedError(
            f"pld: the composed privacy loss has no finite window in float64 ([{lo:g}, {hi:g}] at h={h:g}); "
            f"use method='rdp'"
        )
    k_a, k_b = math.floor(lo / h) - 1, math.ceil(hi / h) + 1
    return k_a, k_b, cgf


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
    k_a, k_b, cgf = window(steps, gamma) if win is None else win
    n = fast_length(k_b - k_a + 1)
    k_a = k_b + 1 - n        # use the whole FFT length (extending downwards)
    tails, log_gq_hi = _tails(cgf, h, k_a, n)
    k0 = 0
    arrs: list[tuple[Tensor, int]] = []
    for st, t in steps:
        # Centre the step at index 0 (its mean lattice point): the spectrum then has a small
        # phase, and the T-th power does not multiply a large phase's round-off by T.
        pmf3 = torch.stack([st.upper, st.lower_p, st.lower_q_tilted])
        lat = st.k_lo + torch.arange(st.upper.numel(), device=device)
        centre = round(float((st.lower_p * lat.to(torch.float64)).sum()))
        arr = torch.zeros(3, n, dtype=torch.float64, device=device)
        arr.index_add_(1, (lat - centre) % n, pmf3)               # circular; folds long PMFs
        arrs.append((arr, t))
        k0 += t * centre
    circ, (r_up, r_p, r_q), (c_up, c_p, _) = fft_compose(arrs)
    pmf = torch.roll(circ, shifts=-((k_a - k0) % n), dims=1)   # pmf[:, i] ↔ lattice k_a + i
    # R: bounds on the 2-norm of the FFT round-off of each composed PMF, C ≥ its total mass;
    # true entries are ≥ 0, so clamping only moves towards the truth.
    sum_up = _gamma(n) * (c_up + math.sqrt(n) * r_up)        # cumulative-sum round-off, Σ ≥ 0
    sum_p = _gamma(n) * (c_p + math.sqrt(n) * r_p)
    pmf = torch.clamp(pmf, min=0.0)
    up, pp, qt = pmf[0], pmf[1], pmf[2]
    # Certified out-of-window masses of the three composed PMFs (Chernoff, exact discrete MGFs).
    (u_lo, u_hi), (gp_lo, gp_hi), _ = tails
    s = (k_a + torch.arange(n, dtype=torch.float64, device=device)) * h
    # Q-masses from the tilted composition: Q̃^{*T}(s) = e^{−s}·(q e^l)^{*T}(s) (exact identity).
    # A_Q(i) ≤ Σ_{j≥i} e^{−s_j} qt_j + R_q·(Σ_{j≥i} e^{−2 s_j})^{1/2} (Cauchy–Schwarz), times
    # (1 + 2γ_n) for the summation, + e^{−b}·γ_q above the window edge b.
    # All in logs: at ε ≳ 700 these masses underflow, and a 0 here would certify ε = inf.
    hi_edge = (k_a + n - 0.5) * h
    log_weight = 0.5 * _log_rev_exp_tail(torch.ones_like(s), 2.0 * s)
    log_r_q = math.log(r_q) if r_q > 0 else -math.inf
    log_inner = torch.logaddexp(_log_rev_exp_tail(qt, s), log_r_q + log_weight)
    log_out = log_gq_hi - hi_edge
    log_tail_q = torch.logaddexp(log_inner + math.log1p(2.0 * _gamma(n)), torch.full_like(log_inner, log_out))
    p_inf = -math.expm1(sum(t * math.log1p(-st.p_inf) for st, t in steps))
    return ComposedPLD(
        k_start=k_a,
        h=h,
        p_inf=p_inf,
        slack_up=u_lo + u_hi,
        slack_p=gp_lo + gp_hi,
        noise_up=r_up,
        noise_p=r_p,
        sum_up=sum_up,
        sum_p=sum_p,
        _tail=_rev_cumsum(up),
        _log_tail_exp=_log_rev_exp_tail(up, s),
        _tail_p=_rev_cumsum(pp),
        _log_tail_q=log_tail_q,
    )
