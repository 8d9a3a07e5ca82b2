"""RDP accounting for Poisson DP-SGD: dpaudit vs Opacus and dp_accounting, side by side.

Run:  python benchmarks/bench_accountants.py [--configs 10000] [--peer-sample 100] [--rounds 3]
                                             [--memory-configs 100000]

One thread, one process; in every round each side runs once, alternated, and each row prints
the median over rounds of time and of the per-round ratio (peer time / ours: > 1 means we are
faster), with the machine load (os.getloadavg) at the start and the end. Rows:

  1. one configuration, warm (Abadi et al. MNIST: σ=1.1, q=256/60000, T=14062, δ=1e-5):
     accountants.epsilon (default grid + refinement) vs Opacus 1.x and dp_accounting RDP;
  2. a batch of random configurations (σ 0.5–5, q 1e-4–0.1 log-uniform, T 100–1e5):
     accountants.poisson_epsilon at the default grid (and at Opacus' grid) vs each peer looped
     in Python. Peers cost exactly the same per configuration, so each round times them on
     --peer-sample configurations of the batch and scales linearly (--full: every one);
  3. memory: peak-RSS growth of poisson_epsilon on --memory-configs configurations, in a fresh
     child process (0: skip).
Needs the `peers` extra (opacus, dp-accounting); a missing peer is reported and skipped.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import subprocess
import sys
import time
import warnings

import torch

import accountants as acc

OPACUS_ORDERS = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64))
DELTA = 1e-5


def opacus_eps(sigma: float, q: float, steps: int, delta: float) -> float:
    from opacus.accountants.analysis import rdp as ordp

    rdp = ordp.compute_rdp(q=q, noise_multiplier=sigma, steps=steps, orders=OPACUS_ORDERS)
    return float(ordp.get_privacy_spent(orders=OPACUS_ORDERS, rdp=rdp, delta=delta)[0])


def dpacc_eps(sigma: float, q: float, steps: int, delta: float) -> float:
    import dp_accounting as dpa

    ev = dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(sigma)), steps)
    return float(dpa.rdp.RdpAccountant().compose(ev).get_epsilon(delta))


def peers() -> dict[str, object]:
    out: dict[str, object] = {}
    try:
        import opacus  # noqa: F401

        out["Opacus RDP"] = opacus_eps
    except ImportError:
        print("opacus not installed: skipped (pip install -e '.[peers]')")
    try:
        import dp_accounting  # noqa: F401

        logging.getLogger().setLevel(logging.ERROR)  # its per-order "failed to converge" notes
        out["dp_accounting RDP"] = dpacc_eps
    except ImportError:
        print("dp_accounting not installed: skipped")
    return out


def timed(fn) -> tuple[object, float]:
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def batch(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    sig = 0.5 + 4.5 * torch.rand(n, generator=gen, dtype=torch.float64)
    qs = 10 ** (-4 + 3 * torch.rand(n, generator=gen, dtype=torch.float64))  # 1e-4 … 0.1
    ts = torch.randint(100, 100_000, (n,), generator=gen).to(torch.float64)
    return sig, qs, ts


def one_configuration(peer_fns: dict, rounds: int) -> None:
    sigma, q, steps = 1.1, 256 / 60000, 14062
    spec = acc.DPSGD(sigma, acc.Poisson(q), steps)
    ours_fn = lambda: acc.epsilon(spec, DELTA).value  # noqa: E731
    ours_fn()
    for fn in peer_fns.values():
        fn(sigma, q, steps, DELTA)  # warm: imports and caches on every side
    times: dict[str, list[float]] = {"ours": [], **{k: [] for k in peer_fns}}
    ratios: dict[str, list[float]] = {k: [] for k in peer_fns}
    eps: dict[str, float] = {}
    for _ in range(rounds):
        eps["ours"], t_ours = timed(ours_fn)
        times["ours"].append(t_ours)
        for name, fn in peer_fns.items():
            eps[name], t = timed(lambda fn=fn: fn(sigma, q, steps, DELTA))
            times[name].append(t)
            ratios[name].append(t / t_ours)
    print(f"\n== 1. one configuration, warm: σ=1.1, q=256/60000, T=14062, δ=1e-5 ({rounds} rounds; {load()}) ==")
    t_ours = statistics.median(times["ours"])
    print(f"{'dpaudit epsilon (default grid)':<32} ε={eps['ours']:.6f}  {t_ours * 1e3:8.2f} ms")
    for name in peer_fns:
        print(f"{name:<32} ε={eps[name]:.6f}  {statistics.median(times[name]) * 1e3:8.2f} ms   "
              f"ratio {statistics.median(ratios[name]):5.2f}x (peer/ours, median of per-round ratios)")


def many_configurations(peer_fns: dict, n: int, sample: int, rounds: int) -> None:
    sig, qs, ts = batch(n)
    opacus_grid = torch.tensor(OPACUS_ORDERS, dtype=torch.float64)
    idx = torch.randperm(n, generator=torch.Generator().manual_seed(1))[:sample].tolist()
    ours: list[float] = []
    ours_og: list[float] = []
    peer_t: dict[str, list[float]] = {k: [] for k in peer_fns}
    worse: dict[str, list[float]] = {k: [] for k in peer_fns}
    eps_b = None
    for _ in range(rounds):
        (eps_b, _), t = timed(lambda: acc.poisson_epsilon(sig, qs, ts, DELTA, warn=False))
        ours.append(t)
        _, t = timed(lambda: acc.poisson_epsilon(sig, qs, ts, DELTA, orders=opacus_grid, warn=False))
        ours_og.append(t)
        for name, fn in peer_fns.items():
            t0 = time.perf_counter()
            vals = [fn(sig[i].item(), qs[i].item(), int(ts[i]), DELTA) for i in idx]
            peer_t[name].append((time.perf_counter() - t0) * n / len(idx))
            worse[name] = [eps_b[i].item() / v for i, v in zip(idx, vals, strict=True)]
    scaled = "" if len(idx) == n else f"; peers timed on {len(idx)} and scaled ×{n / len(idx):g}"
    print(f"\n== 2. {n} configurations: σ∈[0.5,5], q∈[1e-4,0.1] log-uniform, T∈[100,1e5], δ=1e-5 "
          f"({rounds} rounds{scaled}; {load()}) ==")
    print(f"{'dpaudit poisson_epsilon, default grid':<40} {statistics.median(ours):8.2f} s")
    print(f"{'dpaudit poisson_epsilon, Opacus grid':<40} {statistics.median(ours_og):8.2f} s")
    for name in peer_fns:
        r = statistics.median(p / o for p, o in zip(peer_t[name], ours, strict=True))
        r_og = statistics.median(p / o for p, o in zip(peer_t[name], ours_og, strict=True))
        print(f"{name + ' looped':<40} {statistics.median(peer_t[name]):8.2f} s   ratio {r:6.1f}x (default grid), "
              f"{r_og:6.1f}x (same grid);  ε_ours/ε_peer: max {max(worse[name]):.8f}, "
              f"median {statistics.median(worse[name]):.6f}")


_CHILD = """
import resource, sys, torch, warnings
torch.set_num_threads(1)
import accountants as acc
sys.path.insert(0, {here!r})
from bench_accountants import batch


def peak():  # bytes (Linux reports ru_maxrss in KiB)
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


sig, qs, ts = batch({n})
acc.poisson_epsilon(sig[:10], qs[:10], ts[:10], 1e-5, warn=False)
base = peak()
acc.poisson_epsilon(sig, qs, ts, 1e-5, warn=False)
print(peak() - base)
"""


def memory(n: int) -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    code = _CHILD.format(here=here, n=n)
    t0 = time.perf_counter()
    # Through a small shell that forks (a list, so it does not exec in place): a child started straight from
    # this process inherits its high-water mark as ru_maxrss at exec (measured: 813 MiB for a bare interpreter
    # under an 800 MiB parent, 13 MiB through the shell), which would hide the growth being measured.
    launcher = ["sh", "-c", '"$@"; exit $?', "sh"]
    out = subprocess.run([*launcher, sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    growth = int(out.strip().splitlines()[-1])
    print(f"\n== 3. memory: poisson_epsilon on {n} configurations in a fresh process ({load()}) ==")
    print(f"peak-RSS growth {growth / 2**20:8.1f} MiB ({growth / n / 1024:.2f} KiB per configuration; "
          f"goal: flat, ≤ 1 GiB); {time.perf_counter() - t0:.1f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", type=int, default=10_000)
    ap.add_argument("--peer-sample", type=int, default=100)
    ap.add_argument("--full", action="store_true", help="time peers on every configuration (slow)")
    ap.add_argument("--rounds", type=int, default=3, help="alternated rounds of the batch row")
    ap.add_argument("--one-rounds", type=int, default=30, help="alternated rounds of the one-configuration row")
    ap.add_argument("--memory-configs", type=int, default=100_000, help="configurations of the memory row (0: skip)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    warnings.simplefilter("ignore", acc.OrderGridWarning)
    warnings.simplefilter("ignore", UserWarning)  # the peers' own grid-edge warnings
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, cpu, {load()} on {os.cpu_count()} CPUs")
    peer_fns = peers()
    one_configuration(peer_fns, args.one_rounds)
    if args.configs:
        many_configurations(peer_fns, args.configs, args.configs if args.full else min(args.configs, args.peer_sample),
                            args.rounds)
    if args.memory_configs:
        memory(args.memory_configs)
    print(f"\n{load()} at the end")


if __name__ == "__main__":
    main()
