"""Is balls-in-bins "exactly Poisson at q = 1/t"? dpaudit's certified lower bound against that approximation.

JetBrains-Research/opaque (commit 2a2c5de9, ``packages/opaque-accounting/src/amplification/balls_in_bins/mod.rs``
lines 6-8, and the docstring of ``balls_in_bins_gaussian_pld`` in ``opaque_accounting.pyi``) accounts
balls-in-bins with independent Gaussian noise as the Poisson-subsampled Gaussian at q = 1/t composed
t·epochs times ("a conservative Poisson per-step approximation"; "reduces exactly to Poisson"). For
every (σ, t, epochs, δ) of a grid this script computes

* ``lower``: dpaudit's certified lower bound on ε(δ) of balls-in-bins, RandomAllocation(1, t), T = t·epochs
  (:func:`accountants.random_allocation.random_allocation_lower_epsilon`; the true ε is above it);
* ``poisson``: dpaudit's PLD upper bound on the ε(δ) of Poisson sampling at q = 1/t for the same T steps
  (at or above the approximation's exact value).

``lower > poisson`` proves the approximation under-reports there: the true balls-in-bins ε exceeds
the Poisson ε whatever the approximation's numerical precision. Where ``lower <= poisson`` nothing
is proved either way (the lower bound discards information: it is a max statistic per epoch).

Usage::

    PYTHONPATH=. python benchmarks/bench_poisson_approx.py [--quick]

Prints every setting where the approximation is refuted and, per δ, how many settings were checked
and the largest ratio lower/poisson. Measured times depend on the machine's load (printed).
"""

from __future__ import annotations

import argparse
import itertools
import os
import time

import accountants as acc
from accountants.random_allocation import random_allocation_lower_epsilons

SIGMAS = (0.2, 0.3, 0.5, 0.7, 1.0, 2.0, 4.0)
STEPS_PER_EPOCH = (2, 3, 5, 10, 50, 100, 1000)
EPOCHS = (1, 2, 5, 20)
DELTAS = (1e-6, 1e-5, 1e-3, 1e-2, 0.1, 0.2, 0.3, 0.5)


def compare(sigma: float, t: int, epochs: int, deltas: tuple[float, ...]) -> list[tuple[float, float]]:
    """Per δ: (certified lower ε of balls-in-bins, PLD upper ε of Poisson at q = 1/t), same σ and T = t·epochs."""
    steps = t * epochs
    lower = random_allocation_lower_epsilons(acc.DPSGD(sigma, acc.RandomAllocation(1, t), steps), list(deltas))
    poisson = acc.DPSGD(sigma, acc.Poisson(1.0 / t), steps)
    return [(float(lo), float(acc.epsilon(poisson, d, method="pld").value))
            for lo, d in zip(lower, deltas, strict=True)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="σ ≤ 0.5, t ≤ 10, epochs ≤ 2 only")
    args = ap.parse_args()
    sig, ts, eps = SIGMAS, STEPS_PER_EPOCH, EPOCHS
    if args.quick:
        sig, ts, eps = [s for s in sig if s <= 0.5], [t for t in ts if t <= 10], [e for e in eps if e <= 2]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; grid σ {list(sig)}, t {list(ts)}, "
          f"epochs {list(eps)}, δ {list(DELTAS)}")
    t0 = time.perf_counter()
    refuted, per_delta = [], {d: [0, 0.0, None] for d in DELTAS}
    for sigma, t, e in itertools.product(sig, ts, eps):
        for d, (lower, poisson) in zip(DELTAS, compare(sigma, t, e, DELTAS), strict=True):
            per_delta[d][0] += 1
            if poisson > 0 and lower / poisson > per_delta[d][1]:
                per_delta[d][1:] = [lower / poisson, (sigma, t, e)]
            if lower > poisson:
                refuted.append((sigma, t, e, d, lower, poisson))
    print(f"{'σ':>5} {'t':>5} {'epochs':>6} {'δ':>7} {'lower':>9} {'poisson':>9}   (certified lower > Poisson ε)")
    for sigma, t, e, d, lower, poisson in refuted:
        print(f"{sigma:5g} {t:5d} {e:6d} {d:7g} {lower:9.4f} {poisson:9.4f}")
    print(f"{'δ':>7} {'settings':>8} {'refuted':>7} {'max lower/poisson':>17}  at (σ, t, epochs)")
    for d, (n, worst, where) in per_delta.items():
        print(f"{d:7g} {n:8d} {sum(r[3] == d for r in refuted):7d} {worst:17.3f}  {where}")
    print(f"{len(refuted)} of {sum(v[0] for v in per_delta.values())} settings refute the approximation; "
          f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
