"""TOML audit configurations, parsed once into the typed :class:`audit.runconfig.RunConfig`.

A configuration has the sections ``[training]``, ``[canary]``, ``[attack]``, ``[audit]`` and,
for ``dpaudit check``, ``[claim]``; every key has a default (:data:`DEFAULT_TOML`, also written to
``examples/default.toml``) and a constraint, both declared beside its field in :mod:`audit.runconfig`.
Errors name the key and the allowed values. Optional ``[[variant]]`` tables name further audits that
override some keys of the base (dotted keys, e.g. ``training.sampling = "fixed_wor"``); each is merged
with the base here, once, into a :class:`audit.runconfig.VariantConfig`: one audit game with its own
trials file.

>>> cfg = loads('[training]\\nnoise_multiplier = 2.0\\n[audit]\\ntrials = 64')
>>> cfg.training.noise_multiplier, cfg.audit.trials, [v.name for v in variants(cfg)]
(2.0, 64, ['main'])
>>> loads('[audit]\\ngame = "cyclic"')
Traceback (most recent call last):
...
accountants.InputError: audit.game must be one of ['multi_run', 'one_run', 'reconstruction']; got 'cyclic'
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
from pathlib import Path
from typing import Any

from accountants import describe
from accountants.errors import InputError, InputTypeError

from . import registry
from .model import check_name
from .runconfig import (
    SECTIONS,
    SEQUENTIAL_FIRST_LOOK,
    TRAINED_SAMPLING,
    RunConfig,
    TrainingConfig,
    VariantConfig,
    canonical,
    check_section,
    limits,
    parse_choice,
    show,
)

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

__all__ = ["DEFAULT_TOML", "LIMITS", "SECTIONS", "SEQUENTIAL_FIRST_LOOK", "SEQUENTIAL_MAX_TRIALS", "TRAINED_SAMPLING",
           "RunConfig", "VariantConfig", "canonical", "dumps", "load", "load_resolved", "loads", "parse_choice",
           "read_text", "toml_value", "variants"]

# The default audit: embedded digits data, a white-box Dirac canary under Poisson sampling, the
# worst-case crafted dataset under fixed-size sampling (docs/worst-case.md), and a black-box loss
# attack on a blank-image canary.
DEFAULT_TOML = """\
# dpaudit default audit (dpaudit run with no CONFIG uses exactly this file).
# Every key is listed with its default; [[variant]] tables override keys for further audits.

[training]
dataset = "digits"            # digits | breast_cancer | gaussian_classes (embedded, no download)
n_records = 100               # natural records used (the first n of the dataset)
model = "logistic_regression" # logistic_regression | mlp | cnn (digits as 1x8x8 images)
hidden = 32                   # mlp hidden width; cnn channels
noise_multiplier = 1.0        # sigma: noise std on the SUM of clipped gradients / clip_norm
sampling = "poisson"          # poisson | fixed_wor (fixed size, without replacement) | shuffle (reshuffled every epoch)
                              # | random_allocation (each record in k random steps of every epoch; k = 1: balls-in-bins)
sample_rate = 0.5             # poisson only
batch_size = 50               # fixed_wor and shuffle only
steps_per_epoch = 10          # random_allocation only: t
k = 1                         # random_allocation only: steps per epoch a record joins, 1 <= k <= steps_per_epoch
steps = 10
clip_norm = 1.0
learning_rate = 0.5
neighbouring = "add_remove"   # add_remove | replace_one
# fault: none | noise_missing_factor | no_clipping | realised_batch_normalisation | shuffled_batches
#        | clip_norm_mismatch (the registry in attacks/faults.py; dpaudit run --help lists them)
fault = "none"                # a deliberately broken trainer (attacks/faults.py); the claim stays the spec
fault_factor = 2.0            # noise_missing_factor and clip_norm_mismatch only

[canary]
kind = "dirac"                # dirac | dirac_slots (gradient) | mislabelled | blank | mean_image | out_of_distribution
norm = 1.0                    # gradient canaries: norm in units of clip_norm
count = 1                     # canaries per run (one_run game: m)

[attack]
# white_box (every update) | white_box_crafted_dataset (every update, and the adversary chooses every
# record's gradient: the worst case of docs/worst-case.md) | hidden_state (final parameters only, initial
# ones known; gradient canary) | black_box (final model's outputs)
threat_model = "white_box"
score = "llr"                 # llr | inner_product | update_norm (white box); final_projection (hidden state);
                              # loss | confidence | lira (black box)
n_shadow = 16                 # lira only

[audit]
game = "multi_run"            # multi_run | one_run | reconstruction
trials = 2000                 # runs (one_run: runs of m canaries each); at most 1000000
significance = 0.05           # every lower bound holds with probability >= 1 - significance
delta = 1e-5
seed = 0
threshold = "bonferroni"      # bonferroni | split | multi_split
chunk_size = 500              # runs trained at once (vectorised)
lift_limits = false           # true: allow counts above the documented limits (see audit/config.py LIMITS)

[claim]                       # for dpaudit check
epsilon = "accountant"        # a number >= 0, or "accountant": the accountants' own epsilon at delta
delta = 1e-5

[[variant]]
name = "white_box_poisson"

[[variant]]
name = "white_box_crafted_fixed_size"  # n_records crafted records of gradient -C e beside the canary (+C e)
training.sampling = "fixed_wor"
attack.threat_model = "white_box_crafted_dataset"

[[variant]]
name = "black_box_loss"
canary.kind = "blank"
attack.threat_model = "black_box"
attack.score = "loss"
"""

# Documented upper limits on counts: a typo such as trials = 1e12 must not run for ever. Each can be
# lifted with ``[audit] lift_limits = true``; ``seed`` has a hard limit (it must fit in 63 bits).

# Documented upper limits on counts: a typo such as trials = 1e12 must not run for ever. Each can be
# lifted with ``[audit] lift_limits = true``; ``seed`` has a hard limit (it must fit in 63 bits). Declared
# beside each field (audit.runconfig); this is their table.
LIMITS: dict[str, int] = limits()
_MAX_TEXT = 1_000_000  # characters of a configuration file
_RawTable = dict[str, Any]  # a TOML table as tomllib reads it, before it is checked (private to this module)


class _AuditDataset:
    """Marks a default variant's ``training.n_records`` as the audit's own dataset size (:func:`audit_dataset_size`).

    Never read from TOML (a configuration cannot write it); it survives ``copy.deepcopy`` as itself.
    """

    def __deepcopy__(self, memo: dict[int, Any]) -> _AuditDataset:
        return self

    def __repr__(self) -> str:
        return "AUDIT_DATASET"


AUDIT_DATASET = _AuditDataset()


def audit_dataset_size(n_records: int, sampling: str, rate: float) -> int:
    """How many natural records a default audit marked :data:`AUDIT_DATASET` hands the trainer.

    audit.conformance.natural_records: under a Poisson claim about ``NATURAL_BATCH`` per batch (DP holds for
    every pair of neighbouring datasets, so the audit may choose a small one: Nasr et al. 2021, §4); a fixed-size or
    shuffle claim names its dataset size, so ``n_records`` is kept.
    """
    from .conformance import natural_records

    return natural_records(n_records, describe.parse_sampling_kind(sampling, key="training.sampling"), rate)


# The designs a user trainer gets when its config has no [canary] and no [attack] keys, chosen by the
# fault-detection study (docs/fault-detection.md): the white-box one when the trainer accepts the
# keyword ``audit`` (the hooks of attacks/plugin.py), else the black-box one (the final model only).
RECOMMENDED_BLACK_BOX = {"canary": {"kind": "blank"}, "attack": {"threat_model": "black_box", "score": "projection"}}
RECOMMENDED_WHITE_BOX = {"canary": {"kind": "blank"}, "attack": {"threat_model": "white_box", "score": "inner_product"}}
RECOMMENDED_DESIGN = RECOMMENDED_BLACK_BOX  # the design for a trainer that takes no ``audit`` keyword
# ... and, in a config without [[variant]], a second audit of the same trainer in the same threat model with
# the mean-image canary (reads the bias: catches noise missing on some parameters, which the blank canary
# misses). The run's significance is shared between the two (Bonferroni), so the verdict keeps its confidence.
RECOMMENDED_VARIANTS: list[_RawTable] = [{"name": "main"},
                                             {"name": "mean_image", "canary": {"kind": "mean_image"}}]
# In the black box the main audit reads the final parameters along the blank canary's per-tensor clipped gradient
# ("projection": sees an excess in any tensor, e.g. per-tensor clipping), the mean image's audit the final model's
# loss (its gradient is the bias alone, which its loss reads; docs/fault-detection.md, "A final-model score").
# The main audit runs on the audit's own smaller dataset (AUDIT_DATASET: audit.conformance.natural_records, about 20
# natural records per batch under a Poisson claim; DP holds for every dataset): a contribution scaled by B/|B_t| (the
# mean over the realised batch times the expected size) then moves the final model by about B/|B_t|·C.
RECOMMENDED_BLACK_BOX_VARIANTS: list[_RawTable] = [{"name": "main", "training": {"n_records": AUDIT_DATASET}},
                                                   {"name": "mean_image", "canary": {"kind": "mean_image"},
                                                    "attack": {"score": "loss"}}]
# A one-run black-box audit (m distinct canaries, one model) keeps reading each canary by its loss (the projection
# was measured for the multi-run default only); the CLI (_recommend_one_run) and audit.score use this one table.
ONE_RUN_BLACK_BOX_ATTACK: _RawTable = {"threat_model": "black_box", "score": "loss"}
# ... and, in the white box, a third audit whose dead_feature canary feeds the conformance tests of the DP-SGD
# proof's premises (audit/conformance.py; they share that audit's significance with its ε audit).
CONFORMANCE_VARIANT: _RawTable = {"name": "conformance", "canary": {"kind": "dead_feature"},
                                  "training": {"n_records": AUDIT_DATASET}}
# The black-box default's sequential design (docs/fault-detection.md, "Sequential"): the violation test at looks
# 250, 500, 1000, ... up to this ceiling, alpha spent over the looks; a correct trainer stops early for futility.
SEQUENTIAL_MAX_TRIALS = 20_000
# Futility's z per recommended black-box audit (docs/fault-detection.md, "The exact threshold test"): a cost knob,
# never a validity one. The main audit reads a correct trainer far above the claim (its per-tensor direction sees
# 0.77 of the contribution), so it passes early at z = 0, the most power; the mean image's loss reads a correct
# trainer near the claim, where z = 0 spent 1,794 trials on average (seeds 1000-1019; measured) and z = 0.5 spends
# 485, and every zoo bug it caught at z = 0 it caught at 0.5 (seeds 1000-1001), by 2,000 trials.
BLACK_BOX_FUTILITY_Z = {"main": 0.0, "mean_image": 0.5}


def _recommended_design(trainer: str, base_dir: str | Path | None = None) -> _RawTable:
    """The default design for a user trainer (docs/fault-detection.md): white box when it accepts ``audit=``.

    The white-box design is an input canary (it goes through the trainer's whole pipeline, data
    loader included, unlike the gradient-canary hook) scored by the per-step updates' projection on
    its clipped gradient. A trainer that cannot be imported here gets the black-box design (the run
    then reports the import error itself). A config without ``[[variant]]`` also gets
    :data:`RECOMMENDED_VARIANTS` (the same design with the mean-image canary beside it).
    """
    from attacks import plugin  # lazy: importing the trainer is needed only for a defaulted design

    design = RECOMMENDED_BLACK_BOX
    try:
        fn = plugin.load_trainer(trainer, base_dir)
        inspect.signature(fn).bind(None, None, seed=0, audit=None)
        design = RECOMMENDED_WHITE_BOX
    except (InputError, TypeError, ValueError):
        pass
    return copy.deepcopy(design)


# A user trainer's one-run audit ([audit] game = "one_run"): what fills the keys the configuration leaves out
# (keys it writes always win). m input canaries far from the data (distinct inputs, unlike m identical blank
# images), one training run. No second or conformance audit: they need many runs.
RECOMMENDED_ONE_RUN: _RawTable = {"canary": {"kind": "out_of_distribution", "count": 1000},
                                                   "audit": {"trials": 1}}


def _user_one_run(raw: _RawTable) -> bool:
    """Does this raw configuration name a user trainer and ``[audit] game = "one_run"``?"""
    training, audit = raw.get("training"), raw.get("audit")
    return isinstance(training, dict) and bool(training.get("trainer")) and isinstance(audit, dict) \
        and isinstance(audit.get("game"), str) and canonical(audit["game"]) == "one_run"


def _recommend_one_run(raw: _RawTable, base_dir: str | Path | None) -> None:
    """Fill a user trainer's one-run audit's missing keys in place: [attack] (when absent) by what the trainer
    supports (:func:`_recommended_design`), then :data:`RECOMMENDED_ONE_RUN`; keys the configuration writes stay."""
    from attacks.plugin import trainer_folder  # a relative trainer_dir stays inside the config's folder

    if "attack" not in raw:
        training = raw["training"]
        raw["attack"] = _recommended_design(str(training["trainer"]), trainer_folder(
            training.get("trainer_dir", ""), base_dir) or None)["attack"]
        if raw["attack"]["threat_model"] == "black_box":
            raw["attack"] = dict(ONE_RUN_BLACK_BOX_ATTACK)
    for section, keys in RECOMMENDED_ONE_RUN.items():
        table = raw.setdefault(section, {})
        if isinstance(table, dict):  # anything else is reported by the schema check
            for key, value in keys.items():
                table.setdefault(key, value)


def _check_limits(c: VariantConfig, where: str) -> None:
    if c.audit.lift_limits:
        return
    for dotted, limit in LIMITS.items():
        section, key = dotted.split(".")
        value = getattr(getattr(c, section), key)
        if value > limit:
            raise InputError(f"{where}{dotted} = {value} is above the documented limit {limit}; set "
                             "[audit] lift_limits = true to run it anyway")


def _validate_sections(raw: _RawTable, where: str = "", name: str = "main") -> VariantConfig:
    """Every key of the five sections checked by its declared constraint, defaults filled; unknown keys are errors."""
    for section, table in raw.items():
        if section not in SECTIONS:
            raise InputError(f"{where}unknown section [{show(section)[1:-1]}]; allowed: {sorted(SECTIONS)} and "
                             "[[variant]]")
        if not isinstance(table, dict):
            raise InputError(f"{where}[{section}] must be a table")
    out = VariantConfig(name, *(check_section(cls, raw.get(s, {}), s, where) for s, cls in SECTIONS.items()))
    _consistent(out, where)
    _check_limits(out, where)
    return out


def _gradient_canaries() -> set[str]:
    return {n for n, info in registry.canaries().items() if info.kind == "gradient"}


def _sequential_keys(c: VariantConfig, where: str) -> None:
    """audit.max_trials > 0 (the sequential design) plays a user trainer's multi-run game; time_budget needs it."""
    t, can, aud = c.training, c.canary, c.audit
    for key in ("time_budget", "futility_z"):
        if getattr(aud, key) and not aud.max_trials:
            raise InputError(f"{where}audit.{key} applies to the sequential design only (audit.max_trials > 0)")
    if aud.max_trials and (not t.trainer or aud.game != "multi_run" or can.kind == "dead_feature"):
        raise InputError(f"{where}audit.max_trials = {aud.max_trials} (the sequential design) applies to a user "
                         "trainer ([training] trainer) in audit.game 'multi_run' with an ε audit's canary (not "
                         "'dead_feature'); set audit.max_trials = 0 for the fixed design of audit.trials trials")


def _words(names: tuple[str, ...]) -> str:
    return " or ".join(repr(n) for n in names)


def _consistent_user_trainer(c: VariantConfig, where: str) -> None:
    """A user trainer (attacks/plugin.py, docs/own-training.md): the scores its audit computes
    (:func:`audit.registry.user_trainer_scores`), the canary each needs, and the games it plays."""
    t, can, att, aud = c.training, c.canary, c.attack, c.audit
    black = att.threat_model == "black_box"
    gradient = can.kind in _gradient_canaries()
    allowed = registry.user_trainer_scores(att.threat_model) if att.threat_model in ("black_box", "white_box") else ()
    hook_only = att.score == "step_spread"  # reads the gradient-canary hook's per-step updates (plugin.Context)
    if aud.game == "reconstruction" or att.score not in allowed or (hook_only and not gradient) \
            or (black and gradient):
        white = registry.user_trainer_scores("white_box")
        raise InputError(f"{where}training.trainer {t.trainer!r} is audited in the black box (attack.score "
                         f"{_words(registry.user_trainer_scores('black_box'))}, an input canary) or the white box "
                         f"(attack.score {_words(tuple(s for s in white if s != 'step_spread'))}, or 'step_spread' "
                         "with canary.kind 'dirac'), with audit.game 'multi_run' or 'one_run'; leave [canary] and "
                         "[attack] out for the recommended design")
    if can.kind == "dirac_slots":
        raise InputError(f"{where}canary.kind 'dirac_slots' pads dpaudit's own model with quiet parameters; a user "
                         "trainer's gradient canaries are the hook's: canary.kind 'dirac'")
    if not black and gradient and t.sampling != "poisson":
        raise InputError(f"{where}the gradient-canary hook of a user trainer needs training.sampling 'poisson' "
                         f"(it samples the canaries at the claimed rate); got {t.sampling!r}")
    if aud.game == "multi_run" and can.count != 1:
        raise InputError(f"{where}canary.count must be 1 for audit.game 'multi_run'; got {can.count} (m "
                         "canaries in one training: audit.game 'one_run')")


def _consistent(c: VariantConfig, where: str) -> None:
    t, can, att, aud = c.training, c.canary, c.attack, c.audit
    if aud.trials < 2 and aud.game != "one_run":  # one training run is a one-run audit only
        raise InputError(f"{where}audit.trials must be an integer ≥ 2 for audit.game {aud.game!r} (only "
                         f"'one_run' audits from a single training run); got {aud.trials}")
    _count_fits(c, where)
    if t.sampling == "random_allocation":
        _consistent_allocation(c, where)
    _consistent_truncation(t, where)
    if aud.trial_timeout and not t.trainer:
        raise InputError(f"{where}audit.trial_timeout applies to a user trainer ([training] trainer) only")
    _sequential_keys(c, where)
    if t.trainer:
        _consistent_user_trainer(c, where)
        return
    canary = registry.canaries()[can.kind]
    threat = att.threat_model
    needed = "gradient" if threat != "black_box" else "input"
    if canary.kind != needed:
        allowed = sorted(n for n, info in registry.canaries().items() if info.kind == needed)
        raise InputError(f"{where}canary.kind = {can.kind!r} is a {canary.kind} canary; attack.threat_model "
                         f"{threat!r} needs a {needed} canary, one of {allowed}")
    if threat == "hidden_state" and aud.game == "reconstruction":
        raise InputError(f"{where}attack.threat_model 'hidden_state' is audited by audit.game 'multi_run' or "
                         "'one_run'; got 'reconstruction'")
    if threat == "white_box_crafted_dataset" and aud.game != "multi_run":
        raise InputError(f"{where}attack.threat_model 'white_box_crafted_dataset' is audited by audit.game "
                         f"'multi_run' only; got {aud.game!r}")
    allowed_scores = registry.score_names(threat)
    if att.score not in allowed_scores and aud.game != "reconstruction":
        raise InputError(f"{where}attack.score must be one of {allowed_scores} for attack.threat_model "
                         f"{threat!r}; got {att.score!r}")
    if aud.game == "multi_run" and can.count != 1:
        raise InputError(f"{where}canary.count must be 1 for audit.game 'multi_run'; got {can.count}")
    if aud.game == "reconstruction" and can.count < 2:
        raise InputError(f"{where}canary.count (candidates) must be ≥ 2 for audit.game 'reconstruction'")
    if t.sampling == "shuffle":
        if aud.game == "reconstruction":
            raise InputError(f"{where}training.sampling 'shuffle' is audited by audit.game 'multi_run' or 'one_run'; "
                             "got 'reconstruction'")
        if threat == "white_box_crafted_dataset" and t.neighbouring != "add_remove":
            raise InputError(f"{where}attack.threat_model 'white_box_crafted_dataset' with training.sampling "
                             "'shuffle' needs training.neighbouring 'add_remove' (docs/worst-case.md)")
    if t.sampling in ("fixed_wor", "shuffle") and t.batch_size > t.n_records + can.count:
        raise InputError(f"{where}training.batch_size must be ≤ n_records + canary.count = "
                         f"{t.n_records + can.count}; got {t.batch_size}")


def _count_fits(c: VariantConfig, where: str) -> None:
    """canary.count within what the canary kind can make from the data (a clear error before any training)."""
    can, t = c.canary, c.training
    if can.kind == "mislabelled" and can.count > t.n_records:
        raise InputError(f"{where}canary.count must be ≤ training.n_records = {t.n_records} for canary.kind "
                         f"'mislabelled' (each relabels a distinct natural record); got {can.count} (more "
                         "canaries than records: canary.kind 'out_of_distribution')")


def _consistent_truncation(t: TrainingConfig, where: str) -> None:
    """training.max_batch_size: ≥ 1 with truncated Poisson (the largest batch kept), unset (0) otherwise."""
    truncated = t.sampling == "truncated_poisson"
    if truncated and t.max_batch_size < 1:
        raise InputError(f"{where}training.max_batch_size must be an integer ≥ 1 with training.sampling "
                         f"'truncated_poisson' (the largest batch kept); got {t.max_batch_size}")
    if not truncated and t.max_batch_size != 0:
        raise InputError(f"{where}training.max_batch_size applies to training.sampling 'truncated_poisson' only; "
                         f"got sampling {t.sampling!r}")


def _consistent_allocation(c: VariantConfig, where: str) -> None:
    """Random allocation (accountants.RandomAllocation): k ≤ t, add/remove, the LLR and crafted designs at k = 1."""
    t, att = c.training, c.attack
    if t.k > t.steps_per_epoch:
        raise InputError(f"{where}training.k must be an integer in [1, training.steps_per_epoch = "
                         f"{t.steps_per_epoch}]; got {t.k}")
    if t.neighbouring != "add_remove":
        raise InputError(f"{where}training.sampling 'random_allocation' is accounted for training.neighbouring "
                         f"'add_remove' only; got {t.neighbouring!r}")
    if t.k > 1 and (att.score == "llr" or att.threat_model == "white_box_crafted_dataset"):
        raise InputError(f"{where}attack.score 'llr' and attack.threat_model 'white_box_crafted_dataset' under "
                         f"training.sampling 'random_allocation' need training.k = 1 (balls-in-bins); got {t.k}")


def _parse(text: str) -> _RawTable:
    """TOML text as tomllib reads it; every way it can fail is an InputError."""
    if not isinstance(text, str):
        raise InputTypeError(f"a configuration must be TOML text; got {type(text).__name__}")
    if len(text) > _MAX_TEXT:
        raise InputError(f"the configuration has {len(text)} characters; at most {_MAX_TEXT} are read")
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # CRLF and CR-only (classic Mac) line endings
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"invalid TOML: {exc}") from None
    except RecursionError:
        raise InputError("invalid TOML: arrays or tables are nested too deeply") from None
    except ValueError as exc:  # an integer of more than sys.get_int_max_str_digits() digits
        raise InputError(f"invalid TOML: a number is too long ({str(exc).split(';')[0]})") from None


def _recommend(raw: _RawTable, variants_raw: Any, base_dir: str | Path | None) -> Any:
    """Fill a user trainer's recommended design into ``raw`` in place; returns the [[variant]] tables to use."""
    training = raw.get("training")
    if _user_one_run(raw):
        _recommend_one_run(raw, base_dir)
    elif isinstance(training, dict) and training.get("trainer") and "canary" not in raw and "attack" not in raw:
        # a config naming only a user trainer and the claim gets the recommended design for what it supports
        from attacks.plugin import trainer_folder  # a relative trainer_dir stays inside the config's folder

        design = _recommended_design(str(training["trainer"]), trainer_folder(training.get("trainer_dir", ""),
                                                                              base_dir) or None)
        raw["canary"], raw["attack"] = design["canary"], design["attack"]
        if not variants_raw:
            white = design["attack"]["threat_model"] == "white_box"
            variants_raw = copy.deepcopy(RECOMMENDED_VARIANTS if white else RECOMMENDED_BLACK_BOX_VARIANTS)
            if white:
                variants_raw.append(copy.deepcopy(CONFORMANCE_VARIANT))
            elif isinstance(raw.setdefault("audit", {}), dict) and "trials" not in raw["audit"]:
                # black box, no fixed audit.trials asked for: the sequential design
                raw["audit"].setdefault("max_trials", SEQUENTIAL_MAX_TRIALS)
                if raw["audit"]["max_trials"] and "futility_z" not in raw["audit"]:
                    _futility_per_audit(variants_raw)
    return variants_raw


def _futility_per_audit(variants_raw: list[_RawTable]) -> None:
    """Each recommended black-box audit's futility z (:data:`BLACK_BOX_FUTILITY_Z`), unless the config set one."""
    for v in variants_raw:
        z = BLACK_BOX_FUTILITY_Z.get(str(v["name"]))
        if z is not None:
            audit = v.setdefault("audit", {})
            assert isinstance(audit, dict)
            audit["futility_z"] = z


def _variant(raw: _RawTable, v: Any, i: int, seen: set[str]) -> VariantConfig:
    """The ``i``-th ``[[variant]]`` table merged with the base ``raw`` and checked (its errors name it)."""
    if not isinstance(v, dict):
        raise InputError(f"variant[{i}] must be a table")
    name = check_name(v.get("name"), f"variant[{i}].name")  # the same check as names read from result.json
    if name in seen:
        raise InputError(f"variant[{i}].name {name!r} is used twice")
    seen.add(name)
    overrides = {k: val for k, val in v.items() if k != "name"}
    if "claim" in overrides:
        raise InputError(f"variant {name!r}: [claim] is global; set it outside [[variant]]")
    merged = copy.deepcopy(raw)
    for section, table in overrides.items():
        if not isinstance(table, dict):
            raise InputError(f"variant {name!r}: {section} must be a table of overrides (e.g. {section}.key = ...)")
        merged.setdefault(section, {}).update(table)
    return _validate_sections(merged, where=f"variant {name!r}: ", name=name)


def loads(text: str, *, base_dir: str | Path | None = None, source: str = "") -> RunConfig:
    """Parse and check a TOML configuration once: the resolved :class:`RunConfig`, each variant merged.

    ``base_dir``: the configuration file's folder, where a user trainer's module is looked up first.
    ``source``: where the text came from (kept in :attr:`RunConfig.source`; not part of equality).
    """
    raw = _parse(text)
    variants_raw = _recommend(raw, raw.pop("variant", []), base_dir)
    if not isinstance(variants_raw, list):
        raise InputError("variant must be an array of tables ([[variant]])")
    base = _validate_sections(raw)
    for v in variants_raw:  # a default audit on the audit's own smaller dataset (AUDIT_DATASET)
        training = v.get("training") if isinstance(v, dict) else None
        if isinstance(training, dict) and training.get("n_records") is AUDIT_DATASET:
            t = base.training
            training["n_records"] = audit_dataset_size(t.n_records, t.sampling, t.sample_rate)
    seen: set[str] = set()
    merged = tuple(_variant(raw, v, i, seen) for i, v in enumerate(variants_raw))
    return RunConfig(base.training, base.canary, base.attack, base.audit, base.claim, merged, source)


def load(path: str | Path | None) -> RunConfig:
    """Load a configuration file (None: the embedded default)."""
    if path is None:
        return loads(DEFAULT_TOML, source="<default>")
    folder = Path(path).resolve().parent
    cfg = loads(read_text(path, what="config file"), base_dir=folder, source=str(path))
    from attacks.plugin import trainer_folder  # a relative trainer_dir stays inside the config's folder

    def resolved(t: TrainingConfig, trainer_dir: str) -> TrainingConfig:
        return dataclasses.replace(t, trainer_dir=trainer_folder(trainer_dir, folder))

    # a trainer's module is looked up in the config's folder (or trainer_dir) first; a variant that writes no
    # trainer_dir of its own keeps the base's
    base = resolved(cfg.training, cfg.training.trainer_dir) if cfg.training.trainer else cfg.training
    out = []
    for v in cfg.variants:
        if v.training.trainer_dir != cfg.training.trainer_dir:
            t = resolved(v.training, v.training.trainer_dir) if v.training.trainer_dir else v.training
        else:
            t = dataclasses.replace(v.training, trainer_dir=base.trainer_dir)
        out.append(dataclasses.replace(v, training=t))
    return dataclasses.replace(cfg, training=base, variants=tuple(out))


def read_text(path: str | Path, *, what: str) -> str:
    """A configuration file's text: UTF-8 (a BOM is allowed), at most 1 MB; InputError naming the file."""
    p = Path(path)
    shown = repr(str(p)) if len(str(p)) <= 200 else repr(str(p)[:200]) + "..."
    try:
        is_file = p.is_file()
    except (OSError, ValueError) as exc:  # a name too long for the file system, a NUL byte
        raise InputError(f"{what} {shown} cannot be used: {getattr(exc, 'strerror', None) or exc}") from None
    if not is_file:
        raise InputError(f"{what} {shown} does not exist (or is not a file)")
    try:
        data = p.read_bytes()[: 4 * _MAX_TEXT + 1]
    except OSError as exc:
        raise InputError(f"{what} {str(p)!r} cannot be read: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(f"{what} {str(p)!r} is not UTF-8 text (byte {exc.start})") from None


def variants(config: RunConfig) -> list[VariantConfig]:
    """The audits of a resolved configuration: each [[variant]] as merged by :func:`loads` ("main" when none)."""
    return list(config.audits())


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise InputTypeError(f"cannot write {type(v).__name__} to TOML")


toml_value = _toml_value  # public: a value written as a TOML literal (audit.score writes configurations)


def dumps(config: RunConfig) -> str:
    """A resolved configuration as TOML (every key explicit; round-trips through :func:`loads`)."""
    lines = ["# dpaudit resolved configuration (every key explicit, seeds included)"]
    for section in SECTIONS:
        table = getattr(config, section)
        lines.append(f"\n[{section}]")
        lines += [f"{f.name} = {_toml_value(getattr(table, f.name))}" for f in dataclasses.fields(table)]
    for v in config.variants:
        lines.append("\n[[variant]]")
        lines.append(f"name = {_toml_value(v.name)}")
        for s, diff in config.overrides(v).items():
            lines += [f"{s}.{k} = {_toml_value(val)}" for k, val in diff.items()]
    lines.append(f"\n{END_MARK}")
    return "\n".join(lines) + "\n"


END_MARK = "# end of dpaudit resolved configuration"


def load_resolved(path: str | Path) -> RunConfig:
    """Load a run folder's resolved ``config.toml`` for ``--resume``; refuse an empty or truncated one.

    The file :func:`dumps` writes lists every key and ends with :data:`END_MARK`. An empty file
    would otherwise parse as the default audit, and a truncated one as a different audit.
    """
    text = read_text(path, what="resolved configuration")
    how = (f"it cannot be resumed. Restore it (e.g. from the run's result.json \"config\"), or start a new run "
           f"with dpaudit run CONFIG --out ANOTHER_FOLDER (finished trials in {str(Path(path).parent)!r}/audits "
           "are kept only when the configuration matches)")
    if not text.strip():
        raise InputError(f"{str(path)!r} is empty; {how}")
    if text.rstrip().splitlines()[-1].strip() != END_MARK:
        raise InputError(f"{str(path)!r} is truncated (its last line is not {END_MARK!r}); {how}")
    try:
        raw = tomllib.loads(text.replace("\r\n", "\n"))
    except (tomllib.TOMLDecodeError, RecursionError, ValueError):  # ValueError: a 5,000-digit integer
        raise InputError(f"{str(path)!r} is not valid TOML; {how}") from None
    later = {("audit", "trial_timeout"), ("audit", "max_trials"), ("audit", "time_budget"),  # older runs resume
             ("audit", "futility_z")}
    for section, cls in SECTIONS.items():  # without the keys added since (issues 23, 25): their defaults
        missing = [f.name for f in dataclasses.fields(cls) if f.name not in raw.get(section, {})
                   and (section, f.name) not in later]
        if missing:
            raise InputError(f"{str(path)!r} lacks {section}.{missing[0]}; {how}")
    return loads(text, source=str(path))
