"""Tightness as a measured figure: worst-case white-box audits against what the trials can certify.

For each (sampling, relation) row, a multi-run audit of correct DP-SGD under the threat model
"white box, crafted dataset" (attacks.worst_case; docs/worst-case.md) with the exact
likelihood-ratio score, and beside it:

* ε_lower: the audit's lower bound (Clopper–Pearson, Bonferroni thresholds, significance s);
* ε_certifiable: what the optimal attack on the accountant's tightest curve (PLD; RDP-derived
  where no PLD exists) certifies with the same trials, s, δ and threshold strategy
  (audit.tightness: median of 401 seeded replicates, their range in brackets). Where the accountant has
  a PLD it is read **per ordered direction** (audit.tightness.certifiable_directional on
  accountants.pld.directional_tradeoff_curves; the direction whose optimal audit certifies most):
  an audit reads one pair (D, D'), and the symmetric curve, which covers both orderings of every pair at
  once, is realised by no single pair, so its ε_certifiable is above what an optimal audit of the
  accountant's own worst direction certifies even where the accountant is exact (docs/worst-case.md,
  "ε_certifiable per direction"; since 2026-11-28 the headline, for every row);
* ceiling: the design's largest certifiable ε (a perfect attack);
* ε_tight (PLD) and ε_rdp: the accountants' upper bounds;
* ratio = ε_lower / ε_certifiable (goal ≥ 0.9 at 2,000 trials);
* per row, a second line: ε_certifiable on the symmetric curve (the headline before 2026-11-28) and on
  draws of the crafted pair itself (worst_case.sample_pair, exact LLR, median of 11), each with its ratio;
* peer: dp_accounting 0.6's PLD ε for the same spec where it has an event for it (Poisson
  add/remove, replace-one, fixed-size add/remove as Poisson at σ/2, and truncated Poisson's
  TruncatedSubsampledGaussianDpEvent), the same process.

Row ``truncated_poisson_add_remove``: TruncatedPoisson(q = 0.5, B = 60, N = 101); crafted dataset
of attacks.worst_case (the canary and 100 records of gradient 0 that only take batch places): the
realised pair of the accountant's lower end (Poisson at the canary's inclusion probability p), while
ε_certifiable is read off the accountant's upper curve (docs/dominating-pairs.md §4c); a third line gives
ε_certifiable on the realised pair's own PLD curve. benchmarks/truncated_count_dataset.py measures a
dataset that makes a cut visible (docs/worst-case.md).

Each row is its own audit at significance s (no union bound across rows: rows are separate
claims). Settings: σ = 1, T = 10, δ = 1e-5, Poisson q = 0.5, fixed size b = 50 of N = 101 (the
default run's), digits logistic-regression parameter space (D = 650).

Row ``shuffle_add_remove`` (its own settings, docs/shuffle.md): shuffled batches Shuffle(b = 5,
n = 500), T = 200 (2 epochs of 100 steps), σ = 0.8, 10,000 trials by default (``--shuffle-trials``);
crafted dataset of attacks.worst_case (z = +C·e, 499 records of −C·e, ⊥ when out: the Chua et al.
pair MoG(2) vs MoG(1) per epoch) scored by its exact per-epoch LLR. Beside ε_lower: the Poisson ε
at q = b/n that shuffled code usually quotes, the certified shuffle lower bound (Chua et al.
construction) and the sound upper bound (full-batch Gaussian epochs), and ε_certifiable of the
*realised* pair (the optimal audit of that pair at the same design, seeded draws of the pair; the
accountant's upper curve is far from what any crafted dataset is known to realise).

Row ``random_allocation_add_remove`` (its own settings, docs/worst-case.md): balls-in-bins
RandomAllocation(1, t = 5), T = 10 (2 epochs), σ = 1, 10,000 trials by default (``--allocation-trials``);
crafted dataset of attacks.worst_case (z = +C·e alone: the accountant's pair (1/t)Σ_j N(e_j) vs N(0) per
epoch) scored by its exact per-epoch LLR. ε_certifiable is given twice: on the accountant's tightest
curve (the PLD upper bound of accountants/pld/random_allocation.py) and on the *realised* pair (median of
11 seeded optimal audits of the pair, which is the accountant's own dominating pair); beside them the
certified lower bound, the RDP upper bound and the Poisson ε at q = 1/t.

Usage::

    PYTHONPATH=. python benchmarks/bench_tightness.py [--trials 2000] [--sigma 1.0] [--rows fixed_size_add_remove,...]
        [--shuffle-trials 10000] [--seed 0] [--replicates 101]

Timings depend on the machine's load (printed at the top).
"""

from __future__ import annotations

import argparse
import os
import time

import accountants as acc
from accountants import Neighbouring
from accountants.pld import directional_tradeoff_curves
from accountants.random_allocation import random_allocation_lower_epsilon
from attacks import data, games, models, worst_case
from attacks import membership as mia
from audit import comparator, tightness
from audit import statistics as st

SIGMA, T, Q, B, N, DELTA = 1.0, 10, 0.5, 50, 101, 1e-5
CURVE_REPLICATES = 401  # replicates of ε_certifiable on a curve (the median of 21 moved a few % by seed)
B_MAX = 60  # truncated Poisson's largest batch: P(Bin(100, 0.5) ≥ 60) = 2.8 % of the steps are cut
R1 = Neighbouring.REPLACE_ONE



def rows(sigma: float = SIGMA) -> dict[str, acc.DPSGD]:
    """The benchmark's specs at noise multiplier σ."""
    return {
        "poisson_add_remove": acc.DPSGD(sigma, acc.Poisson(Q), T),
        "poisson_replace_one": acc.DPSGD(sigma, acc.Poisson(Q), T, neighbouring=R1),
        "fixed_size_add_remove": acc.DPSGD(sigma, acc.FixedSize(B, N), T),
        "fixed_size_replace_one": acc.DPSGD(sigma, acc.FixedSize(B, N), T, neighbouring=R1),
        "fixed_size_wr_add_remove": acc.DPSGD(sigma, acc.FixedSize(B, N, replace=True), T),
        "group_2_poisson": acc.DPSGD(sigma, acc.Poisson(Q), T, group_size=2),
        # hidden state: the adversary sees θ_T only; the canary's gradient is C·e at every step
        "hidden_state_poisson": acc.DPSGD(sigma, acc.Poisson(Q), T),
        "hidden_state_full_batch": acc.DPSGD(sigma, acc.Poisson(1.0), T),
        # truncated Poisson (issue 27 §2): q = 0.5 of N = 101, cut at B_MAX = 60 (2.8 % of the batches)
        "truncated_poisson_add_remove": acc.DPSGD(sigma, acc.TruncatedPoisson(Q, B_MAX, N), T),
    }


def hidden_state_epsilon(spec: acc.DPSGD) -> float:
    """ε of the hidden-state pair Σ_t o_t: Bin(T, q) + N(0, Tσ²) against N(0, Tσ²) (add/remove).

    This is the one-step Poisson group-K pair with K = T, noise σ√T (docs/dominating-pairs.md §4a),
    and for q = 1 the Gaussian of shift T, i.e. μ = √T/σ: what a final-model adversary with a
    constant-gradient canary can reach at most.
    """
    q = float(spec.sampling.rate)
    one = acc.DPSGD(spec.noise_multiplier * spec.steps ** 0.5, acc.Poisson(q), 1, group_size=spec.steps)
    return float(acc.epsilon(one, DELTA, method="pld").value)


ROWS = rows()
SHUFFLE_ROW = "shuffle_add_remove"
SHUFFLE_SPEC = acc.DPSGD(0.8, acc.Shuffle(5, 500), 200)  # 2 epochs of 100 steps; Poisson q = 0.01 quoted


ALLOCATION_ROW = "random_allocation_add_remove"
ALLOCATION_SPEC = acc.DPSGD(1.0, acc.RandomAllocation(1, 5), 10)  # 2 epochs of 5 steps


def certifiable_on_pair(sample, llr, spec: acc.DPSGD, n_in: int, n_out: int, significance: float,
                        replicates: int = 11, seed: int = 0) -> list[float]:
    """ε lower bounds of ``replicates`` optimal audits of a realised pair (sorted): ``sample(spec, n, generator=g)``
    draws (in, out) observations of the pair, ``llr(x, spec)`` is its exact log-likelihood ratio."""
    g = __import__("torch").Generator().manual_seed(seed)
    out = []
    for _ in range(replicates):
        xin, _ = sample(spec, n_in, generator=g)
        _, xout = sample(spec, n_out, generator=g)
        si, so = llr(xin, spec).numpy(), llr(xout, spec).numpy()
        out.append(st.epsilon_lower_bound(si, so, delta=DELTA, significance=significance).value)
    return sorted(out)


def certifiable_on_allocation_pair(spec: acc.DPSGD, n_in: int, n_out: int, significance: float,
                                   replicates: int = 11, seed: int = 0) -> list[float]:
    """:func:`certifiable_on_pair` of the balls-in-bins pair (its exact LLR)."""
    return certifiable_on_pair(worst_case.sample_allocation_pair, mia.allocation_llr, spec, n_in, n_out,
                               significance, replicates, seed)


def run_allocation_row(trials: int, significance: float, seed: int = 0, spec: acc.DPSGD = ALLOCATION_SPEC,
                       replicates: int | None = None) -> dict:
    """The balls-in-bins row: :func:`run_row`'s figures plus ε_certifiable of the realised pair, the certified
    lower bound and the Poisson ε at q = 1/t."""
    r = run_row(ALLOCATION_ROW, spec, trials, significance, seed, replicates)
    reps = certifiable_on_allocation_pair(spec, trials // 2, trials - trials // 2, significance,
                                          **({} if replicates is None else {"replicates": replicates}))
    cert = reps[len(reps) // 2]
    poisson = acc.DPSGD(spec.noise_multiplier, acc.Poisson(1 / spec.sampling.steps_per_epoch), spec.steps)
    r.update({"epsilon_certifiable_pair": cert, "pair_range": (reps[0], reps[-1]),
              "ratio_pair": tightness.certifiable_ratio(r["epsilon_lower"], cert),
              "certified_lower": random_allocation_lower_epsilon(spec, DELTA),
              "epsilon_poisson": float(acc.epsilon(poisson, DELTA, method="pld").value)})
    return r


def certifiable_on_shuffle_pair(spec: acc.DPSGD, n_in: int, n_out: int, significance: float,
                                replicates: int = 11, seed: int = 0) -> list[float]:
    """:func:`certifiable_on_pair` of the realised shuffled pair (its exact LLR)."""
    return certifiable_on_pair(worst_case.sample_shuffle_pair, lambda x, sp: mia.shuffled_llr(x, sp, 2.0, 1.0), spec,
                               n_in, n_out, significance, replicates, seed)


def run_shuffle_row(trials: int, significance: float, seed: int = 0, spec: acc.DPSGD = SHUFFLE_SPEC) -> dict:
    """The shuffled-batches row: ε_lower against the Poisson ε, the shuffle lower and upper bounds."""
    t0 = time.perf_counter()
    d = data.digits().subset(slice(0, 0))
    c = worst_case.crafted(spec, dim=650)
    out = games.multi_run_game(games.Setup(spec, models.logistic_regression(64, 10), d, learning_rate=0.5), c,
                               n_trials=trials, seed=seed, chunk_size=500, progress=False,
                               scores=[mia.LikelihoodRatio()])
    si, so = out.in_scores("llr").numpy(), out.out_scores("llr").numpy()
    cmp = comparator.compare_membership(si, so, spec, delta=DELTA, significance=significance)
    b = acc.shuffle_bounds(spec, DELTA)
    reps = certifiable_on_shuffle_pair(spec, si.size, so.size, significance)
    cert = reps[len(reps) // 2]
    lower = cmp.epsilon_lower.value
    return {"row": SHUFFLE_ROW, "threat": out.threat, "trials": trials, "epsilon_lower": lower,
            "epsilon_poisson": b.poisson.value, "shuffle_lower": b.lower, "shuffle_upper": b.upper.value,
            "epsilon_certifiable_pair": cert, "certifiable_range": (reps[0], reps[-1]),
            "ratio": tightness.certifiable_ratio(lower, cert), "violated": cmp.violated,
            "exceeds_poisson": lower > b.poisson.value, "below_upper": lower <= b.upper.value,
            "seconds": time.perf_counter() - t0}


def _peer(name: str, sigma: float = SIGMA) -> float | None:
    try:
        import dp_accounting as dpa
    except ImportError:
        return None
    add_remove, replace_one = dpa.NeighboringRelation.ADD_OR_REMOVE_ONE, dpa.NeighboringRelation.REPLACE_ONE
    match name:
        case "poisson_add_remove":
            ev, rel = dpa.PoissonSampledDpEvent(Q, dpa.GaussianDpEvent(sigma)), add_remove
        case "poisson_replace_one":
            ev, rel = dpa.PoissonSampledDpEvent(Q, dpa.GaussianDpEvent(sigma)), replace_one
        case "fixed_size_add_remove":  # docs/dominating-pairs.md §4: Poisson add/remove with q = b/N at σ/2
            ev, rel = dpa.PoissonSampledDpEvent(B / N, dpa.GaussianDpEvent(sigma / 2)), add_remove
        case "truncated_poisson_add_remove":
            ev = dpa.TruncatedSubsampledGaussianDpEvent(dataset_size=N, sampling_probability=Q,
                                                        truncated_batch_size=B_MAX, noise_multiplier=sigma)
            rel = add_remove
        case _:
            return None
    acct = dpa.pld.PLDAccountant(neighboring_relation=rel, value_discretization_interval=1e-3)
    return float(acct.compose(dpa.SelfComposedDpEvent(ev, T)).get_epsilon(DELTA))


def run_row(name: str, spec: acc.DPSGD, trials: int, significance: float, seed: int = 0,
            replicates: int | None = None) -> dict:
    """One worst-case audit and its figures (a dict; see the module doc). ``replicates``: of every ε_certifiable
    (default 401 on curves, 11 on draws of the crafted pair). The headline ε_certifiable is the per-direction one
    where the accountant has a PLD (docs/worst-case.md, "ε_certifiable per direction"), else the symmetric curve's."""
    reps_curve, reps_pair = (CURVE_REPLICATES, 11) if replicates is None else (replicates, replicates)
    t0 = time.perf_counter()
    d = data.digits().subset(slice(0, 0))  # every record is crafted
    model = models.logistic_regression(64, 10)
    c = worst_case.crafted(spec, dim=650)
    hidden = name.startswith("hidden_state")
    # hidden state: Σ_t o_t = ⟨θ_0 − θ_T, e⟩·E|B|/(ηC), a function of the final parameters (θ_0 known),
    # and a sufficient statistic of the hidden-state pair (tests/attacks/test_worst_case.py)
    score = mia.InnerProductSum() if hidden else mia.LikelihoodRatio()
    out = games.multi_run_game(games.Setup(spec, model, d, learning_rate=0.5), c, n_trials=trials, seed=seed,
                               chunk_size=500, progress=False, scores=[score])
    key = mia.score_name(score)
    si, so = out.in_scores(key).numpy(), out.out_scores(key).numpy()
    curves = comparator.analytical_curves(spec, DELTA)
    cmp = comparator.compare_membership(si, so, spec, delta=DELTA, significance=significance, curves=curves)
    curve, which = curves.best, curves.best_method  # the tightest method's curve, as audit.runs._certifiable
    reps = tightness.certifiable_replicates(curve, si.size, so.size, delta=DELTA, significance=significance,
                                            replicates=reps_curve)
    cert = float(reps[len(reps) // 2])
    lower = cmp.epsilon_lower.value
    directional = None
    if which == "pld":  # the optimal audit of one ordered pair (D, D') on its own direction's curve (audit.tightness)
        d_name, d_reps = tightness.certifiable_directional(directional_tradeoff_curves(spec), si.size, so.size,
                                                           delta=DELTA, significance=significance,
                                                           replicates=reps_curve)
        directional = {"direction": d_name, "epsilon_certifiable": float(d_reps[len(d_reps) // 2]),
                       "range": (float(d_reps[0]), float(d_reps[-1]))}
    pair = None
    if not hidden and isinstance(spec.sampling, (acc.Poisson, acc.FixedSize, acc.TruncatedPoisson)):
        # draws of the crafted pair itself, exact LLR (as the shuffle and random-allocation rows)
        p_reps = certifiable_on_pair(lambda sp, n, generator: worst_case.sample_pair(sp, c, n, generator=generator),
                                     lambda x, sp: worst_case.llr(x, sp, c), spec, si.size, so.size, significance,
                                     replicates=reps_pair)
        pair = {"epsilon_certifiable": p_reps[len(p_reps) // 2], "range": (p_reps[0], p_reps[-1])}
    realised = None
    if isinstance(spec.sampling, acc.TruncatedPoisson):  # the realised pair's own curve (Poisson at p)
        from accountants.pld.accountant import _realised

        r_spec = _realised(spec)
        r_curve = comparator.analytical_curves(r_spec, DELTA).tight
        r_reps = tightness.certifiable_replicates(r_curve, si.size, so.size, delta=DELTA, significance=significance,
                                                  replicates=reps_curve)
        realised = {"spec": r_spec, "epsilon_certifiable": float(r_reps[len(r_reps) // 2]),
                    "range": (float(r_reps[0]), float(r_reps[-1])),
                    "epsilon_pld": float(acc.epsilon(r_spec, DELTA, method="pld").value)}
    symmetric = {"epsilon_certifiable": cert, "range": (float(reps[0]), float(reps[-1])),
                 "ratio": tightness.certifiable_ratio(lower, cert)}
    if directional is not None:  # the headline: what an optimal audit of one ordered pair can certify
        cert, reps = directional["epsilon_certifiable"], directional["range"]
    return {"row": name, "threat": "final_parameters_constant_gradient_canary" if hidden else out.threat,
            "symmetric": symmetric, "certifiable_on": f"direction {directional['direction']}" if directional
            else "symmetric curve",
            "realised_pair": realised, "directional": directional, "pair": pair,
            "ratio_directional": tightness.certifiable_ratio(lower, directional["epsilon_certifiable"])
            if directional else None,
            "ratio_pair": tightness.certifiable_ratio(lower, pair["epsilon_certifiable"]) if pair else None,
            "epsilon_hidden_state_pair": hidden_state_epsilon(spec) if hidden else None,
            "trials": trials, "epsilon_lower": lower, "epsilon_certifiable": cert,
            "certifiable_range": (float(reps[0]), float(reps[-1])), "curve": which,
            "ceiling": st.ceiling(si.size, so.size, delta=DELTA, significance=significance),
            "epsilon_tight": curves.epsilon_tight, "epsilon_rdp": curves.epsilon_rdp,
            "ratio": tightness.certifiable_ratio(lower, cert), "violated": cmp.violated,
            "peer_dp_accounting": _peer(name, spec.noise_multiplier), "seconds": time.perf_counter() - t0}


def _f(x, w=7, p=3):
    return f"{'n/a':>{w}}" if x is None else f"{x:{w}.{p}f}"


def _print_directional(r: dict) -> None:
    """The row's other ε_certifiable figures: on the symmetric curve (when the headline is per direction) and on
    draws of its crafted pair, where computed."""
    sy, pr = r["symmetric"], r["pair"]
    if r["directional"] is None and pr is None:
        return
    stxt = (f"headline on {r['certifiable_on']}; symmetric curve: ε_cert {sy['epsilon_certifiable']:.3f} "
            f"({sy['range'][0]:.2f}-{sy['range'][1]:.2f}), ratio {sy['ratio']:.2f}" if r["directional"]
            else "direction: n/a (no PLD)")
    ptxt = (f"; crafted pair drawn: ε_cert {pr['epsilon_certifiable']:.3f} ({pr['range'][0]:.2f}-"
            f"{pr['range'][1]:.2f}), ratio {r['ratio_pair']:.2f}" if pr else "")
    print(f"{'':26} {stxt}{ptxt}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--significance", type=float, default=0.05)
    ap.add_argument("--rows", default=",".join([*ROWS, SHUFFLE_ROW, ALLOCATION_ROW]))
    ap.add_argument("--shuffle-trials", type=int, default=10_000)
    ap.add_argument("--allocation-trials", type=int, default=10_000)
    ap.add_argument("--sigma", type=float, default=SIGMA)
    ap.add_argument("--seed", type=int, default=0, help="the audit's seed (rows of run_row)")
    ap.add_argument("--replicates", type=int, default=None,
                    help="replicates of every ε_certifiable (rows of run_row) (default 401 on curves, 11 on pairs)")
    args = ap.parse_args()
    specs = rows(args.sigma)
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; trials {args.trials}, "
          f"s = {args.significance}, δ = {DELTA:g}, σ = {args.sigma}, T = {T}")
    head = (f"{'row':26} {'ε_lower':>7} {'ε_cert':>7} {'(range)':>13} {'curve':>5} {'ratio':>6} {'ceiling':>7} "
            f"{'ε_tight':>7} {'ε_rdp':>8} {'peer':>7} {'viol':>5} {'sec':>5}")
    print(head)
    for name in args.rows.split(","):
        if name == SHUFFLE_ROW:
            r = run_shuffle_row(args.shuffle_trials, args.significance)
            lo, hi = r["certifiable_range"]
            print(f"{name:26} {_f(r['epsilon_lower'])} {_f(r['epsilon_certifiable_pair'])} "
                  f"{f'({lo:.2f}-{hi:.2f})':>13} {'pair':>5} {_f(r['ratio'], 6, 2)}   [σ = 0.8, Shuffle(5, 500), "
                  f"T = 200, {r['trials']} trials] Poisson ε {r['epsilon_poisson']:.3f}, shuffle lower "
                  f"{r['shuffle_lower']:.3f}, upper {r['shuffle_upper']:.3f}; exceeds Poisson: "
                  f"{r['exceeds_poisson']}, below upper: {r['below_upper']}; viol {r['violated']} "
                  f"{r['seconds']:.0f} s", flush=True)
            continue
        if name == ALLOCATION_ROW:
            r = run_allocation_row(args.allocation_trials, args.significance, args.seed, replicates=args.replicates)
            lo, hi = r["certifiable_range"]
            plo, phi = r["pair_range"]
            print(f"{name:26} {_f(r['epsilon_lower'])} {_f(r['epsilon_certifiable'])} {f'({lo:.2f}-{hi:.2f})':>13} "
                  f"{r['curve']:>5} {_f(r['ratio'], 6, 2)} {_f(r['ceiling'])}   [σ = 1, RandomAllocation(1, 5), "
                  f"T = 10, {r['trials']} trials] realised pair: ε_cert {r['epsilon_certifiable_pair']:.3f} "
                  f"({plo:.2f}-{phi:.2f}), ratio {r['ratio_pair']:.2f}; certified lower {r['certified_lower']:.3f}, "
                  f"ε_rdp {r['epsilon_rdp']:.3f}, Poisson q = 1/t {r['epsilon_poisson']:.3f}; viol {r['violated']} "
                  f"{r['seconds']:.0f} s", flush=True)
            _print_directional(r)
            continue
        r = run_row(name, specs[name], args.trials, args.significance, args.seed, args.replicates)
        lo, hi = r["certifiable_range"]
        print(f"{name:26} {_f(r['epsilon_lower'])} {_f(r['epsilon_certifiable'])} {f'({lo:.2f}-{hi:.2f})':>13} "
              f"{r['curve']:>5} {_f(r['ratio'], 6, 2)} {_f(r['ceiling'])} {_f(r['epsilon_tight'])} "
              f"{_f(r['epsilon_rdp'], 8, 2)} {_f(r['peer_dp_accounting'])} {r['violated']!s:>5} "
              f"{r['seconds']:5.0f}", flush=True)
        _print_directional(r)
        if r["realised_pair"] is not None:
            rp = r["realised_pair"]
            lo, hi = rp["range"]
            print(f"{'':26} realised pair {rp['spec'].sampling} (upper {rp['epsilon_pld']:.3f}): ε_cert "
                  f"{rp['epsilon_certifiable']:.3f} ({lo:.2f}-{hi:.2f}), ratio "
                  f"{tightness.certifiable_ratio(r['epsilon_lower'], rp['epsilon_certifiable']):.2f}", flush=True)
        if r["epsilon_hidden_state_pair"] is not None:
            print(f"{'':26} hidden-state pair's own ε (PLD): {r['epsilon_hidden_state_pair']:.3f}", flush=True)
    print("ε_lower: audit lower bound at 1 − s; ε_cert: optimal attack on the tightest curve (per ordered direction "
          f"where a PLD exists), same design (median of {args.replicates or CURVE_REPLICATES} seeded replicates); "
          "ε_tight/ε_rdp: accountant upper bounds; peer: dp_accounting PLD ε.")


if __name__ == "__main__":
    main()
