"""Small models for audits, used functionally through ``torch.func``.

A model here is a plain ``nn.Module`` with parameters only (no buffers, no batch norm), so that
``functional_call(model, params, x)`` with a dict of parameters is the whole forward pass, and R
models are a dict of stacked parameters with a leading model axis (see :func:`init_params`).

>>> import torch
>>> from attacks import models
>>> m = models.logistic_regression(64, 10)
>>> p = models.init_params(m, 3, [torch.Generator().manual_seed(i) for i in range(3)])
>>> tuple(p["linear.weight"].shape)
(3, 10, 64)
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap

from accountants import validate as check
from accountants.errors import InputError

__all__ = [
    "Init",
    "Slotted",
    "flatten",
    "init_params",
    "logistic_regression",
    "logits",
    "mlp",
    "num_params",
    "per_example_gradients",
    "slot_coordinates",
    "small_cnn",
    "unflatten",
    "with_slots",
]


class LogisticRegression(nn.Module):
    """Multinomial logistic regression: logits = W x + b (x flattened)."""

    def __init__(self, in_features: int, num_classes: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear(x.flatten(1))


class MLP(nn.Module):
    """One hidden layer with tanh (smooth, so per-example gradients are well defined everywhere)."""

    def __init__(self, in_features: int, hidden: int, num_classes: int, dropout: float = 0.0) -> None:
        super().__init__()
        self.hidden = nn.Linear(in_features, hidden)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.out(self.dropout(torch.tanh(self.hidden(x.flatten(1)))))


class SmallCNN(nn.Module):
    """Conv(1→c, 3×3, pad 1) → tanh → 2×2 average pool → linear; for 1×8×8 digits."""

    def __init__(self, num_classes: int = 10, channels: int = 8, side: int = 8) -> None:
        super().__init__()
        self.conv = nn.Conv2d(1, channels, kernel_size=3, padding=1)
        self.pool = nn.AvgPool2d(2)
        self.out = nn.Linear(channels * (side // 2) ** 2, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.out(self.pool(torch.tanh(self.conv(x))).flatten(1))


class Slotted(nn.Module):
    """``model`` with m extra parameters ``slots`` that the forward pass never reads.

    The slots are structurally quiet: every per-example gradient is exactly 0 on them at every
    parameter value, so the natural records' clipping norms, clipped sums and updates are those of
    ``model``, and DP-SGD on the slotted model is DP-SGD on ``model`` plus m coordinates that hold
    nothing but the canaries' contributions and the noise (σC per coordinate, like every other).
    A Dirac gradient canary on a slot therefore never collides with a natural record (docs/worst-case.md,
    "One run at scale"). The slots come last in the flat parameter vector (:func:`slot_coordinates`) and
    are initialised to 0 under every :class:`Init` (no draw: the natural parameters get the draws of
    ``model`` alone).
    """

    SLOTS = "padding.slots"  # the slots' parameter name (a submodule after ``model``: they come last)

    def __init__(self, model: nn.Module, slots: int) -> None:
        super().__init__()
        self.model = model  # registered first: its parameters keep their order and come first
        self.padding = _Padding(slots, next(model.parameters()).dtype)

    def forward(self, x: Tensor) -> Tensor:
        return self.model(x)


class _Padding(nn.Module):
    """The slots of a :class:`Slotted` model (a module of their own, so they come after the model's)."""

    def __init__(self, slots: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.slots = nn.Parameter(torch.zeros(slots, dtype=dtype))


def with_slots(model: nn.Module, slots: int) -> Slotted:
    """``model`` with ``slots`` ≥ 1 quiet parameter coordinates appended (:class:`Slotted`)."""
    check.integer(1, None, slots=slots)
    if isinstance(model, Slotted):
        raise InputError("model already has slots; give the unslotted model and the total number of slots")
    return Slotted(model, slots)


def slot_coordinates(model: nn.Module) -> Tensor:
    """(m,) int64 flat coordinates of a :class:`Slotted` model's slots (the last m of its D parameters)."""
    if not isinstance(model, Slotted):
        raise InputError(f"model must be a Slotted model (attacks.models.with_slots); got {type(model).__name__}")
    start = 0
    for name, p in model.named_parameters():
        if name == Slotted.SLOTS:
            return torch.arange(start, start + p.numel(), dtype=torch.int64)
        start += p.numel()
    raise AssertionError("a Slotted model has its slots")  # pragma: no cover


def logistic_regression(in_features: int, num_classes: int) -> nn.Module:
    """Logistic regression on ``in_features`` inputs (binary data uses K = 2 with a softmax)."""
    check.integer(1, None, in_features=in_features)
    check.integer(2, None, num_classes=num_classes)
    return LogisticRegression(in_features, num_classes).to(torch.float64)


def mlp(in_features: int, hidden: int, num_classes: int, *, dropout: float = 0.0) -> nn.Module:
    """A one-hidden-layer tanh MLP (``dropout`` is active in train mode only)."""
    check.integer(1, None, in_features=in_features, hidden=hidden)
    check.integer(2, None, num_classes=num_classes)
    check.in_range(0.0, 1.0, closed="left", dropout=dropout)
    return MLP(in_features, hidden, num_classes, dropout).to(torch.float64)


def small_cnn(num_classes: int = 10, *, channels: int = 8, side: int = 8) -> nn.Module:
    """A small CNN for (1, side, side) images (side even), e.g. 8×8 digits."""
    check.integer(2, None, num_classes=num_classes, side=side)
    check.integer(1, None, channels=channels)
    if side % 2:
        raise InputError(f"side must be even; got {side}")
    return SmallCNN(num_classes, channels, side).to(torch.float64)


class Init(enum.Enum):
    """Initialisation of stacked parameters.

    DEFAULT: PyTorch's default for Linear/Conv2d, U(-1/√fan_in, 1/√fan_in) for weights and biases.
    ZEROS: all zeros (a common choice for logistic regression audits; not for hidden layers).
    """

    DEFAULT = "default"
    ZEROS = "zeros"


def init_params(
    model: nn.Module,
    n_models: int,
    generators: Sequence[torch.Generator] | torch.Generator | None = None,
    *,
    init: Init = Init.DEFAULT,
    dtype: torch.dtype | None = None,
) -> dict[str, Tensor]:
    """Parameters of ``n_models`` independent copies of ``model``, stacked on a leading axis.

    Model r's parameters come only from ``generators[r]`` (drawn in ``named_parameters`` order),
    so a model's initialisation does not depend on which other models are trained beside it.

    Args:
        model: the architecture (its own parameter values are not used).
        n_models: R.
        generators: one generator per model, or a single generator shared in order, or None.
        init: :class:`Init`.
        dtype: dtype of the result (default: the model's).

    Returns:
        dict name -> (R, *param.shape).
    """
    check.integer(1, None, n_models=n_models)
    if isinstance(generators, torch.Generator) or generators is None:
        gens = [generators] * n_models
    else:
        gens = list(generators)
        if len(gens) != n_models:
            raise InputError(f"generators must have length n_models={n_models}; got {len(gens)}")
    plan = init_plan(model, init, dtype)
    out: dict[str, list[Tensor]] = {name: [] for name, *_ in plan}
    for g in gens:
        for name, v in zip(out, draw_init(plan, g), strict=True):
            out[name].append(v)
    return {name: torch.stack(v) for name, v in out.items()}


def init_plan(model: nn.Module, init: Init = Init.DEFAULT,
              dtype: torch.dtype | None = None) -> list[tuple[str, torch.Size, torch.dtype, float | None]]:
    """(name, shape, dtype, bound) of every parameter in draw order; bound None: zeros. See :func:`init_params`."""
    bounds: dict[str, float] = {}
    for mod_name, mod in model.named_modules():
        if isinstance(mod, (nn.Linear, nn.Conv2d)):
            bound = 1.0 / math.sqrt(mod.weight[0].numel())  # kaiming_uniform(a=√5) == U(±1/√fan_in)
            for p_name, _ in mod.named_parameters(recurse=False):
                bounds[f"{mod_name}.{p_name}" if mod_name else p_name] = bound
    quiet = {Slotted.SLOTS} if isinstance(model, Slotted) else set()  # Slotted: zeros under every init, no draw
    plan: list[tuple[str, torch.Size, torch.dtype, float | None]] = []
    for name, p in model.named_parameters():
        if name in quiet:
            plan.append((name, p.shape, dtype or p.dtype, None))
            continue
        if init is not Init.ZEROS and name not in bounds:
            raise InputError(f"no default initialisation known for parameter {name!r}; use Init.ZEROS")
        plan.append((name, p.shape, dtype or p.dtype, None if init is Init.ZEROS else bounds[name]))
    return plan


def draw_init(plan: list[tuple[str, torch.Size, torch.dtype, float | None]],
              generator: torch.Generator | None) -> list[Tensor]:
    """One model's initial parameters, drawn from ``generator`` in ``plan`` order (:func:`init_plan`)."""
    return [torch.zeros(shape, dtype=dt) if bound is None
            else (2 * torch.rand(shape, generator=generator, dtype=dt) - 1) * bound
            for _name, shape, dt, bound in plan]


def num_params(params: dict[str, Tensor], *, stacked: bool = True) -> int:
    """D, the number of scalar parameters of one model."""
    return sum(int(v[0].numel() if stacked else v.numel()) for v in params.values())


def flatten(params: dict[str, Tensor], lead: int = 1) -> Tensor:
    """Concatenate parameters into (*lead dims, D), keeping the first ``lead`` dimensions."""
    return torch.cat([v.reshape(*v.shape[:lead], -1) for v in params.values()], dim=-1)


def unflatten(flat: Tensor, like: dict[str, Tensor], lead: int = 1) -> dict[str, Tensor]:
    """Inverse of :func:`flatten` with the shapes of ``like`` (which has ``lead`` leading dims)."""
    out, start = {}, 0
    for name, v in like.items():
        shape = v.shape[lead:]
        size = math.prod(shape)
        out[name] = flat[..., start : start + size].reshape(*flat.shape[:-1], *shape)
        start += size
    return out


def logits(model: nn.Module, params: dict[str, Tensor], x: Tensor) -> Tensor:
    """Logits of R stacked models on the same inputs, with the model in eval mode.

    Args:
        params: dict name -> (R, *shape).
        x: (m, *feature_shape).

    Returns:
        (R, m, K).
    """
    was_training = model.training
    model.eval()  # LiRA and loss scores are evaluated in eval mode (tensorflow/privacy PR #484)
    try:
        return vmap(lambda p: functional_call(model, p, (x,)))(params)
    finally:
        model.train(was_training)


def _loss(model: nn.Module):
    def loss(params: dict[str, Tensor], x: Tensor, y: Tensor) -> Tensor:
        out = functional_call(model, params, (x.unsqueeze(0),))
        return F.cross_entropy(out, y.unsqueeze(0))

    return loss


def per_example_gradients(model: nn.Module, params: dict[str, Tensor], x: Tensor, y: Tensor) -> dict[str, Tensor]:
    """Exact per-example gradients of the cross-entropy loss of one model (here, not in :mod:`attacks.dpsgd`, which
    re-exports it: :func:`attacks.canaries.quiet_coordinates` needs it and :mod:`attacks.dpsgd` imports canaries).

    ``functional_call`` + ``vmap(grad(...))``: one gradient per record, nothing patched onto the module.

    Args:
        params: dict name -> (*shape) (one model, no leading model axis).
        x: (B, *feature_shape); y: (B,) int64.

    Returns:
        dict name -> (B, *shape).
    """
    return vmap(grad(_loss(model)), in_dims=(None, 0, 0))(params, x, y)
