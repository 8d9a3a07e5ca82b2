"""Issue 28: ``dpaudit account`` imports only its own subcommand (no scipy.stats, matplotlib or
jinja2); ``--help`` still lists every subcommand, and each subcommand's own --help works."""

from __future__ import annotations

import subprocess
import sys

import pytest

from audit.cli import _COMMANDS, build_parser

HEAVY = ("scipy.stats", "matplotlib", "jinja2")


def test_account_does_not_import_the_other_subcommands():
    # A fresh interpreter: the test process has imported everything already.
    code = (
        "import sys; from audit.cli import main; "
        "rc = main(['account', '--noise-multiplier', '1.1', '--steps', '10', '--sample-rate', '0.01', "
        "'--delta', '1e-5', '--method', 'rdp']); "
        f"print(rc, [m for m in {HEAVY!r} if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "0 []"


def test_parser_for_one_command_builds_only_that_module():
    _, modules = build_parser(["account", "--help"])
    assert list(modules) == ["account"]
    _, modules = build_parser(["--help"])
    assert list(modules) == _COMMANDS
    _, modules = build_parser(["-h", "account"])  # top-level help asked first: everything
    assert list(modules) == _COMMANDS


def test_top_level_help_lists_every_subcommand(capsys):
    parser, _ = build_parser(["--help"])
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    out = capsys.readouterr().out
    for name in _COMMANDS:
        assert f"    {name} " in out


@pytest.mark.parametrize("name", _COMMANDS)
def test_each_subcommand_help(name, capsys):
    from audit.cli import main

    with pytest.raises(SystemExit) as e:
        main([name, "--help"])
    assert e.value.code == 0
    assert f"usage: dpaudit {name}" in capsys.readouterr().out
