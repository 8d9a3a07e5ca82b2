"""``dpaudit check CLAIMS.toml [--junit FILE]``: CI gate on a privacy claim.

Exit 0 when both the accountant and the audit support the claim; 1 when either does not (each
reason is printed: the accountant's ε exceeds the claim, the audit's ε_lower exceeds it, or a
confidence box lies below the accountant's own curve — a bug or broken DP); 2 on input errors
(checked before the audit runs, output paths included); 3 on an internal error.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from accountants.errors import InputError

from .. import backends, estimate, registry, report, runs
from .. import formatting as fmt
from ..model import RunResult
from ..runconfig import RunConfig


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "check", help="CI gate: exit 0 if the claim holds, 1 if violated, 2 on input errors, 3 on internal errors",
        description="Run the audits of CLAIMS.toml and decide its [claim] (epsilon, delta); epsilon = \"accountant\" "
                    "claims the accountants' own epsilon for the configured spec. Exit codes: 0 the claim holds, "
                    "1 violation or claim not supported, 2 input error, 3 internal error.",
        epilog=registry.choices_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("claims", metavar="CLAIMS.toml", help="configuration with a [claim] section")
    p.add_argument("--junit", default=None, metavar="FILE", help="also write a JUnit XML report")
    p.add_argument("--out", default=None, help="run folder (default runs/<config>-<UTC time>; printed at the start)")
    p.add_argument("--resume", action="store_true", help="continue an interrupted check in --out, losing nothing")
    p.add_argument("--quiet", action="store_true", help="no progress bars and no estimate")
    backends.add_arguments(p)


def _junit(result: RunResult, path: str) -> None:
    cases = []
    for a in result.audits:
        body = ""
        if a.claim is not None and not a.claim.holds:
            msg = "; ".join(a.claim.reasons)
            body = f"<failure message={quoteattr(msg)}>{escape(msg)}</failure>"
        cases.append(f'  <testcase classname="dpaudit.check" name={quoteattr(a.name)} '
                     f'time="{a.runtime_s.total}">{body}</testcase>')
        cases += _premise_cases(a)
    fails = sum(1 for a in result.audits if a.claim is not None and not a.claim.holds)
    fails += sum(t.rejected for a in result.audits if a.conformance is not None for t in a.conformance.tests)
    Path(path).write_text(f'<?xml version="1.0" encoding="utf-8"?>\n<testsuite name="dpaudit check" '
                          f'tests="{len(cases)}" failures="{fails}">\n' + "\n".join(cases) + "\n</testsuite>\n",
                          encoding="utf-8")


def _premise_cases(a) -> list[str]:
    """One JUnit test case per conformance test of an audit (audit/conformance.py): failure when rejected."""
    if a.conformance is None:
        return []
    out = []
    for t in a.conformance.tests:
        p = "n/a" if t.p_value is None else f"{t.p_value:.3g}"
        msg = f"{t.finding} (p = {p} <= level {t.level:.3g}); null: {t.null}"
        body = (f"<failure message={quoteattr(msg)}>{escape(msg)}</failure>" if t.rejected else
                f"<skipped message={quoteattr(t.skipped)}/>" if t.skipped else "")
        name = quoteattr(f"{a.name}.{t.premise}.{t.name}")
        out.append(f'  <testcase classname="dpaudit.check.conformance" name={name} time="0">{body}</testcase>')
    return out


def check_output_file(path: str, flag: str) -> None:
    """Refuse an output path that cannot be written, before any work is done (InputError naming the flag)."""
    p = Path(path)
    if p.is_dir():
        raise InputError(f"{flag} {path!r} is a folder; give a file name, e.g. {str(p / 'dpaudit.xml')!r}")
    parent = p.parent
    if not parent.is_dir():
        raise InputError(f"{flag} {path!r}: the folder {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise InputError(f"{flag} {path!r} is not writable")


def announce(command: str, quiet: bool, memory_gb: float | None, device: str):
    """The ``on_start`` of :func:`audit.runs.execute` for the CLI: print the estimate and the run folder on stderr
    before the first trial, and refuse what cannot fit (:mod:`audit.estimate`; no run folder is left behind)."""
    def on_start(cfg: RunConfig, folder: Path, audits: list[runs.Prepared]) -> None:
        lines = estimate.describe(cfg, memory_gb=memory_gb, device=device,
                                  built={p.variant.name: p.game for p in audits})  # built once, by runs.prepare
        if not quiet:
            for line in lines:
                print(f"dpaudit {command}: estimate: {line}", file=sys.stderr)
        print(f"dpaudit {command}: run folder {str(folder)!r} (interrupted? dpaudit {command} --resume --out "
              f"{shlex.quote(str(folder))})", file=sys.stderr, flush=True)
    return on_start


def run(args: Any) -> int:
    if args.resume and args.out is None:
        raise InputError("--resume needs --out RUN (the run folder to continue)")
    try:
        is_file = Path(args.claims).is_file()
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte
        is_file = False
    if not is_file:
        raise InputError(f"CLAIMS.toml {args.claims[:200]!r} does not exist (or cannot be used as a file name)")
    if args.junit:
        check_output_file(args.junit, "--junit")
    backend = backends.from_args(args)  # also sets torch's threads, before the trainer's module is imported
    paths: dict = {}  # the report is written while the run folder is still locked
    _, result = runs.execute(args.claims, args.out, resume=args.resume, progress=not args.quiet, claim=True,
                                  backend=backend, memory_gb=args.memory_gb, device=args.device,
                                  trial_timeout=args.trial_timeout,
                                  on_start=announce("check", args.quiet, args.memory_gb, args.device),
                                  finish=lambda f, r: paths.update(report.render(f, r)))
    print(report.summary_table(result))
    if args.junit:
        _junit(result, args.junit)
    for a in result.audits:
        c = a.claim
        if c is None:  # a reconstruction game decides no (ε, δ) claim: its violation test is its verdict
            print(f"{a.name}: {a.violation.message}", file=sys.stderr if a.violation.violated else sys.stdout)
            continue
        print(f"{a.name}: claim (epsilon={fmt.exact(c.epsilon)}, delta={c.delta:g}) {report.claim_status(c)}")
        for r in c.reasons:
            print(f"  - {r}", file=sys.stderr if not c.holds else sys.stdout)
    print(f"report: {paths['html']}")
    return 0 if (result.claim is None or result.claim.holds) and not result.violation else 1
