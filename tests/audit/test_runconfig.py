"""audit.runconfig: the typed configuration, its constraints declared beside each field and read by one validator."""

from __future__ import annotations

import dataclasses

import pytest

import accountants as acc
from attacks import plugin
from audit import config, estimate, registry, runs
from audit.runconfig import (
    SECTIONS,
    AuditConfig,
    Choice,
    Constraint,
    RunConfig,
    TrainingConfig,
    VariantConfig,
    check_section,
    constraint,
)


def test_every_field_declares_a_constraint_that_its_default_passes():
    for section, cls in SECTIONS.items():
        for f in dataclasses.fields(cls):
            rule = constraint(f)
            assert isinstance(rule, Constraint), f"{section}.{f.name}"
            assert rule.check(f"{section}.{f.name}", f.default) == f.default, f"{section}.{f.name}"
    assert check_section(TrainingConfig, {}, "training") == TrainingConfig()  # the defaults are the TOML's
    assert config.loads("") == RunConfig()


def test_the_limits_are_read_from_the_fields():
    """The table before the constraints moved beside the fields (audit/config.py LIMITS, issue 23), unchanged."""
    assert config.LIMITS == {
        "training.n_records": 1_000_000, "training.hidden": 4096, "training.batch_size": 1_000_000,
        "training.steps_per_epoch": 100_000, "training.steps": 100_000, "canary.count": 10_000,
        "attack.n_shadow": 1024, "audit.trials": 1_000_000, "audit.chunk_size": 100_000,
        "audit.max_trials": 1_000_000}
    with pytest.raises(acc.InputError, match=r"audit\.chunk_size = 100001 is above the documented limit 100000"):
        config.loads("[audit]\nchunk_size = 100001")
    with pytest.raises(acc.InputError, match=r"audit\.seed must be an integer ≥ 0 and ≤ 9223372036854775807"):
        config.loads(f"[audit]\nseed = {2**63}\nlift_limits = true")  # a hard limit: no flag lifts it


def test_one_validator_names_the_key_the_variant_and_the_range():
    with pytest.raises(acc.InputError, match=r"^audit\.significance must be a number in \(0, 0\.5\); got 0\.7$"):
        check_section(AuditConfig, {"significance": 0.7}, "audit")
    with pytest.raises(acc.InputError, match=r"^variant 'v': audit\.delta must be a number in \(0, 1\); got 0$"):
        check_section(AuditConfig, {"delta": 0}, "audit", "variant 'v': ")
    with pytest.raises(acc.InputError, match=r"unknown key audit\.trails; allowed keys: \['chunk_size'"):
        check_section(AuditConfig, {"trails": 1}, "audit")
    registered = dataclasses.fields(TrainingConfig)[[f.name for f in dataclasses.fields(TrainingConfig)].index(
        "fault")]
    rule = constraint(registered)
    assert isinstance(rule, Choice) and list(rule.values()) == sorted(registry.fault_names())  # read from the registry


def test_variants_are_merged_once_and_source_is_not_part_of_equality(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(config.DEFAULT_TOML)
    from_file, from_text = config.load(path), config.loads(config.DEFAULT_TOML)
    assert from_file == from_text and from_file.source == str(path) and from_text.source == ""
    fixed = from_file.variants[1]
    assert isinstance(fixed, VariantConfig) and fixed.training.sampling == "fixed_wor"
    assert fixed.training.n_records == from_file.training.n_records and fixed.claim == from_file.claim
    assert from_file.overrides(fixed) == {"training": {"sampling": "fixed_wor"},
                                          "attack": {"threat_model": "white_box_crafted_dataset"}}
    assert config.loads(config.dumps(from_file)) == from_file  # config.toml round trip
    assert [v.name for v in config.loads("").audits()] == ["main"]


def test_the_user_trainer_scores_have_one_definition():
    """attacks.plugin defines what a user trainer's audit computes; the config's allowed values and the checks
    between keys read it (before: listed in config.USER_TRAINER_SCORES, config._consistent and plugin)."""
    assert registry.user_trainer_scores("black_box") == plugin.SCORES
    assert registry.user_trainer_scores("white_box") == plugin.WHITE_SCORES
    score = constraint(next(f for f in dataclasses.fields(SECTIONS["attack"]) if f.name == "score"))
    assert isinstance(score, Choice) and set(plugin.SCORES + plugin.WHITE_SCORES) <= set(score.values())


def test_the_estimate_reads_the_game_inputs_prepare_built(monkeypatch):
    cfg = config.loads("[training]\nn_records = 20\nsteps = 3\n[audit]\ntrials = 10\n")
    built = {p.variant.name: p.game for p in runs.prepare(cfg)}
    want = estimate.describe(cfg)

    def no_build(v):
        raise AssertionError("built again")

    monkeypatch.setattr(runs, "build", no_build)
    assert estimate.describe(cfg, built=built) == want


def test_resume_compares_the_typed_configs(tmp_path):
    small = "[training]\nn_records = 20\nsteps = 3\n[audit]\ntrials = 10\n"
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.toml").write_text(config.dumps(config.loads(small)))
    (tmp_path / "same.toml").write_text(small)
    (tmp_path / "other.toml").write_text(small.replace("steps = 3", "steps = 4"))
    assert config.load(tmp_path / "same.toml") == config.load_resolved(out / "config.toml")  # sources differ
    with pytest.raises(runs.RunError, match=r"--resume: \S*other\.toml differs from the configuration in"):
        runs.execute(tmp_path / "other.toml", out, resume=True, progress=False)
    assert not (out / "audits").exists()  # refused before anything ran
