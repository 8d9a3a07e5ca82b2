"""``dpaudit account``: ε (or δ) of a DP-SGD run from the accountants."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import accountants as acc
from accountants import describe
from accountants import validate as check
from accountants.errors import InputError
from accountants.results import check_bracket
from audit import formatting as fmt

JSON_FORMAT = "dpaudit.account/2"  # /2: "spec" is accountants.describe.to_dict (dpaudit.spec/1)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "account",
        help="privacy loss of a DP-SGD run (sound upper bounds)",
        description=(
            "Compute a sound upper bound on the privacy loss of DP-SGD. The noise multiplier is the noise "
            "std on the SUM of clipped per-example gradients divided by the clip norm (Opacus' convention); "
            "the sensitivity follows from --sampling and --neighbouring."
        ),
    )
    p.add_argument("--noise-multiplier", type=float, metavar="S", help="noise std / clip norm (> 0)")
    p.add_argument("--steps", type=int, metavar="T", help="number of steps (>= 1)")
    p.add_argument("--dp-event", metavar="FILE.json",
                   help="account a dp_accounting DpEvent (its to_named_tuple() as JSON; docs/integrations.md) "
                        "instead of --noise-multiplier/--steps/--sampling")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--delta", type=float, metavar="D", help="report epsilon at this delta in (0, 1)")
    target.add_argument("--epsilon", type=float, metavar="E", help="report delta at this epsilon (>= 0)")
    p.add_argument("--sampling", type=_sampling, choices=list(describe.SAMPLING_KINDS), default="poisson",
                   help="sampling kind (aliases: fixed-size = fixed_wor; '-' and '_' are the same); shuffle: "
                        "reshuffled every epoch, then iterated (lower and upper bounds; docs/shuffle.md); "
                        "random-allocation (alias balls-in-bins): each record in --k of every --steps-per-epoch steps "
                        "(docs/sampling.md); truncated-poisson (alias truncated): Poisson cut to at most "
                        "--max-batch-size records, needs --dataset-size (docs/sampling.md)")
    p.add_argument("--sample-rate", type=float, metavar="Q", help="Poisson inclusion probability in (0, 1]")
    p.add_argument("--batch-size", type=int, metavar="B", help="fixed-size batch size")
    p.add_argument("--dataset-size", type=int, metavar="N", help="dataset size")
    p.add_argument("--steps-per-epoch", type=int, metavar="T", help="random allocation: steps per epoch t (>= 1); "
                   "or give --batch-size B --dataset-size N for t = N/B")
    p.add_argument("--k", type=int, metavar="K", help="random allocation: steps per epoch a record takes part in "
                   "(default 1, balls-in-bins)")
    p.add_argument("--max-batch-size", type=int, metavar="B", help="truncated Poisson: the largest batch kept (>= 1)")
    p.add_argument("--neighbouring", type=_neighbouring, choices=list(describe.NEIGHBOURING_NAMES),
                   default="add_remove")
    p.add_argument("--group-size", type=int, default=1, metavar="K", help="records protected together (>= 1)")
    p.add_argument("--method", choices=[*acc.methods(), "all"], default=None,
                   help="default rdp (pld for truncated-poisson: RDP covers it loosely, add/remove only)")
    p.add_argument("--json", action="store_true", help="print one JSON object (format dpaudit.account/2)")


def _sampling(text: str) -> str:
    return describe.parse_sampling_kind(text, key="--sampling")


def _neighbouring(text: str) -> str:
    return describe.parse_neighbouring(text, key="--neighbouring").value


def spec_from_args(args: argparse.Namespace) -> acc.DPSGD:
    """Build the DPSGD description from CLI arguments through :mod:`accountants.describe` (InputError names the flag).

    Poisson sampling takes ``--sample-rate Q``, or ``--batch-size B --dataset-size N`` for q = B/N;
    giving both is an error (which one would be meant?).
    """
    if getattr(args, "dp_event", None) is not None:
        from accountants.integrations.dp_accounting import load_dp_event

        given = [f for f in ("noise_multiplier", "steps", "sample_rate", "batch_size", "dataset_size")
                 if getattr(args, f) is not None]
        if given or args.sampling != "poisson" or args.group_size != 1:
            flags = ", ".join("--" + f.replace("_", "-") for f in given) or "--sampling/--group-size"
            raise InputError(f"--dp-event describes the whole run; drop {flags}")
        return load_dp_event(args.dp_event, neighbouring=args.neighbouring)  # type: ignore[return-value]
    if args.noise_multiplier is None or args.steps is None:
        raise InputError("give --noise-multiplier S and --steps T (or --dp-event FILE.json)")
    kind = describe.parse_sampling_kind(args.sampling, key="--sampling")
    if kind == "poisson":
        sized = [f for f, v in (("--batch-size", args.batch_size), ("--dataset-size", args.dataset_size))
                 if v is not None]
        if args.sample_rate is not None and sized:
            raise InputError(f"--sample-rate and {' and '.join(sized)} both set the Poisson rate; give --sample-rate "
                             "Q alone, or --batch-size B --dataset-size N for q = B/N")
        if args.sample_rate is None:
            if len(sized) != 2:
                raise InputError("--sampling poisson needs --sample-rate Q (or --batch-size B --dataset-size N)")
            check.integer(1, None, **{"--batch-size": args.batch_size, "--dataset-size": args.dataset_size})
            rate = args.batch_size / args.dataset_size
        else:
            rate = args.sample_rate
        sampling = describe.make_sampling(kind, sample_rate=rate, key="--sampling")
    elif kind == "random_allocation":
        sampling = _random_allocation(args)
    elif kind == "truncated_poisson":
        sampling = _truncated_poisson(args)
    else:
        if args.sample_rate is not None:
            raise InputError(f"--sample-rate applies to --sampling poisson only; --sampling {kind} takes "
                             "--batch-size B and --dataset-size N")
        if args.batch_size is None or args.dataset_size is None:
            raise InputError(f"--sampling {kind} needs --batch-size B and --dataset-size N")
        sampling = describe.make_sampling(kind, batch_size=args.batch_size, dataset_size=args.dataset_size,
                                          key="--sampling")
    if kind != "truncated_poisson" and getattr(args, "max_batch_size", None) is not None:
        raise InputError(f"--max-batch-size applies to --sampling truncated-poisson only; got --sampling {kind}")
    if kind != "random_allocation" and (getattr(args, "steps_per_epoch", None) is not None
                                        or getattr(args, "k", None) is not None):
        raise InputError(f"--steps-per-epoch and --k apply to --sampling random-allocation only; got --sampling {kind}")
    return acc.DPSGD(args.noise_multiplier, sampling, args.steps,
                     describe.parse_neighbouring(args.neighbouring, key="--neighbouring"), args.group_size)


def _random_allocation(args: argparse.Namespace) -> acc.RandomAllocation:
    """``--steps-per-epoch T [--k K]``, or ``--batch-size B --dataset-size N`` for t = N/B (B must divide N)."""
    if args.sample_rate is not None:
        raise InputError("--sample-rate applies to --sampling poisson only; --sampling random_allocation takes "
                         "--steps-per-epoch T (or --batch-size B --dataset-size N) and --k K")
    sized = (args.batch_size, args.dataset_size)
    t = args.steps_per_epoch
    if t is not None and any(v is not None for v in sized):
        raise InputError("--steps-per-epoch and --batch-size/--dataset-size both set the steps per epoch; give one")
    if t is None:
        if None in sized:
            raise InputError("--sampling random_allocation needs --steps-per-epoch T (or --batch-size B "
                             "--dataset-size N for t = N/B)")
        check.integer(1, None, **{"--batch-size": args.batch_size, "--dataset-size": args.dataset_size})
        if args.dataset_size % args.batch_size:
            raise InputError(f"--batch-size must divide --dataset-size for random allocation (t = N/B); got "
                             f"B={args.batch_size}, N={args.dataset_size}; give --steps-per-epoch T instead")
        t = args.dataset_size // args.batch_size
    check.integer(1, None, **{"--steps-per-epoch": t, "--k": 1 if args.k is None else args.k})
    k = 1 if args.k is None else args.k
    if k > t:
        raise InputError(f"--k must be in [1, --steps-per-epoch={t}]; got {k}")
    return describe.make_sampling("random_allocation", k=k, steps_per_epoch=t, key="--sampling")  # type: ignore[return-value]


def _truncated_poisson(args: argparse.Namespace) -> acc.TruncatedPoisson:
    """``--max-batch-size B --dataset-size N`` and ``--sample-rate Q`` (or ``--batch-size b`` for q = b/N)."""
    if getattr(args, "max_batch_size", None) is None or args.dataset_size is None:
        raise InputError("--sampling truncated_poisson needs --max-batch-size B and --dataset-size N (and "
                         "--sample-rate Q, or --batch-size b for q = b/N)")
    if (args.sample_rate is None) == (args.batch_size is None):
        raise InputError("--sampling truncated_poisson takes one of --sample-rate Q or --batch-size b (q = b/N); "
                         f"got {'both' if args.sample_rate is not None else 'neither'}")
    check.integer(1, None, **{"--dataset-size": args.dataset_size, "--max-batch-size": args.max_batch_size})
    if args.sample_rate is None:
        check.integer(1, None, **{"--batch-size": args.batch_size})
        rate = args.batch_size / args.dataset_size
    else:
        rate = args.sample_rate
    return describe.make_sampling("truncated_poisson", sample_rate=rate, max_batch_size=args.max_batch_size,  # type: ignore[return-value]
                                  dataset_size=args.dataset_size, key="--sampling")


def run(args: argparse.Namespace) -> int:
    spec = spec_from_args(args)
    if args.method is None:   # truncated Poisson, balls-in-bins: RDP is loose there, PLD is the tight one
        from accountants.pld.random_allocation import covers

        truncated = isinstance(spec, acc.DPSGD) and isinstance(spec.sampling, acc.TruncatedPoisson)
        args.method = "pld" if truncated or covers(spec) else "rdp"
    if not isinstance(spec, acc.DPSGD):
        return _run_event(args, spec)
    if isinstance(spec.sampling, acc.Shuffle):
        return _run_shuffle(args, spec)
    names = acc.methods() if args.method == "all" else [args.method]
    results: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    for name in names:
        reason = acc.get_method(name).unsupported(spec)
        if reason is not None and args.method == "all":
            skipped[name] = reason  # --method all reports every method that covers the spec
            continue
        try:
            if args.delta is not None:
                results[name] = _epsilon_bound(spec, args.delta, name).to_dict()
            else:
                results[name] = acc.delta(spec, args.epsilon, method=name).to_dict()
        except acc.UnsupportedError as e:
            if args.method != "all":
                raise
            skipped[name] = str(e)  # a method that hits one of its limits is skipped, with the reason
    if not results:
        raise InputError(
            "no accounting method covers this combination: " + "; ".join(f"{k}: {v}" for k, v in skipped.items())
        )
    if args.json:
        if len(names) == 1:
            out = {"format": JSON_FORMAT, "spec": spec.to_dict(), **results[names[0]]}
        else:
            out = {"format": JSON_FORMAT, "spec": spec.to_dict(), "methods": results, "unsupported": skipped}
        json.dump(out, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
        return 0
    print(f"DP-SGD: {describe.describe(spec)}")
    for name, r in results.items():
        if args.delta is not None:
            extra = f" (order {r['order']:g})" if r.get("order") is not None else ""
            lo = f", certified lower {fmt.lower(r['lower'])}" if r.get("lower") is not None else ""
            eps = fmt.upper(r["epsilon"])
            print(f"  {name:>4}: epsilon <= {eps} at delta = {r['delta']:g}{extra}{lo}  [upper bound]")
        else:
            extra = f" (order {r['order']:g})" if r.get("order") is not None else ""
            print(f"  {name:>4}: delta <= {fmt.upper(r['delta'])} at epsilon = {r['epsilon']:g}{extra}  [upper bound]")
        if r.get("theorem"):
            print(f"        by: {r['theorem']}")
    for name, why in skipped.items():
        print(f"  {name:>4}: not available for this run ({why})")
    return 0


def _epsilon_bound(spec: acc.DPSGD, delta: float, method: str) -> Any:
    """ε at δ; balls-in-bins also carries its certified lower end under either method (docs/sampling.md)."""
    from accountants.pld.random_allocation import covers

    if method in ("rdp", "pld") and covers(spec):
        from accountants.random_allocation import random_allocation_bounds

        return random_allocation_bounds(spec, delta, method=method)
    return acc.epsilon(spec, delta, method=method)


def _run_event(args: argparse.Namespace, spec: Any) -> int:
    """``--dp-event``: a composition (or a Laplace event) read from a dp_accounting JSON file."""
    from accountants.integrations import dp_accounting as dpi

    if args.delta is None:
        raise InputError("--dp-event reports epsilon: give --delta")
    names = acc.methods() if args.method == "all" else [args.method]
    results: dict[str, dict[str, Any]] = {}
    skipped: dict[str, str] = {}
    for name in names:
        try:
            results[name] = dpi.epsilon(spec, args.delta, method=name).to_dict()
        except acc.UnsupportedError as e:
            if args.method != "all":
                raise
            skipped[name] = str(e)
    words = acc.describe.describe(spec) if isinstance(spec, (acc.Composed, acc.Laplace)) else repr(spec)
    if args.json:
        out = {"format": JSON_FORMAT, "dp_event": args.dp_event, "spec": words, "methods": results,
               "unsupported": skipped}
        json.dump(out, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
        return 0
    print(f"dp_accounting event {args.dp_event}: {words}; neighbouring={args.neighbouring}")
    for name, r in results.items():
        lo = f", certified lower {fmt.lower(r['lower'])}" if r.get("lower") is not None else ""
        print(f"  {name:>4}: epsilon <= {fmt.upper(r['epsilon'])} at delta = {r['delta']:g}{lo}  [upper bound]")
    for name, why in skipped.items():
        print(f"  {name:>4}: not available for this run ({why})")
    return 0


def _shuffle_header(spec: acc.DPSGD) -> str:
    s = spec.sampling
    assert isinstance(s, acc.Shuffle)  # called for shuffled runs only
    return (f"DP-SGD: noise_multiplier={spec.noise_multiplier:g}, shuffled batches of {s.batch_size} of "
            f"{s.dataset_size} ({s.steps_per_epoch} steps per epoch), steps={spec.steps}, "
            f"neighbouring={spec.neighbouring.label}, group_size={spec.group_size}")


def _run_shuffle(args: argparse.Namespace, spec: acc.DPSGD) -> int:
    """``--sampling shuffle``: certified lower and sound upper ε, and the Poisson ε often quoted instead."""
    names = acc.methods() if args.method == "all" else [args.method]
    if args.delta is None:  # δ at ε: certified lower δ, upper δ, and the Poisson δ
        from accountants.shuffle import shuffle_lower_delta

        try:
            low: float | None = shuffle_lower_delta(spec, args.epsilon)
        except acc.UnsupportedError:
            low = None
        poisson = acc.DPSGD(spec.noise_multiplier, acc.Poisson(spec.sampling.rate), spec.steps, spec.neighbouring,
                            spec.group_size)
        ups = {n: (acc.delta(spec, args.epsilon, method=n), acc.delta(poisson, args.epsilon, method=n)) for n in names}
        for u, _ in ups.values():  # a certified lower δ above any upper δ is a bug, never output
            check_bracket(low, u.value, "delta")
        if args.json:
            out = {"format": JSON_FORMAT, "spec": spec.to_dict(), "epsilon": args.epsilon, "lower": low,
                   "methods": {n: {"upper": u.to_dict(), "poisson": p.to_dict()} for n, (u, p) in ups.items()}}
            json.dump(out, sys.stdout, sort_keys=True)
            sys.stdout.write("\n")
            return 0
        print(_shuffle_header(spec))
        if low is not None:
            print(f"  lower: delta >= {fmt.lower(low)} at epsilon = {args.epsilon:g}  [certified lower bound]")
        for n, (u, p) in ups.items():
            print(f"  {n:>4}: delta <= {fmt.upper(u.value)} at epsilon = {args.epsilon:g}  [upper bound]; "
                  f"{fmt.upper(p.value)} if it were Poisson sampled (NOT a bound for shuffled batches)")
        return 0
    bounds = {name: acc.shuffle_bounds(spec, args.delta, method=name) for name in names}
    lower = next(iter(bounds.values())).lower
    s = spec.sampling
    if args.json:
        out = {"format": JSON_FORMAT, "spec": spec.to_dict(), "delta": args.delta, "lower": lower,
               "methods": {k: {"upper": b.upper.to_dict(), "poisson": b.poisson.to_dict()} for k, b in bounds.items()}}
        json.dump(out, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
        return 0
    print(_shuffle_header(spec))
    if lower is not None:
        print(f"  lower: epsilon >= {fmt.lower(lower)} at delta = {args.delta:g}  [certified lower bound, "
              "Chua et al. 2024 construction]")
    for name, b in bounds.items():
        print(f"  {name:>4}: epsilon <= {fmt.upper(b.upper.value)} at delta = {args.delta:g}  [upper bound: "
              f"{acc.shuffle.shuffle_epochs(spec)} epochs, no amplification]")
    for name, b in bounds.items():
        print(f"  {name:>4}: epsilon = {fmt.upper(b.poisson.value)} if it were Poisson sampled at q = {s.rate:g} "
              "(NOT a bound for shuffled batches)")
    return 0
