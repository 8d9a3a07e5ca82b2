"""audit.report: Markdown and HTML rendered from the same typed model through templates; the top
of the report (verdict banner with claim and confidence, the spec in words, ε_lower beside the
ceiling); a histogram of in and out scores per audit; and `dpaudit report` on a crafted
result.json cannot write outside the run folder (issue 11 §8)."""

import json
import re
from pathlib import Path

import pytest

from audit import model, report
from audit.cli import main

from .test_model import audit_result, run_result

ROOT = Path(__file__).resolve().parents[2]


def _write(run: Path, result: model.RunResult) -> None:
    run.mkdir(parents=True, exist_ok=True)
    (run / "result.json").write_text(model.dumps(result), encoding="utf-8")


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*")}


@pytest.mark.parametrize("name", ["x/../../../../NAME", "abc\n", ".."])
def test_report_refuses_crafted_names_and_writes_nothing(tmp_path, capsys, name):
    run = tmp_path / "a" / "b" / "run"
    _write(run, run_result())
    obj = json.loads((run / "result.json").read_text())
    obj["audits"][0]["name"] = name
    (run / "result.json").write_text(json.dumps(obj))
    before = _files(tmp_path)
    assert main(["report", str(run)]) == 2  # an input error, not a crash
    assert "name" in capsys.readouterr().err
    assert _files(tmp_path) == before  # nothing written, inside the folder or outside it


def test_in_memory_result_cannot_escape_either(tmp_path):
    r = run_result()
    object.__setattr__(r.audits[0], "name", "x/../../../../NAME")  # bypassing the frozen dataclass
    with pytest.raises(ValueError, match="name"):
        report.render(tmp_path / "run", r)
    assert not (tmp_path / "NAME.png").exists() and not list(tmp_path.rglob("*NAME*"))


def test_top_of_the_report(tmp_path):
    run = tmp_path / "run"
    _write(run, run_result())
    assert main(["report", str(run)]) == 0
    md = (run / "report.md").read_text()
    page = (run / "report.html").read_text()
    for text, first_table in ((md, "| audit"), (page, "<table")):
        assert text.index("NO VIOLATION") < text.index(first_table)  # the banner is read first
        assert "σ = 1, Poisson sampling q = 0.5, 10 steps, add-remove" in text  # the spec in words
        assert "DPSGD(" not in text and "Poisson(rate" not in text  # never a Python repr
        assert "95% confidence" in text
    # ε_lower beside the ceiling (and the ratio) in the summary table, not only over ε_tight
    row = next(line for line in md.splitlines() if line.startswith("| main |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2:4] == ["0.800", "3.200"] and cells[8] == f"{0.8 / 3.2:.2f}"
    assert "measures the attack" in md and "limit of the design" not in md  # ceiling 3.2 > ε_tight 2.3
    # a design whose ceiling is below the accountant's ε must not read as a loose accountant
    paths = report.render(tmp_path / "small", run_result(audit_result(ceiling=1.5)))
    for p in (paths["markdown"], paths["html"]):
        assert "capped at 0.65 by the number of trials" in p.read_text() and "limit of the design" in p.read_text()
    # four figures per audit, the histogram among them; the HTML embeds them, the Markdown links them
    assert page.count("data:image/png;base64,") == 4 and "figures/histogram_main.png" in md
    assert (run / "figures" / "histogram_main.png").stat().st_size > 5_000


def test_the_four_banners(tmp_path):
    violated = "audit: VIOLATION of claim (eps=0.5, delta=1e-05): bug or broken DP"
    cases = {
        "NO VIOLATION": run_result(),
        "VIOLATION": run_result(audit_result(violated=True)),
        "CLAIM NOT SUPPORTED": run_result(  # only the accountant exceeds the claim: no leak shown
            audit_result(claim=model.ClaimCheck(0.5, 1e-5, 2.3, False, 0.4, True, False, ("accountant: 2.3 > 0.5",))),
            claim=model.ClaimSummary(False, ("main: accountant: 2.3 > 0.5",))),
        "CLAIM VIOLATED": run_result(  # the audit refutes the claim: the same word as its reason's VIOLATION
            audit_result(claim=model.ClaimCheck(0.5, 1e-5, 0.4, True, 0.8, False, False, (violated,))),
            claim=model.ClaimSummary(False, ("main: " + violated,))),
    }
    for title, r in cases.items():
        run = tmp_path / title.replace(" ", "_")
        paths = report.render(run, r)
        page = paths["html"].read_text()
        banner = re.search(r'<div class="banner (\w+)".*?<div class="title">([^<]+)</div>', page, re.S)
        assert banner.group(2) == title
        assert banner.group(1) == {"NO VIOLATION": "ok", "VIOLATION": "bad", "CLAIM NOT SUPPORTED": "warn",
                                   "CLAIM VIOLATED": "bad"}[title]
        md = paths["markdown"].read_text()
        assert f"**{title}**" in md.split("\n|", 1)[0]  # the banner comes before the table
        if title.startswith("CLAIM"):  # the claimed ε as written, and one word for the claim everywhere
            word = title.removeprefix("CLAIM ").replace("NOT SUPPORTED", "not supported")
            for text in (md, page):
                assert "ε = 0.5, δ = 1e-05" in text
                top = text.split("<table", 1)[0].split("\n|", 1)[0]
                assert f"— **{word}**" in top or f"— {word}." in top
                assert ("VIOLATION of claim" in text) == (word == "VIOLATED")
                assert ("not supported" in top) == (word == "not supported")


def test_html_is_not_made_from_the_markdown(tmp_path, monkeypatch):
    calls = []
    real = report.render_markdown
    monkeypatch.setattr(report, "render_markdown", lambda *a, **k: calls.append(1) or real(*a, **k))
    page = report.render_html(run_result(), {}, tmp_path)
    assert not calls and page.startswith("<!DOCTYPE html>")


def test_templates_are_package_data():
    text = (ROOT / "pyproject.toml").read_text()  # (tomllib is 3.11+; the project supports 3.10)
    assert re.search(r'\[tool\.setuptools\.package-data\]\s*audit = \["templates/\*\.j2"\]', text)
    deps = text.split("dependencies = [", 1)[1].split("]", 1)[0]
    assert '"jinja2>=3"' in deps
    assert (ROOT / "audit" / "templates" / "report.md.j2").is_file()
    assert (ROOT / "audit" / "templates" / "report.html.j2").is_file()


def test_one_run_gdp_bound_is_never_shown_as_epsilon_lower(tmp_path):
    from audit.statistics import GdpLowerBound

    g = GdpLowerBound(1.2, 5.5, 0.95, 1e-5, "one_run_fdp", "guess grid")
    r = run_result(audit_result(design="one_run", gdp_lower_one_run=g))
    assert model.RunResult.from_json(json.loads(model.dumps(r))).audits[0].gdp_lower_one_run == g
    paths = report.render(tmp_path / "run", r)
    for p in (paths["markdown"], paths["html"]):
        text = p.read_text()
        assert "not μ-GDP for μ ≤ 1.2000" in text and "not an (ε, δ) lower bound" in text
        assert "5.500" not in text.split("not μ-GDP")[0]  # the refuted curve's ε is nowhere before, e.g. the table


def test_confidence_note_never_rounds_to_100_percent():
    """A run at significance 0.001 with 3 audits holds at 99.9 % jointly: ':.0%' printed "100%" (issue 13 §3)."""
    from types import SimpleNamespace

    from audit import report

    plain = SimpleNamespace(name="main", significance=0.001 / 3, conformance=None)
    note = report._confidence_note(SimpleNamespace(significance=0.001, audits=[plain] * 3))
    assert note.startswith("99.9% confidence jointly") and "100%" not in note


def test_confidence_note_says_how_the_conformance_audit_splits_its_share():
    """Its ε audit runs at half the audit's share and its premise tests share the other half (audit/runs.py);
    the note said only "each audit at 1 - s/k", which overstated the ε audit's confidence."""
    from types import SimpleNamespace

    from audit import report

    plain = SimpleNamespace(name="main", significance=0.05 / 3, conformance=None)
    tests = [SimpleNamespace(level=0.05 / 3 / 2 / 6)] * 6
    conf = SimpleNamespace(name="conformance", significance=0.05 / 6, conformance=SimpleNamespace(tests=tests))
    note = report._confidence_note(SimpleNamespace(significance=0.05, audits=[plain, plain, conf]))
    assert "each audit at 0.9833" in note
    assert "'conformance' splits its share between its ε audit (at 0.9917) and 6 premise tests" in note
    assert "each at level 0.00139" in note


def test_the_report_says_how_many_models_were_trained_at_once(tmp_path):
    """Issue 15 §2: the chunk the memory budget allowed (chunking.json) is in the report; a user trainer's
    audit says one model at a time; a result.json from before the field says nothing rather than a guess."""
    for at_once, want in ((500, "500 models trained at once"), (1, "one model trained at a time"), (None, None)):
        paths = report.render(tmp_path / str(at_once), run_result(audit_result(models_at_once=at_once)))
        for p in (paths["markdown"], paths["html"]):
            text = p.read_text()
            if want is None:
                assert "trained at once" not in text and "at a time" not in text
            else:
                assert want in text


def test_the_report_says_how_many_natural_records_each_trial_held(tmp_path):
    """The black-box default's main audit runs on the audit's own smaller dataset (audit.config.AUDIT_DATASET), so
    each audit's setup line says how many natural records its trials held; the field survives result.json, and a
    result.json from before it says nothing rather than a guess."""
    run = run_result(audit_result(natural_records=40))
    assert model.RunResult.from_json(json.loads(model.dumps(run))).audits[0].natural_records == 40
    for records, want in ((40, ", 40 natural records"), (None, None)):
        paths = report.render(tmp_path / str(records), run_result(audit_result(natural_records=records)))
        for p in (paths["markdown"], paths["html"]):
            text = p.read_text()
            assert (want in text) if want else "natural records" not in text


def test_the_report_names_the_projection_canarys_label(tmp_path):
    """The black-box default labels its blank canary with the class the trainer's canary-free models find least
    likely (attacks.plugin.least_likely_labels); the setup line names it, the field survives result.json, and two
    labels (worker processes whose templates differed) are both named."""
    run = run_result(audit_result(canary_labels=(3,)))
    assert model.RunResult.from_json(json.loads(model.dumps(run))).audits[0].canary_labels == (3,)
    for labels, want in (((3,), "labelled 3 (least likely"), ((2, 7), "labelled 2, 7 (least likely"), (None, None)):
        paths = report.render(tmp_path / str(labels), run_result(audit_result(canary_labels=labels)))
        for p in (paths["markdown"], paths["html"]):
            text = p.read_text()
            assert (want in text) if want else "least likely" not in text


HOSTILE = "<img src=x onerror=alert(1)>`]*|[a](javascript:alert(1))\n# h &amp;"


def _hostile(obj, path=()):
    """Every string of a result.json object made hostile, except names, the format and the spec (validated;
    an accountant's method and role are checked against epsilon_tight/epsilon_rdp)."""
    if isinstance(obj, dict):
        return {k: v if (k in ("name", "format", "spec", "config", "kind", "audit", "bound", "role")
                         or (k == "method" and path[-1:] in (("epsilons",), ("series",)))) and not path[-1:] == ("x",)
                else _hostile(v, (*path, k)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_hostile(v, path) for v in obj]
    return HOSTILE if isinstance(obj, str) else obj


def _split_code_spans(md: str) -> tuple[str, list[str]]:
    """(the text outside code spans, the spans), read as CommonMark does: a backslash escapes the next
    character; a run of n backticks opens a span that the next run of exactly n backticks closes."""
    out, spans, i = [], [], 0
    while i < len(md):
        if md[i] == "\\":
            out.append(md[i:i + 2])
            i += 2
            continue
        if md[i] == "`":
            n = len(re.match(r"`+", md[i:]).group(0))
            close = re.compile(rf"(?<!`)`{{{n}}}(?!`)").search(md, i + n)
            if close:
                spans.append(md[i + n:close.start()])
                i = close.end()
                continue
            out.append(md[i:i + n])
            i += n
            continue
        out.append(md[i])
        i += 1
    return "".join(out), spans


def test_markdown_escapes_every_string_field_as_html_does(tmp_path):
    """Before: a crafted result.json put raw HTML into report.md through 11 fields (design, threat_model,
    canary, fault, created, the violation message, ...), and an --out path with a backtick broke out of its
    code span. report.html escaped them all; report.md now does too (audit.report.md_escape / md_code)."""
    run = tmp_path / "a`b `` c" / "run"
    _write(run, run_result())
    obj = _hostile(json.loads((run / "result.json").read_text()))
    (run / "result.json").write_text(json.dumps(obj))
    result = model.load_result(run)
    touched = [k for k, v in vars(result.audits[0]).items() if v == HOSTILE]
    assert len(touched) >= 5, touched  # design, threat_model, score, canary, fault (and more)
    assert main(["report", str(run)]) == 0
    md = (run / "report.md").read_text()
    html = (run / "report.html").read_text()
    prose, spans = _split_code_spans(md)  # inside a code span '<' is literal text (CommonMark §6.1)
    assert spans and "<" not in prose and "\n# h" not in md
    assert not re.search(r"(?<!\\)\]\(javascript", prose)  # a link needs an unescaped ']('
    assert "<img" not in "".join(s for s in spans if s.count("\n"))  # no span runs over lines
    assert "<img src=x" not in html
    # every hostile field is still shown, inert: the escaped text is there once per field
    assert md.count("&lt;img src=x onerror=alert(1)&gt;\\`\\]\\*\\|\\[a\\](javascript:alert(1)) # h &amp;amp;") >= 6
    # the run folder stays one code span whatever backticks it holds
    footer = md.strip().splitlines()[-1]
    span = re.search(r"Run folder (`+)( ?)(.*?)\2\1 ·", footer)
    assert span is not None and span.group(3) == str(run), footer


@pytest.mark.parametrize("text", ["plain", "a`b", "``x", "y`", "` `"])
def test_code_spans_hold_any_backticks(text):
    """CommonMark §6.1: a fence longer than every backtick run inside, padded where an edge is a backtick."""
    span = str(report.md_code(text))
    fence = re.match(r"`+", span).group(0)
    inner = span[len(fence):-len(fence)]
    assert span.endswith(fence) and f"`{fence}" not in span[1:-1] and fence not in inner.strip()
    assert inner.strip() == text.strip() and (inner == text or inner == f" {text} ")


def test_first_screen_explains_its_terms_and_keeps_the_verdict_on_a_phone(tmp_path):
    """Issue 23 §5: at 390 px the verdict column was scrolled away, legends were ~5 px, and ε_certifiable,
    lower/ceiling, clopper_pearson, bonferroni and Δ(theory‖empirical) had no explanation in reach."""
    page = report.render(tmp_path / "run", run_result())["html"].read_text()
    head = re.search(r"<tr class=\"head\">(.*?)</tr>", page).group(1)
    assert re.findall(r"<th>(?:<abbr[^>]*>)?([^<]+)", head)[:3] == ["audit and spec", "verdict", "ε_lower"]
    phone = re.search(r"@media \(max-width:600px\)\{(.*?)\}\n</style>", page, re.S).group(1)
    assert "table.sum tr{" in phone and "display:block" in phone  # rows stack as cards, nothing scrolled away
    assert 'data-label="verdict"' in page
    glossary = page[page.index('id="glossary"'):page.index('<section class="audit"')]  # before the first audit
    for term in ("ε_certifiable", "lower / ceiling", "clopper_pearson", "bonferroni", "Δ(theory‖empirical)"):
        assert term in glossary
    assert page.index('href="#glossary"') < page.index("<table")  # reachable from the banner
    assert 'title="Clopper–Pearson' in page and 'title="Bonferroni' in page  # tooltips where the words are used
    # legends: 9 pt on a 3.6 in figure is 9/72/3.6 = 3.5 % of the width (was 7 pt on 5.2 in, 1.9 %)
    assert report._LEGEND / 72 / report._FIGSIZE[0] >= 0.034
