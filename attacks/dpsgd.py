"""DP-SGD exactly as the accountant describes it, for R small models at once.

One step for each model r (Abadi et al. 2016, Alg. 1; σ and C as in Opacus)::

    B_t    ~ spec.sampling                       (samplers.sample_counts; absent records never drawn)
    g_i    = ∇_θ ℓ(θ; x_i, y_i)                   (exact: closed form, attacks.ghost, or vmap(grad))
    s_t    = Σ_{i∈B_t} g_i · min(1, C/‖g_i‖)       (+ gradient canaries, clipped the same way)
    u_t    = (s_t + N(0, σ²C² I)) / E|B|           (E|B| = q·N for Poisson, b for fixed size, k·N/t for
                                                  random allocation)
    θ     ← θ − η · u_t

Dividing by the *expected* batch size keeps the normaliser public: dividing by the realised
Poisson size would leak it (opacus #571/#819; see :class:`attacks.faults.RealisedBatchNormalisation`).

R models are stacked on a leading axis and every step is one vectorised call: for the models of
:mod:`attacks.models`, the closed-form norms ‖g_i‖ and clipped sum of :mod:`attacks.ghost` (no
per-example gradient tensor for linear layers); for any other model, vmap over models of vmap
over examples. All randomness of model r (initialisation, batches, noise) comes from
its own generator, in that order, so a model's run does not depend on the other models beside it.

Device and dtype follow ``data.x``: the per-model draws come from CPU generators (so a model's
randomness is the same on every device). Batches are drawn before the loop and moved to the
data's device in one transfer each; the noise is drawn a block of steps at a time
(:class:`NoiseStream`, the same numbers as one ``randn(T, D)`` per model, so memory grows with
the models and not with models × steps), one transfer per block. The step loop makes no other
transfer and no host synchronisation (the gather widths of every step are computed up front).
The stages of a step are separate functions: :func:`sample_draws` (sampling),
``_StepGradients.clipped_sum`` (per-example gradients and clipping), :func:`add_noise` and
:func:`update`.
:func:`bytes_per_model` estimates the memory one model takes, so callers can size chunks to a
memory budget (:func:`models_that_fit`).

>>> import torch, accountants as acc
>>> from attacks import data, dpsgd, models
>>> d = data.digits().subset(slice(0, 200))
>>> spec = acc.DPSGD(1.0, acc.Poisson(0.1), steps=3)
>>> res = dpsgd.train(spec, models.logistic_regression(64, 10), d, clip_norm=1.0, learning_rate=0.5,
...                   n_models=2, generator=torch.Generator().manual_seed(0))
>>> tuple(res.batch_sizes.shape)
(2, 3)
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap
from tqdm.auto import tqdm

from accountants import validate as check
from accountants.errors import InputError, InputTypeError
from accountants.events import DPSGD
from accountants.sampling import Poisson

from . import ghost as _ghost
from . import models as _models
from . import samplers
from .canaries import DiracCanaries
from .data import Dataset
from .faults import Fault, FaultBase, describe
from .models import _loss, per_example_gradients

__all__ = ["Draws", "NoiseStream", "TrainResult", "add_noise", "bytes_per_model", "default_memory_bytes",
           "models_that_fit", "per_example_gradients", "resolve_device", "sample_draws", "train", "update"]


@dataclass(frozen=True)
class TrainResult:
    """What one call of :func:`train` produced, for R models.

    Attributes:
        params: final parameters, dict name -> (R, *shape).
        observations: (R, T, P) white-box projections ⟨p̂, u_t⟩·E|B|/C of every privatised
            update on each unit probe p̂ (in units of C: a clipped canary along p̂ adds 1 per
            draw, the noise adds N(0, σ²)); None without probes.
        update_norms: (R, T) ‖u_t‖·E|B|/C, the scale of each privatised update in units of C.
        batch_sizes: (R, T) realised number of draws per step (canary slots included).
        updates: (R, T, D) every privatised update u_t when ``record_updates``; else None.
        expected_batch_size: E|B|, the public normaliser.
        fault: name of the fault injected ("none" for the honest trainer).
        initial: (R, D) flat initial parameters θ_0 when ``keep_initial``; else None.
    """

    params: dict[str, Tensor]
    observations: Tensor | None
    update_norms: Tensor
    batch_sizes: Tensor
    updates: Tensor | None
    expected_batch_size: float
    fault: str
    initial: Tensor | None = None


def _stacked_per_example_gradients(model: nn.Module):
    # models on the outer axis, records on the inner one: params (R, ...), x (R, B, ...), y (R, B).
    # randomness="different": a dropout layer draws its own mask per record and model (from the
    # global generator: only dropout-free models are reproducible per model generator).
    inner = vmap(grad(_loss(model)), in_dims=(None, 0, 0), randomness="different")
    return vmap(inner, in_dims=(0, 0, 0), randomness="different")


def resolve_device(device: torch.device | str, flag: str = "device") -> torch.device:
    """``device`` as a torch.device, or InputError naming ``flag`` when it is unknown or not available here."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise InputError(f"{flag} must be 'cpu' or 'cuda' (optionally 'cuda:N'); got {device!r}") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise InputError(f"{flag} {device!r}: CUDA is not available on this machine (torch "
                             f"{torch.__version__}); use {flag} cpu")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise InputError(f"{flag} {device!r}: only {torch.cuda.device_count()} CUDA device(s) here")
    elif dev.type != "cpu":
        raise InputError(f"{flag} must be 'cpu' or 'cuda'; got {device!r}")
    return dev


def _generators(generator: torch.Generator | Sequence[torch.Generator] | None, n_models: int) -> list:
    if isinstance(generator, torch.Generator) or generator is None:
        return [generator] * n_models
    gens = list(generator)
    if len(gens) != n_models:
        raise InputError(f"generator must be one generator or a sequence of n_models={n_models}; got {len(gens)}")
    return gens


def train(
    spec: DPSGD,
    model: nn.Module,
    data: Dataset,
    *,
    clip_norm: float,
    learning_rate: float,
    n_models: int = 1,
    present: Tensor | None = None,
    gradient_canaries: Tensor | DiracCanaries | None = None,
    probes: Tensor | DiracCanaries | None = None,
    params: dict[str, Tensor] | None = None,
    init: _models.Init = _models.Init.DEFAULT,
    generator: torch.Generator | Sequence[torch.Generator] | None = None,
    fault: Fault | None = None,
    record_updates: bool = False,
    keep_initial: bool = False,
    progress: bool = False,
    closed_form: bool = True,
    device: torch.device | str | None = None,
) -> TrainResult:
    """Train R models with DP-SGD as ``spec`` describes (σ, sampling, T) and record what an adversary sees.

    The dataset has N = data.n + m records: the rows of ``data`` followed by m gradient-canary
    slots. A gradient canary is a record whose per-example gradient *is* the given vector
    (clipped to C like any other): the strongest, white-box threat model (Nasr et al. 2023).

    IMPORTANT: noise std is σ·C on the SUM of clipped gradients; the sum is divided by the
    expected batch size (q·N or b), never by the realised one.

    Args:
        spec: σ, sampling and T. For FixedSize, ``dataset_size`` ≥ the records present.
        model: architecture (see :mod:`attacks.models`).
        data: the natural records (canary records already appended for input-space canaries).
        clip_norm: C > 0.
        learning_rate: η > 0.
        n_models: R.
        present: (R, N) bool, which records exist in each model's dataset (default: all).
        gradient_canaries: (m, D) canary gradients, or :class:`attacks.canaries.DiracCanaries` (the
            sparse path: each canary's clipped contribution is added at its own coordinate, O(m) per
            step instead of an (m, D) matmul; the same numbers as the dense canaries), or None.
        probes: (P, D) directions whose projections of every update are recorded (white box), or
            :class:`attacks.canaries.DiracCanaries`: the unit vectors of their coordinates (the
            observations are read at those coordinates, no (P, D) tensor).
        params: initial parameters dict name -> (R, *shape); default: drawn by ``init``.
        init: initialisation when ``params`` is None.
        generator: one generator per model (reproducible per model), one shared generator, or None.
        fault: a fault from :mod:`attacks.faults`, or None for the honest algorithm.
        record_updates: keep every update u_t (R·T·D numbers).
        keep_initial: keep θ_0 (R·D numbers; the hidden-state adversary knows it).
        progress: show a tqdm bar over steps.
        closed_form: use the closed-form gradient norms and clipped sums of :mod:`attacks.ghost`
            for the models it knows (same gradients, fewer operations); False forces ``vmap(grad)``.
        device: where to train (e.g. "cuda"); None: the data's device. The data goes there once per
            call, and the result comes back to the data's device once at the end.

    Returns:
        :class:`TrainResult`.
    """
    if not isinstance(spec, DPSGD):
        raise InputTypeError(f"spec must be an accountants.DPSGD; got {type(spec).__name__}")
    check.positive(clip_norm=clip_norm, learning_rate=learning_rate)
    check.integer(1, None, n_models=n_models)
    describe(fault)  # validates the kind
    trainer = FaultBase() if fault is None else fault  # the honest hooks, or the fault's
    R, T, C, sigma = n_models, spec.steps, float(clip_norm), spec.noise_multiplier
    home, dtype = data.x.device, data.x.dtype
    dev = home if device is None else resolve_device(device)
    X, Y = data.x.to(dev), data.y.to(dev)
    n_data = data.n
    gens = _generators(generator, R)

    template, m, present = _checked_shapes(model, dtype, R, n_data, params, gradient_canaries, present, probes)
    D = _models.num_params(template)
    N = n_data + m
    expected = samplers.expected_batch_size(spec.sampling, N)
    plan = _models.init_plan(model, init, dtype) if params is None else None
    draws = sample_draws(trainer, spec.sampling, T, D, present, gens, plan, expected, n_data, m, dtype)
    if params is None:
        assert draws.theta0 is not None  # sample_draws draws θ_0 whenever it is given a plan
        theta = draws.theta0.to(dev)
    else:
        theta = _models.flatten(params).to(dtype).clone().to(dev)
    initial = theta.clone() if keep_initial else None
    idx_t, cnt_t = draws.idx.to(dev), draws.cnt.to(dev)
    batch_sizes = draws.batch_sizes.to(dev)  # (R, T) realised draws, canary slots included

    noise_std = trainer.noise_std(sigma * C)
    clip_to = trainer.clip_norm(C)  # None: no clipping

    canaries = None  # m > 0 gradient-canary slots: their draws (R, T, m), and what each adds when drawn
    if gradient_canaries is not None and draws.canary_counts is not None:  # both exactly when m > 0
        canaries = _CanarySum(gradient_canaries, draws.canary_counts.to(dev), clip_to, dev, dtype)
    probing = None  # with probes: the observations (R, T, P) they record
    if probes is not None:
        probing = _Probes(probes, R, T, dev, dtype)

    grads = _StepGradients(model, template, X, Y, R, max(draws.widths, default=0), closed_form)
    norms = torch.empty(R, T, dtype=dtype, device=dev)
    updates = torch.empty(R, T, D, dtype=dtype, device=dev) if record_updates else None

    noise = _noise_rows(draws.noise, dev)
    steps = tqdm(range(T), desc="DP-SGD steps", leave=False) if progress else range(T)
    for t in steps:
        z = next(noise)  # (R, D); a new block is drawn and transferred at its first step
        width = draws.widths[t]
        s = torch.zeros(R, D, dtype=dtype, device=dev)
        if width:
            s = grads.clipped_sum(theta, idx_t[:, t, :width], cnt_t[:, t, :width].to(dtype), clip_to)
        if canaries is not None:
            s = canaries.add(s, t)
        noisy = add_noise(s, noise_std, z)
        theta, u = update(trainer, theta, noisy, expected, batch_sizes[:, t], learning_rate)
        norms[:, t] = u.norm(dim=1) * (expected / C)
        if probing is not None:
            probing.record(u, t, expected / C)
        if updates is not None:
            updates[:, t] = u

    def back(t: Tensor) -> Tensor:  # one transfer per result tensor, after the loop
        return t.to(home)

    return TrainResult(
        params=_models.unflatten(back(theta), template),
        observations=None if probing is None else back(probing.obs),
        update_norms=back(norms),
        batch_sizes=back(batch_sizes),
        updates=None if updates is None else back(updates),
        expected_batch_size=float(expected),
        fault=describe(fault),
        initial=None if initial is None else back(initial),
    )


class _CanarySum:
    """The gradient canaries' part of each step's clipped sum: Σ_j (draws of canary j) · clip(g_j).

    Dense canaries (m, D): one (R, m) @ (m, D) matmul per step. :class:`DiracCanaries`: canary j adds
    its draws times its clipped norm at its own coordinate (``index_add_``; the same numbers, since
    clip(norm · e_c) = min(norm, C) · e_c and the coordinates are distinct).
    """

    def __init__(self, canaries: Tensor | DiracCanaries, counts: Tensor, clip_to: float | None,
                 dev: torch.device, dtype: torch.dtype) -> None:
        self.counts = counts  # (R, T, m)
        if isinstance(canaries, DiracCanaries):
            size = canaries.norm if clip_to is None else min(canaries.norm, clip_to)
            self.coords: Tensor | None = canaries.coordinates.to(dev)
            self.size = float(size)
            self.dense = None
        else:
            gc = canaries.to(device=dev, dtype=dtype)
            if clip_to is not None:
                gc = gc * torch.clamp(clip_to / gc.norm(dim=1, keepdim=True), max=1.0)
            self.coords, self.dense = None, gc

    def add(self, s: Tensor, t: Tensor | int) -> Tensor:
        """s (R, D) plus the canaries drawn at step t."""
        c = self.counts[:, t].to(s.dtype)
        if self.dense is not None:
            return s + c @ self.dense
        assert self.coords is not None
        return s.index_add_(1, self.coords, c, alpha=self.size)


class _Probes:
    """The white-box observations ⟨p̂, u_t⟩·E|B|/C of every update on each unit probe p̂: (R, T, P).

    Dense probes (P, D): one matmul per step; :class:`DiracCanaries`: p̂ = e_c, so the observation is
    the update's coordinate c (a gather, no (P, D) tensor).
    """

    def __init__(self, probes: Tensor | DiracCanaries, R: int, T: int, dev: torch.device,
                 dtype: torch.dtype) -> None:
        if isinstance(probes, DiracCanaries):
            self.coords: Tensor | None = probes.coordinates.to(dev)
            self.unit = None
            P = probes.m
        else:
            pr = probes.to(device=dev, dtype=dtype)
            self.coords, self.unit = None, pr / pr.norm(dim=1, keepdim=True)
            P = pr.shape[0]
        self.obs = torch.empty(R, T, P, dtype=dtype, device=dev)

    def record(self, u: Tensor, t: int, scale: float) -> None:
        """Store step t's observations of the updates u (R, D)."""
        if self.unit is not None:
            self.obs[:, t] = (u @ self.unit.T) * scale
        else:
            assert self.coords is not None
            self.obs[:, t] = u.index_select(1, self.coords) * scale


def _noise_rows(noise: NoiseStream, dev: torch.device) -> Iterator[Tensor]:
    """Every step's noise rows (R, D) in order, moved to ``dev`` a block of steps at a time (one
    transfer per block, drawn when its first step asks for it)."""
    T, block = noise.steps, noise.block_steps
    for t0 in range(0, T, block):
        rows = noise.rows(t0, min(T, t0 + block)).to(dev)
        for i in range(rows.shape[1]):
            yield rows[:, i]


def _checked_shapes(model: nn.Module, dtype: torch.dtype, R: int, n_data: int, params: dict[str, Tensor] | None,
                    gradient_canaries: Tensor | DiracCanaries | None, present: Tensor | None,
                    probes: Tensor | DiracCanaries | None) -> tuple[dict[str, Tensor], int, Tensor]:
    """The parameter template, the number m of gradient-canary slots and the (R, N) CPU
    ``present`` mask, after checking every shape against D and N = n_data + m."""
    if params is None:  # shapes only (zeros: no draw from any generator)
        template = _models.init_params(model, 1, init=_models.Init.ZEROS, dtype=dtype)
    else:
        template = params
        lead = {int(v.shape[0]) for v in params.values()}
        if lead != {R}:
            raise InputError(f"params must have a leading model axis of length n_models={R}; got {sorted(lead)}")
    D = _models.num_params(template)
    m = 0
    if isinstance(gradient_canaries, DiracCanaries):
        if gradient_canaries.dim != D:
            raise InputError(f"gradient_canaries must be Dirac canaries in R^D, D={D}; got dim {gradient_canaries.dim}")
        m = gradient_canaries.m
    elif gradient_canaries is not None:
        if gradient_canaries.ndim != 2 or gradient_canaries.shape[1] != D:
            raise InputError(f"gradient_canaries must have shape (m, D={D}); got {tuple(gradient_canaries.shape)}")
        m = gradient_canaries.shape[0]
    N = n_data + m
    if present is None:
        present = torch.ones(R, N, dtype=torch.bool)
    if present.device.type != "cpu":
        present = present.cpu()  # the samplers draw from CPU generators (once, before the loop)
    if present.shape != (R, N) or present.dtype != torch.bool:
        raise InputError(f"present must be a bool tensor of shape (n_models={R}, N={N}); got {tuple(present.shape)}")
    if isinstance(probes, DiracCanaries):
        if probes.dim != D:
            raise InputError(f"probes must be Dirac canaries in R^D, D={D}; got dim {probes.dim}")
    elif probes is not None and (probes.ndim != 2 or probes.shape[1] != D):
        raise InputError(f"probes must have shape (P, D={D}); got {tuple(probes.shape)}")
    return template, m, present


# ------------------------------------------------------------------------------ the stages of a step
#
# sample_draws (every model's initialisation, batches and noise stream, in that order per
# generator), _StepGradients.clipped_sum (per-example gradients and clipping), add_noise, update.


# The closed-form step runs this many bytes of gathered inputs at a time (a slice of models).
_SLICE_BYTES = 4 << 20

# Honest Poisson masks are indexed this many booleans (a group of models × T × N) at a time.
_MASK_GROUP_ELEMS = 1 << 22

# Noise rows are materialised this many numbers at a time (all models × a block of steps).
_NOISE_BLOCK_ELEMS = 1 << 22


class NoiseStream:
    """Row t of ``torch.randn(T, D, generator=g_r)`` for every model r, drawn a block of steps at a time.

    Holds each model's generator state at the start of its noise, not the R·T·D numbers. The CPU
    normal sampler fills the uniforms of a call in order and transforms them in independent
    blocks of 16, recomputing the last 16 values of a call from 16 further uniforms when the
    length is not a multiple of 16. Consecutive calls whose lengths are multiples of 16, then
    one call for the rest (at least 16 numbers), therefore give the same numbers as one call of
    length T·D (tests/attacks/test_dpsgd.py pins this for float32 and float64).
    """

    def __init__(self, gens: list[torch.Generator], steps: int, dim: int, dtype: torch.dtype) -> None:
        """``gens``: per model, a generator at the start of its noise (nothing else may draw from it)."""
        self.steps, self.dim, self.dtype = steps, dim, dtype
        self.block_steps = max(1, min(steps, _NOISE_BLOCK_ELEMS // max(1, len(gens) * dim)))
        self._gens = list(gens)
        self._drawn = [0] * len(gens)  # numbers drawn so far per model (a multiple of 16 until the last call)
        self._carry: list[Tensor] = [torch.empty(0, dtype=dtype) for _ in gens]  # drawn, not yet used

    def rows(self, t0: int, t1: int) -> Tensor:
        """Rows t0 ≤ t < t1 of every model's noise, (R, t1 − t0, D); blocks must be asked in order."""
        size, need = self.steps * self.dim, (t1 - t0) * self.dim
        out = torch.empty(len(self._gens), t1 - t0, self.dim, dtype=self.dtype)
        for r, g in enumerate(self._gens):
            have = self._carry[r]
            if have.numel() < need:
                n = -(-(t1 * self.dim) // 16) * 16
                if n > size - 16:  # the last call takes all the rest (its tail rule is the full call's)
                    n = size
                have = torch.cat([have, torch.randn(n - self._drawn[r], generator=g, dtype=self.dtype)])
                self._drawn[r] = n
            out[r] = have[:need].view(t1 - t0, self.dim)
            self._carry[r] = have[need:]
        return out


@dataclass(frozen=True)
class Draws:
    """What :func:`sample_draws` drew for R models and T steps (CPU tensors).

    Attributes:
        theta0: (R, D) initial parameters, or None when the caller gave them.
        idx, cnt: (R, T, W) record index and draw count of each model's j-th drawn natural record
            of step t (record order); padding is record 0 with count 0 (contributes exactly 0).
        widths: per step, the most natural records any model draws (the gather width).
        batch_sizes: (R, T) realised draws per step, canary slots included.
        canary_counts: (R, T, m) draws of the gradient-canary slots, or None without canaries.
        noise: each model's N(0, 1) noise stream of T rows of D numbers.
    """

    theta0: Tensor | None
    idx: Tensor
    cnt: Tensor
    widths: list[int]
    batch_sizes: Tensor
    canary_counts: Tensor | None
    noise: NoiseStream


def sample_draws(trainer, sampling, steps: int, dim: int, present: Tensor, gens: list, plan, expected: float,
                 n_data: int, m: int, dtype: torch.dtype) -> Draws:
    """Sampling stage: per model, in a fixed order from its generator, the initialisation (when
    ``plan`` is given), the batches of all T steps, then its noise (the rows are drawn later, a
    block at a time, with the numbers and the generator's end state of one ``randn(T, D)``).

    Every per-model result is written into a store allocated up front: small tensors kept per
    model between the samplers' large (T, N) temporaries fragment the heap (glibc's dynamic mmap
    threshold), which grew memory with models × steps although nothing of that size was kept.
    """
    T, D, R = steps, dim, len(gens)
    noise_gens: list[torch.Generator] = []
    # A model's own generator draws its noise later (nothing else draws from it). A generator
    # shared by models (or the global one) is copied at the noise start and advanced past the
    # noise exactly as one randn(T, D) would, so the next model's draws are unchanged.
    own = None not in gens and len({id(g) for g in gens}) == len(gens)
    scratch = None if own else torch.empty(T, D, dtype=dtype)
    n = present.shape[1]
    rate = min(1.0, expected / max(1, n))
    cap = max(1, min(n_data, int(expected + 6 * (n * rate * (1 - rate)) ** 0.5) + 1))  # widest plausible step
    idx = torch.zeros(R, T, cap, dtype=torch.int64)
    cnt = torch.zeros(R, T, cap, dtype=samplers.COUNT_DTYPE)
    k = torch.zeros(R, T, dtype=torch.int64)  # natural records drawn per step
    sizes = torch.zeros(R, T, dtype=torch.int64)
    can = torch.zeros(R, T, m, dtype=samplers.COUNT_DTYPE) if m else None
    theta0 = None
    # honest Poisson: the masks of a group of models are indexed together (one nonzero per group);
    # the draws, and their order per generator, are those of samplers.poisson
    fast = isinstance(sampling, Poisson) and type(trainer).batch_counts is FaultBase.batch_counts
    masks = torch.empty(max(1, min(R, _MASK_GROUP_ELEMS // max(1, T * n))), T, n, dtype=torch.bool) if fast else None
    everyone = bool(present.all()) if fast else False
    r0 = 0  # first model of the group in ``masks``
    for r, g in enumerate(gens):
        if plan is not None:  # the draws of models.init_params(model, 1, g), flattened
            flat = torch.cat([v.reshape(-1) for v in _models.draw_init(plan, g)])
            if theta0 is None:
                theta0 = torch.empty(R, flat.numel(), dtype=flat.dtype)
            theta0[r] = flat
        if masks is not None:  # fast
            mask = torch.lt(torch.rand(T, n, generator=g, dtype=torch.float64), sampling.rate, out=masks[r - r0])
            if not everyone:
                mask &= present[r]
        else:
            c = trainer.batch_counts(sampling, T, present[r], g, expected)  # (T, N)
        if own:
            noise_gens.append(g)
        else:
            copy = torch.Generator()
            copy.set_state((g if g is not None else torch.default_generator).get_state())
            noise_gens.append(copy)
            torch.randn(T, D, generator=g, dtype=dtype, out=scratch)
        if masks is not None:  # fast
            if r + 1 - r0 == masks.shape[0] or r + 1 == R:
                idx, cnt = _drawn_rows_group(masks[: r + 1 - r0], n_data, idx, cnt, k[r0 : r + 1], r0)
                sizes[r0 : r + 1] = masks[: r + 1 - r0].sum(dim=2, dtype=torch.int64)
                if can is not None:  # m > 0
                    can[r0 : r + 1] = masks[: r + 1 - r0, :, n_data:]
                r0 = r + 1
            continue
        need = _drawn_rows(c[:, :n_data], idx[r], cnt[r], k[r])  # the (T, N) counts are not kept
        if need > idx.shape[2]:  # wider than planned (rare): grow the stores and redo this model's rows
            idx, cnt = _grown(idx, cnt, need)
            _drawn_rows(c[:, :n_data], idx[r], cnt[r], k[r])
        sizes[r] = c.sum(dim=1, dtype=torch.int64)
        if can is not None:  # m > 0
            can[r] = c[:, n_data:]
    widths = k.amax(dim=0).tolist()
    W = max(widths, default=0)
    return Draws(
        theta0=theta0,
        idx=idx[:, :, :W].contiguous(),
        cnt=cnt[:, :, :W].contiguous(),
        widths=widths,
        batch_sizes=sizes,
        canary_counts=can,
        noise=NoiseStream(noise_gens, T, D, dtype),
    )


def _grown(idx: Tensor, cnt: Tensor, width: int) -> tuple[Tensor, Tensor]:
    """The (R, T, W) stores widened to ``width`` with padding (record 0, count 0)."""
    R, T, W = idx.shape
    return (torch.cat([idx, torch.zeros(R, T, width - W, dtype=idx.dtype)], dim=2),
            torch.cat([cnt, torch.zeros(R, T, width - W, dtype=cnt.dtype)], dim=2))


def _drawn_rows_group(mask: Tensor, n_data: int, idx: Tensor, cnt: Tensor, per_step: Tensor,
                      r0: int) -> tuple[Tensor, Tensor]:
    """:func:`_drawn_rows` for the (G, T, N) Poisson masks of the models r0 ≤ r < r0 + G, in one
    nonzero; ``per_step`` (G, T) receives their records drawn per step. Returns the stores
    (widened when a model needs it)."""
    G, T = mask.shape[:2]
    ti = torch.nonzero(mask[:, :, :n_data])  # row-major: by model, then step, records ascending
    key = ti[:, 0] * T + ti[:, 1]
    per = torch.bincount(key, minlength=G * T)
    per_step.copy_(per.view(G, T))
    width = int(per.max()) if per.numel() else 0
    if width > idx.shape[2]:  # wider than planned (rare)
        idx, cnt = _grown(idx, cnt, width)
    if ti.shape[0]:
        j = torch.arange(ti.shape[0]) - (per.cumsum(0) - per).index_select(0, key)
        idx[ti[:, 0] + r0, ti[:, 1], j] = ti[:, 2]
        cnt[ti[:, 0] + r0, ti[:, 1], j] = 1
    return idx, cnt


def _drawn_rows(c: Tensor, idx: Tensor, cnt: Tensor, per_step: Tensor) -> int:
    """One model's drawn natural records of every step, in record order, written into ``idx`` and
    ``cnt`` (T, W) (padding: record 0, count 0) when they fit, and the number drawn per step into
    ``per_step`` (T,). Returns the width this model needs."""
    ti = torch.nonzero(c)  # row-major: grouped by step, records ascending
    per_step.copy_(torch.bincount(ti[:, 0], minlength=c.shape[0]))
    width = int(per_step.max()) if per_step.numel() else 0
    if ti.shape[0] and width <= idx.shape[1]:
        # position j within its step: rank − the step's first rank
        start = per_step.cumsum(0) - per_step
        j = torch.arange(ti.shape[0]) - start.index_select(0, ti[:, 0])
        idx[ti[:, 0], j] = ti[:, 1]
        cnt[ti[:, 0], j] = c[ti[:, 0], ti[:, 1]]
    return width


class _StepGradients:
    """Per-example gradients and clipping stage: the clipped (weighted) gradient sum of a step."""

    def __init__(self, model: nn.Module, template: dict[str, Tensor], X: Tensor, Y: Tensor, R: int, width: int,
                 closed_form: bool) -> None:
        self.template, self.X, self.Y, self.R = template, X, Y, R
        self.ghost = _ghost.for_model(model) if closed_form else None
        self.per_ex = _stacked_per_example_gradients(model)
        # the gathered inputs of a step, into a buffer allocated once: a fresh R·B·F tensor every
        # step costs page faults (~8× the copy)
        self.xbuf = torch.empty((R * width, *X.shape[1:]), dtype=X.dtype, device=X.device)

    def clipped_sum(self, theta: Tensor, idx: Tensor, w: Tensor, clip_to: float | None) -> Tensor:
        """Σ_i w_i·min(1, C/‖g_i‖)·g_i for each model: (R, D). idx, w: (R, B) records and draw
        counts (0 on padding); ``clip_to`` None: no clipping.

        The closed form runs a slice of models at a time (gathered inputs ≤ ``_SLICE_BYTES``), so a
        slice's inputs and temporaries stay in cache from the forward pass to the weighted sum. Every
        model's numbers are computed by the same per-model kernels either way (the batched matmuls
        loop over models), so the result is bit-identical to one call over all R models.
        """
        R, width, X = self.R, idx.shape[1], self.X
        theta_d = _models.unflatten(theta, self.template)
        if self.ghost is None:
            xb = torch.index_select(X, 0, idx.reshape(-1), out=self.xbuf[: R * width]).view(R, width, *X.shape[1:])
            grads = self.per_ex(theta_d, xb, self.Y[idx])
            flat = [v.reshape(R, width, -1) for v in grads.values()]
            sq = functools.reduce(operator.add, (torch.einsum("rbk,rbk->rb", f, f) for f in flat))
            if clip_to is not None:
                w = w * torch.clamp(clip_to / sq.sqrt(), max=1.0)  # norm 0 -> inf -> 1
            return torch.cat([torch.einsum("rb,rbk->rk", w, f) for f in flat], dim=1)
        ghost = self.ghost
        rows = max(1, _SLICE_BYTES // max(1, width * X[0].numel() * X.element_size()))
        out = torch.empty(R, theta.shape[1], dtype=theta.dtype, device=theta.device)
        for i in range(0, R, rows):
            j = min(R, i + rows)
            out[i:j] = self._ghost_slice(ghost, {k: v[i:j] for k, v in theta_d.items()}, idx[i:j], w[i:j], clip_to)
        return out

    def _ghost_slice(self, ghost: _ghost.GhostFn, theta_d: dict[str, Tensor], idx: Tensor, w: Tensor,
                     clip_to: float | None) -> Tensor:
        """The closed-form clipped sum of a slice of models: (r, D)."""
        r, width, X = idx.shape[0], idx.shape[1], self.X
        xb = torch.index_select(X, 0, idx.reshape(-1), out=self.xbuf[: r * width]).view(r, width, *X.shape[1:])
        sq, weighted_sum = ghost(theta_d, xb, self.Y[idx])
        if clip_to is not None:
            w = w * torch.clamp(clip_to / sq.sqrt(), max=1.0)  # norm 0 -> inf -> 1
        sums = weighted_sum(w)
        return torch.cat([sums[k].reshape(r, -1) for k in self.template], dim=1)


def add_noise(s: Tensor, noise_std: float, z: Tensor) -> Tensor:
    """Noise stage: s + σC·z for the clipped sums s (R, D) and standard normal rows z (R, D)."""
    return s + noise_std * z


def update(trainer, theta: Tensor, noisy: Tensor, expected: float, batch_sizes: Tensor,
           learning_rate: float) -> tuple[Tensor, Tensor]:
    """Update stage: u = noisy / E|B| (or the fault's normaliser), θ ← θ − η·u; returns (θ, u)."""
    u = trainer.normalise(noisy, expected, batch_sizes)
    return theta - learning_rate * u, u


# ----------------------------------------------------------------------------------- memory budget


def _activation_numel(model: nn.Module, x: Tensor) -> int:
    """Numbers every leaf module outputs for one example (forward hooks on a single forward pass)."""
    total = [0]

    def hook(_mod, _inp, out):
        if isinstance(out, Tensor):
            total[0] += out.numel()

    leaves = [mod for mod in model.modules() if not list(mod.children())]
    handles = [mod.register_forward_hook(hook) for mod in leaves]
    try:
        p = {k: v[0] for k, v in _models.init_params(model, 1, init=_models.Init.ZEROS, dtype=x.dtype).items()}
        with torch.no_grad():
            functional_call(model, p, (x[:1].cpu(),))
    finally:
        for h in handles:
            h.remove()
    return total[0]


def bytes_per_model(spec: DPSGD, model: nn.Module, data: Dataset, *, m: int = 0, probes: int = 0,
                    record_updates: bool = False, closed_form: bool = True) -> int:
    """An upper estimate of the memory :func:`train` takes per model (bytes).

    Counts what scales with the number of models R: the T×N draw counts (one model's at a time
    since the drawn records are indexed up front: kept as a margin), the T×B index and counts of
    the drawn records, the noise rows of the current block (:class:`NoiseStream`: all models'
    blocks together stay under ``_NOISE_BLOCK_ELEMS`` numbers, at least one step, so two rows
    of D per model is the margin), the per-example gradients of a step (width
    B × D, three live copies while clipping and summing; the closed form of :mod:`attacks.ghost`
    needs less), the activations of B examples (three copies: forward, saved for backward, gradient),
    the gathered inputs, the recorded statistics, and a 1.5× margin for allocator slack. B is the
    widest batch a step can plausibly draw: b for fixed size, qN + 6·sd for Poisson.

    With ``closed_form`` (as :func:`train`) and a model :mod:`attacks.ghost` knows, no B × D
    gradient tensor exists: one copy of B × (D + A) numbers is counted instead of three of each
    (an upper bound on the per-example errors, activations and conv weight gradients it keeps per
    model; its other temporaries are per slice of models, a few ``_SLICE_BYTES``, not per model).
    Measured peak-RSS growth per model (1 → 16 models, one step, 1,797 digits, q = 0.5; docs/scale.md):
    logistic regression 0.3 MB, MLP (hidden 32) 1.0 MB, CNN (8 channels) 3.2 MB.

    Args:
        spec: σ, sampling, T. model, data: as for :func:`train`. m: gradient-canary slots.
        probes: white-box probes. record_updates: whether every update is kept.
        closed_form: as for :func:`train` (False: the ``vmap(grad)`` path's three copies).
    """
    s = data.x.element_size()
    T = spec.steps
    N = data.n + m
    D = _models.num_params(_models.init_params(model, 1, init=_models.Init.ZEROS, dtype=data.x.dtype))
    e = samplers.expected_batch_size(spec.sampling, N)
    rate = e / N
    B = min(N, int(e + 6 * (N * rate * (1 - rate)) ** 0.5) + 1)
    example = torch.zeros((1, *data.x.shape[1:]), dtype=data.x.dtype)  # data may hold no natural record (crafted)
    F_ = int(example.numel())
    A = _activation_numel(model, example)
    total = (T * N * samplers.COUNT_DTYPE.itemsize + 2 * D * s + 4 * D * s  # counts, noise rows, θ and update
             + T * B * (8 + samplers.COUNT_DTYPE.itemsize)  # drawn-record index and count of every step
             + (B * (D + A) * s if closed_form and _ghost.for_model(model) is not None
                else 3 * B * D * s + 3 * B * A * s)  # per-example gradients and activations
             + B * F_ * s  # gathered inputs
             + T * (probes + 1) * s + (T * D * s if record_updates else 0))
    return int(1.5 * total)


def default_memory_bytes(device: torch.device | str = "cpu") -> int:
    """A safe share of the machine for one chunk: ¼ of physical memory (CPU), ½ of a GPU's memory."""
    device = torch.device(device)
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).total_memory // 2)
    import os

    try:
        phys = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        phys = 8 << 30
    return int(phys // 4)


def models_that_fit(budget_bytes: int, per_model_bytes: int, *, cap: int | None = None) -> int:
    """How many models to train at once within ``budget_bytes`` (at least 1, at most ``cap``)."""
    check.integer(1, None, budget_bytes=budget_bytes, per_model_bytes=per_model_bytes)
    k = max(1, budget_bytes // per_model_bytes)
    return int(k if cap is None else min(cap, k))
