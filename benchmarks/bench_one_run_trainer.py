"""A user's trainer audited in ONE training run: ε_lower per one-run statistic and ε_certifiable, with the time.

The hand-written example trainer (examples/own_training/torch_trainer.py: softmax regression on 100 digits
records, the claim σ = 3, Poisson q = 0.5, 10 steps, C = 1, ε ≤ 2.37 at δ = 1e-5 by PLD) runs once with m
canaries, each in with probability ½, as ``dpaudit check`` runs a config with ``[audit] game = "one_run"``
(audit.runs.execute): black box (−cross-entropy of m out-of-distribution inputs), white box (each update
projected on each of those canaries' clipped gradient), and white box through the gradient-canary hook (m
Dirac canaries on flat parameters 0..m−1; the model has 650 parameters, so m ≤ 650 there).

Columns: ε_lower (Steinke et al. 2023, the bound that enters; 95 %), the order statistic of Xiang et al. 2025
(reported, not used: it assumes canaries that do not interact), the f-DP μ bound (Mahloujifar et al. 2024; ε of
the refuted GDP curve, not an ε lower bound), each with its ε_certifiable (the same statistic on the
accountant's PLD curve with the same m, median of 21 simulated optimal audits), the wall time of the audit
(training, scoring, statistics, ε_certifiable) and the load average before and after.

Usage::

    PYTHONPATH=. python benchmarks/bench_one_run_trainer.py [--m 1000] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from audit import runs

ROOT = Path(__file__).resolve().parents[1]
TOML = """
[training]
trainer = "torch_trainer:train"
trainer_dir = "{dir}"
dataset = "digits"
n_records = 100
noise_multiplier = 3.0
sampling = "poisson"
sample_rate = 0.5
steps = 10
clip_norm = 1.0
[canary]
kind = "{kind}"
count = {m}
[attack]
threat_model = "{threat}"
score = "{score}"
[audit]
game = "one_run"
trials = 1
seed = {seed}
[claim]
delta = 1e-5
"""
DESIGNS = (("black_box", "loss", "out_of_distribution"), ("white_box", "inner_product", "out_of_distribution"),
           ("white_box", "inner_product", "dirac"))


def _cert(statistic) -> str:
    e = statistic.epsilon_certifiable
    return "n/a" if e is None else f"{e:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()}")
    print("| threat | canary | m | ε_lower (Steinke) | ε_cert. | order (not used) | ε_cert. | f-DP refuted-curve ε "
          "| ε_tight | time (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for threat, score, kind in DESIGNS:
        m = min(args.m, 650) if kind == "dirac" else args.m
        with tempfile.TemporaryDirectory() as tmp:
            cfg = Path(tmp) / "c.toml"
            cfg.write_text(TOML.format(dir=ROOT / "examples" / "own_training", kind=kind, m=m, threat=threat,
                                       score=score, seed=args.seed), encoding="utf-8")
            t0 = time.perf_counter()
            _, res = runs.execute(cfg, Path(tmp) / "run", progress=False, claim=True)
            wall = time.perf_counter() - t0
        (a,) = res.audits
        st = {s.name: s for s in a.one_run_statistics}

        print(f"| {threat} | {kind} | {m} | {a.epsilon_lower.value:.3f} | {_cert(st['steinke'])} | "
              f"{st['order'].value:.3f} | {_cert(st['order'])} | {st['fdp_gdp'].epsilon:.3f} | {a.epsilon_tight:.3f} | "
              f"{wall:.1f} |")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
