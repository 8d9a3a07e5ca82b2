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
from accountants._validate import InputError

JSON_FORMAT = "dpaudit.capacity/1"
ALL_CLASSES = ("linear", "poly2", "poly3")
MEANING = ("restricted divergence against adversaries whose test statistic lies in the class; "
           "NOT (epsilon, delta), NOT a trade-off curve; never convert it")

_MECHANISMS = {
    "laplace": ("b",),
    "gaussian": ("sigma",),
    "dpsgd": ("noise_multiplier", "sample_rate", "steps"),
}


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


def parse_mechanism(spec: str) -> tuple[acc.Gaussian | acc.Laplace | acc.DPSGD, dict[str, Any]]:
    """``name:key=value,...`` → (mechanism description, its JSON description); ValueError names the problem."""
    name, _, rest = spec.partition(":")
    name = name.strip().lower()
    if name not in _MECHANISMS:
        raise InputError(f"unknown mechanism {name!r} in --mechanism; choose from {sorted(_MECHANISMS)}")
    params: dict[str, float] = {}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not eq or key not in _MECHANISMS[name]:
            allowed = list(_MECHANISMS[name])
            raise InputError(f"--mechanism {name}: expected key=value with key in {allowed}; got {item!r}")
        try:
            params[key] = float(value)
        except ValueError:
            raise InputError(f"--mechanism {name}: {key} must be a number; got {value!r}") from None
    if name == "laplace":
        if "b" not in params:
            raise InputError("--mechanism laplace needs b=B (Laplace scale / sensitivity, > 0)")
        return acc.Laplace(params["b"]), {"name": "laplace", "b": params["b"]}
    if name == "gaussian":
        if "sigma" not in params:
            raise InputError("--mechanism gaussian needs sigma=S (noise std / sensitivity, > 0)")
        return acc.Gaussian(params["sigma"]), {"name": "gaussian", "sigma": params["sigma"]}
    if "noise_multiplier" not in params or "sample_rate" not in params:
        raise InputError("--mechanism dpsgd needs noise_multiplier=S,sample_rate=Q")
    steps = params.get("steps", 1.0)
    if steps != int(steps):
        raise InputError(f"--mechanism dpsgd: steps must be an integer; got {steps:g}")
    mech = acc.DPSGD(params["noise_multiplier"], acc.Poisson(params["sample_rate"]), int(steps))
    return mech, {"name": "dpsgd", "noise_multiplier": params["noise_multiplier"],
                  "sample_rate": params["sample_rate"], "steps": int(steps), "neighbouring": "add-remove"}


def _f(x: torch.Tensor) -> float:
    return float(x.reshape(-1)[0])


def run(args: argparse.Namespace) -> int:
    mech, desc = parse_mechanism(args.mechanism)
    if args.divergence == "renyi" and args.order is None:
        raise InputError("--divergence renyi needs --order A (alpha > 1)")
    if args.divergence == "kl" and args.order is not None:
        raise InputError("--order applies to --divergence renyi only")
    classes = list(ALL_CLASSES) if args.function_class == "all" else [args.function_class]
    orders = None if args.order is None else [args.order]
    res = cap.capacity_divergences(mech, classes, args.divergence, orders)
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
