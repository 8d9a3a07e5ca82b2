"""Membership-inference scores. IMPORTANT: higher score ⇒ "member" (canary was in).

Score variants are typed and matched with ``match`` (house style §9)::

    Score = LikelihoodRatio() | InnerProductSum()            # white box: every update
          | UpdateNorm()                                      # white box: update scale off the canary
          | FinalProjection()                                 # hidden state: θ_T only (θ_0 known)
          | LossScore() | ConfidenceScore() | LiRA(...)       # black box: final model

White box. ``observations`` are the projections of the privatised updates on the canary's unit
direction in units of C (:class:`attacks.dpsgd.TrainResult`): o_t = a·k_t + z_t, where k_t is
the number of draws of the canary at step t, a = min(‖g‖, C)/C its clipped size and
z_t ~ N(0, σ²) (plus other records' contributions, which are exactly 0 on a quiet coordinate).
The Neyman–Pearson optimal statistic for "in" vs "out" is then the log-likelihood ratio

    Λ = Σ_t log Σ_k P(k_t = k) · exp((k a o_t − k² a² / 2) / σ²)

with the law of k_t of the actual sampler (:func:`draw_law`): a per-step mixture, not a sum of
Gaussians (Nasr et al. 2023, arXiv:2302.07956, audit at q = 1, where the mixture collapses to
N(1, σ²) against N(0, σ²)). Bound: none (a score; the audit turns scores into lower bounds).

White box, update scale (:class:`UpdateNorm`). −Σ_t log ‖Π⊥ u_t‖ in units of C, where Π⊥ projects
out the canary directions. It reads only the part of each update the canary cannot touch, so under
the accounted mechanism (public normaliser E|B|, gradient canaries on coordinates that no other
record's gradient or loss depends on, e.g. Dirac canaries on quiet coordinates) its law is the
same whether the canary is in or out, and it certifies nothing (elsewhere it is still a function of
the white-box view, so it can never certify more than the mechanism's ε). It detects an implementation whose
update SCALE depends on membership: dividing by the realised batch size |B_t| (opacus #571/#819;
:class:`attacks.faults.RealisedBatchNormalisation`) shrinks every coordinate by |B_t|/(|B_t| + 1)
when the canary is drawn, and a high-dimensional norm measures that scale to ≈ 1/√(2D).

Black box. Loss −ℓ(θ_T; x, y) and the logit-scaled confidence φ = z_y − log Σ_{y'≠y} e^{z_{y'}}
(the logit scaling of Carlini et al. 2022, arXiv:2112.03570, computed from logits in log space), and
LiRA with shadow models, online (Gaussian LR of in vs out) or offline (one-sided test against
the out distribution), with per-example or fixed (pooled) variance, models in eval mode.

>>> import torch, accountants as acc
>>> spec = acc.DPSGD(1.0, acc.Poisson(1.0), steps=1)
>>> white_box_llr(torch.tensor([[0.0], [1.0]]), spec, dataset_size=10).tolist()
[-0.5, 0.5]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from accountants import validate as check
from accountants.errors import InputError, InputTypeError, UnsupportedError
from accountants.events import DPSGD
from accountants.sampling import FixedSize, Poisson, RandomAllocation, Shuffle

from . import models as _models
from .threat import BlackBox, HiddenState, Threat, WhiteBox

__all__ = [
    "SCORES",
    "SCORE_INFO",
    "ConfidenceScore",
    "FinalProjection",
    "InnerProductSum",
    "LiRA",
    "LikelihoodRatio",
    "LossScore",
    "Score",
    "ScoreInfo",
    "ScoreView",
    "UpdateNorm",
    "allocation_llr",
    "draw_law",
    "inner_product_sum",
    "lira",
    "logit_confidence",
    "loss_scores",
    "needs",
    "register_score",
    "score_from_name",
    "score_info",
    "score_name",
    "shuffled_llr",
    "update_norm_score",
    "white_box_llr",
]


@dataclass(frozen=True)
class ScoreView:
    """What an adversary sees after one chunk of training runs; each score's ``compute`` reads it.

    Attributes:
        spec: the claimed DP-SGD description (the adversary's model of the run).
        n_records: N, records the sampler draws from when the canaries are in.
        m: canaries per run.
        observations: (R, m, T) projections o_t of the updates on the canaries, in units of C (white box).
        update_norms: (R, T) update norms in units of C (white box).
        probes: (m, D) canary gradient directions (white box).
        amplitude: the canaries' clipped sizes in units of C.
        final_model_stats: ``kind -> (R, m)`` statistics of the final models on the canaries
            ("loss", "confidence"; black box).
        shadow_stats, shadow_in: shadow models' confidences and inclusion masks (scores that ask for shadows).
        final_shift: (R, m) ⟨θ_0 − θ_T, v̂_j⟩·E|B|/(ηC) for each canary direction (hidden-state scores).
    """

    spec: DPSGD
    n_records: int
    m: int
    observations: Tensor | None = None
    update_norms: Tensor | None = None
    probes: Tensor | None = None
    amplitude: float | Tensor = 1.0
    final_model_stats: Callable[[str], Tensor] | None = None
    shadow_stats: Tensor | None = None
    shadow_in: Tensor | None = None
    final_shift: Tensor | None = None

    def tensor(self, name: str) -> Tensor:
        """The observed tensor ``name``; ``InputError`` when the game's threat model does not observe it."""
        value = getattr(self, name)
        if value is None:
            raise InputError(f"this score needs {name}, which the game's threat model does not observe")
        return value

    def stats(self, kind: str) -> Tensor:
        """``final_model_stats(kind)``; ``InputError`` when the game does not observe the final model."""
        if self.final_model_stats is None:
            raise InputError(f"this score needs the final model's {kind}, which the game's threat model does not see")
        return self.final_model_stats(kind)


@dataclass(frozen=True, slots=True)
class LikelihoodRatio:
    """White box: the optimal log-likelihood ratio of the update projections (per-step mixture)."""

    def compute(self, view: ScoreView) -> Tensor:
        return white_box_llr(view.tensor("observations"), view.spec, view.n_records, amplitude=view.amplitude)


@dataclass(frozen=True, slots=True)
class InnerProductSum:
    """White box: Σ_t ⟨canary direction, u_t⟩ (Steinke et al. 2023's white-box score)."""

    def compute(self, view: ScoreView) -> Tensor:
        return inner_product_sum(view.tensor("observations"))


@dataclass(frozen=True, slots=True)
class FinalProjection:
    """Hidden state: ⟨θ_0 − θ_T, v̂⟩·E|B|/(ηC), the final model's displacement along the canary direction.

    For a gradient canary on a coordinate no other record touches this equals Σ_t o_t (the
    white-box sum, tests/attacks/test_worst_case.py), and for Poisson add/remove it is a sufficient
    statistic of the hidden-state pair Bin(T, q) + N(0, Tσ²) vs N(0, Tσ²), whose likelihood ratio is
    increasing in it: thresholds on it are the Neyman–Pearson tests of a final-model adversary
    (Cebere et al., ICLR 2025, §4; Annamalai & De Cristofaro, NeurIPS 2024).
    """

    def compute(self, view: ScoreView) -> Tensor:
        if view.final_shift is None:
            raise InputError("final_projection needs the final and initial parameters (threat model hidden_state)")
        return view.final_shift


@dataclass(frozen=True, slots=True)
class UpdateNorm:
    """White box: −Σ_t log ‖u_t‖ with the canary directions projected out (see :func:`update_norm_score`).

    Null (same law in and out) for a correct implementation; detects a membership-dependent update
    scale such as normalising by the realised batch size.
    """

    def compute(self, view: ScoreView) -> Tensor:  # one number per run, repeated for each of its m canaries
        return update_norm_score(view.tensor("update_norms"), view.tensor("observations").transpose(1, 2),
                                 view.tensor("probes"))[:, None].expand(-1, view.m)


@dataclass(frozen=True, slots=True)
class LossScore:
    """Black box: −loss of the final model on the canary."""

    def compute(self, view: ScoreView) -> Tensor:
        return view.stats("loss")


@dataclass(frozen=True, slots=True)
class ConfidenceScore:
    """Black box: logit-scaled confidence φ = log p_y − log(1 − p_y) of the final model."""

    def compute(self, view: ScoreView) -> Tensor:
        return view.stats("confidence")


@dataclass(frozen=True, slots=True)
class LiRA:
    """Black box: likelihood-ratio attack with ``n_shadow`` shadow models (Carlini et al. 2022).

    Attributes:
        n_shadow: shadow models, each with every canary in with probability ½.
        online: True: Gaussian LR of "in" vs "out" shadows; False: offline, out shadows only.
        fixed_variance: one pooled within-canary variance instead of one per canary (better
            with few shadows, per the reference code's README).
    """

    n_shadow: int = 16
    online: bool = True
    fixed_variance: bool = False

    def __post_init__(self) -> None:
        check.integer(2, None, n_shadow=self.n_shadow)
        for name in ("online", "fixed_variance"):
            if not isinstance(getattr(self, name), bool):
                raise InputTypeError(f"{name} must be a bool; got {type(getattr(self, name)).__name__}")

    def column_name(self) -> str:
        mode = "online" if self.online else "offline"
        return f"lira_{mode}{'_fixedvar' if self.fixed_variance else ''}_{self.n_shadow}"

    def compute(self, view: ScoreView) -> Tensor:
        k = self.n_shadow
        return lira(view.stats("confidence"), view.tensor("shadow_stats")[:k], view.tensor("shadow_in")[:k],
                    online=self.online, fixed_variance=self.fixed_variance)


Score = LikelihoodRatio | InnerProductSum | FinalProjection | UpdateNorm | LossScore | ConfidenceScore | LiRA


@dataclass(frozen=True)
class ScoreInfo:
    """One registered score: its name, class, the view it needs, the canaries it reads, its config keys."""

    name: str
    cls: type
    threat: Threat  # the adversary's view it needs (WhiteBox: every update; BlackBox: the final model)
    canary: str  # "gradient" or "input": the canaries it is implemented for
    config: dict[str, str]  # constructor field -> [attack] key of a TOML config
    doc: str


SCORE_INFO: dict[str, ScoreInfo] = {}
SCORES: dict[str, type] = {}  # name -> class, kept for callers that only need the constructor


def register_score(name: str, cls: type, *, threat: Threat, canary: str,
                   config: dict[str, str] | None = None) -> None:
    """Register a score once: the config's ``attack.score`` choices, ``--help``, ``needs`` and the games read it.

    ``cls`` is a frozen dataclass with ``compute(self, view: ScoreView) -> Tensor`` ((R, m) scores,
    higher ⇒ member); the games call nothing else, so adding a score is this call plus its class.
    """
    if not callable(getattr(cls, "compute", None)):
        raise InputTypeError(f"score {name!r}: {cls.__name__} needs a compute(view) method")
    if name in SCORE_INFO:
        raise InputError(f"score {name!r} is already registered")
    if canary not in ("gradient", "input"):
        raise InputError(f"canary must be 'gradient' or 'input'; got {canary!r}")
    doc = (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
    SCORE_INFO[name] = ScoreInfo(name, cls, threat, canary, dict(config or {}), doc)
    SCORES[name] = cls


for _name, _cls, _threat, _canary, _config in (
    ("llr", LikelihoodRatio, WhiteBox(), "gradient", None),
    ("inner_product", InnerProductSum, WhiteBox(), "gradient", None),
    ("final_projection", FinalProjection, HiddenState(), "gradient", None),
    ("update_norm", UpdateNorm, WhiteBox(), "gradient", None),
    ("loss", LossScore, BlackBox(), "input", None),
    ("confidence", ConfidenceScore, BlackBox(), "input", None),
    ("lira", LiRA, BlackBox(), "input", {"n_shadow": "n_shadow"}),
):
    register_score(_name, _cls, threat=_threat, canary=_canary, config=_config)


def score_info(score: Score | str) -> ScoreInfo:
    """The registry entry of a score (an instance or its registered name)."""
    if isinstance(score, str):
        try:
            return SCORE_INFO[score]
        except KeyError:
            raise InputError(f"unknown score {score!r}; choose from {sorted(SCORE_INFO)}") from None
    for info in SCORE_INFO.values():
        if type(score) is info.cls:
            return info
    raise InputTypeError(f"score must be one of {sorted(SCORES)} variants; got {type(score).__name__}")


def score_from_name(name: str, **kwargs) -> Score:
    """Build a score variant from its registry name (see ``SCORES``)."""
    try:
        cls = SCORES[name]
    except KeyError:
        raise InputError(f"unknown score {name!r}; choose from {sorted(SCORES)}") from None
    return cls(**kwargs)


def score_name(score: Score) -> str:
    """Stable name used as the key of a score column: the registered name, or the score's own
    ``column_name()`` when its settings change what it computes (e.g. "lira_online_16")."""
    info = score_info(score)
    column = getattr(score, "column_name", None)
    return column() if column is not None else info.name


def needs(score: Score) -> Threat:
    """The view an adversary needs to compute ``score`` (from the registry)."""
    return score_info(score).threat


def draw_law(spec: DPSGD, dataset_size: int, *, dtype: torch.dtype = torch.float64) -> tuple[Tensor, Tensor]:
    """Law of the number of draws k of one given record in one step of ``spec.sampling``.

    Poisson(q): k ∈ {0, 1}, P(1) = q. Fixed size b without replacement from N records:
    P(1) = b/N. With replacement: k ~ Binomial(b, 1/N).

    Returns:
        (k, log P(k)): two (K,) tensors.
    """
    check.integer(1, None, dataset_size=dataset_size)
    match spec.sampling:
        case Poisson(rate=q):
            p1 = float(q)
        case FixedSize(batch_size=b, replace=False):
            p1 = min(1.0, b / dataset_size)
        case FixedSize(batch_size=b, replace=True):
            k = torch.arange(b + 1, dtype=dtype)
            log_binom = torch.lgamma(torch.tensor(b + 1.0, dtype=dtype)) - torch.lgamma(k + 1) - torch.lgamma(b - k + 1)
            p = 1.0 / dataset_size
            log_p = log_binom + k * math.log(p) + (b - k) * (math.log1p(-p) if p < 1 else 0.0)
            if p == 1:  # one record: drawn b times surely
                log_p = torch.where(k == b, 0.0, -math.inf).to(dtype)
            return k, log_p
        case _:
            raise InputTypeError(f"spec.sampling must be Poisson or FixedSize (Shuffle: shuffled_llr, per epoch); "
                                 f"got {type(spec.sampling).__name__}")
    k = torch.tensor([0.0, 1.0], dtype=dtype)
    log_p = torch.tensor([math.log1p(-p1) if p1 < 1 else -math.inf, math.log(p1)], dtype=dtype)
    return k, log_p


def white_box_llr(observations: Tensor, spec: DPSGD, dataset_size: int, *, amplitude: float | Tensor = 1.0) -> Tensor:
    """Optimal white-box score: Σ_t log E_k[exp((k a o_t − k² a²/2)/σ²)] (see module docstring).

    Args:
        observations: (..., T) projections o_t in units of C.
        spec: the claimed σ and sampler (the adversary's model of the run).
        dataset_size: N, records the sampler draws from when the canary is in.
        amplitude: a = min(‖g‖, C)/C, the canary's clipped size in units of C; a float or a
            tensor broadcasting against ``observations.shape[:-1]``.

    Returns:
        (...) log-likelihood ratio of "in" against "out"; higher ⇒ member.
    """
    check.positive(amplitude=amplitude)
    if isinstance(spec.sampling, Shuffle):  # a record is in one batch per epoch: the epochs are the units
        return shuffled_llr(observations, spec, 1.0, 0.0, amplitude=amplitude)
    if isinstance(spec.sampling, RandomAllocation):
        return allocation_llr(observations, spec, amplitude=amplitude)
    k, log_p = draw_law(spec, dataset_size, dtype=observations.dtype)
    var = spec.noise_multiplier**2
    a = torch.as_tensor(amplitude, dtype=observations.dtype)[..., None, None]  # broadcasts over (..., T, K)
    o = observations.unsqueeze(-1)  # (..., T, 1) against k on the last axis
    per_step = torch.logsumexp(log_p + (k * a * o - 0.5 * (k * a) ** 2) / var, dim=-1)
    return per_step.sum(dim=-1)


def _epoch_log_mix(o: Tensor, m: float, a: Tensor, var: float, p: float) -> Tensor:
    """log[(1 − p) + (p/r) Σ_t e^{(m a o_t − (m a)²/2)/σ²}] over the r steps of one epoch (last axis)."""
    inner = torch.logsumexp((m * a * o - 0.5 * (m * a) ** 2) / var, dim=-1) + math.log(p / o.shape[-1])
    if p >= 1.0:
        return inner
    return torch.logaddexp(inner, torch.full_like(inner, math.log1p(-p)))


def shuffled_llr(observations: Tensor, spec: DPSGD, shift_in: float, shift_out: float, *,
                 amplitude: float | Tensor = 1.0) -> Tensor:
    """Optimal white-box score under :class:`accountants.Shuffle`: a sum over epochs of mixture LLRs.

    Within an epoch of L batches the record sits in exactly one batch, uniformly at random (in a
    trailing partial epoch of r batches: in one of them with probability r·b/n, else in none), and
    epochs are independent. With o_t the projections in units of C after removing the known
    baseline, "in" shifts the record's batch by ``shift_in``·a and "out" by ``shift_out``·a, so an
    epoch's likelihood is (1 − p) φ(o) + (p/L) Σ_t φ(o) e^{(m o_t − m²/2)/σ²} with m the shift: the
    mixture pair MoG(m₁) vs MoG(m₀) of Chua et al. (ICML 2024, §4). Returns Σ_epochs log ratio.

    Args:
        observations: (..., T) projections.
        spec: a DPSGD with Shuffle sampling (σ, b, n, T).
        shift_in, shift_out: m₁ and m₀ in units of the canary's clipped size (a Dirac canary against ⊥:
            1 and 0; the crafted dataset of :func:`attacks.worst_case.crafted`: 2 and 1).
        amplitude: a = min(‖g‖, C)/C.
    """
    s = spec.sampling
    if not isinstance(s, Shuffle):
        raise InputTypeError(f"spec.sampling must be accountants.Shuffle; got {type(s).__name__}")
    T, L, var = observations.shape[-1], s.steps_per_epoch, spec.noise_multiplier**2
    a = torch.as_tensor(amplitude, dtype=observations.dtype)[..., None]
    total = torch.zeros(observations.shape[:-1], dtype=observations.dtype)
    for start in range(0, T, L):
        o = observations[..., start:start + L]
        r = o.shape[-1]
        p = min(1.0, r * s.batch_size / s.dataset_size)

        total = total + _epoch_log_mix(o, float(shift_in), a, var, p) - _epoch_log_mix(o, float(shift_out), a, var, p)
    return total


def allocation_llr(observations: Tensor, spec: DPSGD, *, amplitude: float | Tensor = 1.0) -> Tensor:
    """Optimal white-box score under balls-in-bins (:class:`accountants.RandomAllocation`, k = 1).

    Each epoch of t steps holds the record in one uniformly random step (a trailing partial epoch of
    r steps: in one of them with probability r/t), epochs are independent, and a record of gradient
    a·C·e on a quiet coordinate e shifts its step by a: an epoch's likelihood ratio is
    (1 − r/t) + (1/t) Σ_j e^{(a o_j − a²/2)/σ²}, the accountant's dominating pair
    (1/t) Σ_j N(e_j, σ²I) against N(0, σ²I) (Feldman & Shenfeld 2025, arXiv 2502.08202). Returns
    Σ_epochs log ratio (the Neyman–Pearson score of the T-step pair).

    Args:
        observations: (..., T) projections in units of C.
        spec: a DPSGD with RandomAllocation(1, t) sampling.
        amplitude: a = min(‖g‖, C)/C.
    """
    s = spec.sampling
    if not isinstance(s, RandomAllocation):
        raise InputTypeError(f"spec.sampling must be accountants.RandomAllocation; got {type(s).__name__}")
    if s.k != 1:
        raise UnsupportedError(f"allocation_llr covers balls-in-bins (k = 1); got k = {s.k}")
    T, t, var = observations.shape[-1], s.steps_per_epoch, spec.noise_multiplier**2
    a = torch.as_tensor(amplitude, dtype=observations.dtype)[..., None]
    total = torch.zeros(observations.shape[:-1], dtype=observations.dtype)
    for start in range(0, T, t):
        o = observations[..., start:start + t]
        total = total + _epoch_log_mix(o, 1.0, a, var, o.shape[-1] / t)
    return total


def inner_product_sum(observations: Tensor) -> Tensor:
    """Σ_t o_t over the last axis: the plain sum of inner products with the canary direction."""
    return observations.sum(dim=-1)


def update_norm_score(update_norms: Tensor, projections: Tensor, probes: Tensor) -> Tensor:
    """−Σ_t log ‖Π⊥ u_t‖: the update scale off the canary directions, in units of C; higher ⇒ member.

    ‖Π⊥ u_t‖² = ‖u_t‖² − oᵀ G⁻¹ o, with o the projections of u_t on the unit probes and G their Gram
    matrix (G = I for Dirac canaries on distinct coordinates). Under the accounted mechanism the
    projected update does not depend on the canaries (module docstring), so neither does the score;
    with the realised-batch normaliser its scale is 1/|B_t|, larger by one when a canary is drawn,
    and −log‖Π⊥ u_t‖ ≈ log |B_t| + const. Bound: none (a score).

    Args:
        update_norms: (..., T) ‖u_t‖ in units of C (:attr:`attacks.dpsgd.TrainResult.update_norms`).
        projections: (..., T, P) projections on the unit probes, same units
            (:attr:`attacks.dpsgd.TrainResult.observations`).
        probes: (P, D) the probe (canary) directions, any norm, linearly independent.

    Returns:
        (...) scores; the same for every canary of a run (it reads no canary coordinate).
    """
    if projections.shape[:-1] != update_norms.shape or projections.shape[-1] != probes.shape[0]:
        raise InputError(f"projections must have shape update_norms.shape + (P={probes.shape[0]},); got "
                         f"{tuple(projections.shape)} and {tuple(update_norms.shape)}")
    unit = probes.to(projections.dtype)
    unit = unit / unit.norm(dim=1, keepdim=True)
    gram = unit @ unit.T  # (P, P)
    inside = (projections * torch.linalg.solve(gram, projections.unsqueeze(-1)).squeeze(-1)).sum(-1)
    # ‖u‖² ≈ σ²D ≫ the canary part: no cancellation to fear; the clamp only guards a degenerate D = P
    perp2 = (update_norms**2 - inside).clamp_min(torch.finfo(projections.dtype).tiny)
    return -0.5 * torch.log(perp2).sum(dim=-1)


def loss_scores(model: nn.Module, params: dict[str, Tensor], x: Tensor, y: Tensor) -> Tensor:
    """−cross-entropy of R stacked final models on m records: (R, m); eval mode."""
    z = _models.logits(model, params, x)  # (R, m, K)
    return z.gather(-1, y.expand(z.shape[0], -1).unsqueeze(-1)).squeeze(-1) - torch.logsumexp(z, dim=-1)


def logit_confidence(model: nn.Module, params: dict[str, Tensor], x: Tensor, y: Tensor) -> Tensor:
    """Logit-scaled confidence φ = z_y − logsumexp_{y'≠y} z_{y'} of R stacked models on m records: (R, m).

    Equal to log p_y − log(1 − p_y) (Carlini et al. 2022's logit scaling) without forming 1 − p_y, which
    rounds to 0 for confident models; evaluated in eval mode.
    """
    z = _models.logits(model, params, x)  # (R, m, K)
    zy = z.gather(-1, y.expand(z.shape[0], -1).unsqueeze(-1)).squeeze(-1)
    others = z.scatter(-1, y.expand(z.shape[0], -1).unsqueeze(-1), -math.inf)
    return zy - torch.logsumexp(others, dim=-1)


def _centre_scale(stats: Tensor, mask: Tensor, fixed_variance: bool, what: str) -> tuple[Tensor, Tensor]:
    counts = mask.sum(dim=0)
    if bool((counts == 0).any()):
        j = int(torch.nonzero(counts == 0)[0])
        raise InputError(f"canary {j} has no '{what}' shadow model; use more shadows (n_shadow)")
    filled = torch.where(mask, stats, torch.nan)
    centre = torch.nanmedian(filled, dim=0).values  # the reference code uses the median
    resid2 = torch.where(mask, (stats - centre) ** 2, 0.0)
    if fixed_variance:
        scale = (resid2.sum() / counts.sum()).sqrt().expand_as(centre)
    else:
        if bool((counts < 2).any()):
            raise InputError(f"per-example variance needs ≥ 2 '{what}' shadows per canary; use fixed_variance=True")
        scale = (resid2.sum(dim=0) / counts).sqrt()
    return centre, scale.clamp_min(1e-30)  # + 1e-30 as the reference code, so ties do not divide by 0


def lira(target: Tensor, shadow: Tensor, shadow_in: Tensor, *, online: bool = True,
         fixed_variance: bool = False) -> Tensor:
    """LiRA scores from per-canary statistics (use :func:`logit_confidence`).

    Online: log N(φ; μ_in, σ_in²) − log N(φ; μ_out, σ_out²). Offline: −log P[φ' ≥ φ] under
    N(μ_out, σ_out²), the paper's one-sided test (the reference code's two-sided logpdf variant is
    not comparable; aidotse/LeakPro#378). Centres are medians, as in the reference code.

    Args:
        target: (K, m) statistics of the attacked models on the m canaries.
        shadow: (S, m) statistics of the shadow models.
        shadow_in: (S, m) bool, canary j was in shadow s.

    Returns:
        (K, m) scores, higher ⇒ member.
    """
    if shadow.shape != shadow_in.shape or shadow.shape[1:] != target.shape[1:]:
        raise InputError(
            f"shadow, shadow_in and target must agree on canaries: {tuple(shadow.shape)}, "
            f"{tuple(shadow_in.shape)}, {tuple(target.shape)}"
        )
    mu_out, sd_out = _centre_scale(shadow, ~shadow_in, fixed_variance, "out")
    z_out = (target - mu_out) / sd_out
    if not online:
        return -torch.special.log_ndtr(-z_out)
    mu_in, sd_in = _centre_scale(shadow, shadow_in, fixed_variance, "in")
    z_in = (target - mu_in) / sd_in
    return (-0.5 * z_in**2 - torch.log(sd_in)) - (-0.5 * z_out**2 - torch.log(sd_out))
