"""One generic, lossless dict round trip for every description class.

A description (a frozen dataclass: :class:`~accountants.DPSGD`, :class:`~accountants.Composed`, the
sampling schemes, the base mechanisms) derives from :class:`Description` and declares its ``kind``
names; :func:`to_dict` and :func:`from_dict` read everything else from the dataclass fields and
their annotations. The description modules import this one and nothing imports them back, so the
description types and their dict form form no import cycle (issue 24).

Dict form: ``{"kind": K, field: value, ...}`` in field order; a nested description is its own dict,
a tuple of them a list, an enum its value, a ``float``/``int`` field a Python float/int (a float's
``repr`` round-trips bit for bit through JSON). Top-level :class:`~accountants.DPSGD` and
:class:`~accountants.Composed` dicts lead with ``"format": SPEC_FORMAT``; nested parts do not.
"""

from __future__ import annotations

import dataclasses
import enum
import typing
from typing import Any, ClassVar, TypeVar

from .errors import InputError, InputTypeError

__all__ = ["SPEC_FORMAT", "Description", "Kinds", "canonical_kind", "from_dict", "kinds", "to_dict"]

SPEC_FORMAT = "dpaudit.spec/1"

# canonical kind -> (class, the fields the kind fixes); alias -> canonical kind
_REGISTRY: dict[str, tuple[type[Description], dict[str, Any]]] = {}
_ALIASES: dict[str, str] = {}

D = TypeVar("D", bound="Description")
Kinds = dict[str, dict[str, Any]]  # canonical kind -> the field values that kind fixes


class Description:
    """Base of the description dataclasses: one generic ``to_dict``/``from_dict`` pair.

    A subclass declares ``KINDS`` (canonical kind -> the field values that kind fixes, e.g.
    ``{"fixed_wr": {"replace": True}}``), optionally ``ALIASES`` (older spellings), ``ROLE`` (the
    name an error message gives the dict: ``spec``, ``sampling``, ``mechanism``) and ``FORMAT``
    (True where a top-level dict carries ``SPEC_FORMAT``).
    """

    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, dataclasses.Field[Any]]]  # every subclass is a dataclass
    KINDS: ClassVar[Kinds] = {}
    ALIASES: ClassVar[dict[str, str]] = {}
    ROLE: ClassVar[str] = "spec"
    FORMAT: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for kind, fixed in cls.KINDS.items():
            _REGISTRY[kind] = (cls, fixed)
        _ALIASES.update(cls.ALIASES)

    @property
    def kind(self) -> str:
        """The canonical kind of this description (the ``"kind"`` of its dict)."""
        for kind, fixed in self.KINDS.items():
            if all(getattr(self, k) == v for k, v in fixed.items()):
                return kind
        raise InputTypeError(f"{type(self).__name__} matches none of its kinds {sorted(self.KINDS)}")  # unreachable

    def to_dict(self) -> dict[str, Any]:
        """Lossless dict form (:func:`to_dict`)."""
        return to_dict(self)

    @classmethod
    def from_dict(cls: type[D], d: Any) -> D:
        """Inverse of :meth:`to_dict` (:func:`from_dict`); a dict of another class is an ``InputTypeError``."""
        obj = from_dict(d, where=cls.ROLE)
        if not isinstance(obj, cls):
            raise InputTypeError(f"{cls.ROLE} describes a {type(obj).__name__}, not a {cls.__name__}")
        return obj


def kinds() -> tuple[str, ...]:
    """Every canonical kind, sorted."""
    return tuple(sorted(_REGISTRY))


def canonical_kind(name: Any, *, key: str = "kind", allowed: tuple[str, ...] | None = None) -> str:
    """The canonical kind of any accepted spelling (case-insensitive, ``-`` ≡ ``_``, aliases), one of
    ``allowed`` (default: every kind); ``InputError`` names ``key``."""
    if name is not None and not isinstance(name, str):
        raise InputTypeError(f"expected a name (string); got {type(name).__name__} {name!r}")
    k = (name or "").strip().lower().replace("-", "_")
    k = _ALIASES.get(k, k)
    allowed = kinds() if allowed is None else allowed
    if k not in allowed:
        raise InputError(f"{key} must be one of {list(allowed)}; got {name!r}")
    return k


def to_dict(obj: Description) -> dict[str, Any]:
    """A JSON/TOML-ready dict of a description; :func:`from_dict` inverts it exactly."""
    if not isinstance(obj, Description):
        raise InputTypeError(f"cannot describe {type(obj).__name__}")
    body = _body(obj)
    return {"format": SPEC_FORMAT, **body} if obj.FORMAT else body


def _body(obj: Description) -> dict[str, Any]:
    fixed = obj.KINDS[obj.kind]
    out: dict[str, Any] = {"kind": obj.kind}
    for f in dataclasses.fields(obj):
        if f.name not in fixed:
            out[f.name] = _encode(getattr(obj, f.name), f.type)
    return out


def _encode(value: Any, annotation: Any) -> Any:
    if isinstance(value, Description):
        return _body(value)
    if isinstance(value, tuple):
        return [_encode(v, None) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if annotation in ("float", float):
        return float(value)
    if annotation in ("int", int):
        return int(value)
    return value


def from_dict(d: Any, *, where: str = "spec", allowed: tuple[str, ...] | None = None) -> Any:
    """Inverse of :func:`to_dict`; an unknown format, kind or key is an ``InputError`` naming it.

    ``allowed``: the kinds accepted here (default: all; a nested field accepts its annotated classes).
    """
    if not isinstance(d, dict):
        raise InputTypeError(f"{where} must be a table/object; got {type(d).__name__}")
    fmt = d.get("format", SPEC_FORMAT)
    if fmt != SPEC_FORMAT:
        raise InputError(f"{where}.format is {fmt!r}; this dpaudit reads {SPEC_FORMAT!r}")
    cls, fixed = _REGISTRY[canonical_kind(d.get("kind"), key=f"{where}.kind", allowed=allowed)]
    hints = typing.get_type_hints(cls)
    free = [f for f in dataclasses.fields(cls) if f.name not in fixed]
    required = ["kind"] + [f.name for f in free if _required(f)]
    missing = [k for k in required if k not in d]
    unknown = sorted(set(d) - {f.name for f in free} - {"kind", "format"})
    if missing:
        raise InputError(f"{where} is missing {', '.join(missing)}")
    if unknown:
        allowed = sorted(["kind", *(f.name for f in free)])
        raise InputError(f"{where} has unknown key {unknown[0]!r}; allowed: {allowed}")
    args = {f.name: _decode(d[f.name], hints[f.name], f"{where}.{f.name}") for f in free if f.name in d}
    return cls(**args, **fixed)


def _required(f: dataclasses.Field[Any]) -> bool:
    """A field is required unless it has a plain default (a tuple field's empty default is not a default)."""
    return f.default is dataclasses.MISSING


def _kinds_of(hint: Any) -> tuple[str, ...]:
    """The kinds of the description classes in an annotation (``A``, ``A | B``), sorted."""
    classes = [t for t in (hint, *typing.get_args(hint)) if isinstance(t, type) and issubclass(t, Description)]
    return tuple(sorted(k for c in classes for k in c.KINDS))


def _decode(value: Any, hint: Any, where: str) -> Any:
    if typing.get_origin(hint) is tuple:
        if not isinstance(value, list):
            raise InputTypeError(f"{where} must be a list")
        item = _kinds_of(typing.get_args(hint)[0])
        return tuple(from_dict(v, where=f"{where}[{i}]", allowed=item) for i, v in enumerate(value))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        parse = getattr(hint, "parse", None)
        return parse(value, key=where) if parse is not None else hint(value)
    nested = _kinds_of(hint)
    if nested:
        return from_dict(value, where=where, allowed=nested)
    return value
