"""Deliberately broken DP-SGD variants, so tests can show that an audit catches real bugs.

Pass one to :func:`attacks.dpsgd.train` as ``fault=``; the accountant still reads the honest
``spec``, which is exactly the situation of a buggy implementation with a correct claim. Each
fault leaks more than the spec allows, in the direction its docstring states (tested in
``tests/attacks/test_faults.py``).

>>> from attacks.faults import NoClipping, describe
>>> describe(NoClipping())
'no_clipping'
"""

from __future__ import annotations

from dataclasses import dataclass

from accountants import _validate as check
from accountants._validate import InputTypeError

__all__ = ["Fault", "NoClipping", "NoiseMissingFactor", "RealisedBatchNormalisation", "ShuffledBatches", "describe"]


@dataclass(frozen=True, slots=True)
class NoiseMissingFactor:
    """Noise std σ·C / factor instead of σ·C (e.g. factor = C when the clip norm is forgotten).

    Leaks more: the per-step white-box statistic of a Dirac canary keeps mean 1 (in units of C)
    but its std drops from σ to σ/factor, so μ_step grows from 1/σ to factor/σ.
    """

    factor: float = 2.0

    def __post_init__(self) -> None:
        check.in_range(1.0, None, closed="neither", factor=self.factor)


@dataclass(frozen=True, slots=True)
class NoClipping:
    """Per-example gradients (canaries included) are summed without clipping to C.

    Leaks more: a canary whose gradient norm exceeds C moves the update by its full norm, so the
    white-box statistic's "in" mean grows from 1 to ‖g‖/C while the noise stays σ.
    """


@dataclass(frozen=True, slots=True)
class RealisedBatchNormalisation:
    """The noisy sum is divided by the realised batch size |B_t| instead of the expected size.

    Leaks more (opacus #571/#819): the update's scale reveals |B_t|, which differs by one when the
    canary is in; the norm of a high-dimensional update measures that scale almost exactly.
    """


@dataclass(frozen=True, slots=True)
class ShuffledBatches:
    """Train with shuffle-once-per-epoch batches of size round(q·N) while Poisson(q) is accounted.

    Leaks more (opacus #80, tf-privacy #19): the canary is in exactly one step per epoch, never
    in zero, so the privacy amplification that Poisson's chance of absence buys is not there.
    """


Fault = NoiseMissingFactor | NoClipping | RealisedBatchNormalisation | ShuffledBatches


def describe(fault: Fault | None) -> str:
    """A short stable name for records and reports ("none" for the honest trainer)."""
    match fault:
        case None:
            return "none"
        case NoiseMissingFactor(factor=f):
            return f"noise_missing_factor({f:g})"
        case NoClipping():
            return "no_clipping"
        case RealisedBatchNormalisation():
            return "realised_batch_normalisation"
        case ShuffledBatches():
            return "shuffled_batches"
        case _:
            raise InputTypeError(f"fault must be one of the attacks.faults classes or None; got {type(fault).__name__}")
