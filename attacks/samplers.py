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
from accountants.sampling import FixedSize, Poisson, RandomAllocation, Shuffle

__all__ = ["fixed_size_with_replacement", "fixed_size_without_replacement", "poisson", "sample_counts", "shuffled",
           "shuffled_slots"]

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


def sample_counts(
    sampling: Poisson | FixedSize | Shuffle, steps: int, present: Tensor, generator: torch.Generator | None = None
) -> Tensor:
    """Draw T batches with the scheme ``sampling`` describes (dispatch on its type).

    For :class:`~accountants.sampling.FixedSize`, ``dataset_size`` is the size of the larger of
    the two neighbouring datasets; batches are drawn from the records present, so it must be at
    least their number (the smaller neighbour has one record fewer under add/remove). For
    :class:`~accountants.sampling.Shuffle`, ``dataset_size`` must equal the number of slots N
    (absent records hold ⊥ in their slot: :func:`shuffled_slots`).
    """
    match sampling:
        case Poisson(rate=q):
            return poisson(q, steps, present, generator)
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
                f"sampling must be accountants.Poisson, FixedSize or Shuffle; got {type(sampling).__name__}"
            )


def expected_batch_size(sampling: Poisson | FixedSize | Shuffle | RandomAllocation, dataset_size: int) -> float:
    """The public normaliser of DP-SGD: q·N for Poisson, b for fixed-size and shuffled batches (never the realised)."""
    match sampling:
        case Poisson(rate=q):
            return q * dataset_size
        case FixedSize(batch_size=b) | Shuffle(batch_size=b):
            return float(b)
        case _:
            raise InputTypeError(
                f"sampling must be accountants.Poisson, FixedSize or Shuffle; got {type(sampling).__name__}"
            )
