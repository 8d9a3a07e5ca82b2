"""RDP accounting: one module per family of theorems, and the dispatch from a description.

The dispatch table maps (sampling type, neighbouring relation) to a handler that returns the
one-step RDP curve and the name of the theorem that produced it. Later families register here
(``register_step_rdp``); ``supports`` and ``step_rdp`` use the same table, so whatever
``supports`` accepts, ``step_rdp`` computes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from ..errors import InputError, UnsupportedError
from ..events import DPSGD
from ..sampling import FixedSize, Neighbouring, Poisson
from .conversion import OrderGridWarning, delta_from_rdp, eps_from_rdp
from .mechanisms import rdp_gaussian, rdp_laplace, rdp_randomized_response
from .poisson import rdp_poisson_gaussian

__all__ = [
    "OrderGridWarning",
    "StepRdp",
    "delta_from_rdp",
    "eps_from_rdp",
    "rdp_gaussian",
    "rdp_laplace",
    "rdp_poisson_gaussian",
    "rdp_randomized_response",
    "register_step_rdp",
    "step_rdp",
    "unsupported_reason",
]

# handler(spec, orders) -> (one-step RDP curve with shape of orders, theorem name)
StepRdp = Callable[[DPSGD, Tensor], tuple[Tensor, str]]


@dataclass(frozen=True)
class _Handler:
    fn: StepRdp
    unsupported: Callable[[DPSGD], str | None] | None
    max_group_size: int


_STEP_RDP: dict[tuple[type, Neighbouring], _Handler] = {}


def register_step_rdp(
    sampling: type,
    neighbouring: Neighbouring,
    fn: StepRdp,
    *,
    unsupported: Callable[[DPSGD], str | None] | None = None,
    max_group_size: int = 1,
    force: bool = False,
) -> None:
    """Register the one-step RDP handler for a (sampling type, relation) pair; refuses duplicates.

    Args:
        fn: ``fn(spec, orders) -> (one-step RDP curve, theorem name)``.
        unsupported: optional ``spec -> reason | None`` for finer limits of the handler's theorems
            (consulted by ``supports``, ``epsilon`` and the CLI alike).
        max_group_size: the largest ``group_size`` the handler's theorems cover.
    """
    key = (sampling, neighbouring)
    if key in _STEP_RDP and not force:
        raise InputError(f"an RDP handler for {sampling.__name__} / {neighbouring.label} is already registered")
    _STEP_RDP[key] = _Handler(fn, unsupported, int(max_group_size))


def _sampling_name(spec: DPSGD) -> str:
    if type(spec.sampling).__name__ == "RandomAllocation":
        return "random-allocation"
    if type(spec.sampling).__name__ == "TruncatedPoisson":
        return "truncated-poisson"
    if isinstance(spec.sampling, FixedSize):
        return "fixed-wr" if spec.sampling.replace else "fixed-wor"
    return "poisson"


def unsupported_reason(spec: DPSGD) -> str | None:
    """Why no RDP theorem covers ``spec``, or None when one does. No side effects."""
    relation = spec.neighbouring.label
    handler = _STEP_RDP.get((type(spec.sampling), spec.neighbouring))
    if handler is None:
        return f"sampling={_sampling_name(spec)} with neighbouring={relation} is not supported by the RDP accountant"
    if spec.group_size > handler.max_group_size:
        return (
            f"group_size={spec.group_size} is not covered by the RDP accountant for sampling={_sampling_name(spec)} "
            f"with neighbouring={relation}: it covers group_size <= {handler.max_group_size} (group privacy is "
            "implemented for poisson add-remove, Schuchardt et al. 2024 Thm 4.2)"
        )
    return handler.unsupported(spec) if handler.unsupported is not None else None


def step_rdp(spec: DPSGD, orders: Tensor) -> tuple[Tensor, str]:
    """One-step RDP curve for ``spec`` at ``orders``.  Bound: upper.

    Raises:
        UnsupportedError: when no registered theorem covers the combination.
    """
    reason = unsupported_reason(spec)
    if reason is not None:
        raise UnsupportedError(reason)
    return _STEP_RDP[(type(spec.sampling), spec.neighbouring)].fn(spec, orders)


def _poisson_add_remove(spec: DPSGD, orders: Tensor) -> tuple[Tensor, str]:
    if spec.group_size > 1:  # Schuchardt et al. 2024 Thm 4.2 (accountants/rdp/group.py)
        from .group import step_rdp_poisson_group

        return step_rdp_poisson_group(spec, orders)
    q = torch.as_tensor(spec.sampling.rate, dtype=orders.dtype, device=orders.device)
    s = torch.as_tensor(spec.noise_multiplier, dtype=orders.dtype, device=orders.device)
    return rdp_poisson_gaussian(orders, q, s), "Mironov-Talwar-Zhang 2019 (exact sampled Gaussian)"


# Poisson add/remove covers groups through Schuchardt et al. 2024 Thm 4.2 (rdp/group.py).
from .group import MAX_GROUP_SIZE  # noqa: E402

register_step_rdp(Poisson, Neighbouring.ADD_REMOVE, _poisson_add_remove, max_group_size=MAX_GROUP_SIZE)


# Fixed-size batches (Birrell et al. 2024) and Poisson under replace-one (ibid. Thm C.9).
from .fixed_size import register_handlers as _register_fixed_size  # noqa: E402

_register_fixed_size(register_step_rdp)


# Random allocation / balls-in-bins, add/remove (Feldman & Shenfeld 2025; Dong, Chen & Özgür 2025).
from .random_allocation import register_handlers as _register_random_allocation  # noqa: E402

_register_random_allocation(register_step_rdp)


# Truncated Poisson, add/remove (the labelled pair of docs/dominating-pairs.md §4c, per label MTZ 2019).
from ..truncated_poisson import register_handlers as _register_truncated_poisson  # noqa: E402

_register_truncated_poisson(register_step_rdp)
