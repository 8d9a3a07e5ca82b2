"""The accounting-method registry drives every ε of a result (issue 24 §4): the per-method records
(`AuditResult.epsilons`, `StepsCurve.series`), the report's columns and steps figure, ε_certifiable and
the violation test. Results written before the records existed still load, render and keep their fields."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.optimize
from scipy.stats import norm

import accountants as acc
from accountants import api
from accountants.pld.accountant import PLDMethod
from audit import comparator, config, model, report, runs, score

DATA = Path(__file__).resolve().parents[1] / "data" / "result_before_method_records.json"
QH = "[training]\nn_records = 20\nsample_rate = 0.5\nnoise_multiplier = 1.0\nsteps = 4\n"


def _gdp_delta(mu: float, eps: float) -> float:
    """δ(ε) of μ-GDP (Balle & Wang 2018, arXiv:1805.06530v2, Thm 8): Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ)."""
    return float(norm.cdf(mu / 2 - eps / mu) - math.exp(eps) * norm.cdf(-mu / 2 - eps / mu))


def _gdp_epsilon(mu: float, delta: float) -> float:
    return float(scipy.optimize.brentq(lambda e: _gdp_delta(mu, e) - delta, 0.0, 100.0, xtol=1e-14))


class _FinePLD(PLDMethod):
    """A sound method tighter than the registered "pld": the same certified PLD bracket at a tenth of the
    discretisation error (eps_error 1e-3 instead of 0.01), so its upper end is lower."""

    name, label = "pld_fine", "tight (PLD, 1e-3)"

    def __init__(self) -> None:
        super().__init__(eps_error=1e-3)


class _RdpPlusOne:
    """A sound, looser method: the RDP ε plus 1 (δ(ε) ≤ δ(ε − 1) ≤ δ_rdp(ε − 1): δ(ε) is non-increasing)."""

    name, label = "rdp_plus_one", "rdp + 1"

    def unsupported(self, spec):
        return api.get_method("rdp").unsupported(spec)

    def epsilon(self, spec, delta):
        return acc.EpsilonBound(api.get_method("rdp").epsilon(spec, delta).value + 1.0, delta, method=self.name)

    def delta(self, spec, epsilon):
        d = api.get_method("rdp").delta(spec, max(epsilon - 1.0, 0.0))
        return acc.DeltaBound(d.value, epsilon, method=self.name)


class _UnderReported:
    """A broken accountant: it claims 0.1-GDP whatever the spec (what the violation test exists to catch)."""

    name, label, mu = "under", "under-reported", 0.1

    def unsupported(self, spec):
        return None if isinstance(spec, acc.DPSGD) else "under: one DPSGD only"

    def epsilon(self, spec, delta):
        return acc.EpsilonBound(_gdp_epsilon(self.mu, delta), delta, method=self.name)

    def delta(self, spec, epsilon):
        return acc.DeltaBound(_gdp_delta(self.mu, epsilon), epsilon, method=self.name)

    def tradeoff(self, spec, *, eps_grid=None, options=None):
        return acc.TradeOff.from_gdp(self.mu)


def _audit(run_dir):
    cfg = config.loads(QH + "[audit]\ntrials = 40\nchunk_size = 40\n")
    return runs.audit_variant(config.variants(cfg)[0], run_dir), cfg


def test_a_third_method_fills_every_column_and_the_tightest_drives_the_tests(tmp_path, monkeypatch):
    """A tighter and a looser sound method registered (monkeypatch unregisters them after the test)."""
    monkeypatch.setitem(api._METHODS, "pld_fine", _FinePLD())
    monkeypatch.setitem(api._METHODS, "rdp_plus_one", _RdpPlusOne())
    r, cfg = _audit(tmp_path / "a")
    by = {e.method: e for e in r.epsilons}
    assert list(by) == ["pld", "pld_fine", "rdp", "rdp_plus_one"]  # the registry's order, every method
    assert [e.method for e in r.epsilons if e.role == model.TIGHTEST] == ["pld_fine"] == [r.epsilon_upper.method]
    # the finer bracket nests inside the coarser one (both certified): its upper end is the tightest bound
    assert by["pld"].lower <= by["pld_fine"].lower <= by["pld_fine"].value < by["pld"].value < by["rdp"].value
    assert by["rdp_plus_one"].value == by["rdp"].value + 1.0 and by["rdp_plus_one"].label == "rdp + 1"
    # the old fields still hold the built-in methods
    assert (r.epsilon_tight, r.epsilon_tight_lower, r.epsilon_rdp) == (by["pld"].value, by["pld"].lower,
                                                                       by["rdp"].value)
    # ε_certifiable, the violation test and the steps figure follow the registry
    assert r.certifiable_curve == "pld_fine" and r.violation.against == "pld_fine curve of the spec"
    assert set(r.curves) == set(by)
    series = {x.method: x for x in r.steps_curve.series}
    assert list(series) == list(by) and all(len(x.epsilon) == len(r.steps_curve.steps) for x in series.values())
    i = r.steps_curve.steps.index(4)
    assert series["pld_fine"].epsilon[i] == by["pld_fine"].value  # asked at each T: the same number
    assert all(a < b for a, b in zip(series["rdp"].epsilon, series["rdp_plus_one"].epsilon, strict=True))
    assert r.steps_curve.epsilon_tight == series["pld"].epsilon and r.steps_curve.epsilon_rdp == series["rdp"].epsilon
    # the report: one column per method, labels from the registry, lower/tight over the tightest
    result = runs.summarise(cfg, [r])
    head = report.summary_columns(result)
    assert head[9:13] == ["eps_tight (pld)", "eps_tight (pld, 1e-3)", "eps_rdp", "eps_rdp + 1"]
    row = report.summary_rows(result)[0]
    assert row[9:13] == [report._up(by[m].value) for m in by]
    assert row[head.index("lower/tight")] == report._f(r.epsilon_lower.value / by["pld_fine"].value, 2)
    md = report.render(tmp_path / "run", result)["markdown"].read_text()
    assert "| ε_tight (PLD) | ε_tight (PLD, 1e-3) | ε_rdp | ε_rdp + 1 |" in md and "the tightest, by `pld_fine`" in md
    assert model.RunResult.from_json(json.loads(model.dumps(result))) == result  # the records round-trip

    # Without the two methods (the same trials, read back from the run folder): every old number unchanged.
    monkeypatch.delitem(api._METHODS, "pld_fine")
    monkeypatch.delitem(api._METHODS, "rdp_plus_one")
    r0, _ = _audit(tmp_path / "a")
    assert [e.method for e in r0.epsilons] == ["pld", "rdp"] and r0.epsilon_upper.method == "pld"
    assert (r0.epsilon_tight, r0.epsilon_tight_lower, r0.epsilon_rdp, r0.epsilon_lower) == \
        (r.epsilon_tight, r.epsilon_tight_lower, r.epsilon_rdp, r.epsilon_lower)
    assert r0.steps_curve.epsilon_tight == r.steps_curve.epsilon_tight
    assert r0.steps_curve.epsilon_rdp == r.steps_curve.epsilon_rdp
    # PLD tightest: ε_certifiable per ordered direction (audit.runs.certifiable_curves); another method: its curve
    assert r0.certifiable_curve == "pld, direction remove" and r0.violation.against == "pld curve of the spec"


def test_an_under_reporting_method_is_the_tightest_and_is_caught(monkeypatch):
    """The violation test and ε_certifiable use the tightest registered method: one that under-reports (0.1-GDP
    for a 1-GDP mechanism: q = 1, σ = 2, T = 4, so μ = √4/2) is refuted by scores of the optimal test of the
    real mechanism, N(1, 1) against N(0, 1); without it the same scores refute nothing."""
    rng = np.random.default_rng(0)
    member = np.repeat([1, 0], 400)
    data = {"member": member, "score": rng.normal(size=member.size) + member}
    spec = acc.DPSGD(2.0, acc.Poisson(1.0), 4)
    r0, _ = score.audit_scores_run(data, spec, delta=1e-5)
    one0, _ = score.audit_scores_run(data, spec, delta=1e-5, design="one_run")
    assert not r0.violation and r0.audits[0].violation.against == "pld curve of the spec"
    monkeypatch.setitem(api._METHODS, "under", _UnderReported())
    r, _ = score.audit_scores_run(data, spec, delta=1e-5)
    one, _ = score.audit_scores_run(data, spec, delta=1e-5, design="one_run")
    a = r.audits[0]
    assert a.epsilon_upper.method == "under" and a.violation.against == "under curve of the spec"
    assert a.violation.violated and r.violation
    assert a.epsilon_tight == r0.audits[0].epsilon_tight and a.epsilon_lower == r0.audits[0].epsilon_lower
    # one run: the ε test and ε_certifiable move to the under-reported curve (0.1-GDP certifies far less)
    b, b0 = one.audits[0], one0.audits[0]
    assert (b.certifiable_curve, b0.certifiable_curve) == ("under", "pld, direction remove")
    assert b.epsilon_certifiable < b0.epsilon_certifiable
    assert b.violation.violated and not b0.violation.violated  # Steinke's ε_lower 1.34 > 0.3407, < PLD's 4.378
    assert b.violation.against.startswith(f"accountant epsilon {report._up(b.epsilon_upper.value, 4)} ")


def test_tightest_method_is_the_smallest_epsilon_first_in_name_order():
    assert comparator.tightest_method({"rdp": 2.0, "pld": 1.5, "zz": 1.5}) == "pld"
    assert comparator.tightest_method({"rdp": 2.0, "b": math.inf}) == "rdp"
    assert comparator.tightest_method({}) is None


def test_a_result_written_before_the_records_loads_renders_and_keeps_its_fields(tmp_path):
    """Stored by the commit before this change (tests/data/README.md): it must read back, render with the same
    columns, and write every old field unchanged."""
    stored = json.loads(DATA.read_text())
    assert "epsilons" not in stored["audits"][0] and "series" not in stored["audits"][0]["steps_curve"]
    r = model.RunResult.from_json(stored)
    a = r.audits[0]
    assert a.epsilons == (model.MethodEpsilon("pld", "tight (PLD)", 2.3, None, model.TIGHTEST),
                          model.MethodEpsilon("rdp", "rdp", 2.6, None, model.UPPER))
    assert [(x.method, x.epsilon) for x in a.steps_curve.series] == [("pld", (1.4, 2.3)), ("rdp", (1.5, 2.6))]
    again = json.loads(model.dumps(r))
    old = stored["audits"][0]
    new = again["audits"][0]
    for key in ("epsilon_rdp", "epsilon_tight", "epsilon_tight_lower", "tightness_tight", "tightness_rdp"):
        assert new[key] == old[key], key
    assert {k: v for k, v in new["steps_curve"].items() if k != "series"} == old["steps_curve"]
    assert model.RunResult.from_json(again) == r
    assert report.summary_columns(r)[9:11] == ["eps_tight (pld)", "eps_rdp"]
    md = report.render(tmp_path / "run", r)["markdown"].read_text()
    assert "| ε_tight (PLD) | ε_rdp |" in md
    # one line per method's ratio (0.8 / 2.3, 0.8 / 2.6), then the next item on its own line
    assert "the tightest, by `pld`, is the curve tested; ε_lower/ε_tight (PLD) 0.348, ε_lower/ε_rdp 0.308\n- " in md


def test_records_that_contradict_the_old_fields_are_refused():
    obj = json.loads(DATA.read_text())
    obj["audits"][0]["epsilons"] = [{"method": "pld", "label": "tight (PLD)", "value": 2.0, "lower": None,
                                     "role": "tightest"}]
    with pytest.raises(acc.InputError, match=r"must repeat the pld and rdp entries of epsilons"):
        model.RunResult.from_json(obj)
    obj["audits"][0]["epsilons"][0].update(value=2.3, role="best")
    with pytest.raises(acc.InputError, match=r"role must be 'tightest' or 'upper'"):
        model.RunResult.from_json(obj)
