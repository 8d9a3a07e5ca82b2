"""``dpaudit score SCORES.csv``: audit membership scores computed elsewhere against a claimed DP-SGD spec.

Exit 0 when no sound test finds the scores incompatible with the claim, 1 when one does (the
violation test, or the claim ``--epsilon`` when given), 2 on bad input (a bad row is named by line
number and column). Input format and the treatment of ±inf scores: :mod:`audit.score`.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

import accountants as acc
from accountants import describe

from .. import formatting as fmt
from .. import report
from .. import score as score_mod
from ..model import RunResult, to_dict
from .account import _neighbouring, _sampling, spec_from_args
from .check import check_output_file

JSON_FORMAT = "dpaudit.score/1"


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "score",
        help="audit membership scores from your own game (CSV or JSONL) against a claimed DP-SGD spec",
        description=(
            "Read one row per trial (multi-run) or per canary (one-run) with columns 'member' (0/1, true/false) and "
            "'score' (higher means member; +inf/-inf allowed, NaN rejected), then report the epsilon lower bound, "
            "the ceiling, the accountant's bounds for the claimed spec and the violation test. The spec flags are "
            "those of 'dpaudit account'. Exit 0: no violation; 1: violation (or --epsilon claim not supported); "
            "2: bad input."
        ),
    )
    p.add_argument("scores", metavar="SCORES", help="a .csv file with a header, or a .jsonl file")
    p.add_argument("--noise-multiplier", type=float, required=True, metavar="S", help="noise std / clip norm (> 0)")
    p.add_argument("--steps", type=int, required=True, metavar="T", help="number of steps (>= 1)")
    p.add_argument("--delta", type=float, required=True, metavar="D", help="delta of every epsilon, in (0, 1)")
    p.add_argument("--sampling", type=_sampling, choices=list(describe.SAMPLING_KINDS), default="poisson",
                   help="sampling kind, as for 'dpaudit account' (aliases: fixed-size = fixed_wor; '-' and '_' are "
                        "the same)")
    p.add_argument("--sample-rate", type=float, metavar="Q", help="Poisson inclusion probability in (0, 1]")
    p.add_argument("--batch-size", type=int, metavar="B", help="fixed-size batch size")
    p.add_argument("--dataset-size", type=int, metavar="N", help="dataset size")
    p.add_argument("--max-batch-size", type=int, metavar="B", help="truncated Poisson: the largest batch kept (>= 1)")
    p.add_argument("--neighbouring", type=_neighbouring, choices=list(describe.NEIGHBOURING_NAMES),
                   default="add_remove")
    p.add_argument("--group-size", type=int, default=1, metavar="K", help="records protected together (>= 1)")
    p.add_argument("--epsilon", type=float, default=None, metavar="E",
                   help="also decide the claim (E, D) as 'dpaudit check' does")
    p.add_argument("--significance", type=float, default=0.05, metavar="S",
                   help="the lower bound and the violation test hold at 1 - S (default 0.05)")
    p.add_argument("--design", type=score_mod.parse_design, choices=list(score_mod.DESIGNS), default="multi_run",
                   help="multi-run: one row per independent training run; one-run: the canaries of one run")
    p.add_argument("--independent-canaries", action="store_true",
                   help="one-run only: you vouch that the canaries do not interact (each canary's view independent "
                        "of the others' bits, e.g. Dirac gradient canaries on distinct coordinates no natural record "
                        "touches, in plain DP-SGD); epsilon_lower is then the largest of Steinke et al.'s, Xiang et "
                        "al.'s order statistic and the score boxes, each at S/3. Without it: Steinke et al.'s, sound "
                        "for any canaries")
    p.add_argument("--out", default=None, metavar="DIR", help="write result.json, report.md, report.html there")
    p.add_argument("--json", action="store_true", help=f"print one JSON object (format {JSON_FORMAT})")
    p.add_argument("--junit", default=None, metavar="FILE", help="also write a JUnit XML report")


def _junit(result: RunResult, path: str) -> None:
    a = result.audits[0]
    reasons = [a.violation.message] if a.violation.violated else []
    if a.claim is not None and not a.claim.holds:
        reasons += a.claim.reasons
    body = f"<failure message={quoteattr('; '.join(reasons))}>{escape('; '.join(reasons))}</failure>" if reasons \
        else ""
    Path(path).write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n'
        f'<testsuite name="dpaudit score" tests="1" failures="{int(bool(reasons))}">\n'
        f'  <testcase classname="dpaudit.score" name={quoteattr(a.name)} time="{a.runtime_s.total}">'
        f"{body}</testcase>\n</testsuite>\n", encoding="utf-8")


def run(args: argparse.Namespace) -> int:
    args.method = "rdp"
    spec: acc.DPSGD = spec_from_args(args)
    if args.junit:  # output paths are checked before the audit, as `check` does (exit 2, nothing written)
        check_output_file(args.junit, "--junit")
    if args.out is not None:
        score_mod.check_out_folder(args.out)
    run_result, _ = score_mod.audit_scores_run(args.scores, spec, delta=args.delta,
                                                       significance=args.significance, design=args.design,
                                                       claim_epsilon=args.epsilon, out=args.out,
                                                       independent_canaries=args.independent_canaries)
    a = run_result.audits[0]
    failed = run_result.violation or (run_result.claim is not None and not run_result.claim.holds)
    if args.junit:
        _junit(run_result, args.junit)
    if args.json:
        keys = ("design", "trials", "n_in", "n_out", "epsilon_lower", "ceiling", "epsilons", "epsilon_rdp",
                "epsilon_tight", "epsilon_tight_lower", "tightness_tight", "gdp_estimate", "gdp_lower_one_run",
                "violation", "nonfinite", "claim", "epsilon_certifiable", "one_run_statistics")
        audit = to_dict(a)
        out = {"format": JSON_FORMAT, "spec": spec.to_dict(), "significance": args.significance, "delta": args.delta,
               **{k: audit.get(k) for k in keys}, "exit_code": int(failed)}
        json.dump(out, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
        return int(failed)
    print(report.summary_table(run_result))
    if a.nonfinite is not None:
        print(f"note: {a.nonfinite.note}")
    print(a.violation.message, file=sys.stderr if a.violation.violated else sys.stdout)
    if a.claim is not None:
        c = a.claim
        status = "holds" if c.holds else ("VIOLATED" if not c.audit_holds else "not supported")
        print(f"claim (epsilon={fmt.exact(c.epsilon)}, delta={c.delta:g}) {status}")
        for r in c.reasons:
            print(f"  - {r}", file=sys.stderr)
    if args.out:
        print(f"report: {Path(args.out) / 'report.html'}")
    return int(failed)
