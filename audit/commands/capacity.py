"""``dpaudit capacity``: restricted (capacity-bounded) divergences next to the unrestricted ones.

Chaudhuri, Imola, Machanavajjhala 2019: how much can an adversary whose test statistic is a
polynomial of bounded degree of the mechanism output separate the neighbouring output laws? The
numbers are restricted KL / Rényi divergences: they are NOT (ε, δ) and NOT a trade-off curve, and
this command never converts them.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import torch

import accountants as acc
from accountants import capacity as cap
from accountants import describe
from accountants.errors import InputError

from ..jsontypes import JSONObject

JSON_FORMAT = "dpaudit.capacity/2"  # /2: "mechanism" is accountants.describe.to_dict
ALL_CLASSES = ("linear", "poly2", "poly3")
MEANING = ("restricted divergence against adversaries whose test statistic lies in the class; "
           "NOT (epsilon, delta), NOT a trade-off curve; never convert it")

KINDS = ("laplace", "gaussian", "dpsgd")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "capacity",
        help="restricted (capacity-bounded) KL/Renyi of a mechanism vs the unrestricted value",
        description=(
            "Restricted divergences (Chaudhuri, Imola, Machanavajjhala 2019) of one mechanism at sensitivity 1, "
            "worst of both directions, next to the unrestricted divergence. These are NOT (epsilon, delta) and "
            "NOT a trade-off curve. Mechanisms: laplace:b=B, gaussian:sigma=S, "
            "dpsgd:noise_multiplier=S,sample_rate=Q (one Poisson-subsampled step, add/remove)."
        ),
    )
    p.add_argument("--mechanism", required=True, metavar="SPEC",
                   help="laplace:b=1 | gaussian:sigma=1 | dpsgd:noise_multiplier=1,sample_rate=0.01")
    p.add_argument("--class", dest="function_class", default="linear",
                   choices=[*ALL_CLASSES, "all"], help="adversary class (polynomials of the output, with bias)")
    p.add_argument("--divergence", choices=["kl", "renyi"], default="kl")
    p.add_argument("--order", type=float, metavar="A", help="Renyi order alpha > 1 (required with --divergence renyi)")
    p.add_argument("--json", action="store_true", help=f"print one JSON object (format {JSON_FORMAT})")


def parse_mechanism(text: str) -> tuple[acc.Gaussian | acc.Laplace | acc.DPSGD, JSONObject]:
    """``kind:key=value,...`` → (mechanism, its JSON description), by :func:`accountants.describe.parse_mechanism`.

    The same grammar as ``dpaudit compare`` (``steps`` defaults to 1 here); InputError names the problem.
    """
    mech = describe.parse_mechanism(text, kinds=KINDS, defaults={"steps": 1})
    assert isinstance(mech, (acc.Gaussian, acc.Laplace, acc.DPSGD))  # KINDS admits no other
    return mech, describe.to_dict(mech)


def _f(x: torch.Tensor) -> float:
    return float(x.reshape(-1)[0])


def run(args: argparse.Namespace) -> int:
    mech, desc = parse_mechanism(args.mechanism)
    if args.divergence == "renyi" and args.order is None:
        raise InputError("--divergence renyi needs --order A (alpha > 1)")
    if args.divergence == "kl" and args.order is not None:
        raise InputError("--order applies to --divergence renyi only")
    classes = list(ALL_CLASSES) if args.function_class == "all" else [args.function_class]
    res = cap.capacity_divergences(mech, classes, args.divergence, args.order)
    restricted = {c: _f(v) for c, v in res.restricted.items()}
    unrestricted = _f(res.unrestricted)
    by_dir = {
        "restricted": {c: {d: _f(v) for d, v in per.items()} for c, per in res.by_direction["restricted"].items()},
        "unrestricted": {d: _f(v) for d, v in res.by_direction["unrestricted"].items()},
    }
    if args.json:
        out = {
            "format": JSON_FORMAT,
            "mechanism": desc,
            "sensitivity": 1.0,
            "divergence": args.divergence,
            "order": args.order,
            "class": args.function_class,
            "restricted": restricted,
            "unrestricted": unrestricted,
            "by_direction": by_dir,
            "converged": res.converged,
            "meaning": MEANING,
        }
        json.dump(out, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
        return 0
    what = "KL" if args.divergence == "kl" else f"Renyi order {args.order:g}"
    print(f"{args.mechanism}: restricted vs unrestricted {what} (sensitivity 1, worst of both directions)")
    print(f"  {'class':<10} {'restricted':>14} {'unrestricted':>14}")
    for c, v in restricted.items():
        print(f"  {c:<10} {v:>14.6g} {unrestricted:>14.6g}")
    if not res.converged:
        print("  warning: an optimisation did not reach its tolerance; values may be slightly low")
    print("  These are restricted divergences: NOT (epsilon, delta), NOT a trade-off curve; do not convert them.")
    return 0
