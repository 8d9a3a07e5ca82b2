"""Every code block in README.md and docs/*.md runs, as written (issue 23 §5).

What each fenced block gets (run from a fresh folder in which ``examples/`` is the repository's, so
``runs/...`` and other outputs land in a temporary directory):

- ```` ```python ````: executed in a fresh namespace. A block that needs a peer library
  (opacus, dp_accounting, prv_accountant: the ``peers`` extra) is skipped when it is not installed.
- ```` ```toml ````: a configuration (it has a ``[training]``, ``[canary]``, ``[attack]``, ``[audit]`` or
  ``[claim]`` table) is validated by :func:`audit.config.loads`; a fragment is laid over the default
  configuration first. A ``trainer`` is looked up in ``examples/own_training/``, where the shipped
  trainers live.
- ```` ```json ````: parsed.
- ```` ```bash ```` (one command per line, ``\\`` continuations joined): ``dpaudit ...`` is parsed by
  the real argument parser, its input files must exist, and the cheap subcommands (``account``,
  ``compare``, ``capacity``) run and must exit 0; ``run``, ``check``, ``score`` and ``report`` are only
  parsed (minutes each: their examples run in tests/attacks/test_plugin_examples.py and
  tests/audit/test_cli_run.py). ``python FILE ...`` needs FILE to exist, ``python -m pytest PATH``
  needs PATH, ``pip install -e ".[X]"`` needs the extra X in pyproject.toml.
- an untagged block: its ``>>>`` examples run as a doctest (outputs compared), and each
  ``$ dpaudit ...`` line runs and its printed lines (up to the next ``$`` or ``>>>``) must match.
  Other untagged blocks are synopses or outputs and are not run.

The only way to run less: an HTML comment on the line before the fence,
``<!-- docs-test: syntax -->``. The block is then only compiled (Python) or parsed (``dpaudit``
lines), for a sketch with placeholders or a block that takes minutes; say why beside it.
"""

from __future__ import annotations

import doctest
import json
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from audit.config import tomllib  # tomllib, or tomli on Python 3.10

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^(?:<!-- docs-test: (?P<mode>\w+)[^>]*-->\n)?```(?P<lang>[\w-]*)\n(?P<body>.*?)^```[ \t]*$",
                   re.M | re.S)
PEERS = {"opacus", "dp_accounting", "prv_accountant"}
CHEAP = {"account", "compare", "capacity"}
CONFIG_TABLES = {"training", "canary", "attack", "audit", "claim", "variant"}


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    lang: str
    mode: str | None
    body: str

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def _blocks() -> list[Block]:
    out = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            line = text.count("\n", 0, m.start("lang")) + 1
            out.append(Block(path, line, m.group("lang"), m.group("mode"), m.group("body")))
    return out


BLOCKS = _blocks()


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A fresh working folder with the repository's examples/ (outputs stay in tmp_path)."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _ids(kind: str) -> list:
    return [pytest.param(b, id=b.id) for b in BLOCKS if _kind(b) == kind]


def _kind(b: Block) -> str:
    if b.lang in ("python", "toml", "json", "bash"):
        return b.lang
    if not b.lang and re.search(r"^(>>> |\$ dpaudit )", b.body, re.M):
        return "session"
    return "text"


def test_every_block_is_known():
    """Every fence is tagged with a language this file runs, or is a synopsis / output (untagged)."""
    assert len(BLOCKS) > 30
    unknown = [b.id for b in BLOCKS if b.lang not in ("", "python", "toml", "json", "bash")]
    assert not unknown, f"untested code-block languages: {unknown}"
    modes = {b.mode for b in BLOCKS} - {None, "syntax"}
    assert not modes, f"unknown docs-test markers: {modes}"


# --------------------------------------------------------------------------------------------- python


@pytest.mark.parametrize("block", _ids("python"))
def test_python_block(block, here):
    code = compile(block.body, block.id, "exec")
    if block.mode == "syntax":
        return
    try:
        exec(code, {"__name__": "__docs__"})
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] in PEERS:
            pytest.skip(f"{block.id} needs {e.name} (the peers extra)")
        raise


# ----------------------------------------------------------------------------------------------- toml


def _toml(v) -> str:
    if isinstance(v, dict):  # the tables of a [[variant]]
        return "{" + ", ".join(f"{k} = {_toml(x)}" for k, x in v.items()) + "}"
    return json.dumps(v)


def _lay_over_default(fragment: dict) -> str:
    from audit import config

    base = tomllib.loads(config.DEFAULT_TOML)
    for section, table in fragment.items():
        base.setdefault(section, {}).update(table)
    lines = []
    for section, tables in base.items():
        for table in tables if isinstance(tables, list) else [tables]:  # [[variant]] is an array of tables
            lines.append(f"[[{section}]]" if isinstance(tables, list) else f"[{section}]")
            lines += [f"{k} = {_toml(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("block", _ids("toml"))
def test_toml_block(block):
    from audit import config

    raw = tomllib.loads(block.body)
    assert set(raw) & CONFIG_TABLES, f"{block.id}: not a dpaudit configuration"
    text = block.body if "training" in raw and "trainer" in raw["training"] else _lay_over_default(raw)
    config.loads(text, base_dir=ROOT / "examples" / "own_training")


@pytest.mark.parametrize("block", _ids("json"))
def test_json_block(block):
    json.loads(block.body)


# ----------------------------------------------------------------------------------------------- bash


def _commands(body: str) -> list[str]:
    joined = re.sub(r"\\\n\s*", " ", body)
    out = []
    for line in joined.splitlines():
        line = re.sub(r"\s+#.*$", "", line).strip()
        if line and not line.startswith("#"):
            out.append(line)
    return out


def _dpaudit(argv: list[str], block: Block, *, run: bool) -> None:
    from audit.cli import build_parser, main

    parser, _ = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        pytest.fail(f"{block.id}: `dpaudit {shlex.join(argv)}` does not parse (exit {e.code})")
    for name in ("config", "claims", "scores", "dp_event"):
        value = getattr(args, name, None)
        if value and block.mode != "syntax" and not value.startswith(("runs/", "SCORES", "CLAIMS", "claims.toml",
                                                                      "event.json")):
            assert (ROOT / value).exists(), f"{block.id}: {value} does not exist"
    if run and args.command in CHEAP and block.mode != "syntax":
        assert main(argv) == 0, f"{block.id}: `dpaudit {shlex.join(argv)}` failed"


def _python(words: list[str], block: Block) -> None:
    if words[:3] == ["python", "-m", "pytest"]:
        for w in words[3:]:
            if w.startswith("tests"):
                assert (ROOT / w.split("::")[0]).exists(), f"{block.id}: {w} does not exist"
        return
    script = next(w for w in words[1:] if not w.startswith("-"))
    assert (ROOT / script).exists(), f"{block.id}: {script} does not exist"


def _pip(words: list[str], block: Block) -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for w in words:
        m = re.fullmatch(r"\.?\[([\w,]+)\]|\.", w.strip("\"'"))
        if w.strip("\"'").startswith(".[") and m:
            for extra in m.group(1).split(","):
                assert extra in extras, f"{block.id}: no extra {extra!r} in pyproject.toml"
    if "-c" in words:
        assert (ROOT / words[words.index("-c") + 1]).exists()


@pytest.mark.parametrize("block", _ids("bash"))
def test_bash_block(block, here):
    commands = _commands(block.body)
    assert commands, f"{block.id}: empty"
    for command in commands:
        for part in re.split(r"\s+&&\s+", command):
            words = shlex.split(part)
            while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):  # PYTHONPATH=. python ...
                words = words[1:]
            if words[0] == "dpaudit":
                _dpaudit(words[1:], block, run=True)
            elif words[0] == "python":
                _python(words, block)
            elif words[0] == "pip":
                _pip(words, block)
            else:
                pytest.fail(f"{block.id}: no check for the command {words[0]!r}; add one here")


# -------------------------------------------------------------------------------------------- session


@pytest.mark.parametrize("block", _ids("session"))
def test_session_block(block, here, capsys):
    from audit.cli import main

    lines = block.body.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ dpaudit "):
            i += 1
            continue
        argv = shlex.split(lines[i][len("$ dpaudit "):])
        expected = []
        i += 1
        while i < len(lines) and not lines[i].startswith(("$ ", ">>> ")):
            expected.append(lines[i].rstrip())
            i += 1
        capsys.readouterr()
        assert main(argv) == 0, f"{block.id}: `dpaudit {shlex.join(argv)}` failed"
        printed = [x.rstrip() for x in capsys.readouterr().out.splitlines()]
        if "--json" not in argv:
            assert printed == expected, f"{block.id}: `dpaudit {shlex.join(argv)}` printed:\n" + "\n".join(printed)
    examples = "\n".join(x for x in lines if not x.startswith("$ "))
    test = doctest.DocTestParser().get_doctest(examples, {}, block.id, str(block.path), block.line)
    if test.examples:
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        report: list[str] = []
        runner.run(test, out=report.append)
        assert runner.failures == 0, f"{block.id}: doctest failed:\n{''.join(report)}"


def test_the_marker_mechanism_is_used_sparingly():
    """Blocks that only compile or parse: each must be a sketch or a long command, not a way around a failure."""
    marked = [b.id for b in BLOCKS if b.mode == "syntax"]
    assert len(marked) <= 6, marked
    assert os.environ.get("DPAUDIT_DOCS_FAST") is None  # no environment switch: the marker is the only one
