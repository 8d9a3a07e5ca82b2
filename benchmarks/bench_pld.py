"""ε at δ = 1e-5 by PLD: dpaudit (torch) against dp_accounting and prv_accountant, same process.

Settings: Poisson add/remove, (q, σ, T) = (0.01, 1.0, 10³…10⁶) (issue 28's long compositions)
and (256/60000, 1.1, 14062) (the MNIST DP-SGD setting).

Matched accuracy: the bracket width |ε_upper − ε_lower| ≤ 0.01.
* dpaudit: ``pld_epsilon_bracket(spec, δ, eps_error=0.01)`` — certified [lower, upper].
* prv_accountant 0.2: ``PRVAccountant(eps_error=0.005, delta_error=δ/1000)`` — its certified bracket
  has width 2·eps_error = 0.01.
* dp_accounting 0.6: ``PLDAccountant(value_discretization_interval=vdi)`` (pessimistic) returns an
  upper value only, with no certified lower end; it is timed at vdi = 1e-3 (upper within ~0.009 of
  the truth at these settings) and 1e-4 (the library default). Its "width" is reported as
  upper − (our certified lower), a generous stand-in.

Usage::

    python benchmarks/bench_pld.py [--reps 3] [--device cpu|cuda] [--skip-peers] [--prv-max-steps 10000]

The machine's load average is printed before and after (``os.getloadavg``): quote it beside
every ratio. prv_accountant is skipped above ``--prv-max-steps`` (34 s at T = 10⁵, fails at 10⁶).

Timings are the minimum over ``--reps`` rounds after one warm-up call (wall clock); in every
round all methods run one after the other, so load on a shared machine hits them alike.
"""

from __future__ import annotations

import argparse
import os
import time

import accountants as acc
from accountants.pld import pld_epsilon_bracket

SETTINGS = [
    ("T1e3", 0.01, 1.0, 1000),
    ("T1e4", 0.01, 1.0, 10000),
    ("T1e5", 0.01, 1.0, 100_000),
    ("T1e6", 0.01, 1.0, 1_000_000),
    ("mnist", 256 / 60000, 1.1, 14062),
]
DELTA = 1e-5


def _interleaved(fns: dict, reps: int) -> dict:
    """Min wall time of each function over ``reps`` rounds, the functions interleaved in every
    round (a shared machine's load then hits all of them alike); one warm-up call each."""
    out = {name: (float("inf"), fn()) for name, fn in fns.items()}
    for _ in range(reps):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            value = fn()
            dt = time.perf_counter() - t0
            out[name] = (min(out[name][0], dt), value)
    return out


def _ours(q: float, sigma: float, steps: int, device: str):
    spec = acc.DPSGD(sigma, acc.Poisson(q), steps)
    b = pld_epsilon_bracket(spec, DELTA, eps_error=0.01, device=device)
    return b.lower, b.upper


def _prv(q: float, sigma: float, steps: int):
    from prv_accountant import PoissonSubsampledGaussianMechanism, PRVAccountant

    prv = PoissonSubsampledGaussianMechanism(noise_multiplier=sigma, sampling_probability=q)
    a = PRVAccountant(prvs=[prv], max_self_compositions=[steps], eps_error=0.005, delta_error=DELTA / 1000)
    lo, _, up = a.compute_epsilon(delta=DELTA, num_self_compositions=[steps])
    return lo, up


def _dpa(q: float, sigma: float, steps: int, vdi: float):
    import dp_accounting as dpa

    ev = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma)), steps)
    return dpa.pld.PLDAccountant(value_discretization_interval=vdi).compose(ev).get_epsilon(DELTA)


def _row(name: str, method: str, lower: str, upper: float, width: float, t: float, ratio: float) -> None:
    print(f"{name:7} {method:24} {lower} {upper:10.6f} {width:7.4f} {t:8.3f} {ratio:9.1f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--skip-peers", action="store_true")
    ap.add_argument("--prv-max-steps", type=int, default=10_000)
    ap.add_argument("--only", default=None, help="comma-separated setting names")
    args = ap.parse_args(argv)
    print(f"delta = {DELTA:g}; times are min over {args.reps} interleaved rounds (s); "
          f"load average {os.getloadavg()[0]:.2f}")
    header = "setting method                    eps_lower  eps_upper   width   time_s peer/ours"
    print(header)
    print("-" * len(header))
    for name, q, sigma, steps in SETTINGS:
        if args.only and name not in args.only.split(","):
            continue
        fns = {"ours": lambda q=q, s=sigma, t=steps: _ours(q, s, t, args.device)}
        if not args.skip_peers:
            if steps <= args.prv_max_steps:
                fns["prv"] = lambda q=q, s=sigma, t=steps: _prv(q, s, t)
            for vdi in (1e-3, 1e-4):
                fns[f"dpa{vdi:g}"] = lambda q=q, s=sigma, t=steps, v=vdi: _dpa(q, s, t, v)
        res = _interleaved(fns, args.reps)
        t_ours, (lo, up) = res["ours"]
        _row(name, f"dpaudit pld ({args.device})", f"{lo:10.6f}", up, up - lo, t_ours, 1.0)
        if args.skip_peers:
            continue
        if "prv" in res:
            t, (plo, pup) = res["prv"]
            _row("", "prv_accountant e=.005", f"{plo:10.6f}", pup, pup - plo, t, t / t_ours)
        for vdi in (1e-3, 1e-4):
            t, e = res[f"dpa{vdi:g}"]
            _row("", f"dp_accounting vdi={vdi:g}", f"{'(none)':>10}", e, e - lo, t, t / t_ours)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
