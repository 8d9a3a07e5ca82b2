"""`dpaudit score --design one-run` (docs/own-training.md §5): the best sound bound, ε_certifiable per statistic,
and --independent-canaries paid for by Bonferroni; `audit_trainer(game="one_run")`."""

import sys
from pathlib import Path

import numpy as np
import pytest

import accountants as acc
from audit import score, statistics
from audit.cli import main

ROOT = Path(__file__).resolve().parents[2]
SPEC = acc.DPSGD(3.0, acc.Poisson(0.5), 10)


def _gaussian_canaries(m=600, mu=2.0, seed=0):
    """m independent canaries, each in with probability ½, score N(μ, 1) in and N(0, 1) out."""
    rng = np.random.default_rng(seed)
    member = rng.random(m) < 0.5
    return member, rng.standard_normal(m) + mu * member


def test_one_run_epsilon_lower_is_steinke_at_the_full_significance_with_certifiable_per_statistic():
    member, s = _gaussian_canaries()
    r = score.audit_scores({"member": member, "score": s}, SPEC, delta=1e-5, design="one_run")
    a = r["audits"][0]
    steinke = statistics.epsilon_one_run(s, member, delta=1e-5, significance=0.05)
    order = statistics.epsilon_one_run_order(s, member, delta=1e-5, significance=0.05)
    assert a["epsilon_lower"]["value"] == steinke.value > 0  # recomputed by the statistic itself
    st = {x["name"]: x for x in a["one_run_statistics"]}
    assert st["steinke"]["in_epsilon_lower"] and st["steinke"]["confidence"] == 0.95
    assert not st["order"]["in_epsilon_lower"] and st["order"]["value"] == order.value
    # ε_certifiable: the audit's, the same number for the statistic behind ε_lower, and one for the order statistic
    assert a["epsilon_certifiable"] is not None and st["steinke"]["epsilon_certifiable"] == a["epsilon_certifiable"]
    assert st["order"]["epsilon_certifiable"] is not None
    assert st["fdp_gdp"]["epsilon_certifiable"] is None  # a GDP μ bound: no ε to certify


def test_independent_canaries_take_the_largest_bound_each_at_a_third_of_the_significance():
    member, s = _gaussian_canaries(m=300, seed=1)
    r = score.audit_scores({"member": member, "score": s}, SPEC, delta=1e-5, design="one_run",
                           independent_canaries=True)
    a = r["audits"][0]
    third = [statistics.epsilon_one_run(s, member, delta=1e-5, significance=0.05 / 3),
             statistics.epsilon_one_run_order(s, member, delta=1e-5, significance=0.05 / 3),
             statistics.epsilon_one_run_scores(s, member, delta=1e-5, significance=0.05 / 3)]
    assert a["epsilon_lower"]["value"] == max(b.value for b in third)
    assert a["epsilon_lower"]["confidence"] == 1 - 0.05 / 3
    st = {x["name"]: x for x in a["one_run_statistics"]}
    assert st["steinke"]["in_epsilon_lower"] and st["order"]["in_epsilon_lower"] and st["scores"]["in_epsilon_lower"]
    assert st["steinke"]["confidence"] == st["order"]["confidence"] == st["scores"]["confidence"] == 1 - 0.05 / 3
    # paying for the max: each bound at s/3 is below the same bound at s
    default = score.audit_scores({"member": member, "score": s}, SPEC, delta=1e-5, design="one_run")
    assert third[0].value <= default["audits"][0]["epsilon_lower"]["value"]


def _subsampled_canaries(m=4000, q=0.3, mu=2.5, seed=3):
    """m independent canaries: in, the score is N(μ, 1) with probability q and N(0, 1) otherwise (one subsampled
    Gaussian step): one-sided leakage, where the score statistic beats the guesses-only ones (docs/auditing.md)."""
    rng = np.random.default_rng(seed)
    member = rng.random(m) < 0.5
    return member, rng.standard_normal(m) + mu * (member & (rng.random(m) < q))


def test_certifiable_replays_the_statistic_behind_epsilon_lower():
    """The audit's ε_certifiable is that of the statistic that gave ε_lower, whichever it is (a merge once replayed
    Steinke's for every method but the order statistic's: 0.106 beside a score bound of 1.84)."""
    bests = []
    for member, s in (_subsampled_canaries(), _gaussian_canaries(m=300, seed=1)):
        a = score.audit_scores({"member": member, "score": s}, SPEC, delta=1e-5, design="one_run",
                               independent_canaries=True)["audits"][0]
        st = {x["name"]: x for x in a["one_run_statistics"]}
        best = max(("steinke", "order", "scores"), key=lambda k: st[k]["value"])
        assert a["epsilon_lower"]["value"] == st[best]["value"]
        assert a["epsilon_certifiable"] == st[best]["epsilon_certifiable"] is not None
        bests.append(best)
    assert bests[0] == "scores"  # seed 3: 2.30 against order's 1.71 and Steinke's 1.40, so the fix is exercised


def test_independent_canaries_are_one_run_only_and_a_bool():
    member, s = _gaussian_canaries(m=50)
    with pytest.raises(acc.InputError, match=r"independent_canaries \(--independent-canaries\) applies to design "
                                             r"'one_run' only"):
        score.audit_scores({"member": member, "score": s}, SPEC, delta=1e-5, independent_canaries=True)
    with pytest.raises(acc.InputTypeError, match="independent_canaries must be True or False"):
        score.audit_scores({"member": member, "score": s}, SPEC, delta=1e-5, design="one_run",
                           independent_canaries="yes")


def test_certifiable_is_skipped_above_the_row_limit(monkeypatch):
    member, s = _gaussian_canaries(m=100)
    monkeypatch.setattr(score, "CERTIFIABLE_MAX_CANARIES", 99)
    a = score.audit_scores({"member": member, "score": s}, SPEC, delta=1e-5, design="one_run")["audits"][0]
    assert a["epsilon_certifiable"] is None and all(x["epsilon_certifiable"] is None for x in a["one_run_statistics"])
    assert a["epsilon_lower"]["value"] == statistics.epsilon_one_run(s, member, delta=1e-5).value


def test_cli_lists_which_statistic_certified_what(tmp_path, capsys):
    member, s = _gaussian_canaries(m=300, seed=2)
    path = tmp_path / "s.csv"
    path.write_text("member,score\n" + "".join(f"{int(m)},{float(v)!r}\n" for m, v in zip(member, s, strict=True)))
    args = ["score", str(path), "--noise-multiplier", "3", "--sample-rate", "0.5", "--steps", "10", "--delta",
            "1e-5", "--design", "one-run"]
    assert main([*args, "--independent-canaries"]) in (0, 1)
    out = capsys.readouterr().out
    assert "one-run statistics (which certified what):" in out
    assert "s.csv: steinke: eps >= " in out and "s.csv: order: eps >= " in out and "s.csv: scores: eps >= " in out
    assert out.count("; in eps_lower") == 3
    assert main([*args[:-2], "--independent-canaries"]) == 2  # multi-run: refused, naming the flag
    assert "--independent-canaries" in capsys.readouterr().err


def test_audit_trainer_plays_the_one_run_game():
    sys.path.insert(0, str(ROOT / "examples" / "own_training"))
    try:
        from torch_trainer import train
    finally:
        sys.path.remove(str(ROOT / "examples" / "own_training"))
    r = score.audit_trainer(train, SPEC, game="one-run", canaries=60, threat="black_box")
    (a,) = r["audits"]
    assert (a["design"], a["threat_model"], a["canary"], a["trials"], a["rows"]) == \
        ("one_run", "black_box", "out_of_distribution", 1, 60)
    assert r["config"]["audit"]["game"] == "one_run" and r["config"]["variant"] == []
    r = score.audit_trainer(train, SPEC, game="one_run", canaries=40, canary="dirac")  # the hook: white box
    assert (r["audits"][0]["threat_model"], r["audits"][0]["canary"], r["audits"][0]["rows"]) == \
        ("white_box", "dirac", 40)
    with pytest.raises(acc.InputError, match="game must be one of"):
        score.audit_trainer(train, SPEC, game="cyclic")

