"""Throughput of the vectorised DP-SGD trainer (attacks.dpsgd) against an Opacus training loop.

Same model (multinomial logistic regression, 64 → 10), same data (scikit-learn digits,
standardised), same algorithm (Poisson sampling with q = 64/1797, σ = 1, C = 1, SGD), same
process and dtype. Prints:

1. Opacus 1.6 per-step time (PrivacyEngine.make_private, Poisson sampling, one model);
2. ours, one model, per-step time;
3. ours, R models at once, time per model-step, and the ratio Opacus / ours;
4. the audit workload: ``--runs`` runs (default 1,000) of T = ``--steps`` (default 100) steps,
   wall-clock time.

Usage::

    python benchmarks/bench_attacks.py                    # full: 1,000 runs × 100 steps
    python benchmarks/bench_attacks.py --runs 200 --quick # a smaller smoke run
    python benchmarks/bench_attacks.py --threads 0 --dtype float32   # torch's default threads, float32
    python benchmarks/bench_attacks.py --table            # throughput table: LR 1,000 / 1 model, CNN 100 / 1

Timings depend on the machine's load; report the load average printed at the top.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings

import torch

import accountants as acc
from attacks import data, dpsgd, models


def _opacus_per_step(d: data.Dataset, steps: int, dtype: torch.dtype, make=None) -> float | None:
    try:
        from opacus import PrivacyEngine
    except ImportError:
        print("opacus not installed: skipping the peer loop")
        return None
    torch.manual_seed(0)
    model = (make() if make is not None else torch.nn.Linear(64, 10)).to(dtype)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    ds = torch.utils.data.TensorDataset(d.x.to(dtype), d.y)
    loader = torch.utils.data.DataLoader(ds, batch_size=64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = PrivacyEngine(accountant="rdp")
        model, opt, loader = engine.make_private(
            module=model, optimizer=opt, data_loader=loader, noise_multiplier=1.0, max_grad_norm=1.0,
            poisson_sampling=True,
        )
    loss_fn = torch.nn.CrossEntropyLoss()
    done, t0 = 0, None
    warnings.filterwarnings("ignore", message="Full backward hook is firing")  # opacus hooks, benign here
    while done < steps + 5:
        for x, y in loader:
            if done == 5:  # warm-up steps are not timed
                t0 = time.perf_counter()
            opt.zero_grad()
            loss_fn(model(x), y).backward()
            opt.step()
            done += 1
            if done >= steps + 5:
                break
    return (time.perf_counter() - t0) / steps


def _ours(d: data.Dataset, n_models: int, steps: int, chunk: int, seed: int = 0, model=None) -> float:
    """Wall-clock seconds to train n_models models for ``steps`` steps, ``chunk`` at a time."""
    spec = acc.DPSGD(1.0, acc.Poisson(64 / d.n), steps=steps)
    model = models.logistic_regression(64, 10).to(d.x.dtype) if model is None else model.to(d.x.dtype)
    t0 = time.perf_counter()
    for start in range(0, n_models, chunk):
        r = min(chunk, n_models - start)
        gens = [torch.Generator().manual_seed(seed + start + i) for i in range(r)]
        dpsgd.train(spec, model, d, clip_norm=1.0, learning_rate=1.0, n_models=r, generator=gens)
    return time.perf_counter() - t0


_ROWS = {  # name -> (label, models at once, images?, goal ratio ours/Opacus)
    "lr1000": ("logistic regression", 1000, False, 20.0),
    "lr1": ("logistic regression", 1, False, 1.0),
    "cnn100": ("small CNN, 8x8 images", 100, True, 5.0),
    "cnn1": ("small CNN, 8x8 images", 1, True, None),
}


def _make(images: bool):
    return models.small_cnn(10) if images else models.logistic_regression(64, 10)


def _peak_kib() -> int:
    """This process's peak resident set size so far, in KiB (getrusage: POSIX, no procfs)."""
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak  # macOS reports bytes, Linux KiB


def _child_peak_growth(side: str, row: str, steps: int, dtype_name: str, queue) -> None:
    """In a fresh child process: growth of the peak RSS while one side of a row trains (bytes).

    Imports, data and (for ours) a 1-model warm-up come first, so the baseline peak holds them;
    what the run adds above it is the run's own memory.
    """
    torch.set_num_threads(1)
    dtype = getattr(torch, dtype_name)
    _label, R, images, _goal = _ROWS[row]
    d = data.digits(images=images, dtype=dtype)
    if side == "opacus":
        import opacus  # noqa: F401  (imported before the baseline)
    else:
        _ours(d, 1, 1, 1, model=_make(images))
    base = _peak_kib()
    if side == "opacus":
        _opacus_per_step(d, steps, dtype, make=lambda: _make(images))
    else:
        _ours(d, R, steps, R, model=_make(images))
    queue.put(max(0, _peak_kib() - base) * 1024)


def _peak_growth_in_child(side: str, row: str, steps: int, dtype: torch.dtype) -> int:
    import multiprocessing as mp

    # forkserver: each child is forked from a small server process, so its peak RSS starts from its own
    # imports, not from this process's peak (a spawned child inherits the parent's high-water mark
    # through fork + exec on Linux); spawn where there is no forkserver (Windows)
    ctx = mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child_peak_growth, args=(side, row, steps, str(dtype).split(".")[-1], q))
    p.start()
    out = q.get()
    p.join()
    return int(out)


def throughput_table(dtype: torch.dtype, steps: int, rounds: int, memory: bool = True) -> list[dict]:
    """Models × steps per second, ours against an Opacus PrivacyEngine loop, same model, data, process.

    Rows (issue goals in brackets): logistic regression at 1,000 models (≥ 20×) and alone (≥ 1×), the
    small CNN on 8×8 digits images at 100 models (≥ 5×) and alone. Times: both sides in this process,
    ``rounds`` interleaved rounds (ours, then Opacus for about as long: its step count follows our
    run's time), the median of the per-round ratios. Peak memory per model: each side
    trains once more in a fresh child process, which reports the growth of its peak RSS
    (``getrusage(RUSAGE_SELF).ru_maxrss``: POSIX, no procfs) over its peak after imports, data
    loading and a 1-model warm-up, divided by the models trained at once.
    """
    have_opacus = _opacus_per_step(data.digits(dtype=dtype), 1, dtype) is not None
    out = []
    for key, (label, R, images, goal) in _ROWS.items():
        d = data.digits(images=images, dtype=dtype)
        _ours(d, 2, 2, 2, model=_make(images))  # warm-up of this architecture
        op, us = [], []
        make = lambda images=images: _make(images)  # noqa: E731
        est = _opacus_per_step(d, steps, dtype, make=make) if have_opacus else None  # warm-up, not recorded
        for _ in range(rounds):
            # ours, then Opacus for as many steps as take about as long (at least ``steps``, at most
            # 100×): both sides see the same stretch of machine load, so a burst of other work does
            # not land on a 20 ms Opacus window and skew one round's ratio
            ours_s = _ours(d, R, steps, R, model=_make(images))
            us.append(ours_s / (R * steps))
            if have_opacus:
                op.append(_opacus_per_step(d, int(min(100 * steps, max(steps, ours_s / est))), dtype, make=make))
                est = op[-1]
        mem_ours = _peak_growth_in_child("ours", key, steps, dtype) if memory else None
        mem_op = _peak_growth_in_child("opacus", key, steps, dtype) if memory and have_opacus else None
        row = {"row": f"{label}, {R} model{'s' if R > 1 else ''}", "models": R, "steps": steps,
               "ours_model_steps_per_s": 1 / statistics.median(us),
               "opacus_model_steps_per_s": 1 / statistics.median(op) if op else None,
               "ratio": statistics.median(o / u for o, u in zip(op, us, strict=True)) if op else None,
               "ratios": [o / u for o, u in zip(op, us, strict=True)],
               "goal": goal,
               "ours_peak_mb_per_model": mem_ours / R / 2**20 if mem_ours is not None else None,
               "opacus_peak_mb_per_model": mem_op / 2**20 if mem_op is not None else None}
        out.append(row)

        def f(v, fmt):
            return format(v, fmt) if v is not None else "n/a"

        goal_s = f">= {goal:g}x" if goal else "-"
        print(f"{row['row']:34s} ours {row['ours_model_steps_per_s']:10.1f}  opacus "
              f"{f(row['opacus_model_steps_per_s'], '10.1f')} model-steps/s  ratio {f(row['ratio'], '7.2f')}x "
              f"(goal {goal_s}; rounds {', '.join(f'{r:.2f}' for r in row['ratios'])})  peak MB/model ours "
              f"{f(row['ours_peak_mb_per_model'], '8.3f')} opacus {f(row['opacus_peak_mb_per_model'], '8.2f')}  "
              f"load {os.getloadavg()[0]:.2f}", flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=1000, help="models in the audit workload (default 1000)")
    ap.add_argument("--steps", type=int, default=100, help="DP-SGD steps per run (default 100)")
    ap.add_argument("--chunk", type=int, default=64, help="models trained at once (default 64)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch intra-op threads (default 1: on a busy 2-core machine two threads per process "
                         "spin against other work and were 3-7x slower here; 0 keeps torch's default)")
    ap.add_argument("--dtype", choices=["float64", "float32"], default="float64")
    ap.add_argument("--quick", action="store_true", help="fewer steps in the per-step comparisons")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the per-step comparison")
    ap.add_argument("--table", action="store_true",
                    help="only the throughput table (LR at 1,000 and 1 model, CNN at 100 and 1 model) vs Opacus")
    ap.add_argument("--table-steps", type=int, default=20, help="steps per timed run in the table (default 20)")
    ap.add_argument("--no-memory", action="store_true", help="table without the child-process memory runs")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = getattr(torch, args.dtype)
    d = data.digits(dtype=dtype)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, dtype {args.dtype}, "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    cmp_steps = 20 if args.quick else 100
    if args.table:
        throughput_table(dtype, args.table_steps, args.rounds, memory=not args.no_memory)
        print(f"load average now {os.getloadavg()[0]:.2f}")
        return 0

    _ours(d, 2, 2, 2)  # warm-up (torch.func import and first vmap trace)
    many_r = min(args.chunk, args.runs)
    # Interleave the three measurements over several rounds, so a burst of load on a shared machine
    # hits all of them alike; report the median and the minimum (least disturbed) of each.
    rounds = {"opacus": [], "one": [], "many": []}
    for _ in range(args.rounds):
        o = _opacus_per_step(d, cmp_steps, dtype)
        if o is not None:
            rounds["opacus"].append(o)
        rounds["one"].append(_ours(d, 1, cmp_steps, 1) / cmp_steps)
        rounds["many"].append(_ours(d, many_r, cmp_steps, many_r) / (cmp_steps * many_r))

    def stat(xs):
        return statistics.median(xs), min(xs)

    lines = [("opacus 1 model", "opacus", "ms/step"), ("ours   1 model", "one", "ms/step"),
             (f"ours   {many_r} models at once", "many", "ms/model-step")]
    for label, key, unit in lines:
        if rounds[key]:
            med, best = stat(rounds[key])
            print(f"{label:28s} median {med * 1e3:7.3f}  min {best * 1e3:7.3f} {unit}")
    if rounds["opacus"]:
        for label, key in (("1 model", "one"), ("vectorised", "many")):
            med_ratio = statistics.median(o / u for o, u in zip(rounds["opacus"], rounds[key], strict=True))
            print(f"ratio opacus/ours ({label}): median over rounds {med_ratio:6.2f}x, "
                  f"of minima {min(rounds['opacus']) / min(rounds[key]):6.2f}x")

    total = _ours(d, args.runs, args.steps, args.chunk, seed=10_000)
    print(f"{args.runs} runs x {args.steps} steps (b ~ 64, Poisson): {total:.1f} s "
          f"(goal < 120 s); load average now {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
