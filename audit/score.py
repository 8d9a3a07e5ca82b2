"""Bring your own scores: audit membership scores computed elsewhere against a claimed DP-SGD spec.

A user who plays the membership game in their own infrastructure hands dpaudit one row per
trial (multi-run design: independent training runs, one canary each) or one row per canary
(one-run design: m canaries of one training run, Steinke et al. 2023, arXiv:2305.08846):

- ``member``: whether the canary was in the training data (``1``/``0``, ``true``/``false``);
- ``score``: a float, higher means "member".

Files: CSV with a header holding at least ``member`` and ``score`` (other columns are ignored), or
JSON Lines with the same keys, in UTF-8 (a BOM is skipped; UTF-16 and Latin-1 are refused by
name). A bad row raises :class:`accountants.InputError` naming the file, the line number (1-based,
the CSV header is line 1) and the column. Files are streamed with bounds, so a hostile file costs
bounded memory: lines of at most ``MAX_LINE`` characters, CSV fields of at most ``MAX_FIELD``,
JSON records nested at most ``MAX_DEPTH`` deep, at most ``MAX_ROWS`` rows. Both designs need
members and non-members (one-run: each canary is in with probability ½).

**Non-finite scores.** NaN is rejected (it has no place in the order). ``+inf`` and ``-inf`` (a log
of 0 or of 1 − 1) are valid: every bound here depends on the scores only through their order
(thresholds are order statistics, the one-run guesses are the top-r scores), so ``+inf`` is
mapped to a finite value above every finite score and ``-inf`` below every one, keeping ties
among the infinities. The bounds are exactly those of the original scores; a reported threshold
at or beyond the mapped value stands for ±inf (the result's ``nonfinite`` entry says where).
Scores beyond ±1e300 (where a span of scores overflows) are all replaced by their dense ranks,
which keeps order and ties exactly; ``nonfinite.note`` says so.

>>> import numpy as np, accountants as acc
>>> member = np.array([True, False] * 50)
>>> score = np.where(member, np.inf, 0.0)  # a perfect attack that writes log(1/0) for members
>>> r = audit_scores({"member": member, "score": score}, acc.DPSGD(1.0, acc.Poisson(0.5), 10), delta=1e-5)
>>> r["audits"][0]["epsilon_lower"]["value"] > 2, r["audits"][0]["nonfinite"]["pos_inf"]
(True, 50)
"""

from __future__ import annotations

import array
import csv
import dataclasses
import json
import math
import re
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from accountants.errors import InputError, InputTypeError
from accountants.events import DPSGD

from . import comparator, model
from .jsontypes import JSONObject
from .runconfig import RunConfig

__all__ = ["DESIGNS", "audit_name", "audit_scores", "audit_scores_run", "audit_trainer", "check_out_folder",
           "map_nonfinite", "read_scores"]

DESIGNS = ("multi_run", "one_run")  # canonical (result.json's "design"); '-' and '_' are the same


def parse_design(value: Any, *, key: str = "design") -> str:
    """The canonical design for any spelling (``multi-run``, ``multi_run``, ``one-run``, ...)."""
    from .config import parse_choice

    return parse_choice(value, DESIGNS, key=key)
_TRUE, _FALSE = {"1", "true", "t", "yes"}, {"0", "false", "f", "no"}


def _member(value: Any, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise InputError(f"{where}, column 'member': must be 0/1 or true/false; got {value!r:.80}")


def _score(value: Any, where: str) -> float:
    if isinstance(value, bool) or value is None:
        raise InputError(f"{where}, column 'score': must be a number; got {value!r:.80}")
    try:
        x = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"{where}, column 'score': must be a number; got {value!r:.80}") from None
    if math.isnan(x):
        raise InputError(f"{where}, column 'score': NaN is not a score (±inf are accepted; see audit.score)")
    return x


MAX_ROWS = 10_000_000  # one row per training run or canary; 10^7 rows hold 90 MB here
MAX_LINE = 1 << 20  # characters in one line of a score file (a row is a few dozen)
MAX_FIELD = 131_072  # characters in one CSV field (csv's default limit)
MAX_DEPTH = 32  # nesting of one JSON Lines record (a record is flat)


def _lines(fh: Any, name: str) -> Iterator[str]:
    """The lines of ``fh``, each read with a bound (a 2 GB file of NUL bytes is refused after MAX_LINE)."""
    n = 0
    while True:
        line = fh.readline(MAX_LINE + 1)
        if not line:
            return
        n += 1
        if len(line) > MAX_LINE:
            raise InputError(f"{name} line {n}: longer than {MAX_LINE} characters; a score file has one short row "
                             "per trial or canary")
        yield line


def _open_text(p: Path) -> Any:
    """``p`` opened as UTF-8 text (a UTF-8 BOM is skipped); UTF-16 or non-UTF-8 bytes are an InputError."""
    with open(p, "rb") as fh:
        head = fh.read(4)
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise InputError(f"{p.name}: the file is UTF-16 encoded; save it as UTF-8")
    return open(p, newline="", encoding="utf-8-sig", errors="strict")


def _json_depth(text: str) -> int:
    """Deepest nesting of brackets in a JSON text (strings skipped); bounds json.loads' recursion."""
    depth = deepest = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            esc, in_str = (False, True) if esc else (ch == "\\", ch != '"')
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def _jsonl_rows(lines: Iterator[str], name: str) -> Iterator[tuple[str, Any, Any]]:
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{name} line {n}"
        if line.count("[") + line.count("{") > MAX_DEPTH and _json_depth(line) > MAX_DEPTH:
            raise InputError(f"{where}: nested more than {MAX_DEPTH} levels; a row is one flat JSON object")
        try:  # json accepts Infinity/-Infinity (and NaN, rejected below)
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{where}: not a JSON object ({exc.msg})") from None
        except ValueError as exc:  # e.g. an integer longer than sys.get_int_max_str_digits()
            raise InputError(f"{where}: not a JSON object ({exc})") from None
        if not isinstance(rec, dict):
            raise InputError(f"{where}: must be a JSON object with keys 'member' and 'score'")
        for key in ("member", "score"):
            if key not in rec:
                raise InputError(f"{where}, column {key!r}: missing")
        yield where, rec["member"], rec["score"]


def _csv_rows(lines: Iterator[str], name: str) -> Iterator[tuple[str, Any, Any]]:
    reader = csv.reader(lines)
    header = next(reader, None)
    if header is None:
        raise InputError(f"{name}: empty file; expected a header with columns 'member' and 'score'")
    names = [h.strip().lower() for h in header]
    for key in ("member", "score"):
        if key not in names:
            raise InputError(f"{name} line 1: the header has no column {key!r} (columns: {header[:20]!r:.200})")
    im, isc = names.index("member"), names.index("score")
    for row in reader:
        if not row or all(not c.strip() for c in row):
            continue
        where = f"{name} line {reader.line_num}"
        for key, i in (("member", im), ("score", isc)):
            if i >= len(row) or not row[i].strip():
                raise InputError(f"{where}, column {key!r}: missing")
        yield where, row[im], row[isc]


def read_scores(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(member bool array, score float array) from a ``.csv`` or ``.jsonl`` file (module doc).

    Streamed with bounds: UTF-8 (a BOM is allowed), lines of at most ``MAX_LINE`` characters, CSV
    fields of at most ``MAX_FIELD``, JSON records nested at most ``MAX_DEPTH`` deep, at most
    ``MAX_ROWS`` rows; anything else is an :class:`accountants.InputError` naming the file and line.
    """
    p = Path(path)
    try:
        is_file = p.is_file()
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte
        is_file = False
    if not is_file:
        raise InputError(f"scores file {str(p)[:200]!r} does not exist, is not a regular file or cannot be used as "
                         "a file name")
    member = bytearray()
    score = array.array("d")
    rows = _jsonl_rows if p.suffix.lower() in (".jsonl", ".ndjson") else _csv_rows
    try:
        with _open_text(p) as fh:
            for where, m, s in rows(_lines(fh, p.name), p.name):
                if len(score) >= MAX_ROWS:
                    raise InputError(f"{p.name}: more than {MAX_ROWS} rows; dpaudit score reads at most {MAX_ROWS}")
                member.append(_member(m, where))
                score.append(_score(s, where))
    except UnicodeDecodeError as exc:
        raise InputError(f"{p.name}: not UTF-8 text ({exc.reason}); save it as UTF-8 (Latin-1 and UTF-16 files "
                         "are refused)") from None
    except csv.Error as exc:  # e.g. "field larger than field limit (131072)"
        raise InputError(f"{p.name}: not a valid CSV file ({exc}); a field may have at most {MAX_FIELD} "
                         "characters") from None
    if not member:
        raise InputError(f"{p.name}: no rows; expected one row per trial (multi-run) or canary (one-run)")
    return np.frombuffer(bytes(member), dtype=np.uint8).astype(bool), np.frombuffer(score, dtype=np.float64).copy()


_HUGE = 1e300  # finite scores beyond ±1e300 leave no headroom for arithmetic on scores (spans, bins, axes)


def map_nonfinite(score: np.ndarray) -> tuple[np.ndarray, model.NonFinite | None]:
    """Map +inf above and -inf below every finite score (ties kept); None when nothing was mapped.

    Order-preserving, so every rank-based bound is unchanged (module doc). Scores beyond ±1e300
    (where a span of scores overflows) are all replaced by their dense ranks, which keeps the order
    and the ties exactly. NaN must be rejected first.
    """
    s = np.asarray(score, dtype=np.float64)
    if np.isnan(s).any():
        raise InputError("score must not hold NaN")
    pos, neg = np.isposinf(s), np.isneginf(s)
    fin = s[np.isfinite(s)]
    lo, hi = (float(fin.min()), float(fin.max())) if fin.size else (0.0, 0.0)
    huge = max(abs(lo), abs(hi)) > _HUGE
    if not (pos.any() or neg.any() or huge):
        return s, None
    if not huge:
        gap = max(1.0, hi - lo)
        plus, minus = hi + gap, lo - gap
        out = s.copy()
        out[pos], out[neg] = plus, minus
        how = f"+inf scores were ranked as {plus:g} and -inf as {minus:g} (above/below every finite score)"
    else:
        _, rank = np.unique(s, return_inverse=True)
        out = rank.reshape(s.shape).astype(np.float64)
        plus, minus = float(out.max()), float(out.min())
        how = (f"scores reach beyond ±{_HUGE:g}, so every score was replaced by its dense rank (0 = the lowest"
               + (f"; +inf as {plus:g}" if pos.any() else "") + (f"; -inf as {minus:g}" if neg.any() else "") + ")")
    return out, model.NonFinite(int(pos.sum()), int(neg.sum()), plus, minus,
                                f"{how}; the bounds depend on the order only, so they are those of the original scores")


def _arrays(data: Any) -> tuple[np.ndarray, np.ndarray, str]:
    if isinstance(data, (str, Path)):
        m, s = read_scores(data)
        return m, s, Path(data).name
    if isinstance(data, Mapping) and "member" in data and "score" in data:
        m, s = data["member"], data["score"]
        if hasattr(m, "detach"):
            m = m.detach().cpu().numpy()
        if hasattr(s, "detach"):
            s = s.detach().cpu().numpy()
        m = np.asarray(m).reshape(-1)
        s = np.asarray(s, dtype=np.float64).reshape(-1)
        if m.size != s.size:
            raise InputError(f"member and score must have the same length; got {m.size} and {s.size}")
        if m.dtype != bool:
            if not np.isin(m, (0, 1)).all():
                bad = int(np.flatnonzero(~np.isin(m, (0, 1)))[0])
                raise InputError(f"member must be 0/1 or booleans; got {m[bad]!r} at index {bad}")
            m = m.astype(bool)
        if np.isnan(s).any():
            raise InputError(f"score must not hold NaN; first at index {int(np.flatnonzero(np.isnan(s))[0])}")
        return m, s, "scores"
    raise InputTypeError("scores must be a path to a .csv/.jsonl file or a mapping with 'member' and 'score'")


def audit_scores(data: Any, spec: DPSGD, *, delta: float, significance: float = 0.05, design: str = "multi_run",
                 claim_epsilon: float | None = None, out: str | Path | None = None,
                 name: str | None = None, independent_canaries: bool = False) -> JSONObject:
    """The JSON form (``dpaudit.result/2``, ``result.json``'s object, read back by
    :meth:`audit.model.RunResult.from_json`) of :func:`audit_scores_run`; ``nonfinite`` is in the audit."""
    run, _ = audit_scores_run(data, spec, delta=delta, significance=significance, design=design,
                              claim_epsilon=claim_epsilon, out=out, name=name,
                              independent_canaries=independent_canaries)
    return run.to_json()


def audit_scores_run(data: Any, spec: DPSGD, *, delta: float, significance: float = 0.05, design: str = "multi_run",
                     claim_epsilon: float | None = None, out: str | Path | None = None,
                     name: str | None = None,
                     independent_canaries: bool = False) -> tuple[model.RunResult, model.NonFinite | None]:
    """Audit membership scores against the claimed ``spec``; returns (:class:`audit.model.RunResult`, the
    non-finite scores' treatment or None). :func:`audit_scores` gives its ``dpaudit.result/2`` JSON form.

    Args:
        data: a ``.csv``/``.jsonl`` path (module doc) or a mapping with arrays ``member`` and ``score``.
        spec: the claimed DP-SGD description (its accountant bounds and curves are the claim).
        delta: δ of every ε.
        significance: s; ε_lower and the violation test hold at 1 − s.
        design: "multi_run" (one row per independent training run; Clopper–Pearson boxes, the
            box-below-curve violation test) or "one_run" (rows are the canaries of one run;
            Steinke et al. 2023 bound, violation when ε_lower exceeds the accountant's ε).
        independent_canaries: one-run only: the caller vouches that the canaries do not interact (each
            canary's view independent of the others' bits, e.g. Dirac gradient canaries on distinct coordinates
            that no natural record touches, in a trainer known to be plain DP-SGD). ε_lower is then the largest
            of Steinke's bound, Xiang et al.'s order statistic and the score boxes
            (:func:`audit.statistics.epsilon_one_run_scores`), each at significance/3 (Bonferroni); without it,
            Steinke's bound at the full significance (the best bound sound for any canaries) and the other two
            are reported, not used.
        claim_epsilon: also decide the claim (ε, δ) as ``dpaudit check`` does (None: no claim).
        out: write result.json, report.md, report.html and figures/ there.
        name: the audit's name in the report (default: the file name).

    Returns:
        (:class:`audit.model.RunResult`, the ±inf mapping or None); :func:`audit_scores` gives the
        JSON form: ``result["violation"]`` is True when a sound test found the scores
        incompatible with the claim (a bug or broken DP), and ``result["claim"]`` holds the claim
        verdict when ``claim_epsilon`` is given.
    """
    from attacks.games import Design

    from . import runs

    t0 = time.perf_counter()
    design = parse_design(design)
    if not isinstance(independent_canaries, bool):
        raise InputTypeError(f"independent_canaries must be True or False; got {independent_canaries!r}")
    if independent_canaries and design != "one_run":
        raise InputError("independent_canaries (--independent-canaries) applies to design 'one_run' only (the "
                         "multi-run trials are independent training runs already)")
    if not isinstance(spec, DPSGD):
        raise InputTypeError(f"spec must be an accountants.DPSGD; got {type(spec).__name__}")
    if out is not None:
        check_out_folder(out)
    member, raw, label = _arrays(data)
    score, nonfinite = map_nonfinite(raw)
    if member.all() or not member.any():  # one-run: each canary is in with probability ½, so both occur
        raise InputError(f"the {design} design needs rows with member 1 and rows with member 0; got "
                         f"{int(member.sum())} members of {member.size}")
    s = float(significance)
    curves = comparator.analytical_curves(spec, delta)
    if design == "multi_run":
        cmp = comparator.compare_membership(score[member], score[~member], spec, delta=delta, significance=s,
                                            curves=curves)
    else:
        cmp = comparator.compare_one_run(score, member, spec, delta=delta, significance=s, curves=curves,
                                         independent_canaries=independent_canaries)
    asked = runs.Asked(model.check_name(name or audit_name(label)), Design(design), "user", "user", "user", "none",
                       spec, delta, s, 0, "bonferroni", int(member.size))
    certify = design == "one_run" and member.size <= CERTIFIABLE_MAX_CANARIES  # as before: one-run audits only
    audit = runs.assemble(asked, curves, torch.as_tensor(score), torch.as_tensor(member), cmp,
                          claim=None if claim_epsilon is None else model.ClaimConfig(claim_epsilon, delta),
                          certify=certify, started=t0,
                          nonfinite=nonfinite)
    base = RunConfig()  # the run's config records only what a score file has: δ and significance
    cfg = dataclasses.replace(base, audit=dataclasses.replace(base.audit, significance=s, delta=delta),
                              claim=dataclasses.replace(base.claim, delta=delta), source=label)
    run = runs.summarise(cfg, [audit])
    if out is not None:
        from . import report

        folder = Path(out)
        folder.mkdir(parents=True, exist_ok=True)
        with runs.lock(folder):
            check_out_folder(folder)  # another process may have written here since the check above
            (folder / runs.RESULT_FILE).write_text(model.dumps(run), encoding="utf-8")
            report.render(folder, run)
    return run, nonfinite


CERTIFIABLE_MAX_CANARIES = 100_000
"""Up to this many one-run rows ``dpaudit score`` computes ε_certifiable (21 simulated audits of m canaries per
statistic and curve: about 1.6 s for Steinke's and 6 s for the order statistic at m = 1e4 on one core, twice
that where PLD's two ordered directions are simulated, audit.runs.certifiable_curves); above, None."""


def audit_name(label: str) -> str:
    """A valid audit name (:func:`audit.model.check_name`) from any file name: other characters become ``_``."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", label).lstrip(".")[-64:].lstrip(".")
    return name or "scores"


def check_out_folder(out: str | Path) -> None:
    """Refuse an ``out`` that is a file or already holds a run (never replace a result silently)."""
    from .runs import CONFIG_FILE, RESULT_FILE

    p = Path(out)
    if p.exists() and not p.is_dir():
        raise InputError(f"--out {str(out)[:200]!r} exists and is not a folder")
    held = [f for f in (RESULT_FILE, CONFIG_FILE, "audits") if (p / f).exists()]
    if held:
        raise InputError(f"--out {str(out)[:200]!r} already holds a run ({held[0]}); choose another folder")


def audit_trainer(trainer: Any, spec: DPSGD, *, trials: int | None = None, delta: float = 1e-5,
                  significance: float = 0.05, game: str = "multi_run", canaries: int | None = None,
                  dataset: str = "digits", n_records: int = 100, canary: str | None = None, threat: str | None = None,
                  score: str | None = None, clip_norm: float = 1.0, seed: int = 0, run_dir: str | Path | None = None,
                  resume: bool = False, claim_epsilon: float | str | None = None, out: str | Path | None = None,
                  progress: bool = False, backend: Any = None, trial_timeout: float | None = None) -> JSONObject:
    """Audit a user trainer (a callable or ``"module:function"``) against ``spec``: the Python twin of a TOML with
    ``[training] trainer``, run exactly as ``dpaudit run``/``check`` runs it (docs/own-training.md).

    Without ``canary``, ``threat`` and ``score`` it is the recommended design of the CLI: white box when the
    trainer takes the keyword ``audit``, else black box, with the blank canary (``main``; in the black box on the
    audit's own smaller dataset, :data:`audit.config.AUDIT_DATASET`) and the mean-image canary beside it, each at
    ``significance``/2 (Bonferroni), so the verdict is the CLI's.
    Given any of them, one audit of that design (as a config with ``[canary]``/``[attack]`` keys):
    ``canary`` "blank", "mislabelled", "mean_image", "out_of_distribution" or "dirac" (white box, the
    gradient-canary hook); ``score`` defaults to "loss" (black box) or "inner_product" (white box).

    ``game = "one_run"`` is ``[audit] game = "one_run"`` (docs/own-training.md, "Audit in one training run"):
    ``canaries`` (default 1000) canaries in each of ``trials`` (default 1) calls of the trainer, each in with
    probability ½; one audit, by default of ``canary`` "out_of_distribution" in the threat model the
    trainer supports.

    Args:
        trials: training runs (default 200 per audit; 1 with ``game = "one_run"``).
        run_dir: a run folder as ``--out`` makes it (config.toml, audits/*/trials.jsonl, result.json);
            an existing run is refused unless ``resume`` (as the CLI does). None: a temporary folder.
        claim_epsilon: also decide the claim (ε or "accountant", δ = ``delta``) as ``dpaudit check``.
        out: also write report.md, report.html and figures/ there.
        trial_timeout: seconds per trial (``--trial-timeout``).

    Returns:
        ``result.json``'s object (``dpaudit.result/2``): ``["violation"]``, ``["claim"]["holds"]`` with
        ``claim_epsilon``, and one entry per audit in ``["audits"]``.
    """
    import tempfile

    from attacks import plugin

    from . import runs

    if not isinstance(spec, DPSGD):
        raise InputTypeError(f"spec must be an accountants.DPSGD; got {type(spec).__name__}")
    name = plugin.trainer_name(trainer)
    from . import config as config_mod

    one_run = config_mod.parse_choice(game, ("multi_run", "one_run"), key="game") == "one_run"
    base = config_mod.RECOMMENDED_ONE_RUN
    trials = (base["audit"]["trials"] if one_run else 200) if trials is None else trials
    count = (base["canary"]["count"] if one_run else 1) if canaries is None else canaries
    cfg = _trainer_config(trainer, spec, trials=trials, delta=delta, significance=significance, dataset=dataset,
                          n_records=n_records, canary=canary, threat=threat, score=score, clip_norm=clip_norm,
                          seed=seed, claim_epsilon=claim_epsilon, name=name, one_run=one_run, count=count)
    with tempfile.TemporaryDirectory(prefix="dpaudit-trainer-") as tmp:
        folder = Path(run_dir) if run_dir is not None else Path(tmp) / "run"
        run = _trainer_run(trainer, cfg, folder, resume=resume, claim=claim_epsilon is not None, progress=progress,
                           backend=backend, trial_timeout=trial_timeout)
    if out is not None:
        from . import report

        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / runs.RESULT_FILE).write_text(model.dumps(run), encoding="utf-8")
        report.render(Path(out), run)
    return run.to_json()


def _trainer_config(trainer: Any, spec: DPSGD, *, trials: int, delta: float, significance: float, dataset: str,
                    n_records: int, canary: str | None, threat: str | None, score: str | None, clip_norm: float,
                    seed: int, claim_epsilon: float | str | None, name: str, one_run: bool = False,
                    count: int = 1) -> RunConfig:
    """The resolved configuration ``dpaudit check`` would read for this trainer and claim (``trainer`` as its name)."""
    from accountants import describe
    from accountants.sampling import FixedSize, Poisson, Shuffle
    from attacks import plugin

    from . import config as config_mod
    from . import runs

    lit = config_mod.toml_value

    s = spec.sampling
    if isinstance(s, Poisson):
        sampling = f'sampling = "poisson"\nsample_rate = {lit(float(s.rate))}'
    elif isinstance(s, (FixedSize, Shuffle)) and not getattr(s, "replace", False):
        kind = "shuffle" if isinstance(s, Shuffle) else "fixed_size"
        sampling = f'sampling = "{kind}"\nbatch_size = {lit(int(s.batch_size))}'
    else:
        raise InputError(f"spec.sampling {describe.sampling_kind(s)!r}: a user trainer is audited under poisson, "
                         "fixed_wor or shuffle sampling")
    explicit = canary is not None or threat is not None or score is not None
    default_kind = config_mod.RECOMMENDED_ONE_RUN["canary"]["kind"] if one_run else "blank"
    if explicit:  # a gradient canary has no input: the hook's white box
        threat = threat or ("white_box" if canary == "dirac" else "black_box")
        design = {"canary": {"kind": canary or default_kind},
                  "attack": {"threat_model": threat, "score": score or ("loss" if threat == "black_box" else
                                                                        "inner_product")}}
    else:  # the CLI's recommended design, from what the trainer accepts (audit.config.recommended_design)
        fn = plugin.load_trainer(trainer)
        try:
            inspect_ok = _takes_audit(fn)
        except (TypeError, ValueError):
            inspect_ok = False
        design = config_mod.RECOMMENDED_WHITE_BOX if inspect_ok else config_mod.RECOMMENDED_BLACK_BOX
        design = {**design, "canary": {"kind": default_kind}}
        if one_run and not inspect_ok:  # as the CLI's one-run default (audit.config._recommend_one_run)
            design = {**design, "attack": dict(config_mod.ONE_RUN_BLACK_BOX_ATTACK)}
    text = (f'[training]\ntrainer = {lit(name)}\ndataset = {lit(dataset)}\nn_records = {lit(n_records)}\n'
            f'noise_multiplier = {lit(float(spec.noise_multiplier))}\n{sampling}\nsteps = {lit(int(spec.steps))}\n'
            f'clip_norm = {lit(float(clip_norm))}\nneighbouring = {lit(spec.neighbouring.value)}\n'
            f'[canary]\nkind = {lit(design["canary"]["kind"])}\ncount = {lit(count)}\n'
            f'[attack]\nthreat_model = {lit(design["attack"]["threat_model"])}\n'
            f'score = {lit(design["attack"]["score"])}\n'
            f'[audit]\ngame = {lit("one_run" if one_run else "multi_run")}\ntrials = {lit(trials)}\n'
            f'significance = {lit(float(significance))}\ndelta = {lit(float(delta))}\n'
            f'seed = {lit(seed)}\n[claim]\ndelta = {lit(float(delta))}\n'
            + ("" if claim_epsilon is None else f"epsilon = {lit(claim_epsilon)}\n"))
    small = config_mod.audit_dataset_size(n_records, describe.sampling_kind(s), float(getattr(s, "rate", 1.0)))

    def value(val: Any) -> str:  # a default variant's AUDIT_DATASET is the audit's own dataset size
        return lit(small if val is config_mod.AUDIT_DATASET else val)

    if not explicit and not one_run:  # a one-run audit is one audit: the second and conformance ones need many runs
        text += "".join(f"[[variant]]\nname = {lit(v['name'])}\n" + "".join(
            f"{sec}.{k} = {value(val)}\n" for sec, tab in v.items() if sec != "name" for k, val in tab.items())
            for v in (config_mod.RECOMMENDED_VARIANTS if design["attack"]["threat_model"] == "white_box" else
                      config_mod.RECOMMENDED_BLACK_BOX_VARIANTS))
    cfg = config_mod.loads(text)
    for v in config_mod.variants(cfg):
        if runs.spec_of(v) != spec:
            raise InputError(f"spec {describe.describe(spec)} is not what n_records = {n_records} gives "
                             f"({describe.describe(runs.spec_of(v))}): a fixed-size dataset_size counts the natural "
                             "records plus the canary")
    return cfg


def _takes_audit(fn: Any) -> bool:
    import inspect

    inspect.signature(fn).bind(None, None, seed=0, audit=None)
    return True


def _trainer_run(trainer: Any, cfg: RunConfig, folder: Path, *, resume: bool, claim: bool, progress: bool,
                 backend: Any, trial_timeout: float | None) -> model.RunResult:
    """Run the audits of ``cfg`` with ``trainer`` (a callable stays a callable) in a run folder: the path of
    ``dpaudit run``/``check`` (:func:`audit.runs.execute_config`; the trainer is the run's game input, loaded once)."""
    from . import runs

    _, result = runs.execute_config(cfg, folder, resume=resume, claim=claim, progress=progress, backend=backend,
                                    trial_timeout=trial_timeout, trainer=None if isinstance(trainer, str) else trainer)
    return result
