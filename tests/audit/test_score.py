"""`dpaudit score` and audit.score.audit_scores: bring-your-own scores."""

import json
import math

import numpy as np
import pytest

import accountants as acc
from accountants.errors import InputError
from audit import comparator, score, statistics
from audit.cli import main
from audit.model import RESULT_FORMAT

SPEC = ["--noise-multiplier", "2", "--sample-rate", "0.5", "--steps", "10", "--delta", "1e-5"]


def _write_csv(path, member, sc, header="member,score"):
    lines = [header] + [f"{int(m)},{s}" for m, s in zip(member, sc, strict=True)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(("body", "line", "column"), [
    ("member,score\n1,0.5\n0,nan\n", 3, "score"),       # NaN score
    ("member,score\n1,0.5\nmaybe,0.1\n", 3, "member"),  # non-boolean member
    ("member,score\n1,0.5\n0,0.1\n1,\n", 4, "score"),   # missing value
    ("member,score\n1,0.5\n0,abc\n", 3, "score"),       # not a number
    ("member,score\n2,0.5\n", 2, "member"),              # 2 is not a boolean
])
def test_bad_row_names_line_and_column(tmp_path, capsys, body, line, column):
    p = tmp_path / "s.csv"
    p.write_text(body, encoding="utf-8")
    assert main(["score", str(p), *SPEC]) == 2
    err = capsys.readouterr().err
    assert f"line {line}" in err and f"column '{column}'" in err


def test_missing_column_and_jsonl_errors(tmp_path, capsys):
    p = tmp_path / "s.csv"
    p.write_text("member,value\n1,0.5\n", encoding="utf-8")
    assert main(["score", str(p), *SPEC]) == 2
    assert "no column 'score'" in capsys.readouterr().err
    j = tmp_path / "s.jsonl"
    j.write_text('{"member": 1, "score": 0.3}\n{"member": true}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"line 2, column 'score': missing"):
        score.read_scores(j)
    j.write_text('{"member": 1, "score": NaN}\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"line 1, column 'score': NaN"):
        score.read_scores(j)


def test_reader_accepts_booleans_inf_and_extra_columns(tmp_path):
    p = tmp_path / "s.csv"
    p.write_text("trial,Member,score\n0,true,inf\n1,False,-inf\n2,1,0.25\n", encoding="utf-8")
    m, s = score.read_scores(p)
    assert m.tolist() == [True, False, True] and s[0] == math.inf and s[1] == -math.inf and s[2] == 0.25
    j = tmp_path / "s.jsonl"
    j.write_text('{"member": true, "score": Infinity}\n\n{"member": 0, "score": -1.5}\n', encoding="utf-8")
    m, s = score.read_scores(j)
    assert m.tolist() == [True, False] and s.tolist() == [math.inf, -1.5]


def test_nonfinite_mapping_keeps_order_and_ties():
    s = np.array([-np.inf, 0.0, 3.0, np.inf, np.inf, -np.inf, 1.0])
    mapped, note = score.map_nonfinite(s)
    assert np.isfinite(mapped).all()
    assert (np.argsort(mapped, kind="stable") == np.argsort(s, kind="stable")).all()
    assert mapped[3] == mapped[4] > 3.0 and mapped[0] == mapped[5] < 0.0
    assert note is not None and note.pos_inf == 2 and note.neg_inf == 2
    assert score.map_nonfinite(np.array([1.0, 2.0]))[1] is None
    only_inf, _ = score.map_nonfinite(np.array([np.inf, -np.inf]))
    assert only_inf[0] > only_inf[1]


def test_inf_scores_give_the_bounds_of_any_order_equivalent_scores():
    # The bounds are rank-based, so +inf must act exactly like a score above every finite one.
    rng = np.random.default_rng(3)
    member = rng.random(400) < 0.5
    base = rng.normal(size=400) + 1.5 * member
    with_inf = base.copy()
    with_inf[member & (base > 2.0)] = np.inf
    big = base.copy()
    big[member & (base > 2.0)] = 1e6
    spec = acc.DPSGD(1.0, acc.Poisson(0.5), 10)
    curves = comparator.analytical_curves(spec, 1e-5)
    a = score.map_nonfinite(with_inf)[0]
    for x in (a, big):
        lb = statistics.epsilon_lower_bound(x[member], x[~member], delta=1e-5)
        assert lb.value == pytest.approx(statistics.epsilon_lower_bound(big[member], big[~member], delta=1e-5).value,
                                         rel=0, abs=0)
    r = score.audit_scores({"member": member, "score": with_inf}, spec, delta=1e-5)
    ref = comparator.compare_membership(big[member], big[~member], spec, delta=1e-5, curves=curves)
    assert r["audits"][0]["epsilon_lower"]["value"] == ref.epsilon_lower.value
    assert r["violation"] == ref.violated


def test_perfect_separation_closed_form():
    # 50 in, 50 out, perfectly separated. Bonferroni grid (ratio 2): levels {0,1,2,4,8,16,32} per side,
    # H = 14 thresholds, each rate at s/(2H) = 0.05/28. At count 0 the Clopper-Pearson upper limit is
    # u = 1 - (0.05/28)^(1/50) (closed form), so eps_lower = log((1 - delta - u) / u).
    member = np.array([True] * 50 + [False] * 50)
    sc = np.where(member, 1.0, 0.0)
    r = score.audit_scores({"member": member, "score": sc}, acc.DPSGD(1.0, acc.Poisson(0.5), 10), delta=1e-5)
    u = 1 - (0.05 / 28) ** (1 / 50)
    assert r["audits"][0]["epsilon_lower"]["value"] == pytest.approx(math.log((1 - 1e-5 - u) / u), rel=1e-9)


def test_cli_exit_codes_report_json_junit_and_claim(tmp_path, capsys):
    rng = np.random.default_rng(0)
    member = rng.random(600) < 0.5
    strong = rng.normal(size=600) + 4.0 * member  # ~ 4-GDP: far above sigma=2, q=0.5, T=10
    p = _write_csv(tmp_path / "strong.csv", member, strong)
    out = tmp_path / "rep"
    junit = tmp_path / "j.xml"
    assert main(["score", str(p), *SPEC, "--out", str(out), "--junit", str(junit), "--epsilon", "20"]) == 1
    text = capsys.readouterr()
    assert "VIOLATION" in text.err
    assert (out / "report.html").is_file() and (out / "result.json").is_file()
    assert json.loads((out / "result.json").read_text())["format"] == RESULT_FORMAT
    assert 'failures="1"' in junit.read_text()
    # null scores (independent of membership) under the same spec: no violation, exit 0; --json keys
    null = rng.normal(size=600)
    q = _write_csv(tmp_path / "null.csv", member, null)
    assert main(["score", str(q), *SPEC, "--json", "--significance", "0.1"]) == 0
    o = json.loads(capsys.readouterr().out)
    assert o["format"] == "dpaudit.score/1" and o["exit_code"] == 0 and not o["violation"]["violated"]
    assert o["epsilon_lower"]["bound"] == "lower" and o["epsilon_lower"]["confidence"] == pytest.approx(0.9)
    assert o["epsilon_lower"]["value"] <= o["ceiling"] and o["epsilon_tight"] <= o["epsilon_rdp"]


def test_one_run_design_and_function_api():
    rng = np.random.default_rng(1)
    member = rng.random(1000) < 0.5
    sc = rng.normal(size=1000) + 6.0 * member
    # sigma = 5, q = 0.5, T = 10: eps_tight ~ 1.28 (PLD), far below what 6-sigma-separated scores certify
    r = score.audit_scores({"member": member.astype(int), "score": sc}, acc.DPSGD(5.0, acc.Poisson(0.5), 10),
                           delta=1e-5, design="one-run")
    a = r["audits"][0]
    assert a["design"] == "one_run" and a["epsilon_lower"]["value"] > a["epsilon_tight"] and r["violation"]
    with pytest.raises(InputError, match="design must be one of"):
        score.audit_scores({"member": member, "score": sc}, acc.DPSGD(1.0, acc.Poisson(0.5), 10), delta=1e-5,
                           design="two-run")
    with pytest.raises(InputError, match="index 2"):
        score.audit_scores({"member": [1, 0, 1], "score": [0.1, 0.2, float("nan")]},
                           acc.DPSGD(1.0, acc.Poisson(0.5), 10), delta=1e-5)


def test_violation_message_prints_the_confidence_the_box_has():
    # Regression: a box at 1 - 0.05/12 was printed as a "100% box".
    # Rounded down (a printed confidence never overstates the bound's): 99.583… → "99.58%", not "99.6%";
    # 98.75 % (a one-run statistic at s/4) → "98.7%", not "98.8%".
    assert comparator.format_confidence(1 - 0.05 / 12) == "99.58%"
    assert comparator.format_confidence(1 - 0.05 / 4) == "98.7%"
    assert comparator.format_confidence(0.95) == "95%"
    assert comparator.format_confidence(0.975) == "97.5%"
    assert comparator.format_confidence(1 - 1e-4) == "99.99%"
    for c in (0.95, 0.975, 1 - 0.05 / 3, 1 - 0.05 / 4, 1 - 0.05 / 12, 1 - 0.05 / 36, 0.5, 1 - 1e-9, 1 - 1e-12, 0.0123):
        shown = float(comparator.format_confidence(c).rstrip("%")) / 100
        assert shown <= c + 1e-12 and (1 - shown) <= 1.05 * (1 - c) + 1e-12
    v = comparator.Violation(True, "x", 1 - 0.05 / 12, 0.3, 0.5, 0.01, 0.02, 0.9)
    assert "99.58% box" in v.message and "100%" not in v.message
    assert "99.58% confidence" in comparator.Violation(False, "x", 1 - 0.05 / 12, -0.1).message


def test_audit_scores_returns_the_result_json_object_in_the_current_format(tmp_path):
    """The Python twin of `dpaudit score` returns what result.json holds: dpaudit.result/2 (audit/model.py),
    readable back by the same model the CLI and the report read."""
    import numpy as np

    import accountants as acc
    from audit import model
    from audit.score import audit_scores

    r = audit_scores({"member": np.array([1, 0] * 50), "score": np.arange(100.0)}, acc.DPSGD(1.0, acc.Poisson(0.5), 10),
                     delta=1e-5, out=tmp_path)
    assert r["format"] == model.RESULT_FORMAT == "dpaudit.result/2"
    back = model.load_result(tmp_path)
    assert back.audits[0].epsilon_lower.value == r["audits"][0]["epsilon_lower"]["value"]


# ------------------------------------------------------------------ hostile input (issue 23 §3)

def _null_csv(path, n=200, seed=0):
    rng = np.random.default_rng(seed)
    member = np.arange(n) % 2 == 0
    return _write_csv(path, member, rng.normal(size=n))


def test_output_paths_are_checked_before_the_audit(tmp_path, capsys):
    """Before: --junit DIR, a --junit in a missing folder and --out on a file exited 3 after the audit, and
    --out into an existing run silently replaced its result.json."""
    p = _null_csv(tmp_path / "s.csv")
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    run = tmp_path / "run"
    run.mkdir()
    (run / "result.json").write_text("{}")
    for flags, words in ((["--junit", str(tmp_path)], "is a folder"),
                         (["--junit", str(tmp_path / "no" / "j.xml")], "does not exist"),
                         (["--out", str(a_file)], "not a folder"),
                         (["--out", str(run)], "already holds a run")):
        assert main(["score", str(p), *SPEC, *flags]) == 2, flags
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err, (flags, err)
    assert (run / "result.json").read_text() == "{}" and a_file.read_text() == "x"
    assert not (run / "report.md").exists()


def test_utf8_bom_is_accepted_and_other_encodings_are_named(tmp_path, capsys):
    p = _null_csv(tmp_path / "s.csv")
    bom = tmp_path / "bom.csv"
    bom.write_bytes(b"\xef\xbb\xbf" + p.read_bytes())
    m0, s0 = score.read_scores(p)
    m1, s1 = score.read_scores(bom)
    assert (m0 == m1).all() and (s0 == s1).all()
    u16 = tmp_path / "u16.csv"
    u16.write_bytes(p.read_text().encode("utf-16"))
    latin = tmp_path / "latin.csv"
    latin.write_bytes("member,score,note\n1,0.5,caf\xe9\n0,0.1,x\n".encode("latin-1"))
    for path, words in ((u16, "UTF-16"), (latin, "not UTF-8")):
        assert main(["score", str(path), *SPEC]) == 2
        assert words in capsys.readouterr().err


@pytest.mark.parametrize(("name", "body", "words"), [
    ("field.csv", "member,score,x\n1,0.5," + "a" * 140_000 + "\n", "field limit"),
    ("int.jsonl", '{"member": 1, "score": ' + "9" * 5000 + "}\n", "line 1"),
    ("big.jsonl", '{"member": 1, "score": ' + "9" * 4000 + "}\n", "column 'score'"),  # float() overflows
    ("deep.jsonl", "[" * 100_000 + "]" * 100_000 + "\n", "nested more than"),
], ids=["field", "int5000", "int4000", "deep"])
def test_oversized_fields_and_nesting_exit_2(tmp_path, capsys, name, body, words):
    p = tmp_path / name
    p.write_text(body, encoding="utf-8")
    assert main(["score", str(p), *SPEC]) == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_a_sparse_2gb_file_is_refused_after_one_bounded_line(tmp_path):
    """Before: the CSV reader took the whole NUL-filled line into memory (4.4 GB) before exit 3. Now each
    line is read with a bound of MAX_LINE characters; the error names line 1."""
    p = tmp_path / "sparse.csv"
    with open(p, "wb") as fh:
        fh.truncate(2 * 2**30)
    with pytest.raises(InputError, match=f"line 1: longer than {score.MAX_LINE}"):
        score.read_scores(p)


def test_scores_near_the_float_range_with_inf_are_ranked(tmp_path, capsys):
    """±1e308 beside +inf: before, +inf mapped to hi + (hi − lo) = inf and the audit refused (and ±1e308 alone
    broke the histogram, exit 3). Now all scores are replaced by dense ranks: same order, same ties, so the
    bounds equal those of the rank-equivalent scores."""
    rng = np.random.default_rng(5)
    member = np.arange(300) % 2 == 0
    base = rng.normal(size=300) + member
    extreme = base.copy()
    extreme[0], extreme[1], extreme[2] = 1e308, -1e308, np.inf  # 0 and 2 are members, 1 is not
    ranked = base.copy()
    ranked[0], ranked[1], ranked[2] = 1e6, -1e6, 2e6
    spec = acc.DPSGD(1.0, acc.Poisson(0.5), 10)
    got = score.audit_scores({"member": member, "score": extreme}, spec, delta=1e-5)
    ref = score.audit_scores({"member": member, "score": ranked}, spec, delta=1e-5)
    assert got["audits"][0]["epsilon_lower"]["value"] == ref["audits"][0]["epsilon_lower"]["value"]
    assert "dense rank" in got["audits"][0]["nonfinite"]["note"]
    p = _write_csv(tmp_path / "x.csv", member, extreme)
    assert main(["score", str(p), *SPEC, "--out", str(tmp_path / "o")]) in (0, 1)
    assert "Traceback" not in capsys.readouterr().err


def test_one_run_with_every_row_a_member_is_an_input_error(tmp_path, capsys):
    """Each canary is in with probability ½: a file of members only is no one-run game (before: exit 1)."""
    p = _write_csv(tmp_path / "s.csv", [1] * 200, np.arange(200.0))
    assert main(["score", str(p), *SPEC, "--design", "one-run"]) == 2
    assert "one_run design needs rows with member 1 and rows with member 0" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["caf\u00e9.csv", "a'b.csv", ".hidden.csv", "x" * 70 + ".csv", "a b.csv"])
def test_ordinary_file_names_are_accepted(tmp_path, name):
    p = _null_csv(tmp_path / name)
    assert main(["score", str(p), *SPEC]) == 0
    assert score.audit_name(name) == score.audit_name(name).lstrip(".")


def test_audit_scores_result_with_nonfinite_round_trips(tmp_path):
    """Before: audit_scores wrote a `nonfinite` key that RunResult.from_json rejected."""
    from audit import model

    member = np.array([1, 0] * 50, dtype=bool)
    sc = np.where(member, np.inf, np.arange(100.0))
    r = score.audit_scores({"member": member, "score": sc}, acc.DPSGD(1.0, acc.Poisson(0.5), 10), delta=1e-5,
                           out=tmp_path / "o")
    back = model.RunResult.from_json(json.loads(json.dumps(r)))
    assert back.audits[0].nonfinite.pos_inf == 50
    assert model.load_result(tmp_path / "o").audits[0].nonfinite == back.audits[0].nonfinite


def test_over_long_paths_exit_2(tmp_path, capsys):
    long = str(tmp_path / ("a" * 5000))
    assert main(["score", long + ".csv", *SPEC]) == 2
    assert main(["check", long + ".toml"]) == 2
    assert main(["account", "--dp-event", long + ".json", "--delta", "1e-5"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 3
