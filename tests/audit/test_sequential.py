"""The sequential violation test (audit/statistics/sequential.py) and its wiring (audit.max_trials, issue 25)."""

import itertools
import json
import textwrap

import numpy as np
import pytest
from scipy.stats import norm

from accountants import InputError
from audit import config, model, runs
from audit import statistics as st
from audit.cli import main
from audit.statistics import sequential as sq

ALPHA = 0.05


def _flat(a):
    return np.zeros_like(a)  # f = 0: no box ever lies below it, and every look is futile


def _gdp(mu):
    return lambda a: norm.cdf(norm.ppf(1 - np.clip(a, 0, 1)) - mu)  # the μ-GDP curve (Dong, Roth, Su Eq. 6)


def test_looks_and_levels_are_fixed_by_the_ceiling_and_sum_to_alpha():
    assert sq.look_schedule(20_000, growth=2) == (250, 500, 1000, 2000, 4000, 8000, 16000, 20000)
    assert sq.look_schedule(20_000) == (250, 354, 500, 707, 1000, 1414, 2000, 2828, 4000, 5657, 8000, 11314, 16000,
                                        20000)  # the default: each look √2 times the last
    assert sq.look_schedule(1000) == (250, 354, 500, 707, 1000)
    assert sq.look_schedule(250) == (250,) and sq.look_schedule(100) == (100,)  # one look: the fixed-N test
    assert sq.look_schedule(4000, first=125, growth=2) == (125, 250, 500, 1000, 2000, 4000)
    lv = sq.look_levels(8, 0.05)
    assert sum(lv) == pytest.approx(0.05, rel=1e-12) and lv[-1] == pytest.approx(0.025)  # half at the ceiling
    assert len(set(lv[:-1])) == 1 and sq.look_levels(1, 0.05) == (0.05,)
    assert sq.look_levels(3, 0.05, final_share=1.0) == (0.0, 0.0, 0.05)
    for bad, match in [(lambda: sq.look_schedule(1), "max_trials must be an integer ≥ 2"),
                       (lambda: sq.look_schedule(True), "max_trials"),
                       (lambda: sq.look_schedule(100, first=1.5), "first must be an integer ≥ 2"),
                       (lambda: sq.look_schedule(100, growth=1.0), r"growth must be a number in \[1.01, 16\]"),
                       (lambda: sq.look_levels(0, 0.05), "n_looks must be an integer ≥ 1"),
                       (lambda: sq.look_levels(3, 1.0), r"significance must be in \(0, 1\)"),
                       (lambda: sq.look_levels(3, 0.05, final_share=0.0), r"final_share must be a number in \(0, 1\]")]:
        with pytest.raises(InputError, match=match):
            bad()


P0 = 0.3


def _binomial_reject(xin, xout, level):
    """An exact one-sided Clopper–Pearson test of H0: P(in-score > 1 − P0) ≥ P0, whose truth is exactly P0."""
    k = int(np.sum(xin > 1 - P0))
    return bool(st.clopper_pearson_upper(k, xin.size, level) < P0)


def test_alpha_spending_holds_at_the_null_boundary_where_the_naive_repeated_test_overshoots():
    """At the boundary of an exact test, re-testing at the full α at every look fires far more often than α.

    600 seeded replicates of 2,000 uniform scores, looks 125, 250, 500, 1000, 2000; the look test is the exact
    one-sided binomial test above (true rate exactly P0). Measured: sequential 15/600 = 0.025 (95 % Clopper–Pearson
    interval [0.014, 0.041]), naive 75/600 = 0.125 ([0.100, 0.154], above α). The sequential rate may not exceed α.
    """
    seq = naive = 0
    reps = 600
    for r in range(reps):
        rng = np.random.default_rng(r)
        x, m = rng.random(2000), rng.random(2000) < 0.5
        res = sq.sequential_test(x, m, _flat, significance=ALPHA, max_trials=2000, first=125, growth=2,
                                 futility=False, reject=_binomial_reject)
        seq += res.violated
        naive += any(_binomial_reject(x[:n][m[:n]], x[:n][~m[:n]], ALPHA) for n in res.looks)
    assert seq / reps <= ALPHA
    lo, _ = st.clopper_pearson(naive, reps, 0.05)
    assert lo > ALPHA, naive / reps  # the naive test demonstrably overshoots; the same data, the same looks


def test_the_exact_look_test_at_the_gdp_boundary_keeps_its_level():
    """Gaussian scores exactly on the μ-GDP curve the test is run against (the null's boundary): alarms ≤ α.

    100 seeded replicates of 2,000 trials, looks 125 … 2000, no futility; the box test (before) gave 0 alarms, the
    exact threshold test each look now runs gives 2 (one-sided 95 % CP upper bound 0.062; its level is 0.05).
    """
    alarms = 0
    for r in range(100):
        rng = np.random.default_rng(1000 + r)
        m = rng.random(2000) < 0.5
        x = rng.standard_normal(2000) + 1.0 * m
        alarms += sq.sequential_test(x, m, _gdp(1.0), significance=ALPHA, max_trials=2000, first=125,
                                     futility=False).violated
    assert alarms <= 5  # ≤ α·reps; measured 2


def test_futility_only_removes_rejections_and_alpha_is_monotone():
    """Futility stops with a pass: with it a run rejects only where it rejects without it, at the same look."""
    for r in range(30):
        rng = np.random.default_rng(r)
        mu = [0.0, 1.0, 1.6, 2.5][r % 4]
        m = rng.random(2000) < 0.5
        x = rng.standard_normal(2000) + mu * m
        kw = dict(max_trials=2000, first=125)
        with_f = sq.sequential_test(x, m, _gdp(1.0), significance=ALPHA, **kw)
        without = sq.sequential_test(x, m, _gdp(1.0), significance=ALPHA, futility=False, **kw)
        if with_f.violated:
            assert without.violated and without.trials == with_f.trials
        assert with_f.trials <= without.trials
        wider = sq.sequential_test(x, m, _gdp(1.0), significance=2 * ALPHA, futility=False, **kw)
        if without.violated:  # a larger α rejects no later
            assert wider.violated and wider.trials <= without.trials


def test_a_larger_futility_z_stops_no_later_and_rejects_only_where_a_smaller_one_does():
    """futile's projected rates only move toward the claim as z grows, so a larger z is futile at every look a
    smaller one is: it stops no later, and its violations are the smaller z's, at the same look. (This is what lets
    bench_fault_detection's ``sequential --replay-z`` replay a larger z on the trials a smaller one played.)"""
    assert sq.FUTILITY_Z == 0.0  # the default since issue 25's last round (0.25 before): docs/fault-detection.md
    for r in range(24):
        rng = np.random.default_rng(100 + r)
        mu = [0.0, 1.0, 1.3, 1.6][r % 4]
        m = rng.random(2000) < 0.5
        x = rng.standard_normal(2000) + mu * m
        runs_z = [sq.sequential_test(x, m, _gdp(1.0), significance=ALPHA, max_trials=2000, first=125, futility_z=z)
                  for z in (-0.5, 0.0, 0.25, 1.0)]
        for lo, hi in itertools.pairwise(runs_z):
            assert hi.trials <= lo.trials
            if hi.violated:
                assert lo.violated and lo.trials == hi.trials
    noise = np.random.default_rng(0).standard_normal(400)
    for bad in (float("nan"), float("inf"), True, "0"):
        with pytest.raises(InputError, match="z must be a finite number"):
            sq.futile(noise[:200], noise[200:], _gdp(1.0), n_final=2000, level_final=0.025, z=bad)


def test_decisions_edges_and_replay():
    rng = np.random.default_rng(7)
    m = rng.random(1000) < 0.5
    blatant = np.where(m, 10.0, 0.0) + 0.01 * rng.standard_normal(1000)
    res = sq.sequential_test(blatant, m, _gdp(1.0), significance=ALPHA, max_trials=1000)
    assert (res.stopped, res.trials, len(res.evaluated)) == ("violation", 250, 1) and res.evaluated[0].margin > 0
    noise = rng.standard_normal(1000)
    res = sq.sequential_test(noise, m, _gdp(1.0), significance=ALPHA, max_trials=1000)
    assert res.stopped == "futility" and res.trials == 250 and res.level == res.levels[0]
    res = sq.sequential_test(noise, m, _gdp(1.0), significance=ALPHA, max_trials=1000, futility=False)
    assert (res.stopped, res.trials, [x.decision for x in res.evaluated]) == (
        "ceiling", 1000, ["continue"] * 4 + ["ceiling"])
    short = sq.sequential_test(noise[:400], m[:400], _gdp(1.0), significance=ALPHA, max_trials=1000, futility=False)
    assert (short.stopped, short.trials, short.next_look) == ("continue", 354, 500)  # resume: play up to 500
    none = sq.sequential_test(noise[:100], m[:100], _gdp(1.0), significance=ALPHA, max_trials=1000)
    assert (none.stopped, none.trials, none.level, none.next_look) == ("continue", 0, None, 250)
    one_side = sq.sequential_test(noise, np.ones(1000, bool), _gdp(1.0), significance=ALPHA, max_trials=1000)
    assert one_side.stopped == "ceiling" and not one_side.violated  # no out trial: no box, never a violation
    # replay: a prefix that contains the deciding look gives the same decision (an interrupted audit resumes to it)
    mid = np.where(m, 1.9, 0.0) + rng.standard_normal(1000)
    full = sq.sequential_test(mid, m, _gdp(1.0), significance=ALPHA, max_trials=1000)
    part = sq.sequential_test(mid[:full.trials], m[:full.trials], _gdp(1.0), significance=ALPHA, max_trials=1000)
    assert part == full
    with pytest.raises(InputError, match="one length"):
        sq.sequential_test(noise, m[:10], _gdp(1.0), significance=ALPHA, max_trials=1000)
    with pytest.raises(InputError, match="members must be booleans"):
        sq.sequential_test(noise, m.astype(int), _gdp(1.0), significance=ALPHA, max_trials=1000)


# ------------------------------------------------------------------------------------------ configuration

BLACK = '[training]\ntrainer = "no_such_mod_seq:train"\nn_records = 30\nnoise_multiplier = 2.0\nsteps = 3\n'


def test_the_black_box_default_is_sequential_unless_trials_are_fixed():
    assert config.SEQUENTIAL_FIRST_LOOK == sq.FIRST_LOOK  # the config's range names the statistics' first look
    c = config.loads(BLACK)
    assert {v.audit.max_trials for v in config.variants(c)} == {config.SEQUENTIAL_MAX_TRIALS}
    assert config.loads(BLACK + "[audit]\ntrials = 300\n").audit.max_trials == 0  # a fixed N asked for
    assert config.loads(BLACK + "[audit]\nmax_trials = 0\n").audit.max_trials == 0
    assert config.loads(BLACK + "[audit]\nmax_trials = 1000\ntime_budget = 60\n").audit.time_budget == 60.0
    # futility's z per audit (docs/fault-detection.md, "The exact threshold test"); a config's own z wins everywhere
    assert {v.name: v.audit.futility_z for v in config.variants(c)} == {"main": 0.0, "mean_image": 0.5}
    assert config.BLACK_BOX_FUTILITY_Z == {"main": 0.0, "mean_image": 0.5}
    mine = config.loads(BLACK + "[audit]\nfutility_z = -0.25\n")
    assert {v.audit.futility_z for v in config.variants(mine)} == {-0.25}
    assert {v.audit.futility_z for v in config.variants(config.loads(BLACK + "[audit]\ntrials = 300\n"))} == {0.0}
    assert config.loads("[audit]\ntrials = 64").audit.max_trials == 0  # dpaudit's own trainer: unchanged
    own = config.loads(BLACK + '[[variant]]\nname = "a"\naudit.game = "one_run"\ncanary.count = 4\n')
    assert own.audit.max_trials == 0  # a config's own variants keep the fixed design
    text = config.dumps(c)  # resolved config.toml round trip (resume)
    assert config.loads(text) == c


@pytest.mark.parametrize(("extra", "match"), [
    ("[audit]\nmax_trials = 100\n", r"audit.max_trials must be 0 \(the fixed design: audit.trials trials\) or an "
                                    r"integer ≥ 250 .*got 100"),
    ("[audit]\nmax_trials = -1\n", "audit.max_trials must be 0"),
    ("[audit]\nmax_trials = 2.5e3\n", "audit.max_trials must be 0"),
    ("[audit]\nmax_trials = 2000000\n", "audit.max_trials = 2000000 is above the documented limit 1000000"),
    ("[audit]\ntrials = 300\ntime_budget = 10\n", r"audit.time_budget applies to the sequential design only"),
    ("[audit]\nmax_trials = 1000\ntime_budget = -1\n", r"audit.time_budget must be a number in \[0, inf\)"),
    ("[audit]\ntrials = 300\nfutility_z = 0.5\n", r"audit.futility_z applies to the sequential design only"),
    ("[audit]\nfutility_z = 3\n", r"audit.futility_z must be a number in \[-2, 2\]; got 3"),
    ("[audit]\nfutility_z = nan\n", r"audit.futility_z must be a finite number"),
    ("[audit]\nmax_trials = 1000\ngame = \"one_run\"\n[canary]\ncount = 4\nkind = \"blank\"\n"
     "[attack]\nthreat_model = \"black_box\"\nscore = \"loss\"\n", "audit.max_trials = 1000 .* 'multi_run'"),
])
def test_bad_sequential_keys_name_the_key_and_range(extra, match):
    with pytest.raises(InputError, match=match):
        config.loads(BLACK + extra)


def test_max_trials_needs_a_user_trainer():
    with pytest.raises(InputError, match=r"max_trials = 1000 \(the sequential design\) applies to a user trainer"):
        config.loads("[audit]\nmax_trials = 1000\n")


def test_an_older_resolved_config_without_the_keys_resumes_with_the_fixed_design(tmp_path):
    text = config.dumps(config.loads(BLACK + "[audit]\ntrials = 300\n"))
    old = "\n".join(x for x in text.splitlines()
                    if not x.startswith(("max_trials", "time_budget", "futility_z"))) + "\n"
    (tmp_path / "config.toml").write_text(old, encoding="utf-8")
    assert config.load_resolved(tmp_path / "config.toml").audit.max_trials == 0


# ------------------------------------------------------------------------------------------ runner and CLI

TRAINERS = textwrap.dedent('''
    import os
    import torch

    CALLS = [0]
    LEAK = float(os.environ.get("SEQ_LEAK", "0.1"))

    def _blank(x):
        return (x <= 0).all(1)  # the blank canary: every feature at or below the data's mean

    def quiet(x, y, *, seed):
        """Learns nothing: a model fixed by the seed (a correct trainer's best case)."""
        g = torch.Generator().manual_seed(seed)
        m = torch.nn.Linear(x.shape[1], 10)
        with torch.no_grad():
            m.weight.copy_(0.01 * torch.randn(m.weight.shape, generator=g))
            m.bias.zero_()
        return m

    def leaky(x, y, *, seed):
        """In a tenth of its runs (seeded) the canary's label gets a large bias: a leak found after a few looks."""
        CALLS[0] += 1
        if CALLS[0] == int(os.environ.get("SEQ_CRASH_AT", "0")):
            raise RuntimeError("interrupted")
        g = torch.Generator().manual_seed(seed)
        m = torch.nn.Linear(x.shape[1], 10)
        with torch.no_grad():
            m.weight.zero_()
            m.bias.zero_()
            b = _blank(x)
            if bool(b.any()) and float(torch.rand((), generator=g)) < LEAK:
                m.bias[y[b][0]] = 5.0
        return m
''')
DESIGN = '[canary]\nkind = "blank"\n[attack]\nthreat_model = "black_box"\nscore = "loss"\n'


def _cfg(tmp_path, fn: str, extra: str = "") -> object:
    (tmp_path / "seq_mod.py").write_text(TRAINERS, encoding="utf-8")
    cfg = tmp_path / f"{fn}.toml"
    cfg.write_text(f'[training]\ntrainer = "seq_mod:{fn}"\nn_records = 30\nnoise_multiplier = 2.0\nsteps = 3\n'
                   f'{extra}[claim]\ndelta = 1e-5\n', encoding="utf-8")
    return cfg


def test_check_of_a_correct_black_box_trainer_stops_early_and_reports_it(tmp_path, capsys):
    """The default design (blank + mean image, sequential): both audits stop for futility at the first look."""
    rc = main(["check", str(_cfg(tmp_path, "quiet")), "--out", str(tmp_path / "run"), "--quiet"])
    assert rc == 0
    result = model.load_result(tmp_path / "run")
    assert [a.sequential.stopped for a in result.audits] == ["futility", "futility"]
    assert [a.trials for a in result.audits] == [250, 250]  # of 20,000; today's fixed design: 2 x 2,000
    a = result.audits[0]
    assert a.sequential.looks[-1] == 20_000 and sum(a.sequential.levels) == pytest.approx(a.significance)
    assert a.epsilon_lower.confidence == pytest.approx(1 - a.significance)  # jointly over the looks, not 1 − α_1
    assert model.RunResult.from_json(json.loads(model.dumps(result))) == result
    report = (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
    assert "sequential design: 250 of at most 20000 trials, stopped by futility" in report
    assert "at look 1 the exact threshold test's p ≤ 1 against its level" in report  # p rounded up: an upper bound
    assert not a.violation.violated and a.violation.p_value == 1.0  # the exact test's verdict, its p recorded
    assert [v.audit.futility_z for v in config.variants(config.load_resolved(tmp_path / "run" / "config.toml"))] == [
        0.0, 0.5]


def test_an_interrupted_sequential_audit_resumes_to_the_same_decision(tmp_path, monkeypatch):
    cfg = _cfg(tmp_path, "leaky", "[audit]\nmax_trials = 1000\n" + DESIGN)
    _, whole = runs.execute(cfg, tmp_path / "whole", progress=False, claim=True)
    a = whole.audits[0]
    assert (a.sequential.stopped, a.trials) == ("violation", 707) and not whole.claim.holds  # measured, seed 0
    assert [x.decision for x in a.sequential.evaluated] == ["continue"] * 3 + ["violation"]
    # the verdict is the deciding look's exact threshold test, not a box (which may not lie below the curve here)
    v = a.violation
    assert v.violated and v.p_value is not None and v.p_value <= a.significance and "exact threshold test" in v.message
    assert any("exact threshold test" in r for r in whole.claim.reasons)
    assert a.sequential.evaluated[-1].p_value <= a.sequential.evaluated[-1].level < a.sequential.evaluated[0].p_value
    monkeypatch.setenv("SEQ_CRASH_AT", str(300 + 707))  # this process already made 707 calls
    with pytest.raises(InputError, match="interrupted"):
        runs.execute(cfg, tmp_path / "cut", progress=False, claim=True)
    trials = tmp_path / "cut" / "audits" / "main" / "trials.jsonl"
    assert len(trials.read_text().splitlines()) == 299  # the first look (250) decided "continue"; 299 kept
    monkeypatch.delenv("SEQ_CRASH_AT")
    _, resumed = runs.execute(None, tmp_path / "cut", resume=True, progress=False, claim=True)
    assert resumed.audits[0].sequential == a.sequential and resumed.audits[0].epsilon_lower == a.epsilon_lower
    assert len(trials.read_text().splitlines()) == 707


def test_a_time_budget_ends_the_audit_after_a_look_with_a_pass(tmp_path):
    """The first look is always played; a budget spent by then stops the audit there (no violation claimed)."""
    cfg = _cfg(tmp_path, "leaky", "[audit]\nmax_trials = 1000\ntime_budget = 1e-6\n" + DESIGN)
    _, result = runs.execute(cfg, tmp_path / "run", progress=False)
    q = result.audits[0].sequential
    assert (q.stopped, q.trials, q.time_budget) == ("time_budget", 250, 1e-6) and q.played >= 250
    assert not result.violation and "time budget of 1e-06 s ran out after look 1" in q.reason


def test_the_sequential_entry_round_trips_and_is_strict():
    q = model.Sequential(1000, (250, 354, 500, 707, 1000), (0.00625,) * 4 + (0.025,),
                         (model.SequentialLook(250, 0.00625, None, "continue"),  # -inf margin (one side empty): null
                          model.SequentialLook(354, 0.00625, -0.05, "futility")), "futility", 354, 500, 0.00625,
                         "futility at look 2 of 5", None)
    d = model.to_dict(q)
    assert model.from_dict(model.Sequential, d) == q
    with pytest.raises(InputError, match="unknown key 'extra'"):
        model.from_dict(model.Sequential, {**d, "extra": 1})
    with pytest.raises(InputError, match="missing the key 'stopped'"):
        model.from_dict(model.Sequential, {k: v for k, v in d.items() if k != "stopped"})
