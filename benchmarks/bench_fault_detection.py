"""Fault-detection study: which audit design catches which DP-SGD implementation bug, at how many trials.

A zoo of user trainers (attacks/plugin.py protocol), each the hand-written trainer of
examples/own_training/torch_trainer.py with ONE plausible bug, plus the correct torch and Opacus
trainers. Every trainer is audited with every design dpaudit offers for a user trainer (canary ×
threat model × score) under one claim: σ = 3, Poisson q = 0.5, 10 steps, C = 1, 100 digits records,
δ = 1e-5 (ε_pld ≤ 2.37).

Statistics (docs/fault-detection.md). A design *catches* a bug in one audit when the violation test
(a 95 % Clopper–Pearson box entirely below the claim's tight trade-off curve) fires on the audit's
first N trials. N = 2,000 is the primary, pre-registered sample size; the N = 500 and N = 1,000
columns are separate fixed-N audits on the same trials, each a 95 % test on its own, reported for
cost only (never "the first checkpoint that fired", which would be a sequential test with inflated
false alarms). Each (trainer, design) is audited with several seeds; the catch RATE over seeds is
reported. The false-alarm rate of the recommended designs on the correct trainers is measured over
many seeded audits, with its Clopper–Pearson 95 % upper bound.

Two designs, once diagnostics, are now offered (issue 13 §4):

- ``wb_dirac_spread``: the Dirac hook scored by ``step_spread``, the spread of the canary
  coordinate's per-step updates instead of their sum: sees noise reused across steps;
- ``bb_mean_image_loss`` / ``wb_mean_image_ip``: the ``mean_image`` canary, x = 0 in model space (the
  data's mean image): its gradient lies in the bias alone, so the audit reads the bias only.

One design is a diagnostic that dpaudit does not offer (marked ``diag``): it answers "could any
design catch this bug?" for the bug no offered design reaches:

- ``diag_wb_opposing``: a crafted gradient canary of norm 1,000·C pointing against the data's mean
  gradient at the current parameters, scored by the update's projection on that direction: the
  worst case of clipping the summed gradient (sensitivity 2C, not C).

No peer library runs a user's training function in a multi-run DP-SGD audit (docs/own-training.md),
so there is no side-by-side ratio; the figure of merit is the catch table itself.

    PYTHONPATH=. python benchmarks/bench_fault_detection.py study --out /tmp/fault.jsonl --workers 2
    PYTHONPATH=. python benchmarks/bench_fault_detection.py false-alarm --out /tmp/fa.jsonl --audits 100
    PYTHONPATH=. python benchmarks/bench_fault_detection.py sensitivity
    PYTHONPATH=. python benchmarks/bench_fault_detection.py reach
    PYTHONPATH=. python benchmarks/bench_fault_detection.py table /tmp/fault.jsonl /tmp/fa.jsonl
    PYTHONPATH=. python benchmarks/bench_fault_detection.py conformance --out /tmp/conf.jsonl --workers 2
    PYTHONPATH=. python benchmarks/bench_fault_detection.py conformance-table /tmp/conf.jsonl

``sequential`` runs the black-box default's two audits (blank, scored by the final parameters' projection, and mean
image, by its loss; each at 2.5 %) with the
sequential test of issue 25 (audit/statistics/sequential.py, ceiling 20,000 trials) and records the trials
each spent and why it stopped; ``sequential-null`` simulates the test without training (the claimed
mechanism's own scores: its false alarms at the null's boundary, its power on a sensitivity k·C leak).

    PYTHONPATH=. python benchmarks/bench_fault_detection.py sequential --out /tmp/seq.jsonl --seeds 5
    PYTHONPATH=. python benchmarks/bench_fault_detection.py sequential-table /tmp/seq.jsonl
    PYTHONPATH=. python benchmarks/bench_fault_detection.py sequential-null --reps 400
    PYTHONPATH=. python benchmarks/bench_fault_detection.py reach-ceiling /tmp/seq.jsonl --reps 40
    PYTHONPATH=. python benchmarks/bench_fault_detection.py final-view --reps 40
    PYTHONPATH=. python benchmarks/bench_fault_detection.py ceiling-tests

``ceiling-tests`` compares, at the ceiling look alone, the box test each look once ran with the exact threshold test
each look runs now (audit/statistics/threshold_test.py), on the optimal attack's scores of ``mask_once`` and the claim.

``final-view`` plays each bug's final-model view (``FINAL_VIEW``: the canary's summed shift along its direction against
the final model's noise, a linear-update idealisation) through the same sequential test: which bugs a final-model
score could catch at the ceiling.

``reach-ceiling`` answers "which bugs does the 20,000-trial ceiling allow a black-box audit to catch?": each bug's
worst-case mechanism (``worst_case``: a sound upper bound on the transcript's leak, which bounds every black-box
view by post-processing), the optimal attack on it played through the same sequential test, and the measured
black-box result from ``sequential``'s JSONL.

``conformance`` runs the white-box default's third audit (issue 25, audit/conformance.py): the
dead_feature canary on the audit's own smaller dataset (``conformance.natural_records``: 40 records at
q = 0.5; ``conformance_record.copied_records``: 31 copies of record 0 and one record of each other class),
its ε audit and its premise tests at the default's levels, on every trainer of the zoo (17 bugs, 15
correct trainers: hand-written, Opacus, momentum, Adam, AdamW, RMSprop and Nesterov momentum each with and
without ``audit.record_update``, a seeded random start, an L2 term in each example's loss, Adam with β1 = 0 and a
large ε). Three bugs sit on an optimizer with state: noise added to the parameters after a momentum or RMSprop step
(the state carries noise-free sums), and AdamW after clipping the summed gradient.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "examples" / "own_training"))

import accountants as acc  # noqa: E402
from accountants.tradeoff import PiecewiseLinearTradeOff  # noqa: E402
from attacks import canaries, data, plugin  # noqa: E402
from audit import comparator  # noqa: E402
from audit.config import BLACK_BOX_FUTILITY_Z  # noqa: E402
from audit.conformance import natural_records  # noqa: E402

SIGMA, Q, STEPS, C, LR, B = 3.0, 0.5, 10, 1.0, 0.5, 50
DELTA = 1e-5
CHECKPOINTS = (500, 1000, 2000)
SIGNIFICANCE = 0.05  # compare_membership's default
# The recommended default for a user trainer (audit.config.RECOMMENDED_VARIANTS): two audits, each at half the
# significance; it catches a bug when either fires.
DEFAULTS = {"default_wb": ("wb_blank_ip", "wb_mean_image_ip"), "default_bb": ("bb_blank_loss", "bb_mean_image_loss")}

BUGS = {
    "correct": "no bug (hand-written reference)",
    "noise_reused": "one noise draw reused at every step",
    "clip_sum": "the summed batch gradient is clipped to C, not each example",
    "per_layer_clip": "weight and bias clipped to C each (total norm up to √2·C)",
    "noise_missing_bias": "no noise on the bias (noise on the weight only)",
    "mean_times_batch": "clipped sum averaged over the batch size drawn |B_t|, noised, multiplied back by B",
    "mask_once": "data loader: the Poisson mask is drawn once and reused at every step",
    "shuffled_batches": "data loader: a shuffled partition into 2 batches per epoch instead of Poisson sampling",
    "noise_div_batch_twice": "noise std divided by the batch size twice (σC/B on the sum)",
    "float16_clip": "per-example norms computed in float16",
    # added for the conformance tests (issue 25), each from a real report
    "realised_batch_norm": "noisy sum divided by the realised batch size |B_t| (opacus#571, #819)",
    "opacus_rate": "sample rate derived as 1/len(loader) and expected batch int(N·q) from the data given "
                   "(make_private with one canary more: q = 1/3, B = 33 instead of 1/2, 50)",
    "ceil_batch": "expected batch size computed from the data given, ceil(N·q) (51 with the canary, 50 without)",
    "accum_clip_sum": "gradient accumulation over 2 micro-batches that clips the accumulated sum, not each example",
    "noise_every_other_step": "noise added at even steps only",
    "no_clipping": "per-example clipping skipped (grad_sample missing, so nothing is clipped)",
    # correct trainers with state
    "momentum_correct": "correct DP-SGD with heavy-ball momentum 0.9; records its privatised gradient",
    "momentum_norecord": "correct DP-SGD with heavy-ball momentum 0.9; does not call audit.record_update",
    "adam_correct": "correct DP-Adam (Adam, lr 0.05, betas 0.9/0.999, eps 1e-8, on the privatised gradient); records "
                    "its privatised gradient",
    "adam_norecord": "correct DP-Adam (as adam_correct); does not call audit.record_update",
    # a correct trainer with a random start (θ_0 differs per trial: the step-1 directions do too)
    "random_init_correct": "correct DP-SGD from a seeded random start N(0, 0.1²) per parameter",
    # more optimizers with state, each on the privatised gradient (post-processing), as torch.optim computes them
    "rmsprop_correct": "correct DP-RMSprop (torch.optim.RMSprop: lr 0.01, alpha 0.99, eps 1e-8); records its "
                       "privatised gradient",
    "rmsprop_norecord": "correct DP-RMSprop (as rmsprop_correct); does not call audit.record_update",
    "adamw_correct": "correct DP-AdamW (torch.optim.AdamW: lr 0.05, betas 0.9/0.999, eps 1e-8, decoupled weight "
                     "decay 0.01); records its privatised gradient",
    "adamw_norecord": "correct DP-AdamW (as adamw_correct); does not call audit.record_update",
    "nesterov_correct": "correct DP-SGD with Nesterov momentum 0.9 and weight decay 5e-4 added by the optimizer "
                        "(torch.optim.SGD); records its privatised gradient",
    "nesterov_norecord": "correct DP-SGD with Nesterov momentum (as nesterov_correct); does not call "
                         "audit.record_update",
    "l2_example_correct": "correct DP-SGD whose per-example loss carries an L2 term 0.01/2·|θ|² (its gradient "
                          "0.01·θ added to every example's gradient before clipping, as per-sample autograd gives)",
    # a correct DP-Adam that the θ-difference reading models worst (issue 25): β1 = 0 (no first-moment state, so the
    # state gate may miss it) and ε equal to the per-coordinate noise std of the gradient it is handed (step 1 a soft
    # sign, between the linear map and the sign); no audit.record_update
    "adam_eps_norecord": "correct DP-Adam with beta1 = 0, beta2 0.999 and eps = 2·sigma·C/B (twice the noise std per "
                         "coordinate of the gradient it steps on); does not call audit.record_update",
    # real bugs on top of an optimizer with state
    "momentum_noise_after": "heavy-ball momentum 0.9 on the clipped (noise-free) sum; the noise, std lr·sigma·C/B, "
                            "added to the parameters after the step (the momentum buffer never sees the noise)",
    "adamw_clip_sum": "AdamW after clip_grad_norm_(C) on the summed batch gradient (not each example), noise on; "
                      "does not call audit.record_update",
    "rmsprop_noise_after": "RMSprop on the clipped (noise-free) mean gradient; the noise, std lr·sigma·C/B, added to "
                           "the parameters after the step (its second moment never sees the noise)",
}
CORRECT = ("correct", "opacus_correct", "momentum_correct", "momentum_norecord", "adam_correct", "adam_norecord",
           "random_init_correct", "rmsprop_correct", "rmsprop_norecord", "adamw_correct", "adamw_norecord",
           "nesterov_correct", "nesterov_norecord", "l2_example_correct", "adam_eps_norecord")
ADAM_LR, ADAM_BETAS, ADAM_EPS = 0.05, (0.9, 0.999), 1e-8
RMSPROP_LR, RMSPROP_ALPHA = 0.01, 0.99
ADAMW_DECAY, NESTEROV_DECAY, L2_EXAMPLE = 0.01, 5e-4, 0.01
# adam_eps_norecord's ε in units of the noise std σC/B: 2 puts step 1's mean |u| / rms u on R at 0.87, under the replay
# check's shape gate (0.9; 1 gives 0.90, the sign 1.00, the linear map 0.80)
ADAM_EPS_NOISE = 2.0


class Trainer:
    """The hand-written DP-SGD of examples/own_training/torch_trainer.py with one bug switched on."""

    def __init__(self, bug: str) -> None:
        if bug not in BUGS:
            raise ValueError(f"bug must be one of {sorted(BUGS)}; got {bug!r}")
        self.bug = bug
        self.__qualname__ = f"Trainer[{bug}]"

    def __call__(self, x: torch.Tensor, y: torch.Tensor, *, seed: int, audit=None) -> torch.nn.Module:
        bug = self.bug
        g = torch.Generator().manual_seed(seed)
        model = torch.nn.Linear(x.shape[1], 10)
        w, b = torch.zeros_like(model.weight.detach()), torch.zeros_like(model.bias.detach())
        if bug == "random_init_correct":
            w, b = 0.1 * torch.randn(w.shape, generator=g), 0.1 * torch.randn(b.shape, generator=g)
        n = x.shape[0]
        if audit is not None:
            audit.record([w, b])
        reused = mask0 = order = vel = None
        opt = _optimizer(bug)
        q, bsz = Q, B
        if bug == "opacus_rate":  # PrivacyEngine.make_private: q = 1/len(loader), expected batch int(N q)
            q = 1.0 / math.ceil(n / B)
            bsz = int(n * q)
        elif bug == "ceil_batch":
            bsz = math.ceil(n * Q)
        for t in range(STEPS):
            if bug == "mask_once":
                mask0 = torch.rand(n, generator=g) < Q if mask0 is None else mask0
                mask = mask0
            elif bug == "shuffled_batches":
                if t % 2 == 0:
                    order = torch.randperm(n, generator=g)
                idx = order[(t % 2) * n // 2:((t % 2) + 1) * n // 2]
                mask = torch.zeros(n, dtype=torch.bool)
                mask[idx] = True
            else:
                mask = torch.rand(n, generator=g) < q
            r = torch.softmax(x[mask] @ w.T + b, dim=1) - torch.nn.functional.one_hot(y[mask], 10).to(x.dtype)
            grads = [r[:, :, None] * x[mask][:, None, :], r]
            if audit is not None:
                c = audit.canary_gradient([w, b])
                if c is not None:
                    grads = [torch.cat([gi, ci[None]]) for gi, ci in zip(grads, c, strict=True)]
            if bug == "l2_example_correct":  # the L2 term's gradient in every example's gradient, before clipping
                grads = [gi + L2_EXAMPLE * p for gi, p in zip(grads, [w, b], strict=True)]
            flat = torch.cat([gi.flatten(1) for gi in grads], dim=1)
            if bug in ("clip_sum", "accum_clip_sum", "adamw_clip_sum"):
                if bug in ("clip_sum", "adamw_clip_sum"):
                    s = flat.sum(dim=0)
                else:  # two micro-batches summed unclipped into one accumulator, then the accumulator clipped
                    half = flat.shape[0] // 2
                    s = flat[:half].sum(dim=0) + flat[half:].sum(dim=0)
                s = s * min(1.0, C / (float(s.norm()) + 1e-12))
                sums = [s[:w.numel()].view_as(w), s[w.numel():].view_as(b)]
            elif bug == "no_clipping":
                sums = [gi.sum(dim=0) for gi in grads]
            else:
                if bug == "per_layer_clip":
                    factors = [torch.clamp(C / (gi.flatten(1).norm(dim=1) + 1e-12), max=1.0) for gi in grads]
                else:
                    norms = flat.half().norm(dim=1).float() if bug == "float16_clip" else flat.norm(dim=1)
                    f = torch.clamp(C / (norms + 1e-12), max=1.0)
                    factors = [f, f]
                sums = [(gi * fi.view(-1, *[1] * (gi.ndim - 1))).sum(dim=0)
                        for gi, fi in zip(grads, factors, strict=True)]
            if bug == "mean_times_batch":  # mean over the batch actually drawn, then "back to a sum" with B
                sums = [s * B / max(flat.shape[0], 1) for s in sums]
            std = SIGMA * C / B if bug == "noise_div_batch_twice" else SIGMA * C
            if bug == "noise_reused":
                reused = [torch.randn(s.shape, generator=g) for s in sums] if reused is None else reused
                z = list(reused)
            else:
                z = [torch.randn(s.shape, generator=g) for s in sums]
            if bug == "noise_missing_bias":
                z[1] = torch.zeros_like(z[1])
            if bug == "noise_every_other_step" and t % 2:
                z = [torch.zeros_like(zi) for zi in z]
            noisy = [s + std * zi for s, zi in zip(sums, z, strict=True)]
            if bug.endswith("_noise_after"):  # the optimizer steps on the noise-free sum; the noise goes on θ after
                assert opt is not None
                upd = [(d + opt.lr * std * zi / bsz) / LR for d, zi in
                       zip(opt.step([w, b], [s / bsz for s in sums]), z, strict=True)]
            elif bug == "realised_batch_norm":
                upd = [v / max(flat.shape[0], 1) for v in noisy]
            elif bug.startswith("momentum"):
                if audit is not None and bug == "momentum_correct":
                    audit.record_update(noisy)  # the privatised gradient, before the optimizer's state
                vel = [v / bsz for v in noisy] if vel is None else [0.9 * m + v / bsz for m, v in
                                                                    zip(vel, noisy, strict=True)]
                upd = vel
            elif opt is not None:  # the optimizer on the privatised gradient (post-processing); its step, lr included
                if audit is not None and bug.endswith("_correct"):
                    audit.record_update(noisy)
                upd = [u / LR for u in opt.step([w, b], [v / bsz for v in noisy])]
            else:
                upd = [v / bsz for v in noisy]
            w = w - LR * upd[0]
            b = b - LR * upd[1]
            if audit is not None:
                audit.record([w, b])
        with torch.no_grad():
            model.weight.copy_(w)
            model.bias.copy_(b)
        return model


def _optimizer(bug: str):
    """The optimizer with state a zoo trainer steps with (None: plain SGD, or the inline heavy-ball momentum)."""
    if bug.startswith("adamw"):
        return _Adam(ADAM_LR, ADAM_BETAS, ADAM_EPS, decay=ADAMW_DECAY)
    if bug == "adam_eps_norecord":  # β1 = 0; ε a multiple of the noise std per coordinate of the gradient it steps on
        return _Adam(ADAM_LR, (0.0, ADAM_BETAS[1]), ADAM_EPS_NOISE * SIGMA * C / B)
    if bug.startswith("adam"):
        return _Adam(ADAM_LR, ADAM_BETAS, ADAM_EPS)
    if bug.startswith("rmsprop"):
        return _RMSprop(RMSPROP_LR, RMSPROP_ALPHA, ADAM_EPS)
    if bug.startswith("nesterov"):
        return _SGD(LR, 0.9, NESTEROV_DECAY, nesterov=True)
    if bug == "momentum_noise_after":
        return _SGD(LR, 0.9, 0.0, nesterov=False)
    return None


class _Adam:
    """Adam (Kingma & Ba 2015, Algorithm 1) as torch.optim.Adam computes it, on a list of gradients: returns the step
    lr·m̂_t/(√v̂_t + ε) (bias-corrected moments), to be subtracted from the parameters. ``decay``: AdamW's decoupled
    weight decay (Loshchilov & Hutter 2019, Algorithm 2; torch.optim.AdamW): lr·decay·θ added to the step."""

    def __init__(self, lr: float, betas: tuple[float, float], eps: float, decay: float = 0.0) -> None:
        self.lr, self.betas, self.eps, self.decay, self.t = lr, betas, eps, decay, 0
        self.m: list[torch.Tensor] | None = None
        self.v: list[torch.Tensor] | None = None

    def step(self, params: list[torch.Tensor], grads: list[torch.Tensor]) -> list[torch.Tensor]:
        b1, b2 = self.betas
        self.t += 1
        if self.m is None or self.v is None:
            self.m, self.v = [torch.zeros_like(g) for g in grads], [torch.zeros_like(g) for g in grads]
        self.m = [b1 * m + (1 - b1) * g for m, g in zip(self.m, grads, strict=True)]
        self.v = [b2 * v + (1 - b2) * g * g for v, g in zip(self.v, grads, strict=True)]
        c1, c2 = 1 - b1 ** self.t, 1 - b2 ** self.t
        return [self.lr * self.decay * p + self.lr * (m / c1) / ((v / c2).sqrt() + self.eps)
                for p, m, v in zip(params, self.m, self.v, strict=True)]


class _RMSprop:
    """RMSprop (Tieleman & Hinton 2012) as torch.optim.RMSprop computes it (no momentum, not centred): v ← αv + (1−α)g²,
    step lr·g/(√v + ε); from zero state the first step is lr·g/(√(1−α)·|g| + ε), about 10·lr·sign(g)."""

    def __init__(self, lr: float, alpha: float, eps: float) -> None:
        self.lr, self.alpha, self.eps = lr, alpha, eps
        self.v: list[torch.Tensor] | None = None

    def step(self, params: list[torch.Tensor], grads: list[torch.Tensor]) -> list[torch.Tensor]:
        a = self.alpha
        v0 = self.v if self.v is not None else [torch.zeros_like(g) for g in grads]
        self.v = [a * v + (1 - a) * g * g for v, g in zip(v0, grads, strict=True)]
        return [self.lr * g / (v.sqrt() + self.eps) for g, v in zip(grads, self.v, strict=True)]


class _SGD:
    """SGD with momentum as torch.optim.SGD computes it (dampening 0): d = g + decay·θ; buf ← d at the first step,
    then μ·buf + d; the step is lr·(d + μ·buf) with Nesterov (Sutskever et al. 2013), lr·buf without."""

    def __init__(self, lr: float, momentum: float, decay: float, *, nesterov: bool) -> None:
        self.lr, self.mu, self.decay, self.nesterov = lr, momentum, decay, nesterov
        self.buf: list[torch.Tensor] | None = None

    def step(self, params: list[torch.Tensor], grads: list[torch.Tensor]) -> list[torch.Tensor]:
        d = [g + self.decay * p for g, p in zip(grads, params, strict=True)]
        self.buf = d if self.buf is None else [self.mu * m + di for m, di in zip(self.buf, d, strict=True)]
        if self.nesterov:
            return [self.lr * (di + self.mu * m) for di, m in zip(d, self.buf, strict=True)]
        return [self.lr * m for m in self.buf]


class _Diagnostic:
    """Benchmark-only white-box score: wraps a trainer and rewrites the recorded trace into one
    pseudo-step whose canary coordinate holds the diagnostic score (plugin's white-box score is
    the sum of that coordinate's updates, so it returns the diagnostic unchanged)."""

    def __init__(self, inner: Trainer, kind: str) -> None:
        self.inner, self.kind = inner, kind
        self.__qualname__ = f"Diagnostic[{inner.bug},{kind}]"

    def __call__(self, x, y, *, seed, audit):
        # "opposing": a huge canary against the data's mean gradient (the clip-the-sum worst case)
        spy = _Opposing(audit, x, y)
        model = self.inner(x, y, seed=seed, audit=spy)
        u = torch.stack(audit.trace[:-1]) - torch.stack(audit.trace[1:])
        score = float(-(u * torch.stack(spy.dirs)).sum())  # in: the step moves against d; out: along it
        n = len(audit.sampled)
        theta0 = audit.trace[0].clone()
        theta1 = theta0.clone()
        theta1[0] -= score
        audit.trace[:] = [theta0, theta1]
        audit.sampled[:] = [any(audit.sampled[:n])]
        return model


class _Opposing:
    """White-box hook wrapper: the canary gradient is −1000·C·d̂, d̂ the mean natural gradient at θ."""

    def __init__(self, audit, x, y) -> None:
        self.audit, self.x, self.y, self.dirs = audit, x, y, []

    def record(self, params):
        self.audit.record(params)

    def canary_gradient(self, params):
        w, b = params
        c = self.audit.canary_gradient(params)  # draws the canary's Poisson sampling
        r = torch.softmax(self.x @ w.T + b, dim=1) - torch.nn.functional.one_hot(self.y, 10).to(self.x.dtype)
        d = torch.cat([(r.T @ self.x).reshape(-1), r.sum(0)]).to(torch.float64)
        d = d / d.norm()
        self.dirs.append(d)
        if c is None:
            return None
        v = (-1000.0 * C * d).to(w.dtype)
        return [v[:w.numel()].view_as(w), v[w.numel():].view_as(b)]


# name -> (canary, threat, score, canary norm, diagnostic)
DESIGNS = {
    "bb_blank_loss": ("blank", "black_box", "loss", 1.0, None),
    "bb_blank_confidence": ("blank", "black_box", "confidence", 1.0, None),
    "bb_mislabelled_loss": ("mislabelled", "black_box", "loss", 1.0, None),
    "bb_ood_loss": ("out_of_distribution", "black_box", "loss", 1.0, None),
    "wb_blank_ip": ("blank", "white_box", "inner_product", 1.0, None),
    "wb_mislabelled_ip": ("mislabelled", "white_box", "inner_product", 1.0, None),
    "wb_ood_ip": ("out_of_distribution", "white_box", "inner_product", 1.0, None),
    "wb_dirac_ip": ("dirac", "white_box", "inner_product", 1.0, None),
    "wb_dirac10_ip": ("dirac", "white_box", "inner_product", 10.0, None),
    "wb_dirac_spread": ("dirac", "white_box", "step_spread", 1.0, None),
    "bb_mean_image_loss": ("mean_image", "black_box", "loss", 1.0, None),
    "wb_mean_image_ip": ("mean_image", "white_box", "inner_product", 1.0, None),
    "diag_wb_opposing": ("dirac", "white_box", "inner_product", 1.0, "opposing"),
    # the final parameters projected on the canary's per-tensor clipped gradient at a canary-free template model
    "bb_blank_proj": ("blank", "black_box", "projection", 1.0, None),
    # the black-box default's main audit: on the audit's own smaller dataset (audit.conformance.natural_records)
    "bb_blank_proj_small": ("blank", "black_box", "projection", 1.0, "small"),
    "bb_mean_image_proj": ("mean_image", "black_box", "projection", 1.0, None),
}


def _setup():
    d = data.digits().subset(slice(0, 100))
    spec = acc.DPSGD(SIGMA, acc.Poisson(Q), STEPS)
    return d, spec, comparator.analytical_curves(spec, DELTA)


def _trainer(name: str):
    if name == "opacus_correct":
        import opacus_trainer

        return opacus_trainer.train
    return Trainer(name)


def audit_once(trainer: str, design: str, seed: int, n: int = CHECKPOINTS[-1], checkpoints=CHECKPOINTS) -> dict:
    """One seeded audit of ``trainer`` with ``design`` on n trials; the violation test at each fixed N."""
    torch.set_num_threads(1)
    d, spec, curves = _setup()
    kind, threat, score, norm, diag = DESIGNS[design]
    tr = _trainer(trainer)
    if diag is not None:
        tr = _Diagnostic(tr, diag)
    gen = torch.Generator().manual_seed(seed)
    if kind == "dirac":
        can = plugin.DiracCanary(0, norm)
    elif kind == "mean_image":  # x = 0 in model space (the data's mean image): its gradient is the bias's only
        can = canaries.mean_image(d, 1, generator=gen)
    else:
        can = getattr(canaries, kind)(d, 1, generator=gen)
    ctx = plugin.Context(tr, d, can, seed, score, None, spec, threat, C)
    t0 = time.perf_counter()
    out = plugin.multi_run_game(ctx, n_trials=n, progress=False)
    secs = time.perf_counter() - t0
    s, m = out.scores[score], out.truth
    rec = {"trainer": trainer, "design": design, "seed": seed, "trials": n, "seconds": round(secs, 2)}
    for k in checkpoints:
        if k > n:
            continue
        cmp = comparator.compare_membership(s[:k][m[:k]], s[:k][~m[:k]], spec, delta=DELTA, curves=curves)
        rec[f"caught_{k}"] = bool(cmp.violated)
        rec[f"eps_lower_{k}"] = round(float(cmp.epsilon_lower.value), 4)
    # the recommended default runs two audits at half the significance each (Bonferroni): record that test too
    half = comparator.compare_membership(s[m], s[~m], spec, delta=DELTA, significance=SIGNIFICANCE / 2, curves=curves)
    rec[f"caught_{n}_half"] = bool(half.violated)
    return rec


# The white-box default's third audit (audit.config.CONFORMANCE_VARIANT): the dead_feature canary; its ε audit and
# its eight premise tests share that audit's third of the run's 5 % (each half; the tests Bonferroni).
DEFAULT_AUDITS = 3


def conformance_once(trainer: str, seed: int, n: int) -> dict:
    """One seeded conformance audit (the default's third audit) of ``trainer`` on n trials, at the default's levels."""
    from attacks import conformance_record, replay
    from audit import conformance

    torch.set_num_threads(1)
    d, spec, curves = _setup()
    # the audit's dataset (config.py, audit/runs.py): copies of record 0 and one record of each other class
    d = conformance_record.copied_records(d, conformance.natural_records(d.n, "poisson", Q))
    can = conformance_record.dead_feature(d, 1, value=10.0, generator=torch.Generator().manual_seed(seed))
    ctx = plugin.Context(_trainer(trainer), d, can, seed, "inner_product", None, spec, "white_box", C)
    t0 = time.perf_counter()
    out = plugin.multi_run_game(ctx, n_trials=n, progress=False)
    secs = time.perf_counter() - t0
    share = SIGNIFICANCE / DEFAULT_AUDITS / 2
    t1 = time.perf_counter()
    replayed = replay.observe(ctx)  # the replay check (issue 25): the trainer re-run on fixed seeds
    replay_secs = time.perf_counter() - t1
    conf = conformance.run_tests(out.metadata["conformance"], spec, share, seed, replayed=replayed)
    s, m = out.scores["inner_product"], out.truth
    cmp = comparator.compare_membership(s[m], s[~m], spec, delta=DELTA, significance=share, curves=curves)
    rec = {"trainer": trainer, "design": "conformance", "seed": seed, "trials": n, "seconds": round(secs, 2),
           "tests_seconds": round(time.perf_counter() - t0 - secs - replay_secs, 2),
           "replay_seconds": round(replay_secs, 2), "eps_caught": bool(cmp.violated),
           "eps_lower": round(float(cmp.epsilon_lower.value), 4), "premise_caught": bool(conf.rejected),
           "caught": bool(conf.rejected or cmp.violated), "notes": list(conf.notes)}
    for t in conf.tests:
        rec[f"p_{t.name}"] = t.p_value
        rec[f"rej_{t.name}"] = t.rejected
        rec[f"finding_{t.name}"] = t.skipped or t.finding
    return rec


def conformance_table(path: str) -> None:
    """Markdown: which premise test catches which trainer (catch rate over seeds); false alarms with CP bounds."""
    from audit import conformance

    rows = [json.loads(line) for line in Path(path).read_text().splitlines()]
    names = [t for t in [*BUGS, "opacus_correct"] if any(r["trainer"] == t for r in rows)]
    print("| trainer | trials | " + " | ".join(conformance.TESTS) + " | ε audit | caught | s per audit |")
    print("|---|---|" + "---|" * (len(conformance.TESTS) + 3))
    for t in names:
        for n in sorted({r["trials"] for r in rows if r["trainer"] == t}):
            rs = [r for r in rows if r["trainer"] == t and r["trials"] == n]
            cells = [f"{sum(r['rej_' + k] for r in rs)}/{len(rs)}" for k in conformance.TESTS]
            k = sum(r["caught"] for r in rs)
            sec = sum(r["seconds"] + r.get("tests_seconds", 0) for r in rs) / len(rs)
            print(f"| {t} | {n} | " + " | ".join(cells) + f" | {sum(r['eps_caught'] for r in rs)}/{len(rs)} | "
                  f"{k}/{len(rs)} | {sec:.0f} |")
    correct = [r for r in rows if r["trainer"] in CORRECT]
    if correct:
        k = sum(r["caught"] for r in correct)
        print(f"\nfalse alarms over {len(correct)} audits of correct trainers: {k} "
              f"(95 % Clopper-Pearson upper bound {clopper_pearson_upper(k, len(correct)):.3f})")


def _conformance_context(trainer: str, seed: int):
    """The conformance audit's context (its dataset and canary, audit/runs.py) for ``trainer``, and the claim."""
    from attacks import conformance_record
    from audit import conformance

    d, spec, _ = _setup()
    d = conformance_record.copied_records(d, conformance.natural_records(d.n, "poisson", Q))
    can = conformance_record.dead_feature(d, 1, value=10.0, generator=torch.Generator().manual_seed(seed))
    return plugin.Context(_trainer(trainer), d, can, seed, "inner_product", None, spec, "white_box", C), spec


def replay_once(trainer: str, seed: int) -> dict:
    """The replay check alone (issue 25: attacks/replay.py, audit/replay.py) at its level in the default; it runs
    its own replays, so it gives what the full conformance audit would give for this seed, without the game."""
    from attacks import replay
    from audit import conformance
    from audit import replay as audit_replay

    torch.set_num_threads(1)
    ctx, spec = _conformance_context(trainer, seed)
    level = SIGNIFICANCE / DEFAULT_AUDITS / 2 / len(conformance.TESTS)
    t0 = time.perf_counter()
    obs = replay.observe(ctx)
    secs = time.perf_counter() - t0
    t = audit_replay.test(obs, float(spec.noise_multiplier), level)
    return {"trainer": trainer, "seed": seed, "seconds": round(secs, 2), "level": level, "p": t.p_value,
            "rejected": t.rejected, "skipped": t.skipped, "finding": t.finding}


def replay_table(path: str) -> None:
    """Markdown: the replay check's verdicts per trainer; false alarms of the correct ones with CP bounds."""
    rows = [json.loads(line) for line in Path(path).read_text().splitlines()]
    names = [t for t in [*BUGS, "opacus_correct"] if any(r["trainer"] == t for r in rows)]
    print("| trainer | audits | rejected | not applicable | smallest p | median p | p ≤ 0.05 | s per replay check |")
    print("|---|---|---|---|---|---|---|---|")
    for t in names:
        rs = [r for r in rows if r["trainer"] == t]
        ps = sorted(r["p"] for r in rs if r["p"] is not None)
        small = f"{ps[0]:.2g}" if ps else "–"
        med = f"{ps[len(ps) // 2]:.2g}" if ps else "–"
        print(f"| {t} | {len(rs)} | {sum(r['rejected'] for r in rs)} | {sum(bool(r['skipped']) for r in rs)} | "
              f"{small} | {med} | {sum(p <= 0.05 for p in ps)} | {sum(r['seconds'] for r in rs) / len(rs):.1f} |")
    correct = [r for r in rows if r["trainer"] in CORRECT]
    if correct:
        k = sum(r["rejected"] for r in correct)
        print(f"\nfalse alarms over {len(correct)} replay checks of correct trainers: {k} "
              f"(95 % Clopper-Pearson upper bound {clopper_pearson_upper(k, len(correct)):.3f})")


# The black-box default for a user trainer (issue 25): blank + mean image, each at 2.5 %, each the sequential test
# (audit/statistics/sequential.py) with the 20,000-trial ceiling; the fixed design spent 2 x 2,000. The blank canary is
# scored by the final parameters' projection (audit.config.RECOMMENDED_BLACK_BOX), on the audit's own smaller dataset
# (``bb_blank_proj_small``); before, on all the records (``bb_blank_proj``), and before that by its loss
# (``--designs bb_blank_loss,bb_mean_image_loss`` replays that default).
SEQ_DESIGNS = ("bb_blank_proj_small", "bb_mean_image_loss")
# futility's z of each default audit (audit/config.py: BLACK_BOX_FUTILITY_Z); other designs: the test's FUTILITY_Z
SEQ_FUTILITY_Z = {"bb_blank_proj_small": BLACK_BOX_FUTILITY_Z["main"],
                  "bb_mean_image_loss": BLACK_BOX_FUTILITY_Z["mean_image"]}
SEQ_CEILING = 20_000


def sequential_once(trainer: str, design: str, seed: int, ceiling: int = SEQ_CEILING, futility_z: float | None = None,
                    replay_z: tuple[float, ...] = ()) -> dict:
    """One seeded sequential audit (the runner's loop: blocks of trials, the looks replayed after each block).

    ``futility_z``: futility's z (None: the design's default, :data:`SEQ_FUTILITY_Z`, else the test's
    ``FUTILITY_Z``). ``replay_z``: further z values whose
    decisions are replayed on the same trials (record ``replay``); futility stops no later at a larger z (the
    projected rates only move toward the claim), so give z ≥ ``futility_z`` and the trials played suffice."""
    import tempfile

    from audit import statistics

    torch.set_num_threads(1)
    d, spec, curves = _setup()
    kind, threat, score, _, special = DESIGNS[design]
    if special == "small":
        d = d.subset(slice(0, natural_records(d.n, "poisson", Q)))
    gen = torch.Generator().manual_seed(seed)
    can = canaries.mean_image(d, 1, generator=gen) if kind == "mean_image" else getattr(canaries, kind)(
        d, 1, generator=gen)
    ctx = plugin.Context(_trainer(trainer), d, can, seed, score, None, spec, threat, C)
    f = curves.best
    curve = lambda a: f(torch.as_tensor(a, dtype=torch.float64)).numpy()  # noqa: E731
    looks = statistics.look_schedule(ceiling)
    futility_z = SEQ_FUTILITY_Z.get(design) if futility_z is None else futility_z
    zk = {} if futility_z is None else {"futility_z": futility_z}
    t0, target = time.perf_counter(), looks[0]
    with tempfile.TemporaryDirectory() as tmp:
        while True:
            out = plugin.multi_run_game(ctx, n_trials=target, run_dir=tmp, progress=False)
            res = statistics.sequential_test(out.scores[score], out.truth, curve, significance=SIGNIFICANCE / 2,
                                             max_trials=ceiling, **zk)
            if res.stopped != "continue":
                break
            target = min(res.next_look, target + max(250, target // 4))
    replay = {}
    for z in replay_z:
        r = statistics.sequential_test(out.scores[score], out.truth, curve, significance=SIGNIFICANCE / 2,
                                       max_trials=ceiling, futility_z=z)
        replay[str(z)] = {"stopped": r.stopped, "trials": r.trials, "caught": r.violated}
    return {"trainer": trainer, "design": design, "seed": seed, "ceiling": ceiling, "futility_z": futility_z,
            "stopped": res.stopped, "trials": res.trials, "caught": res.violated,
            "seconds": round(time.perf_counter() - t0, 2), "margins": [round(x.margin, 4) for x in res.evaluated],
            "replay": replay}


def sequential_table(path: str) -> None:
    """Per trainer: trials spent by the black-box default (both audits) per seed, stop reasons, catches."""
    rows = [json.loads(line) for line in Path(path).read_text().splitlines()]
    designs = list(dict.fromkeys(r["design"] for r in rows))
    heads = " | ".join(f"{dn}: trials (stop)" for dn in designs)
    print(f"| trainer | seed | {heads} | all audits | caught | seconds |")
    print("|---|---|" + "---|" * len(designs) + "---|---|---|")
    for t in dict.fromkeys(r["trainer"] for r in rows):
        for seed in sorted({r["seed"] for r in rows if r["trainer"] == t}):
            rs = {r["design"]: r for r in rows if r["trainer"] == t and r["seed"] == seed}
            cells = [f"{rs[dn]['trials']:,} ({rs[dn]['stopped']})" if dn in rs else "" for dn in designs]
            total = sum(r["trials"] for r in rs.values())
            print(f"| {t} | {seed} | {' | '.join(cells)} | {total:,} | {any(r['caught'] for r in rs.values())} "
                  f"| {sum(r['seconds'] for r in rs.values()):.0f} |")


def sequential_null(reps: int = 400, ceiling: int = SEQ_CEILING) -> None:
    """The sequential test without training: simulated scores of the claimed mechanism itself.

    The Poisson-subsampled Gaussian of the claim (σ = 3, q = 0.5, 10 steps, sensitivity k·C), one draw per
    trial, scored by its exact log-likelihood ratio (k = 1: the Neyman–Pearson-optimal score of a mechanism
    exactly at the claim, whose trade-off curve the PLD curve bounds from below: the null's boundary), or by the
    sum of its steps (k > 1: the leak of a sensitivity k·C bug). Each replicate a fresh seed; test at 2.5 %.
    """
    import numpy as np

    from audit import statistics

    _, spec, curves = _setup()
    f = curves.best
    curve = lambda a: f(torch.as_tensor(a, dtype=torch.float64)).numpy()  # noqa: E731
    for k, n_reps, llr in ((1.0, reps, True), (1.0, reps // 4, False), (1.2, reps // 4, False),
                           (1.41, reps // 4, False)):
        stops, spent, fixed = {}, [], 0
        t0 = time.perf_counter()
        for r in range(n_reps):
            rng = np.random.default_rng(r)
            m = rng.random(ceiling) < 0.5
            x = k * ((rng.random((ceiling, STEPS)) < Q) * m[:, None]) + SIGMA * rng.standard_normal((ceiling, STEPS))
            sc = np.log1p(-Q + Q * np.exp((2 * x - 1) / (2 * SIGMA ** 2))).sum(1) if llr else x.sum(1)
            res = statistics.sequential_test(sc, m, curve, significance=SIGNIFICANCE / 2, max_trials=ceiling)
            stops[res.stopped] = stops.get(res.stopped, 0) + 1
            spent.append(res.trials)
            fixed += comparator.compare_membership(sc[:2000][m[:2000]], sc[:2000][~m[:2000]], spec, delta=DELTA,
                                                   significance=SIGNIFICANCE / 2, curves=curves).violated
        e = acc.epsilon(acc.DPSGD(SIGMA / k, acc.Poisson(Q), STEPS), delta=DELTA, method="pld").value
        v = stops.get("violation", 0)
        print(f"sensitivity {k:.2f} C (eps_true {e:.2f}), {'exact LLR' if llr else 'sum'} score, {n_reps} reps: "
              f"stops {stops}; violations {v}/{n_reps} = {v / n_reps:.3f} (95 % CP upper "
              f"{clopper_pearson_upper(v, n_reps):.3f}); trials mean {np.mean(spent):,.0f}, median "
              f"{np.median(spent):,.0f}; fixed N = 2,000 at 2.5 %: {fixed}/{n_reps}; {time.perf_counter() - t0:.0f} s",
              flush=True)


_STUDY_KEY = ("trainer", "design", "seed", "trials")


def _apply(once, t):
    return once(*t)


def _run_tasks(once, key: tuple[str, ...], tasks, out: str, workers: int, what: str = "audits",
               show=lambda r: r) -> None:
    """Run ``once(*t)`` for every task not yet in the JSON-lines file ``out`` (a task is its record's ``key``
    fields), appending each record as it finishes (an interrupted study loses no finished audit)."""
    done = set()
    if Path(out).exists():
        done = {tuple(r.get(k) for k in key) for r in map(json.loads, Path(out).read_text().splitlines())}
    tasks = [t for t in tasks if tuple(t[:len(key)]) not in done]
    print(f"{len(tasks)} {what} to run ({len(done)} already in {out})", flush=True)
    with open(out, "a", encoding="utf-8") as fh:
        if workers <= 1:
            results = (once(*t) for t in tasks)
        else:
            import functools
            import multiprocessing as mp

            results = mp.get_context("fork").Pool(workers).imap_unordered(functools.partial(_apply, once), tasks)
        for r in results:
            fh.write(json.dumps(r) + "\n")
            fh.flush()
            print(show(r), flush=True)


def clopper_pearson_upper(k: int, n: int, alpha: float = 0.05) -> float:
    """One-sided (1 − α) Clopper–Pearson upper bound on a binomial rate: the p with P(Bin(n, p) ≤ k) = α."""
    if k >= n:
        return 1.0
    lo, hi = k / n, 1.0
    for _ in range(100):  # bisection on the binomial CDF (exact: sum of terms in log space)
        mid = (lo + hi) / 2
        cdf = sum(math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * math.log(mid)
                           + (n - i) * math.log1p(-mid)) for i in range(k + 1))
        lo, hi = (mid, hi) if cdf > alpha else (lo, mid)
    return hi


def _clip(v: torch.Tensor) -> torch.Tensor:
    return v * min(1.0, C / float(v.norm()))


def sensitivity() -> None:
    """Measured sensitivity of the clip-the-sum and float16 bugs for every natural record (and the canaries)."""
    torch.set_num_threads(1)
    d, _, _ = _setup()
    x, y = d.x.to(torch.float32), d.y
    g = torch.Generator().manual_seed(0)
    cans = [canaries.blank(d, 1, generator=g), canaries.mislabelled(d, 1, generator=g),
            canaries.out_of_distribution(d, 1, generator=g)]
    worst_sum, worst_f16, worst_mean, n_pairs = 0.0, 0.0, 0.0, 0
    for trial in range(200):
        w = 0.05 * trial / 200 * torch.randn(10, 64, generator=g)  # from θ = 0 to a few steps' worth of drift
        b = torch.zeros(10)
        mask = torch.rand(100, generator=g) < Q
        xs = torch.cat([x[mask], *[c.x.to(torch.float32) for c in cans]])
        ys = torch.cat([y[mask], *[c.y for c in cans]])
        r = torch.softmax(xs @ w.T + b, dim=1) - torch.nn.functional.one_hot(ys, 10).float()
        flat = torch.cat([(r[:, :, None] * xs[:, None, :]).flatten(1), r], dim=1).double()
        k = int(mask.sum())
        s = flat[:k].sum(0)
        fc = flat * torch.clamp(C / flat.norm(dim=1), max=1.0)[:, None]  # per-example clipped
        sc = fc[:k].sum(0)
        for i in range(flat.shape[0]):  # remove a batch record, or add a canary
            other = s - flat[i] if i < k else s
            with_i = s if i < k else s + flat[i]
            worst_sum = max(worst_sum, float((_clip(with_i) - _clip(other)).norm()) / C)
            n_out = k - 1 if i < k else k  # mean_times_batch: B x (clipped sum) / |batch drawn|
            o, w_i = (sc - fc[i], sc) if i < k else (sc, sc + fc[i])
            worst_mean = max(worst_mean, float((B * w_i / (n_out + 1) - B * o / max(n_out, 1)).norm()) / C)
            n_pairs += 1
        norms = flat.float().norm(dim=1)
        rel = (flat.float().half().norm(dim=1).float() / norms - 1).abs().max()
        worst_f16 = max(worst_f16, float(rel))
    print(f"clip_sum: max over {n_pairs} (batch, record) pairs of ||clip(S+g) - clip(S)|| / C = {worst_sum:.4f} "
          "(claimed sensitivity 1; worst case over all gradients 2)")
    print(f"mean_times_batch: max over the same pairs of the update's change / C = {worst_mean:.4f} "
          f"(claimed 1; a record alone in its batch: B = {B})")
    print(f"float16_clip: max relative error of the float16 norm = {worst_f16:.2e} "
          f"(clipped norm <= C (1 + {worst_f16:.1e}))")
    for k in (1.0 + worst_f16, worst_mean, 2.0):
        e = acc.epsilon(acc.DPSGD(SIGMA / k, acc.Poisson(Q), STEPS), delta=DELTA, method="pld").value
        print(f"  epsilon at sensitivity {k:.6g} C: {e:.4f}")


def reach(seeds: int = 20) -> None:
    """What 2,000 trials can certify: catch rate of the claim's own score (the canary coordinate's sum)
    when the true sensitivity is k·C (ε_true from the PLD accountant), simulated without training."""
    torch.set_num_threads(1)
    _, spec, curves = _setup()
    n = CHECKPOINTS[-1]
    for k in (1.0, 1.2, 1.41, 1.6, 2.0):
        caught = 0
        for s in range(seeds):
            g = torch.Generator().manual_seed(s)
            m = torch.rand(n, generator=g) < 0.5
            b = (torch.rand(n, STEPS, generator=g) < Q).double() * m[:, None]
            sc = (k * b + SIGMA * torch.randn(n, STEPS, generator=g, dtype=torch.float64)).sum(1)
            caught += comparator.compare_membership(sc[m], sc[~m], spec, delta=DELTA, curves=curves).violated
        e = acc.epsilon(acc.DPSGD(SIGMA / k, acc.Poisson(Q), STEPS), delta=DELTA, method="pld").value
        print(f"sensitivity {k:.2f} C (eps_true {e:.2f}): caught in {caught}/{seeds} audits of {n} trials")


# ---- what the 20,000-trial ceiling allows a black-box audit to catch (issue 25) -----------------------------------
#
# The final model is a function of the transcript of updates (θ_1, …, θ_T), so any black-box score is a post-processing
# of it: by the data-processing inequality its trade-off curve lies on or above the transcript's. A bug's worst-case
# mechanism below is a pair whose curve lies at or *below* the transcript's for every record the canary could be (a
# sound upper bound on the leak): no black-box audit, with any canary and any score, faces an easier alternative.


@dataclass(frozen=True)
class WorstCase:
    """A sound upper bound on one bug's leak under the benchmark's claim: a curve at or below the transcript's.

    Exactly one of ``spec`` (a DP-SGD whose PLD curve is the bound), ``gdp`` (a μ-GDP bound) and ``exposed``
    (p: the in-transcript is the out-transcript with probability 1 − p, so the curve is (1 − p)(1 − α); p = 1, the
    vacuous curve 0, for a leak no finite bound covers) is set. ``witness``: an achievable (FPR, FNR) of the
    transcript (a lower bound on the leak: shows a "trivial" row allowed). ``bound``: "exact" (the bug's worst
    record attains it), "upper" (sound, may be loose), "trivial" (no finite bound derived: the vacuous curve 0) or
    "estimate" (from a measurement).
    """

    mechanism: str
    bound: str
    spec: acc.DPSGD | None = None
    gdp: float | None = None
    exposed: float | None = None
    witness: tuple[float, float] | None = None  # an achievable (FPR, FNR) of the transcript: a lower bound on the leak

    def curve(self) -> acc.TradeOff:
        """The lower trade-off curve of the bound."""
        if self.spec is not None:
            return acc.tradeoff_curve(self.spec, method="pld")
        if self.gdp is not None:
            return acc.TradeOff.from_gdp(self.gdp)
        p = float(self.exposed if self.exposed is not None else 1.0)
        return PiecewiseLinearTradeOff(torch.tensor([0.0, 1.0], dtype=torch.float64),
                                       torch.tensor([1.0 - p, 0.0], dtype=torch.float64), bound="lower",
                                       description=f"revealed with probability {p:.6g}")

    def epsilon(self, delta: float = DELTA) -> float:
        """ε at ``delta`` of the bound (upper side: the PLD accountant's, or the GDP closed form; ∞ when p > δ)."""
        if self.spec is not None:
            return float(acc.epsilon(self.spec, delta, method="pld").value)
        if self.gdp is not None:
            return float(acc.TradeOff.from_gdp(self.gdp).epsilon(delta))
        return math.inf if float(self.exposed if self.exposed is not None else 1.0) > delta else 0.0


N_DATA, N_PARAMS = 100, 10 * 64 + 10
N_AUDIT = natural_records(N_DATA, "poisson", Q)  # the black-box main audit's own dataset (audit.config.AUDIT_DATASET)


def scale_witness(ratio: float, dims: int, fpr: float = 0.01) -> tuple[float, float]:
    """(FPR, FNR) of the test "in iff ‖x‖² is on the in-side" for x ~ N(0, s²I_dims) out, N(0, (ratio·s)²I_dims) in.

    An achievable point of the transcript's curve when the noise's scale depends on the canary: the update's
    component orthogonal to the span of the N + 1 per-example gradients at θ_t (known to a white box that knows
    the data) is the noise alone, dims = T·(d − N − 1) coordinates over the run. ‖x‖²/s² is χ²_dims out and
    ratio²·χ²_dims in, so FNR = P(ratio²χ² > t) with P(χ² ≤ t) = FPR when ratio < 1 (mirror image when > 1).
    """
    from scipy import stats

    if ratio < 1:
        t = stats.chi2.ppf(fpr, dims)
        return fpr, float(stats.chi2.sf(t / ratio ** 2, dims))
    t = stats.chi2.isf(fpr, dims)
    return fpr, float(stats.chi2.cdf(t / ratio ** 2, dims))


def worst_case(bug: str, *, sigma: float = SIGMA, q: float = Q, steps: int = STEPS, batch: int = B) -> WorstCase:
    """The worst-case mechanism of ``bug`` (a key of :data:`BUGS`) under the claim (σ, Poisson q, T steps, C, B).

    In units of C (the noise on the sum is σ·C), one record's pre-noise contribution Δ per step, under add/remove:

    - ``per_layer_clip``: L = 2 tensors clipped to C each, Δ ≤ √L·C: DP-SGD with noise multiplier σ/√L (exact:
      a record whose every tensor's gradient exceeds C);
    - ``clip_sum``, ``accum_clip_sum``: the sum is projected onto the ball of radius C, whose diameter is 2C, so
      Δ ≤ 2C: DP-SGD σ/2 (attained in the limit by a huge gradient opposing the batch's sum);
    - ``mean_times_batch``: B·(S + g)/(n + 1) − B·S/n = B·(g − S/n)/(n + 1) has norm ≤ 2BC/(n + 1) ≤ BC for n ≥ 1
      other records in the batch, and B·g ≤ BC alone: DP-SGD σ/B (upper; n = 0 has probability 2^-100 here);
    - ``noise_div_batch_twice``: noise σC/B on a sum of sensitivity C: DP-SGD σ/B (exact);
    - ``mask_once``: the canary is in all T steps (probability q) or in none; given in, T adaptive Gaussian steps
      of sensitivity C compose to one Gaussian of sensitivity √T·C: one Poisson-subsampled step, σ/√T (exact);
    - ``shuffled_batches``: two batches per epoch; adding the canary to a batch of ⌊101/2⌋ = 50 slots moves one
      other record r to the second batch (a uniform 49-subset is a uniform 50-subset less a uniform element), so
      an epoch's shift is (g − g_r, g_r), norm² ≤ 5C², or g alone: 5 epochs of Gaussians, μ ≤ √(5·5)/σ (upper;
      the canary's own 5 steps alone give √5/σ, not a bound under add/remove);
    - ``noise_reused`` (differences of updates are noise-free), ``noise_missing_bias`` (the bias is noise-free),
      ``noise_every_other_step`` (odd steps are noise-free): with probability (1 − q)^T the canary is in no step
      and the transcript is the out-transcript, so every test has FNR ≥ (1 − q)^T·(1 − FPR): the curve
      (1 − p)(1 − α), p = 1 − (1 − q)^T (upper; ε = ∞ at δ < p: the canary is revealed whenever it is in a
      noise-free step, so the bound is nearly attained);
    - ``no_clipping`` (Δ unbounded), ``realised_batch_norm`` and ``ceil_batch`` (the noise's scale, σC/|B_t| or
      σC/⌈Nq⌉, depends on the canary: a high-dimensional white box reads it), ``opacus_rate`` (rate and scale
      both change with the canary): no finite bound derived, the vacuous curve 0 (trivial);
    - ``float16_clip``: Δ ≤ 1.001·C, from the measured relative error 6.1e-4 of the float16 norm (``sensitivity``):
      an estimate, not a bound;
    - ``adamw_clip_sum``: ``clip_sum``'s noisy sums, AdamW on them post-processing: DP-SGD σ/2 (upper);
    - ``momentum_noise_after``: the steps release m_t + σC·z_t, m_t = Σ_{i≤t} β^(t−i)·s_i the noise-free clipped sums;
      a record in every step moves m_t by at most C·(1 − β^t)/(1 − β), a Gaussian mechanism on the stacked m of
      sensitivity C·√(Σ_t ((1 − β^t)/(1 − β))²) (≈ 14.2·C at β = 0.9, T = 10), which bounds every inclusion pattern
      (a mixture is no easier to test than its hardest component): μ = that/(σC) (upper; subsampling unused);
    - ``rmsprop_noise_after``: RMSprop's step normalises each coordinate of the noise-free sum (lr·s/√v): a
      coordinate only the record reaches moves by about lr/√(1 − α) whatever its gradient's size, against noise
      lr·σC/B: no finite bound derived (trivial);
    - ``correct`` (and the other correct trainers): the claim itself, DP-SGD σ (exact).
    """
    if bug not in BUGS and bug != "opacus_correct":
        raise ValueError(f"bug must be one of {sorted(BUGS)}; got {bug!r}")
    pois = acc.Poisson(q)
    if bug in CORRECT or bug == "opacus_correct":
        return WorstCase("the claim: DP-SGD σ", "exact", spec=acc.DPSGD(sigma, pois, steps))
    if bug == "per_layer_clip":
        return WorstCase("Δ = √2·C: DP-SGD σ/√2", "exact", spec=acc.DPSGD(sigma / math.sqrt(2), pois, steps))
    if bug in ("clip_sum", "accum_clip_sum"):
        return WorstCase("Δ = 2C (diameter of the C-ball): DP-SGD σ/2", "exact", spec=acc.DPSGD(sigma / 2, pois, steps))
    if bug == "adamw_clip_sum":
        return WorstCase("Δ = 2C, AdamW post-processing: DP-SGD σ/2", "upper", spec=acc.DPSGD(sigma / 2, pois, steps))
    if bug == "momentum_noise_after":
        beta = 0.9
        echo = math.sqrt(sum(((1 - beta ** t) / (1 - beta)) ** 2 for t in range(1, steps + 1)))
        return WorstCase(f"noise-free momentum released with noise: sensitivity {echo:.1f}·C over the steps", "upper",
                         gdp=echo / sigma)
    if bug in ("mean_times_batch", "noise_div_batch_twice"):
        what = "Δ ≤ B·C" if bug == "mean_times_batch" else "noise σC/B"
        return WorstCase(f"{what}: DP-SGD σ/B", "upper" if bug == "mean_times_batch" else "exact",
                         spec=acc.DPSGD(sigma / batch, pois, steps))
    if bug == "mask_once":
        return WorstCase("in all T steps w.p. q or none: one step, σ/√T", "exact",
                         spec=acc.DPSGD(sigma / math.sqrt(steps), pois, 1))
    if bug == "shuffled_batches":
        epochs = steps // 2
        return WorstCase(f"{epochs} epochs, shift² ≤ 5C² each: μ = √{5 * epochs}/σ", "upper",
                         gdp=math.sqrt(5 * epochs) / sigma)
    if bug in ("noise_reused", "noise_missing_bias", "noise_every_other_step"):
        return WorstCase(f"out-transcript only when in no step: p = 1 − (1 − q)^{steps}", "upper",
                         exposed=1.0 - (1.0 - q) ** steps)
    if bug == "float16_clip":
        return WorstCase("Δ ≤ 1.001·C (measured float16 error)", "estimate", spec=acc.DPSGD(sigma / 1.001, pois, steps))
    dims = steps * (N_PARAMS - N_DATA - 1)
    if bug == "ceil_batch":  # the sum divided by ⌈101·q⌉ = 51 with the canary, 50 without
        return WorstCase("noise scale σC/51 instead of σC/50 with the canary", "trivial", exposed=1.0,
                         witness=scale_witness(math.floor(N_DATA * q) / math.ceil((N_DATA + 1) * q), dims))
    if bug == "opacus_rate":  # 1/len(loader): q = 1/3 and B = int(101/3) = 33 with the canary; 1/2 and 50 without
        b_in = int((N_DATA + 1) / math.ceil((N_DATA + 1) / batch))
        return WorstCase("rate 1/3 and scale σC/33 with the canary", "trivial", exposed=1.0,
                         witness=scale_witness(batch / b_in, dims))
    return WorstCase({"no_clipping": "Δ unbounded", "realised_batch_norm": "noise scale σC/|B_t| reveals |B_t|",
                      "rmsprop_noise_after": "RMSprop normalises the noise-free sum per coordinate: Δ unbounded in "
                                             "noise units"}[bug], "trivial", exposed=1.0)


REACH_REPLICATES = 40

# What the offered black-box canaries (blank, mean image) can leak under the bugs they miss: estimates, not bounds.
CANARY_ESTIMATES = {
    "clip_sum": WorstCase("natural records and offered canaries move the clipped sum ≤ 0.65·C (`sensitivity`)",
                          "estimate", spec=acc.DPSGD(SIGMA / 0.65, acc.Poisson(Q), STEPS)),
    "per_layer_clip": WorstCase("blank canary: weight C, bias ≈ 0.9·C, total ≈ 1.35·C (mean image: bias alone, C)",
                                "estimate", spec=acc.DPSGD(SIGMA / 1.35, acc.Poisson(Q), STEPS)),
    "mean_times_batch": WorstCase("the largest change over natural records and canaries: 1.45·C (`sensitivity`)",
                                  "estimate", spec=acc.DPSGD(SIGMA / 1.45, acc.Poisson(Q), STEPS)),
    "shuffled_batches": WorstCase("the canary's own 5 of 10 steps at C, no record moved: μ = √5/σ", "estimate",
                                  gdp=math.sqrt(STEPS // 2) / SIGMA),
}


def optimal_sequential(curve: acc.TradeOff, claim, *, reps: int = REACH_REPLICATES, ceiling: int = SEQ_CEILING,
                       significance: float = SIGNIFICANCE / 2, futility: bool = True, futility_z: float | None = None,
                       seed: int = 0):
    """The black-box default's sequential test on the optimal attack's scores (the canonical pair of ``curve``,
    audit/tightness.py): (violations, trials spent per replicate). Without futility its rejection rate bounds the
    test's with futility on the same trials from above (futility only ends an audit with a pass)."""
    import numpy as np

    from audit import statistics, tightness

    table = tightness._quantile_function(curve)
    rng = np.random.default_rng(seed)
    hits, spent = 0, []
    for _ in range(reps):
        m = rng.random(ceiling) < 0.5
        xin, xout = tightness.canonical_scores(curve, int(m.sum()), int((~m).sum()), rng=rng, _table=table)
        s = np.empty(ceiling)
        s[m], s[~m] = xin, xout
        extra = {} if futility_z is None else {"futility_z": futility_z}
        res = statistics.sequential_test(s, m, claim, significance=significance, max_trials=ceiling, futility=futility,
                                         **extra)
        hits += res.violated
        spent.append(res.trials)
    return hits, spent


def _scaled_shift(rng, n: int):
    """mean_times_batch's summed shift on the audit's dataset: the canary's C scaled by B/|B_t| in each step it is in
    (|B_t| = its natural batch + 1), against the noise σC added after the scaling (units of C)."""
    present = rng.random((n, STEPS)) < Q
    return (present * (B / (rng.binomial(N_AUDIT, Q, (n, STEPS)) + 1))).sum(1)


# The final-model view of each bug (issue 25, "A final-model score"): what the final parameters show along the canary's
# direction, for a trainer whose per-step contributions do not depend on θ (the linear-update idealisation: the zoo's
# linear model moves little in 10 steps). The final model is then θ_0 − η/B·(D + Σ_t (c_t + Z_t)) with the other
# records' term D independent of the canary, so its projection on the canary's unit contribution direction, in units
# of C, is a post-processing of (the canary's summed shift) + N(0, noise variance): the samplers below draw that pair
# (members, score). Its likelihood ratio increases with the score (a mixture of shifts ≥ 0 of one Gaussian), so the
# score IS the optimal attack of this view; dropping D only helps the attack (an upper bound on the view's leak).
# (description, bound, in-score sampler: rng, n -> shift); the noise is N(0, T·σ²) unless the entry says otherwise.
FINAL_VIEW = {
    "correct": ("K·C, K ~ Bin(T, q)", "exact (linear)", lambda rng, n: rng.binomial(STEPS, Q, n) * 1.0),
    "noise_reused": ("K·C against noise T·σC (one draw, T times)", "exact (linear)",
                     lambda rng, n: rng.binomial(STEPS, Q, n) * 1.0),
    "clip_sum": ("K·0.65·C (offered canaries' largest move, `sensitivity`)", "estimate",
                 lambda rng, n: rng.binomial(STEPS, Q, n) * 0.65),
    "per_layer_clip": ("K·1.35·C (blank: weight C, bias 0.9–1·C, read per tensor; measured 1.35–1.43·C)", "estimate",
                       lambda rng, n: rng.binomial(STEPS, Q, n) * 1.35),
    "mask_once": ("T·C w.p. q, else 0 (all steps or none)", "exact (linear)",
                  lambda rng, n: (rng.random(n) < Q) * float(STEPS)),
    "mean_times_batch": (f"Σ_t b_t·B/(|B_t| + 1)·C on the audit's {N_AUDIT} records (|B_t| ~ Bin({N_AUDIT}, q))",
                         "estimate (linear; drops the batch mean, ≤ 0.3·C)", lambda rng, n: _scaled_shift(rng, n)),
    "shuffled_batches": ("T/2·C always (5 of 10 steps; a moved record counts once per epoch either way)",
                         "exact (linear)", lambda rng, n: np.full(n, STEPS / 2)),
}
FINAL_NOISE_VAR = {"noise_reused": STEPS ** 2 * SIGMA ** 2}  # else STEPS·SIGMA²


def scale_view(n: int = 3000) -> None:
    """``realised_batch_norm``'s final-model view on the audit's dataset: the noisy sum divided by |B_t| (+1 with the
    canary) changes the final model's noise scale, not its mean along any direction. Plays the zoo trainer (n/2
    trials with the blank canary, labelled least likely by one template, and n without) and reads the oracle score
    −‖θ_T − θ̄‖² (θ̄: the mean of half the canary-free models; the score is read on the other half): its in/out shift
    over the out-scores' sd, against the claim's own √T·q/σ (the projection of a correct trainer's final view). An
    estimate, not a bound."""
    torch.set_num_threads(1)
    d, _, _ = _setup()
    d = d.subset(slice(0, N_AUDIT))
    x, y = d.x.to(torch.float32), d.y
    blank = canaries.blank(d, 1).x.to(torch.float32)
    for bug in ("correct", "realised_batch_norm"):
        tr = Trainer(bug)
        label = plugin.least_likely_labels(tr(x, y, seed=10 ** 6), blank)
        xi, yi = torch.cat([x, blank]), torch.cat([y, label])
        flat = lambda m: torch.cat([p.detach().flatten() for p in m.parameters()]).double()  # noqa: E731
        outs = torch.stack([flat(tr(x, y, seed=30_000 + i)) for i in range(n)])
        ins = torch.stack([flat(tr(xi, yi, seed=20_000 + i)) for i in range(n // 2)])
        ref = outs[: n // 2].mean(0)
        so, si = -((outs[n // 2:] - ref) ** 2).sum(1), -((ins - ref) ** 2).sum(1)
        print(f"{bug}: −‖θ_T − θ̄‖² shift / out sd = {float((si.mean() - so.mean()) / so.std()):.3f} "
              f"({n // 2} in, {n - n // 2} out); the claim's projection reads √T·q/σ = "
              f"{math.sqrt(STEPS) * Q / SIGMA:.3f}", flush=True)


def final_view(reps: int = REACH_REPLICATES, ceiling: int = SEQ_CEILING, futility_z: float | None = None,
               bugs: tuple[str, ...] = (), reading: float = 1.0) -> None:
    """Each bug's final-model view (:data:`FINAL_VIEW`) played through the black-box default's sequential test (each
    audit at 2.5 %, the 14 looks to 20,000), with and without futility (at ``futility_z``; None: the test's default):
    which bugs a final-model score could catch. ``bugs``: only these rows; ``reading``: the score reads each shift at
    this fraction (a direction at an angle to the contribution's; the noise is read in full), 1 the oracle's."""
    from audit import statistics

    zk = {} if futility_z is None else {"futility_z": futility_z}

    _, _, curves = _setup()
    f = curves.best
    curve = lambda a: f(torch.as_tensor(a, dtype=torch.float64)).numpy()  # noqa: E731
    print("| bug | final-model view (units of C) | bound | violations without futility; with futility (median "
          "trials) |")
    print("|---|---|---|---|")
    for bug, (what, bound, shift) in FINAL_VIEW.items():
        if bugs and bug not in bugs:
            continue
        sd = math.sqrt(FINAL_NOISE_VAR.get(bug, STEPS * SIGMA ** 2))
        hits = {True: 0, False: 0}
        spent = []
        for r in range(reps):
            rng = np.random.default_rng(r)
            m = rng.random(ceiling) < 0.5
            sc = sd * rng.standard_normal(ceiling) + np.where(m, reading * shift(rng, ceiling), 0.0)
            for fut in (False, True):
                res = statistics.sequential_test(sc, m, curve, significance=SIGNIFICANCE / 2, max_trials=ceiling,
                                                 futility=fut, **zk)
                hits[fut] += res.violated
                if fut:
                    spent.append(res.trials)
        print(f"| {bug} | {what} | {bound} | {hits[False]}/{reps}; {hits[True]}/{reps} ({int(np.median(spent)):,}; "
              f"mean {round(float(np.mean(spent))):,}) |", flush=True)


def ceiling_tests(reps: int = REACH_REPLICATES, ceiling: int = SEQ_CEILING) -> None:
    """The box test against the exact threshold test at the ceiling look alone (fixed ``ceiling`` trials, its level
    in the default's schedule), on the optimal attack's canonical scores (audit/tightness.py) of ``mask_once``'s exact
    worst case (one Poisson-subsampled Gaussian step, multiplier σ/√T) and of the claim itself: rejections of each."""
    from audit import statistics, tightness

    _, _, curves = _setup()
    f = curves.best
    claim = lambda a: f(torch.as_tensor(a, dtype=torch.float64)).numpy()  # noqa: E731
    level = statistics.look_levels(len(statistics.look_schedule(ceiling)), SIGNIFICANCE / 2)[-1]
    for name, spec in (("mask_once", acc.DPSGD(SIGMA / math.sqrt(STEPS), acc.Poisson(Q), 1)),
                       ("the claim", acc.DPSGD(SIGMA, acc.Poisson(Q), STEPS))):
        cur = comparator.analytical_curves(spec, DELTA).best
        table = tightness._quantile_function(cur)
        box = exact = 0
        for r in range(reps):
            rng = np.random.default_rng(r)
            m = rng.random(ceiling) < 0.5
            xin, xout = tightness.canonical_scores(cur, int(m.sum()), int((~m).sum()), rng=rng, _table=table)
            box += statistics.box_margin(xin, xout, claim, significance=level) > 1e-9
            exact += statistics.threshold_test(xin, xout, claim, significance=level).rejects(level)
        print(f"{name}: {ceiling:,} trials at level {level:.4g}: box test {box}/{reps}, exact test {exact}/{reps}",
              flush=True)


def _black_box_result(rows: list[dict], bug: str) -> str:
    rs = [r for r in rows if r["trainer"] == bug]
    if not rs:
        return "not run"
    seeds = sorted({r["seed"] for r in rs})
    caught = [any(r["caught"] for r in rs if r["seed"] == s) for s in seeds]
    stops = ", ".join(f"{r['design'].removeprefix('bb_').removesuffix('_loss')} {r['stopped']} at {r['trials']:,}"
                      for r in rs)
    verdict = "caught" if all(caught) else "missed" if not any(caught) else "partly"
    return f"{verdict} {sum(caught)}/{len(seeds)} ({stops})"


def ceiling_reach(seq: list[str], reps: int = REACH_REPLICATES, ceiling: int = SEQ_CEILING,
                  futility_z: float | None = None) -> None:
    """Markdown: per bug, its worst-case mechanism, ε, what the optimal attack on it certifies at the ceiling, whether
    the ceiling allows catching it, and the black-box default's measured sequential result (JSONL ``seq``)."""
    import numpy as np

    from audit import statistics, tightness

    _, _, curves = _setup()
    f = curves.best
    claim = lambda a: f(torch.as_tensor(a, dtype=torch.float64)).numpy()  # noqa: E731
    level = statistics.look_levels(len(statistics.look_schedule(ceiling)), SIGNIFICANCE / 2)[-1]
    rows = [json.loads(line) for p in seq for line in Path(p).read_text().splitlines()]
    print(f"claim ε = {curves.epsilon_best:.3f} (δ = {DELTA:g}); ceiling {ceiling:,} trials; each audit at "
          f"{SIGNIFICANCE / 2:g}, the ceiling look at {level:.4g}; {reps} seeded optimal audits per row")
    print("| bug | worst-case mechanism (bound) | worst-case ε | ε_certifiable at the ceiling | optimal attack: "
          "violations (no futility; with futility), median trials | ceiling allows? | black-box sequential |")
    print("|---|---|---|---|---|---|---|")
    notes: list[str] = []
    for bug in BUGS:
        if bug in CORRECT and bug != "correct":
            continue
        wc = worst_case(bug)
        curve = wc.curve()
        eps_cert = tightness.certifiable_epsilon_on_curve(curve, ceiling // 2, ceiling - ceiling // 2, delta=DELTA,
                                                          significance=level, replicates=11)
        hits, _ = optimal_sequential(curve, claim, reps=reps, ceiling=ceiling, futility=False)
        hits_f, spent = optimal_sequential(curve, claim, reps=reps, ceiling=ceiling, futility=True,
                                           futility_z=futility_z)
        witnessed = wc.witness is not None and wc.witness[1] < float(claim(np.array([wc.witness[0]]))[0]) - 0.1
        allowed = ("— (the null)" if bug == "correct" else
                   ("yes" if wc.bound == "exact" else "yes (witness)" if witnessed else "not excluded")
                   if 2 * hits >= reps else "no" if wc.bound in ("exact", "upper") else "no (estimate)")
        if wc.witness is not None:
            a, b = wc.witness
            notes.append(f"{bug}: an achievable test of the transcript has (FPR, FNR) = ({a:g}, {b:.3g}); "
                         f"the claim's curve there: {float(claim(np.array([a]))[0]):.3f}")
        e = wc.epsilon()
        print(f"| {bug} | {wc.mechanism} ({wc.bound}) | {'∞' if math.isinf(e) else f'{e:.2f}'} | {eps_cert:.2f} | "
              f"{hits}/{reps}; {hits_f}/{reps}, {int(np.median(spent)):,} | {allowed} | "
              f"{_black_box_result(rows, bug)} |", flush=True)
    print("", *notes, sep="\n")
    print("\nThe offered canaries' own leak under the bugs they miss (estimates):\n")
    print("| bug | the canaries' leak (estimate) | ε | optimal attack on it: violations (no futility; with futility) |")
    print("|---|---|---|---|")
    for bug, wc in CANARY_ESTIMATES.items():
        hits, _ = optimal_sequential(wc.curve(), claim, reps=reps, ceiling=ceiling, futility=False)
        hits_f, _ = optimal_sequential(wc.curve(), claim, reps=reps, ceiling=ceiling, futility=True,
                                       futility_z=futility_z)
        print(f"| {bug} | {wc.mechanism} | {wc.epsilon():.2f} | {hits}/{reps}; {hits_f}/{reps} |", flush=True)


def table(study: str, fa: str | None) -> None:
    """Markdown: catch rate per (trainer, design) at each N, seconds per 2,000-trial audit; false alarms."""
    rows = [json.loads(line) for line in Path(study).read_text().splitlines()]
    trainers = [t for t in [*BUGS, "opacus_correct"] if any(r["trainer"] == t for r in rows)]
    designs = [dn for dn in DESIGNS if any(r["design"] == dn for r in rows)]
    print("| trainer | " + " | ".join(designs) + " |")
    print("|---|" + "---|" * len(designs))
    for t in trainers:
        cells = []
        for dn in designs:
            rs = [r for r in rows if r["trainer"] == t and r["design"] == dn]
            if not rs:
                cells.append("")
                continue
            c2 = sum(r["caught_2000"] for r in rs)
            c1 = sum(r.get("caught_1000", False) for r in rs)
            c5 = sum(r.get("caught_500", False) for r in rs)
            cells.append(f"{c2}/{len(rs)} ({c1}, {c5})")
        print(f"| {t} | " + " | ".join(cells) + " |")
    print()
    for name, (a, b) in DEFAULTS.items():  # either audit fires at half the significance (seeds run by both)
        cells = []
        for t in trainers:
            half = {dn: {r["seed"]: r["caught_2000_half"] for r in rows if r["trainer"] == t and r["design"] == dn
                         and "caught_2000_half" in r} for dn in (a, b)}
            seeds = sorted(set(half[a]) & set(half[b]))
            if seeds:
                cells.append(f"{t} {sum(half[a][s] or half[b][s] for s in seeds)}/{len(seeds)}")
        if cells:
            print(f"{name} ({a} + {b}, each at {SIGNIFICANCE / 2:g}): " + ", ".join(cells))
    print()
    for dn in designs:
        rs = [r for r in rows if r["design"] == dn]
        print(f"{dn}: {sum(r['seconds'] for r in rs) / len(rs):.1f} s per 2,000-trial audit (mean of {len(rs)})")
    if fa:
        rows = [json.loads(line) for line in Path(fa).read_text().splitlines()]
        print()
        for key in sorted({(r["trainer"], r["design"], r["trials"]) for r in rows}):
            rs = [r for r in rows if (r["trainer"], r["design"], r["trials"]) == key]
            k = sum(r[f"caught_{key[2]}"] for r in rs)
            print(f"false alarms {key[0]} / {key[1]} at {key[2]} trials: {k}/{len(rs)} = {k / len(rs):.3f}; "
                  f"95 % Clopper-Pearson upper bound {clopper_pearson_upper(k, len(rs)):.3f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("study", help="every trainer x design, several seeds, N = 2,000")
    s.add_argument("--out", required=True)
    s.add_argument("--seeds", type=int, default=5)
    s.add_argument("--bugs", default="all")
    s.add_argument("--designs", default="all")
    s.add_argument("--workers", type=int, default=1)
    f = sub.add_parser("false-alarm", help="many seeded audits of the correct trainers under given designs")
    f.add_argument("--out", required=True)
    f.add_argument("--audits", type=int, default=100)
    f.add_argument("--trainers", default="correct")
    f.add_argument("--designs", default="wb_blank_ip,bb_blank_loss")
    f.add_argument("--trials", type=int, default=2000)
    f.add_argument("--workers", type=int, default=1)
    sub.add_parser("sensitivity", help="measured sensitivity of clip_sum and float16_clip")
    sub.add_parser("reach", help="catch rate of an ideal score vs the true sensitivity (no training)")
    cf = sub.add_parser("conformance", help="the default's conformance audit (premise tests) on trainers x seeds")
    cf.add_argument("--out", required=True)
    cf.add_argument("--trainers", default="all")
    cf.add_argument("--seeds", type=int, default=1)
    cf.add_argument("--first-seed", type=int, default=1000)
    cf.add_argument("--trials", type=int, default=2000)
    cf.add_argument("--workers", type=int, default=1)
    rp = sub.add_parser("replay", help="the replay check alone (issue 25) on trainers x seeds, no game")
    rp.add_argument("--out", required=True)
    rp.add_argument("--trainers", default="all")
    rp.add_argument("--seeds", type=int, default=1)
    rp.add_argument("--first-seed", type=int, default=1000)
    rp.add_argument("--workers", type=int, default=1)
    rt = sub.add_parser("replay-table", help="markdown table of the replay JSONL")
    rt.add_argument("path")
    ct = sub.add_parser("conformance-table", help="markdown table of the conformance JSONL")
    ct.add_argument("path")
    sq = sub.add_parser("sequential", help="the black-box default's sequential test on trainers x seeds (issue 25)")
    sq.add_argument("--out", required=True)
    sq.add_argument("--trainers", default="correct")
    sq.add_argument("--designs", default=",".join(SEQ_DESIGNS))
    sq.add_argument("--seeds", type=int, default=5)
    sq.add_argument("--first-seed", type=int, default=1000)
    sq.add_argument("--ceiling", type=int, default=SEQ_CEILING)
    sq.add_argument("--workers", type=int, default=1)
    sq.add_argument("--futility-z", type=float, default=None, help="futility's z (default: the test's FUTILITY_Z)")
    sq.add_argument("--replay-z", default="", help="comma-separated larger z values replayed on the same trials")
    st = sub.add_parser("sequential-table", help="markdown table of the sequential JSONL")
    st.add_argument("path")
    sn = sub.add_parser("sequential-null", help="the sequential test's false alarms and power without training")
    sn.add_argument("--reps", type=int, default=400)
    rc = sub.add_parser("reach-ceiling", help="which bugs the sequential ceiling allows a black-box audit to catch")
    rc.add_argument("seq", nargs="*", help="JSONL files of `sequential` (the black-box results column)")
    rc.add_argument("--reps", type=int, default=REACH_REPLICATES)
    rc.add_argument("--futility-z", type=float, default=None, help="futility's z (default: the test's FUTILITY_Z)")
    sub.add_parser("scale-view", help="realised_batch_norm's final view on the audit's dataset: the noise scale")
    fv = sub.add_parser("final-view", help="each bug's final-model view through the sequential test (issue 25)")
    fv.add_argument("--reps", type=int, default=REACH_REPLICATES)
    fv.add_argument("--futility-z", type=float, default=None, help="futility's z (default: the test's FUTILITY_Z)")
    fv.add_argument("--bugs", default="", help="comma-separated rows of FINAL_VIEW (default: all)")
    fv.add_argument("--reading", type=float, default=1.0, help="the fraction of each shift the score reads")
    ct = sub.add_parser("ceiling-tests", help="box against exact threshold test at the ceiling look (issue 25)")
    ct.add_argument("--reps", type=int, default=REACH_REPLICATES)
    t = sub.add_parser("table", help="markdown table from the JSONL results")
    t.add_argument("study")
    t.add_argument("false_alarm", nargs="?")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.cmd == "study":
        bugs = list(BUGS) if args.bugs == "all" else args.bugs.split(",")
        designs = list(DESIGNS) if args.designs == "all" else args.designs.split(",")
        tasks = [(b, dn, 1000 + s) for s in range(args.seeds) for b in bugs for dn in designs]
        _run_tasks(audit_once, _STUDY_KEY, [(*t, CHECKPOINTS[-1]) for t in tasks], args.out, args.workers)
    elif args.cmd == "false-alarm":
        tasks = [(tr, dn, 5000 + s, args.trials) for s in range(args.audits) for tr in args.trainers.split(",")
                 for dn in args.designs.split(",")]
        _run_tasks(audit_once, _STUDY_KEY, tasks, args.out, args.workers)
    elif args.cmd == "conformance":
        trainers = [*BUGS, "opacus_correct"] if args.trainers == "all" else args.trainers.split(",")
        _run_tasks(conformance_once, ("trainer", "seed", "trials"),
                   [(t, args.first_seed + s, args.trials) for s in range(args.seeds) for t in trainers],
                   args.out, args.workers, "conformance audits",
                   show=lambda r: {k: v for k, v in r.items() if not k.startswith(("finding_", "p_"))})
    elif args.cmd == "replay":
        trainers = [*BUGS, "opacus_correct"] if args.trainers == "all" else args.trainers.split(",")
        if args.trainers == "correct":
            trainers = list(CORRECT)
        _run_tasks(replay_once, ("trainer", "seed"),
                   [(t, args.first_seed + s) for s in range(args.seeds) for t in trainers], args.out, args.workers,
                   "replay checks", show=lambda r: {k: v for k, v in r.items() if k != "finding"})
    elif args.cmd == "replay-table":
        replay_table(args.path)
    elif args.cmd == "sequential":
        rz = tuple(float(z) for z in args.replay_z.split(",") if z)
        _run_tasks(sequential_once, ("trainer", "design", "seed", "ceiling", "futility_z"),
                   [(t, dn, args.first_seed + s, args.ceiling, args.futility_z, rz) for s in range(args.seeds)
                    for t in args.trainers.split(",") for dn in args.designs.split(",")],
                   args.out, args.workers, "sequential audits")
    elif args.cmd == "sequential-table":
        sequential_table(args.path)
    elif args.cmd == "sequential-null":
        sequential_null(args.reps)
    elif args.cmd == "conformance-table":
        conformance_table(args.path)
    elif args.cmd == "sensitivity":
        sensitivity()
    elif args.cmd == "reach":
        reach()
    elif args.cmd == "scale-view":
        scale_view()
    elif args.cmd == "final-view":
        final_view(args.reps, futility_z=args.futility_z, bugs=tuple(b for b in args.bugs.split(",") if b),
                   reading=args.reading)
    elif args.cmd == "ceiling-tests":
        ceiling_tests(args.reps)
    elif args.cmd == "reach-ceiling":
        ceiling_reach(args.seq, args.reps, futility_z=args.futility_z)
    else:
        table(args.study, args.false_alarm)


if __name__ == "__main__":
    main()
