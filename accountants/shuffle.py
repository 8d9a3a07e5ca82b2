"""Shuffled batches (shuffle once per epoch, then iterate): a sound upper and a certified lower bound.

Sampler (:class:`accountants.Shuffle`): each epoch a fresh uniform permutation is cut into
L = ⌊n/b⌋ batches of b; each record is used at most once per epoch.

Relations, as Chua et al. treat them for batch samplers of a fixed-size dataset (ICML 2024, §2):
``add_remove`` is their add/remove relation in which the record is replaced by ⊥, a record whose
clipped gradient is 0 (so the batches keep their positions): the released sum moves by ≤ C.
``replace_one`` replaces a record by another: the sum moves by ≤ 2C. A genuine insertion into a
shuffled-and-chunked dataset moves every later batch and is not covered.

**Upper bound** (sound). A T-step run spans at most k = ⌈T/L⌉ epochs (⌈T/⌊n/b⌋⌉ is ≥ the epochs of
a loader that keeps a short last batch too). Conditioned on the permutations — identical for the two
neighbouring datasets — an epoch is the Gaussian mechanism with sensitivity Δ = K·C·(1 or 2) for a
group of K, since the record(s) touch(es) at most a batch each; joint convexity of the hockey-stick
divergence removes the conditioning (no amplification is claimed). So the run is at most k
full-batch Gaussian mechanisms: ``DPSGD(σ, Poisson(1.0), k, relation, K)``, which the RDP and PLD
accountants treat exactly (Gaussian composition is exact in both).

**Lower bound** (certified). Chua et al. (ICML 2024, §4, the "cube" sets E_C = {max_t x_t ≤ C};
NeurIPS 2024, §3, multi-epoch composition of the same pair): with every other record's gradient
−C·e and the record's +C·e (vs ⊥, add/remove; vs −C·e, replace-one), one epoch releases, after
subtracting the known baseline, P = MoG(m₁) against Q = MoG(m₀), where MoG(m) = Σ_t (1/L) N(m·e_t, σ²I)
over the L batches of the epoch, m₁ = 2, m₀ = 1 (add/remove) or m₀ = 0 (replace-one, where MoG(0) =
N(0, σ²I)). With n mod b ≠ 0 the record sits out an epoch with probability 1 − p, p = L·b/n, and then
both datasets release N(0, σ²I) (the other records are identical, so the batches are the same): P and Q
are the mixtures p·MoG(m) + (1 − p)·N(0, σ²I) (a partial epoch of r batches: p = r·b/n). We post-process
each epoch to M = max_t x_t, whose law is in closed form, F(c) = P(M ≤ c) = Φ(z)^{L−1}·[(1−p)Φ(z) + pΦ(z_m)],
z = c/σ, z_m = (c−m)/σ; bin M; and compose the epochs on a loss lattice of spacing h.

Why the result is a lower bound on δ(ε) (hence ε_lower ≤ the true ε):

1. Post-processing (M, then its bins) can only lower δ(ε) (data processing).
2. δ(ε) = Σ_bins p_i·(1 − e^{ε−ℓ_i})₊, ℓ_i = log(p_i/q_i), and its k-fold composition are non-decreasing in
   every mass p_i and every loss ℓ_i. So putting a mass p̂_i ≤ p_i at a loss ℓ̂_i ≤ ℓ_i, and dropping bins,
   gives a lower bound. Each bin's float64 mass m̂ comes with a bound R on its relative error
   (:func:`_edges_float`, :func:`_bin_masses`): log F from log Φ where F ≤ 1/2, and log S = log(1 − F) from
   the upper tails Φ(−z) where F > 1/2, so each side keeps its relative accuracy (issue 22: computing the
   upper tail from log F through logaddexp, as before, lost every digit below ~1e-16 when p < 1, i.e.
   n mod b ≠ 0 — masses off by up to 870×, a printed "lower" ε of 50.07 beside an upper of 20.78); a bin
   mass is F₊(1 − e^{log F₋ − log F₊}) or S₋(1 − e^{log S₊ − log S₋}), whose relative error is at most the
   log errors divided by the log step. The log errors follow from scipy's Φ being within 2e-14 + 4u·z²
   relative (checked against mpmath in the tests), the argument's rounding and a few u per operation.
   P‖Q then uses p̂(1 − R_p) at the loss log(p̂(1 − R_p)) − log(q̂(1 + R_q)), less the float error of the
   logs, rounded down to the lattice (Q‖P symmetrically). Bins whose bound exceeds R_MAX = 1e-6 are
   recomputed in mpmath at 50 digits (:func:`_mp_mass`); bins below 1e-280 are dropped.
3. The lattice epochs are composed by FFT; a bound on its round-off (per lattice point and convolution)
   is subtracted from every mass before δ is read; the accumulation of bins into lattice points and the
   final sum are covered by the factors (1 − 1e-9) and (1 − 1e-12); every loss also gives up
   1e-12·(1 + |ℓ|), so that the lattice value fl(K·h) of a composed loss stays below the true sum.

ε_lower is the lower end of a bisection on where this lower δ crosses the target: at ε_lower the
pair's δ is above the target, so its ε (and the mechanism's) is above ε_lower. Both orders (P‖Q and Q‖P)
and, for add/remove, the pairs (2, 1) and (1, 0) are tried. Tests: the exact one-epoch δ of the max
statistic in mpmath brackets the certified lower δ (tests/accountants/test_shuffle.py). Any result with a
lower end above its upper end raises :class:`accountants.results.BracketError` (a bug, never a number).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import overload

import numpy as np
from scipy import special

from . import validate as check
from .errors import InputError, UnsupportedError
from .events import DPSGD, Composed
from .results import EpsilonBound, check_bracket
from .sampling import Neighbouring, Poisson, Shuffle

__all__ = [
    "ShuffleBounds",
    "has_shuffle",
    "reduce_shuffle",
    "shuffle_epochs",
    "shuffle_lower_delta",
    "shuffle_lower_epsilon",
]


# ----------------------------------------------------------------------------------- upper bound


def shuffle_epochs(spec: DPSGD) -> int:
    """k = ⌈T / ⌊n/b⌋⌉, the most epochs (hence uses of one record) a T-step shuffled run spans."""
    s = spec.sampling
    if not isinstance(s, Shuffle):
        raise InputError(f"spec.sampling must be accountants.Shuffle; got {type(s).__name__}")
    return -(-spec.steps // s.steps_per_epoch)


def has_shuffle(spec: DPSGD | Composed) -> bool:
    """Whether any part of ``spec`` samples by shuffling."""
    parts = spec.parts if isinstance(spec, Composed) else (spec,)
    return any(isinstance(getattr(p, "sampling", None), Shuffle) for p in parts)


@overload
def reduce_shuffle(spec: DPSGD) -> DPSGD: ...
@overload
def reduce_shuffle(spec: Composed) -> Composed: ...
def reduce_shuffle(spec: DPSGD | Composed) -> DPSGD | Composed:
    """Each shuffled phase replaced by the full-batch Gaussian run that dominates it (module doc).

    ``DPSGD(σ, Shuffle(b, n), T, rel, K)`` ↦ ``DPSGD(σ, Poisson(1.0), ⌈T/⌊n/b⌋⌉, rel, K)``; other parts
    are unchanged. Bound: upper (no amplification by shuffling is claimed).
    """
    if isinstance(spec, DPSGD):
        if not isinstance(spec.sampling, Shuffle):
            return spec
        return DPSGD(spec.noise_multiplier, Poisson(1.0), shuffle_epochs(spec), spec.neighbouring, spec.group_size)
    if isinstance(spec, Composed):
        return Composed(tuple(reduce_shuffle(p) for p in spec.parts))
    return spec


def upper_theorem(spec: DPSGD | Composed, theorem: str | None) -> str:
    """The theorem string of a reduced spec, saying how the shuffled phases were bounded."""
    return ("shuffled batches: each record used once per epoch, ⌈T/⌊n/b⌋⌉ epochs composed as full-batch "
            "Gaussian mechanisms, no amplification (docs/shuffle.md)" + (f"; {theorem}" if theorem else ""))


def _step_rdp_shuffle(spec: DPSGD, orders):
    """One step's share of the run's RDP, k·α(KΔ)²/(2σ²) / T, for callers that compose per step
    (``calibrate``, the stateful accountant); inflated by 1e-12 so T shares never sum below the total."""
    k = shuffle_epochs(spec)
    shift = spec.group_size * (2.0 if spec.neighbouring is Neighbouring.REPLACE_ONE else 1.0)
    c = shift**2 / (2.0 * spec.noise_multiplier**2) * k / spec.steps * (1 + 1e-12)
    return orders * c, ("shuffled batches: each record once per epoch, ⌈T/⌊n/b⌋⌉ full-batch Gaussian epochs "
                        "(no amplification; Gaussian RDP, Mironov 2017)")


def _register() -> None:
    from .rdp import register_step_rdp

    for rel in Neighbouring:
        register_step_rdp(Shuffle, rel, _step_rdp_shuffle, max_group_size=1 << 30, force=True)


_register()


# ----------------------------------------------------------------------------------- lower bound

_FFT_ERR = 1e-13  # per lattice point and per FFT convolution of pmfs of mass ≤ 1 (float64, ≤ 2^24 points)
_U = 2.0**-53  # unit round-off of float64
R_MAX = 1e-6  # a bin whose float64 mass bound is looser than this is recomputed in mpmath
MP_DPS = 50  # mpmath precision of that fallback
_TINY = 1e-280  # bins with a mass below this (float64 loses relative accuracy near 1e-308) are dropped


def _phi_err(z: np.ndarray) -> np.ndarray:
    """Relative error bound of scipy's ``ndtr(±z)`` and ``log_ndtr(z)`` at a computed argument z = fl(·/σ).

    The functions themselves: ≤ 2e-14 + 4u·z² (checked against mpmath over |z| ≤ 38 by
    ``test_scipy_normal_cdf_meets_the_error_model``; the z² is exp(−z²/2) amplifying the argument's
    rounding). The argument's own relative error (≤ 2u) moves them by ≤ 2u·|z|·(|z| + 1.6)·1.45 (Mills
    ratio φ/Φ(−|z|) ≤ |z| + 1.6; |log Φ| ≥ 0.69 below the median). Sum: ≤ 2e-14 + 8u·(z² + 2|z|).
    """
    return 2e-14 + 8 * _U * (z * z + 2 * np.abs(z))


@dataclass(frozen=True)
class _MaxLaw:
    """Law of M = max_t x_t for one epoch of L batches: with probability p = k/n the record is in batch J
    (uniform) and x ~ N(m·e_J, σ²I_L), else x ~ N(0, σ²I_L). P(M ≤ c) = Φ(c/σ)^{L−1}·[(1−p)Φ(c/σ) + pΦ((c−m)/σ)].

    ``shifted`` = s > 1 (random allocation of s steps per epoch, :mod:`accountants.random_allocation`; needs p = 1):
    x ~ N(m·1_S, σ²I_L) for a uniform s-subset S, so P(M ≤ c) = Φ(c/σ)^{L−s}·Φ((c−m)/σ)^s. In general
    F = Φ(z)^{L−s}·b^s, b = (1−p)Φ(z) + pΦ(z_m), which is both."""

    sigma: float
    batches: int
    m: float
    k: int  # records' slots used in the epoch (batches·b)
    n: int  # dataset size; p = k/n
    shifted: int = 1  # coordinates shifted by m when the record is in the epoch (> 1 only with p = 1)

    def __post_init__(self) -> None:
        if self.shifted != 1 and (self.k < self.n or not 1 <= self.shifted <= self.batches):
            raise ValueError(f"_MaxLaw: shifted={self.shifted} needs p = 1 and shifted ≤ batches={self.batches}")


@dataclass(frozen=True)
class _Edges:
    """F = P(M ≤ c) and S = P(M > c) at each edge, each with a bound on the absolute error of its log."""

    low: np.ndarray  # True where F ≤ 1/2 (F is the accurate side), else S is
    log_f: np.ndarray
    err_f: np.ndarray
    log_s: np.ndarray
    err_s: np.ndarray


def _edges_float(c: np.ndarray, law: _MaxLaw) -> _Edges:
    """log F from log Φ (accurate where F ≤ 1/2) and log S from the upper tails Φ(−z) (accurate where S < 1/2).

    Each log carries an absolute-error bound from :func:`_phi_err` and a few roundings per operation
    (sums of same-signed terms; log1p(−x) for x ≤ 1/2 has relative condition ≤ 1.45; −expm1(x) for
    x ≤ 0 has relative condition ≤ 1 in x).
    """
    s, L, sh = law.sigma, law.batches, law.shifted
    z, zm = c / s, (c - law.m) / s
    ez, ezm = _phi_err(z), _phi_err(zm)
    full = law.k >= law.n
    log_p = math.log(law.k) - math.log(law.n)
    log_q = math.log(law.n - law.k) - math.log(law.n) if not full else -math.inf
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        la, lm = special.log_ndtr(z), special.log_ndtr(zm)
        log_b = lm if full else np.logaddexp(log_q + la, log_p + lm)
        log_f = (L - sh) * la + sh * log_b
        weights = abs(log_p) + (abs(log_q) if not full else 0.0) + 1.0
        err_f = ((np.maximum(ez, ezm) + 16 * _U) * (L * np.abs(la) + sh * (np.abs(lm) + weights))
                 + 16 * _U * np.abs(log_f))
        a, am = special.ndtr(-z), special.ndtr(-zm)
        bb = am if full else (law.n - law.k) / law.n * a + law.k / law.n * am
        log_f_up = (L - sh) * np.log1p(-a) + sh * np.log1p(-bb)  # relative error ≤ 1.45·(e + 3u) + 4u
        log_s = np.log(-np.expm1(log_f_up))
        # + subnormal Φ(−z) (< 2.2e-308) carry an absolute, not relative, error (≤ 1e-323 each, L + 1 of them)
        err_s = 1.5 * np.maximum(ez, ezm) + 16 * _U + (L + 1) * 1e-300 * np.exp(-log_s)
    low = log_f <= -math.log(2.0)
    return _Edges(low, log_f, err_f, log_s, err_s)


def _bin_masses(edges: np.ndarray, law: _MaxLaw) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Masses of (−∞, e₀], (e₀, e₁], …, (e_last, ∞) for the law of M, a bound R on each one's relative
    error (first order, inflated by 1 %; inf where float64 cannot say, see :func:`_certify`), and an upper
    bound on each mass (F at the right edge, S at the left edge, ×2 for their own error; else 1)."""
    e = _edges_float(edges, law)
    lf, ls, af, as_ = e.log_f, e.log_s, e.err_f, e.err_s
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # both edges on the F side: F₊·(1 − e^{d}), d = log F₋ − log F₊; 1 − e^d has relative condition ≤ 1/|d|
        d = lf[:-1] - lf[1:]
        m_low = np.exp(lf[1:]) * -np.expm1(d)
        r_low = 1.01 * (af[1:] + (af[:-1] + af[1:] + 2 * _U * np.abs(d)) / np.abs(d)) + 8 * _U
        # both edges on the S side: S₋·(1 − e^{d}), d = log S₊ − log S₋
        d = ls[1:] - ls[:-1]
        m_up = np.exp(ls[:-1]) * -np.expm1(d)
        r_up = 1.01 * (as_[:-1] + (as_[:-1] + as_[1:] + 2 * _U * np.abs(d)) / np.abs(d)) + 8 * _U
        # F side on the left, S side on the right: (1 − F₋) − S₊, absolute errors added
        f_l, s_r = np.exp(lf[:-1]), np.exp(ls[1:])
        m_mid = (1.0 - f_l) - s_r
        r_mid = 1.01 * (f_l * (af[:-1] + 4 * _U) + s_r * (as_[1:] + 4 * _U) + 4 * _U) / m_mid
        lo_l, lo_r = e.low[:-1], e.low[1:]
        inner = np.where(lo_l & lo_r, m_low, np.where(~lo_l & ~lo_r, m_up, m_mid))
        r_inner = np.where(lo_l & lo_r, r_low, np.where(~lo_l & ~lo_r, r_up, r_mid))
        r_inner = np.where(lo_l | ~lo_r, r_inner, np.inf)  # S side left of an F side: not expected, recompute
        first = (math.exp(lf[0]), 1.01 * af[0] + 4 * _U) if e.low[0] else (math.nan, math.inf)
        last = (math.exp(ls[-1]), 1.01 * as_[-1] + 4 * _U) if not e.low[-1] else (math.nan, math.inf)
    mass = np.concatenate([[first[0]], inner, [last[0]]])
    rel = np.concatenate([[first[1]], r_inner, [last[1]]])
    rel = np.where(np.isfinite(mass) & (mass > 0) & np.isfinite(rel), rel, np.inf)
    with np.errstate(over="ignore"):
        cap_f = np.where(e.low & (af < 0.5), 2 * np.exp(lf), 1.0)  # F at an edge bounds every bin to its left
        cap_s = np.where(~e.low & (as_ < 0.5), 2 * np.exp(ls), 1.0)  # S at an edge bounds every bin to its right
    cap = np.minimum(np.concatenate([cap_f, [1.0]]), np.concatenate([[1.0], cap_s]))
    return mass, rel, cap


def _mp_mass(lo: float, hi: float, law: _MaxLaw) -> tuple[float, float]:
    """The mass of (lo, hi] (either end may be ±inf) at MP_DPS digits, and its relative error bound."""
    import mpmath as mp

    with mp.workdps(MP_DPS):
        s, L, p, sh = mp.mpf(law.sigma), law.batches, mp.mpf(law.k) / law.n, law.shifted

        def cdf(c: float):  # (F, S) at c, each from the formula accurate on its side
            if c == -math.inf:
                return mp.mpf(0), mp.mpf(1)
            if c == math.inf:
                return mp.mpf(1), mp.mpf(0)
            z, zm = mp.mpf(c) / s, (mp.mpf(c) - law.m) / s
            f = mp.ncdf(z) ** (L - sh) * ((1 - p) * mp.ncdf(z) + p * mp.ncdf(zm)) ** sh
            e_up = (L - sh) * mp.log1p(-mp.ncdf(-z)) + sh * mp.log1p(-((1 - p) * mp.ncdf(-z) + p * mp.ncdf(-zm)))
            return f, -mp.expm1(e_up)

        (f0, s0), (f1, s1) = cdf(lo), cdf(hi)
        mass, scale = (f1 - f0, f1) if f1 <= 0.5 else (s0 - s1, s0)
        if mass <= 0:
            return 0.0, math.inf
        rel = float(scale / mass) * 10.0 ** (5 - MP_DPS) + 2 * _U  # working precision, then rounding to float
        return float(mass), rel


def _certify(edges: np.ndarray, law: _MaxLaw) -> tuple[np.ndarray, np.ndarray]:
    """Bin masses with relative error bounds ≤ R_MAX: float64 where its bound suffices, mpmath elsewhere.

    Bins still unresolved, or below _TINY, get mass 0 (dropping a bin only lowers the lower bound).
    """
    mass, rel, cap = _bin_masses(edges, law)
    bounds = np.concatenate([[-math.inf], edges, [math.inf]])
    for i in np.flatnonzero(~(rel <= R_MAX) & (cap >= _TINY)):  # a bin capped below _TINY is dropped anyway
        mass[i], rel[i] = _mp_mass(float(bounds[i]), float(bounds[i + 1]), law)
    ok = (rel <= R_MAX) & (mass >= _TINY)
    return np.where(ok, mass, 0.0), np.where(ok, rel, 0.0)


@dataclass(frozen=True)
class _EpochPLD:
    """A lattice PLD: mass[i] at loss (offset + i)·h (losses rounded down), for one ordered pair."""

    offset: int
    mass: np.ndarray


def _epoch_plds(sigma: float, batches: int, k: int, n: int, m1: float, m0: float, h: float,
                shifted: int = 1) -> list[_EpochPLD]:
    """Lattice PLDs of (P‖Q) and (Q‖P) for one epoch, P = law of M under MoG(m1), Q = under MoG(m0)
    (``shifted``: coordinates moved by m when the record is in, :class:`_MaxLaw`).

    Each bin's masses lie in p̂(1 ± R_p), q̂(1 ± R_q) (:func:`_certify`); P‖Q puts p̂(1 − R_p) at the loss
    log(p̂(1 − R_p)) − log(q̂(1 + R_q)) rounded down to the lattice (Q‖P symmetrically): both below the truth.
    """
    top = max(m1, m0)
    lo_c = sigma * float(special.ndtri(1e-40 ** (1.0 / batches))) if batches > 1 else -12.0 * sigma
    lo_c = min(lo_c, -12.0 * sigma)
    hi_c = top + 14.0 * sigma
    width = h * sigma**2 / max(abs(m1 - m0), 1e-12) / 2  # the loss moves by ≈ h/2 from one bin to the next
    n_bins = int(min(max((hi_c - lo_c) / width, 64), 400_000))
    edges = np.linspace(lo_c, hi_c, n_bins)
    p, rp = _certify(edges, _MaxLaw(sigma, batches, m1, k, n, shifted))
    q, rq = _certify(edges, _MaxLaw(sigma, batches, m0, k, n, shifted))
    keep = (p > 0) & (q > 0)
    p, q, rp, rq = p[keep], q[keep], rp[keep], rq[keep]
    log_p, log_q = np.log(p), np.log(q)
    # ≤ 400,000 bins summed per lattice point (np.add.at, sequential): relative error ≤ 400,000·u < 1e-9
    acc_slack = 1e-9
    out = []
    for mass, rel, other_rel, loss in ((p, rp, rq, log_p - log_q), (q, rq, rp, log_q - log_p)):
        ell = loss + np.log1p(-rel) - np.log1p(other_rel)
        # float error of the logs and the difference (≤ 4u·(|log p̂| + |log q̂|)), plus 1e-12·(1 + |ℓ|) so that
        # fl(K·h) on the composed lattice never exceeds the sum of the true losses (module doc)
        ell = ell - 4 * _U * (np.abs(log_p) + np.abs(log_q)) - 1e-12 * (1 + np.abs(ell))
        idx = np.floor(ell / h).astype(np.int64)
        offset = int(idx.min())
        arr = np.zeros(int(idx.max()) - offset + 1)
        np.add.at(arr, idx - offset, mass * (1 - rel) * (1 - acc_slack))
        out.append(_EpochPLD(offset, arr))
    return out


def _convolve(a: _EpochPLD, b: _EpochPLD) -> tuple[_EpochPLD, float]:
    n = len(a.mass) + len(b.mass) - 1
    size = 1 << (n - 1).bit_length()
    c = np.fft.irfft(np.fft.rfft(a.mass, size) * np.fft.rfft(b.mass, size), size)[:n]
    return _EpochPLD(a.offset + b.offset, c), _FFT_ERR


def _compose(parts: list[tuple[_EpochPLD, int]]) -> tuple[_EpochPLD, float]:
    """Compose each PLD its count of times (binary powering); returns the pmf and its error bound."""
    total: _EpochPLD | None = None
    err = 0.0
    for pld, count in parts:
        base, base_err = pld, 0.0
        while count:
            if count & 1:
                if total is None:
                    total, err = base, base_err
                else:
                    total, e = _convolve(total, base)
                    err = err + base_err + e
            count >>= 1
            if count:
                base, e = _convolve(base, base)
                base_err = 2 * base_err + e
    assert total is not None
    return total, err


def _delta_lower_of(pld: _EpochPLD, err: float, eps: float, h: float) -> float:
    """Σ_k max(P̂_k − err, 0)·(1 − e^{ε − k h})₊, rounded down: a lower bound on δ(ε) of the lattice pair."""
    k = pld.offset + np.arange(len(pld.mass))
    loss = k * h
    sel = loss > eps
    mass = np.maximum(pld.mass[sel] - err, 0.0)
    value = float(np.sum(mass * -np.expm1(eps - loss[sel])))
    return value * (1 - 1e-12)


def _epoch_types(spec: DPSGD) -> list[tuple[int, int, int]]:
    """(batches, slots used = batches·b, count) for the full and the trailing partial epoch; the record is
    in the epoch with probability slots/n (the n − slots records left over sit out)."""
    s = spec.sampling
    assert isinstance(s, Shuffle)
    L = s.steps_per_epoch
    full, rest = divmod(spec.steps, L)
    types = []
    if full:
        types.append((L, L * s.batch_size, full))
    if rest:
        types.append((rest, rest * s.batch_size, 1))
    return types


_PAIRS = {Neighbouring.ADD_REMOVE: ((2.0, 1.0), (1.0, 0.0)), Neighbouring.REPLACE_ONE: ((2.0, 0.0),)}


MAX_LATTICE = 1 << 22  # lattice points of a composed PLD: beyond this the spacing h is coarsened (still sound)
MAX_EPOCHS = 4096  # epochs composed; later ones are ignored (dropping outputs is post-processing: still sound)


def _lower_plds(spec: DPSGD | Composed, h: float) -> list[tuple[_EpochPLD, float, float]]:
    """Composed lattice PLDs (with error bound and lattice spacing) of every candidate pair and order."""
    parts = spec.parts if isinstance(spec, Composed) else (spec,)
    if not parts:
        return []
    for p in parts:
        if not isinstance(p.sampling, Shuffle):
            raise UnsupportedError("the shuffle lower bound covers runs whose every phase samples by shuffling")
        if p.group_size != 1:
            raise UnsupportedError(f"the shuffle lower bound is for single records; got group_size={p.group_size}")
    epochs: list[tuple[float, int, int, int, int]] = []  # (σ, batches, slots, n, count), ≤ MAX_EPOCHS in all
    budget = MAX_EPOCHS
    for p in parts:
        assert isinstance(p.sampling, Shuffle)  # checked above
        for batches, slots, count in _epoch_types(p):
            used = min(count, budget)
            if used:
                epochs.append((p.noise_multiplier, batches, slots, p.sampling.dataset_size, used))
            budget -= used
    out = []
    for m1, m0 in _PAIRS[parts[0].neighbouring]:
        step = h
        while True:
            per = [(_epoch_plds(sig, batches, slots, n, m1, m0, step), count)
                   for sig, batches, slots, n, count in epochs]
            size = max(sum(len(plds[d].mass) * count for plds, count in per) for d in (0, 1))
            if size <= MAX_LATTICE:
                break
            step *= 2 * size / MAX_LATTICE
        for direction in (0, 1):
            pld, err = _compose([(plds[direction], count) for plds, count in per])
            out.append((pld, err, step))
    return out


def shuffle_lower_delta(spec: DPSGD | Composed, epsilon: float, *, h: float = 2e-3) -> float:
    """A certified lower bound on δ(ε) of shuffled DP-SGD (Chua et al. pair, module doc).  Bound: lower."""
    check.in_range(0.0, None, closed="left", epsilon=epsilon)
    return max((_delta_lower_of(pld, err, float(epsilon), step) for pld, err, step in _lower_plds(spec, h)),
               default=0.0)


def shuffle_lower_epsilon(spec: DPSGD | Composed, delta: float, *, h: float = 2e-3, tol: float = 1e-4) -> float:
    """A certified lower bound on ε(δ) of shuffled DP-SGD (Chua et al. pair, module doc).  Bound: lower.

    Returns the lower end of a bisection bracket on the largest ε whose lower δ(ε) exceeds ``delta``
    (0.0 when even δ(0) does not).
    """
    check.in_range(0.0, 1.0, closed="neither", delta=delta)
    return _lower_epsilon_of(_lower_plds(spec, h), delta, tol)


def _lower_epsilon_of(plds: list, delta: float, tol: float) -> float:
    """The lower end of a bisection bracket on the largest ε whose certified lower δ(ε) over ``plds``
    (``(pld, err, step)`` triples, as :func:`_lower_plds` returns) exceeds ``delta``; 0.0 if δ(0) does not."""
    if not plds:
        return 0.0

    def d(eps: float) -> float:
        return max(_delta_lower_of(pld, err, eps, step) for pld, err, step in plds)

    if d(0.0) <= delta:
        return 0.0
    hi = max((pld.offset + len(pld.mass)) * step for pld, _, step in plds)  # δ(ε) = 0 beyond the largest loss
    lo = 0.0
    while hi - lo > tol * max(lo, 1e-3):
        mid = 0.5 * (lo + hi)
        if d(mid) > delta:
            lo = mid
        else:
            hi = mid
    return lo


# ----------------------------------------------------------------------------------- both, and Poisson


@dataclass(frozen=True)
class ShuffleBounds:
    """ε of shuffled DP-SGD at δ: ``lower`` ≤ true ε ≤ ``upper``, and the Poisson ε usually quoted.

    Attributes:
        lower: certified lower bound (Chua et al. pair), or None where it does not apply.
        upper: the sound upper bound (:class:`EpsilonBound`).
        poisson: ε if the same run were Poisson sampled at q = b/n (what is often reported instead).
    """

    lower: float | None
    upper: EpsilonBound
    poisson: EpsilonBound

    def __post_init__(self) -> None:
        check_bracket(self.lower, self.upper.value, "epsilon")  # a lower end above the upper is a bug
