"""One vocabulary for descriptions, and a lossless round trip through plain dicts.

Every front end — TOML configs, CLI flags, JSON results, ``dpaudit compare``/``capacity``
mechanism strings, the resume identity of a run folder — builds and prints descriptions through
this module, so a spelling means the same thing everywhere. The dict round trip (:func:`to_dict`,
:func:`from_dict`) is the generic one of :mod:`accountants.serialise`, re-exported here.

Canonical spellings (older ones are accepted as aliases, case-insensitive, ``-`` ≡ ``_``):

================  ==========================================================================
sampling kind     ``poisson`` (``sample_rate``); ``fixed_wor`` (alias ``fixed_size``),
                  ``fixed_wr`` and ``shuffle`` (``batch_size``, ``dataset_size``);
                  ``random_allocation`` (``k``, ``steps_per_epoch``; alias ``balls_in_bins``);
                  ``truncated_poisson`` (``sample_rate``, ``max_batch_size``, ``dataset_size``;
                  alias ``truncated``)
neighbouring      ``add_remove``; ``replace_one``
mechanism         ``gaussian:sigma=S``; ``laplace:b=B``; ``randomized_response:p=P``;
                  ``dpsgd:noise_multiplier=S,sample_rate=Q,steps=T[,neighbouring=..][,group_size=K]``
                  or ``dpsgd:...,sampling=fixed_wor,batch_size=B,dataset_size=N``
================  ==========================================================================

>>> import accountants as acc
>>> spec = acc.DPSGD(1.1, acc.FixedSize(64, 1000), 100, "replace-one")
>>> d = spec.to_dict(); d["sampling"]
{'kind': 'fixed_wor', 'batch_size': 64, 'dataset_size': 1000}
>>> acc.DPSGD.from_dict(d) == spec
True
>>> describe(parse_mechanism("dpsgd:noise_multiplier=1,sample_rate=0.01,steps=100"))
'σ = 1, Poisson sampling q = 0.01, 100 steps, add-remove'
>>> describe(spec)
'σ = 1.1, fixed-size batches of 64 of 1000 without replacement, 100 steps, replace-one'
"""

from __future__ import annotations

import math
import re
from typing import Any

from .errors import InputError, InputTypeError
from .events import DPSGD, Composed
from .mechanisms import Gaussian, Laplace, RandomizedResponse
from .sampling import FixedSize, Neighbouring, Poisson, RandomAllocation, Shuffle, TruncatedPoisson
from .serialise import SPEC_FORMAT, Description, from_dict, to_dict

__all__ = [
    "MECHANISM_KINDS",
    "NEIGHBOURING_NAMES",
    "SAMPLING_KINDS",
    "SPEC_FORMAT",
    "describe",
    "from_dict",
    "make_sampling",
    "parse_mechanism",
    "parse_neighbouring",
    "parse_sampling_kind",
    "sampling_kind",
    "to_dict",
]

# canonical kind -> the parameters it needs
SAMPLING_KINDS: dict[str, tuple[str, ...]] = {
    "poisson": ("sample_rate",),
    "fixed_wor": ("batch_size", "dataset_size"),
    "fixed_wr": ("batch_size", "dataset_size"),
    "shuffle": ("batch_size", "dataset_size"),
    "random_allocation": ("k", "steps_per_epoch"),
    "truncated_poisson": ("sample_rate", "max_batch_size", "dataset_size"),
}
_SAMPLING_ALIASES = {**FixedSize.ALIASES, **Shuffle.ALIASES, **RandomAllocation.ALIASES, **TruncatedPoisson.ALIASES}
NEIGHBOURING_NAMES = tuple(m.value for m in Neighbouring)

# mechanism kind -> (required keys, optional keys)
MECHANISM_KINDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "gaussian": (("sigma",), ()),
    "laplace": (("b",), ()),
    "randomized_response": (("p",), ()),
    "dpsgd": (("noise_multiplier", "steps"),
              ("sampling", "sample_rate", "batch_size", "dataset_size", "neighbouring", "group_size", "k",
               "steps_per_epoch", "max_batch_size")),
}
_INTEGER_KEYS = {"steps", "batch_size", "dataset_size", "group_size", "k", "steps_per_epoch", "max_batch_size"}
_STRING_KEYS = {"sampling", "neighbouring"}


def _norm(name: Any) -> str:
    if not isinstance(name, str):
        raise InputTypeError(f"expected a name (string); got {type(name).__name__} {name!r}")
    return name.strip().lower().replace("-", "_")


def parse_sampling_kind(name: str, *, key: str = "sampling") -> str:
    """The canonical sampling kind for any accepted spelling; ``InputError`` names ``key``."""
    k = _norm(name)
    k = _SAMPLING_ALIASES.get(k, k)
    if k not in SAMPLING_KINDS:
        allowed = sorted(SAMPLING_KINDS)
        raise InputError(f"{key} must be one of {allowed} (aliases: {sorted(_SAMPLING_ALIASES)}); got {name!r}")
    return k


def parse_neighbouring(name: str | Neighbouring, *, key: str = "neighbouring") -> Neighbouring:
    """The :class:`Neighbouring` for any accepted spelling; ``InputError`` names ``key``."""
    return Neighbouring.parse(name, key=key)


def sampling_kind(sampling: Poisson | FixedSize | Shuffle | RandomAllocation | TruncatedPoisson) -> str:
    """The canonical kind of a sampling description."""
    if isinstance(sampling, (Poisson, FixedSize, Shuffle, RandomAllocation, TruncatedPoisson)):
        return sampling.kind
    raise InputTypeError(
        "sampling must be Poisson, FixedSize, Shuffle, RandomAllocation or TruncatedPoisson; "
        f"got {type(sampling).__name__}"
    )


def make_sampling(kind: str, *, sample_rate: float | None = None, batch_size: int | None = None,
                  dataset_size: int | None = None, key: str = "sampling", k: int | None = None,
                  steps_per_epoch: int | None = None, max_batch_size: int | None = None,
                  ) -> Poisson | FixedSize | Shuffle | RandomAllocation | TruncatedPoisson:
    """Build a sampling description from its kind and parameters (extra or missing ones are errors).

    ``key`` is the name the caller's user knows the parameters by (a TOML section, ``--`` flags).
    """
    kind = parse_sampling_kind(kind, key=key)
    given = {"sample_rate": sample_rate, "batch_size": batch_size, "dataset_size": dataset_size, "k": k,
             "steps_per_epoch": steps_per_epoch, "max_batch_size": max_batch_size}
    needed = SAMPLING_KINDS[kind]
    missing = [k for k in needed if given[k] is None]
    extra = [k for k, v in given.items() if v is not None and k not in needed]
    if missing or extra:
        msg = f"{key} = {kind!r} takes {', '.join(needed)}"
        msg += f"; missing {', '.join(missing)}" if missing else ""
        msg += f"; {', '.join(extra)} does not apply to it" if extra else ""
        raise InputError(msg)
    if kind == "poisson":
        return Poisson(sample_rate)  # type: ignore[arg-type]
    if kind == "shuffle":
        return Shuffle(batch_size, dataset_size)  # type: ignore[arg-type]
    if kind == "random_allocation":
        return RandomAllocation(k, steps_per_epoch)  # type: ignore[arg-type]
    if kind == "truncated_poisson":
        return TruncatedPoisson(sample_rate, max_batch_size, dataset_size)  # type: ignore[arg-type]
    return FixedSize(batch_size, dataset_size, replace=kind == "fixed_wr")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------- mechanism strings

_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_INTEGER = re.compile(r"^\+?\d+$")


def _parse_value(text: str, key: str, value: str) -> Any:
    if key in _STRING_KEYS:
        return value
    if key in _INTEGER_KEYS:
        if not _INTEGER.match(value):
            raise InputError(f"{text!r}: {key} must be a whole number written without a decimal point; got {value!r}")
        return int(value)
    if not _NUMBER.match(value):
        raise InputError(f"{text!r}: {key} must be a finite number; got {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise InputError(f"{text!r}: {key} must be a finite number; got {value!r}")
    return x


def parse_mechanism(text: str, *, defaults: dict[str, Any] | None = None,
                    kinds: tuple[str, ...] | None = None) -> Gaussian | Laplace | RandomizedResponse | DPSGD:
    """Parse ``kind:key=value,...`` (the module table) into a description.

    Args:
        text: the mechanism string.
        defaults: values for keys the string leaves out (e.g. ``{"steps": 1}`` for one step).
        kinds: restrict the accepted kinds (the caller's command supports only these).

    Raises:
        InputError: naming the string, the key and the allowed values.
    """
    if not isinstance(text, str):
        raise InputTypeError(f"mechanism must be a string like 'gaussian:sigma=1'; got {type(text).__name__}")
    head, sep, rest = text.partition(":")
    kind = _norm(head)
    allowed_kinds = tuple(MECHANISM_KINDS) if kinds is None else kinds
    if kind not in allowed_kinds:
        raise InputError(f"mechanism {text!r}: kind must be one of {sorted(allowed_kinds)}")
    required, optional = MECHANISM_KINDS[kind]
    params: dict[str, Any] = dict(defaults or {})
    seen: set[str] = set()
    for item in (s.strip() for s in rest.split(",")) if sep else ():
        if not item:
            raise InputError(f"mechanism {text!r}: empty item (write key=value,key=value)")
        key, eq, value = item.partition("=")
        key = _norm(key)
        if not eq:
            raise InputError(f"mechanism {text!r}: expected key=value, got {item!r}")
        if key not in required and key not in optional:
            raise InputError(f"mechanism {text!r}: {kind} takes {', '.join(required)}"
                             + (f" (optional: {', '.join(optional)})" if optional else "") + f"; unknown {key!r}")
        if key in seen:
            raise InputError(f"mechanism {text!r}: {key} is given twice")
        seen.add(key)
        params[key] = _parse_value(text, key, value.strip())
    missing = [k for k in required if k not in params]
    if missing:
        raise InputError(f"mechanism {text!r}: {kind} needs {', '.join(required)}; missing {', '.join(missing)}")
    match kind:
        case "gaussian":
            return Gaussian(params["sigma"])
        case "laplace":
            return Laplace(params["b"])
        case "randomized_response":
            return RandomizedResponse(params["p"])
    sampling = make_sampling(params.get("sampling", "poisson"), sample_rate=params.get("sample_rate"),
                             batch_size=params.get("batch_size"), dataset_size=params.get("dataset_size"),
                             key=f"mechanism {text!r}: sampling", k=params.get("k"),
                             steps_per_epoch=params.get("steps_per_epoch"),
                             max_batch_size=params.get("max_batch_size"))
    return DPSGD(params["noise_multiplier"], sampling, params["steps"],
                 parse_neighbouring(params.get("neighbouring", "add_remove"), key=f"mechanism {text!r}: neighbouring"),
                 params.get("group_size", 1))


# ----------------------------------------------------------------------------------- words


def _g(x: float) -> str:
    return f"{x:.6g}"


def describe(obj: Description) -> str:
    """The description in words, for reports and messages (never a Python repr)."""
    if isinstance(obj, TruncatedPoisson):
        return (f"truncated Poisson sampling q = {_g(obj.rate)}, at most {obj.max_batch_size} of "
                f"{obj.dataset_size} records")
    if isinstance(obj, Poisson):
        return f"Poisson sampling q = {_g(obj.rate)}"
    if isinstance(obj, FixedSize):
        how = "with" if obj.replace else "without"
        return f"fixed-size batches of {obj.batch_size} of {obj.dataset_size} {how} replacement"
    if isinstance(obj, Shuffle):
        return f"shuffled batches of {obj.batch_size} of {obj.dataset_size} (reshuffled every epoch)"
    if isinstance(obj, RandomAllocation):
        what = "balls-in-bins" if obj.k == 1 else "random allocation"
        return f"{what}: each record in {obj.k} of every {obj.steps_per_epoch} steps"
    if isinstance(obj, DPSGD):
        words = [f"σ = {_g(obj.noise_multiplier)}", describe(obj.sampling),
                 f"{obj.steps} step{'s' if obj.steps != 1 else ''}", obj.neighbouring.label]
        if obj.group_size != 1:
            words.append(f"groups of {obj.group_size}")
        return ", ".join(words)
    if isinstance(obj, Composed):
        return " then ".join(f"[{describe(p)}]" for p in obj.parts) or "no steps"
    if isinstance(obj, Gaussian):
        return f"Gaussian mechanism, σ = {_g(obj.sigma)}"
    if isinstance(obj, Laplace):
        return f"Laplace mechanism, b = {_g(obj.b)}"
    if isinstance(obj, RandomizedResponse):
        return f"randomized response, p = {_g(obj.p)}"
    raise InputTypeError(f"cannot describe {type(obj).__name__}")
