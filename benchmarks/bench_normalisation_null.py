"""The ``normalisation`` conformance test on correct trainers, many seeds (docs/fault-detection.md, "Opacus'
normalisation alarms").

Runs the conformance game of ``bench_fault_detection.py conformance`` (its dataset, canary and claim) and the
``normalisation`` test alone, at the level it has in the default (0.05/3/2/len(TESTS)). The test reads only
the noise on the reference coordinates R, so ``--fast`` leaves out the probe and reduces each trial's record
to ss on R: the probe draws from its own generator and never touches R, so the statistic is bit-identical
(checked at seeds 5000 and 5018 for Opacus). One JSON line per audit: the statistic, the p-value, the
membership labels and the trials × steps matrix of ss, for the exchangeability checks.

    PYTHONPATH=. python benchmarks/bench_normalisation_null.py --out /tmp/norm.jsonl --trainers opacus_correct \
        --first-seed 5200 --seeds 100 --fast
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_fault_detection as bench

from attacks import conformance_record as cr
from attacks import plugin
from audit import conformance


def _ss_only(model, trace, recorded, data, canary, clip_norm, member, probe=None, probe_skip=None) -> dict:
    """trial_stats reduced to what ``normalisation`` reads: ss on R (dead coordinates the canary leaves alone)."""
    named = list(model.named_parameters())
    u, mode = cr._updates(trace, recorded, sum(p.numel() for _, p in named))
    theta = torch.stack(trace)
    x, y = data.x.to(torch.float32), data.y
    xi = 0.5 + torch.rand(x.shape[0], generator=torch.Generator().manual_seed(0))  # as trial_stats
    dead = torch.ones(u.shape[1], dtype=torch.bool)
    for th in (theta[0], theta[-1]):
        dead &= cr._flat_grad(model, named, th, x, y, xi) == 0
    g = cr._canary_grads(model, named, theta[:-1], canary.x[:1].to(torch.float32), canary.y[:1])
    rr = dead & ~(g != 0).any(dim=0)
    return {"mode": mode, "member": bool(member), "df": int(rr.sum()),
            "ss": [float(v) for v in (u[:, rr] ** 2).sum(dim=1)]}


def once(trainer: str, seed: int, trials: int) -> dict:
    torch.set_num_threads(1)
    ctx, _ = bench._conformance_context(trainer, seed)
    t0 = time.perf_counter()
    recs = plugin.multi_run_game(ctx, n_trials=trials, progress=False).metadata["conformance"]
    secs = time.perf_counter() - t0
    a = {"member": np.array([r["member"] for r in recs]), "ss": np.array([r["ss"] for r in recs], dtype=np.float64)}
    level = bench.SIGNIFICANCE / bench.DEFAULT_AUDITS / 2 / len(conformance.TESTS)
    perms = max(conformance.PERMUTATIONS, math.ceil(4 / level))  # as run_tests
    noisy = np.flatnonzero((a["ss"] > 0).all(axis=0))
    t = conformance._normalisation(a, noisy, level, np.random.default_rng(seed), perms)
    return {"trainer": trainer, "seed": seed, "trials": trials, "seconds": round(secs, 2), "level": level,
            "stat": t.statistic, "p": t.p_value, "rejected": t.rejected, "finding": t.finding, "df": recs[0]["df"],
            "member": a["member"].astype(int).tolist(), "ss": a["ss"].tolist()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--trainers", default="opacus_correct")
    ap.add_argument("--first-seed", type=int, default=5200)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--fast", action="store_true", help="no probe; each trial's record reduced to ss on R")
    args = ap.parse_args()
    if args.fast:
        plugin._probe = lambda ctx, fn, i: None  # type: ignore[assignment]
        cr.trial_stats = _ss_only  # type: ignore[assignment]
    with open(args.out, "a") as fh:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            for trainer in args.trainers.split(","):
                r = once(trainer, seed, args.trials)
                fh.write(json.dumps(r) + "\n")
                fh.flush()
                print(trainer, seed, r["seconds"], f"{r['stat']:+.4f}", f"p = {r['p']:.4g}", flush=True)


if __name__ == "__main__":
    main()
