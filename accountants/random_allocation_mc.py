"""Monte Carlo *estimate* of δ(ε) for random-allocation DP-SGD, with a rigorous confidence interval.

Not an accountant: it certifies nothing and neither passes nor fails anything. It is the independent
cross-check of the certified bracket of :mod:`accountants.random_allocation` (lower) and
:mod:`accountants.pld.random_allocation` (upper), in the manner of Chua et al., "Balls-and-bins sampling
for DP-SGD" (arXiv 2412.16802: sample the privacy loss, average the hockey-stick summands, bound the error
with a Chernoff bound) and of jax_privacy's experimental Monte Carlo accountant
(``jax_privacy/experimental/monte_carlo/delta_calculation.py``, google-deepmind/jax_privacy @20b7d3a).

The pair. Scaled by the clip norm, each epoch of t steps of RandomAllocation(k, t) releases, for the
worst-case dataset (every other record's gradient 0, the record's +C·e),
P = C(t,k)⁻¹ Σ_{|S|=k} N(1_S, σ²I_t) with the record against Q = N(0, σ²I_t) without it. At k = 1 this is
also the dominating pair of every run (Feldman & Shenfeld 2025, arXiv 2502.08202, Thm 3.1 and Claim D.3;
Chua et al. Thm 1), so its δ(ε) is the mechanism's; at k > 1 it is this dataset's pair. Its per-epoch
privacy loss is L = log(dP/dQ)(x) = log(e_k(y) / C(t,k)), y_j = exp((x_j − 1/2)/σ²), e_k the elementary
symmetric polynomial (k = 1: L = log((1/t) Σ_j y_j)). A trailing partial epoch of r < t steps releases
only r coordinates: dP/dQ = Σ_m C(t−r, k−m)/C(t,k) · e_m(y_1..y_r) (the record's k-subset meets the r
steps in m of them), as in the lower-bound module (k = 1: the record is in it with probability r/t).
Epochs are independent, so the run's loss is the sum of the epochs' losses.

The estimate. δ(ε) = max(δ_remove, δ_add) with
    δ_remove = E_P[(1 − e^{ε−L})₊],    δ_add = E_Q[(1 − e^{ε+L})₊]
(the hockey-stick divergences H_{e^ε}(P‖Q) and H_{e^ε}(Q‖P); log dQ/dP = −L). Each summand lies in
[0, 1], so the two-sided interval of the sample mean from the Chernoff–Hoeffding bound
P(mean ≥ m + u) ≤ exp(−n·kl(m + u ‖ m)) (Hoeffding 1963, Thm 1; valid for any [0,1]-valued i.i.d.
summands, both tails; the bound Chua et al. use, their Fact 4.2) is exact in level, not asymptotic. The
two directions' intervals are each at level 1 − α/2, so the three intervals (remove, add, max) hold
simultaneously with probability ≥ 1 − α.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from . import validate as check
from .errors import InputError, UnsupportedError
from .events import DPSGD
from .sampling import Neighbouring, RandomAllocation

__all__ = ["LossSamples", "MCInterval", "RandomAllocationMCEstimate", "delta_from_losses", "draw_losses",
           "epsilon_from_losses", "kl_interval", "privacy_loss_samples", "random_allocation_mc_delta",
           "random_allocation_mc_epsilon"]

CHUNK_FLOATS = 1 << 22  # normal draws held at once (32 MiB of float64)


# ----------------------------------------------------------------------------------- results


@dataclass(frozen=True)
class MCInterval:
    """A Monte Carlo estimate and its two-sided confidence interval [lower, upper] (see the level beside it)."""

    estimate: float
    lower: float
    upper: float

    def contains(self, value: float) -> bool:
        """Whether ``value`` lies in [lower, upper]."""
        return self.lower <= value <= self.upper


@dataclass(frozen=True)
class RandomAllocationMCEstimate:
    """Monte Carlo estimate of δ(ε) of random-allocation DP-SGD (an estimate, not a bound).

    ``remove``, ``add`` and ``delta`` (= their max) hold simultaneously with probability ≥ ``level``.
    """

    epsilon: float
    noise_multiplier: float
    k: int
    steps_per_epoch: int
    steps: int
    samples: int
    seed: int
    level: float
    remove: MCInterval
    add: MCInterval
    delta: MCInterval
    method: str = "plain Monte Carlo of the privacy loss; Chernoff-Hoeffding (kl) interval, Hoeffding 1963 Thm 1"


# ----------------------------------------------------------------------------------- confidence intervals


def _kl(p: float, q: float) -> float:
    """kl(p ‖ q) of Bernoulli laws (natural log), +∞ where q is 0 or 1 and p is not."""
    out = 0.0
    if p > 0:
        out += math.inf if q <= 0 else p * math.log(p / q)
    if p < 1:
        out += math.inf if q >= 1 else (1 - p) * (math.log1p(-p) - math.log1p(-q))
    return out


def kl_interval(mean: float, n: int, alpha: float) -> tuple[float, float]:
    """Two-sided interval at level 1 − α for the mean of n i.i.d. [0, 1]-valued summands.

    {q : n·kl(mean ‖ q) ≤ log(2/α)}, each side from Hoeffding (1963) Thm 1; found by bisection and
    rounded outward by 1e-15 relative.
    """
    check.integer(1, None, n=n)
    check.in_range(0.0, 1.0, closed="neither", alpha=alpha)
    check.in_range(0.0, 1.0, closed="both", mean=mean)
    c = math.log(2.0 / alpha) / n

    def solve(a: float, b: float, inside_at_a: bool) -> float:
        for _ in range(200):
            mid = 0.5 * (a + b)
            if (_kl(mean, mid) <= c) == inside_at_a:
                a = mid
            else:
                b = mid
        return a if inside_at_a else b

    lo = 0.0 if _kl(mean, 0.0) <= c else solve(mean, 0.0, True)
    hi = 1.0 if _kl(mean, 1.0) <= c else solve(mean, 1.0, True)
    return max(0.0, lo * (1 - 1e-15)), min(1.0, hi * (1 + 1e-15))


# ----------------------------------------------------------------------------------- the privacy loss


def _check_spec(spec: DPSGD) -> tuple[float, int, int, int]:
    if not isinstance(spec, DPSGD) or not isinstance(spec.sampling, RandomAllocation):
        raise UnsupportedError("the random-allocation Monte Carlo estimate covers DPSGD with RandomAllocation sampling")
    if spec.neighbouring is not Neighbouring.ADD_REMOVE or spec.group_size != 1:
        raise UnsupportedError("the random-allocation Monte Carlo estimate covers add-remove for single records")
    s = spec.sampling
    return float(spec.noise_multiplier), s.k, s.steps_per_epoch, spec.steps


def _log_esp(a: torch.Tensor, m_max: int) -> torch.Tensor:
    """log e_m(exp(a_1), …, exp(a_r)) for m = 0..m_max along the last axis, by the recursion
    e_m(y_1..y_j) = e_m(y_1..y_{j−1}) + y_j·e_{m−1}(y_1..y_{j−1}) in log space (stable; O(r·m_max))."""
    n, r = a.shape
    out = torch.full((n, m_max + 1), -math.inf, dtype=a.dtype, device=a.device)
    out[:, 0] = 0.0
    for j in range(r):
        top = min(j + 1, m_max)
        new = torch.logaddexp(out[:, 1:top + 1], out[:, :top] + a[:, j:j + 1])
        out = torch.cat([out[:, :1], new, out[:, top + 1:]], dim=1)
    return out


def _log_weights(k: int, t: int, r: int) -> list[float]:
    """log[C(t−r, k−m)/C(t,k)] for m = 0..min(k, r) (−∞ where the subset cannot meet r steps in m)."""
    out = []
    for m in range(min(k, r) + 1):
        c = math.comb(t - r, k - m) if k - m <= t - r else 0
        out.append(math.log(c) - math.log(math.comb(t, k)) if c else -math.inf)
    return out


def _epoch_loss(x: torch.Tensor, sigma: float, k: int, t: int) -> torch.Tensor:
    """log dP/dQ of one epoch (module doc) at the released coordinates x (n × r, r ≤ t)."""
    r = x.shape[1]
    a = (x - 0.5) / sigma**2
    if k == 1:
        body = torch.logsumexp(a, dim=1) - math.log(t)
        return body if r == t else torch.logaddexp(body, torch.full_like(body, math.log((t - r) / t)))
    w = torch.tensor(_log_weights(k, t, r), dtype=x.dtype, device=x.device)
    return torch.logsumexp(_log_esp(a, len(w) - 1) + w, dim=1)


def _draw_epoch(n: int, sigma: float, k: int, t: int, r: int, with_record: bool,
                gen: torch.Generator, device: torch.device) -> torch.Tensor:
    """n draws of the r released coordinates of one epoch under P (``with_record``) or Q."""
    x = torch.randn(n, r, generator=gen, dtype=torch.float64, device=device) * sigma
    if with_record and k == 1:
        j = torch.randint(0, t, (n,), generator=gen, device=device)
        hit = j < r
        x[torch.arange(n, device=device)[hit], j[hit]] += 1.0
    elif with_record:
        keys = torch.rand(n, t, generator=gen, dtype=torch.float64, device=device)
        chosen = keys.topk(k, dim=1, largest=False).indices  # a uniformly random k-subset of the t steps
        mask = torch.zeros(n, t, dtype=torch.float64, device=device).scatter_(1, chosen, 1.0)
        x += mask[:, :r]
    return x


def _conditional_noise(n: int, sigma: float, t: int, c: float, above: bool, gen: torch.Generator,
                       device: torch.device) -> tuple[torch.Tensor, float]:
    """n draws of z ~ N(0, σ²I_t) conditioned on max_j z_j > c (``above``) or ≤ c, and that event's probability.

    The maximum M from its conditional law by inversion (P(M ≤ m) = Φ(m/σ)^t, in survival or log form for
    precision), placed at a uniform coordinate; the others i.i.d. N(0, σ²) conditioned on ≤ M.
    """
    sp = torch.special
    log_phi_c = float(sp.log_ndtr(torch.tensor(c / sigma, dtype=torch.float64)))
    u = torch.rand(n, generator=gen, dtype=torch.float64, device=device)
    if above:
        mass = -math.expm1(t * log_phi_c)
        single_sf = -torch.expm1(torch.log1p(-u * mass) / t)  # P(z_j > M) of the drawn maximum
        m = -sigma * sp.ndtri(single_sf)
    else:
        mass = math.exp(t * log_phi_c)
        m = sigma * sp.ndtri(torch.exp(torch.log(u) / t + log_phi_c))
    v = torch.rand(n, t, generator=gen, dtype=torch.float64, device=device)
    z = sigma * sp.ndtri(torch.exp(torch.log(v) + sp.log_ndtr(m / sigma).unsqueeze(1)))
    j = torch.randint(0, t, (n,), generator=gen, device=device)
    z[torch.arange(n, device=device), j] = m
    return z, mass


def privacy_loss_samples(spec: DPSGD, samples: int, *, with_record: bool, seed: int = 0,
                         device: str | torch.device | None = None,
                         condition_from: float | None = None) -> tuple[torch.Tensor, float]:
    """``samples`` i.i.d. draws of the run's privacy loss L = Σ_epochs log dP/dQ, x ~ P (``with_record``) or Q,
    and the probability of the event they are drawn on (1 unless conditioned).

    Float64, drawn in chunks of ≤ CHUNK_FLOATS normals from a generator seeded with ``seed``
    (streams differ between devices). Returned on the CPU.

    ``condition_from`` = ε₀ (one whole epoch of k = 1 only) draws conditionally on an event E outside of which
    the summand is 0 at every ε ≥ ε₀, so δ = P(E)·E[summand | E] (Chua et al. 2412.16802 condition on such a
    "max" event too). Remove: by symmetry x = e_1 + z, and L ≤ (max_j z_j + 1/2)/σ², so E = {max z > ε₀σ² − 1/2};
    add: x = z, the summand needs L < −ε and L ≥ (max_j z_j − 1/2)/σ² − log t, so E = {max z < σ²(log t − ε₀) + 1/2}.
    """
    sigma, k, t, steps = _check_spec(spec)
    check.integer(1, None, samples=samples)
    dev = torch.device("cpu" if device is None else device)
    gen = torch.Generator(device=dev).manual_seed(int(seed))
    full, rest = divmod(steps, t)
    epochs = [t] * full + ([rest] if rest else [])
    if condition_from is not None:
        check.in_range(0.0, None, closed="left", condition_from=condition_from)
        if k != 1 or steps != t:
            raise UnsupportedError("condition_from covers one whole epoch of balls-in-bins (k = 1, steps = t)")
        eps0 = float(condition_from)
        c = eps0 * sigma**2 - 0.5 if with_record else sigma**2 * (math.log(t) - eps0) + 0.5
    chunk = max(1, CHUNK_FLOATS // (2 * t))
    out, mass = [], 1.0
    for start in range(0, samples, chunk):
        n = min(chunk, samples - start)
        if condition_from is not None:
            z, mass = _conditional_noise(n, sigma, t, c, with_record, gen, dev)
            if with_record:
                z[:, 0] += 1.0
            out.append(_epoch_loss(z, sigma, 1, t).cpu())
            continue
        loss = torch.zeros(n, dtype=torch.float64, device=dev)
        for r in epochs:
            loss += _epoch_loss(_draw_epoch(n, sigma, k, t, r, with_record, gen, dev), sigma, k, t)
        out.append(loss.cpu())
    return torch.cat(out), mass


# ----------------------------------------------------------------------------------- δ(ε) and ε(δ)


def _summands(loss: torch.Tensor, epsilon: float, sign: float) -> torch.Tensor:
    """(1 − e^{ε − sign·L})₊ ∈ [0, 1] (remove: sign +1 under P; add: sign −1 under Q)."""
    return -torch.expm1(torch.clamp(epsilon - sign * loss, max=0.0))


def _scaled_interval(mean: float, n: int, mass: float, alpha: float) -> MCInterval:
    """The kl interval of a conditional mean, times the event's probability (its float64 rounding paid for)."""
    m = min(1.0, max(0.0, mean))
    lo, hi = kl_interval(m, n, alpha)
    return MCInterval(mass * m, mass * lo * (1 - 1e-12), min(1.0, mass * hi * (1 + 1e-12)))


def _interval(loss: torch.Tensor, mass: float, epsilon: float, sign: float, alpha: float) -> MCInterval:
    return _scaled_interval(float(_summands(loss, epsilon, sign).mean()), loss.numel(), mass, alpha)


@dataclass(frozen=True)
class LossSamples:
    """Draws of the run's privacy loss: ``remove`` under P (seed), ``add`` under Q (seed + 1), equal counts."""

    spec: DPSGD
    seed: int
    remove: torch.Tensor
    add: torch.Tensor
    remove_mass: float = 1.0
    add_mass: float = 1.0
    floor: float = 0.0  # conditioned draws answer only ε ≥ floor

    @property
    def samples(self) -> int:
        return int(self.remove.numel())


def draw_losses(spec: DPSGD, samples: int = 1_000_000, *, seed: int = 0, device: str | torch.device | None = None,
                condition_from: float | None = None) -> LossSamples:
    """The privacy-loss draws behind both estimates (independent streams: seed for P, seed + 1 for Q);
    ``condition_from``: see :func:`privacy_loss_samples` (then only ε ≥ condition_from can be asked)."""
    rem, m_rem = privacy_loss_samples(spec, samples, with_record=True, seed=seed, device=device,
                                      condition_from=condition_from)
    add, m_add = privacy_loss_samples(spec, samples, with_record=False, seed=seed + 1, device=device,
                                      condition_from=condition_from)
    return LossSamples(spec, int(seed), rem, add, m_rem, m_add, float(condition_from or 0.0))


def delta_from_losses(losses: LossSamples, epsilon: float, *, level: float = 0.999) -> RandomAllocationMCEstimate:
    """δ(ε) estimate, simultaneous intervals at ``level``, from given draws (:func:`random_allocation_mc_delta`)."""
    check.in_range(0.0, None, closed="left", epsilon=epsilon)
    check.finite(epsilon=epsilon)
    check.in_range(0.0, 1.0, closed="neither", level=level)
    sigma, k, t, steps = _check_spec(losses.spec)
    if epsilon < losses.floor:
        raise InputError(f"epsilon must be ≥ the draws' condition_from = {losses.floor}; got {epsilon}")
    alpha = 1.0 - level
    rem = _interval(losses.remove, losses.remove_mass, float(epsilon), 1.0, alpha / 2)
    add = _interval(losses.add, losses.add_mass, float(epsilon), -1.0, alpha / 2)
    both = MCInterval(max(rem.estimate, add.estimate), max(rem.lower, add.lower), max(rem.upper, add.upper))
    method = RandomAllocationMCEstimate.method
    if losses.floor or losses.remove_mass < 1.0 or losses.add_mass < 1.0:
        method += (f"; draws conditioned on the max events from epsilon {losses.floor:g} (masses "
                   f"{losses.remove_mass:.6g}, {losses.add_mass:.6g})")
    return RandomAllocationMCEstimate(float(epsilon), sigma, k, t, steps, losses.samples, losses.seed, level,
                                      rem, add, both, method)


def random_allocation_mc_delta(spec: DPSGD, epsilon: float, *, samples: int = 1_000_000, seed: int = 0,
                               level: float = 0.999, device: str | torch.device | None = None,
                               condition: bool = False) -> RandomAllocationMCEstimate:
    """Monte Carlo estimate of δ(ε) of random-allocation DP-SGD with simultaneous intervals at ``level``.

    Args:
        spec: DPSGD with ``RandomAllocation(k, t)`` sampling (any 1 ≤ k ≤ t), add/remove, one record.
        epsilon: ε ≥ 0.
        samples: draws per direction (the interval's half-width is about sqrt(2δ·log(4/α)/samples)).
        seed: seeds the P stream (remove); the Q stream (add) uses seed + 1.
        level: 1 − α; each direction's interval is at 1 − α/2.
        device: torch device for the draws (default CPU).
        condition: draw on the "max" event of ``epsilon`` (one whole epoch of k = 1 only;
            :func:`privacy_loss_samples`): the same estimand, a far narrower interval at small δ.
    """
    check.in_range(0.0, None, closed="left", epsilon=epsilon)
    check.in_range(0.0, 1.0, closed="neither", level=level)
    losses = draw_losses(spec, samples, seed=seed, device=device, condition_from=epsilon if condition else None)
    return delta_from_losses(losses, epsilon, level=level)


class _SortedLoss:
    """Sorted sign·L with suffix sums of e^{−sign·L}: the sample mean of (1 − e^{ε − sign·L})₊ at any ε ≥ 0
    in O(log n)."""

    def __init__(self, loss: torch.Tensor, sign: float) -> None:
        self.v, _ = torch.sort(sign * loss)
        tail = torch.exp(-torch.clamp(self.v, min=0.0))  # only entries with v > ε ≥ 0 are summed, so ≤ 1
        self.suffix = torch.cat([torch.flip(torch.cumsum(torch.flip(tail, [0]), 0), [0]), tail.new_zeros(1)])

    def means(self, eps: torch.Tensor) -> torch.Tensor:
        idx = torch.searchsorted(self.v, eps, right=True)  # first index with v > ε
        count = (self.v.numel() - idx).to(torch.float64)
        return torch.clamp((count - torch.exp(eps) * self.suffix[idx]) / self.v.numel(), 0.0, 1.0)


def epsilon_from_losses(losses: LossSamples, delta: float, *, level: float = 0.999, eps_max: float = 20.0,
                        grid_points: int = 4001) -> MCInterval:
    """Monte Carlo estimate of ε(δ) with an interval at ``level``, by inverting the δ intervals on a fixed grid.

    The grid {i·eps_max/(grid_points − 1)} is fixed before sampling; a union bound over its points and the
    two directions gives every δ interval on it simultaneously at ``level``; δ(ε) is non-increasing, so then
    the true ε(δ) lies between the largest grid ε whose δ lower end exceeds δ and the smallest grid ε whose δ
    upper end is ≤ δ (``upper`` is +∞ when no grid point qualifies). The estimate solves δ̂(ε) = δ on the grid.
    """
    check.in_range(0.0, 1.0, closed="neither", delta=delta, level=level)
    check.positive(eps_max=eps_max)
    check.integer(2, None, grid_points=grid_points)
    samples = losses.samples
    grid = torch.linspace(0.0, float(eps_max), grid_points, dtype=torch.float64)
    rem, add = _SortedLoss(losses.remove, 1.0), _SortedLoss(losses.add, -1.0)
    m_rem, m_add = rem.means(grid).tolist(), add.means(grid).tolist()
    alpha = (1.0 - level) / (2 * grid_points)
    gl = grid.tolist()
    i0 = int(torch.searchsorted(grid, torch.tensor([losses.floor], dtype=torch.float64))[0])  # first ε ≥ floor
    if i0 >= grid_points:
        raise InputError(f"eps_max must be ≥ the draws' condition_from = {losses.floor}; got {eps_max}")

    def first(pred: Callable[[int], bool]) -> int | None:  # least grid index where the monotone pred holds
        lo, hi = 0, grid_points
        while lo < hi:
            mid = (lo + hi) // 2
            if pred(mid):
                hi = mid
            else:
                lo = mid + 1
        return lo if lo < grid_points else None

    def bounds(i: int) -> tuple[float, float]:  # below the floor: δ(ε) ≥ δ(floor) ≥ its lower end; upper 1
        j = max(i, i0)
        r = _scaled_interval(m_rem[j], samples, losses.remove_mass, alpha)
        a = _scaled_interval(m_add[j], samples, losses.add_mass, alpha)
        return max(r.lower, a.lower), (max(r.upper, a.upper) if i >= i0 else 1.0)

    def est(i: int) -> float:
        return max(losses.remove_mass * m_rem[i], losses.add_mass * m_add[i]) if i >= i0 else 1.0

    i_hat = first(lambda i: est(i) <= delta)
    i_up = first(lambda i: bounds(i)[1] <= delta)
    i_low = first(lambda i: bounds(i)[0] <= delta)  # grid points before it have δ_lower > δ
    up = math.inf if i_up is None else gl[i_up]
    low = gl[-1] if i_low is None else (gl[i_low - 1] if i_low else 0.0)
    return MCInterval(math.inf if i_hat is None else gl[i_hat], low, up)


def random_allocation_mc_epsilon(spec: DPSGD, delta: float, *, samples: int = 1_000_000, seed: int = 0,
                                 level: float = 0.999, eps_max: float = 20.0, grid_points: int = 4001,
                                 device: str | torch.device | None = None) -> MCInterval:
    """Monte Carlo estimate of ε(δ) of random-allocation DP-SGD with an interval at ``level`` (see
    :func:`epsilon_from_losses`)."""
    check.in_range(0.0, 1.0, closed="neither", delta=delta, level=level)
    return epsilon_from_losses(draw_losses(spec, samples, seed=seed, device=device), delta, level=level,
                               eps_max=eps_max, grid_points=grid_points)
