"""RDP accounting for Poisson DP-SGD: dpaudit vs Opacus and dp_accounting, side by side.

Run:  python benchmarks/bench_accountants.py [--configs 10000] [--peer-sample 200] [--full]

Prints ε and wall-clock ratios (peer time / our time; > 1 means we are faster) for
  1. one configuration (Abadi et al. MNIST: σ=1.1, q=256/60000, T=14062, δ=1e-5);
  2. a batch of random configurations (σ, q, T) × the order grid.
Peers evaluate one configuration at a time in a Python loop, so unless --full is given their
batch time is measured on --peer-sample configurations drawn from the same batch and scaled
linearly (their cost is exactly per-configuration). Ours is always timed on the whole batch.
Needs the `peers` extra (opacus, dp-accounting); missing peers are reported and skipped.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch

import accountants as acc

OPACUS_ORDERS = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64))


def best_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


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

        out["opacus 1.x RDP"] = opacus_eps
    except ImportError:
        print("opacus not installed: skipped (pip install -e '.[peers]')")
    try:
        import dp_accounting  # noqa: F401

        out["dp_accounting RDP"] = dpacc_eps
    except ImportError:
        print("dp_accounting not installed: skipped")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", type=int, default=10_000)
    ap.add_argument("--peer-sample", type=int, default=200)
    ap.add_argument("--full", action="store_true", help="time peers on every configuration (slow)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (peers are single-threaded numpy)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    warnings.simplefilter("ignore", acc.OrderGridWarning)
    delta = 1e-5
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, device cpu")

    # 1. One configuration.
    sigma, q, steps = 1.1, 256 / 60000, 14062
    spec = acc.DPSGD(sigma, acc.Poisson(q), steps)
    ours = acc.epsilon(spec, delta).value
    t_ours = best_time(lambda: acc.epsilon(spec, delta), args.repeat)
    opacus_grid = torch.tensor(OPACUS_ORDERS, dtype=torch.float64)

    def ours_opacus_grid():
        return acc.poisson_epsilon(
            torch.tensor(sigma), torch.tensor(q), torch.tensor(float(steps)), delta, orders=opacus_grid
        )

    t_ours_og = best_time(ours_opacus_grid, args.repeat)
    print("\n== one configuration: σ=1.1, q=256/60000, T=14062, δ=1e-5 ==")
    label = f"dpaudit (default grid, {acc.DEFAULT_ORDERS.numel()} orders + refinement)"
    print(f"{label:<44} ε={ours:.6f}  {t_ours * 1e3:8.2f} ms")
    print(f"{'dpaudit (Opacus grid, 151 orders)':<44} ε={float(ours_opacus_grid()[0]):.6f}  {t_ours_og * 1e3:8.2f} ms")
    peer_fns = peers()
    for name, fn in peer_fns.items():
        e = fn(sigma, q, steps, delta)
        t = best_time(lambda fn=fn: fn(sigma, q, steps, delta), args.repeat)
        print(
            f"{name:<44} ε={e:.6f}  {t * 1e3:8.2f} ms   ratio {t / t_ours:6.2f}x (vs our default grid), "
            f"{t / t_ours_og:6.2f}x (same grid)"
        )

    # 2. A batch of configurations.
    n = args.configs
    gen = torch.Generator().manual_seed(0)
    sig = 0.5 + 4.5 * torch.rand(n, generator=gen, dtype=torch.float64)
    qs = 10 ** (-4 + 3 * torch.rand(n, generator=gen, dtype=torch.float64))  # 1e-4 … 0.1
    ts = torch.randint(100, 100_000, (n,), generator=gen).to(torch.float64)
    print(f"\n== {n} configurations: σ∈[0.5,5], q∈[1e-4,0.1] log-uniform, T∈[100,1e5], δ=1e-5 ==")
    t0 = time.perf_counter()
    eps_b, _ = acc.poisson_epsilon(sig, qs, ts, delta)
    t_batch = time.perf_counter() - t0
    t0 = time.perf_counter()
    acc.poisson_epsilon(sig, qs, ts, delta, orders=opacus_grid)
    t_batch_og = time.perf_counter() - t0
    print(f"dpaudit batched, default grid ({acc.DEFAULT_ORDERS.numel()} orders + refinement): {t_batch:8.2f} s")
    print(f"dpaudit batched, Opacus grid (151 orders):  {t_batch_og:8.2f} s")
    m = n if args.full else min(n, args.peer_sample)
    idx = torch.randperm(n, generator=gen)[:m].tolist()
    for name, fn in peer_fns.items():
        t0 = time.perf_counter()
        worse = []
        for i in idx:
            e = fn(sig[i].item(), qs[i].item(), int(ts[i]), delta)
            worse.append(eps_b[i].item() / e)
        t_peer = (time.perf_counter() - t0) * n / m
        scaled = "" if m == n else f" (measured on {m}, scaled ×{n / m:g})"
        print(
            f"{name:<24} {t_peer:8.2f} s{scaled}   ratio {t_peer / t_batch:6.1f}x (default grid), "
            f"{t_peer / t_batch_og:6.1f}x (same grid);  ε_ours/ε_peer: max {max(worse):.8f}, "
            f"median {statistics.median(worse):.6f}"
        )


if __name__ == "__main__":
    main()
