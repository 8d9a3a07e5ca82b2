"""Fixed-size (without replacement) DP-SGD under replace-one: ours vs dp_accounting's WOR RDP.

Same settings, same process, same δ. For each setting it prints

1. dp_accounting 0.6.0 ``RdpAccountant(REPLACE_ONE)`` on
   ``SampledWithoutReplacementDpEvent(n, b, GaussianDpEvent(σ/2))`` composed T times — the
   Wang, Balle, Kasiviswanathan 2019 bound. σ/2 is the sensitivity correction: dp_accounting
   reads the noise multiplier as std/sensitivity and a clipped sum moves by 2C under
   replace-one. Its ε with σ passed literally (what a user would naively do) is printed as
   ``WRONG`` to show the size of that trap (it is not a bound);
2. our Wang et al. baseline (``rdp_wor_wang2019_gaussian``) on dp_accounting's order grid with
   its own conversion — it must reproduce (1);
3. ours: ``accountants.epsilon`` (default grid, elementwise minimum of Birrell et al. 2024 Thm 3.4,
   Wang et al. 2019 and the unsubsampled bound), and the theorem that won most orders;

and the time of each (median of ``--repeat`` alternated rounds; ours cold, with the moment-table
cache emptied, and warm) with the median of the per-round ratios dp_accounting / ours.

Usage::

    python benchmarks/bench_fixed_size.py            # the settings below
    python benchmarks/bench_fixed_size.py --repeat 1 --threads 1

Timings depend on the machine's load; the load average is printed at the top.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time

import torch

import accountants as acc
from accountants.rdp import eps_from_rdp
from accountants.rdp._moments import _moment_table
from accountants.rdp.fixed_size import fixed_size_step_rdp
from accountants.rdp.without_replacement import rdp_wor_wang2019_gaussian

# (σ, b, n, T, δ): the CIFAR-10 setting of Birrell et al. (250 epochs), and values.json fswor_epsilon rows.
SETTINGS = [
    (6.0, 120, 50_000, 104_166, 1e-5),
    (8.0, 64, 10_000, 20_000, 1e-8),
    (5.0, 500, 25_000, 10_000, 1e-5),
    (3.0, 256, 60_000, 23_400, 1e-5),
    (1.5, 128, 50_000, 3_900, 1e-5),
    (1.0, 256, 60_000, 2_340, 1e-5),
]


def _timed(fn, repeat: int):
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, statistics.median(times)


def _dp_accounting(sigma_for_dpa: float, b: int, n: int, steps: int, delta: float):
    import dp_accounting as dpa

    accountant = dpa.rdp.RdpAccountant(neighboring_relation=dpa.NeighboringRelation.REPLACE_ONE)
    one = dpa.SampledWithoutReplacementDpEvent(n, b, dpa.GaussianDpEvent(sigma_for_dpa))
    accountant.compose(dpa.SelfComposedDpEvent(one, steps))
    return accountant.get_epsilon(delta), accountant


def _cold(fn):
    """``fn`` with the accountant's caches emptied first (the moment tables of rdp/_moments.py)."""
    _moment_table.cache_clear()
    return fn()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="alternated rounds (medians are reported)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    try:
        import dp_accounting  # noqa: F401
    except ImportError:
        print("dp_accounting is not installed; nothing to compare against")
        return 1
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; torch threads {args.threads}; "
          "replace-one, fixed-size WOR; times: medians of alternated rounds; ratio: median of per-round "
          "dp_accounting/ours")
    header = (f"{'sigma':>5} {'b':>5} {'n':>6} {'T':>7} {'delta':>6} | {'dpa(s/2)':>9} {'dpa WRONG':>9} "
              f"{'ourWang':>9} | {'ours':>8} {'t_dpa':>7} {'t_cold':>7} {'t_warm':>7} {'r_cold':>6} {'r_warm':>6}"
              "  winner")
    print(header)
    for sigma, b, n, steps, delta in SETTINGS:
        run_dpa = functools.partial(_dp_accounting, sigma / 2, b, n, steps, delta)
        eps_dpa, dpa_acc = run_dpa()
        eps_wrong, _ = _dp_accounting(sigma, b, n, steps, delta)
        orders = torch.tensor(dpa_acc._orders, dtype=torch.float64)
        curve = steps * rdp_wor_wang2019_gaussian(orders, sigma, b / n)
        eps_our_wang = float(eps_from_rdp(curve, orders, delta, warn=False)[0])
        spec = acc.DPSGD(sigma, acc.FixedSize(b, n), steps, acc.Neighbouring.REPLACE_ONE)
        ours_fn = functools.partial(acc.epsilon, spec, delta)
        t_dpa, t_cold, t_warm = [], [], []
        for _ in range(args.repeat):  # alternated: a burst of load hits every side alike
            t_dpa.append(_timed(run_dpa, 1)[1])
            ours, t = _timed(functools.partial(_cold, ours_fn), 1)
            t_cold.append(t)
            t_warm.append(_timed(ours_fn, 1)[1])
        r_cold = statistics.median(d / c for d, c in zip(t_dpa, t_cold, strict=True))
        r_warm = statistics.median(d / w for d, w in zip(t_dpa, t_warm, strict=True))
        at = fixed_size_step_rdp(torch.tensor([ours.order], dtype=torch.float64), sigma, b, n,
                                 neighbouring=acc.Neighbouring.REPLACE_ONE)
        winner = f"order {ours.order:g}: {at.names[int(at.source[0])]}"
        med = statistics.median
        print(f"{sigma:5g} {b:5d} {n:6d} {steps:7d} {delta:6.0e} | {eps_dpa:9.4f} {eps_wrong:9.4f} "
              f"{eps_our_wang:9.4f} | {ours.value:8.4f} {med(t_dpa):7.3f} {med(t_cold):7.3f} {med(t_warm):7.3f} "
              f"{r_cold:6.2f} {r_warm:6.2f}  {winner}", flush=True)
    print("dpa(s/2): dp_accounting at sigma/2 (correct sensitivity 2C); dpa WRONG: sigma passed literally "
          "(not a bound);")
    print("ourWang: our Wang et al. 2019 on dp_accounting's orders (must equal dpa(s/2)); ours: accountants.epsilon;")
    print("cold: the moment-table cache emptied before the call; warm: called again. "
          f"load average at the end {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
