"""``dpaudit compare A B``: Δ-divergence both ways between two mechanisms (Kaissis et al. 2024)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import accountants as acc
from accountants import describe
from accountants.comparison import compare
from accountants.tradeoff import TradeOff

JSON_FORMAT = "dpaudit.compare/1"

KINDS = ("gaussian", "laplace", "randomized_response", "dpsgd")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "compare",
        help="Δ-divergence between two mechanisms, both ways (Kaissis et al. 2024)",
        description=(
            "Compare two mechanisms beyond their calibration point: Δ(A‖B) is the largest drop in some "
            "membership adversary's Bayes error when switching from A to B (0 means A is less private "
            "everywhere). Mechanisms (the grammar of accountants.describe, shared with dpaudit capacity): "
            "gaussian:sigma=S | laplace:b=B | randomized_response:p=P (unit sensitivity) | "
            "dpsgd:noise_multiplier=S,sample_rate=Q,steps=T[,neighbouring=add_remove|replace_one][,group_size=K] "
            "or dpsgd:noise_multiplier=S,sampling=fixed_wor,batch_size=B,dataset_size=N,steps=T "
            "(the curve of --method)."
        ),
    )
    p.add_argument("a", metavar="A", help="first mechanism, e.g. gaussian:sigma=1")
    p.add_argument("b", metavar="B", help="second mechanism, e.g. laplace:b=1")
    p.add_argument(
        "--method",
        choices=acc.methods(),
        default="pld" if "pld" in acc.methods() else acc.methods()[0],
        help="registered accounting method whose trade-off curve stands for a dpsgd mechanism "
             "(pld: tight; rdp: looser, sound)",
    )
    p.add_argument("--json", action="store_true", help=f"print one JSON object (format {JSON_FORMAT})")


def build_tradeoff(text: str, method: str = "pld") -> TradeOff:
    """The TradeOff named by a mechanism string (:func:`accountants.describe.parse_mechanism`)."""
    mech = describe.parse_mechanism(text, kinds=KINDS)
    if isinstance(mech, acc.DPSGD):
        return TradeOff.from_spec(mech, method=method)
    return TradeOff.from_mechanism(mech)


def run(args: argparse.Namespace) -> int:
    a = build_tradeoff(args.a, args.method)
    b = build_tradeoff(args.b, args.method)
    c = compare(a, b)
    risk = {"a": float(a.bayes_risk(0.5)), "b": float(b.bayes_risk(0.5))}
    out = {
        "format": JSON_FORMAT,
        "a": {"mechanism": args.a, "curve": a.description, "bound": a.bound},
        "b": {"mechanism": args.b, "curve": b.description, "bound": b.bound},
        "delta_ab": c.delta_ab,
        "delta_ba": c.delta_ba,
        "worst_prior_ab": c.worst_prior_ab,
        "worst_prior_ba": c.worst_prior_ba,
        "delta_symmetric": c.symmetric,
        "crossings": list(c.crossings),
        "a_dominates_b": c.a_dominates_b,
        "b_dominates_a": c.b_dominates_a,
        "bayes_risk_at_half": risk,
    }
    if args.json:
        json.dump(out, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
        return 0

    def prior(p: float | None) -> str:
        return "-" if p is None else f"{p:.6g}"

    print(f"A: {args.a}  [{a.bound}: {a.description}]")
    print(f"B: {args.b}  [{b.bound}: {b.description}]")
    print(f"  Delta(A||B) = {c.delta_ab:.6g}  (regret of switching A -> B; worst prior {prior(c.worst_prior_ab)})")
    print(f"  Delta(B||A) = {c.delta_ba:.6g}  (regret of switching B -> A; worst prior {prior(c.worst_prior_ba)})")
    print(f"  symmetric   = {c.symmetric:.6g}")
    if c.crossings:
        print("  Bayes-error curves cross at priors " + ", ".join(f"{x:.6g}" for x in c.crossings))
    elif c.a_dominates_b:
        print("  A Blackwell-dominates B: B is at least as private for every adversary")
    elif c.b_dominates_a:
        print("  B Blackwell-dominates A: A is at least as private for every adversary")
    print(
        f"  minimum Bayes error at prior 1/2: A {risk['a']:.6g}, B {risk['b']:.6g}"
    )
    if "lower" in c.bounds:
        print("  note: accountant curves are lower bounds on the trade-off; Delta compares the guarantees")
    return 0
