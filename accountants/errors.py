"""The error classes every dpaudit package raises for bad input (the CLI's exit 2).

:class:`InputTypeError` (a ``TypeError``) is raised for the wrong kind of input,
:class:`InputError` (a ``ValueError``) for a value out of range, :class:`UnsupportedError` for a
combination no theorem covers. All derive from :class:`InputError`, the one class the CLI reports
as a usage error.
"""

from __future__ import annotations

__all__ = ["InputError", "InputTypeError", "UnsupportedError"]


class InputError(ValueError):
    """Bad input: a value out of its allowed range, an invalid combination, a malformed file or flag.

    The one base class of every input error dpaudit raises. The CLI turns exactly this class into a
    one-line message naming the parameter and exit code 2; any other exception is an internal error
    (exit 3, with a traceback). A ``ValueError`` subclass, so ``except ValueError`` keeps working.
    """


class InputTypeError(InputError, TypeError):
    """Bad input of the wrong kind (a bool where a number belongs, a string where a tensor does)."""


class UnsupportedError(InputError):
    """A combination of settings no implemented theorem covers (never a wrong number instead)."""


# Users meet these as accountants.InputError etc. (the names the package exports).
for _cls in (InputError, InputTypeError, UnsupportedError):
    _cls.__module__ = "accountants"
