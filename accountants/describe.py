"""One vocabulary for descriptions, and a lossless round trip through plain dicts.

Every front end — TOML configs, CLI flags, JSON results, ``dpaudit compare``/``capacity``
mechanism strings, the resume identity of a run folder — builds and prints descriptions through
this module, so a spelling means the same thing everywhere.

Canonical spellings (older ones are accepted as aliases, case-insensitive, ``-`` ≡ ``_``):

================  ==========================================================================
sampling kind     ``poisson`` (``sample_rate``); ``fixed_wor`` (alias ``fixed_size``),
                  ``fixed_wr`` and ``shuffle`` (``batch_size``, ``dataset_size``);
                  ``random_allocation`` (``k``, ``steps_per_epoch``; alias ``balls_in_bins``)
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
from .sampling import FixedSize, Neighbouring, Poisson, RandomAllocation, Shuffle

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

SPEC_FORMAT = "dpaudit.spec/1"

# canonical kind -> the parameters it needs
SAMPLING_KINDS: dict[str, tuple[str, ...]] = {
    "poisson": ("sample_rate",),
    "fixed_wor": ("batch_size", "dataset_size"),
    "fixed_wr": ("batch_size", "dataset_size"),
    "shuffle": ("batch_size", "dataset_size"),
    "random_allocation": ("k", "steps_per_epoch"),
}
_SAMPLING_ALIASES = {
    "fixed_size": "fixed_wor",
    "fixed_size_wor": "fixed_wor",
    "fixed_size_wr": "fixed_wr",
    "without_replacement": "fixed_wor",
    "with_replacement": "fixed_wr",
    "shuffled": "shuffle",
    "balls_in_bins": "random_allocation",
}
NEIGHBOURING_NAMES = tuple(m.value for m in Neighbouring)

# mechanism kind -> (required keys, optional keys)
MECHANISM_KINDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "gaussian": (("sigma",), ()),
    "laplace": (("b",), ()),
    "randomized_response": (("p",), ()),
    "dpsgd": (("noise_multiplier", "steps"),
              ("sampling", "sample_rate", "batch_size", "dataset_size", "neighbouring", "group_size", "k",
               "steps_per_epoch")),
}
_INTEGER_KEYS = {"steps", "batch_size", "dataset_size", "group_size", "k", "steps_per_epoch"}
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
    if isinstance(name, Neighbouring):
        return name
    k = _norm(name)
    for member in Neighbouring:
        if member.value == k:
            return member
    raise InputError(f"{key} must be one of {list(NEIGHBOURING_NAMES)}; got {name!r}")


def sampling_kind(sampling: Poisson | FixedSize | Shuffle | RandomAllocation) -> str:
    """The canonical kind of a sampling description."""
    if isinstance(sampling, Poisson):
        return "poisson"
    if isinstance(sampling, RandomAllocation):
        return "random_allocation"
    if isinstance(sampling, Shuffle):
        return "shuffle"
    if isinstance(sampling, FixedSize):
        return "fixed_wr" if sampling.replace else "fixed_wor"
    raise InputTypeError(
        f"sampling must be Poisson, FixedSize, Shuffle or RandomAllocation; got {type(sampling).__name__}"
    )


def make_sampling(kind: str, *, sample_rate: float | None = None, batch_size: int | None = None,
                  dataset_size: int | None = None, key: str = "sampling", k: int | None = None,
                  steps_per_epoch: int | None = None) -> Poisson | FixedSize | Shuffle | RandomAllocation:
    """Build a sampling description from its kind and parameters (extra or missing ones are errors).

    ``key`` is the name the caller's user knows the parameters by (a TOML section, ``--`` flags).
    """
    kind = parse_sampling_kind(kind, key=key)
    given = {"sample_rate": sample_rate, "batch_size": batch_size, "dataset_size": dataset_size, "k": k,
             "steps_per_epoch": steps_per_epoch}
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
    return FixedSize(batch_size, dataset_size, replace=kind == "fixed_wr")  # type: ignore[arg-type]


# ----------------------------------------------------------------------------------- dict round trip


def _sampling_to_dict(s: Poisson | FixedSize | Shuffle | RandomAllocation) -> dict[str, Any]:
    kind = sampling_kind(s)
    if kind == "poisson":
        return {"kind": kind, "rate": float(s.rate)}
    if isinstance(s, RandomAllocation):
        return {"kind": kind, "k": int(s.k), "steps_per_epoch": int(s.steps_per_epoch)}
    return {"kind": kind, "batch_size": int(s.batch_size), "dataset_size": int(s.dataset_size)}  # type: ignore[union-attr]


def _sampling_from_dict(d: Any, where: str) -> Poisson | FixedSize | Shuffle | RandomAllocation:
    if not isinstance(d, dict):
        raise InputTypeError(f"{where} must be a table/object; got {type(d).__name__}")
    _keys(d, where, required=("kind",), optional=("rate", "batch_size", "dataset_size", "k", "steps_per_epoch"))
    kind = parse_sampling_kind(d["kind"], key=f"{where}.kind")
    if kind == "poisson":
        _keys(d, where, required=("kind", "rate"), optional=())
        return Poisson(d["rate"])
    if kind == "random_allocation":
        _keys(d, where, required=("kind", "k", "steps_per_epoch"), optional=())
        return RandomAllocation(d["k"], d["steps_per_epoch"])
    _keys(d, where, required=("kind", "batch_size", "dataset_size"), optional=())
    if kind == "shuffle":
        return Shuffle(d["batch_size"], d["dataset_size"])
    return FixedSize(d["batch_size"], d["dataset_size"], replace=kind == "fixed_wr")


def _keys(d: dict[str, Any], where: str, *, required: tuple[str, ...], optional: tuple[str, ...]) -> None:
    missing = [k for k in required if k not in d]
    unknown = sorted(set(d) - set(required) - set(optional) - {"format"})
    if missing:
        raise InputError(f"{where} is missing {', '.join(missing)}")
    if unknown:
        raise InputError(f"{where} has unknown key {unknown[0]!r}; allowed: {sorted((*required, *optional))}")


def to_dict(obj: DPSGD | Composed | Poisson | FixedSize | Gaussian | Laplace | RandomizedResponse) -> dict[str, Any]:
    """A JSON/TOML-ready dict of a description; :func:`from_dict` inverts it exactly.

    Top-level DPSGD and Composed dicts carry ``"format": SPEC_FORMAT``; nested parts do not.
    Floats are kept as Python floats (their ``repr`` round-trips bit for bit through JSON).
    """
    if isinstance(obj, DPSGD):
        return {"format": SPEC_FORMAT, **_dpsgd_body(obj)}
    if isinstance(obj, Composed):
        return {"format": SPEC_FORMAT, "kind": "composed", "parts": [_dpsgd_body(p) for p in obj.parts]}
    if isinstance(obj, (Poisson, FixedSize, Shuffle, RandomAllocation)):
        return _sampling_to_dict(obj)
    if isinstance(obj, Gaussian):
        return {"kind": "gaussian", "sigma": float(obj.sigma)}
    if isinstance(obj, Laplace):
        return {"kind": "laplace", "b": float(obj.b)}
    if isinstance(obj, RandomizedResponse):
        return {"kind": "randomized_response", "p": float(obj.p)}
    raise InputTypeError(f"cannot describe {type(obj).__name__}")


def _dpsgd_body(s: DPSGD) -> dict[str, Any]:
    return {"kind": "dpsgd", "noise_multiplier": float(s.noise_multiplier), "sampling": _sampling_to_dict(s.sampling),
            "steps": int(s.steps), "neighbouring": s.neighbouring.value, "group_size": int(s.group_size)}


def from_dict(d: Any, *, where: str = "spec") -> Any:
    """Inverse of :func:`to_dict`; an unknown format, kind or key is an ``InputError`` naming it."""
    if not isinstance(d, dict):
        raise InputTypeError(f"{where} must be a table/object; got {type(d).__name__}")
    fmt = d.get("format", SPEC_FORMAT)
    if fmt != SPEC_FORMAT:
        raise InputError(f"{where}.format is {fmt!r}; this dpaudit reads {SPEC_FORMAT!r}")
    kind = _norm(d.get("kind", ""))
    match kind:
        case "dpsgd":
            _keys(d, where, required=("kind", "noise_multiplier", "sampling", "steps"),
                  optional=("neighbouring", "group_size"))
            return DPSGD(d["noise_multiplier"], _sampling_from_dict(d["sampling"], f"{where}.sampling"), d["steps"],
                         parse_neighbouring(d.get("neighbouring", "add_remove"), key=f"{where}.neighbouring"),
                         d.get("group_size", 1))
        case "composed":
            _keys(d, where, required=("kind", "parts"), optional=())
            if not isinstance(d["parts"], list):
                raise InputTypeError(f"{where}.parts must be a list")
            return Composed(tuple(from_dict(p, where=f"{where}.parts[{i}]") for i, p in enumerate(d["parts"])))
        case "poisson" | "fixed_wor" | "fixed_wr" | "fixed_size" | "shuffle" | "random_allocation":
            return _sampling_from_dict(d, where)
        case "gaussian":
            _keys(d, where, required=("kind", "sigma"), optional=())
            return Gaussian(d["sigma"])
        case "laplace":
            _keys(d, where, required=("kind", "b"), optional=())
            return Laplace(d["b"])
        case "randomized_response":
            _keys(d, where, required=("kind", "p"), optional=())
            return RandomizedResponse(d["p"])
    allowed = ["composed", "dpsgd", "fixed_wor", "fixed_wr", "gaussian", "laplace", "poisson", "random_allocation",
               "randomized_response", "shuffle"]
    raise InputError(f"{where}.kind must be one of {allowed}; got {d.get('kind')!r}")


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
                             steps_per_epoch=params.get("steps_per_epoch"))
    return DPSGD(params["noise_multiplier"], sampling, params["steps"],
                 parse_neighbouring(params.get("neighbouring", "add_remove"), key=f"mechanism {text!r}: neighbouring"),
                 params.get("group_size", 1))


# ----------------------------------------------------------------------------------- words


def _g(x: float) -> str:
    return f"{x:.6g}"


def describe(obj: DPSGD | Composed | Poisson | FixedSize | Gaussian | Laplace | RandomizedResponse) -> str:
    """The description in words, for reports and messages (never a Python repr)."""
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
