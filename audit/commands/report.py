"""``dpaudit report runs/NAME``: re-render the report of a finished run from its result.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .. import model, report, runs


def add_parser(sub: Any) -> None:
    p = sub.add_parser("report", help="re-render report.md, report.html and figures of a finished run",
                       description="Re-render a finished run's report from its result.json (nothing is re-run).")
    p.add_argument("run_dir", metavar="RUN", help="run folder, e.g. runs/NAME")


def run(args: Any) -> int:
    result = model.load_result(args.run_dir)  # validated (names included) before anything is written
    with runs.lock(Path(args.run_dir)):  # never beside a run (or resume) still writing this folder
        paths = report.render(args.run_dir, result)
    print(report.summary_table(result))
    print(f"\nreport: {paths['html']}")
    return 0
