"""PLD upper bound for random-allocation DP-SGD (balls-in-bins, k = 1; k > 1 reduced to it; add/remove).  Bound: upper.

**Dominating pair.** One epoch of t adaptive Gaussian steps (noise σ, sensitivity 1 in units of C) in
which every record sits in one uniformly random step is dominated, in both orders, by the pair
P = (1/t) Σ_j N(e_j, σ²I_t), Q = N(0, σ²I_t): Feldman & Shenfeld, arXiv 2502.08202 (NeurIPS 2025),
Thm 3.1 (δ of random allocation of any t-step algorithm dominated by a randomizer R is at most that of
the allocation of R, attained by the datasets {∗} and {⊥}) with the Gaussian randomizer R(∗) = N(1, σ²),
R(⊥) = N(0, σ²) (their Claim D.3); for the Gaussian at k = 1 this is Chua et al., arXiv 2412.16802
(AISTATS 2025), Thm 1. The proof is a post-processing (a randomized map built step by step from the
randomizer's outputs), so it holds for each ordered direction (remove: P‖Q; add: Q‖P) and the epochs
compose adaptively (Zhu, Dong & Wang 2022, Thm 10). T steps are charged as E = ⌈T/t⌉ full epochs (a
partial epoch is the first r outputs of a full one: post-processing).

Under Q the likelihood ratio is Λ = S/t, S = Σ_j L_j, L_j = exp((x_j − 1/2)/σ²) i.i.d. log-normal with
mean 1, and δ of the E-fold composition is, for γ = e^ε,

    remove:  E_Q[(Π_e Λ_e − γ)_+] (+ P-mass at infinite loss),   add:  E_Q[(1 − γ Π_e Λ_e)_+],

both convex in each Λ_e separately. So replacing the law of each Λ_e under Q by a *mean-preserving spread*
(a law larger in convex order, same mean 1) can only raise both, in every composition (condition on the
other epochs; Jensen). Equivalently the spread pair is Blackwell-more-informative: the map back is the
conditional law of Λ given the spread value.

**Discretisation** (every step a mean-preserving spread, so every step pessimistic in both directions):

1. Each L_j on the geometric grid x_k = t·e^{gk}: the Q-mass of [x_k, x_{k+1}] is split between its ends
   with the bin's conditional mean kept (the P-mass of the bin, E_Q[L; bin] = P₁(bin), gives it in
   closed form); [0, x_lo] is split between 0 and x_lo; above x_hi, Q's mass goes to L = 0 and P's to a
   point of infinite loss (the pair gains an outcome that only P can produce and one that only Q can:
   also more informative).
2. Sums of two such variables: x_i + x_j lies between two grid points and is split between them with
   its value kept (the weights depend only on j − i; computed in 30-digit mpmath and rounded up).
   S = L_1 + … + L_t by binary powering.
3. The loss log(S/t) is then exactly on the lattice {k·g}; the remove direction's PMF is (S/t)·Q̃ (the
   P-masses), the add direction's is Q̃ at −log(S/t) with S = 0 at +∞. Both are composed over the epochs
   by :func:`accountants.pld.compose.compose` (certified FFT round-off, Chernoff window).

The error of the spreads is second order in g (each is a chord of a convex function over one grid cell).

**k > 1** (k of the t steps per epoch, a uniform k-subset). The epoch's Gaussian pair P_k = avg_{|S|=k} N(1_S, σ²I)
vs Q is, by the reduction proved in :mod:`accountants.rdp.random_allocation` (a uniform k-subset is one uniform step
from each block of a uniformly random partition of the t steps into k − r blocks of a = ⌊t/k⌋ and r = t mod k of
a + 1; joint convexity of the hockey-stick divergence in each order), dominated by the product of k − r balls-in-bins
pairs of a steps and r of a + 1 steps. So each epoch is charged as those k balls-in-bins epochs, composed by the
same FFT composer (the same lattice g for both sizes). The reduction is Feldman & Shenfeld's (their code,
github moshenfeld/PLD_accounting at commit 952e91a, composes the same floor/ceil blocks). k = t is the plain
Gaussian (blocks of one step).

**Float64.** Every mass is an upper bound on the mass of the exact-arithmetic spread: the Gaussian bin
masses carry the error bound of :func:`accountants.shuffle._phi_err` (scipy's Φ against mpmath), the split
of a bin the error of the ratio of its two masses divided by the cell width (r − 1), and every sum of
non-negative terms is inflated by a relative 8·(terms + 8)·u. Raising Q-masses at fixed Λ values raises
both hockey-stick expressions above (non-negative integrands), so the result stays an upper bound.
Products that underflow (true value below 1e-300) are covered by an absolute 1e-290 added to the +∞ mass.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy import special

from .. import validate as check
from ..errors import UnsupportedError
from ..events import DPSGD
from ..sampling import Neighbouring, RandomAllocation
from .compose import ComposedPLD, chernoff_tilt, compose, fast_length, window
from .discretise import DiscreteStep

__all__ = [
    "DEFAULT_SPACING",
    "RandomAllocationPLD",
    "covers",
    "epoch_sum_law",
    "random_allocation_pld",
    "random_allocation_pld_delta",
    "random_allocation_pld_epsilon",
    "spacing",
    "theorem",
]

_U = 2.0**-53
DEFAULT_SPACING = 2e-3
"""Grid ratio log r = lattice spacing g of the loss (the spreads' error is O(g²) per level)."""
MAX_BASE = 16_384
"""Grid points of one coordinate's law: beyond, the spacing is coarsened (small σ; still sound)."""
MAX_GRID = 200_000
"""Most grid points of one partial-sum law (beyond: UnsupportedError, the RDP bound answers)."""
MAX_POINTS = 1 << 21
"""Most lattice points of the composed FFT."""
_UNDERFLOW = 1e-290


def _phi_err(z: np.ndarray) -> np.ndarray:
    from ..shuffle import _phi_err as err

    return err(z)


# ------------------------------------------------------------------------------------------ one coordinate


@dataclass(frozen=True)
class _Law:
    """A measure on {0} ∪ {t·e^{g k} : k = lo, …, lo + len(mass) − 1}: ``zero`` at 0, ``mass`` on the grid."""

    lo: int
    zero: float
    mass: np.ndarray


def _bin_masses(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Φ(b) − Φ(a) for a < b elementwise (standard normal) and a bound on its relative error.

    Left of 0 from log Φ, right of 0 from log Φ(−·) (each side keeps relative accuracy), across 0 as
    1 − Φ(a) − Φ(−b); errors as in accountants.shuffle._bin_masses (log errors over the log step)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        ea, eb = _phi_err(a), _phi_err(b)
        la, lb = special.log_ndtr(a), special.log_ndtr(b)          # left side
        ua, ub = special.log_ndtr(-a), special.log_ndtr(-b)        # right side
        d_l = la - lb
        m_l = np.exp(lb) * -np.expm1(d_l)
        r_l = 1.01 * (eb * np.abs(lb) + (ea * np.abs(la) + eb * np.abs(lb) + 2 * _U * np.abs(d_l)) / np.abs(d_l))
        r_l = r_l + 8 * _U
        d_r = ub - ua
        m_r = np.exp(ua) * -np.expm1(d_r)
        r_r = 1.01 * (ea * np.abs(ua) + (ea * np.abs(ua) + eb * np.abs(ub) + 2 * _U * np.abs(d_r)) / np.abs(d_r))
        r_r = r_r + 8 * _U
        fa, sb = np.exp(la), np.exp(ub)
        m_m = (1.0 - fa) - sb
        r_m = 1.01 * (fa * (ea + 4 * _U) + sb * (eb + 4 * _U) + 4 * _U) / m_m
        left, right = b <= 0, a >= 0
        m = np.where(left, m_l, np.where(right, m_r, m_m))
        r = np.where(left, r_l, np.where(right, r_r, r_m))
    ok = np.isfinite(m) & np.isfinite(r) & (m > 0)
    return np.where(ok, m, 0.0), np.where(ok, r, np.inf)


def _coordinate_law(sigma: float, t: int, g: float, tail: float) -> tuple[_Law, float]:
    """Step 1 of the module doc: the spread law of one L = exp((x − 1/2)/σ²) under Q = N(0, σ²), as a
    :class:`_Law` of upper-bounded masses, and an upper bound on P's mass sent to infinite loss."""
    zt = -float(special.ndtri(tail))                          # Φ(−zt) = tail
    inv = 1.0 / sigma
    # z (standard, under Q) of the grid point t·e^{gk}: z = σ(log t + gk) + 1/(2σ)
    k_lo = math.floor((-zt - 0.5 * inv) / (sigma * g) - math.log(t) / g)
    k_hi = math.ceil((zt + 0.5 * inv) / (sigma * g) - math.log(t) / g) + 1
    if k_hi - k_lo + 1 > MAX_GRID:
        raise UnsupportedError(f"pld (random allocation): σ={sigma:g} needs {k_hi - k_lo + 1} grid points at "
                               f"spacing {g:g}, above {MAX_GRID}; use method='rdp'")
    k = np.arange(k_lo, k_hi + 1, dtype=np.float64)
    log_x = math.log(t) + g * k                               # log of the grid points (exact reals: t·e^{gk})
    z = sigma * log_x + 0.5 * inv                             # edges under Q; under P the same edges minus 1/σ
    m, rm = _bin_masses(z[:-1], z[1:])
    p, rp = _bin_masses(z[:-1] - inv, z[1:] - inv)
    r = math.exp(g)
    # conditional mean over the left end: ρ = p/(x_k m) ∈ [1, r]; shares m(ρ − 1)/(r − 1) up, m(r − ρ)/(r − 1) down
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        rho = np.exp(np.log(p) - np.log(m) - log_x[:-1])
        err_rho = r * (rm + rp + 8 * _U * (1.0 + np.abs(log_x[:-1])) + 8 * _U)
        abs_err = m * (err_rho / math.expm1(g) + 8 * _U) * (1 + rm)
        up = m * np.clip(rho - 1.0, 0.0, None) / math.expm1(g) + abs_err
        down = m * np.clip(r - rho, 0.0, None) / math.expm1(g) + abs_err
    m_up = m * (1 + rm)
    bad = ~(np.isfinite(up) & np.isfinite(down) & (abs_err <= 0.5 * m))
    bad |= ~np.isfinite(m_up)
    m_up = np.where(np.isfinite(m_up), m_up, 1.0)
    up = np.where(bad, m_up, np.minimum(up, m_up))
    down = np.where(bad, m_up, np.minimum(down, m_up))
    mass = np.zeros(k.size)
    mass[1:] += up
    mass[:-1] += down
    # [0, x_lo]: P(bin)/x_lo at x_lo, the rest (≤ Q(bin)) at 0; above x_hi: Q's mass to 0, P's to +∞
    e_lo, e_hi = float(_phi_err(np.array([z[0]]))[0]), float(_phi_err(np.array([z[-1]]))[0])
    q_low = math.exp(float(special.log_ndtr(z[0]))) * (1 + e_lo)
    p_low = math.exp(float(special.log_ndtr(z[0] - inv)) - float(log_x[0]))
    p_low *= (1 + _phi_err(np.array([z[0] - inv]))[0]) * (1 + 8 * _U * (1 + abs(log_x[0])))
    mass[0] += min(p_low, q_low)
    q_high = math.exp(float(special.log_ndtr(-z[-1]))) * (1 + e_hi)
    p_high = math.exp(float(special.log_ndtr(-(z[-1] - inv)))) * (1 + _phi_err(np.array([z[-1] - inv]))[0])
    mass *= 1 + 16 * _U
    return _Law(k_lo, (q_low + q_high) * (1 + 4 * _U), mass), float(p_high) * (1 + 4 * _U)


# ---------------------------------------------------------------------------------------------- sums


@functools.lru_cache(maxsize=8)
def _split_table(g: float) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """For d = 0..D−1: x_j + x_{j−d} = x_j(1 + e^{−gd}) lies in [x_{j+k_d}, x_{j+k_d+1}]; the weights
    (w_lo, w_hi) keeping its value, each rounded up (30-digit mpmath). D: the least d with
    e^{−gd} ≤ (e^g − 1)/2, beyond which k_d = 0 and w_hi = e^{−gd}/(e^g − 1) ≤ 1/2 (done by cumulative sums)."""
    import mpmath as mp

    with mp.workdps(30):
        gm = mp.mpf(g)
        rm1 = mp.expm1(gm)
        big_d = int(mp.ceil(mp.log(2 / rm1) / gm))
        ks, lo, hi = np.zeros(big_d, dtype=np.int64), np.zeros(big_d), np.zeros(big_d)
        for d in range(big_d):
            v = mp.log1p(mp.exp(-gm * d)) / gm
            kd = int(mp.floor(v))
            # value x_j(1 + e^{−gd}) = w_lo x_{j+k} + w_hi x_{j+k+1}: w_hi = (1 + e^{−gd} − e^{gk}) / (e^{gk}(e^g − 1))
            w_hi = (1 + mp.exp(-gm * d) - mp.exp(gm * kd)) / (mp.exp(gm * kd) * rm1)
            ks[d] = kd
            hi[d] = math.nextafter(float(w_hi), math.inf)
            lo[d] = math.nextafter(float(1 - w_hi), math.inf)
    return big_d, ks, lo, hi


def _add(a: _Law, b: _Law, g: float) -> _Law:
    """Step 2: the spread law of A + B (independent) from the two spread laws, masses rounded up."""
    big_d, ks, w_lo, w_hi = _split_table(g)
    lo = min(a.lo, b.lo)
    n = max(a.lo + a.mass.size, b.lo + b.mass.size) - lo
    x = np.zeros(n)
    y = np.zeros(n)
    x[a.lo - lo: a.lo - lo + a.mass.size] = a.mass
    y[b.lo - lo: b.lo - lo + b.mass.size] = b.mass
    top = int(ks[0]) + 2
    out = np.zeros(n + top)
    with np.errstate(under="ignore"):
        for d in range(min(big_d, n)):
            k = int(ks[d])
            for big, small in ((y, x), (x, y)) if d else ((y, x),):
                prod = big[d:] * small[: n - d]          # big index j = d..n−1, small index j − d
                out[d + k: n + k] += w_lo[d] * prod
                out[d + k + 1: n + k + 1] += w_hi[d] * prod
        if n > big_d:
            # d ≥ D: k_d = 0; the upper share Σ_i s_i e^{g(i−j)}/(e^g − 1), the lower share the rest
            j = np.arange(n, dtype=np.float64)
            for big, small in ((y, x), (x, y)):
                scaled = small * np.exp(g * (j - (n - 1)))            # ≤ small: no overflow
                c_mass = np.cumsum(small)[: n - big_d]                # Σ_{i ≤ j − D}, for j = D..n−1
                c_up = np.cumsum(scaled)[: n - big_d] * np.exp(g * ((n - 1) - j[big_d:])) / math.expm1(g)
                c_up = np.minimum(c_up, c_mass)
                b_j = big[big_d:]
                # terms of `scaled` that underflowed (< 2.3e-308 each) are paid in full on the upper share
                lost = (n * 2.3e-308) * np.exp(g * ((n - 1) - j[big_d:])) / math.expm1(g)
                out[big_d + 1: n + 1] += b_j * (c_up + lost)
                out[big_d: n] += b_j * (c_mass - c_up) + b_j * c_mass * (4 * n * _U)
    # every entry: ≤ 2D + 4 non-negative terms, each a product of ≤ 3 rounded factors; cumulative sums ≤ n terms
    out *= 1 + 8 * (2 * big_d + 2 * n + 8) * _U
    # cross terms with the atoms at 0 (0 + y = y exactly) and the atom itself
    out[:n] += a.zero * y + b.zero * x
    out *= 1 + 4 * _U
    nz = np.flatnonzero(out)
    if nz.size == 0:
        return _Law(lo, a.zero * b.zero * (1 + 2 * _U), np.zeros(1))
    first, last = int(nz[0]), int(nz[-1])
    return _Law(lo + first, a.zero * b.zero * (1 + 2 * _U), out[first: last + 1].copy())


def _power(base: _Law, t: int, g: float) -> _Law:
    result: _Law | None = None
    while t:
        if t & 1:
            result = base if result is None else _add(result, base, g)
        t >>= 1
        if t:
            base = _add(base, base, g)
    assert result is not None
    return result


@functools.lru_cache(maxsize=16)
def epoch_sum_law(sigma: float, t: int, g: float, tail: float) -> tuple[int, float, np.ndarray, float]:
    """The spread law of S = Σ_{j ≤ t} L_j under Q on {0} ∪ {t·e^{gk}}: (k_lo, mass at 0, masses, P-mass at
    infinite loss). Upper bounds on the masses of a mean-preserving spread of the exact law (module doc)."""
    law, p_top = _coordinate_law(sigma, t, g, tail)
    s = _power(law, t, g)
    return s.lo, s.zero, s.mass, p_top


# ------------------------------------------------------------------------------------------ composition


def _step(k_lo: int, pmf: np.ndarray, p_inf: float, h: float) -> DiscreteStep:
    """A step for :func:`compose` whose ``upper`` PMF is ``pmf``. The lower rows are placeholders (the normalised
    ``pmf``): only the upper ends of the composed PLD are read here; the lower bound is the realised pair's."""
    up = torch.tensor(pmf, dtype=torch.float64)
    tot = float(up.sum())
    norm = up / tot if tot > 0 else up
    return DiscreteStep(k_lo=k_lo, upper=up, p_inf=min(1.0, p_inf), lower_p=norm, lower_q=norm, h=h)


def _epoch_steps(sigma: float, t: int, g: float, tail: float) -> dict[str, DiscreteStep]:
    """The remove (P‖Q) and add (Q‖P) steps of one epoch on the loss lattice {k·g}."""
    k_lo, zero, q, p_top = epoch_sum_law(float(sigma), int(t), float(g), float(tail))
    k = k_lo + np.arange(q.size)
    with np.errstate(over="ignore", under="ignore"):
        p = q * np.exp(g * k) * (1 + 8 * _U * (1 + np.abs(g * k)))   # P-mass = (S/t)·Q-mass at loss g·k
    if not np.all(np.isfinite(p)):
        raise UnsupportedError("pld (random allocation): per-epoch loss too large for float64; use method='rdp'")
    remove = _step(int(k_lo), p, p_top + _UNDERFLOW, g)
    add = _step(int(-(k_lo + q.size - 1)), q[::-1].copy(), zero + _UNDERFLOW, g)
    return {"remove": remove, "add": add}


def covers(spec: object) -> bool:
    """Whether ``spec`` is a single random-allocation phase (RandomAllocation(k, t), add/remove, one record)."""
    return (isinstance(spec, DPSGD) and isinstance(spec.sampling, RandomAllocation)
            and spec.neighbouring is Neighbouring.ADD_REMOVE and spec.group_size == 1)


def spacing(sigma: float, t: int, tail: float, h: float) -> float:
    """The grid spacing used: ``h``, coarsened so that one coordinate's grid has ≤ MAX_BASE points."""
    zt = -float(special.ndtri(tail))
    return max(h, (2 * zt + 1.0 / sigma) / (sigma * MAX_BASE))


def _check_spec(spec: DPSGD) -> tuple[float, int, int, int]:
    """(σ, t, epochs ⌈T/t⌉, k) of a covered spec; UnsupportedError naming why otherwise."""
    if not isinstance(spec, DPSGD) or not isinstance(spec.sampling, RandomAllocation):
        raise UnsupportedError("the random-allocation PLD covers RandomAllocation sampling only")
    if spec.neighbouring is not Neighbouring.ADD_REMOVE or spec.group_size != 1:
        raise UnsupportedError("the random-allocation PLD covers add-remove for single records: no dominating pair "
                               "is proved for replace-one or groups under random allocation")
    t = spec.sampling.steps_per_epoch
    return float(spec.noise_multiplier), t, -(-spec.steps // t), spec.sampling.k


@dataclass(frozen=True)
class RandomAllocationPLD:
    """Composed PLDs of the two directions of a random-allocation run (upper bounds only)."""

    directions: dict[str, ComposedPLD]
    epochs: int
    h: float
    theorem: str

    def epsilon_upper(self, delta: float) -> float:
        """Certified upper bound on ε(δ) (max over the directions).  Bound: upper."""
        return max(d.epsilon_upper(delta) for d in self.directions.values())

    def delta_upper(self, epsilon: float) -> float:
        """Certified upper bound on δ(ε).  Bound: upper."""
        e = torch.tensor([float(epsilon)], dtype=torch.float64)
        return max(float(d.delta_upper(e)[0]) for d in self.directions.values())


def random_allocation_pld(spec: DPSGD, *, h: float = DEFAULT_SPACING, delta_error: float = 1e-12,
                          at_delta: float | None = None, at_epsilon: float | None = None) -> RandomAllocationPLD:
    """Discretise one epoch (module doc) and compose ⌈T/t⌉ epochs in each direction (k > 1: each epoch as the
    balls-in-bins epochs of its blocks, :func:`accountants.rdp.random_allocation.blocks`).

    Args:
        spec: random-allocation DP-SGD (RandomAllocation(k, t), add/remove, group 1).
        h: lattice spacing = log of the grid ratio.
        delta_error: δ budget of the truncated tails (≤ delta_error/10) and of the FFT window.
        at_delta, at_epsilon: the query (sets the Chernoff tilt of the composition, as in
            :func:`accountants.pld.pld_profile`).
    """
    check.positive(h=h)
    check.in_range(0.0, 1.0, closed="neither", delta_error=delta_error)
    from ..rdp.random_allocation import blocks

    sigma, t, epochs, k = _check_spec(spec)
    parts = blocks(t, k)
    tail = delta_error / (10.0 * epochs * k)
    h = spacing(sigma, t, tail, h)
    per_size = [(_epoch_steps(sigma, m, h, tail), c) for m, c in parts]
    out = {}
    for name in ("remove", "add"):
        d = [(st[name], epochs * c) for st, c in per_size]
        tilt = (0.0, 0.0) if at_delta is None and at_epsilon is None else chernoff_tilt(
            d, delta=at_delta, epsilon=at_epsilon)
        win = window(d, delta_error / 10.0, *tilt)
        need = fast_length(win[1] - win[0] + 1)
        if need > MAX_POINTS:
            raise UnsupportedError(f"pld (random allocation): the composed PLD needs {need} lattice points, above "
                                   f"{MAX_POINTS}; use method='rdp'")
        out[name] = compose(d, delta_error / 10.0, win)
    return RandomAllocationPLD(out, epochs, h, theorem(spec))


def theorem(spec: DPSGD) -> str:
    """The theorem line of the PLD upper bound for ``spec``."""
    from ..rdp.random_allocation import blocks

    _, t, epochs, k = _check_spec(spec)
    if k > 1:
        parts = " + ".join(f"{c}×{m}" for m, c in blocks(t, k))
        return (f"random allocation k={k} of t={t}, {epochs} epoch{'s' if epochs != 1 else ''}: each epoch ≤ the "
                f"balls-in-bins PLDs of blocks of {parts} steps composed (uniform k-subset = one step per block of a "
                "random partition; joint convexity; the reduction of Feldman-Shenfeld's accountant), each the "
                "dominating pair (1/m)Σ_j N(e_j,σ²I) vs N(0,σ²I) (Feldman-Shenfeld 2025 Thm 3.1), mean-preserving "
                "spreads on a geometric grid, both directions")
    return (f"balls-in-bins (random allocation, k=1 of t={t}), {epochs} epoch{'s' if epochs != 1 else ''}: PLD of "
            "the dominating pair (1/t)Σ_j N(e_j,σ²I) vs N(0,σ²I) (Feldman-Shenfeld 2025 Thm 3.1; Chua et al. 2025 "
            "Thm 1), mean-preserving spreads on a geometric grid, both directions")


def random_allocation_pld_epsilon(spec: DPSGD, delta: float, *, h: float = DEFAULT_SPACING,
                                  delta_error: float | None = None) -> float:
    """Certified upper bound on ε(δ) of random-allocation DP-SGD by PLD (module doc).  Bound: upper."""
    check.in_range(0.0, 1.0, closed="neither", delta=delta)
    beta = delta * 1e-3 if delta_error is None else float(delta_error)
    return random_allocation_pld(spec, h=h, delta_error=beta, at_delta=delta).epsilon_upper(delta)


def random_allocation_pld_delta(spec: DPSGD, epsilon: float, *, h: float = DEFAULT_SPACING,
                                delta_error: float = 1e-12) -> float:
    """Certified upper bound on δ(ε) of random-allocation DP-SGD by PLD (module doc).  Bound: upper."""
    check.in_range(0.0, None, closed="left", epsilon=epsilon)
    check.finite(epsilon=epsilon)
    return random_allocation_pld(spec, h=h, delta_error=delta_error, at_epsilon=float(epsilon)).delta_upper(epsilon)
