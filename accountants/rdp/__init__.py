"""RDP accounting: one module per family of theorems, and the dispatch from a description.

The dispatch table maps (sampling type, neighbouring relation) to a handler that returns the
one-step RDP curve and the name of the theorem that produced it. Later families register here
(``register_step_rdp``); ``supports`` and ``step_rdp`` use the same table, so whatever
``supports`` accepts, ``step_rdp`` computes.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from .._validate import UnsupportedError
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
_STEP_RDP: dict[tuple[type, Neighbouring], StepRdp] = {}


def register_step_rdp(sampling: type, neighbouring: Neighbouring, fn: StepRdp, *, force: bool = False) -> None:
    """Register the one-step RDP handler for a (sampling type, relation) pair; refuses duplicates."""
    key = (sampling, neighbouring)
    if key in _STEP_RDP and not force:
        raise ValueError(f"an RDP handler for {sampling.__name__} / {neighbouring.value} is already registered")
    _STEP_RDP[key] = fn


def unsupported_reason(spec: DPSGD) -> str | None:
    """Why no RDP theorem covers ``spec``, or None when one does. No side effects."""
    from .group import MAX_GROUP_SIZE  # lazy: group.py imports this package's submodules

    if spec.group_size != 1 and not (
        isinstance(spec.sampling, Poisson)
        and spec.neighbouring is Neighbouring.ADD_REMOVE
        and spec.group_size <= MAX_GROUP_SIZE
    ):
        return (
            f"group_size={spec.group_size} is covered by the RDP accountant only for sampling=poisson with "
            f"neighbouring=add-remove and group_size <= {MAX_GROUP_SIZE} (Schuchardt et al. 2024 Thm 4.2, whose "
            "evaluation cost grows with K); no implemented theorem covers group privacy otherwise"
        )
    key = (type(spec.sampling), spec.neighbouring)
    if key not in _STEP_RDP:
        name = {Poisson: "poisson", FixedSize: "fixed-size"}.get(type(spec.sampling), type(spec.sampling).__name__)
        if isinstance(spec.sampling, FixedSize):
            name = "fixed-wr" if spec.sampling.replace else "fixed-wor"
        return (
            f"sampling={name} with neighbouring={spec.neighbouring.value.replace('_', '-')} "
            "is not supported yet by the RDP accountant"
        )
    handler_check = getattr(_STEP_RDP[key], "unsupported", None)  # optional per-handler refinement
    return handler_check(spec) if handler_check is not None else None


def step_rdp(spec: DPSGD, orders: Tensor) -> tuple[Tensor, str]:
    """One-step RDP curve for ``spec`` at ``orders``.  Bound: upper.

    Raises:
        UnsupportedError: when no registered theorem covers the combination.
    """
    reason = unsupported_reason(spec)
    if reason is not None:
        raise UnsupportedError(reason)
    return _STEP_RDP[(type(spec.sampling), spec.neighbouring)](spec, orders)


def _poisson_add_remove(spec: DPSGD, orders: Tensor) -> tuple[Tensor, str]:
    if spec.group_size > 1:  # Schuchardt et al. 2024 Thm 4.2 (accountants/rdp/group.py)
        from .group import step_rdp_poisson_group

        return step_rdp_poisson_group(spec, orders)
    q = torch.as_tensor(spec.sampling.rate, dtype=orders.dtype, device=orders.device)
    s = torch.as_tensor(spec.noise_multiplier, dtype=orders.dtype, device=orders.device)
    return rdp_poisson_gaussian(orders, q, s), "Mironov-Talwar-Zhang 2019 (exact sampled Gaussian)"


register_step_rdp(Poisson, Neighbouring.ADD_REMOVE, _poisson_add_remove)


# Fixed-size batches (Birrell et al. 2024) and Poisson under replace-one (ibid. Thm C.9).
from .fixed_size import register_handlers as _register_fixed_size  # noqa: E402

_register_fixed_size(register_step_rdp)
