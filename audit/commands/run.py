"""``dpaudit run [CONFIG] [--out runs/NAME] [--resume]``: play the audit games and write a report."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from accountants.errors import InputError

from .. import backends, registry, report, runs
from .check import announce


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="run an audit (default: embedded digits data, a few minutes on a laptop CPU) and write a report",
        description=(
            "Train DP-SGD with canaries, attack, and compare the empirical lower bounds with the accountants. "
            "Without CONFIG the embedded default audit runs (white-box Dirac canaries under Poisson and fixed-size "
            "sampling, and a black-box loss attack). Writes config.toml, audits/*/trials.jsonl, result.json, "
            "report.md, report.html and figures/ to the run folder. Exit codes: 0 no violation, 1 violation, "
            "2 input error, 3 internal error."
        ),
        epilog=registry.choices_help(), formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("config", nargs="?", default=None, metavar="CONFIG", help="TOML configuration (default: built in)")
    p.add_argument("--out", default=None, help="run folder (default runs/<config>-<UTC time>)")
    p.add_argument("--resume", action="store_true", help="continue an interrupted run in --out, losing nothing")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    backends.add_arguments(p)


def run(args: Any) -> int:
    if args.resume and args.out is None:
        raise InputError("--resume needs --out runs/NAME (the folder to continue)")
    t0 = time.perf_counter()
    backend = backends.from_args(args)  # also sets torch's threads, before a trainer's module is imported
    paths: dict = {}  # the report is written while the run folder is still locked
    _, result = runs.execute(args.config, args.out, resume=args.resume, progress=not args.quiet,
                                  backend=backend, memory_gb=args.memory_gb, device=args.device,
                                  trial_timeout=args.trial_timeout,
                                  on_start=announce("run", args.quiet, args.memory_gb, args.device),
                                  finish=lambda f, r: paths.update(report.render(f, r)))
    print(report.summary_table(result))
    print(f"\nreport: {paths['html']}  ({paths['markdown']}, {paths['json']}); {time.perf_counter() - t0:.0f} s")
    if result.violation:
        print("; ".join(a.violation.message for a in result.audits if a.violation.violated),
              file=sys.stderr)
        return 1
    return 0
