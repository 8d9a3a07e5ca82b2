"""Batch samplers that execute ``spec.sampling`` exactly as the accountant describes it.

A sampler returns, for one model, a (T, N) int16 tensor of *draw counts*: ``counts[t, i]`` is
how many times record i is in the batch of step t (0/1 except with replacement). Records with
``present[i] == False`` (a canary slot left empty in the "out" world, an add/remove neighbour)
are never drawn. All randomness comes from the ``generator`` passed in, in a fixed order, so the
batches of one model depend only on its own generator.

>>> import torch, accountants as acc
>>> from attacks.samplers import sample_counts
>>> c = sample_counts(acc.FixedSize(4, 10), 3, torch.ones(10, dtype=torch.bool), torch.Generator().manual_seed(0))
>>> c.sum(dim=1).tolist()
[4, 4, 4]
"""

from __future__ import annotations

import torch
from torch import Tensor

from accountants import validate as check
from accountants.errors import InputError, InputTypeError
from accountants.sampling import FixedSize, Poisson, RandomAllocation, Shuffle, TruncatedPoisson

__all__ = ["fixed_size_with_replacement", "fixed_size_without_replacement", "poisson", "random_allocation",
           "sample_counts", "shuffled", "shuffled_slots", "truncated_poisson"]

COUNT_DTYPE = torch.int16


def _check_present(present: Tensor) -> Tensor:
    if not isinstance(present, Tensor) or present.dtype != torch.bool or present.ndim != 1:
        raise InputTypeError("present must be a 1-D bool tensor (one entry per record)")
    return present


def poisson(rate: float, steps: int, present: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """Poisson sampling: every present record joins every batch independently with probability q.

    Formal guarantees:
        - P[record i in batch t] = q for each present i, and 0 for an absent one.
        - Inclusions are independent across records and across steps.
        - The batch size is Binomial(n_present, q); it is random, and the trainer never divides
          by it (it divides by the expected size q·N).
        - Each record appears at most once per batch.

    Args:
        rate: q in (0, 1].
        steps: T.
        present: (N,) bool.
        generator: source of randomness (one (T, N) uniform draw).

    Returns:
        (T, N) int16 counts in {0, 1}.
    """
    check.in_range(0.0, 1.0, closed="right", rate=rate)
    check.integer(1, None, steps=steps)
    present = _check_present(present)
    u = torch.rand(steps, present.numel(), generator=generator, dtype=torch.float64)
    return ((u < rate) & present).to(COUNT_DTYPE)


def truncated_poisson(rate: float, max_batch_size: int, steps: int, present: Tensor,
                      generator: torch.Generator | None = None) -> Tensor:
    """Poisson sampling cut to at most B records: when more are drawn, a uniformly random B are kept.

    The sampler of :class:`accountants.TruncatedPoisson` (dp_accounting's truncated batch; jax_privacy's
    ``CyclicPoissonSampling(truncated_batch_size=B)`` with ``cycle_length=1``, which draws
    min(Binomial(n, q), B) records uniformly: the same law).

    Formal guarantees:
        - Before the cut, every present record is drawn independently with probability q (the draws of
          :func:`poisson`, the same uniforms); an absent record is never drawn.
        - The batch size is min(Binomial(n_present, q), B); each record appears at most once per batch.
        - Given the set drawn, the batch is a uniformly random B-subset of it when it holds more than B
          (the B drawn records with the smallest of a second (T, N) uniform draw); steps are independent.

    Args:
        rate: q in (0, 1].
        max_batch_size: B ≥ 1.
        steps: T.
        present: (N,) bool.
        generator: source of randomness (a (T, N) uniform draw for inclusion, then one for the cut).

    Returns:
        (T, N) int16 counts in {0, 1}.
    """
    check.integer(1, None, max_batch_size=max_batch_size)
    drawn = poisson(rate, steps, present, generator).bool()
    keys = torch.rand(steps, drawn.shape[1], generator=generator, dtype=torch.float64)
    keys = keys.masked_fill(~drawn, float("inf"))  # only drawn records can be among the B smallest
    k = min(int(max_batch_size), drawn.shape[1])
    idx = torch.topk(keys, k, dim=1, largest=False).indices
    kept = torch.zeros_like(drawn).scatter_(1, idx, True) & drawn  # rows with ≤ B drawn keep them all
    return kept.to(COUNT_DTYPE)


def fixed_size_without_replacement(
    batch_size: int, steps: int, present: Tensor, generator: torch.Generator | None = None
) -> Tensor:
    """A fresh uniformly random b-subset of the present records at every step.

    Formal guarantees:
        - The batch size is exactly b at every step.
        - Each record appears at most once per batch.
        - Every b-subset of the present records is equally likely, so
          P[record i in batch t] = b / n_present; batches of different steps are independent.

    Args:
        batch_size: b ≤ number of present records.
        steps: T.
        present: (N,) bool.
        generator: source of randomness (one (T, N) uniform draw; the b smallest keys win).

    Returns:
        (T, N) int16 counts in {0, 1}.
    """
    check.integer(1, None, batch_size=batch_size, steps=steps)
    present = _check_present(present)
    n_present = int(present.sum())
    if batch_size > n_present:
        raise InputError(f"batch_size must be in [1, {n_present}] (the present records); got {batch_size}")
    keys = torch.rand(steps, present.numel(), generator=generator, dtype=torch.float64)
    keys = keys.masked_fill(~present, float("inf"))  # absent records are never among the b smallest
    idx = torch.topk(keys, batch_size, dim=1, largest=False).indices
    counts = torch.zeros(steps, present.numel(), dtype=COUNT_DTYPE)
    return counts.scatter_(1, idx, 1)


def fixed_size_with_replacement(
    batch_size: int, steps: int, present: Tensor, generator: torch.Generator | None = None
) -> Tensor:
    """b i.i.d. uniform draws from the present records at every step.

    Formal guarantees:
        - The batch has exactly b draws; a record may be drawn several times.
        - The count of record i at step t is Binomial(b, 1/n_present); counts of one step are
          Multinomial(b, uniform), and steps are independent.

    Args:
        batch_size: b ≥ 1.
        steps: T.
        present: (N,) bool.
        generator: source of randomness (one (T, b) integer draw).

    Returns:
        (T, N) int16 counts in {0, ..., b}.
    """
    check.integer(1, 32767, batch_size=batch_size)
    check.integer(1, None, steps=steps)
    present = _check_present(present)
    where = torch.nonzero(present).squeeze(1)
    if where.numel() == 0:
        raise InputError("present must mark at least one record")
    pos = torch.randint(0, where.numel(), (steps, batch_size), generator=generator)
    counts = torch.zeros(steps, present.numel(), dtype=COUNT_DTYPE)
    return counts.scatter_add_(1, where[pos], torch.ones(steps, batch_size, dtype=COUNT_DTYPE))


def shuffled(batch_size: int, steps: int, present: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """Shuffle once per epoch, then walk through consecutive batches (a DataLoader with shuffle=True).

    This is NOT Poisson or fixed-size sampling: it is here for the fault
    :class:`attacks.faults.ShuffledBatches` (opacus #80, tf-privacy #19).

    Formal guarantees:
        - The batch size is exactly b; each epoch has ⌊n_present / b⌋ steps (the remainder of
          the permutation is dropped), and a record appears at most once per epoch.

    Returns:
        (T, N) int16 counts in {0, 1}.
    """
    check.integer(1, None, batch_size=batch_size, steps=steps)
    present = _check_present(present)
    where = torch.nonzero(present).squeeze(1)
    per_epoch = where.numel() // batch_size
    if per_epoch == 0:
        raise InputError(f"batch_size must be in [1, {where.numel()}] (the present records); got {batch_size}")
    counts = torch.zeros(steps, present.numel(), dtype=COUNT_DTYPE)
    for t in range(0, steps, per_epoch):  # one permutation per epoch; its k-th block of b is step t + k
        perm = where[torch.randperm(where.numel(), generator=generator)]
        used = min(per_epoch, steps - t) * batch_size
        step = t + torch.arange(used) // batch_size
        counts[step, perm[:used]] = 1
    return counts


def shuffled_slots(batch_size: int, steps: int, present: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """:class:`accountants.Shuffle` as its accountant describes it: every slot is shuffled, absent ones hold ⊥.

    Each epoch draws a uniform permutation of all N slots (present or not) and cuts it into
    ⌊N/b⌋ batches of b; a slot whose record is absent holds ⊥, a record of zero gradient (Chua
    et al., ICML 2024, §2: the add/remove relation of batch samplers), so it keeps its position
    and is never counted. The positions of the other records are therefore the same in both
    neighbouring datasets, which is what the accountant's upper bound conditions on
    (docs/shuffle.md). Unlike :func:`shuffled` (the fault's loader), absent slots are not dropped.

    Formal guarantees:
        - A present record is in exactly one batch of each full epoch, in the first r batches of a
          trailing partial epoch with probability r·b/N, and never in two batches of one epoch.
        - An absent slot is never drawn; every batch holds exactly b slots (b minus the ⊥ ones).

    Returns:
        (T, N) int16 counts in {0, 1}.
    """
    present = _check_present(present)
    full = torch.ones(present.numel(), dtype=torch.bool)
    return shuffled(batch_size, steps, full, generator) * present.to(COUNT_DTYPE)


def random_allocation(k: int, steps_per_epoch: int, steps: int, present: Tensor,
                      generator: torch.Generator | None = None) -> Tensor:
    """:class:`accountants.RandomAllocation`: every record joins k of each epoch's t steps (balls-in-bins: k = 1).

    Every slot, present or not, draws its k-subset of the epoch's t steps (uniform, independently of
    the other slots and epochs); an absent slot's draws are then discarded. The draws of the other
    records are therefore the same in both neighbouring datasets, and independent of the canary's:
    the realised pair of :mod:`accountants.random_allocation`. A trailing partial epoch of r < t
    steps runs the first r steps of a full epoch's allocation.

    Formal guarantees:
        - A present record is in exactly k batches of each full epoch, a uniformly random k-subset of
          its t steps; in a trailing partial epoch of r steps it is in each with probability k/t.
        - Allocations are independent across records and epochs; absent records are never drawn.
        - Batch sizes vary: Binomial(n_present, k/t) at every step (the trainer divides by the
          expected size k·N/t, never by the realised one).

    Args:
        k: 1 ≤ k ≤ t. steps_per_epoch: t. steps: T.
        present: (N,) bool.
        generator: source of randomness (k = 1: one (⌈T/t⌉, N) integer draw; k > 1: an (N, t)
            uniform draw per epoch, the k smallest keys win).

    Returns:
        (T, N) int16 counts in {0, 1}.
    """
    check.integer(1, None, steps_per_epoch=steps_per_epoch, steps=steps)
    check.integer(1, steps_per_epoch, k=k)
    present = _check_present(present)
    n, t = present.numel(), steps_per_epoch
    epochs = -(-steps // t)
    if k == 1:
        slot = torch.randint(0, t, (epochs, n, 1), generator=generator)
    else:  # one epoch's (N, t) keys at a time: memory N·t, not epochs·N·t
        slot = torch.stack([torch.topk(torch.rand(n, t, generator=generator, dtype=torch.float64), k, dim=1,
                                       largest=False).indices for _ in range(epochs)])
    step = slot + (torch.arange(epochs) * t)[:, None, None]  # (E, N, k) absolute step of each draw
    record = torch.arange(n)[None, :, None].expand_as(step)
    keep = (step < steps) & present[None, :, None]
    counts = torch.zeros(steps, n, dtype=COUNT_DTYPE)
    counts[step[keep], record[keep]] = 1
    return counts


def sample_counts(
    sampling: Poisson | FixedSize | Shuffle | RandomAllocation | TruncatedPoisson, steps: int, present: Tensor,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Draw T batches with the scheme ``sampling`` describes (dispatch on its type).

    For :class:`~accountants.sampling.FixedSize`, ``dataset_size`` is the size of the larger of
    the two neighbouring datasets; batches are drawn from the records present, so it must be at
    least their number (the smaller neighbour has one record fewer under add/remove). For
    :class:`~accountants.sampling.Shuffle`, ``dataset_size`` must equal the number of slots N
    (absent records hold ⊥ in their slot: :func:`shuffled_slots`). For
    :class:`~accountants.sampling.RandomAllocation`, every slot is allocated (:func:`random_allocation`).
    """
    match sampling:
        case Poisson(rate=q):
            return poisson(q, steps, present, generator)
        case RandomAllocation(k=k, steps_per_epoch=t):
            return random_allocation(k, t, steps, present, generator)
        case TruncatedPoisson(rate=q, max_batch_size=b, dataset_size=n):
            n_present = int(_check_present(present).sum())
            if n not in (n_present, n_present + 1):   # the pairs the accountant covers: (n, n − 1), (n + 1, n)
                raise InputError(f"sampling.dataset_size must be the {n_present} records present or one more "
                                 f"(the larger neighbouring dataset); got {n}")
            return truncated_poisson(q, b, steps, present, generator)
        case Shuffle(batch_size=b, dataset_size=n):
            slots = _check_present(present).numel()
            if n != slots:
                raise InputError(f"sampling.dataset_size must be the {slots} record slots (an absent record holds ⊥ "
                                 f"in its slot); got {n}")
            return shuffled_slots(b, steps, present, generator)
        case FixedSize(batch_size=b, dataset_size=n, replace=replace):
            n_present = int(_check_present(present).sum())
            if n < n_present:
                raise InputError(f"sampling.dataset_size must be ≥ the {n_present} records present; got {n}")
            if replace:
                return fixed_size_with_replacement(b, steps, present, generator)
            return fixed_size_without_replacement(b, steps, present, generator)
        case _:
            raise InputTypeError(
                "sampling must be accountants.Poisson, FixedSize, Shuffle, RandomAllocation or TruncatedPoisson; "
                f"got {type(sampling).__name__}"
            )


def expected_batch_size(sampling: Poisson | FixedSize | Shuffle | RandomAllocation | TruncatedPoisson,
                        dataset_size: int) -> float:
    """The public normaliser of DP-SGD: q·N for Poisson (truncated or not: a constant, never the realised
    size), b for fixed-size and shuffled batches, k·N/t for random allocation (N the record slots)."""
    match sampling:
        case Poisson(rate=q) | TruncatedPoisson(rate=q):
            return q * dataset_size
        case RandomAllocation(k=k, steps_per_epoch=t):
            return k * dataset_size / t
        case FixedSize(batch_size=b) | Shuffle(batch_size=b):
            return float(b)
        case _:
            raise InputTypeError(
                "sampling must be accountants.Poisson, FixedSize, Shuffle, RandomAllocation or TruncatedPoisson; "
                f"got {type(sampling).__name__}"
            )
