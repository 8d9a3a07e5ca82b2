"""Balls-in-bins by PLD: dpaudit's certified PLD upper bound beside Poisson, RDP, the lower bounds, and the reference.

Part 1 (always): at one setting (default issue 27's: b = 100, n = 10,000 so t = 100, σ = 1, 1,000 steps,
δ = 1e-5) the ε of Poisson sampling at q = b/n (PLD), random allocation by RDP, by PLD (upper), its certified
lower bound (realised pair, max statistic), and shuffling's certified lower bound.

Part 2 (``--ref-path DIR``): Feldman & Shenfeld's own accountant (the package ``PLD_accounting`` of
github.com/moshenfeld/PLD_accounting; DIR holds that package, with numba and dp_accounting importable) on
the settings below, in the same process: its DOMINATES and IS_DOMINATED ε at ``--ref-discretisation``
(default 1e-2, its default) with the default GEOM convolution, dpaudit's PLD upper ε, and the time per call
of each. Usage::

    PYTHONPATH=. python benchmarks/bench_random_allocation_pld.py [--ref-path DIR] [--ref-discretisation 1e-2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import accountants as acc  # noqa: E402
from accountants.pld.random_allocation import random_allocation_pld_epsilon  # noqa: E402
from accountants.random_allocation import random_allocation_lower_epsilon  # noqa: E402
from accountants.shuffle import shuffle_lower_epsilon  # noqa: E402

# (σ, t, epochs, δ), k = 1
SETTINGS = [
    (1.0, 2, 1, 1e-5), (2.0, 2, 3, 1e-5), (1.0, 5, 1, 1e-5), (0.7, 5, 3, 1e-3), (1.0, 10, 1, 1e-5),
    (2.0, 10, 3, 1e-5), (1.5, 20, 1, 1e-3), (1.0, 20, 5, 1e-5), (1.0, 50, 1, 1e-5), (2.0, 100, 3, 1e-5),
    (1.0, 100, 1, 1e-5),
]  # the issue's 10 epochs of t = 100 took the reference > 12 min per bound here: left out


def issue_table(sigma: float, batch: int, n: int, steps: int, delta: float) -> None:
    t = n // batch
    rows = []
    start = time.perf_counter()
    poisson = acc.DPSGD(sigma, acc.Poisson(batch / n), steps)
    ra = acc.DPSGD(sigma, acc.RandomAllocation(1, t), steps)
    rows.append(("Poisson q = b/n, PLD upper", acc.epsilon(poisson, delta, method="pld").value))
    rows.append(("random allocation, RDP upper", acc.epsilon(ra, delta).value))
    t0 = time.perf_counter()
    rows.append(("random allocation, PLD upper", random_allocation_pld_epsilon(ra, delta)))
    t_pld = time.perf_counter() - t0
    rows.append(("random allocation, certified lower", random_allocation_lower_epsilon(ra, delta)))
    rows.append(("shuffle, certified lower",
                 shuffle_lower_epsilon(acc.DPSGD(sigma, acc.Shuffle(batch, n), steps), delta)))
    print(f"σ = {sigma:g}, b = {batch}, n = {n} (t = {t}), {steps} steps, δ = {delta:g}, add/remove\n")
    print("| scheme | ε |")
    print("|---|---|")
    for name, v in rows:
        print(f"| {name} | {v:.4f} |")
    load = os.getloadavg()
    print(f"\n{time.perf_counter() - start:.0f} s (PLD upper alone {t_pld:.1f} s); load average "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}\n")


def reference(ld: float) -> None:
    from PLD_accounting.random_allocation_api import gaussian_allocation_epsilon_configurable
    from PLD_accounting.types import AllocationSchemeConfig, BoundType, PrivacyParams

    cfg = AllocationSchemeConfig(loss_discretization=ld)
    print("| σ | t | epochs | δ | reference DOMINATES | reference IS_DOMINATED | dpaudit PLD upper | "
          "reference s (both) | dpaudit s | time ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    total_ref = total_ours = 0.0
    for sigma, t, epochs, delta in SETTINGS:
        p = PrivacyParams(sigma=sigma, num_steps=t, num_selected=1, num_epochs=epochs, delta=delta)
        t0 = time.perf_counter()
        up = gaussian_allocation_epsilon_configurable(p, cfg, BoundType.DOMINATES)
        lo = gaussian_allocation_epsilon_configurable(p, cfg, BoundType.IS_DOMINATED)
        t_ref = time.perf_counter() - t0
        t0 = time.perf_counter()
        ours = random_allocation_pld_epsilon(acc.DPSGD(sigma, acc.RandomAllocation(1, t), t * epochs), delta)
        t_ours = time.perf_counter() - t0
        total_ref += t_ref
        total_ours += t_ours
        print(f"| {sigma:g} | {t} | {epochs} | {delta:g} | {up:.5f} | {lo:.5f} | {ours:.5f} | {t_ref:.1f} | "
              f"{t_ours:.1f} | {t_ref / t_ours:.2f} |", flush=True)
    load = os.getloadavg()
    print(f"\ntotal: reference {total_ref:.0f} s, dpaudit {total_ours:.0f} s; load average "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sigma", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--ref-path", help="folder holding Feldman & Shenfeld's PLD_accounting package")
    ap.add_argument("--ref-discretisation", type=float, default=1e-2)
    a = ap.parse_args()
    issue_table(a.sigma, a.batch, a.n, a.steps, a.delta)
    if a.ref_path:
        sys.path.insert(0, a.ref_path)
        reference(a.ref_discretisation)


if __name__ == "__main__":
    main()
