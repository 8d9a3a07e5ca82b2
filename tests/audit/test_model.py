"""audit.model: the typed result model, its versioned JSON round trip, the refusal of older or
unknown formats, the resolved config as a typed object, and names checked like TOML variant names."""

import dataclasses
import json

import pytest

import accountants as acc
from audit import config, model, runs
from audit.statistics import EpsilonLowerBound, GdpEstimate

SPEC = acc.DPSGD(1.0, acc.Poisson(0.5), 10)


def audit_result(name: str = "main", *, violated: bool = False, claim: model.ClaimCheck | None = None,
                 **kw) -> model.AuditResult:
    lb = EpsilonLowerBound(0.8, 0.95, 1e-5, "clopper_pearson", "bonferroni", threshold=float("inf"), fpr=0.1,
                           fnr=0.3, n_in=100, n_out=100)
    fields = dict(
        name=name, design="multi_run", threat_model="white_box", score="llr", canary="dirac", fault="none",
        spec=SPEC, significance=0.05, delta=1e-5, seed=0, trials=200, epsilon_rdp=2.6, epsilon_tight=2.3,
        violation=model.ViolationTest(violated, "tight (pld)", "VIOLATION of tight: bug or broken DP" if violated
                                      else "no violation", 0.95, 0.1 if violated else -0.2),
        runtime_s=model.Runtime(1.0, 2.0), rows=200, n_in=100, n_out=100, epsilon_lower=lb, ceiling=3.2,
        tightness_tight=0.8 / 2.3, gdp_estimate=GdpEstimate(0.7, 1.9, 1e-5),
        curves={"pld": model.CurveSamples((0.0, 0.5, 1.0), (1.0, 0.2, 0.0))},
        steps_curve=model.StepsCurve((5, 10), (1.5, 2.6), (1.4, 2.3)),
        roc=model.Roc((0.0, 0.5, 1.0), (0.0, 0.8, 1.0)),
        histogram=model.ScoreHistogram("llr", (0.0, 1.0, 2.0), (3, 7), (8, 2)), claim=claim,
    )
    fields.update(kw)
    return model.AuditResult(**fields)


def run_result(*audits: model.AuditResult, claim: model.ClaimSummary | None = None) -> model.RunResult:
    audits = audits or (audit_result(),)
    return model.RunResult(
        created="2026-01-01T00:00:00Z", significance=0.05, delta=1e-5,
        violation=any(a.violation.violated for a in audits),
        epsilon_lower=model.RunEpsilonLower(0.8, audits[0].name, 0.95, "max over audits"), audits=tuple(audits),
        config=config.loads(config.DEFAULT_TOML), claim=claim)


def test_json_round_trip_is_lossless():
    r = run_result()
    text = model.dumps(r)
    obj = json.loads(text)
    back = model.RunResult.from_json(obj)
    assert model.dumps(back) == text
    assert back.audits[0].spec == SPEC and back.audits[0].histogram == r.audits[0].histogram
    assert back.config == r.config
    a = obj["audits"][0]
    assert obj["format"] == "dpaudit.result/2"
    assert a["spec"] == SPEC.to_dict() and a["spec"]["format"] == "dpaudit.spec/1"
    assert a["spec_text"] == "σ = 1, Poisson sampling q = 0.5, 10 steps, add-remove"  # words, never a repr
    assert a["epsilon_lower"]["bound"] == "lower" and a["epsilon_lower"]["threshold"] is None  # inf: say nothing


def test_resolved_config_is_typed_and_its_json_keeps_the_variants_as_overrides():
    cfg = config.loads(config.DEFAULT_TOML)
    assert isinstance(cfg, model.RunConfig) and cfg.training.noise_multiplier == 1.0
    fixed = cfg.variants[1]  # merged once, by config.loads
    assert (fixed.training.sampling, fixed.attack.threat_model) == ("fixed_wor", "white_box_crafted_dataset")
    assert fixed.training.steps == cfg.training.steps and fixed.claim == cfg.claim
    obj = json.loads(json.dumps(model.to_dict(cfg)))  # result.json's "config": every key, variants as overrides
    assert obj["variant"][1] == {"name": "white_box_crafted_fixed_size", "training": {"sampling": "fixed_wor"},
                                 "attack": {"threat_model": "white_box_crafted_dataset"}}
    assert obj["variant"][0] == {"name": "white_box_poisson"}
    back = model.from_dict(model.RunResult, {**run_result().to_json(), "config": obj}).config
    assert back == cfg and back.variants[1] == fixed
    for section, cls in config.SECTIONS.items():  # every declared key is written
        assert set(obj[section]) == {f.name for f in dataclasses.fields(cls)}, section


def test_older_and_unknown_formats_are_refused_with_the_version(tmp_path):
    (tmp_path / "result.json").write_text(json.dumps({"format": "dpaudit.result/1", "audits": []}))
    with pytest.raises(acc.InputError, match=r"'dpaudit.result/1'.*older dpaudit.*'dpaudit.result/2'.*--resume"):
        model.load_result(tmp_path)
    with pytest.raises(acc.InputError, match=r"'dpaudit\.result/9'"):
        model.RunResult.from_json({"format": "dpaudit.result/9"})
    with pytest.raises(acc.InputError, match="does not exist"):
        runs.load_result(tmp_path / "nothing")


def test_unknown_missing_and_mistyped_keys_are_named():
    obj = run_result().to_json()
    bad = json.loads(json.dumps(obj))
    bad["audits"][0]["epsilon_lowr"] = 1.0
    with pytest.raises(acc.InputError, match="audits\\[0\\] has unknown key 'epsilon_lowr'"):
        model.RunResult.from_json(bad)
    bad = json.loads(json.dumps(obj))
    del bad["audits"][0]["trials"]
    with pytest.raises(acc.InputError, match="missing the key 'trials'"):
        model.RunResult.from_json(bad)
    bad = json.loads(json.dumps(obj))
    bad["audits"][0]["trials"] = "many"
    with pytest.raises(ValueError, match="trials must be an integer"):
        model.RunResult.from_json(bad)


@pytest.mark.parametrize("name", ["x/../../../../NAME", "abc\n", ".", "..", "", "a" * 65, "a b", "x\\y", ".hidden", 3])
def test_bad_names_are_refused_in_toml_and_json(name):
    with pytest.raises(acc.InputError, match="1-64 characters"):
        model.check_name(name)
    obj = run_result().to_json()
    obj["audits"][0]["name"] = name
    with pytest.raises(ValueError, match="name"):
        model.RunResult.from_json(obj)
    if isinstance(name, str):
        with pytest.raises(acc.InputError):
            config.loads(f"[[variant]]\nname = {json.dumps(name)}\n")


@pytest.mark.parametrize("name", ["white_box_poisson", "a.b", "-x", "A" * 64, "a..b"])
def test_good_names(name):
    assert model.check_name(name) == name
    assert config.variants(config.loads(f"[[variant]]\nname = {json.dumps(name)}\n"))[0].name == name


def test_verdicts():
    assert run_result().verdict == "no violation"
    assert run_result(audit_result(violated=True)).verdict == "VIOLATION"
    assert run_result(claim=model.ClaimSummary(False, ("main: accountant: too large",))).verdict == \
        "claim not supported"


def test_black_box_reconstruction_audit_reports_reference_shift(tmp_path):
    """Issue 12 §5: the audit reports the outcome's primary score; before, sorted(out.scores)[0] = "confidence"."""
    cfg = config.loads('[training]\nn_records = 20\nsample_rate = 1.0\nnoise_multiplier = 2.0\nsteps = 2\n'
                       '[canary]\nkind = "blank"\ncount = 3\n[attack]\nthreat_model = "black_box"\n'
                       '[audit]\ngame = "reconstruction"\ntrials = 4\n')
    r = runs.audit_variant(config.variants(cfg)[0], tmp_path)
    assert isinstance(r, model.AuditResult) and r.score == "reference_shift"
    h = r.histogram
    assert h.score == "reference_shift" and (h.in_label, h.out_label) == ("true candidate", "other candidates")
    assert sum(h.in_counts) == 4 and sum(h.out_counts) == 8  # 4 trials × (1 true + 2 other candidates)
