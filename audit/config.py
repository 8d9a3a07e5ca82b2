"""TOML audit configurations, validated with errors that name the key and the allowed values.

A configuration has the sections ``[training]``, ``[canary]``, ``[attack]``, ``[audit]`` and,
for ``dpaudit check``, ``[claim]``; every key has a default (:data:`DEFAULT_TOML`, also written to
``examples/default.toml``). Optional ``[[variant]]`` tables name further audits that override
some keys of the base (dotted keys, e.g. ``training.sampling = "fixed_wor"``); each variant is
one audit game with its own trials file.

>>> cfg = loads('[training]\\nnoise_multiplier = 2.0\\n[audit]\\ntrials = 64')
>>> cfg["training"]["noise_multiplier"], cfg["audit"]["trials"], [v["name"] for v in variants(cfg)]
(2.0, 64, ['main'])
>>> loads('[audit]\\ngame = "cyclic"')
Traceback (most recent call last):
...
accountants.InputError: audit.game must be one of ['multi_run', 'one_run', 'reconstruction']; got 'cyclic'
"""

from __future__ import annotations

import copy
import inspect
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from accountants import describe
from accountants.errors import InputError, InputTypeError

from . import registry
from .model import check_name

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

__all__ = ["DEFAULT_TOML", "LIMITS", "SCHEMA", "dumps", "load", "load_resolved", "loads", "read_text", "variants"]

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
kind = "dirac"                # dirac (gradient) | mislabelled | blank | mean_image | out_of_distribution (input)
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
LIMITS: dict[str, int] = {
    "training.n_records": 1_000_000,
    "training.hidden": 4096,
    "training.batch_size": 1_000_000,
    "training.steps_per_epoch": 100_000,
    "training.steps": 100_000,
    "canary.count": 10_000,
    "attack.n_shadow": 1024,
    "audit.trials": 1_000_000,
    "audit.chunk_size": 100_000,
    "audit.max_trials": 1_000_000,
}
_HARD_LIMITS = {"audit.seed": 2**63 - 1}
_MAX_TEXT = 1_000_000  # characters of a configuration file

# The designs a user trainer gets when its config has no [canary] and no [attack] keys, chosen by the
# fault-detection study (docs/fault-detection.md): the white-box one when the trainer accepts the
# keyword ``audit`` (the hooks of attacks/plugin.py), else the black-box one (the final model only).
RECOMMENDED_BLACK_BOX = {"canary": {"kind": "blank"}, "attack": {"threat_model": "black_box", "score": "loss"}}
RECOMMENDED_WHITE_BOX = {"canary": {"kind": "blank"}, "attack": {"threat_model": "white_box", "score": "inner_product"}}
RECOMMENDED_DESIGN = RECOMMENDED_BLACK_BOX  # the design for a trainer that takes no ``audit`` keyword
# ... and, in a config without [[variant]], a second audit of the same trainer in the same threat model with
# the mean-image canary (reads the bias: catches noise missing on some parameters, which the blank canary
# misses). The run's significance is shared between the two (Bonferroni), so the verdict keeps its confidence.
RECOMMENDED_VARIANTS: list[dict[str, Any]] = [{"name": "main"},
                                             {"name": "mean_image", "canary": {"kind": "mean_image"}}]
# ... and, in the white box, a third audit whose dead_feature canary feeds the conformance tests of the DP-SGD
# proof's premises (audit/conformance.py; they share that audit's significance with its ε audit).
CONFORMANCE_VARIANT: dict[str, Any] = {"name": "conformance", "canary": {"kind": "dead_feature"}}
# The black-box default's sequential design (docs/fault-detection.md, "Sequential"): the violation test at looks
# 250, 500, 1000, ... up to this ceiling, alpha spent over the looks; a correct trainer stops early for futility.
SEQUENTIAL_MAX_TRIALS = 20_000
SEQUENTIAL_FIRST_LOOK = 250  # audit.statistics.sequential.FIRST_LOOK (not imported: the config stays light)
# Scores only a user trainer's audit computes (attacks/plugin.py), beside the registered ones.
USER_TRAINER_SCORES = ("step_spread",)


def recommended_design(trainer: str, base_dir: str | Path | None = None) -> dict[str, dict[str, Any]]:
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
RECOMMENDED_ONE_RUN: dict[str, dict[str, Any]] = {"canary": {"kind": "out_of_distribution", "count": 1000},
                                                   "audit": {"trials": 1}}


def _user_one_run(raw: dict[str, Any]) -> bool:
    """Does this raw configuration name a user trainer and ``[audit] game = "one_run"``?"""
    training, audit = raw.get("training"), raw.get("audit")
    return isinstance(training, dict) and bool(training.get("trainer")) and isinstance(audit, dict) \
        and isinstance(audit.get("game"), str) and canonical(audit["game"]) == "one_run"


def _recommend_one_run(raw: dict[str, Any], base_dir: str | Path | None) -> None:
    """Fill a user trainer's one-run audit's missing keys in place: [attack] (when absent) by what the trainer
    supports (:func:`recommended_design`), then :data:`RECOMMENDED_ONE_RUN`; keys the configuration writes stay."""
    from attacks.plugin import trainer_folder  # a relative trainer_dir stays inside the config's folder

    if "attack" not in raw:
        training = raw["training"]
        raw["attack"] = recommended_design(str(training["trainer"]), trainer_folder(
            training.get("trainer_dir", ""), base_dir) or None)["attack"]
    for section, keys in RECOMMENDED_ONE_RUN.items():
        table = raw.setdefault(section, {})
        if isinstance(table, dict):  # anything else is reported by the schema check
            for key, value in keys.items():
                table.setdefault(key, value)


# The sampling kinds an audit trains (accountants.describe spells them; its aliases are accepted).
TRAINED_SAMPLING = ("fixed_wor", "poisson", "random_allocation", "shuffle", "truncated_poisson")


def canonical(value: str) -> str:
    """The one spelling rule of every enumerated value: case and surrounding space ignored, '-' = '_'."""
    return value.strip().lower().replace("-", "_")


def parse_choice(value: Any, allowed: tuple[str, ...], *, key: str) -> str:
    """``value`` as the canonical member of ``allowed`` (any spelling :func:`canonical` maps to it)."""
    if isinstance(value, str) and value in allowed:
        return value
    if isinstance(value, str) and canonical(value) in allowed:
        return canonical(value)
    raise InputError(f"{key} must be one of {list(allowed)}; got {_show(value)}")


def _choice(*allowed: str):
    return ("choice", tuple(sorted(allowed)))


def _registered(names: Callable[[], list[str]]):
    """Allowed values read from a registry when a config is checked (a newly registered entry is valid)."""
    return ("choice", names)


# (kind, constraint, default). kinds: choice, int (lo), float (lo, hi, closed), bool, claim_epsilon
SCHEMA: dict[str, dict[str, tuple]] = {
    "training": {
        "dataset": (*_choice("digits", "breast_cancer", "gaussian_classes"), "digits"),
        "n_records": ("int", 2, 100),
        "model": (*_choice("logistic_regression", "mlp", "cnn"), "logistic_regression"),
        "hidden": ("int", 1, 32),
        "noise_multiplier": ("float", (0.0, None, "open"), 1.0),
        "sampling": ("sampling", TRAINED_SAMPLING, "poisson"),
        # ≥ 1e-9: the trainer divides by the expected batch size q·N, which underflows for subnormal q
        "sample_rate": ("float", (1e-9, 1.0, "both"), 0.5),
        "batch_size": ("int", 1, 50),
        "steps_per_epoch": ("int", 1, 10),
        "k": ("int", 1, 1),
        # truncated Poisson's largest batch; 0: unset (the other kinds), ≥ 1 needed by truncated_poisson
        "max_batch_size": ("int", 0, 0),
        "steps": ("int", 1, 10),
        "clip_norm": ("float", (0.0, None, "open"), 1.0),
        "learning_rate": ("float", (0.0, None, "open"), 0.5),
        "neighbouring": ("neighbouring", None, "add_remove"),
        "fault": (*_registered(registry.fault_names), "none"),
        "fault_factor": ("float", (1.0, None, "open"), 2.0),
        # a user trainer "module:function" (docs/own-training.md); the keys above stay the claim
        "trainer": ("str", None, ""),
        "trainer_dir": ("str", None, ""),  # where its module is looked up first (the config's folder)
    },
    "canary": {
        "kind": (*_registered(lambda: list(registry.canaries())), "dirac"),
        "norm": ("float", (0.0, None, "open"), 1.0),
        "count": ("int", 1, 1),
    },
    "attack": {
        "threat_model": (*_choice(*registry.THREATS), "white_box"),
        "score": (*_registered(lambda: sorted({*registry.score_names(), *USER_TRAINER_SCORES})), "llr"),
        "n_shadow": ("int", 2, 16),
    },
    "audit": {
        "game": (*_choice("multi_run", "one_run", "reconstruction"), "multi_run"),
        "trials": ("int", 1, 2000),  # ≥ 2 but for audit.game 'one_run' (_consistent)
        "significance": ("float", (0.0, 0.5, "open"), 0.05),
        "delta": ("float", (0.0, 1.0, "open"), 1e-5),
        "seed": ("int", 0, 0),
        "threshold": (*_registered(lambda: list(registry.strategies())), "bonferroni"),
        "chunk_size": ("int", 1, 500),
        "lift_limits": ("bool", None, False),
        "trial_timeout": ("float", (0.0, None, "left"), 0.0),  # seconds per trial of a user trainer; 0: none
        # the sequential design (audit/statistics/sequential.py): 0 = the fixed design (audit.trials trials), else
        # its ceiling; the black-box default for a user trainer gets SEQUENTIAL_MAX_TRIALS
        "max_trials": ("max_trials", None, 0),
        "time_budget": ("float", (0.0, None, "left"), 0.0),  # seconds the sequential design may play; 0: none
    },
    "claim": {
        "epsilon": ("claim_epsilon", None, "accountant"),
        "delta": ("float", (0.0, 1.0, "open"), 1e-5),
    },
}


def _check_value(key: str, value: Any, spec: tuple) -> Any:
    kind = spec[0]
    match kind:
        case "str":
            if not isinstance(value, str):
                raise InputError(f"{key} must be a string; got {value!r}")
            return value
        case "choice":
            allowed = tuple(sorted(spec[1]())) if callable(spec[1]) else spec[1]
            return parse_choice(value, allowed, key=key)
        case "sampling":
            if not isinstance(value, str):
                raise InputError(f"{key} must be one of {list(spec[1])}; got {_show(value)}")
            try:
                kind = describe.parse_sampling_kind(value[:80], key=key)
            except InputError:
                raise InputError(f"{key} must be one of {list(spec[1])} ('-' and '_' are the same; aliases: "
                                 f"fixed_size = without_replacement = fixed_wor, balls_in_bins = random_allocation); "
                                 f"got {_show(value)}") from None
            if kind not in spec[1]:
                raise InputError(f"{key} = {_show(value)} is accounted (dpaudit account) but not trained by an audit; "
                                 f"choose one of {list(spec[1])}")
            return kind
        case "neighbouring":
            if not isinstance(value, str):
                raise InputError(f"{key} must be one of {list(describe.NEIGHBOURING_NAMES)}; got {_show(value)}")
            return describe.parse_neighbouring(value[:80], key=key).value
        case "int":
            lo = spec[1]
            hard = _HARD_LIMITS.get(key.rpartition(": ")[2])
            if isinstance(value, bool) or not isinstance(value, int) or value < lo or (hard and value > hard):
                rng = f"an integer ≥ {lo}" + (f" and ≤ {hard}" if hard else "")
                raise InputError(f"{key} must be {rng}; got {_show(value)}")
            return value
        case "max_trials":
            if isinstance(value, bool) or not isinstance(value, int) or (value != 0 and value < SEQUENTIAL_FIRST_LOOK):
                raise InputError(f"{key} must be 0 (the fixed design: audit.trials trials) or an integer ≥ "
                                 f"{SEQUENTIAL_FIRST_LOOK} (the sequential design's ceiling; its first look is "
                                 f"{SEQUENTIAL_FIRST_LOOK} trials); got {_show(value)}")
            return value
        case "bool":
            if not isinstance(value, bool):
                raise InputError(f"{key} must be true or false; got {_show(value)}")
            return value
        case "claim_epsilon":
            if value == "accountant":
                return value
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value < 0:
                raise InputError(f"{key} must be a number ≥ 0 or \"accountant\" (the accountants' own epsilon at "
                                 f"the claim's delta); got {_show(value)}")
            return float(value)
        case "float":
            lo, hi, closed = spec[1]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise InputError(f"{key} must be a finite number in {_interval(lo, hi, closed)}; got {_show(value)}")
            v = float(value)
            ok = (lo is None or (v > lo if closed in ("open", "right") else v >= lo)) and \
                 (hi is None or (v < hi if closed in ("open", "left") else v <= hi))
            if not ok:
                raise InputError(f"{key} must be a number in {_interval(lo, hi, closed)}; got {_show(value)}")
            return v
    raise AssertionError(f"unknown schema kind {kind}")  # pragma: no cover - schema bug


def _show(value: Any) -> str:
    """A value for an error message, cut short (a fuzzed config may hold a megabyte of text)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _check_limits(c: dict[str, dict[str, Any]], where: str) -> None:
    if c["audit"]["lift_limits"]:
        return
    for dotted, limit in LIMITS.items():
        section, key = dotted.split(".")
        if c[section][key] > limit:
            raise InputError(f"{where}{dotted} = {c[section][key]} is above the documented limit {limit}; set "
                             "[audit] lift_limits = true to run it anyway")


def _interval(lo, hi, closed) -> str:
    left = "[" if closed in ("both", "left") else "("
    right = "]" if closed in ("both", "right") else ")"
    return f"{left}{'-inf' if lo is None else f'{lo:g}'}, {'inf' if hi is None else f'{hi:g}'}{right}"


def _validate_sections(raw: dict[str, Any], where: str = "") -> dict[str, dict[str, Any]]:
    """Fill defaults and check every key of the base sections; unknown keys are errors."""
    out: dict[str, dict[str, Any]] = {}
    for section, table in raw.items():
        if section not in SCHEMA:
            raise InputError(f"{where}unknown section [{_show(section)[1:-1]}]; allowed: {sorted(SCHEMA)} and "
                             "[[variant]]")
        if not isinstance(table, dict):
            raise InputError(f"{where}[{section}] must be a table")
    for section, keys in SCHEMA.items():
        table = raw.get(section, {})
        unknown = sorted(set(table) - set(keys))
        if unknown:
            raise InputError(f"{where}unknown key {section}.{_show(unknown[0])[1:-1]}; allowed keys: {sorted(keys)}")
        out[section] = {}
        for key, spec in keys.items():
            value = table.get(key, spec[-1])
            out[section][key] = _check_value(f"{where}{section}.{key}", value, spec[:-1])
    _consistent(out, where)
    _check_limits(out, where)
    return out


def _gradient_canaries() -> set[str]:
    return {n for n, info in registry.canaries().items() if info.kind == "gradient"}


def _sequential_keys(c: dict[str, dict[str, Any]], where: str) -> None:
    """audit.max_trials > 0 (the sequential design) plays a user trainer's multi-run game; time_budget needs it."""
    t, can, aud = c["training"], c["canary"], c["audit"]
    if aud["time_budget"] and not aud["max_trials"]:
        raise InputError(f"{where}audit.time_budget applies to the sequential design only (audit.max_trials > 0)")
    if aud["max_trials"] and (not t["trainer"] or aud["game"] != "multi_run" or can["kind"] == "dead_feature"):
        raise InputError(f"{where}audit.max_trials = {aud['max_trials']} (the sequential design) applies to a user "
                         "trainer ([training] trainer) in audit.game 'multi_run' with an ε audit's canary (not "
                         "'dead_feature'); set audit.max_trials = 0 for the fixed design of audit.trials trials")


def _consistent(c: dict[str, dict[str, Any]], where: str) -> None:
    t, can, att, aud = c["training"], c["canary"], c["attack"], c["audit"]
    if aud["trials"] < 2 and aud["game"] != "one_run":  # one training run is a one-run audit only
        raise InputError(f"{where}audit.trials must be an integer ≥ 2 for audit.game {aud['game']!r} (only "
                         f"'one_run' audits from a single training run); got {aud['trials']}")
    _count_fits(c, where)
    if t["sampling"] == "random_allocation":
        _consistent_allocation(t, att, where)
    _consistent_truncation(t, where)
    if aud["trial_timeout"] and not t["trainer"]:
        raise InputError(f"{where}audit.trial_timeout applies to a user trainer ([training] trainer) only")
    _sequential_keys(c, where)
    if t["trainer"]:  # a user trainer (attacks/plugin.py, docs/own-training.md)
        black = att["threat_model"] == "black_box"
        scores_ok = att["score"] in ("loss", "confidence") if black else (
            att["score"] == "inner_product" or (att["score"] == "step_spread" and can["kind"] in _gradient_canaries()))
        if aud["game"] == "reconstruction" or att["threat_model"] not in ("black_box", "white_box") or not scores_ok \
                or (black and can["kind"] in _gradient_canaries()):
            raise InputError(f"{where}training.trainer {t['trainer']!r} is audited in the black box (attack.score "
                             "'loss' or 'confidence', an input canary) or the white box (attack.score "
                             "'inner_product', or 'step_spread' with canary.kind 'dirac'), with audit.game "
                             "'multi_run' or 'one_run'; leave [canary] and "
                             "[attack] out for the recommended design")
        if not black and can["kind"] in _gradient_canaries() and t["sampling"] != "poisson":
            raise InputError(f"{where}the gradient-canary hook of a user trainer needs training.sampling 'poisson' "
                             f"(it samples the canaries at the claimed rate); got {t['sampling']!r}")
        if aud["game"] == "multi_run" and can["count"] != 1:
            raise InputError(f"{where}canary.count must be 1 for audit.game 'multi_run'; got {can['count']} (m "
                             "canaries in one training: audit.game 'one_run')")
        return
    canary = registry.canaries()[can["kind"]]
    threat = att["threat_model"]
    needed = "gradient" if threat != "black_box" else "input"
    if canary.kind != needed:
        allowed = sorted(n for n, info in registry.canaries().items() if info.kind == needed)
        raise InputError(f"{where}canary.kind = {can['kind']!r} is a {canary.kind} canary; attack.threat_model "
                         f"{threat!r} needs a {needed} canary, one of {allowed}")
    if threat == "hidden_state" and aud["game"] == "reconstruction":
        raise InputError(f"{where}attack.threat_model 'hidden_state' is audited by audit.game 'multi_run' or "
                         "'one_run'; got 'reconstruction'")
    if threat == "white_box_crafted_dataset" and aud["game"] != "multi_run":
        raise InputError(f"{where}attack.threat_model 'white_box_crafted_dataset' is audited by audit.game "
                         f"'multi_run' only; got {aud['game']!r}")
    allowed_scores = registry.score_names(threat)
    if att["score"] not in allowed_scores and aud["game"] != "reconstruction":
        raise InputError(f"{where}attack.score must be one of {allowed_scores} for attack.threat_model "
                         f"{threat!r}; got {att['score']!r}")
    if aud["game"] == "multi_run" and can["count"] != 1:
        raise InputError(f"{where}canary.count must be 1 for audit.game 'multi_run'; got {can['count']}")
    if aud["game"] == "reconstruction" and can["count"] < 2:
        raise InputError(f"{where}canary.count (candidates) must be ≥ 2 for audit.game 'reconstruction'")
    if t["sampling"] == "shuffle":
        if aud["game"] == "reconstruction":
            raise InputError(f"{where}training.sampling 'shuffle' is audited by audit.game 'multi_run' or 'one_run'; "
                             "got 'reconstruction'")
        if threat == "white_box_crafted_dataset" and t["neighbouring"] != "add_remove":
            raise InputError(f"{where}attack.threat_model 'white_box_crafted_dataset' with training.sampling "
                             "'shuffle' needs training.neighbouring 'add_remove' (docs/worst-case.md)")
    if t["sampling"] in ("fixed_wor", "shuffle") and t["batch_size"] > t["n_records"] + can["count"]:
        raise InputError(f"{where}training.batch_size must be ≤ n_records + canary.count = "
                         f"{t['n_records'] + can['count']}; got {t['batch_size']}")


def _count_fits(c: dict[str, dict[str, Any]], where: str) -> None:
    """canary.count within what the canary kind can make from the data (a clear error before any training)."""
    can, t = c["canary"], c["training"]
    if can["kind"] == "mislabelled" and can["count"] > t["n_records"]:
        raise InputError(f"{where}canary.count must be ≤ training.n_records = {t['n_records']} for canary.kind "
                         f"'mislabelled' (each relabels a distinct natural record); got {can['count']} (more "
                         "canaries than records: canary.kind 'out_of_distribution')")


def _consistent_truncation(t: dict[str, Any], where: str) -> None:
    """training.max_batch_size: ≥ 1 with truncated Poisson (the largest batch kept), unset (0) otherwise."""
    truncated = t["sampling"] == "truncated_poisson"
    if truncated and t["max_batch_size"] < 1:
        raise InputError(f"{where}training.max_batch_size must be an integer ≥ 1 with training.sampling "
                         f"'truncated_poisson' (the largest batch kept); got {t['max_batch_size']}")
    if not truncated and t["max_batch_size"] != 0:
        raise InputError(f"{where}training.max_batch_size applies to training.sampling 'truncated_poisson' only; "
                         f"got sampling {t['sampling']!r}")


def _consistent_allocation(t: dict[str, Any], att: dict[str, Any], where: str) -> None:
    """Random allocation (accountants.RandomAllocation): k ≤ t, add/remove, the LLR and crafted designs at k = 1."""
    if t["k"] > t["steps_per_epoch"]:
        raise InputError(f"{where}training.k must be an integer in [1, training.steps_per_epoch = "
                         f"{t['steps_per_epoch']}]; got {t['k']}")
    if t["neighbouring"] != "add_remove":
        raise InputError(f"{where}training.sampling 'random_allocation' is accounted for training.neighbouring "
                         f"'add_remove' only; got {t['neighbouring']!r}")
    if t["k"] > 1 and (att["score"] == "llr" or att["threat_model"] == "white_box_crafted_dataset"):
        raise InputError(f"{where}attack.score 'llr' and attack.threat_model 'white_box_crafted_dataset' under "
                         f"training.sampling 'random_allocation' need training.k = 1 (balls-in-bins); got {t['k']}")


def loads(text: str, *, base_dir: str | Path | None = None) -> dict[str, Any]:
    """Parse and validate a TOML configuration; returns the fully resolved dict (with ``variant``).

    ``base_dir``: the configuration file's folder, where a user trainer's module is looked up first.
    """
    if not isinstance(text, str):
        raise InputTypeError(f"a configuration must be TOML text; got {type(text).__name__}")
    if len(text) > _MAX_TEXT:
        raise InputError(f"the configuration has {len(text)} characters; at most {_MAX_TEXT} are read")
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # CRLF and CR-only (classic Mac) line endings
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"invalid TOML: {exc}") from None
    except RecursionError:
        raise InputError("invalid TOML: arrays or tables are nested too deeply") from None
    except ValueError as exc:  # an integer of more than sys.get_int_max_str_digits() digits
        raise InputError(f"invalid TOML: a number is too long ({str(exc).split(';')[0]})") from None
    variants_raw = raw.pop("variant", [])
    training = raw.get("training")
    if _user_one_run(raw):
        _recommend_one_run(raw, base_dir)
    elif isinstance(training, dict) and training.get("trainer") and "canary" not in raw and "attack" not in raw:
        # a config naming only a user trainer and the claim gets the recommended design for what it supports
        from attacks.plugin import trainer_folder  # a relative trainer_dir stays inside the config's folder

        design = recommended_design(str(training["trainer"]), trainer_folder(training.get("trainer_dir", ""), base_dir)
                                    or None)
        raw["canary"], raw["attack"] = design["canary"], design["attack"]
        if not variants_raw:
            variants_raw = copy.deepcopy(RECOMMENDED_VARIANTS)
            if design["attack"]["threat_model"] == "white_box":
                variants_raw.append(copy.deepcopy(CONFORMANCE_VARIANT))
            elif isinstance(raw.setdefault("audit", {}), dict) and "trials" not in raw["audit"]:
                # black box, no fixed audit.trials asked for: the sequential design
                raw["audit"].setdefault("max_trials", SEQUENTIAL_MAX_TRIALS)
    if not isinstance(variants_raw, list):
        raise InputError("variant must be an array of tables ([[variant]])")
    base = _validate_sections(raw)
    for v in variants_raw:  # the default's conformance audit chooses a smaller dataset (conformance.natural_records)
        if v is not None and v == CONFORMANCE_VARIANT:
            from .conformance import natural_records

            t = base["training"]
            v["training"] = {"n_records": natural_records(t["n_records"], describe.parse_sampling_kind(
                t["sampling"], key="training.sampling"), t["sample_rate"])}
    resolved: dict[str, Any] = copy.deepcopy(base)
    resolved["variant"] = []
    seen = set()
    for i, v in enumerate(variants_raw):
        if not isinstance(v, dict):
            raise InputError(f"variant[{i}] must be a table")
        name = v.get("name")
        check_name(name, f"variant[{i}].name")  # the same check as names read from result.json
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
        checked = _validate_sections(merged, where=f"variant {name!r}: ")
        entry = {"name": name}
        for section in ("training", "canary", "attack", "audit"):
            diff = {k: val for k, val in checked[section].items() if val != base[section][k]}
            if diff:
                entry[section] = diff
        resolved["variant"].append(entry)
    return resolved


def load(path: str | Path | None) -> dict[str, Any]:
    """Load a configuration file (None: the embedded default)."""
    if path is None:
        return loads(DEFAULT_TOML)
    cfg = loads(read_text(path, what="config file"), base_dir=Path(path).resolve().parent)
    from attacks.plugin import trainer_folder  # a relative trainer_dir stays inside the config's folder

    if cfg["training"]["trainer"]:  # a trainer's module is looked up in the config's folder (or trainer_dir) first
        cfg["training"]["trainer_dir"] = trainer_folder(cfg["training"]["trainer_dir"], Path(path).resolve().parent)
    for v in cfg["variant"]:
        if v.get("training", {}).get("trainer_dir"):
            v["training"]["trainer_dir"] = trainer_folder(v["training"]["trainer_dir"], Path(path).resolve().parent)
    return cfg


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


def variants(config: dict[str, Any]) -> list[dict[str, Any]]:
    """The audits of a resolved configuration: base merged with each [[variant]] ("main" when none)."""
    base = {s: dict(config[s]) for s in ("training", "canary", "attack", "audit")}
    if not config.get("variant"):
        return [{"name": "main", **copy.deepcopy(base)}]
    out = []
    for v in config["variant"]:
        merged = copy.deepcopy(base)
        for s in ("training", "canary", "attack", "audit"):
            merged[s].update(v.get(s, {}))
        out.append({"name": v["name"], **merged})
    return out


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    raise InputTypeError(f"cannot write {type(v).__name__} to TOML")


def dumps(config: dict[str, Any]) -> str:
    """A resolved configuration as TOML (every key explicit; round-trips through :func:`loads`)."""
    lines = ["# dpaudit resolved configuration (every key explicit, seeds included)"]
    for section in SCHEMA:
        lines.append(f"\n[{section}]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in config[section].items()]
    for v in config.get("variant", []):
        lines.append("\n[[variant]]")
        lines.append(f"name = {_toml_value(v['name'])}")
        for s in ("training", "canary", "attack", "audit"):
            lines += [f"{s}.{k} = {_toml_value(val)}" for k, val in v.get(s, {}).items()]
    lines.append(f"\n{END_MARK}")
    return "\n".join(lines) + "\n"


END_MARK = "# end of dpaudit resolved configuration"


def load_resolved(path: str | Path) -> dict[str, Any]:
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
    later = {("audit", "trial_timeout"), ("audit", "max_trials"), ("audit", "time_budget")}  # older runs resume
    for section, keys in SCHEMA.items():  # without the keys added since (issues 23, 25): their defaults
        missing = [k for k in keys if k not in raw.get(section, {}) and (section, k) not in later]
        if missing:
            raise InputError(f"{str(path)!r} lacks {section}.{missing[0]}; {how}")
    return loads(text)
