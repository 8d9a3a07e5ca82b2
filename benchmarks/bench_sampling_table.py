"""ε of every sampling scheme dpaudit accounts, at one common setting (docs/sampling.md, issue 27).

Setting (issue 27): n = 10,000 records, batches of b = 100 (expected or exact), so t = n/b = 100 steps per
epoch, σ = 1, T = 1,000 steps (10 epochs), δ = 1e-5, add/remove. Every row is a sound upper bound
(RDP, and the tight PLD where that method covers the scheme); a "lower" column is a certified lower
bound where dpaudit has one. Usage::

    PYTHONPATH=. python benchmarks/bench_sampling_table.py [--sigma 1] [--steps 1000] [--batch 100] [--n 10000]
        [--max-batch 120,100]

Truncated Poisson rows (one per ``--max-batch`` B): q = b/n, cut at B; RDP and PLD of one labelled pair, the
certified lower end from the realised pair (docs/dominating-pairs.md §4c). The last two rows put random allocation
with k = 2 (each record in 2 of the same t steps: expected batch 2b) beside Poisson at q = 2b/n.

Runtime: about 1–3 minutes on 2 shared cores (mostly the PLD rows and the two certified lower bounds).
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
from accountants.shuffle import shuffle_lower_epsilon  # noqa: E402


def _eps(spec: acc.DPSGD, delta: float, method: str) -> str:
    if not acc.supports(spec, method):
        return "—"
    return f"{acc.epsilon(spec, delta, method=method).value:.3f}"


def _pld_lower(spec: acc.DPSGD, delta: float) -> float:
    """The PLD method's certified lower end (truncated Poisson: the realised pair's)."""
    return float(acc.epsilon(spec, delta, method="pld").lower)


def rows(sigma: float, steps: int, b: int, n: int, delta: float,
         max_batches: tuple[int, ...] = (120, 100)) -> list[tuple[str, str, str, str, str]]:
    """(scheme, dpaudit description, RDP ε, PLD ε, certified lower ε) per sampling scheme."""
    t = n // b
    specs = [
        ("Poisson q = b/n", acc.DPSGD(sigma, acc.Poisson(b / n), steps), None),
        ("fixed-size, without replacement", acc.DPSGD(sigma, acc.FixedSize(b, n), steps), None),
        ("fixed-size, with replacement", acc.DPSGD(sigma, acc.FixedSize(b, n, replace=True), steps), None),
        ("shuffle (once per epoch)", acc.DPSGD(sigma, acc.Shuffle(b, n), steps), shuffle_lower_epsilon),
        ("random allocation k = 1 (balls-in-bins)", acc.DPSGD(sigma, acc.RandomAllocation(1, t), steps),
         random_allocation_lower_epsilon),
        *((f"truncated Poisson q = b/n, at most {m}", acc.DPSGD(sigma, acc.TruncatedPoisson(b / n, m, n), steps),
           _pld_lower) for m in max_batches),
        # k = 2: the same t steps per epoch, each record in 2 of them (expected batch 2b), and its Poisson analogue
        ("random allocation k = 2 of the same t (expected batch 2b)",
         acc.DPSGD(sigma, acc.RandomAllocation(2, t), steps), random_allocation_lower_epsilon),
        ("Poisson q = 2b/n (k = 2's Poisson analogue)",
         acc.DPSGD(sigma, acc.Poisson(min(1.0, 2 * b / n)), steps), None),
    ]
    out = []
    for name, spec, lower in specs:
        low = f"{lower(spec, delta):.3f}" if lower is not None else "—"
        words = acc.describe.describe(spec.sampling)
        out.append((name, words, _eps(spec, delta, "rdp"), _eps(spec, delta, "pld"), low))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sigma", type=float, default=1.0)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--max-batch", default="120,100", help="truncated Poisson rows: comma-separated B")
    a = ap.parse_args()
    start = time.perf_counter()
    table = rows(a.sigma, a.steps, a.batch, a.n, a.delta, tuple(int(x) for x in a.max_batch.split(",") if x))
    print(f"σ = {a.sigma:g}, b = {a.batch}, n = {a.n}, T = {a.steps}, δ = {a.delta:g}, add/remove\n")
    print("| scheme | dpaudit sampling | ε upper (RDP) | ε upper (PLD) | ε certified lower |")
    print("|---|---|---|---|---|")
    for r in table:
        print("| " + " | ".join(r) + " |")
    load = os.getloadavg()
    print(f"\n{time.perf_counter() - start:.0f} s; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")


if __name__ == "__main__":
    main()
