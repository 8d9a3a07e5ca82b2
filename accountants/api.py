"""Public accounting API: ``epsilon``, ``delta``, ``rdp_curve``, ``calibrate``, ``supports``.

Methods live in a small registry whose errors list the choices; the CLI's ``choices=`` reads it,
so help text cannot go stale. Every method returns sound *upper* bounds.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from collections.abc import Callable
from typing import Any, Protocol

import torch
from torch import Tensor

from . import shuffle
from . import validate as check
from .errors import InputError, InputTypeError, UnsupportedError
from .events import DPSGD, Composed
from .orders import default_orders, near_one_orders
from .rdp import delta_from_rdp, eps_from_rdp, rdp_poisson_gaussian, step_rdp, unsupported_reason
from .rdp.conversion import minimise_over_orders, steps_factor
from .results import DeltaBound, EpsilonBound
from .sampling import Poisson, Shuffle
from .shuffle import ShuffleBounds, has_shuffle, reduce_shuffle, upper_theorem

__all__ = [
    "Method",
    "calibrate",
    "delta",
    "epsilon",
    "get_method",
    "method_label",
    "methods",
    "poisson_epsilon",
    "rdp_curve",
    "register_method",
    "shuffle_bounds",
    "supports",
]

Spec = DPSGD | Composed


class Method(Protocol):
    """An accounting method: every check of ``epsilon``/``delta`` is also done by ``unsupported``.

    Optionally ``tradeoff(spec, *, eps_grid, options) -> TradeOff``, its lower trade-off curve, or
    ``curve(spec, orders) -> (RDP curve, theorem)``, from which :meth:`accountants.TradeOff.from_spec`
    builds the RDP-derived curve; without either it builds one from ``delta`` on an ε grid. The
    CLI (``account``, ``compare``), the audit's curves and the report list every registered method.
    Optionally ``label``, a short name for report columns and figure legends (:func:`method_label`;
    default the name).
    """

    name: str

    def unsupported(self, spec: Spec) -> str | None: ...

    def epsilon(self, spec: Spec, delta: float) -> EpsilonBound: ...

    def delta(self, spec: Spec, epsilon: float) -> DeltaBound: ...


_METHODS: dict[str, Method] = {}


def register_method(method: Method, *, force: bool = False) -> None:
    """Register an accounting method under ``method.name``; refuses duplicates unless ``force``."""
    if method.name in _METHODS and not force:
        raise InputError(f"accounting method {method.name!r} is already registered")
    _METHODS[method.name] = method


def get_method(name: str) -> Method:
    """The registered method called ``name``."""
    try:
        return _METHODS[name]
    except KeyError:
        raise InputError(f"unknown accounting method {name!r}; choose from {sorted(_METHODS)}") from None


def methods() -> list[str]:
    """Names of the registered methods, sorted."""
    return sorted(_METHODS)


def method_label(name: str) -> str:
    """The registered method's ``label`` for report columns ("tight (PLD)", "rdp"), else its name."""
    return str(getattr(get_method(name), "label", name))


def _parts(spec: Spec) -> tuple[DPSGD, ...]:
    if isinstance(spec, DPSGD):
        return (spec,)
    if isinstance(spec, Composed):
        if not spec.parts:
            return ()
        return spec.parts
    raise InputTypeError(f"spec must be accountants.DPSGD or accountants.Composed; got {type(spec).__name__}")


def _check_delta(value: float) -> float:
    check.in_range(0.0, 1.0, closed="neither", delta=value)
    return float(value)


def _check_epsilon(value: float) -> float:
    check.in_range(0.0, None, closed="left", epsilon=value)
    check.finite(epsilon=value)
    return float(value)


class RdpMethod:
    """Rényi-DP accounting with the Balle et al. 2020 Thm 21 conversion over an order grid."""

    name = "rdp"
    label = "rdp"

    def __init__(self, orders: Tensor | None = None, refine: int = 8) -> None:
        self.orders = default_orders() if orders is None else torch.as_tensor(orders, dtype=torch.float64)
        check.in_range(1.0, None, closed="neither", orders=self.orders)
        check.integer(0, None, refine=refine)
        self.refine = int(refine)  # orders added on each side of the best one (0: the grid only)
        # Orders below the grid, tried only when the optimum is at its lower edge (default grid).
        self.low_extension = near_one_orders() if orders is None else None

    def unsupported(self, spec: Spec) -> str | None:
        for p in _parts(spec):
            reason = unsupported_reason(p)
            if reason is not None:
                return reason
        return None

    def curve(self, spec: Spec, orders: Tensor | None = None) -> tuple[Tensor, str | None]:
        orders = self.orders if orders is None else orders
        total = torch.zeros_like(orders)
        theorems = []
        for p in _parts(spec):
            r, thm = step_rdp(p, orders)
            total = total + steps_factor(p.steps) * r
            theorems.append(thm)
        return total, "; ".join(dict.fromkeys(theorems)) or None

    def _minimise(self, spec: Spec, convert, what: str) -> tuple[Tensor, Tensor, str | None]:
        theorems: list[str | None] = []

        def curve_at(o: Tensor) -> Tensor:
            r, thm = self.curve(spec, o)
            theorems.append(thm)  # the first call is on the base grid: its theorem is reported
            return r

        val, order = minimise_over_orders(
            curve_at, convert, self.orders, low_extension=self.low_extension, refine=self.refine, what=what
        )
        return val, order, theorems[0]

    def epsilon(self, spec: Spec, delta: float) -> EpsilonBound:
        delta = _check_delta(delta)
        if not _parts(spec):
            return EpsilonBound(0.0, delta, method=self.name, theorem="empty composition")
        eps, order, thm = self._minimise(spec, functools.partial(_eps_at, delta=delta), "ε(δ)")
        return EpsilonBound(float(eps), delta, method=self.name, order=float(order), theorem=thm)

    def delta(self, spec: Spec, epsilon: float) -> DeltaBound:
        epsilon = _check_epsilon(epsilon)
        if not _parts(spec):
            return DeltaBound(0.0, epsilon, method=self.name, theorem="empty composition")
        d, order, thm = self._minimise(spec, functools.partial(_delta_at, epsilon=epsilon), "δ(ε)")
        return DeltaBound(float(d), epsilon, method=self.name, order=float(order), theorem=thm)


def _eps_at(curve: Tensor, orders: Tensor, *, delta: Tensor | float, warn: bool = False) -> tuple[Tensor, Tensor]:
    return eps_from_rdp(curve, orders, delta, warn=warn)


def _delta_at(curve: Tensor, orders: Tensor, *, epsilon: float, warn: bool = False) -> tuple[Tensor, Tensor]:
    return delta_from_rdp(curve, orders, epsilon, warn=warn)


register_method(RdpMethod())


def supports(spec: Spec, method: str = "rdp") -> bool:
    """Whether ``method`` can account for ``spec``. Side-effect free; does every check."""
    return get_method(method).unsupported(reduce_shuffle(spec)) is None


def _require(spec: Spec, m: Method) -> None:
    reason = m.unsupported(spec)
    if reason is not None:
        raise UnsupportedError(reason)


def epsilon(spec: Spec, delta: float, method: str = "rdp") -> EpsilonBound:
    """ε at δ for ``spec``.  Bound: upper.

    Args:
        spec: a :class:`DPSGD` or a :class:`Composed` of several.
        delta: δ in (0, 1).
        method: a registered method (see :func:`methods`).

    Raises:
        ValueError: for δ out of range or an unknown method.
        UnsupportedError: when no implemented theorem covers ``spec`` (never a wrong number).

    >>> import accountants as acc
    >>> spec = acc.DPSGD(1.1, acc.Poisson(256 / 60_000), steps=14_062)
    >>> round(acc.epsilon(spec, delta=1e-5).value, 4)
    2.5965
    """
    return _ask(spec, method, lambda m, s: m.epsilon(s, delta))


def delta(spec: Spec, epsilon: float, method: str = "rdp") -> DeltaBound:
    """δ at ε for ``spec``.  Bound: upper."""
    return _ask(spec, method, lambda m, s: m.delta(s, epsilon))


def _ask(spec: Spec, method: str, query: Callable[[Any, Spec], Any]) -> Any:
    """``query(method, spec)`` after the coverage check; shuffled phases are first reduced to their
    full-batch Gaussian upper bound (accountants.shuffle), and the theorem says so."""
    m = get_method(method)
    if has_shuffle(spec):
        reduced = reduce_shuffle(spec)
        _require(reduced, m)
        b = query(m, reduced)
        return dataclasses.replace(b, theorem=upper_theorem(spec, b.theorem))
    _require(spec, m)
    return query(m, spec)


def rdp_curve(spec: Spec, orders: Tensor | None = None, *, method: str = "rdp") -> Tensor:
    """The composed RDP curve of ``spec`` at ``orders`` (default grid) from ``method``, a registered
    method with an RDP curve (``curve(spec, orders)``).  Bound: upper."""
    spec = reduce_shuffle(spec)
    m = get_method(method)
    curve = getattr(m, "curve", None)
    if curve is None:
        raise InputError(f"method {method!r} has no RDP curve; choose one of "
                         f"{[n for n in methods() if hasattr(_METHODS[n], 'curve')]}")
    _require(spec, m)
    if orders is not None:
        orders = torch.as_tensor(orders, dtype=torch.float64) if not isinstance(orders, Tensor) else orders
        check.in_range(1.0, None, closed="neither", orders=orders)
    return curve(spec, orders)[0]


def poisson_epsilon(
    noise_multiplier: Tensor,
    sample_rate: Tensor,
    steps: Tensor,
    delta: Tensor | float,
    orders: Tensor | None = None,
    *,
    warn: bool = True,
) -> tuple[Tensor, Tensor]:
    """Batched ε for many Poisson add/remove DP-SGD configurations at once.  Bound: upper.

    Args:
        noise_multiplier, sample_rate, steps: broadcastable tensors of configurations (C,).
        delta: δ in (0, 1), broadcastable to the configurations.
        orders: order grid (A,); default :func:`accountants.orders.default_orders`.

    Returns:
        (ε, best order), each with the configurations' shape.
    """
    sigma = torch.as_tensor(noise_multiplier, dtype=torch.float64)
    q = torch.as_tensor(sample_rate, dtype=sigma.dtype, device=sigma.device)
    t = torch.as_tensor(steps, dtype=sigma.dtype, device=sigma.device)
    check.positive(noise_multiplier=sigma)
    check.in_range(0.0, 1.0, closed="right", sample_rate=q)
    check.integer(1, None, steps=t)
    check.in_range(0.0, 1.0, closed="neither", delta=delta)
    default = orders is None
    orders = default_orders(sigma.dtype, sigma.device) if default else torch.as_tensor(orders, dtype=sigma.dtype)
    delta_t = torch.as_tensor(delta, dtype=sigma.dtype, device=sigma.device)
    sigma, q, t, delta_t = torch.broadcast_tensors(sigma, q, t, delta_t)
    shape = sigma.shape
    sigma, q, t, delta_t = (x.reshape(-1) for x in (sigma, q, t, delta_t))
    low = near_one_orders(sigma.dtype, sigma.device) if default else None
    # Configurations are taken in chunks so that memory stays flat in their number (the series
    # are themselves chunked by element); the chunking moves values only within the series'
    # certified tolerance (where the fractional series stop, ≤ 1e-11 relative).
    step = max(1, _BATCH_ELEMS // max(1, orders.numel()))
    eps = torch.empty_like(sigma)
    best = torch.empty_like(sigma)
    caught: list[warnings.WarningMessage] = []
    for start in range(0, sigma.numel(), step):
        sl = slice(start, start + step)
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            eps[sl], best[sl] = _poisson_chunk(sigma[sl], q[sl], t[sl], delta_t[sl], orders, low, warn)
        caught.extend(rec)
    # Each distinct warning once for the whole batch, as for an unchunked call.
    for msg in dict.fromkeys((w.category, str(w.message)) for w in caught):
        warnings.warn(msg[1], msg[0], stacklevel=2)
    return eps.reshape(shape), best.reshape(shape)


# Configurations × orders per chunk of poisson_epsilon: ≈ 3,000 configurations of the default grid,
# so that the per-configuration tables of the integer orders (× 1,023 terms) stay ≈ 32 MiB.
_BATCH_ELEMS = 1 << 19


def _poisson_chunk(
    sigma: Tensor, q: Tensor, t: Tensor, delta: Tensor, orders: Tensor, low: Tensor | None, warn: bool
) -> tuple[Tensor, Tensor]:
    """poisson_epsilon on 1-D configurations; the low orders only where the best base order is 1.1."""

    def curve_at(o: Tensor) -> Tensor:
        return t[..., None] * rdp_poisson_gaussian(o, q[..., None], sigma[..., None])

    def curve_rows(o: Tensor, rows: Tensor) -> Tensor:
        return t[rows, None] * rdp_poisson_gaussian(o, q[rows, None], sigma[rows, None])

    return minimise_over_orders(
        curve_at,
        functools.partial(_eps_at, delta=delta),
        orders,
        low_extension=low,
        refine=8 if low is not None else 0,
        warn=warn,
        curve_rows=curve_rows,
    )


MAX_CALIBRATE_EVALS = 200


def calibrate(
    spec: DPSGD,
    target_epsilon: float,
    delta: float,
    method: str = "rdp",
    *,
    rtol: float = 1e-4,
    max_noise: float = 1e4,
) -> float:
    """The smallest noise multiplier (within ``rtol``) whose ε at δ is ≤ ``target_epsilon``.

    Never overshoots: the returned σ always satisfies ε(σ) ≤ target (it is the upper end of a
    bisection bracket). Every other field of ``spec`` is kept. Shuffled batches
    (:class:`accountants.Shuffle`) are calibrated on their sound upper bound, the full-batch Gaussian
    epochs of :func:`accountants.shuffle.reduce_shuffle`, with either method.

    Args:
        rtol: relative width of the final bracket on σ, in [1e-12, 0.5].
        max_noise: the largest σ tried, in (0, 1e12].

    Raises:
        ValueError: for a target or tolerance out of range, when even ``max_noise`` does not reach
            the target, or when the bisection exceeds 200 evaluations (``MAX_CALIBRATE_EVALS``).
    """
    check.positive(target_epsilon=target_epsilon)
    check.finite(target_epsilon=target_epsilon)
    _check_delta(delta)
    check.in_range(1e-12, 0.5, closed="both", rtol=rtol)
    check.in_range(0.0, 1e12, closed="right", max_noise=max_noise)
    m = get_method(method)
    base = reduce_shuffle(spec)  # shuffled batches: calibrated on their sound upper bound (docs/shuffle.md)
    _require(base, m)
    evals = 0

    def g(log_s: float) -> float:  # log ε(σ) − log target: smooth and decreasing in log σ
        nonlocal evals
        evals += 1
        if evals > MAX_CALIBRATE_EVALS:
            raise InputError(
                f"calibrate: no bracket of relative width rtol={rtol:g} after {MAX_CALIBRATE_EVALS} evaluations "
                "(MAX_CALIBRATE_EVALS); raise rtol"
            )
        e = m.epsilon(base.with_noise(math.exp(log_s)), delta).value
        return (math.log(e) if e > 0 else -math.inf) - math.log(target_epsilon)

    # Bracket: g(lo) > 0 ≥ g(hi), by doubling from the spec's own σ.
    hi = math.log(max(spec.noise_multiplier, 1e-3))
    g_hi = g(hi)
    while g_hi > 0:
        hi += math.log(2.0)
        if hi > math.log(max_noise):
            raise InputError(
                f"target_epsilon={target_epsilon:g} at delta={delta:g} needs noise_multiplier > {max_noise:g}"
            )
        g_hi = g(hi)
    lo = hi - math.log(2.0)
    g_lo = g(lo)
    while g_lo <= 0:
        hi, g_hi = lo, g_lo
        lo -= math.log(2.0)
        if lo < math.log(1e-6):
            return math.exp(hi)
        g_lo = g(lo)
    # Illinois (modified regula falsi) keeps the bracket and converges superlinearly; the
    # feasible end ``hi`` is returned, so the result never overshoots the target.
    side = 0
    while hi - lo > math.log1p(rtol):
        if math.isfinite(g_hi) and g_lo != g_hi:
            mid = hi - g_hi * (hi - lo) / (g_hi - g_lo)
        else:
            mid = 0.5 * (lo + hi)
        # Keep the probe strictly inside the bracket, at least 1 % of its width from either end.
        width = hi - lo
        mid = min(max(mid, lo + 0.01 * width), hi - 0.01 * width)
        g_mid = g(mid)
        if g_mid <= 0:
            hi, g_hi = mid, g_mid
            if side == 1:
                g_lo *= 0.5
            side = 1
        else:
            lo, g_lo = mid, g_mid
            if side == -1:
                g_hi *= 0.5
            side = -1
    return math.exp(hi)


def shuffle_bounds(spec: DPSGD, delta: float, method: str = "pld") -> ShuffleBounds:
    """Lower and upper ε of a shuffled run, and the Poisson ε at q = b/n for comparison (docs/shuffle.md)."""
    if not isinstance(spec, DPSGD) or not isinstance(spec.sampling, Shuffle):
        raise InputError("shuffle_bounds takes a DPSGD with accountants.Shuffle sampling")
    upper = epsilon(spec, delta, method=method)
    poisson_spec = dataclasses.replace(spec, sampling=Poisson(spec.sampling.rate))
    poisson = epsilon(poisson_spec, delta, method=method)
    try:
        lower: float | None = shuffle.shuffle_lower_epsilon(spec, delta)
    except UnsupportedError:
        lower = None
    return ShuffleBounds(lower, upper, poisson)
