"""Audit games: train with canaries, attack, and return an :class:`AttackOutcome`.

Three designs (the audit statistics must not mix them up; auditing digest §6):

- :func:`multi_run_game`: K independent runs, each with ONE canary included with probability
  ½; one score per run. Independent trials: Clopper–Pearson / Jeffreys bounds apply.
- :func:`one_run_game`: runs with m canaries each, every canary in with probability ½
  (Steinke et al. 2023); m scores per run. Only one-run bounds apply.
- :func:`reconstruction_game`: K runs, each on the known records plus one target drawn
  uniformly from n candidates (κ = 1/n); the reconstructor scores all candidates.

Resume. Every finished trial is appended to ``run_dir/trials.jsonl`` as one flushed JSON line
(no pickle). A game called again with the same ``run_dir`` reads the lines there, keeps the
finished trials and runs only the missing ones: trial i draws everything from a seed derived
from (seed, i), and trials are trained in a fixed partition of chunks (a chunk with a missing
trial is re-run whole), so an interrupted and resumed game returns exactly the outcome of an
uninterrupted one (bit for bit on the same machine with the same torch thread settings; float
reductions may round differently elsewhere). Lines of another game (a different configuration)
are refused.

A line of ``trials.jsonl`` (JSON, keys sorted)::

    {"game_id": "3f0c…",            # hash of the configuration; all lines of a file share it
     "trial": 17,                    # run index, 0-based
     "seed": 4242…,                  # the run's 63-bit seed (trial_seed(seed, trial))
     "members": [true],              # membership games: canary in/out, one entry per canary
     "target": 3,                    # reconstruction game instead: index of the true candidate
     "scores": {"llr": [1.93], …},   # per score: one number per canary (per candidate)
     "batch_size_mean": 63.8,        # realised draws per step, averaged over the run
     "observations": [[…T…]]}        # only with keep_observations: per canary, o_1..o_T

>>> import torch, accountants as acc
>>> from attacks import canaries, data, games, models
>>> d = data.digits().subset(slice(0, 100))
>>> setup = games.Setup(acc.DPSGD(1.0, acc.Poisson(0.5), steps=5), models.logistic_regression(64, 10), d)
>>> canary = canaries.dirac([0], dim=650)
>>> out = games.multi_run_game(setup, canary, n_trials=4, seed=1, progress=False)
>>> tuple(out.scores["llr"].shape), out.truth.dtype
((4,), torch.bool)
"""

from __future__ import annotations

import enum
import functools
import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from accountants import validate as check
from accountants.errors import InputError, InputTypeError, UnsupportedError
from accountants.events import DPSGD
from accountants.sampling import FixedSize, Shuffle, TruncatedPoisson

from . import membership as mia
from . import models as _models
from . import reconstruction as recon
from . import worst_case
from .canaries import Canaries, CraftedDataset, DiracCanaries, GradientCanaries, InputCanaries
from .data import Dataset
from .dpsgd import TrainResult, train
from .faults import Fault
from .faults import describe as describe_fault
from .models import Init
from .threat import BlackBox, HiddenState, Threat, WhiteBox, allows
from .threat import describe as describe_threat

__all__ = [
    "AttackOutcome",
    "Design",
    "Setup",
    "multi_run_game",
    "one_run_game",
    "reconstruction_game",
    "trial_seed",
]

TRIALS_FILE = "trials.jsonl"
_GRADIENT = (GradientCanaries, DiracCanaries)  # the gradient canary kinds (white box)
_STREAM_TRIALS, _STREAM_SHADOWS, _STREAM_REFERENCE = 0, 1, 2


class Design(enum.Enum):
    """Which game produced an outcome (decides which statistics are valid)."""

    MULTI_RUN = "multi_run"
    ONE_RUN = "one_run"
    RECONSTRUCTION = "reconstruction"


@dataclass(frozen=True, eq=False)
class Setup:
    """Everything that defines the training of one trial (the canary slots come from the game).

    Attributes:
        spec: the claimed DP-SGD run; for FixedSize, ``dataset_size`` counts the larger
            neighbour: data.n + m in membership games, data.n + 1 in reconstruction.
        model: architecture.
        data: the natural records.
        clip_norm: C.
        learning_rate: η.
        init: parameter initialisation.
        fault: a fault from :mod:`attacks.faults` (trained), while ``spec`` stays the claim.
        device: where the trainer runs ("cpu", "cuda"; None: the data's device). Not part of the
            game's identity: a trial's draws come from CPU generators, the same on every device.
    """

    spec: DPSGD
    model: nn.Module
    data: Dataset
    clip_norm: float = 1.0
    learning_rate: float = 1.0
    init: Init = Init.DEFAULT
    fault: Fault | None = None
    device: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.spec, DPSGD):
            raise InputTypeError(f"spec must be an accountants.DPSGD; got {type(self.spec).__name__}")
        check.positive(clip_norm=self.clip_norm, learning_rate=self.learning_rate)


@dataclass(frozen=True, eq=False)
class AttackOutcome:
    """Scores and ground truth of a finished game; rows are (run, canary) pairs.

    IMPORTANT: every score is oriented so that higher ⇒ "member" (for reconstruction: higher ⇒
    this candidate is the target).

    Attributes:
        design: :class:`Design`.
        threat: "white_box" or "black_box".
        scores: score name -> (K,) for membership games, (K, n) for reconstruction.
        truth: (K,) bool membership, or (K,) int64 index of the true candidate.
        trial: (K,) int64 run index of each row.
        canary: (K,) int64 canary index within its run (0 in the multi-run game).
        seeds: (K,) int64 seed of the run each row comes from.
        metadata: game-level facts (spec, C, η, fault, canary kind, base seed, game id, ...).
        spec: the claimed DP-SGD description (what the accountant reads for this game).
        observations: (K, T) per-step white-box statistics o_t of each row's canary (in units of
            C; Nasr et al. 2023 audit them step by step) when the game kept them; else None.
        primary_score: the score the audit reports, one of ``scores``: the first requested score
            in membership games; ``"llr"`` in the white-box reconstruction game and
            ``"reference_shift"`` in the black-box one (its ``"confidence"`` column is the raw
            statistic the shift is computed from). None only for outcomes built by hand.
    """

    design: Design
    threat: str
    scores: dict[str, Tensor]
    truth: Tensor
    trial: Tensor
    canary: Tensor
    seeds: Tensor
    metadata: dict[str, Any] = field(default_factory=dict)
    spec: DPSGD | None = None
    observations: Tensor | None = None
    primary_score: str | None = None

    def __post_init__(self) -> None:
        if self.primary_score is not None and self.primary_score not in self.scores:
            raise InputError(f"primary_score must be one of {sorted(self.scores)}; got {self.primary_score!r}")

    @property
    def primary(self) -> Tensor:
        """The primary score's column (see ``primary_score``)."""
        if self.primary_score is None:
            raise InputError("this outcome names no primary score")
        return self.scores[self.primary_score]

    def in_scores(self, name: str) -> Tensor:
        """Scores of rows whose canary was in (membership games)."""
        self._membership_only()
        return self.scores[name][self.truth]

    def out_scores(self, name: str) -> Tensor:
        """Scores of rows whose canary was out (membership games)."""
        self._membership_only()
        return self.scores[name][~self.truth]

    def successes(self, name: str) -> Tensor:
        """(K,) bool exact-match reconstruction success (reconstruction game)."""
        if self.design is not Design.RECONSTRUCTION:
            raise InputError("successes() is defined for the reconstruction game only")
        return recon.success(self.scores[name], self.truth)

    def _membership_only(self) -> None:
        if self.design is Design.RECONSTRUCTION:
            raise InputError("in_scores/out_scores are defined for membership games only")


def trial_seed(seed: int, index: int, stream: int = _STREAM_TRIALS) -> int:
    """A 63-bit seed for trial ``index`` of a game with base ``seed`` (NumPy SeedSequence hashing)."""
    check.integer(0, None, seed=seed, index=index)
    state = np.random.SeedSequence(entropy=int(seed), spawn_key=(int(stream), int(index))).generate_state(2, np.uint32)
    return int((int(state[0]) << 31) ^ int(state[1])) & ((1 << 63) - 1)


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ----------------------------------------------------------------------------------- trials file


def _read_trials(path: Path, game_id: str) -> dict[int, dict]:
    """Finished trials in ``path``; a torn last line (killed while writing) is cut off."""
    if not path.exists():
        return {}
    raw = path.read_bytes()
    good = raw.rfind(b"\n") + 1  # everything after the last newline is a torn write
    if good < len(raw):
        with open(path, "r+b") as fh:
            fh.truncate(good)
    done: dict[int, dict] = {}
    for n, line in enumerate(raw[:good].split(b"\n"), start=1):
        if not line.strip():
            continue
        try:  # a record is UTF-8 JSON; invalid bytes, a 5,000-digit integer or deep nesting mean an edited file
            rec = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            why = "not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else "not a JSON trial record"
            raise InputError(f"{path}:{n} is {why}; the file was edited or corrupted (move it away to rerun those "
                             "trials)") from None
        if not isinstance(rec, dict) or not isinstance(rec.get("trial"), int):
            raise InputError(f"{path}:{n} is not a trial record (no integer 'trial')")
        if rec.get("game_id") != game_id:
            raise InputError(
                f"{path}:{n} belongs to another game (game_id {rec.get('game_id')!r}, expected {game_id!r}); "
                "use a new run folder or the configuration that wrote it"
            )
        done[int(rec["trial"])] = rec
    return done


def _append(fh, record: dict) -> None:
    fh.write(json.dumps(record, sort_keys=True) + "\n")
    fh.flush()
    os.fsync(fh.fileno())


# ----------------------------------------------------------------------------------- the engine


def _model_description(model: torch.nn.Module) -> list:
    """A canonical description of an architecture: each submodule's path, type, settings and parameter shapes."""
    return [[name or ".", type(mod).__name__, mod.extra_repr(),
             {k: list(p.shape) for k, p in mod.named_parameters(recurse=False)}] for name, mod in model.named_modules()]


def _game_id(design: Design, setup: Setup, canaries: Canaries, threat: Threat, scores: Sequence, seed: int,
             extra: dict) -> str:
    h = hashlib.sha256()
    desc = {
        "design": design.value,
        "spec": setup.spec.to_dict(),  # canonical (accountants.describe), not a repr
        "model": _model_description(setup.model),
        "data": [setup.data.name, setup.data.n],
        "clip_norm": float(setup.clip_norm),
        "learning_rate": float(setup.learning_rate),
        "init": setup.init.value,
        "fault": describe_fault(setup.fault),
        "canary_kind": canaries.kind,
        "m": canaries.m,
        "threat": describe_threat(threat),
        "scores": [mia.score_name(s) for s in scores],
        "seed": int(seed),
        **extra,
    }
    if isinstance(canaries, DiracCanaries):  # sparse: its coordinates, D and norm (no (m, D) tensor)
        desc["dirac"] = [canaries.dim, float(canaries.norm)]
    h.update(json.dumps(desc, sort_keys=True).encode())
    match canaries:
        case DiracCanaries(coordinates=c):
            parts: tuple[Tensor, ...] = (c,)
        case GradientCanaries(vectors=v):
            parts = (v,)
        case _:
            parts = (canaries.x, canaries.y)
    for t in (setup.data.x, setup.data.y, *parts):
        h.update(t.detach().contiguous().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def _check_fixed_size(setup: Setup, n_records: int) -> None:
    sized = (FixedSize, Shuffle, TruncatedPoisson)
    if isinstance(setup.spec.sampling, sized) and setup.spec.sampling.dataset_size != n_records:
        raise InputError(
            f"spec.sampling.dataset_size must be {n_records}, the records of the larger neighbouring dataset "
            f"(data.n plus the canaries it holds; shuffled: an absent canary holds ⊥ in its slot); got "
            f"{setup.spec.sampling.dataset_size}"
        )


class _TrainOptions(TypedDict):
    """The keyword arguments of :func:`attacks.dpsgd.train` that every canary kind shares."""

    clip_norm: float
    learning_rate: float
    n_models: int
    init: Init
    generator: list[torch.Generator]
    fault: Fault | None
    device: str | None
    keep_initial: bool


def _train_with(setup: Setup, canaries: Canaries, present_canaries: Tensor, gens: list, *, white: bool,
                hidden: bool = False) -> TrainResult:
    """Train len(gens) models with canary slots present as ``present_canaries`` (R, m)."""
    R = len(gens)
    natural = torch.ones(R, setup.data.n, dtype=torch.bool)
    common = _TrainOptions(clip_norm=setup.clip_norm, learning_rate=setup.learning_rate, n_models=R, init=setup.init,
                           generator=gens, fault=setup.fault, device=setup.device, keep_initial=hidden)
    match canaries:
        case CraftedDataset(vectors=v):  # every crafted record is a gradient slot after the natural ones
            return train(setup.spec, setup.model, setup.data, gradient_canaries=canaries.gradient_records(),
                         probes=v if white else None,
                         present=torch.cat([natural, canaries.presence(present_canaries)], dim=1), **common)
        case GradientCanaries(vectors=v):
            return train(setup.spec, setup.model, setup.data, gradient_canaries=v, probes=v if white else None,
                         present=torch.cat([natural, present_canaries], dim=1), **common)
        case DiracCanaries():  # the trainer's sparse path: no (m, D) tensor
            return train(setup.spec, setup.model, setup.data, gradient_canaries=canaries,
                         probes=canaries if white else None,
                         present=torch.cat([natural, present_canaries], dim=1), **common)
        case InputCanaries(x=x, y=y):
            return train(setup.spec, setup.model, setup.data.append(x, y),
                         present=torch.cat([natural, present_canaries], dim=1), **common)
        case _:
            raise InputTypeError(f"canaries must be GradientCanaries or InputCanaries; got {type(canaries).__name__}")


def _final_shift(setup: Setup, canaries: Canaries, result: TrainResult) -> Tensor:
    """(R, m) ⟨θ_0 − θ_T, v̂_j⟩·E|B|/(ηC): what a hidden-state adversary (θ_T, and θ_0 known) reads."""
    if not isinstance(canaries, _GRADIENT) or result.initial is None:
        raise UnsupportedError("hidden-state scores need gradient canaries and the initial parameters")
    moved = result.initial - _models.flatten(result.params).to(result.initial.dtype)
    scale = result.expected_batch_size / (setup.learning_rate * setup.clip_norm)
    if isinstance(canaries, DiracCanaries):  # unit vectors e_c: the coordinates themselves
        return moved.index_select(1, canaries.coordinates) * scale
    unit = canaries.vectors / canaries.vectors.norm(dim=1, keepdim=True)
    return moved @ unit.to(moved.dtype).T * scale


def _black_box_stats(setup: Setup, canaries: Canaries, result: TrainResult, kind: str) -> Tensor:
    if not isinstance(canaries, InputCanaries):
        raise UnsupportedError("black-box scores need input-space canaries (a gradient canary has no input)")
    if kind == "loss":
        return mia.loss_scores(setup.model, result.params, canaries.x, canaries.y)
    return mia.logit_confidence(setup.model, result.params, canaries.x, canaries.y)


def _validate_scores(scores: Sequence, threat: Threat, canaries: Canaries) -> list:
    scores = list(scores)
    if not scores:
        raise InputError("scores must name at least one score variant")
    for s in scores:
        needed = mia.needs(s)
        if not allows(threat, needed):
            view = describe_threat(needed).replace("_", "-")
            raise UnsupportedError(f"score {mia.score_name(s)} needs a {view} view; the threat is "
                                   f"{describe_threat(threat).replace('_', ' ')}")
        kind = mia.score_info(s).canary  # the canaries the score is implemented for (registry)
        if kind == "gradient" and not isinstance(canaries, _GRADIENT):
            raise UnsupportedError(f"white-box score {mia.score_name(s)} is implemented for gradient canaries only")
        if kind == "input" and not isinstance(canaries, InputCanaries):
            raise UnsupportedError(f"black-box score {mia.score_name(s)} needs input-space canaries")
    return scores


def _amplitude(canaries: Canaries, setup: Setup) -> Tensor | float:
    if isinstance(canaries, DiracCanaries):  # the adversary models the claimed (honest) algorithm
        return min(canaries.norm / setup.clip_norm, 1.0)
    if isinstance(canaries, GradientCanaries):
        # the adversary models the claimed (honest) algorithm, whatever fault was trained
        return torch.clamp(canaries.vectors.norm(dim=1) / setup.clip_norm, max=1.0)
    return 1.0


def _train_shadows(setup: Setup, canaries: Canaries, n: int, seed: int, stream: int, p_in: float,
                   chunk_size: int, progress: bool) -> tuple[Tensor, Tensor]:
    """Confidence statistics (n, m) of n shadow models and which canaries were in them (n, m)."""
    stats, ins = [], []
    for start in tqdm(range(0, n, chunk_size), desc="shadow models", disable=not progress, leave=False):
        gens = [_generator(trial_seed(seed, i, stream)) for i in range(start, min(n, start + chunk_size))]
        inc = torch.stack([torch.rand(canaries.m, generator=g, dtype=torch.float64) < p_in for g in gens])
        res = _train_with(setup, canaries, inc, gens, white=False)
        stats.append(_black_box_stats(setup, canaries, res, "confidence"))
        ins.append(inc)
    return torch.cat(stats), torch.cat(ins)


def _play(design: Design, setup: Setup, canaries: Canaries, *, threat: Threat, scores: Sequence, n_trials: int,
          seed: int, run_dir: str | Path | None, chunk_size: int, progress: bool,
          n_reference: int = 0, keep_observations: bool = False, backend: Any = None) -> AttackOutcome:
    check.integer(1, None, n_trials=n_trials, chunk_size=chunk_size)
    check.integer(0, None, seed=seed)
    describe_threat(threat)
    scores = _validate_scores(scores, threat, canaries)
    m = canaries.m
    # the largest neighbouring dataset: all canary slots in, or one candidate for reconstruction
    crafted = isinstance(canaries, CraftedDataset)
    slots = canaries.records if isinstance(canaries, CraftedDataset) else m
    n_records = setup.data.n + (1 if design is Design.RECONSTRUCTION else slots)
    _check_fixed_size(setup, n_records)
    if isinstance(setup.spec.sampling, Shuffle) and design is Design.RECONSTRUCTION:
        raise UnsupportedError("the reconstruction game does not support shuffled batches (its absent candidates "
                               "would hold ⊥ slots that the claim's dataset_size does not count)")
    if crafted != (isinstance(threat, WhiteBox) and threat.crafted_dataset):
        raise UnsupportedError("a CraftedDataset needs the threat model WhiteBox(crafted_dataset=True) (white box, "
                               "crafted dataset), and that threat model needs a CraftedDataset")
    if crafted and design is not Design.MULTI_RUN:
        raise UnsupportedError("a CraftedDataset is audited by the multi-run game only")
    # chunk_size decides which runs are vectorised together, so it is part of the identity
    extra: dict[str, object] = {"chunk_size": chunk_size,
                                **({"n_reference": n_reference} if design is Design.RECONSTRUCTION else {})}
    if isinstance(canaries, CraftedDataset):
        crafted_id: list[int] = [canaries.background, canaries.copies, canaries.alternative]
        if canaries.background_gradient != -1:  # appended only then: earlier identities stay as they were
            crafted_id.append(canaries.background_gradient)
        extra["crafted"] = crafted_id
    white = isinstance(threat, WhiteBox)
    hidden = isinstance(threat, HiddenState)
    if hidden and (design is Design.RECONSTRUCTION or not isinstance(canaries, _GRADIENT)):
        raise UnsupportedError("the hidden-state threat model is audited with gradient canaries in the multi-run or "
                               "one-run game")
    if keep_observations and not (white and isinstance(canaries, _GRADIENT)):
        raise UnsupportedError("keep_observations needs the white-box threat model and gradient canaries")
    if keep_observations:
        extra["keep_observations"] = True
    game_id = _game_id(design, setup, canaries, threat, scores, seed, extra)

    path = None
    done: dict[int, dict] = {}
    if run_dir is not None:
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        path = Path(run_dir) / TRIALS_FILE
        done = _read_trials(path, game_id)

    missing_chunks = [
        c for c in range(0, n_trials, chunk_size) if any(i not in done for i in range(c, min(n_trials, c + chunk_size)))
    ]
    shadow_stats = shadow_in = reference = None
    lira_scores = [s for s in scores if isinstance(s, mia.LiRA)]
    if missing_chunks and lira_scores:
        n_shadow = max(s.n_shadow for s in lira_scores)
        shadow_stats, shadow_in = _train_shadows(setup, canaries, n_shadow, seed, _STREAM_SHADOWS, 0.5, chunk_size,
                                                  progress)
    if missing_chunks and design is Design.RECONSTRUCTION and not white:
        reference, _ = _train_shadows(setup, canaries, n_reference, seed, _STREAM_REFERENCE, 0.0, chunk_size, progress)

    ctx = _ChunkContext(design, setup, canaries, tuple(scores), white, seed, n_trials, chunk_size, n_records,
                        game_id, keep_observations, _amplitude(canaries, setup), shadow_stats, shadow_in, reference,
                        hidden)
    fh = open(path, "a", encoding="utf-8") if path is not None else None  # closed in finally
    try:
        bar = tqdm(total=n_trials, initial=len(done), desc=f"{design.value} game", disable=not progress)
        # A single writer: chunks come back in any order from the backend; each is appended and
        # flushed as soon as it is done, so a killed worker or driver loses no finished chunk.
        for _start, recs in (backend or _LOCAL).map(_chunk_records, ctx, missing_chunks):
            new = [rec for rec in recs if rec["trial"] not in done]
            for rec in new:
                if fh is not None:
                    _append(fh, rec)
                done[rec["trial"]] = rec
            bar.update(len(new))
        bar.close()
    finally:
        if fh is not None:
            fh.close()
    if path is not None:
        _canonical_order(path)
    if design is Design.RECONSTRUCTION:
        primary = "llr" if white else "reference_shift"
    else:
        primary = mia.score_name(scores[0])
    return _assemble(design, threat, done, n_trials, m, setup, canaries, seed, game_id, n_records, primary)


class _InProcess:
    """The default backend: chunks in order, in this process (``audit.backends.Local`` is the same)."""

    name = "local"

    def map(self, fn, context, items):
        for item in items:
            yield item, fn(context, item)


_LOCAL = _InProcess()


@dataclass(frozen=True, eq=False)
class _ChunkContext:
    """Everything one chunk of trials needs; sent once to each worker of a parallel backend."""

    design: Design
    setup: Setup
    canaries: Canaries
    scores: tuple
    white: bool
    seed: int
    n_trials: int
    chunk_size: int
    n_records: int
    game_id: str
    keep_observations: bool
    amplitude: Tensor | float
    shadow_stats: Tensor | None
    shadow_in: Tensor | None
    reference: Tensor | None
    hidden: bool = False


def _probes(canaries: Canaries) -> Tensor | None:
    """The (m, D) canary directions a white-box score may read (None for input canaries). Sparse Dirac
    canaries give theirs only when m·D is small (≤ 1e7 numbers): the scores that need them (update_norm)
    project on every canary; the LLR and the inner product read the observations alone."""
    if isinstance(canaries, DiracCanaries):
        return canaries.dense().vectors if canaries.m * canaries.dim <= 10_000_000 else None
    return canaries.vectors if isinstance(canaries, GradientCanaries) else None


def _chunk_records(ctx: _ChunkContext, start: int) -> list[dict]:
    """The trials.jsonl records of the chunk of trials starting at ``start`` (a pure function of ctx and start)."""
    setup, canaries, design, m = ctx.setup, ctx.canaries, ctx.design, ctx.canaries.m
    idx = list(range(start, min(ctx.n_trials, start + ctx.chunk_size)))
    seeds = [trial_seed(ctx.seed, i) for i in idx]
    gens = [_generator(s) for s in seeds]
    # Ground truth first, from each trial's own generator (then the trainer continues it).
    match design:
        case Design.MULTI_RUN | Design.ONE_RUN:
            inc = torch.stack([torch.rand(m, generator=g, dtype=torch.float64) < 0.5 for g in gens])
        case Design.RECONSTRUCTION:
            target = torch.stack([torch.randint(0, m, (), generator=g) for g in gens])
            inc = torch.nn.functional.one_hot(target, m).to(torch.bool)
    res = _train_with(setup, canaries, inc, gens, white=ctx.white, hidden=ctx.hidden)
    view = mia.ScoreView(
        setup.spec, ctx.n_records, m,
        observations=res.observations.transpose(1, 2) if res.observations is not None else None,
        update_norms=res.update_norms, amplitude=ctx.amplitude,
        probes=_probes(canaries) if ctx.white else None,
        final_model_stats=functools.partial(_black_box_stats, setup, canaries, res),
        shadow_stats=ctx.shadow_stats, shadow_in=ctx.shadow_in,
        final_shift=_final_shift(setup, canaries, res) if ctx.hidden else None)
    columns: dict[str, Tensor] = {}
    for s in ctx.scores:
        if isinstance(s, mia.LikelihoodRatio) and isinstance(canaries, CraftedDataset):
            # the crafted dataset's exact LLR (attacks.worst_case)
            assert res.observations is not None  # a crafted dataset is audited white box: its canary is probed
            columns[mia.score_name(s)] = worst_case.llr(res.observations[..., 0], setup.spec, canaries,
                                                        clip_norm=setup.clip_norm, natural=setup.data.n)[:, None]
        else:
            columns[mia.score_name(s)] = s.compute(view)
    if design is Design.RECONSTRUCTION and not ctx.white:
        stats = _black_box_stats(setup, canaries, res, "confidence")
        assert ctx.reference is not None  # _play trains the reference models before any black-box reconstruction chunk
        columns["reference_shift"] = recon.black_box_scores(stats, ctx.reference)
    recs = []
    for r, i in enumerate(idx):
        rec = {"game_id": ctx.game_id, "trial": i, "seed": seeds[r],
               "scores": {k: v[r].tolist() for k, v in columns.items()},
               "batch_size_mean": float(res.batch_sizes[r].double().mean())}
        if design is Design.RECONSTRUCTION:
            rec["target"] = int(target[r])
        else:
            rec["members"] = inc[r].tolist()
        if ctx.keep_observations:
            assert res.observations is not None  # _play allows it for white-box gradient canaries only
            rec["observations"] = res.observations[r].T.tolist()  # (m, T)
        recs.append(rec)
    return recs


def _canonical_order(path: Path) -> None:
    """Rewrite ``path`` sorted by trial when a parallel backend appended chunks out of order (atomic)."""
    lines = path.read_bytes().splitlines(keepends=True)
    order = [json.loads(line)["trial"] for line in lines if line.strip()]
    if order == sorted(order):
        return
    keyed = sorted((json.loads(line)["trial"], line) for line in lines if line.strip())
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        fh.writelines(line for _, line in keyed)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)  # a kill before this line leaves the unsorted (complete) file


def _assemble(design: Design, threat: Threat, done: dict[int, dict], n_trials: int, m: int, setup: Setup,
              canaries: Canaries, seed: int, game_id: str, n_records: int, primary: str) -> AttackOutcome:
    recs = [done[i] for i in range(n_trials)]
    names = sorted(recs[0]["scores"])
    metadata = {
        "game_id": game_id, "seed": int(seed), "n_trials": n_trials, "m": m, "canary_kind": canaries.kind,
        "noise_multiplier": setup.spec.noise_multiplier, "steps": setup.spec.steps,
        "sampling": repr(setup.spec.sampling), "neighbouring": setup.spec.neighbouring.value,
        "clip_norm": float(setup.clip_norm), "learning_rate": float(setup.learning_rate),
        "fault": describe_fault(setup.fault), "data": setup.data.name, "dataset_size": n_records,
        "model": type(setup.model).__name__,
        "batch_size_mean": [r["batch_size_mean"] for r in recs],
    }
    seeds = torch.tensor([r["seed"] for r in recs], dtype=torch.int64)
    if design is Design.RECONSTRUCTION:
        scores = {k: torch.tensor([r["scores"][k] for r in recs], dtype=torch.float64) for k in names}
        truth = torch.tensor([r["target"] for r in recs], dtype=torch.int64)
        trial = torch.arange(n_trials)
        return AttackOutcome(design, describe_threat(threat), scores, truth, trial, torch.zeros_like(trial), seeds,
                             {**metadata, "kappa": 1.0 / m}, setup.spec, primary_score=primary)
    scores = {k: torch.tensor([r["scores"][k] for r in recs], dtype=torch.float64).reshape(-1) for k in names}
    truth = torch.tensor([r["members"] for r in recs], dtype=torch.bool).reshape(-1)
    trial = torch.arange(n_trials).repeat_interleave(m)
    canary = torch.arange(m).repeat(n_trials)
    obs = None
    if "observations" in recs[0]:
        obs = torch.tensor([r["observations"] for r in recs], dtype=torch.float64).reshape(n_trials * m, -1)
    return AttackOutcome(design, describe_threat(threat), scores, truth, trial, canary, seeds.repeat_interleave(m),
                         metadata, setup.spec, obs, primary_score=primary)


def multi_run_game(setup: Setup, canary: Canaries, *, threat: Threat | None = None,
                   scores: Sequence[mia.Score] | None = None, n_trials: int = 1000, seed: int = 0,
                   run_dir: str | Path | None = None, chunk_size: int = 64, progress: bool = True,
                   keep_observations: bool = False, backend: Any = None) -> AttackOutcome:
    """K independent runs, each with the single canary in with probability ½; one score per run.

    Args:
        setup: the training setup (spec, model, data, C, η, fault).
        canary: exactly one canary (GradientCanaries or InputCanaries with m = 1).
        threat: WhiteBox() (the default, None; WhiteBox(crafted_dataset=True) for a
            :class:`attacks.canaries.CraftedDataset`), HiddenState() (θ_T only, θ_0 known; gradient
            canaries) or BlackBox().
        scores: score variants; default LikelihoodRatio and InnerProductSum (white box),
            FinalProjection (hidden state) or LossScore and ConfidenceScore (black box).
        n_trials: K.
        seed: base seed; trial i uses :func:`trial_seed` (seed, i).
        run_dir: folder for ``trials.jsonl`` (resume); None keeps nothing on disk.
        chunk_size: runs trained at once (vectorised); part of the game's identity for resume.
        progress: tqdm bar over trials.
        keep_observations: also keep every per-step statistic o_t (white box, gradient canary),
            for per-step audits; T more numbers per trial in ``trials.jsonl``.
        backend: where chunks are trained: None (this process, in order) or an
            :mod:`audit.backends` backend (``Process(workers)``, ``Ray(address)``); the outcome and
            ``trials.jsonl`` are the same whichever runs them.

    Returns:
        :class:`AttackOutcome` with K rows, design MULTI_RUN.
    """
    if threat is None:
        threat = WhiteBox(crafted_dataset=isinstance(canary, CraftedDataset))
    if canary.m != 1:
        raise InputError(f"the multi-run game takes exactly one canary; got m={canary.m} (use one_run_game)")
    return _play(Design.MULTI_RUN, setup, canary, threat=threat, scores=_default_scores(scores, threat),
                 n_trials=n_trials, seed=seed, run_dir=run_dir, chunk_size=chunk_size, progress=progress,
                 keep_observations=keep_observations, backend=backend)


def one_run_game(setup: Setup, canaries: Canaries, *, threat: Threat | None = None,
                 scores: Sequence[mia.Score] | None = None, n_runs: int = 1, seed: int = 0,
                 run_dir: str | Path | None = None, chunk_size: int = 10, progress: bool = True,
                 keep_observations: bool = False, backend: Any = None) -> AttackOutcome:
    """Runs with m canaries each, every canary in independently with probability ½ (Steinke et al. 2023).

    Same arguments as :func:`multi_run_game` with ``canaries`` (m ≥ 1) and ``n_runs``.

    Returns:
        :class:`AttackOutcome` with n_runs·m rows, design ONE_RUN.
    """
    threat = WhiteBox() if threat is None else threat
    return _play(Design.ONE_RUN, setup, canaries, threat=threat, scores=_default_scores(scores, threat),
                 n_trials=n_runs, seed=seed, run_dir=run_dir, chunk_size=chunk_size, progress=progress,
                 keep_observations=keep_observations, backend=backend)


def reconstruction_game(setup: Setup, candidates: Canaries, *, threat: Threat | None = None, n_trials: int = 100,
                        n_reference: int = 8, seed: int = 0, run_dir: str | Path | None = None,
                        chunk_size: int = 64, progress: bool = True, backend: Any = None) -> AttackOutcome:
    """Informed-adversary reconstruction: the target is uniform among n candidates (κ = 1/n).

    White box (gradient candidates): the score is the white-box log-likelihood ratio of each
    candidate's direction ("llr"; :func:`attacks.reconstruction.white_box_scores`). Black box
    (input candidates): the shift of each candidate's confidence against ``n_reference`` models
    trained on the known records alone ("reference_shift";
    :func:`attacks.reconstruction.black_box_scores`). Success is an exact match of the argmax.

    Returns:
        :class:`AttackOutcome` with scores (K, n) and truth = the target's index.
    """
    threat = WhiteBox() if threat is None else threat
    if candidates.m < 2:
        raise InputError(f"candidates must hold n ≥ 2 records; got {candidates.m}")
    if isinstance(threat, WhiteBox):
        scores = [mia.LikelihoodRatio()]
    else:
        check.integer(2, None, n_reference=n_reference)
        scores = [mia.ConfidenceScore()]
    return _play(Design.RECONSTRUCTION, setup, candidates, threat=threat, scores=scores, n_trials=n_trials,
                 seed=seed, run_dir=run_dir, chunk_size=chunk_size, progress=progress,
                 n_reference=n_reference if not isinstance(threat, WhiteBox) else 0, backend=backend)


def _default_scores(scores: Sequence[mia.Score] | None, threat: Threat) -> list:
    if scores is not None:
        return list(scores)
    match threat:
        case WhiteBox():
            return [mia.LikelihoodRatio(), mia.InnerProductSum()]
        case HiddenState():
            return [mia.FinalProjection()]
        case BlackBox():
            return [mia.LossScore(), mia.ConfidenceScore()]
        case _:
            raise InputTypeError(f"threat must be WhiteBox() or BlackBox(); got {threat!r}")
