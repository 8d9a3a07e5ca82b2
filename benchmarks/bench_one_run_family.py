"""Coverage of the order statistic under the composite SGM null (audit.statistics.one_run_family), on exact outcomes.

Exact one-run outcomes of the T-fold Poisson-subsampled Gaussian (m independent canaries, each in with
probability ½; an included canary is drawn at each of T steps with probability q and shifted by μ; every
observation has N(0, 1) noise), scored by the exact log likelihood ratio (the optimal decoder's score).

Two measurements per (q, μ, T, m):

* ``rejected``: over ``--reps`` runs, the fraction in which the TRUE member (q, μ) is rejected by some guess count
  of the default grid (each at s / #grid). ε_lower > ε_true is impossible unless the true member is rejected
  (ε_lower is an infimum over the members not rejected), so this fraction bounds the violation rate from above;
  it must be ≤ α = s (its Clopper–Pearson 95 % upper limit is printed). On null outcomes (μ = 0) the true member
  is the identical pair.
* ``ε_lower / ε_true`` and ``ε_lower ≤ ε_true`` over ``--full-reps`` complete runs of
  :func:`audit.statistics.epsilon_one_run_order_sgm_family` (seconds each), with ε_true the upper end of the
  certified PLD bracket (accountants.pld, width ≤ 1e-3).

Usage::

    PYTHONPATH=. python benchmarks/bench_one_run_family.py [--reps 1000] [--full-reps 10] [--m 1000 10000]
        [--settings 0 1 2 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np
import scipy.stats

import accountants as acc
from accountants.pld.accountant import pld_epsilon_bracket
from audit import statistics as st
from audit.statistics.one_run import _guesses
from audit.statistics.one_run_order import _two_sided

SETTINGS = [(1.0, 0.5, 2), (0.5, 0.5, 10), (0.2, 1.0, 5), (0.5, 0.0, 3)]  # (q, μ, T); μ = 0: null outcomes
DELTA, S = 1e-5, 0.05


def outcomes(q: float, mu: float, steps: int, m: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    truth = rng.random(m) < 0.5
    x = rng.standard_normal((m, steps)) + mu * ((rng.random((m, steps)) < q) & truth[:, None])
    return np.log1p(q * np.expm1(mu * x - mu * mu / 2)).sum(1), truth


def true_rejected(q: float, mu: float, steps: int, scores: np.ndarray, truth: np.ndarray) -> bool:
    m = scores.size
    conf, correct = _two_sided(scores, truth, None)
    _, grid, r_eff, correct_at = _guesses(conf, correct, st.one_run_order_guess_grid(m))
    null = st.ComposedSubsampledGaussianNull(q, steps)
    return any(st.one_run_order_p_value(null, mu, m, int(r), int(r) - int(correct_at[r - 1])) < S / grid.size
               for r in np.unique(r_eff[r_eff > 0]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--full-reps", type=int, default=10)
    ap.add_argument("--m", type=int, nargs="+", default=[1000, 10_000])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--settings", type=int, nargs="+", default=list(range(len(SETTINGS))),
                    help="indices into SETTINGS (default: all)")
    a = ap.parse_args()
    print(f"load average {os.getloadavg()}; δ = {DELTA}, s = {S}, exact LLR scores, seed {a.seed}")
    print(f"{'q':>5} {'μ':>5} {'T':>3} {'m':>6} {'ε_true':>7} {'rejected':>9} {'CP95 up':>8} "
          f"{'full runs':>9} {'ε_lo≤ε_true':>11} {'mean ε_lo/ε_true':>16} {'s/run':>6}")
    rng = np.random.default_rng(a.seed)
    for q, mu, steps in [SETTINGS[i] for i in a.settings]:
        truth_eps = 0.0 if mu == 0 else pld_epsilon_bracket(acc.DPSGD(1 / mu, acc.Poisson(q), steps), DELTA,
                                                            eps_error=1e-3).upper
        for m in a.m:
            hits = sum(true_rejected(q, mu, steps, *outcomes(q, mu, steps, m, rng)) for _ in range(a.reps))
            up = scipy.stats.beta.ppf(0.95, hits + 1, a.reps - hits) if hits < a.reps else 1.0
            rate = hits / a.reps if a.reps else math.nan
            vals, t0 = [], time.perf_counter()
            for _ in range(a.full_reps):
                sc, tr = outcomes(q, mu, steps, m, rng)
                vals.append(st.epsilon_one_run_order_sgm_family(sc, tr, steps=steps, delta=DELTA,
                                                                significance=S).value)
            per = (time.perf_counter() - t0) / max(a.full_reps, 1)
            ok = sum(v <= truth_eps + 1e-12 for v in vals)
            ratio = float(np.mean(vals) / truth_eps) if vals and truth_eps > 0 else math.nan
            print(f"{q:5.2f} {mu:5.2f} {steps:3d} {m:6d} {truth_eps:7.3f} {rate:9.4f} {up:8.4f} "
                  f"{a.full_reps:9d} {ok:>11d} {ratio:16.3f} {per:6.1f}", flush=True)


if __name__ == "__main__":
    main()
