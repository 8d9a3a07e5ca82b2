"""Balls-in-bins: dpaudit's bracket [certified lower, RDP upper] against dp_accounting's random-allocation PLD.

The peer is dp_accounting's ``pld/random_allocation`` (Feldman & Shenfeld 2026, arXiv 2602.17284; pull
request #414, commit 926b243 of google/differential-privacy), which is not in a released dp_accounting
yet. Give its package directory with ``--peer-path`` (a folder holding a ``dp_accounting`` package
that includes ``pld/random_allocation``); without it the script prints dpaudit's side only. For each
setting the peer's upper (``DOMINATES``) and lower (``IS_DOMINATED``) PLD ε must lie in dpaudit's
bracket's reach: dpaudit lower ≤ peer upper and peer lower ≤ dpaudit upper. The last column is the
PLD ε of Poisson sampling at q = 1/t for the same steps (a per-step approximation some libraries
use for balls-in-bins without proof, issue 27 §4): "under" marks a setting where dpaudit's certified
lower bound exceeds it, i.e. where that approximation under-reports. Usage::

    PYTHONPATH=. python benchmarks/bench_random_allocation_peer.py [--peer-path DIR]

Runtime: dpaudit ~1 s per setting; the peer 10–80 s per setting (value discretisation 1e-3) on 2 cores.
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
from accountants.random_allocation import random_allocation_lower_epsilon  # noqa: E402

# (σ, t, epochs, δ): k = 1 throughout (the peer's Gaussian path)
SETTINGS = [
    (1.0, 2, 1, 1e-5), (0.7, 2, 1, 1e-3), (2.0, 2, 3, 1e-5), (1.0, 5, 1, 1e-5), (0.7, 5, 3, 1e-3),
    (2.0, 5, 10, 1e-5), (1.0, 10, 1, 1e-5), (1.0, 10, 10, 1e-5), (0.7, 10, 3, 1e-3), (2.0, 10, 3, 1e-5),
    (1.0, 20, 5, 1e-5), (1.5, 20, 1, 1e-3), (0.8, 20, 10, 1e-5), (1.0, 50, 1, 1e-5), (2.0, 50, 10, 1e-5),
    (1.0, 50, 3, 1e-3), (1.0, 100, 1, 1e-5), (1.0, 100, 10, 1e-5), (2.0, 100, 3, 1e-5), (0.8, 100, 2, 1e-3),
    (1.0, 200, 2, 1e-5), (3.0, 10, 20, 1e-5),
]


def peer_bracket(sigma: float, t: int, epochs: int, delta: float) -> tuple[float, float]:
    """(lower, upper) ε of the peer's random-allocation PLD at value discretisation 1e-3."""
    from dp_accounting.pld.random_allocation import api, definitions

    params = definitions.PrivacyParams(sigma=sigma, num_steps=t, num_selected=1, num_epochs=epochs)
    cfg = definitions.AllocationSchemeConfig(value_discretization_interval=1e-3)
    out = []
    for bound in (definitions.BoundType.IS_DOMINATED, definitions.BoundType.DOMINATES):
        out.append(api.gaussian_allocation_pld(params, cfg, bound_type=bound).get_epsilon_for_delta(delta))
    return out[0], out[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--peer-path", help="folder holding a dp_accounting package with pld/random_allocation")
    a = ap.parse_args()
    if a.peer_path:
        sys.path.insert(0, a.peer_path)
    bad = 0
    start = time.perf_counter()
    print("| σ | t | epochs | δ | dpaudit lower | dpaudit upper (RDP) | peer PLD lower | peer PLD upper "
          "| upper / peer | Poisson q = 1/t (PLD) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    under = 0
    for sigma, t, epochs, delta in SETTINGS:
        spec = acc.DPSGD(sigma, acc.RandomAllocation(1, t), t * epochs)
        up = acc.epsilon(spec, delta).value
        lo = random_allocation_lower_epsilon(spec, delta)
        row = f"| {sigma:g} | {t} | {epochs} | {delta:g} | {lo:.4f} | {up:.4f} |"
        if a.peer_path:
            p_lo, p_up = peer_bracket(sigma, t, epochs, delta)
            bad += not (lo <= p_up and p_lo <= up)
            row += f" {p_lo:.4f} | {p_up:.4f} | {up / p_up:.3f} |"
        else:
            row += " | | |"
        approx = acc.epsilon(acc.DPSGD(sigma, acc.Poisson(1 / t), t * epochs), delta, method="pld").value
        under += lo > approx
        row += f" {approx:.4f}{' under' if lo > approx else ''} |"
        print(row)
    load = os.getloadavg()
    print(f"\n{len(SETTINGS)} settings, {bad} brackets inconsistent with the peer, {under} where the Poisson "
          "q = 1/t approximation is below the certified lower bound; "
          f"{time.perf_counter() - start:.0f} s; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")


if __name__ == "__main__":
    main()
