"""Random allocation: dpaudit's certified δ bracket against a Monte Carlo estimate of δ(ε) (issue 27).

For each setting, ε is fixed first (k = 1: dpaudit's PLD upper ε at the δ target, rounded to 3 decimals;
k > 1, where dpaudit has no amplified bound yet: a pilot Monte Carlo ε at the target from a separate seed,
rounded to 2 decimals), then ``accountants.random_allocation_mc`` estimates δ(ε) with its simultaneous
99.9 % intervals (Chernoff–Hoeffding, exact in level). The bracket holds when
certified lower δ ≤ MC upper end and MC lower end ≤ PLD upper δ. The MC ε(δ) interval (grid inversion)
is set beside dp_accounting PR #414's pinned ε bracket where the δ target equals the peer's δ.

δ targets are 1e-3 (1e6 draws per direction) and 1e-4 (4e6 draws): plain sampling's interval half-width is
about sqrt(2δ·log(4000)/n) + log(4000)/n, ≈ 1.5e-5 at n = 1e6, so δ = 1e-5 is not resolved by it. The
δ = 1e-5 rows (one epoch, t ≤ 10, "c" in the draws column) draw on the event {max noise coordinate beyond a
threshold} outside which every summand is 0, and multiply by its probability (closed form): same estimand,
an interval 10–100× narrower where that event is rare (small t, small σ).

    PYTHONPATH=. python benchmarks/bench_random_allocation_mc.py [--write tests/data/random_allocation_mc.json]
        [--quick]   # --quick: 3 settings (one conditioned), 1e5 draws (seconds)

Runtime: ~60 s per 1e9 normal draws per direction on one core (k = 1); about 10–15 minutes in all.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import accountants as acc  # noqa: E402
from accountants.pld.random_allocation import random_allocation_pld_delta, random_allocation_pld_epsilon  # noqa: E402
from accountants.random_allocation import random_allocation_lower_delta  # noqa: E402
from accountants.random_allocation_mc import (  # noqa: E402
    delta_from_losses,
    draw_losses,
    epsilon_from_losses,
    random_allocation_mc_epsilon,
)
from tests.accountants.test_random_allocation import PEER_PR414  # noqa: E402

LEVEL = 0.999
FORMAT = "dpaudit-random-allocation-mc/1"
COMMAND = "PYTHONPATH=. python benchmarks/bench_random_allocation_mc.py --write tests/data/random_allocation_mc.json"

# (σ, k, t, steps, δ target, draws per direction, conditioned): "conditioned" rows draw on the max event
# from ε − 0.25 (one whole epoch of k = 1 only; accountants.random_allocation_mc.privacy_loss_samples)
SETTINGS: list[tuple[float, int, int, int, float, int, bool]] = (
    [(s, 1, t, t * e, 1e-3, 1_000_000, False) for s, t, e, *_ in PEER_PR414]
    + [(s, 1, t, t * e, 1e-4, 4_000_000, False) for s, t, e in
       [(1.0, 2, 1), (2.0, 2, 3), (1.0, 5, 1), (1.0, 10, 1), (0.7, 10, 3)]]
    + [(s, 1, t, t, 1e-5, 1_000_000, True) for s, t in
       [(1.0, 2), (0.7, 2), (1.0, 3), (0.7, 3), (1.0, 5), (0.7, 5), (0.5, 5), (0.5, 10)]]
    + [(1.0, 1, 10, 25, 1e-3, 1_000_000, False), (0.8, 1, 20, 50, 1e-3, 1_000_000, False)]  # partial epochs
    + [(1.0, 2, 4, 4, 1e-3, 1_000_000, False), (1.0, 2, 10, 30, 1e-3, 1_000_000, False),
       (1.5, 3, 10, 20, 1e-3, 1_000_000, False), (0.8, 2, 5, 12, 1e-3, 1_000_000, False),
       (2.0, 3, 20, 100, 1e-3, 1_000_000, False)]
)
CONDITION_MARGIN = 0.25


def choose_epsilon(spec: acc.DPSGD, target: float, seed: int) -> float:
    if spec.sampling.k == 1:
        return round(random_allocation_pld_epsilon(spec, target), 3)
    return round(random_allocation_mc_epsilon(spec, target, samples=100_000, seed=seed + 10_000).estimate, 2)


def peer_bracket(sigma: float, t: int, steps: int, target: float) -> tuple[float, float] | None:
    for s, tt, e, d, lo, hi in PEER_PR414:
        if (s, tt, tt * e, d) == (sigma, t, steps, target):
            return lo, hi
    return None


def write(path: Path, records: list[dict]) -> None:
    path.write_text(json.dumps({
        "format": FORMAT, "command": COMMAND, "level": LEVEL,
        "generated": datetime.date.today().isoformat(), "torch": torch.__version__,
        "note": "Monte Carlo estimates (not bounds) of delta(epsilon) of RandomAllocation(k, t) add/remove "
                "DP-SGD, accountants/random_allocation_mc.py: remove, add and delta = max hold simultaneously "
                "at `level` (Chernoff-Hoeffding); epsilon_at_target inverts them on a fixed grid "
                "(0..20, 4001 points). Streams: seed (P, remove) and seed + 1 (Q, add), CPU generator; "
                "condition_from: draws on the max event from that epsilon, scaled by remove_mass / add_mass.",
        "records": records}, indent=1) + "\n")


def run(settings: list, quick: bool, out: Path | None) -> tuple[list[dict], list[list[str]]]:
    records, rows = [], []
    for i, (sigma, k, t, steps, target, n, cond) in enumerate(settings):
        n = 100_000 if quick else n
        seed = 27_000 + 2 * i
        spec = acc.DPSGD(sigma, acc.RandomAllocation(k, t), steps)
        eps = choose_epsilon(spec, target, seed)
        t0 = time.time()
        floor = max(0.0, eps - CONDITION_MARGIN) if cond else None
        losses = draw_losses(spec, n, seed=seed, condition_from=floor)
        mc = delta_from_losses(losses, eps, level=LEVEL)
        mc_eps = epsilon_from_losses(losses, target, level=LEVEL)
        t_mc = time.time() - t0
        low = up = None
        if k == 1:
            low, up = random_allocation_lower_delta(spec, eps), random_allocation_pld_delta(spec, eps)
        holds = None if low is None or up is None else (low <= mc.delta.upper and mc.delta.lower <= up)
        peer = peer_bracket(sigma, t, steps, target) if k == 1 else None
        records.append({
            "sigma": sigma, "k": k, "t": t, "steps": steps, "delta_target": target, "epsilon": eps,
            "samples": n, "seed": seed, "device": "cpu", "condition_from": floor,
            "remove_mass": losses.remove_mass, "add_mass": losses.add_mass,
            "remove": vars(mc.remove), "add": vars(mc.add), "delta": vars(mc.delta),
            "epsilon_at_target": {"estimate": mc_eps.estimate, "lower": mc_eps.lower, "upper": mc_eps.upper},
            "seconds": round(t_mc, 2),
        })
        d = mc.delta
        rows.append([f"{sigma:g}", str(k), str(t), str(steps), f"{target:g}", f"{eps:.3f}",
                     f"{n / 1e6:g}M" + (" c" if cond else ""),
                     f"{d.estimate:.3e} [{d.lower:.3e}, {d.upper:.3e}]",
                     "—" if low is None else f"{low:.3e}", "—" if up is None else f"{up:.3e}",
                     f"{mc_eps.estimate:.3f} [{mc_eps.lower:.3f}, {mc_eps.upper:.3f}]",
                     "—" if peer is None else f"[{peer[0]:.4f}, {peer[1]:.4f}]",
                     "—" if holds is None else ("yes" if holds else "NO"), f"{t_mc:.1f}"])
        print(" | ".join(rows[-1]), flush=True)
        if out:
            write(out, records)  # after every row, so an interrupted run keeps what it measured
    return records, rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", type=Path, help="write the MC records (JSON) here")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(1)
    settings = [*SETTINGS[:2], SETTINGS[27]] if a.quick else SETTINGS
    header = ["σ", "k", "t", "steps", "δ target", "ε", "draws", "MC δ(ε) [99.9 % CI]", "certified lower δ",
              "PLD upper δ", "MC ε(δ target) [99.9 % CI]", "PR #414 ε", "holds", "MC s"]
    print(" | ".join(header))
    t0, load0 = time.time(), os.getloadavg()
    _, rows = run(settings, a.quick, a.write)
    load1 = os.getloadavg()
    print("\n| " + " | ".join(header) + " |\n|" + "---|" * len(header))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    checked = [r for r in rows if r[-2] != "—"]
    print(f"\n{len(rows)} settings, {len(checked)} with a certified bracket, held on "
          f"{sum(r[-2] == 'yes' for r in checked)}; total {time.time() - t0:.0f} s; "
          f"load average {load0[0]:.2f} → {load1[0]:.2f}")
    if a.write:
        print(f"wrote {a.write}")


if __name__ == "__main__":
    main()
