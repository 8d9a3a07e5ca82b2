"""``dpaudit compare A B``: Δ-divergence both ways between two mechanisms (Kaissis et al. 2024)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import accountants as acc
from accountants._validate import InputError
from accountants.comparison import compare
from accountants.tradeoff import TradeOff

JSON_FORMAT = "dpaudit.compare/1"

_KINDS = {
    "gaussian": ("sigma",),
    "laplace": ("b",),
    "dpsgd": ("noise_multiplier", "sample_rate", "steps"),
}
_OPTIONAL = {"dpsgd": ("neighbouring",)}


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "compare",
        help="Δ-divergence between two mechanisms, both ways (Kaissis et al. 2024)",
        description=(
            "Compare two mechanisms beyond their calibration point: Δ(A‖B) is the largest drop in some "
            "membership adversary's Bayes error when switching from A to B (0 means A is less private "
            "everywhere). Mechanisms: gaussian:sigma=S | laplace:b=B (unit sensitivity) | "
            "dpsgd:noise_multiplier=S,sample_rate=Q,steps=T[,neighbouring=add-remove|replace-one] "
            "(Poisson sampling; needs the PLD accountant, or --method rdp)."
        ),
    )
    p.add_argument("a", metavar="A", help="first mechanism, e.g. gaussian:sigma=1")
    p.add_argument("b", metavar="B", help="second mechanism, e.g. laplace:b=1")
    p.add_argument(
        "--method",
        choices=["pld", "rdp"],
        default="pld",
        help="accountant for dpsgd mechanisms (default pld: tight; rdp: looser, sound)",
    )
    p.add_argument("--json", action="store_true", help=f"print one JSON object (format {JSON_FORMAT})")


def parse_mechanism(text: str) -> tuple[str, dict[str, str]]:
    """Split ``kind:key=value,...`` into (kind, {key: value}); ValueError names what is wrong."""
    kind, sep, rest = text.partition(":")
    kind = kind.strip().lower()
    if kind not in _KINDS:
        raise InputError(f"mechanism {text!r}: kind must be one of {sorted(_KINDS)}")
    params: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in rest.split(","))) if sep else ():
        key, eq, value = item.partition("=")
        if not eq:
            raise InputError(f"mechanism {text!r}: expected key=value, got {item!r}")
        params[key.strip().replace("-", "_")] = value.strip()
    allowed = set(_KINDS[kind]) | set(_OPTIONAL.get(kind, ()))
    unknown = sorted(set(params) - allowed)
    missing = [k for k in _KINDS[kind] if k not in params]
    if unknown or missing:
        raise InputError(
            f"mechanism {text!r}: {kind} takes {', '.join(_KINDS[kind])}"
            + (f" (optional: {', '.join(_OPTIONAL[kind])})" if kind in _OPTIONAL else "")
            + (f"; missing {', '.join(missing)}" if missing else "")
            + (f"; unknown {', '.join(unknown)}" if unknown else "")
        )
    return kind, params


def _number(text: str, key: str, kind: type = float) -> Any:
    try:
        return kind(text)
    except ValueError:
        raise InputError(f"{key} must be {'an integer' if kind is int else 'a number'}; got {text!r}") from None


def build_tradeoff(text: str, method: str = "pld") -> TradeOff:
    """The TradeOff named by a mechanism string (see ``dpaudit compare --help``)."""
    kind, p = parse_mechanism(text)
    match kind:
        case "gaussian":
            return TradeOff.from_mechanism(acc.Gaussian(_number(p["sigma"], "sigma")))
        case "laplace":
            return TradeOff.from_mechanism(acc.Laplace(_number(p["b"], "b")))
        case "dpsgd":
            spec = acc.DPSGD(
                _number(p["noise_multiplier"], "noise_multiplier"),
                acc.Poisson(_number(p["sample_rate"], "sample_rate")),
                _number(p["steps"], "steps", int),
                p.get("neighbouring", "add-remove"),
            )
            return TradeOff.from_spec(spec, method=method)
    raise InputError(f"unknown mechanism kind {kind!r}")  # unreachable: parse_mechanism checked it


def run(args: argparse.Namespace) -> int:
    a = build_tradeoff(args.a, args.method)
    b = build_tradeoff(args.b, args.method)
    c = compare(a, b)
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
        "bayes_risk_at_half": {"a": float(a.bayes_risk(0.5)), "b": float(b.bayes_risk(0.5))},
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
        f"  minimum Bayes error at prior 1/2: A {out['bayes_risk_at_half']['a']:.6g}, "
        f"B {out['bayes_risk_at_half']['b']:.6g}"
    )
    if "lower" in c.bounds:
        print("  note: accountant curves are lower bounds on the trade-off; Delta compares the guarantees")
    return 0
