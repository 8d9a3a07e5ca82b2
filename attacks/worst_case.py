"""Worst-case instantiations: a crafted dataset that realises the accountant's dominating pair.

Threat model "white box, crafted dataset" (:class:`attacks.threat.WhiteBox` with
``crafted_dataset=True``): the adversary sees every privatised update and chooses the gradient of
every record of the training set (Nasr et al. 2023, arXiv:2302.07956, §4 "gradient canaries" with
an adversarial dataset). With the canary's gradient g = C·e on one coordinate e and every other
record's gradient a multiple of e too, the white-box view of step t, o_t = ⟨u_t, e⟩·E|B|/C, is
exactly (shift from the drawn records) + N(0, σ²): a one-dimensional Gaussian mixture whose law
:func:`laws` writes down, for the neighbouring dataset with the canary ("in") and without it
("out"). docs/worst-case.md gives each construction and why it is the accountant's dominating pair:

========================  =================================================  =====================
sampling, relation         crafted dataset                                     o_t: in vs out (·C)
========================  =================================================  =====================
Poisson(q), add/remove     canary z (g), K copies for a group of K             Bin(K, q) vs 0
Poisson(q), replace-one    z (g) in D, z′ (−g) in D′                            B·1 vs B·(−1), B~Bern(q)
FixedSize WOR, add/remove  z (g) and N − 1 records of gradient −g                −b + 2B, B~Bern(b/N) vs −b
FixedSize WOR, replace-one z (g) / z′ (−g) and N − 1 records of gradient −g      −b + 2B vs −b
FixedSize WR, both         as WOR; z is drawn k ~ Bin(b, 1/N) times              −b + 2k vs −b
Shuffle(b, n), add/remove  z (g) and n − 1 records of gradient −g; out: ⊥        per epoch MoG(2) vs MoG(1)
RandomAlloc(1, t), add/rm  canary z (g)                                         per epoch MoG(1) vs N(0)
TruncatedPoisson(q, B, n)  z (g) and n − 1 records of gradient 0 (z′ (−g) in D′   Bern(p) vs 0 (±: as Poisson)
                           under replace-one); p = P(z in the batch)
========================  =================================================  =====================

Under shuffling the steps of one epoch are not independent (z is in exactly one batch of each
epoch), so :func:`laws` does not apply; :func:`llr` scores epochs with
:func:`attacks.membership.shuffled_llr` (Chua et al., ICML 2024, §4). Under balls-in-bins likewise
(z is in one uniformly random step of each epoch): :func:`attacks.membership.allocation_llr`.

:func:`llr` is the Neyman–Pearson optimal score for this pair (T steps, independent given the
adversary's knowledge: the crafted records do not depend on θ).

>>> import accountants as acc
>>> spec = acc.DPSGD(1.0, acc.FixedSize(4, 10), steps=2)
>>> c = crafted(spec, dim=5)
>>> c.background, c.copies, c.alternative, c.records
(9, 1, False, 10)
>>> a_in, lp_in, a_out, lp_out = laws(spec, c)
>>> a_in.tolist(), [round(float(x), 2) for x in lp_in.exp()], a_out.tolist()
([-4.0, -2.0], [0.6, 0.4], [-4.0])
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from accountants import validate as check
from accountants.errors import InputError, InputTypeError, UnsupportedError
from accountants.events import DPSGD
from accountants.sampling import FixedSize, Neighbouring, Poisson, RandomAllocation, Shuffle, TruncatedPoisson

from . import membership as mia
from .canaries import CraftedDataset

__all__ = ["crafted", "laws", "llr", "sample_allocation_pair", "sample_pair", "sample_shuffle_pair"]


def crafted(spec: DPSGD, dim: int, *, coordinate: int = 0, clip_norm: float = 1.0, natural: int = 0,
            dtype: torch.dtype = torch.float64) -> CraftedDataset:
    """The worst-case crafted dataset for ``spec`` (module table; docs/worst-case.md).

    Args:
        spec: the claimed DP-SGD run. FixedSize: ``dataset_size`` N is the larger neighbour, all
            crafted (``natural`` must be 0). Group size K > 1: Poisson add/remove only.
        dim: D, the number of model parameters.
        coordinate: the coordinate e of the canary (quiet, when natural records are present).
        clip_norm: C; the canary's gradient is C·e.
        natural: natural records in the setup (Poisson only: they never touch a quiet coordinate).

    Raises:
        UnsupportedError: for a combination without a worst-case construction here.
    """
    if not isinstance(spec, DPSGD):
        raise InputTypeError(f"spec must be an accountants.DPSGD; got {type(spec).__name__}")
    check.integer(1, None, dim=dim)
    check.integer(0, dim - 1, coordinate=coordinate)
    check.integer(0, None, natural=natural)
    check.positive(clip_norm=clip_norm)
    g = torch.zeros(1, dim, dtype=dtype)
    g[0, coordinate] = clip_norm
    K = spec.group_size
    replace_one = spec.neighbouring is Neighbouring.REPLACE_ONE
    match spec.sampling:
        case Poisson():
            if K > 1 and replace_one:
                raise UnsupportedError("crafted: groups of K > 1 are constructed for add/remove only")
            return CraftedDataset(g, "crafted", background=0, copies=K, alternative=replace_one)
        case FixedSize(batch_size=b, dataset_size=n):
            if K > 1:
                raise UnsupportedError("crafted: groups of K > 1 are constructed for Poisson sampling only")
            if natural:
                raise InputError(f"natural must be 0 for fixed-size sampling (every record is crafted: a natural "
                                 f"record displaced by the canary would shift nothing); got {natural}")
            if n - 1 < b:
                raise InputError(f"spec.sampling.dataset_size must be ≥ batch_size + 1 = {b + 1} so that the "
                                 f"dataset without the canary fills a batch; got {n}")
            return CraftedDataset(g, "crafted", background=n - 1, copies=1, alternative=replace_one)
        case TruncatedPoisson(dataset_size=n):
            # the realised pair of the accountant's lower end (docs/dominating-pairs.md §4c): the other
            # records only take batch places, so z is in the batch with probability p(n)
            if K > 1:
                raise UnsupportedError("crafted: groups of K > 1 are constructed for Poisson sampling only")
            if natural:
                raise InputError(f"natural must be 0 for truncated Poisson (every record is crafted); got {natural}")
            return CraftedDataset(g, "crafted", background=n - 1, copies=1, alternative=replace_one,
                                  background_gradient=0)
        case Shuffle(dataset_size=n):
            if K > 1:
                raise UnsupportedError("crafted: groups of K > 1 are constructed for Poisson sampling only")
            if replace_one:
                # the trainer realises replace-one with two slots (z, z′) of which one is present; under
                # shuffling an absent slot still holds ⊥ in the permutation, so D and D′ would differ in two
                # slots, not one (docs/worst-case.md)
                raise UnsupportedError("crafted: shuffled batches are constructed for add/remove (⊥) only")
            if natural:
                raise InputError(f"natural must be 0 for shuffled batches (every record is crafted); got {natural}")
            if n < 2:
                raise InputError(f"spec.sampling.dataset_size must be ≥ 2 (the canary and a −g record); got {n}")
            return CraftedDataset(g, "crafted", background=n - 1, copies=1, alternative=False)
        case RandomAllocation(k=k):
            # the accountant's pair (1/t)Σ_j N(e_j, σ²I) vs N(0, σ²I) needs nothing but z: the other records'
            # allocations are independent of z's and touch no other coordinate (docs/worst-case.md)
            if K > 1 or replace_one or k != 1:
                raise UnsupportedError("crafted: random allocation is constructed for balls-in-bins (k = 1), "
                                       "add/remove, single records (what its accountant covers)")
            return CraftedDataset(g, "crafted", background=0, copies=1, alternative=False)
    raise InputTypeError("spec.sampling must be Poisson, FixedSize, Shuffle, RandomAllocation or TruncatedPoisson; got "
                         f"{type(spec.sampling).__name__}")


def _binomial_log_pmf(n: int, p: float, dtype: torch.dtype) -> Tensor:
    k = torch.arange(n + 1, dtype=dtype)
    log_c = torch.lgamma(torch.tensor(n + 1.0, dtype=dtype)) - torch.lgamma(k + 1) - torch.lgamma(n - k + 1)
    if p >= 1.0:
        return torch.where(k == n, 0.0, -math.inf).to(dtype)
    return log_c + k * math.log(p) + (n - k) * math.log1p(-p)


def laws(spec: DPSGD, canary: CraftedDataset, *, natural: int = 0,
         dtype: torch.dtype = torch.float64) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The per-step law of o_t (units of C, before noise) with the canary in and out.

    Returns:
        (a_in, log p_in, a_out, log p_out): the shifts of each Gaussian mixture N(a, σ²) and
        their log weights.
    """
    if not isinstance(canary, CraftedDataset):
        raise InputTypeError(f"canary must be a CraftedDataset; got {type(canary).__name__}")
    K, nb = canary.copies, canary.background
    if isinstance(spec.sampling, TruncatedPoisson):
        from accountants.truncated_poisson import inclusion_probability

        # z is in the batch with probability p(n) (other records of gradient 0): the Poisson laws at p
        p = inclusion_probability(spec.sampling, natural + nb + K)
        return laws(DPSGD(spec.noise_multiplier, Poisson(p), spec.steps, spec.neighbouring), canary,
                    natural=natural, dtype=dtype)
    match spec.sampling:
        case Poisson(rate=q):
            q = float(q)
            if canary.alternative:  # z in D (+1 when drawn), z′ in D′ (−1 when drawn)
                lp = torch.tensor([math.log1p(-q) if q < 1 else -math.inf, math.log(q)], dtype=dtype)
                return (torch.tensor([0.0, 1.0], dtype=dtype), lp, torch.tensor([0.0, -1.0], dtype=dtype), lp)
            return (torch.arange(K + 1, dtype=dtype), _binomial_log_pmf(K, q, dtype),
                    torch.zeros(1, dtype=dtype), torch.zeros(1, dtype=dtype))
        case FixedSize(batch_size=b, replace=replace):
            n = natural + nb + K
            out = (torch.full((1,), -float(b), dtype=dtype), torch.zeros(1, dtype=dtype))
            if replace:  # z drawn k ~ Bin(b, 1/N) times, each draw displacing a −g record
                k = torch.arange(b + 1, dtype=dtype)
                return (-b + 2 * k, _binomial_log_pmf(b, 1.0 / n, dtype), *out)
            p = min(1.0, b / n)
            lp = torch.tensor([math.log1p(-p) if p < 1 else -math.inf, math.log(p)], dtype=dtype)
            return (torch.tensor([-float(b), 2.0 - b], dtype=dtype), lp, *out)
    raise InputTypeError(f"spec.sampling must be Poisson, FixedSize or TruncatedPoisson; got "
                         f"{type(spec.sampling).__name__}")


def _mixture_log_density(o: Tensor, a: Tensor, log_p: Tensor, var: float) -> Tensor:
    return torch.logsumexp(log_p - (o.unsqueeze(-1) - a) ** 2 / (2 * var), dim=-1)


def llr(observations: Tensor, spec: DPSGD, canary: CraftedDataset, *, clip_norm: float = 1.0,
        natural: int = 0) -> Tensor:
    """Σ_t log p_in(o_t)/p_out(o_t) for the crafted pair (:func:`laws`); higher ⇒ member.

    Args:
        observations: (..., T) projections o_t on the canary direction, in units of C.
        spec: the claimed σ and sampler (the adversary's model of the run).
        canary: the crafted dataset.
        clip_norm: C; the canary's clipped size min(‖g‖, C)/C scales every shift.
        natural: natural records in the setup (they never touch the canary coordinate).
    """
    check.positive(clip_norm=clip_norm)
    amp = min(float(canary.vectors[0].norm()) / clip_norm, 1.0)
    if isinstance(spec.sampling, Shuffle):
        # baseline −b (b records of −g); z's batch: −b + 2 with z in, −b + 1 with ⊥ in its slot (units of C·amp)
        base = observations + spec.sampling.batch_size * amp
        return mia.shuffled_llr(base, spec, 2.0, 1.0, amplitude=amp)
    if isinstance(spec.sampling, RandomAllocation):  # z in one step per epoch: per-epoch mixture LLR
        return mia.allocation_llr(observations, spec, amplitude=amp)
    a_in, lp_in, a_out, lp_out = laws(spec, canary, natural=natural, dtype=observations.dtype)
    var = spec.noise_multiplier ** 2
    o = observations
    return (_mixture_log_density(o, amp * a_in, lp_in, var) - _mixture_log_density(o, amp * a_out, lp_out, var)
            ).sum(dim=-1)


def sample_pair(spec: DPSGD, canary: CraftedDataset, n: int, *,
                generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """Draws of the crafted pair of :func:`laws` itself (no trainer): (in, out) observations, each (n, T).

    Each step independently: a shift drawn from the mixture weights of :func:`laws` plus N(0, σ²), in units
    of C (Poisson, fixed size, truncated Poisson). :func:`llr` is this pair's exact log-likelihood ratio,
    so ``epsilon_lower_bound`` on the llr of these draws is one optimal audit of the realised pair (the
    ε_certifiable of the realised pair in benchmarks/bench_tightness.py). Bound: none.

    Raises:
        InputTypeError: for samplers whose steps are not independent (shuffle, random allocation: their own
            samplers :func:`sample_shuffle_pair`, :func:`sample_allocation_pair`).
    """
    check.integer(1, None, n=n)
    a_in, lp_in, a_out, lp_out = laws(spec, canary)
    T, sigma = spec.steps, spec.noise_multiplier

    def draw(a: Tensor, lp: Tensor) -> Tensor:
        idx = torch.multinomial(lp.exp(), n * T, replacement=True, generator=generator).reshape(n, T)
        return a[idx] + sigma * torch.randn(n, T, generator=generator, dtype=torch.float64)

    return draw(a_in, lp_in), draw(a_out, lp_out)


def sample_shuffle_pair(spec: DPSGD, n: int, *, shift_in: float = 2.0, shift_out: float = 1.0,
                        generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """Draws of the shuffled crafted pair itself (no trainer): (in, out) observations, each (n, T).

    Every epoch of L = ⌊n/b⌋ steps adds ``shift_in`` (in) or ``shift_out`` (out) to one uniformly
    chosen step (a trailing partial epoch of r steps: with probability r·b/n), on top of N(0, σ²)
    per step: the baseline-removed view of :func:`crafted`'s add/remove dataset (Chua et al.,
    ICML 2024, §4). For ε_certifiable of the realised pair and for tests. Bound: none.
    """
    s = spec.sampling
    if not isinstance(s, Shuffle):
        raise InputTypeError(f"spec.sampling must be accountants.Shuffle; got {type(s).__name__}")
    check.integer(1, None, n=n)
    T, L, sigma = spec.steps, s.steps_per_epoch, spec.noise_multiplier

    def draw(m: float) -> Tensor:
        o = torch.randn(n, T, generator=generator, dtype=torch.float64) * sigma
        rows = torch.arange(n)
        for start in range(0, T, L):
            r = min(L, T - start)
            p = min(1.0, r * s.batch_size / s.dataset_size)
            pos = torch.randint(0, r, (n,), generator=generator)
            hit = torch.rand(n, generator=generator, dtype=torch.float64) < p
            o[rows[hit], start + pos[hit]] += m
        return o

    return draw(float(shift_in)), draw(float(shift_out))


def sample_allocation_pair(spec: DPSGD, n: int, *, generator: torch.Generator | None = None) -> tuple[Tensor, Tensor]:
    """Draws of the balls-in-bins pair itself (no trainer): (in, out) observations, each (n, T).

    "in": every epoch of t steps adds 1 to one uniformly chosen step (a trailing partial epoch of r
    steps: with probability r/t), on top of N(0, σ²) per step; "out": N(0, σ²) only. This is the
    accountant's dominating pair (1/t)Σ_j N(e_j, σ²I) vs N(0, σ²I) per epoch, the view of
    :func:`crafted`'s dataset. For ε_certifiable of the pair and for tests. Bound: none.
    """
    s = spec.sampling
    if not isinstance(s, RandomAllocation) or s.k != 1:
        raise InputTypeError(f"spec.sampling must be accountants.RandomAllocation with k = 1; got {s!r}")
    check.integer(1, None, n=n)
    T, t, sigma = spec.steps, s.steps_per_epoch, spec.noise_multiplier
    o_in = torch.randn(n, T, generator=generator, dtype=torch.float64) * sigma
    rows = torch.arange(n)
    for start in range(0, T, t):
        pos = start + torch.randint(0, t, (n,), generator=generator)
        hit = pos < T
        o_in[rows[hit], pos[hit]] += 1.0
    o_out = torch.randn(n, T, generator=generator, dtype=torch.float64) * sigma
    return o_in, o_out
