"""Replay a reproducible white-box trainer on the same seed to isolate one record's exact contribution.

The half of the replay check (issue 25; as dp-recorder / Re:cord-play, PETS 2026, does for DP libraries)
that runs the user's trainer; :mod:`audit.replay` tests what it measures.

With the same seed and the same dataset every random draw of a trainer is the same (the same batch,
the same noise), so two runs that differ only in the gradient the white-box hook hands out at step 1
(``audit.canary_gradient``) differ by the post-processed image of that gradient's clipped
contribution, the noise cancelling exactly. The hook hands out, per replay seed,

- ``zero``: a zero gradient at every step (the batch has the same count of examples in every run);
- ``probe``: at step 1 the conformance probe −1000·(‖S‖ + C)·(Ŝ + 0.1·Σ_l ê_l/√L) of
  :class:`attacks.conformance_record.ProbeHook` (S the natural records' summed gradient at θ_0), then zero;
- ``+v``/``−v`` (the first seed only): a small gradient ±(C/10)·(the probe's unit direction), for the
  C-unit calibration in words (never the verdict).

What is kept per seed (:class:`SeedReplay`, from :func:`observe`): Δ = u_1(probe) − u_1(zero) as its squared norm,
u_1 the first update (``audit.record_update``'s first entry, else θ_0 − θ_1); R, the coordinates no
natural record's gradient reaches at θ_0 (cross-entropy with random positive weights, so no cancellation;
dead input features give dead first-layer weights) nor the probe; ss = ‖u_1(zero)[R]‖² (noise only, in the
update's units) ‖u_1(zero)[R]‖₁ and df = |R|; ‖Δ[R]‖² (zero exactly when the noise cancels). Two gates come first, and
either makes the check "not applicable", never a failure: the same seed run twice gives the same updates
(``reproducible``), and Δ vanishes on R (``aligned``: the trainer's draws do not depend on the value of the
handed gradient).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from . import conformance_record as cr
from . import plugin
from .games import trial_seed

__all__ = ["REPLAY_SEEDS", "Calibration", "ReplayHook", "ReplayObservation", "SeedReplay", "observe"]

REPLAY_SEEDS = 16  # seeds replayed (two runs each, plus one reproducibility run and the ±v pair)
_STREAM_REPLAY = 6  # the replay's trainer seeds (plugin's streams are 0-5)
SMALL = 0.1  # ‖v‖ = SMALL·C: the calibration probe, unclipped by any clipping at C
REPRO_TOL = 1e-6  # relative: two runs with the same seed and inputs agree to this (float round-off is ~1e-7)


@dataclass(frozen=True)
class SeedReplay:
    """One replayed seed: ‖Δ‖², ‖Δ[R]‖², ss = ‖u_1(zero)[R]‖², ‖u_1(zero)[R]‖₁, |R| and ‖probe‖/C."""

    d2: float
    d2_ref: float
    ss: float
    abs_sum: float
    df: int
    handed: float


@dataclass(frozen=True)
class Calibration:
    """The small probe ±v (‖v‖ = ``v``·C): ‖Δ(+v)‖ and ‖Δ(+v) + Δ(−v)‖/‖Δ(+v)‖ (0 for a linear map)."""

    dv: float
    affine: float
    v: float


@dataclass(frozen=True)
class ReplayObservation:
    """What :func:`observe` measured, or why it could not (``skip``; ``reproducible`` False when that is why)."""

    skip: str | None
    reproducible: bool | None = None
    seeds: tuple[SeedReplay, ...] = ()
    calibration: Calibration | None = None


class ReplayHook(cr.ProbeHook):
    """The replay's white-box hook payload: a zero gradient at every step, except at step 1 the probe
    (``mode = "probe"``) or ±(C/10)·its unit direction (``"+v"``, ``"-v"``). The gradient is appended by the
    trainer as one more per-example gradient (audit.canary_gradient), so its clipping, sum and noise process it."""

    def __init__(self, template: nn.Module, x: Tensor, y: Tensor, clip_norm: float, mode: str) -> None:
        super().__init__(template, x, y, clip_norm, torch.Generator().manual_seed(0))
        self.mode = mode
        self.handed: Tensor | None = None  # the step-1 gradient handed out (flat, float64)

    def gradient(self, params: list[Tensor], step: int) -> list[Tensor] | None:
        self.steps.append(step)
        zero = [torch.zeros_like(p).detach() for p in params]
        if step != 0 or self.mode == "zero":
            return zero
        s = self._natural_gradient(params)
        if s is None:
            return zero
        norms = [float(v.norm()) for v in s]
        total, live = math.sqrt(sum(v * v for v in norms)), sum(v > 0 for v in norms)
        d = [-(v / total + cr.PROBE_EPS * v / max(nv, 1e-300) / math.sqrt(live)) for v, nv in zip(s, norms,
                                                                                                   strict=True)]
        scale = cr.PROBE_SCALE * (total + self._c)
        if self.mode != "probe":
            unit = math.sqrt(sum(float((t * t).sum()) for t in d))
            scale = (1.0 if self.mode == "+v" else -1.0) * SMALL * self._c / unit
        out = [scale * t for t in d]
        self.handed = torch.cat([t.reshape(-1) for t in out])
        return [t.to(p.device, p.dtype).detach() for t, p in zip(out, params, strict=True)]


def _run(fn: Callable, ctx: plugin.Context, template: nn.Module, x: Tensor, y: Tensor, seed: int,
         mode: str) -> tuple[Tensor, Tensor, ReplayHook]:
    """One replay: (θ_0, u_1, the hook). Raises TrainerError (the trainer's own failure) or ValueError (the hook
    was not used as the protocol asks)."""
    hook = ReplayHook(template, x, y, ctx.clip_norm, mode)
    wb = plugin.WhiteBoxAudit(None, False, None, ctx.clip_norm, torch.Generator().manual_seed(0))
    wb.probe = hook
    name = plugin.trainer_name(ctx.trainer)
    with plugin._deadline(ctx.timeout, name, -1), plugin._user_code(f"trainer {name!r} on a replay"):
        fn(x.clone(), y.clone(), seed=seed, audit=wb)
    if len(wb.trace) < 2 or not hook.steps:
        raise ValueError("the trainer records fewer than two parameter vectors or never calls audit.canary_gradient")
    if hook.disabled is not None:
        raise ValueError(hook.disabled)
    u = (torch.cat([t.reshape(-1) for t in wb.updates[0]]) if wb.updates else wb.trace[0] - wb.trace[1])
    return wb.trace[0], u.to(torch.float64), hook


def _reference(template: nn.Module, theta0: Tensor, x: Tensor, y: Tensor, probe: Tensor | None) -> Tensor:
    """R: the coordinates no natural record's gradient reaches at θ_0 (random positive weights: no cancellation),
    nor the probe."""
    named = list(template.named_parameters())
    xi = 0.5 + torch.rand(x.shape[0], generator=torch.Generator().manual_seed(0))
    dead = cr._flat_grad(template, named, theta0, x, y, xi) == 0
    if probe is not None:
        dead &= probe == 0
    return dead


def observe(ctx: plugin.Context, seeds: int = REPLAY_SEEDS) -> ReplayObservation:
    """The replay's measurements on ``ctx``'s trainer and data (module doc), or the reason it has none.

    Deterministic in ``ctx.seed``: seed j of the trainer is ``trial_seed(ctx.seed, j, 6)``.
    """
    fn = plugin._trainer_of(ctx)
    template, why = plugin._template(ctx, fn)
    if template is None:
        return ReplayObservation(why or "no template model")
    x, y = ctx.data.x.to(torch.float32), ctx.data.y
    dim = sum(p.numel() for p in template.parameters())
    per: list[SeedReplay] = []
    calib: Calibration | None = None
    try:
        for j in range(seeds):
            s = trial_seed(ctx.seed, j, _STREAM_REPLAY)
            th0, u0, _ = _run(fn, ctx, template, x, y, s, "zero")
            if th0.numel() != dim:
                return ReplayObservation(f"the recorded parameters ({th0.numel()} numbers) are not the model's ({dim})")
            if j == 0:
                _, again, _ = _run(fn, ctx, template, x, y, s, "zero")
                gap = float((again - u0).norm())
                if not gap <= REPRO_TOL * float(u0.norm()):
                    return ReplayObservation(f"not reproducible: the same seed and data gave first updates {gap:.3g} "
                                             f"apart (norm {float(u0.norm()):.3g}): replay not applicable", False)
            th1, u1, hook = _run(fn, ctx, template, x, y, s, "probe")
            if hook.handed is None:
                continue  # no natural gradient at θ_0: nothing to probe at this seed
            if float((th1 - th0).norm()) != 0.0:
                return ReplayObservation("the same seed gave a different θ_0 in two runs: replay not applicable", False)
            dead = _reference(template, th0, x, y, hook.handed)
            d = u1 - u0
            ref = u0[dead]
            per.append(SeedReplay(float(d @ d), float(d[dead] @ d[dead]), float(ref @ ref), float(ref.abs().sum()),
                                  int(dead.sum()), float(hook.handed.norm()) / ctx.clip_norm))
            if calib is None:
                _, up, _ = _run(fn, ctx, template, x, y, s, "+v")
                _, um, _ = _run(fn, ctx, template, x, y, s, "-v")
                dp, dm = up - u0, um - u0
                calib = Calibration(float(dp.norm()), float((dp + dm).norm()) / max(float(dp.norm()), 1e-300), SMALL)
    except (ValueError, plugin.TrainerError) as exc:  # never a verdict: the game's trials report a broken trainer
        return ReplayObservation(f"the replay cannot run: {exc}")
    if not per:
        return ReplayObservation("no seed had a natural gradient at θ_0 to probe")
    return ReplayObservation(None, True, tuple(per), calib)
