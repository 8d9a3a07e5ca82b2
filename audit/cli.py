"""The ``dpaudit`` command line: thin subcommands over library calls.

Exit codes (every subcommand):

- 0: success; for ``run`` and ``check``: no violation and the claim is supported;
- 1: ``run``/``check`` only: a violation was found, or ``check``'s claim is not supported;
- 2: input error (a bad flag, value, file or combination; also argparse's usage errors), with a
  one-line reason on stderr naming the parameter. Exactly :class:`accountants.InputError` (and its
  subclasses ``InputTypeError``, ``UnsupportedError``) is reported this way;
- 3: the run did not finish: a worker of ``--backend process|ray`` died (out of memory, killed),
  reported on one line (every finished trial is saved: ``--resume`` completes the run); or an
  internal error: anything else is a bug in dpaudit, reported with its traceback, never dressed
  as a usage error and never as a verdict.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import traceback
from collections.abc import Sequence

from accountants.errors import InputError
from audit.backends import BackendError

# One module per subcommand in audit/commands; the order is the order in --help.
_COMMANDS = ["account", "capacity", "compare", "run", "check", "report", "score"]

EXIT_OK, EXIT_VIOLATION, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


class UsageError(InputError):
    """A usage error the CLI reports on one line and exits 2 (an :class:`accountants.InputError`)."""


def build_parser(argv: Sequence[str] | None = None) -> tuple[argparse.ArgumentParser, dict[str, object]]:
    """The parser, and the module of each subcommand it imported.

    With ``argv`` naming a subcommand, only that subcommand's module is imported (the others get
    placeholder parsers): ``dpaudit account`` does not load scipy.stats, matplotlib or jinja2.
    Without one (``dpaudit --help``, a usage error) every subcommand is imported, so the help
    lists them all with their descriptions.
    """
    parser = argparse.ArgumentParser(
        prog="dpaudit",
        description="Audit differentially private training: sound accountants, real attacks, honest statistics.",
        epilog="Exit codes: 0 no violation, 1 violation or claim not supported, 2 input error, 3 internal error.",
        allow_abbrev=False,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    chosen = _chosen_command(argv)
    modules: dict[str, object] = {}
    for name in _COMMANDS:
        if chosen is not None and name != chosen:
            sub.add_parser(name)  # placeholder: never parsed, never listed (a command was named)
            continue
        mod = importlib.import_module(f"audit.commands.{name}")
        mod.add_parser(sub)
        modules[name] = mod
    for p in sub.choices.values():  # no prefix abbreviations anywhere: --sample matches nothing
        p.allow_abbrev = False
    return parser, modules


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    """The parser of subcommand ``name`` (for its usage line in errors)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]
    return parser  # pragma: no cover (build_parser always adds the subcommands)


def _chosen_command(argv: Sequence[str] | None) -> str | None:
    """The subcommand ``argv`` names before any top-level option, or None (then all are built)."""
    if argv is None:
        return None
    for tok in argv:
        if tok.startswith("-"):
            return None  # -h/--help or a bad top-level flag: argparse needs the full parser
        return tok if tok in _COMMANDS else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (see the module docstring)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser, modules = build_parser(argv)
    args, extra = parser.parse_known_args(argv)
    if extra:  # a bad flag after the subcommand: that subcommand's usage, not the top level's (exit 2)
        _subparser(parser, args.command).error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return int(modules[args.command].run(args))  # type: ignore[attr-defined]
    except InputError as exc:  # bad input or an unsupported combination: one line, exit 2
        print(f"dpaudit {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except BackendError as exc:  # a worker died (not a verdict, not a bug): one line, exit 3
        print(f"dpaudit {args.command}: not finished: {exc}", file=sys.stderr)
        return EXIT_INTERNAL
    except Exception:  # a bug in dpaudit: the traceback, exit 3 (never 1, which CI reads as a violation)
        traceback.print_exc(file=sys.stderr)
        print(f"dpaudit {args.command}: internal error (a bug in dpaudit, not in your input); please report it "
              "with the traceback above", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
