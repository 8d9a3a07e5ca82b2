"""Random allocation (k of t steps per epoch; balls-in-bins at k = 1): a certified lower bound beside the upper bound.

The upper bounds are the RDP accountant's (:mod:`accountants.rdp.random_allocation`) and the PLD
one's (:mod:`accountants.pld.random_allocation`, ``method="pld"``), both through ``accountants.epsilon``.
The lower bound comes from a realised pair: every other record's clipped gradient 0 and the
record's +C·e (add/remove), so each epoch of t steps releases, scaled by C,
P = (1/t) Σ_j N(e_j, σ²I_t) with the record against Q = N(0, σ²I_t) without it (the other records'
allocations are independent of the record's, and their zero gradients add nothing). A partial last
epoch of r < t steps holds the record with probability r/t: P = (r/t)·MoG + (1 − r/t)·N(0, σ²I_r).

Each epoch is post-processed to the maximum coordinate (Chua et al., ICML 2024 §4; NeurIPS 2024 §3)
and composed on a loss lattice with certified bin masses — the same certified machinery as the
shuffle lower bound (:mod:`accountants.shuffle`, whose module docstring gives the proof that the result
is below the true δ(ε)); here the pair is (m₁, m₀) = (1, 0) with the record in the epoch with
probability 1 (full epochs) or r/t (a partial one). Post-processing only lowers δ(ε), so
ε_lower ≤ the pair's ε ≤ the mechanism's ε.

**k > 1.** The same dataset releases, per full epoch, P = avg_{|S|=k} N(1_S, σ²I_t) against Q = N(0, σ²I_t); its
maximum coordinate has the closed-form law P(M ≤ c) = Φ(c/σ)^{t−k}·Φ((c−1)/σ)^k (``shifted=k`` of
:class:`accountants.shuffle._MaxLaw`), certified by the same machinery. A trailing partial epoch (the record is in a
hypergeometric number of its steps) is dropped: ignoring outputs is post-processing, so the bound stays a lower
bound; a run shorter than one epoch gets the trivial lower bound 0.
"""

from __future__ import annotations

from . import validate as check
from .errors import UnsupportedError
from .events import DPSGD
from .results import EpsilonBound, check_bracket
from .sampling import Neighbouring, RandomAllocation

__all__ = ["random_allocation_bounds", "random_allocation_lower_delta", "random_allocation_lower_epsilon",
           "random_allocation_lower_epsilons"]

MAX_EPOCHS = 4096  # epochs composed; later ones are dropped (post-processing: still a lower bound)


def _lower_plds(spec: DPSGD, h: float) -> list:
    from .shuffle import MAX_LATTICE, _compose, _epoch_plds

    s = spec.sampling
    if not isinstance(s, RandomAllocation):
        raise UnsupportedError("the random-allocation lower bound covers RandomAllocation sampling only")
    if spec.neighbouring is not Neighbouring.ADD_REMOVE or spec.group_size != 1:
        raise UnsupportedError("the random-allocation lower bound covers add-remove for single records")
    t = s.steps_per_epoch
    full, rest = divmod(spec.steps, t)
    # (batches, k, n, shifted, count): the record is in the epoch with probability p = k/n, in `shifted` steps
    types = [(t, 1, 1, s.k, min(full, MAX_EPOCHS))] if full else []
    if rest and full < MAX_EPOCHS and s.k == 1:
        types.append((rest, rest, t, 1, 1))
    if not types:
        return []
    step = h
    while True:
        per = [(_epoch_plds(spec.noise_multiplier, b, k, n, 1.0, 0.0, step, shifted=sh), c)
               for b, k, n, sh, c in types]
        size = max(sum(len(plds[d].mass) * c for plds, c in per) for d in (0, 1))
        if size <= MAX_LATTICE:
            break
        step *= 2 * size / MAX_LATTICE
    out = []
    for direction in (0, 1):
        pld, err = _compose([(plds[direction], c) for plds, c in per])
        out.append((pld, err, step))
    return out


def random_allocation_lower_delta(spec: DPSGD, epsilon: float, *, h: float = 2e-3) -> float:
    """A certified lower bound on δ(ε) of random-allocation DP-SGD (module doc).  Bound: lower."""
    from .shuffle import _delta_lower_of

    check.in_range(0.0, None, closed="left", epsilon=epsilon)
    return max((_delta_lower_of(pld, err, float(epsilon), step) for pld, err, step in _lower_plds(spec, h)),
               default=0.0)


def random_allocation_lower_epsilon(spec: DPSGD, delta: float, *, h: float = 2e-3, tol: float = 1e-4) -> float:
    """A certified lower bound on ε(δ) of random-allocation DP-SGD: the lower end of a bisection.  Bound: lower."""
    from .shuffle import _lower_epsilon_of

    check.in_range(0.0, 1.0, closed="neither", delta=delta)
    return _lower_epsilon_of(_lower_plds(spec, h), delta, tol)


def random_allocation_lower_epsilons(spec: DPSGD, deltas: list[float], *, h: float = 2e-3,
                                     tol: float = 1e-4) -> list[float]:
    """:func:`random_allocation_lower_epsilon` at several δ from one composed lattice.  Bound: lower."""
    from .shuffle import _lower_epsilon_of

    for d in deltas:
        check.in_range(0.0, 1.0, closed="neither", delta=d)
    plds = _lower_plds(spec, h)
    return [_lower_epsilon_of(plds, d, tol) for d in deltas]


def random_allocation_bounds(spec: DPSGD, delta: float, method: str = "pld") -> EpsilonBound:
    """ε(δ) of random-allocation DP-SGD: an upper bound with the certified lower end of this module in ``lower``.

    ``method="pld"`` (default): the smaller of the PLD upper bound (:mod:`accountants.pld.random_allocation`)
    and the RDP bound, both sound; ``method="rdp"``: the RDP bound alone.
    """
    from .api import epsilon

    if method == "pld":
        return epsilon(spec, delta, method="pld")
    up = epsilon(spec, delta, method=method)
    low = random_allocation_lower_epsilon(spec, delta)
    check_bracket(low, up.value, what="random-allocation ε")
    return EpsilonBound(up.value, up.delta, method=up.method, order=up.order, lower=low,
                        theorem=f"{up.theorem}; lower: max-statistic of the realised pair (Chua et al. 2024)")
