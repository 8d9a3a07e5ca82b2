"""Shuffle scan (issue 22 §1): the certified lower ε never exceeds the proven upper ε, nor the exact ε.

For 120 seeded random configurations (σ log-uniform in [0.3, 3], b in 1..32, L = ⌊n/b⌋ in 1..100,
n mod b ≠ 0 for even indices and = 0 for odd ones, T up to four epochs, δ log-uniform in [1e-8, 1e-3],
add/remove or replace-one):

* ``lower > upper``: the certified lower ε (``shuffle_lower_epsilon``, Chua et al. pair) against the
  smaller of the PLD and RDP upper ε of the same run (full-batch Gaussian epochs). Must be 0.
* ``lower > exact``: the same run cut to one epoch (T ↦ min(T, L)), whose exact δ(ε) of the max
  statistic is known in mpmath (``tests/accountants/test_shuffle.py::exact_max_delta``, best pair and
  order): counted when that exact δ at the certified lower ε is not above δ (then the exact ε is not
  above the lower end). Must be 0.

Before the fix (float bin masses, git 1371d31^) the same scan is what issue 22 describes. Usage::

    PYTHONPATH=. python benchmarks/bench_shuffle_scan.py [--configs 120] [--seed 22]

Runtime: about 3–6 minutes on 2 cores (mostly the mpmath oracle).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import accountants as acc  # noqa: E402
from accountants.shuffle import shuffle_lower_epsilon  # noqa: E402
from tests.accountants.test_shuffle import _exact_max_pairs  # noqa: E402


def configs(count: int, seed: int) -> list[tuple[float, int, int, int, float, str]]:
    """Seeded (σ, b, n, T, δ, relation) over the ranges of the module doc."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        sigma = float(np.exp(rng.uniform(math.log(0.3), math.log(3.0))))
        b = int(rng.integers(2, 33)) if i % 2 == 0 else int(rng.integers(1, 33))
        batches = int(rng.integers(1, 101))
        n = b * batches + (int(rng.integers(1, b)) if i % 2 == 0 else 0)
        steps = int(rng.integers(1, 4 * batches + 1))
        delta = float(10 ** rng.uniform(-8, -3))
        out.append((sigma, b, n, steps, delta, ("add_remove", "replace_one")[int(rng.integers(2))]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--configs", type=int, default=120)
    ap.add_argument("--seed", type=int, default=22)
    args = ap.parse_args()
    t0 = time.time()
    above_upper, above_exact, gaps = [], [], []
    for cfg in configs(args.configs, args.seed):
        sigma, b, n, steps, delta, relation = cfg
        spec = acc.DPSGD(sigma, acc.Shuffle(b, n), steps, relation)
        lower = shuffle_lower_epsilon(spec, delta)
        upper = min(acc.epsilon(spec, delta, method="pld").value, acc.epsilon(spec, delta).value)
        gaps.append(upper - lower)
        if lower > upper:
            above_upper.append((cfg, lower, upper))
        one = acc.DPSGD(sigma, acc.Shuffle(b, n), min(steps, n // b), relation)
        lower1 = shuffle_lower_epsilon(one, delta)
        if lower1 > 0 and not _exact_max_pairs(one, lower1, delta) > delta:
            above_exact.append((cfg, lower1))
    odd = sum(1 for c in configs(args.configs, args.seed) if c[2] % c[1])
    print(f"{args.configs} configurations (seed {args.seed}; n mod b != 0 in {odd}), {time.time() - t0:.0f} s")
    print(f"certified lower > proven upper: {len(above_upper)}")
    for cfg, lo, up in above_upper:
        print(f"   {cfg}: lower {lo:.6g} > upper {up:.6g}")
    print(f"certified lower > exact (one epoch, mpmath): {len(above_exact)}")
    for cfg, lo in above_exact:
        print(f"   {cfg}: lower {lo:.6g}")
    q = np.quantile(gaps, [0.0, 0.5, 0.9, 1.0])
    print(f"upper − lower: min {q[0]:.4g}, median {q[1]:.4g}, 90 % {q[2]:.4g}, max {q[3]:.4g}")


if __name__ == "__main__":
    main()
