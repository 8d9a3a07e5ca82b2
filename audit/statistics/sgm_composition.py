"""The T-fold Poisson-subsampled Gaussian pair, discretised so that it DOMINATES the exact one.

Pair (per canary, one run of DP-SGD, in units of the noise): P = N(0, 1)^⊗T (out) and
Q = ((1 − q) N(0, 1) + q N(μ, 1))^⊗T (in). One step's privacy loss ℓ(x) = log(1 − q + q e^{μx − μ²/2})
increases in x.

Dominating discretisation (what a null of the order statistic needs: a pair of which the exact one is a
post-processing has smaller decoder errors at every mass, so its p-values are valid for the exact pair). Cut the
loss axis into cells ((k − 1)h, kh]; each cell's sub-pair is replaced by the two-atom pair at its ends with the
same P- and Q-mass ("connect the dots", Doroshenko et al. 2022), which it is a post-processing of; the first cell
(lower end −∞, mass ≤ Φ(−z)) and the mass above the window become atoms at the upper end plus perfectly separated
atoms. A product of dominating pairs dominates the product, so the T-fold FFT composition of the one-step rows
(:func:`accountants.pld.compose.fft_compose`, with its proved round-off bound R) is a dominating pair on the
lattice (:func:`composed_sgm`). The composition of the cell masses themselves (:func:`composed_cells`) is a
post-processing of the exact pair: with the loss rounded down (up) it gives LOWER bounds on the hockey-stick
divergences of both orderings, hence on ε(δ) (:func:`composed_epsilon_lower`).

Every partial sum of the computed rows is within :attr:`ComposedSgm.slack` of the exact one (FFT round-off
√N·R per row, the one-step masses' float error, the cumulative-sum round-off): callers pay it in the rounding
direction they need.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import scipy.special
import torch

from accountants.errors import InputError
from accountants.pld.compose import fast_length, fft_compose

from .gdp import _gdp_epsilon

__all__ = ["ComposedSgm", "composed_cells", "composed_epsilon_lower", "composed_mean_error", "composed_sgm",
           "reveal_probability"]

_Z = 9.0  # window: x ∈ [−z, μ + z]; each tail has mass ≤ Φ(−9) ≈ 1.1e-19 (made perfectly separated: dominating)
_LATTICE = 2 ** 14  # lattice points of the composed loss (one FFT of at most this length, 2 rows)
_H_MIN = 1e-4  # finest loss cell
_REL_NDTR = 1e-15  # assumed relative error of scipy.special.ndtr (cephes: a few ulp; spot-checked against mpmath)


@dataclass(frozen=True)
class ComposedSgm:
    """A T-fold composed pair on the loss lattice ``loss`` (increasing): Q- and P-mass of each atom.

    Attributes:
        loss: (N,) the lattice, (T·k_min + j)·h.
        q_mass, p_mass: (N,) the masses (clamped ≥ 0).
        q_only, p_only: the masses of the perfectly separated atoms (Q-only: loss +∞; P-only: loss −∞).
        slack: a bound on the error of any partial sum of ``q_mass`` or of ``p_mass`` (with weights in [0, 1]),
            and of ``q_only`` and ``p_only``.
    """

    loss: np.ndarray
    q_mass: np.ndarray
    p_mass: np.ndarray
    q_only: float
    p_only: float
    slack: float


def reveal_probability(q: float, steps: int) -> float:
    """1 − (1 − q)^T: the probability that an included canary is drawn at least once (μ = ∞ reveals it)."""
    return 1.0 if q >= 1.0 else float(-math.expm1(steps * math.log1p(-q)))


def _check(q: float, mu: float, steps: int) -> None:
    if isinstance(q, bool) or not isinstance(q, (int, float)) or not 0.0 < q <= 1.0:
        raise InputError(f"q must be in (0, 1]; got {q!r}")
    if isinstance(mu, bool) or not isinstance(mu, (int, float)) or not 0.0 < mu <= 25.0:  # e^{loss} stays finite
        raise InputError(f"mu must be a number in (0, 25]; got {mu!r}")
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or not 1 <= steps <= 10_000:
        raise InputError(f"steps must be an integer in [1, 10000]; got {steps!r}")


def _x_of_loss(loss: np.ndarray, q: float, mu: float) -> np.ndarray:
    """x(ℓ) = μ/2 + (log(e^ℓ − 1 + q) − log q)/μ, −∞ where ℓ ≤ log(1 − q) (below the loss's range)."""
    arg = np.expm1(loss) + q
    with np.errstate(divide="ignore", invalid="ignore"):
        x = mu / 2 + (np.log(np.where(arg > 0, arg, 1.0)) - math.log(q)) / mu
    return np.where(arg > 0, x, -np.inf)


def _cell_masses(x: np.ndarray, q: float, mu: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(P, Q) masses of the cells (x_{k−1}, x_k] and bounds on their float errors.

    CDF differences left of μ/2, survival differences right of it (no cancellation near 1). Error model: ndtr
    has relative error ≤ _REL_NDTR (scipy's cephes ndtr/erfc, a few ulp), so a difference of two values ≤ F has
    absolute error ≤ 2·_REL_NDTR·F + 2u·F.
    """
    nd = scipy.special.ndtr

    def masses(shift: float) -> tuple[np.ndarray, np.ndarray]:
        cdf, sf = nd(x - shift), nd(shift - x)
        mid = 0.5 * (x[:-1] + x[1:])
        left = mid < mu / 2
        m = np.maximum(np.where(left, np.diff(cdf), -np.diff(sf)), 0.0)
        scale = np.where(left, cdf[1:], sf[:-1])
        return m, (2 * _REL_NDTR + 4 * 2.0 ** -53) * scale

    p, ep = masses(0.0)
    if q >= 1:
        qm, eq = masses(mu)
        return p, qm, ep, eq
    n, en = masses(mu)
    return p, (1 - q) * p + q * n, ep, (1 - q) * ep + q * en + 2.0 ** -52 * ((1 - q) * p + q * n)


@dataclass(frozen=True)
class _Lattice:
    """One step on the lattice: cell k is ((k − 1)h, kh] for k > k_min, cell k_min is (−∞, k_min h] ⊆ {x ≤ −z}."""

    h: float
    k_min: int
    p_cell: np.ndarray
    q_cell: np.ndarray
    err_p: np.ndarray  # bounds on the float error of each cell mass
    err_q: np.ndarray
    q_tail: float  # Q[ℓ > k_max h] ≤ Φ(−z)
    p_tail: float


@functools.lru_cache(maxsize=256)
def _lattice(q: float, mu: float, steps: int) -> _Lattice:
    def ell(x: float) -> float:
        return float(np.log1p(q * np.expm1(mu * x - mu * mu / 2)))

    lo, hi = ell(-_Z), ell(mu + _Z)
    per_step = max(4, _LATTICE // steps)
    h = max(_H_MIN, (hi - lo) / (per_step - 2))
    k_min, k_max = math.floor(lo / h), math.ceil(hi / h)
    k = np.arange(k_min, k_max + 1)
    x = _x_of_loss(np.concatenate([[-np.inf], k * h]), q, mu)
    p_cell, q_cell, err_p, err_q = _cell_masses(x, q, mu)
    x_top = float(x[-1])
    q_tail = float((1 - q) * scipy.special.ndtr(-x_top) + q * scipy.special.ndtr(mu - x_top))
    return _Lattice(h, k_min, p_cell, q_cell, err_p, err_q, q_tail, float(scipy.special.ndtr(-x_top)))


def _compose(lat: _Lattice, rows_p: np.ndarray, rows_q: np.ndarray, steps: int, p_only: float, q_only: float,
             input_error: float) -> ComposedSgm:
    """T-fold FFT composition of one step's rows (no wrap-around), with the slack of :class:`ComposedSgm`."""
    n_step = rows_p.size
    size = steps * (n_step - 1) + 1
    n = fast_length(size)
    rows = torch.zeros(2, n, dtype=torch.float64)
    rows[0, :n_step] = torch.from_numpy(rows_q)
    rows[1, :n_step] = torch.from_numpy(rows_p)
    with torch.no_grad():
        out, r_bound, _ = fft_compose([(rows, steps)])
    comp = np.clip(out.numpy()[:, :size], 0.0, None)
    loss = (steps * lat.k_min + np.arange(size)) * lat.h
    # FFT round-off on any weighted partial sum (√N·R, Cauchy–Schwarz), the inputs' L1 error composed T times,
    # the partial sums' own round-off
    slack = math.sqrt(n) * max(r_bound) + steps * input_error + 2.0 * n * 2.0 ** -53
    q_all = -math.expm1(steps * math.log1p(-min(q_only, 1.0 - 1e-16)))
    p_all = -math.expm1(steps * math.log1p(-min(p_only, 1.0 - 1e-16)))
    return ComposedSgm(loss, comp[0], comp[1], q_all, p_all, slack * (1 + 1e-9))


@functools.lru_cache(maxsize=256)
def composed_sgm(q: float, mu: float, steps: int) -> ComposedSgm:
    """The dominating discretisation of the T-fold SGM pair ("connect the dots").  Bound: dominating pair.

    Cell k ((k − 1)h, kh] has likelihood ratios in [e^{(k−1)h}, e^{kh}], so its sub-pair (P_k, Q_k) is a
    post-processing of the two-atom pair at losses a = (k − 1)h and b = kh with the same P- and Q-mass
    (Doroshenko, Ghazi, Kamath, Kumar, Manurangsi 2022, "Connect the dots", arXiv:2207.04380, §3):
    P_b = (Q_k − e^a P_k)/(e^b − e^a), P_a = P_k − P_b, Q = e^{loss}·P on each atom. Cell k_min (lower end −∞,
    mass ≤ Φ(−z)) becomes an atom at its upper end plus a P-only atom; the mass above the window a Q-only and a
    P-only atom (perfectly separated: dominating). A product of dominating pairs dominates the product.
    """
    _check(q, mu, steps)
    t = int(steps)
    lat = _lattice(float(q), float(mu), t)
    h, k = lat.h, lat.k_min + np.arange(lat.p_cell.size)
    ea = np.exp((k - 1) * h)
    pb = np.clip((lat.q_cell - ea * lat.p_cell) / (ea * math.expm1(h)), 0.0, lat.p_cell)
    pa = lat.p_cell - pb
    rows_p = np.zeros(k.size)
    rows_p += pb
    rows_p[:-1] += pa[1:]  # cell k's lower atom sits on lattice point k − 1
    first_dominated = lat.q_cell[0] * math.exp(-k[0] * h)  # cell k_min: atom at its upper end
    rows_p[0] += first_dominated - pb[0]
    p_only = float(lat.p_cell[0] - first_dominated) + lat.p_tail
    rows_q = rows_p * np.exp(k * h)
    # per cell, P_b's float error ≤ (ΔQ + e^a ΔP)/(e^b − e^a) (+ its own rounding), P_a's ≤ ΔP + ΔP_b; the Q-atoms
    # are e^{loss} times the P-atoms: Q_b's error ≤ e^b ΔP_b, Q_a's ≤ e^a ΔP_a
    d_pb = (lat.err_q + ea * lat.err_p) / (ea * math.expm1(h)) * (1 + 1e-12) + 4 * 2.0 ** -53 * lat.p_cell
    d_pa = lat.err_p + d_pb
    err_p = float(np.sum(d_pb + d_pa))
    err_q = float(np.sum(ea * math.exp(h) * d_pb + ea * d_pa)) + 4 * 2.0 ** -53
    return _compose(lat, rows_p, rows_q, t, p_only, lat.q_tail, max(err_p, err_q))


@functools.lru_cache(maxsize=256)
def composed_cells(q: float, mu: float, steps: int) -> ComposedSgm:
    """The T-fold composition of the cell-quantised pair (P_k, Q_k) at lattice point k: a post-processing of the
    exact pair (cell index, then the sum), so its hockey-stick divergences are LOWER bounds.  Bound: dominated."""
    _check(q, mu, steps)
    t = int(steps)
    lat = _lattice(float(q), float(mu), t)
    err = max(float(np.sum(lat.err_p)), float(np.sum(lat.err_q)))
    return _compose(lat, lat.p_cell, lat.q_cell, t, 0.0, 0.0, err)


def _delta_lower(c: ComposedSgm, eps: float, shift: float, first: float) -> float:
    """Lower bound on max over both orderings of δ(ε) from the composed quantised pair (:func:`composed_cells`).

    Q‖P: E_Q[(1 − e^{ε − L})_+] with each atom's loss rounded DOWN to loss − T·h (every step's cell lower end; the
    compositions through cell k_min, whose lower end is −∞, have Q-mass ≤ ``first`` and are paid for); P‖Q:
    E_P[(1 − e^{ε + L})_+] with the loss at the cells' upper ends. Both weights lie in [0, 1], so each sum is
    within the slack.
    """
    up, down = c.loss - shift > eps, c.loss < -eps  # the atoms with a positive weight
    w_qp = -np.expm1(eps - (c.loss[up] - shift))
    w_pq = -np.expm1(eps + c.loss[down])
    d_qp = float(np.dot(c.q_mass[up], w_qp)) - first
    d_pq = float(np.dot(c.p_mass[down], w_pq))
    return max(d_qp, d_pq) - c.slack


def composed_epsilon_lower(q: float, mu: float, steps: int, delta: float) -> float:
    """A lower bound on ε(δ) of the T-fold SGM pair, the larger of its two orderings.  Bound: lower.

    :func:`_delta_lower` on the composed cell-quantised pair (:func:`composed_cells`) is a lower bound on δ(ε) in
    each ordering; ε_lower = inf{ε ≥ 0 :
    δ_lower(ε) ≤ δ} by bisection, returning the lower end. μ = ∞: the reveal pair (δ_{Q‖P}(ε) = 1 − (1 − q)^T for
    every ε ≥ 0): ∞ when that exceeds δ, else 0. q = 1: the Gaussian pair μ√T, Dong et al. (2019) Cor. 2.13,
    less the root finder's tolerance.
    """
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0.0 < delta < 1.0:
        raise InputError(f"delta must be in (0, 1); got {delta!r}")
    if mu == math.inf:
        _check(q, 1.0, steps)
        return math.inf if reveal_probability(q, int(steps)) > delta else 0.0
    _check(q, mu, steps)
    if q >= 1.0:
        e = _gdp_epsilon(mu * math.sqrt(steps), delta)
        return max(0.0, e - 1e-9 - 1e-12 * e)
    c = composed_cells(float(q), float(mu), int(steps))
    lat = _lattice(float(q), float(mu), int(steps))
    shift, first = int(steps) * lat.h, int(steps) * float(lat.q_cell[0] + lat.err_q[0])

    def above(e: float) -> bool:
        return _delta_lower(c, e, shift, first) > delta

    if not above(0.0):
        return 0.0
    lo, hi = 0.0, 1.0
    while above(hi):
        lo, hi = hi, 2.0 * hi
        if hi > 1e4:
            return lo
    while hi - lo > 1e-5 * (1.0 + lo):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if above(mid) else (lo, mid)
    return lo


@functools.lru_cache(maxsize=256)
def _knots(q: float, mu: float, steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(knots_v, knots_g, slopes, margin) of the dominating pair's G(v), atoms by decreasing confidence."""
    c = composed_sgm(q, mu, steps)
    conf = np.abs(c.loss)
    order = np.argsort(-conf, kind="stable")
    mass = 0.5 * (c.q_mass + c.p_mass)[order]
    slope = 1.0 / (1.0 + np.exp(np.minimum(conf[order], 700.0)))
    v0 = 0.5 * (c.q_only + c.p_only)
    knots_v = v0 + np.concatenate([[0.0], np.cumsum(mass)])
    knots_g = np.concatenate([[0.0], np.cumsum(mass * slope)])
    return knots_v, knots_g, slope, 1.5 * c.slack * (1 + 1e-9)


def composed_mean_error(q: float, mu: float, steps: int, v: np.ndarray) -> np.ndarray:
    """γ̄(v), the mean decoder error of the top-v mixture mass of the T-fold SGM pair, rounded DOWN.

    Atoms of the dominating pair (:func:`composed_sgm`) by decreasing confidence |loss| (the separated atoms
    first, error 0); G(v) is convex piecewise linear with slope 1/(1 + e^{|loss|}) on each atom. Each v takes G on
    the supporting line of its computed segment, less 1.5·slack (G's knots are off by ≤ slack/2, their abscissae
    by ≤ slack, at slope ≤ ½): convexity makes that a lower value of the exact G.
    """
    knots_v, knots_g, slope, margin = _knots(float(q), float(mu), int(steps))
    j = np.clip(np.searchsorted(knots_v, v, side="right"), 1, slope.size)  # segment j: [knots_v[j−1], knots_v[j]]
    g = knots_g[j - 1] + np.maximum(v - knots_v[j - 1], 0.0) * slope[j - 1]
    g = np.where(v < knots_v[0], 0.0, g)
    return np.minimum(np.maximum(g - margin, 0.0) / v, 0.5)
