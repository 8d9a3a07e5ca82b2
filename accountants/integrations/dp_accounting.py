"""dp_accounting ``DpEvent`` trees ↔ dpaudit descriptions.

=====================================================  =============================================
dp_accounting event                                    dpaudit description
=====================================================  =============================================
``GaussianDpEvent(σ)``                                 ``DPSGD(σ, Poisson(1.0), 1)`` (full batch)
``PoissonSampledDpEvent(q, Gaussian(σ))``              ``DPSGD(σ, Poisson(q), 1)``
``SampledWithoutReplacementDpEvent(n, b, Gaussian)``   ``DPSGD(σ, FixedSize(b, n), 1)``
``SampledWithReplacementDpEvent(n, b, Gaussian)``      ``DPSGD(σ, FixedSize(b, n, replace=True), 1)``
``SelfComposedDpEvent(e, k)``                          ``e`` with k× the steps
``ComposedDpEvent([e1, e2, …])``                       ``Composed((e1, e2, …))``
``TruncatedSubsampledGaussianDpEvent(n, q, B, σ)``     ``DPSGD(σ, TruncatedPoisson(q, B, n), 1)``
``LaplaceDpEvent(b)``                                  ``Laplace(b)`` (RDP, add/remove; Mironov 2017)
``NoOpDpEvent()``                                      ``Composed(())``
=====================================================  =============================================

Both libraries take the noise multiplier as noise std / clip norm C (dp_accounting's
``GaussianDpEvent`` docstring: "the noise_multiplier is defined as s / C"). The neighbouring
relation is not part of an event in dp_accounting (it is an accountant argument), so it is an
argument here; dpaudit derives the sensitivity from sampling × relation (replace-one: 2C).

Serialised form. dp_accounting serialises an event with ``event.to_named_tuple()`` (fields
``module_name``, ``class_name`` and the event's own fields, nested events as named tuples). Its JSON
form here is that named tuple as an object, recursively (``namedtuple._asdict()``)::

    {"module_name": "dp_accounting.dp_event", "class_name": "SelfComposedDpEvent", "count": 1000,
     "event": {"module_name": "dp_accounting.dp_event", "class_name": "PoissonSampledDpEvent",
               "sampling_probability": 0.01,
               "event": {"module_name": "dp_accounting.dp_event", "class_name": "GaussianDpEvent",
                         "noise_multiplier": 1.1}}}

Reading that JSON (``from_dp_event``, ``dpaudit account --dp-event FILE.json``) needs no
dp_accounting; building event objects (``to_dp_event``) does.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from .. import api
from ..errors import InputError, InputTypeError, UnsupportedError
from ..events import DPSGD, Composed
from ..mechanisms import Laplace
from ..orders import default_orders, near_one_orders
from ..rdp import eps_from_rdp
from ..rdp.conversion import minimise_over_orders
from ..results import EpsilonBound
from ..sampling import FixedSize, Neighbouring, Poisson, RandomAllocation, TruncatedPoisson
from . import require_peer

__all__ = [
    "WithLaplace",
    "epsilon",
    "event_to_json",
    "from_dp_event",
    "load_dp_event",
    "rdp_laplace",
    "to_dp_event",
]

_MODULE = "dp_accounting.dp_event"


@dataclass(frozen=True)
class WithLaplace:
    """A composition that includes Laplace applications (accounted by RDP only).

    Attributes:
        dpsgd: the Gaussian-based parts, composed.
        laplace: ``(Laplace(b), count)`` pairs.
    """

    dpsgd: Composed
    laplace: tuple[tuple[Laplace, int], ...]


Description = DPSGD | Composed | Laplace | WithLaplace


# ----------------------------------------------------------------------------------- reading


MAX_DEPTH = 64  # nesting of events; dp_accounting's own trees are a few levels deep
MAX_BYTES = 16 * 2**20  # an event file is a description, not data: 16 MiB holds ~10^5 events


def _as_tree(event: Any, depth: int = 0) -> Any:
    """A dp_accounting event, its named tuple, or its JSON object → nested plain dicts (at most MAX_DEPTH deep)."""
    if depth > MAX_DEPTH:
        raise InputError(f"the event is nested more than {MAX_DEPTH} levels deep; dpaudit reads at most {MAX_DEPTH}")
    if hasattr(event, "to_named_tuple") and not isinstance(event, Mapping):
        event = event.to_named_tuple()
    if isinstance(event, tuple) and hasattr(event, "_asdict"):
        return {k: _as_tree(v, depth + 1) for k, v in event._asdict().items()}
    if isinstance(event, Mapping):
        return {str(k): _as_tree(v, depth + 1) for k, v in event.items()}
    if isinstance(event, (list, tuple)):
        return [_as_tree(v, depth + 1) for v in event]
    if isinstance(event, bytes):
        return event.decode()
    return event


def _field(node: dict[str, Any], key: str, where: str) -> Any:
    if key not in node:
        raise InputError(f"{where} ({node.get('class_name')}) is missing the field {key!r}")
    return node[key]


def _whole(node: dict[str, Any], key: str, where: str, low: int) -> int:
    """An integer field >= ``low`` (a bool, a float such as 1.5 or a string such as "10" is refused, never cast)."""
    value = _field(node, key, where)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputTypeError(f"{where}.{key} must be a whole number >= {low}; got {value!r:.80}")
    if value < low:
        raise InputError(f"{where}.{key} must be a whole number >= {low}; got {value!r:.80}")
    return int(value)


def _real(node: dict[str, Any], key: str, where: str, *, low: float, high: float = math.inf,
          low_open: bool = True) -> float:
    """A number field in (low, high] (``low_open``) or [low, high]; a bool or a string is refused, NaN too."""
    value = _field(node, key, where)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputTypeError(f"{where}.{key} must be a number; got {value!r:.80}")
    x = float(value)
    bracket = "(" if low_open else "["
    if math.isnan(x) or x > high or x < low or (low_open and x == low):
        raise InputError(f"{where}.{key} must be in {bracket}{low:g}, {high:g}]; got {value!r:.80}")
    return x


def _gaussian_sigma(node: Any, where: str, parent: str) -> float:
    """σ of a Gaussian event, or of a composition of Gaussians on the same sample (Σσᵢ⁻² = σ⁻²)."""
    if not isinstance(node, dict):
        raise InputTypeError(f"{where} must be a dp_accounting event (an object with class_name); got {node!r:.80}")
    name = node.get("class_name")
    if name == "GaussianDpEvent":  # σ = inf releases nothing (its σ⁻² is 0)
        return _real(node, "noise_multiplier", where, low=0.0)
    if name == "SelfComposedDpEvent":
        count = _whole(node, "count", where, 0)
        sigma = _gaussian_sigma(_field(node, "event", where), f"{where}.event", parent)
        return math.inf if count == 0 else sigma / math.sqrt(count)
    if name == "ComposedDpEvent":
        events = _field(node, "events", where)
        if not isinstance(events, list):
            raise InputTypeError(f"{where}.events must be a list")
        inv = math.fsum(_gaussian_sigma(e, f"{where}.events[{i}]", parent) ** -2.0 for i, e in enumerate(events))
        return math.inf if inv == 0 else inv ** -0.5
    raise UnsupportedError(f"{where} is a {name} inside a {parent}: dpaudit accounts sampled Gaussian events only")


@dataclass
class _Acc:
    """Steps per (σ, sampling) and applications per Laplace scale. Composition commutes, so a repeated
    event multiplies counts (SelfComposed(e, k) costs O(size of e), never O(k))."""

    steps: dict[tuple[float, Any], int]
    laplace: dict[float, int]

    @staticmethod
    def one(sigma: float, sampling: Any) -> _Acc:
        return _Acc({(sigma, sampling): 1}, {})

    def times(self, k: int) -> _Acc:
        return _Acc({key: c * k for key, c in self.steps.items() if c * k},
                    {b: c * k for b, c in self.laplace.items() if c * k})

    def extend(self, other: _Acc) -> None:
        for key, c in other.steps.items():
            self.steps[key] = self.steps.get(key, 0) + c
        for b, c in other.laplace.items():
            self.laplace[b] = self.laplace.get(b, 0) + c


def _walk(node: Any, where: str, depth: int = 0) -> _Acc:
    if depth > MAX_DEPTH:
        raise InputError(f"the event is nested more than {MAX_DEPTH} levels deep; dpaudit reads at most {MAX_DEPTH}")
    if not isinstance(node, dict) or "class_name" not in node:
        raise InputTypeError(f"{where} must be a dp_accounting event (an object with class_name); got {node!r:.80}")
    name = node["class_name"]
    match name:
        case "GaussianDpEvent":
            sigma = _gaussian_sigma(node, where, "root")
            return _Acc({}, {}) if math.isinf(sigma) else _Acc.one(sigma, Poisson(1.0))
        case "PoissonSampledDpEvent":
            q = _real(node, "sampling_probability", where, low=0.0, high=1.0, low_open=False)
            sigma = _gaussian_sigma(_field(node, "event", where), f"{where}.event", name)
            if q == 0.0 or math.isinf(sigma):  # nothing is released about anyone
                return _Acc({}, {})
            return _Acc.one(sigma, Poisson(q))
        case "SampledWithoutReplacementDpEvent" | "SampledWithReplacementDpEvent":
            sigma = _gaussian_sigma(_field(node, "event", where), f"{where}.event", name)
            b, n = _whole(node, "sample_size", where, 1), _whole(node, "source_dataset_size", where, 1)
            if math.isinf(sigma):
                return _Acc({}, {})
            return _Acc.one(sigma, FixedSize(b, n, replace=name == "SampledWithReplacementDpEvent"))
        case "RandomAllocationDpEvent":  # one event = one epoch of num_steps calls (dp_accounting PR #414)
            sigma = _gaussian_sigma(_field(node, "event", where), f"{where}.event", name)
            k, t = _whole(node, "num_selected", where, 1), _whole(node, "num_steps", where, 1)
            if math.isinf(sigma):
                return _Acc({}, {})
            return _Acc({(sigma, RandomAllocation(k, t)): t}, {})
        case "TruncatedSubsampledGaussianDpEvent":
            # fields as dp_accounting 0.6.0; its accountant treats q = 0, B = 0 or n = 0 as no release
            q = _real(node, "sampling_probability", where, low=0.0, high=1.0, low_open=False)
            b, n = _whole(node, "truncated_batch_size", where, 0), _whole(node, "dataset_size", where, 0)
            sigma = _real(node, "noise_multiplier", where, low=0.0)
            if q == 0.0 or b == 0 or n == 0 or math.isinf(sigma):
                return _Acc({}, {})
            return _Acc.one(sigma, TruncatedPoisson(q, b, n))
        case "LaplaceDpEvent":
            b = _real(node, "noise_multiplier", where, low=0.0)
            return _Acc({}, {}) if math.isinf(b) else _Acc({}, {b: 1})
        case "NoOpDpEvent":
            return _Acc({}, {})
        case "SelfComposedDpEvent":
            count = _whole(node, "count", where, 0)
            return _walk(_field(node, "event", where), f"{where}.event", depth + 1).times(count)
        case "ComposedDpEvent":
            events = _field(node, "events", where)
            if not isinstance(events, list):
                raise InputTypeError(f"{where}.events must be a list")
            acc = _Acc({}, {})
            for i, e in enumerate(events):
                acc.extend(_walk(e, f"{where}.events[{i}]", depth + 1))
            return acc
    raise UnsupportedError(f"{where} is a {str(name)[:80]}, which has no dpaudit equivalent")


def from_dp_event(event: Any, *, neighbouring: str | Neighbouring = "add_remove") -> Description:
    """The dpaudit description of a dp_accounting event, named tuple or JSON object.

    Repeated events are composed by count (composition commutes): parts with the same σ and
    sampling are merged into one ``DPSGD`` with the summed steps, in order of first appearance.

    Args:
        event: a ``dp_accounting.DpEvent``, its ``to_named_tuple()``, or the JSON object of it.
        neighbouring: the relation the dp_accounting accountant would be built with.

    Returns:
        ``DPSGD`` (one phase), ``Composed`` (several, or none), ``Laplace`` (one application) or
        :class:`WithLaplace`.

    Raises:
        InputError: a field of the wrong kind or out of range (its path in the tree), or nesting
            deeper than ``MAX_DEPTH``.
        UnsupportedError: naming the sub-event (its path in the tree) that has no dpaudit equivalent.
    """
    rel = Neighbouring.parse(neighbouring)
    acc = _walk(_as_tree(event), "event")
    parts = tuple(DPSGD(sigma, sampling, steps, rel) for (sigma, sampling), steps in acc.steps.items())
    laplace_items = tuple((Laplace(b), c) for b, c in acc.laplace.items())
    if laplace_items:
        if rel is not Neighbouring.ADD_REMOVE:
            raise UnsupportedError("LaplaceDpEvent: dpaudit accounts Laplace events under add_remove only")
        if not parts and len(laplace_items) == 1 and laplace_items[0][1] == 1:
            return laplace_items[0][0]
        return WithLaplace(Composed(parts), laplace_items)
    if len(parts) == 1:
        return parts[0]
    return Composed(parts)


def _read_event_file(path: str | Path) -> bytes:
    """The bytes of a regular file of at most MAX_BYTES (a FIFO, a device or /dev/zero is refused unread)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise InputError(f"--dp-event: cannot read {str(path)[:200]!r}: {e.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(f"--dp-event: {str(path)[:200]!r} is not a regular file")
        if info.st_size > MAX_BYTES:
            raise InputError(f"--dp-event: {str(path)[:200]!r} has {info.st_size} bytes; an event file may have at "
                             f"most {MAX_BYTES}")
        data = fh.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:  # grew while read
        raise InputError(f"--dp-event: {str(path)[:200]!r} has more than {MAX_BYTES} bytes")
    return data


def load_dp_event(path: str | Path, *, neighbouring: str | Neighbouring = "add_remove") -> Description:
    """Read the JSON form of a dp_accounting event (see the module docstring) from ``path``.

    Raises:
        InputError: the file is not a regular file of at most ``MAX_BYTES`` of UTF-8 JSON, or
            its event is malformed (:func:`from_dp_event`).
    """
    raw = _read_event_file(path)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"--dp-event: {str(path)[:200]!r} is not UTF-8 text (byte {e.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"--dp-event: {str(path)[:200]!r} is not JSON ({e.msg} at line {e.lineno})") from None
    except RecursionError:
        raise InputError(f"--dp-event: {str(path)[:200]!r} is nested too deeply; dpaudit reads events at most "
                         f"{MAX_DEPTH} levels deep") from None
    except ValueError as e:  # e.g. an integer of more than sys.get_int_max_str_digits() digits
        raise InputError(f"--dp-event: {str(path)[:200]!r} is not valid JSON ({e})") from None
    return from_dp_event(data, neighbouring=neighbouring)


# ----------------------------------------------------------------------------------- writing


def _dpsgd_event(dp_event: Any, p: DPSGD) -> Any:
    if p.group_size != 1:
        raise UnsupportedError(f"group_size={p.group_size}: dp_accounting has no event for group privacy")
    base = dp_event.GaussianDpEvent(p.noise_multiplier)
    s = p.sampling
    if isinstance(s, Poisson):
        one = base if s.rate == 1.0 else dp_event.PoissonSampledDpEvent(s.rate, base)
    elif isinstance(s, FixedSize):
        cls = dp_event.SampledWithReplacementDpEvent if s.replace else dp_event.SampledWithoutReplacementDpEvent
        one = cls(s.dataset_size, s.batch_size, base)
    elif isinstance(s, RandomAllocation):
        return _random_allocation_event(dp_event, base, p)
    elif isinstance(s, TruncatedPoisson):
        one = dp_event.TruncatedSubsampledGaussianDpEvent(dataset_size=s.dataset_size, sampling_probability=s.rate,
                                                          truncated_batch_size=s.max_batch_size,
                                                          noise_multiplier=p.noise_multiplier)
    else:
        raise UnsupportedError(f"{type(s).__name__} sampling has no dp_accounting event")
    return one if p.steps == 1 else dp_event.SelfComposedDpEvent(one, p.steps)


def _random_allocation_event(dp_event: Any, base: Any, p: DPSGD) -> Any:
    """Whole epochs of ``RandomAllocationDpEvent`` (dp_accounting with PR #414); a partial epoch has none."""
    s = p.sampling
    assert isinstance(s, RandomAllocation)
    cls = getattr(dp_event, "RandomAllocationDpEvent", None)
    if cls is None:
        raise UnsupportedError("this dp_accounting has no RandomAllocationDpEvent (added with pld/random_allocation)")
    epochs, rest = divmod(p.steps, s.steps_per_epoch)
    if rest:
        raise UnsupportedError(f"steps={p.steps} is not a whole number of epochs of {s.steps_per_epoch}: "
                               "RandomAllocationDpEvent describes whole epochs")
    one = cls(event=base, num_selected=s.k, num_steps=s.steps_per_epoch)
    return one if epochs == 1 else dp_event.SelfComposedDpEvent(one, epochs)


def to_dp_event(description: Description) -> Any:
    """The dp_accounting event of a description (the neighbouring relation goes to the accountant).

    Raises:
        PeerMissingError: dp_accounting is not installed (names the ``peers`` extra).
        UnsupportedError: a part with no event (group privacy, shuffled batches).
    """
    dp_event = require_peer("dp_accounting.dp_event", for_what="to_dp_event")
    if isinstance(description, DPSGD):
        return _dpsgd_event(dp_event, description)
    if isinstance(description, Composed):
        return dp_event.ComposedDpEvent([_dpsgd_event(dp_event, p) for p in description.parts])
    if isinstance(description, Laplace):
        return dp_event.LaplaceDpEvent(description.b)
    if isinstance(description, WithLaplace):
        events = [_dpsgd_event(dp_event, p) for p in description.dpsgd.parts]
        for m, c in description.laplace:
            e = dp_event.LaplaceDpEvent(m.b)
            events.append(e if c == 1 else dp_event.SelfComposedDpEvent(e, c))
        return dp_event.ComposedDpEvent(events)
    raise InputTypeError(f"cannot convert {type(description).__name__} to a dp_accounting event")


def event_to_json(event: Any) -> dict[str, Any]:
    """The JSON object of a dp_accounting event (its ``to_named_tuple()``, recursively as objects)."""
    tree = _as_tree(event)
    if not isinstance(tree, dict) or "class_name" not in tree:
        raise InputTypeError(f"expected a dp_accounting event; got {type(event).__name__}")
    return tree


# ----------------------------------------------------------------------------------- accounting


def rdp_laplace(orders: Tensor, b: float) -> Tensor:
    """RDP of the Laplace mechanism of scale b on a sensitivity-1 query (Mironov 2017, Prop. 6).

    ε(α) = 1/(α−1) · log( α/(2α−1)·e^{(α−1)/b} + (α−1)/(2α−1)·e^{−α/b} ), α > 1.
    """
    a = orders.to(torch.float64)
    lhs = torch.log(a / (2 * a - 1)) + (a - 1) / b
    rhs = torch.log((a - 1) / (2 * a - 1)) - a / b
    return torch.logaddexp(lhs, rhs) / (a - 1)


def epsilon(description: Any, delta: float, method: str = "rdp", *,
            neighbouring: str | Neighbouring = "add_remove") -> EpsilonBound:
    """ε at δ of a description or dp_accounting event (converted first).  Bound: upper.

    Compositions with Laplace use RDP (Gaussian parts' curves plus Mironov's Laplace curve, then
    the Balle et al. 2020 Thm 21 conversion); ``method="pld"`` refuses them.
    """
    if not isinstance(description, (DPSGD, Composed, Laplace, WithLaplace)):
        description = from_dp_event(description, neighbouring=neighbouring)
    if isinstance(description, (DPSGD, Composed)):
        return api.epsilon(description, delta, method=method)
    if method != "rdp":
        raise UnsupportedError(f"Laplace events are accounted with method='rdp' only; got method={method!r}")
    check_delta = float(delta)
    if not 0.0 < check_delta < 1.0 or math.isnan(check_delta):
        raise InputError(f"delta must be in (0, 1); got {delta!r}")
    spec = description.dpsgd if isinstance(description, WithLaplace) else Composed(())
    laplace = description.laplace if isinstance(description, WithLaplace) else ((description, 1),)

    def curve_at(o: Tensor) -> Tensor:
        total = api.rdp_curve(spec, o) if spec.parts else torch.zeros_like(o)
        for m, c in laplace:
            total = total + c * rdp_laplace(o, m.b)
        return total

    def convert(curve: Tensor, orders: Tensor, *, warn: bool = False) -> tuple[Tensor, Tensor]:
        return eps_from_rdp(curve, orders, check_delta, warn=warn)

    eps, order = minimise_over_orders(curve_at, convert, default_orders(), low_extension=near_one_orders(),
                                      refine=8, warn=False, what="ε(δ)")
    theorem = "Laplace RDP (Mironov 2017 Prop. 6) composed with the Gaussian parts (Balle et al. 2020 Thm 21)"
    if not spec.parts:  # Laplace only: basic composition of pure DP, ε = Σ count/b, holds at δ = 0
        pure = sum(c / m.b for m, c in laplace)
        if pure <= float(eps):
            return EpsilonBound(float(pure), check_delta, method="rdp", theorem="pure DP: Laplace ε = 1/b, composed")
    return EpsilonBound(float(eps), check_delta, method="rdp", order=float(order), theorem=theorem)
