"""Dominating pairs for one step of DP-SGD, as one-dimensional Gaussian mixtures.

A dominating pair (P, Q) of a mechanism M under an *ordered* neighbouring relation satisfies
H_α(M(D) ‖ M(D')) ≤ H_α(P ‖ Q) for every α ≥ 0 and every ordered neighbouring pair (D, D')
(Zhu, Dong, Wang, AISTATS 2022, arXiv:2106.08567v3, Def. 7). By their Thm 10 the product of the
per-step pairs dominates the adaptive composition, so the T-step privacy profile of one ordered
direction is the profile of (P^T, Q^T). Add/remove is symmetric as a relation but the two ordered
directions have different pairs, so every direction is composed on its own and the profile is the
maximum over directions (the direction is fixed by the one pair of datasets for all T steps).

Every pair here is oriented so that the privacy loss L(x) = log p(x)/q(x) is *increasing* in x,
with x ~ P; the discretiser relies on that (bin masses are exact CDF differences at the inverse
images of the bin edges). Derivations and numerical checks: ``docs/dominating-pairs.md``.

Noise is in units of the clip norm C: σ is the noise multiplier, a shift ``s`` is the sensitivity
in units of C (1 for Poisson add/remove, 2 for a replacement of the whole contribution).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from ..errors import UnsupportedError
from ..events import DPSGD
from ..sampling import FixedSize, Neighbouring, Poisson, TruncatedPoisson

__all__ = [
    "GaussianShift",
    "LabelledPair",
    "MixturePair",
    "PoissonAdd",
    "PoissonGroupAdd",
    "PoissonGroupRemove",
    "PoissonRemove",
    "PoissonReplace",
    "StepPairs",
    "SymmetrisedRemove",
    "step_pairs",
    "unsupported_reason",
]


@dataclass(frozen=True, slots=True)
class MixturePair:
    """P = Σ a_i N(m_i, σ²) against Q = Σ b_j N(n_j, σ²), with L(x) = log p/q increasing in x.

    Subclasses give the closed-form inverse of the loss and its range.
    """

    sigma: float

    # --- the mixtures -------------------------------------------------------------------------
    def p_components(self) -> tuple[tuple[float, float], ...]:
        """(weight, mean) of the components of P."""
        raise NotImplementedError

    def loss(self, x: Tensor) -> Tensor:
        """The privacy loss log p(x)/q(x)."""
        raise NotImplementedError

    def loss_inverse(self, value: Tensor) -> Tensor:
        """x with L(x) = value (−inf/+inf below/above the range of L)."""
        raise NotImplementedError

    @property
    def symmetric(self) -> bool:
        """True when (Q, P) is (P, Q) reflected, so both ordered directions have one profile."""
        return False

    def q_components(self) -> tuple[tuple[float, float], ...]:
        """(weight, mean) of the components of Q."""
        raise NotImplementedError

    # --- generic mixture helpers ----------------------------------------------------------------
    def cdf(self, x: Tensor, of: str = "p") -> Tensor:
        """P(X ≤ x) (or Q(X ≤ x) with ``of="q"``), accurate where it is below 1/2."""
        return self.tail_mass(x, torch.zeros_like(x, dtype=torch.bool), of)

    def sf(self, x: Tensor, of: str = "p") -> Tensor:
        """P(X > x) (or Q(X > x)), accurate where it is below 1/2."""
        return self.tail_mass(x, torch.ones_like(x, dtype=torch.bool), of)

    def tail_mass(self, x: Tensor, upper: Tensor, of: str = "p") -> Tensor:
        """P(X > x) where ``upper`` is True, else P(X ≤ x); Q instead of P with ``of="q"``."""
        comps = self.p_components() if of == "p" else self.q_components()
        sign = torch.where(upper, -1.0, 1.0).to(x.dtype)
        out = torch.zeros_like(x)
        for w, m in comps:
            # exp(log Φ), not torch.special.ndtr: the latter loses relative accuracy below −5
            # (Φ(−7.88) off by 1.6 %, Φ(−10) = 0 in torch 2.13), and the tails carry δ.
            out = out + w * torch.exp(torch.special.log_ndtr(sign * (x - m) / self.sigma))
        return out

    def pdf(self, x: Tensor) -> Tensor:
        """Density of P."""
        out = torch.zeros_like(x)
        c = 1.0 / (self.sigma * math.sqrt(2.0 * math.pi))
        for w, m in self.p_components():
            out = out + (w * c) * torch.exp(-0.5 * ((x - m) / self.sigma) ** 2)
        return out

    def x_range(self, tail: float) -> tuple[float, float]:
        """[x_lo, x_hi] with P(X < x_lo) ≤ tail and P(X > x_hi) ≤ tail (mixture weights sum to 1)."""
        z = -float(torch.special.ndtri(torch.tensor(tail, dtype=torch.float64)))
        means = [m for _, m in self.p_components()]
        return min(means) - z * self.sigma, max(means) + z * self.sigma


def _log_expm1_plus_q(v: Tensor, q: float) -> Tensor:
    """log(e^v − 1 + q) (−inf where it is ≤ 0), without the overflow of expm1 for v > 709: for
    v > 30 it is v + log1p(−(1 − q)e^{−v}). Loss inverses at per-step losses in the hundreds of
    thousands (σ ~ 1e-3) depend on it: an overflowed edge would put that mass at L ≈ 709."""
    big = v > 30.0
    vb = torch.where(big, v, torch.full_like(v, 31.0))
    far = vb + torch.log1p(-(1.0 - q) * torch.exp(-vb))
    inside = torch.expm1(torch.where(big, torch.zeros_like(v), v)) + q
    near = torch.where(inside > 0, torch.log(torch.where(inside > 0, inside, torch.ones_like(inside))),
                       torch.full_like(v, -math.inf))
    return torch.where(big, far, near)


def _log_mix_ratio(q: float, arg: Tensor) -> Tensor:
    """log(1 − q + q e^arg), stable for q → 0, q → 1 and large |arg|."""
    # log(1-q + q e^a) = logaddexp(log1p(-q), log q + a); q < 1 here.
    return torch.logaddexp(torch.full_like(arg, math.log1p(-q)), math.log(q) + arg)


@dataclass(frozen=True, slots=True)
class GaussianShift(MixturePair):
    """P = N(s, σ²), Q = N(0, σ²): L(x) = (2sx − s²)/(2σ²). Symmetric (reflect x → s − x)."""

    shift: float = 1.0

    def p_components(self) -> tuple[tuple[float, float], ...]:
        return ((1.0, self.shift),)

    def q_components(self) -> tuple[tuple[float, float], ...]:
        return ((1.0, 0.0),)

    def loss(self, x: Tensor) -> Tensor:
        return (2.0 * self.shift * x - self.shift**2) / (2.0 * self.sigma**2)

    def loss_inverse(self, value: Tensor) -> Tensor:
        return value * self.sigma**2 / self.shift + 0.5 * self.shift

    @property
    def symmetric(self) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class PoissonRemove(MixturePair):
    """P = (1−q)N(0, σ²) + qN(s, σ²), Q = N(0, σ²) ("remove": the record is in D, not in D').

    L(x) = log(1 − q + q e^{(2sx − s²)/(2σ²)}) ∈ (log(1−q), ∞), increasing.
    """

    q: float = 0.01
    shift: float = 1.0

    def p_components(self) -> tuple[tuple[float, float], ...]:
        return ((1.0 - self.q, 0.0), (self.q, self.shift))

    def q_components(self) -> tuple[tuple[float, float], ...]:
        return ((1.0, 0.0),)

    def loss(self, x: Tensor) -> Tensor:
        return _log_mix_ratio(self.q, (2.0 * self.shift * x - self.shift**2) / (2.0 * self.sigma**2))

    def loss_inverse(self, value: Tensor) -> Tensor:
        # e^l = 1 − q + q e^a  ⇒  a = log((expm1(l) + q)/q); x = s/2 + σ² a / s.
        a = _log_expm1_plus_q(value, self.q) - math.log(self.q)
        ok = torch.isfinite(a) | (a > 0)
        x = 0.5 * self.shift + self.sigma**2 * a / self.shift
        return torch.where(ok, x, torch.full_like(x, -math.inf))


@dataclass(frozen=True, slots=True)
class PoissonAdd(MixturePair):
    """P = N(0, σ²), Q = (1−q)N(0, σ²) + qN(−s, σ²): the "add" direction, reflected (x → −x).

    L(x) = −log(1 − q + q e^{(−2sx − s²)/(2σ²)}) ∈ (−∞, −log(1−q)), increasing.
    """

    q: float = 0.01
    shift: float = 1.0

    def p_components(self) -> tuple[tuple[float, float], ...]:
        return ((1.0, 0.0),)

    def q_components(self) -> tuple[tuple[float, float], ...]:
        return ((1.0 - self.q, 0.0), (self.q, -self.shift))

    def loss(self, x: Tensor) -> Tensor:
        return -_log_mix_ratio(self.q, (-2.0 * self.shift * x - self.shift**2) / (2.0 * self.sigma**2))

    def loss_inverse(self, value: Tensor) -> Tensor:
        # e^{−l} = 1 − q + q e^a, a = (−2sx − s²)/(2σ²)  ⇒  x = −s/2 − σ² a / s.
        a = _log_expm1_plus_q(-value, self.q) - math.log(self.q)
        ok = torch.isfinite(a) | (a > 0)
        x = -0.5 * self.shift - self.sigma**2 * a / self.shift
        return torch.where(ok, x, torch.full_like(x, math.inf))


@dataclass(frozen=True, slots=True)
class PoissonReplace(MixturePair):
    """P = (1−q)N(0, σ²) + qN(s, σ²), Q = (1−q)N(0, σ²) + qN(−s, σ²). Symmetric (x → −x).

    The replace-one pair of dp_accounting's PLD (each substituted record moves the sum by C in
    opposite directions, 2C apart). L is increasing with range (−∞, ∞).
    """

    q: float = 0.01
    shift: float = 1.0

    def p_components(self) -> tuple[tuple[float, float], ...]:
        return ((1.0 - self.q, 0.0), (self.q, self.shift))

    def q_components(self) -> tuple[tuple[float, float], ...]:
        return ((1.0 - self.q, 0.0), (self.q, -self.shift))

    def loss(self, x: Tensor) -> Tensor:
        c = self.shift**2 / (2.0 * self.sigma**2)
        b = self.shift / self.sigma**2
        return _log_mix_ratio(self.q, b * x - c) - _log_mix_ratio(self.q, -b * x - c)

    def loss_inverse(self, value: Tensor) -> Tensor:
        # u = e^{sx/σ²}, c = e^{−s²/(2σ²)}: q c u² + (1−q)(1−e^l) u − q c e^l = 0, positive root;
        # the two algebraically equal forms avoid cancellation on either sign of (1 − e^l).
        q, s2 = self.q, self.sigma**2
        log_qc = math.log(q) - self.shift**2 / (2.0 * s2)
        qc = math.exp(log_qc)
        el = torch.exp(value)
        b = (1.0 - q) * (-torch.expm1(value))
        disc = torch.sqrt(b * b + 4.0 * qc * qc * el)
        pos = b >= 0
        u_pos = 2.0 * qc * el / (b + disc)              # b ≥ 0: no cancellation
        u_neg = (disc - b) / (2.0 * qc)                 # b < 0: no cancellation
        u = torch.where(pos, u_pos, u_neg)
        # For |l| > 300, (e^l)² overflows: log u = l + log(1 − e^{−l}) + log(1 − q) − log(qc) (the
        # dominant root; the neglected relative term is O(q²c²e^{−l})), and symmetrically below.
        far = value.abs() > 300.0
        va = torch.where(far, value.abs(), torch.full_like(value, 301.0))
        log_u_far = va + torch.log1p(-torch.exp(-va)) + math.log1p(-q) - log_qc
        log_u = torch.where(far, torch.sign(value) * log_u_far, torch.log(u))
        return s2 / self.shift * log_u

    @property
    def symmetric(self) -> bool:
        return True


@dataclass(frozen=True, slots=True)
class SymmetrisedRemove(MixturePair):
    """The remove pair (1−q)N(0,σ²) + qN(s,σ²) vs N(0,σ²) for α ≥ 1, glued to its reverse for α < 1.

    On x > 0, P and Q are the remove pair's P_r, Q_r at x + s/2 (where L_r > 0); on x < 0 they are
    the (reflected) add pair's P_a, Q_a at x − s/2 (where L_a < 0); an atom at x = 0 of the same
    mass m₀ = 1 − P_r(X > s/2) − P_a(X ≤ −s/2) ≥ 0 under both (L = 0). Hence
    H_α(P‖Q) = H_α(P_r‖Q_r) for α ≥ 1 and H_α(Q_r‖P_r) for α < 1. Symmetric (x → −x swaps P, Q).
    Used for fixed-size WOR replace-one; proof in docs/dominating-pairs.md §4b.
    """

    q: float = 0.01
    shift: float = 2.0

    def _parts(self) -> tuple[PoissonRemove, PoissonAdd]:
        return PoissonRemove(self.sigma, q=self.q, shift=self.shift), PoissonAdd(self.sigma, q=self.q, shift=self.shift)

    def p_components(self) -> tuple[tuple[float, float], ...]:
        # Only used by the discretiser to choose where to switch from CDF to survival-function
        # differences (the mean); 0 is the atom, between the two halves.
        return ((1.0, 0.0),)

    def q_components(self) -> tuple[tuple[float, float], ...]:
        return ((1.0, 0.0),)

    def loss(self, x: Tensor) -> Tensor:
        rm, ad = self._parts()
        c = 0.5 * self.shift
        right = rm.loss(torch.clamp(x, min=0.0) + c)
        left = ad.loss(torch.clamp(x, max=0.0) - c)
        return torch.where(x > 0, right, torch.where(x < 0, left, torch.zeros_like(x)))

    def loss_inverse(self, value: Tensor) -> Tensor:
        rm, ad = self._parts()
        c = 0.5 * self.shift
        right = rm.loss_inverse(torch.clamp(value, min=0.0)) - c
        left = ad.loss_inverse(torch.clamp(value, max=0.0)) + c
        return torch.where(value > 0, right, torch.where(value < 0, left, torch.zeros_like(value)))

    def tail_mass(self, x: Tensor, upper: Tensor, of: str = "p") -> Tensor:
        """P(X > x) where ``upper``, else P(X ≤ x) (the atom at 0 is in {X ≤ 0})."""
        rm, ad = self._parts()
        c = 0.5 * self.shift
        yes = torch.ones_like(x, dtype=torch.bool)
        pos = x >= 0
        sf_pos = rm.tail_mass(torch.clamp(x, min=0.0) + c, yes, of)              # x ≥ 0: P(X > x)
        cdf_neg = ad.tail_mass(torch.clamp(x, max=0.0) - c, ~yes, of)            # x < 0: P(X ≤ x)
        sf = torch.where(pos, sf_pos, 1.0 - cdf_neg)
        cdf = torch.where(pos, 1.0 - sf_pos, cdf_neg)
        return torch.where(upper, sf, cdf)

    def x_range(self, tail: float) -> tuple[float, float]:
        z = -float(torch.special.ndtri(torch.tensor(tail, dtype=torch.float64)))
        c = 0.5 * self.shift
        return min(-1e-3, c - z * self.sigma), max(1e-3, c + z * self.sigma)

    @property
    def symmetric(self) -> bool:
        return True


MAX_GROUP = 64


def _group_log_weights(q: float, k: int) -> Tensor:
    """log Bin(j; K, q), j = 0..K."""
    j = torch.arange(k + 1, dtype=torch.float64)
    lb = torch.lgamma(torch.tensor(k + 1.0, dtype=torch.float64)) - torch.lgamma(j + 1) - torch.lgamma(k - j + 1)
    return lb + j * math.log(q) + (k - j) * math.log1p(-q)


@dataclass(frozen=True, slots=True)
class PoissonGroupRemove(MixturePair):
    """P = Σ_j Bin(j; K, q) N(j, σ²), Q = N(0, σ²): a group of K records removed (in D, not in D').

    L(x) = log Σ_j Bin(j; K, q) e^{(2jx − j²)/(2σ²)} ∈ (K log(1−q), ∞): increasing and convex (a
    log-sum-exp of increasing affine functions). Proof of dominance: docs/dominating-pairs.md §4a.
    """

    q: float = 0.01
    group: int = 2

    def _logw(self, like: Tensor) -> Tensor:
        return _group_log_weights(self.q, self.group).to(like.device)

    def p_components(self) -> tuple[tuple[float, float], ...]:
        w = _group_log_weights(self.q, self.group).exp().tolist()
        return tuple((wj, float(j)) for j, wj in enumerate(w))

    def q_components(self) -> tuple[tuple[float, float], ...]:
        return ((1.0, 0.0),)

    def x_range(self, tail: float) -> tuple[float, float]:
        """Components of weight ≤ τ = tail/(2(K+1)) are left out of the upper end (their total mass
        is ≤ tail/2); the others each put ≤ τ above k_max + zσ with Φ̄(z) = τ. Lower end: N(0, σ²)."""
        tau = tail / (2.0 * (self.group + 1))
        logw = _group_log_weights(self.q, self.group)
        k_max = int(torch.nonzero(logw > math.log(tau)).max())
        z_hi = -float(torch.special.ndtri(torch.tensor(tau, dtype=torch.float64)))
        z_lo = -float(torch.special.ndtri(torch.tensor(tail, dtype=torch.float64)))
        return -z_lo * self.sigma, k_max + z_hi * self.sigma

    def _loss_and_slope(self, x: Tensor) -> tuple[Tensor, Tensor]:
        j = torch.arange(self.group + 1, dtype=x.dtype, device=x.device)
        s2 = self.sigma**2
        t = self._logw(x) + (2.0 * j * x[..., None] - j * j) / (2.0 * s2)
        loss = torch.logsumexp(t, dim=-1)
        slope = (torch.softmax(t, dim=-1) * j).sum(-1) / s2       # E_posterior[j]/σ² > 0
        return loss, slope

    def loss(self, x: Tensor) -> Tensor:
        return self._loss_and_slope(x)[0]

    def loss_inverse(self, value: Tensor) -> Tensor:
        # Newton from the right on the convex increasing L: monotone convergence. Start where the
        # j = K term alone reaches the value (L ≥ that term), so L(x₀) ≥ value.
        k, s2 = self.group, self.sigma**2
        lo = k * math.log1p(-self.q)
        ok = value > lo
        v = torch.where(ok, value, torch.full_like(value, lo + 1.0))
        x = ((v - k * math.log(self.q)) * s2 / k + 0.5 * k).reshape(-1)
        vf = v.reshape(-1)
        idx = torch.arange(x.numel(), device=x.device)       # entries still iterating
        for _ in range(400):
            f, d = self._loss_and_slope(x[idx])
            step = (f - vf[idx]) / d
            xi = x[idx] - step
            x[idx] = xi
            done = (step.abs() <= 1e-15 * (1.0 + xi.abs())) | ((f - vf[idx]).abs() <= 1e-15 * (1.0 + vf[idx].abs()))
            idx = idx[~done]
            if idx.numel() == 0:
                break
        x = x.reshape(v.shape)
        return torch.where(ok, x, torch.full_like(x, -math.inf))


@dataclass(frozen=True, slots=True)
class PoissonGroupAdd(MixturePair):
    """P = N(0, σ²), Q = Σ_j Bin(j; K, q) N(−j, σ²): a group of K records added, reflected (x → −x).

    L(x) = −L_remove(−x) ∈ (−∞, −K log(1−q)), increasing.
    """

    q: float = 0.01
    group: int = 2

    def _remove(self) -> PoissonGroupRemove:
        return PoissonGroupRemove(self.sigma, q=self.q, group=self.group)

    def p_components(self) -> tuple[tuple[float, float], ...]:
        return ((1.0, 0.0),)

    def q_components(self) -> tuple[tuple[float, float], ...]:
        return tuple((w, -m) for w, m in self._remove().p_components())

    def loss(self, x: Tensor) -> Tensor:
        return -self._remove().loss(-x)

    def loss_inverse(self, value: Tensor) -> Tensor:
        return -self._remove().loss_inverse(-value)


@dataclass(frozen=True, slots=True)
class LabelledPair:
    """A pair whose output reveals a label: P = Σ_i w_i (i, P_i) against Q = Σ_i w_i (i, Q_i).

    The label i has the same law w under P and Q, so H_α(P‖Q) = Σ_i w_i H_α(P_i‖Q_i) for every α ≥ 0,
    and its privacy loss is L(i, x) = L_i(x). The discretiser puts every part on one lattice and adds
    the weighted PMFs (the connect-the-dots split and the nearest-lattice-point test are per bin, so
    per part, and the label is part of the output the test reads). Used for truncated Poisson
    (docs/dominating-pairs.md §4c). Weights are ≥ 0 and sum to 1 (to float precision).
    """

    parts: tuple[tuple[float, MixturePair], ...]

    def __post_init__(self) -> None:
        if not self.parts or any(not w >= 0.0 for w, _ in self.parts):
            raise ValueError(f"LabelledPair needs non-empty parts with weights >= 0; got {self.parts!r}")

    @property
    def symmetric(self) -> bool:
        return False

    def loss_range(self, tail: float) -> tuple[float, float]:
        """[lowest, highest] loss the discretiser puts on the lattice, over the parts of weight > 0."""
        lo, hi = math.inf, -math.inf
        for w, pair in self.parts:
            if w > 0.0:
                x_lo, x_hi = pair.x_range(tail)
                a, b = (float(v) for v in pair.loss(torch.tensor([x_lo, x_hi], dtype=torch.float64)))
                lo, hi = min(lo, a), max(hi, b)
        return lo, hi


@dataclass(frozen=True, slots=True)
class StepPairs:
    """The dominating pairs of one DP-SGD step, one per ordered direction, and their source."""

    remove: MixturePair | LabelledPair
    add: MixturePair | LabelledPair
    theorem: str
    more: tuple[tuple[str, MixturePair | LabelledPair], ...] = ()
    """Further ordered directions (name, pair); e.g. truncated Poisson's record added to n records."""

    @property
    def symmetric(self) -> bool:
        return self.remove is self.add


def unsupported_reason(spec: DPSGD) -> str | None:
    """Why no proved dominating pair covers ``spec`` (None when one does). No side effects."""
    rel = spec.neighbouring.label
    s = spec.sampling
    if not isinstance(s, (Poisson, FixedSize, TruncatedPoisson)):  # e.g. Shuffle: accountants.epsilon reduces it first
        return f"pld: no per-step dominating pair for {type(s).__name__} sampling (use accountants.epsilon/delta)"
    if spec.group_size != 1:
        if not isinstance(s, Poisson) or spec.neighbouring is not Neighbouring.ADD_REMOVE:
            return (
                f"pld: group_size={spec.group_size} is proved only for Poisson sampling under add/remove "
                f"(got {type(s).__name__}, neighbouring={rel}; use method='rdp' where it supports groups)"
            )
        if spec.group_size > MAX_GROUP:
            return f"pld: group_size={spec.group_size} > {MAX_GROUP} is not supported by the PLD accountant"
    if isinstance(s, FixedSize) and s.replace:
        return "pld: fixed-size sampling with replacement has no proved dominating pair in dpaudit"
    return None


def step_pairs(spec: DPSGD) -> StepPairs:
    """The dominating pairs for one step of ``spec`` (see ``docs/dominating-pairs.md``).

    Raises:
        UnsupportedError: for combinations without a proved pair (never a wrong pair instead).
    """
    reason = unsupported_reason(spec)
    if reason is not None:
        raise UnsupportedError(reason)
    sigma = spec.noise_multiplier
    s = spec.sampling
    if isinstance(s, TruncatedPoisson):
        return truncated_poisson_pairs(spec)
    if isinstance(s, Poisson):
        q = float(s.rate)
        k = spec.group_size
        if spec.neighbouring is Neighbouring.ADD_REMOVE and k > 1:
            if q >= 1.0:
                g = GaussianShift(sigma, shift=float(k))
                return StepPairs(g, g, f"Gaussian mechanism, group of K={k}, sensitivity KC (q = 1)")
            return StepPairs(
                PoissonGroupRemove(sigma, q=q, group=k),
                PoissonGroupAdd(sigma, q=q, group=k),
                f"Poisson-subsampled Gaussian, group of K={k}, add/remove, both directions: collinear "
                "binomial mixture (reflection argument of Schuchardt et al. 2024 App. H for every convex f; "
                "docs/dominating-pairs.md §4a)",
            )
        if spec.neighbouring is Neighbouring.ADD_REMOVE:
            if q >= 1.0:
                g = GaussianShift(sigma, shift=1.0)
                return StepPairs(g, g, "Gaussian mechanism, sensitivity C (q = 1)")
            return StepPairs(
                PoissonRemove(sigma, q=q, shift=1.0),
                PoissonAdd(sigma, q=q, shift=1.0),
                "Poisson-subsampled Gaussian, add/remove, both directions (Zhu-Dong-Wang 2022 Thm 11)",
            )
        if q >= 1.0:
            g = GaussianShift(sigma, shift=2.0)
            return StepPairs(g, g, "Gaussian mechanism, sensitivity 2C (replace-one, q = 1)")
        r = PoissonReplace(sigma, q=q, shift=1.0)
        return StepPairs(
            r,
            r,
            "Poisson-subsampled Gaussian, replace-one, ±C mixture pair (as dp_accounting PLD; dominance "
            "verified numerically, proof pending: docs/dominating-pairs.md §3)",
        )
    # Fixed-size without replacement, add/remove: the batch changes by a replacement of one
    # record (shift ≤ 2C) with probability b/n; docs/dominating-pairs.md §4.
    assert isinstance(s, FixedSize)  # unsupported_reason refused every other sampling
    q = s.batch_size / s.dataset_size
    if q >= 1.0:
        g = GaussianShift(sigma, shift=2.0)
        return StepPairs(g, g, "Gaussian mechanism, sensitivity 2C (fixed-size b = n)")
    if spec.neighbouring is Neighbouring.REPLACE_ONE:
        sym = SymmetrisedRemove(sigma, q=q, shift=2.0)
        return StepPairs(
            sym,
            sym,
            "fixed-size WOR replace-one: remove pair (shift 2C, weight b/n) symmetrised for α < 1 "
            "(Balle et al. 2018 Thm 2 + joint convexity; docs/dominating-pairs.md §4b)",
        )
    return StepPairs(
        PoissonRemove(sigma, q=q, shift=2.0),
        PoissonAdd(sigma, q=q, shift=2.0),
        "fixed-size WOR add/remove: mixture pair with shift 2C and weight b/n (docs/dominating-pairs.md §4)",
    )


def _labelled(parts: list[tuple[float, MixturePair]]) -> MixturePair | LabelledPair:
    """The labelled pair of the parts of weight > 0 (the part itself when only one is left)."""
    kept = tuple((w, p) for w, p in parts if w > 0.0)
    return kept[0][1] if len(kept) == 1 else LabelledPair(kept)


def truncated_poisson_pairs(spec: DPSGD) -> StepPairs:
    """Dominating pairs of one truncated-Poisson step (docs/dominating-pairs.md §4c).  Bound: upper.

    With π = P(K ≥ B) and γ̄ = E[qB/(K+1) | K ≥ B] (K the other records drawn,
    :func:`accountants.truncated_poisson.truncation_split`): the label {K ≥ B} is revealed; below it the
    Poisson pair (weight q, shift C), at or above it the replacement pair (weight γ̄, shift 2C). Add/remove
    composes four ordered directions: removal and addition for a dataset of m = n and of m = n + 1 records
    (the record removed from, or added to, the n records). Replace-one: m = n, the ±C Poisson pair and the
    symmetrised shift-2C pair of §4b.
    """
    from ..truncated_poisson import truncation_split

    s: TruncatedPoisson = spec.sampling  # type: ignore[assignment]
    sigma, q, n = spec.noise_multiplier, float(s.rate), int(s.dataset_size)
    theorem = (
        f"truncated Poisson (B={s.max_batch_size}, n={n}): label K >= B revealed (joint convexity; "
        "the rest of a truncated batch has one law whatever K), Poisson pair below, shift-2C pair of weight "
        "E[qB/(K+1) | K >= B] above (docs/dominating-pairs.md §4c; the split of Ganesh 2025, arXiv 2508.15089); "
        "pi rounded to nearest (delta moves <= 2^-53 per step)"
    )
    if spec.neighbouring is Neighbouring.REPLACE_ONE:
        pi, gamma = truncation_split(s, n)
        base: MixturePair = GaussianShift(sigma, shift=2.0) if q >= 1.0 else PoissonReplace(sigma, q=q, shift=1.0)
        r = _labelled([(1.0 - pi, base), (pi, SymmetrisedRemove(sigma, q=gamma, shift=2.0))])
        return StepPairs(r, r, theorem + "; replace-one: the Poisson ±C pair (docs/dominating-pairs.md §3, proof "
                         "pending) and the symmetrised pair of §4b")
    pairs: dict[str, MixturePair | LabelledPair] = {}
    for m, tag in ((n, ""), (n + 1, "_n+1")):
        pi, gamma = truncation_split(s, m)
        rm: MixturePair = GaussianShift(sigma, shift=1.0) if q >= 1.0 else PoissonRemove(sigma, q=q, shift=1.0)
        ad: MixturePair = GaussianShift(sigma, shift=1.0) if q >= 1.0 else PoissonAdd(sigma, q=q, shift=1.0)
        pairs["remove" + tag] = _labelled([(1.0 - pi, rm), (pi, PoissonRemove(sigma, q=gamma, shift=2.0))])
        pairs["add" + tag] = _labelled([(1.0 - pi, ad), (pi, PoissonAdd(sigma, q=gamma, shift=2.0))])
    return StepPairs(pairs["remove"], pairs["add"], theorem,
                     more=(("remove_n+1", pairs["remove_n+1"]), ("add_n+1", pairs["add_n+1"])))
