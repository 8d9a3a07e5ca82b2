"""The bug zoo's optimizers with state (benchmarks/bench_fault_detection.py, issue 25): each is the torch.optim
algorithm it names, and the zoo's bugs on top of a stateful step are caught by the premise tests.

The correct stateful trainers' level is measured in docs/fault-detection.md ("Optimizers beyond Adam"); the gate
that reads them is tested in tests/audit/test_conformance.py (``test_stateful_optimizer_passes_gated_...``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
try:
    import bench_fault_detection as bench
finally:
    sys.path.pop(0)

_TORCH = {  # the zoo's optimizer and the torch.optim one it claims to be, at the zoo's settings
    "adamw": (lambda: bench._Adam(bench.ADAM_LR, bench.ADAM_BETAS, bench.ADAM_EPS, decay=bench.ADAMW_DECAY),
              lambda ps: torch.optim.AdamW(ps, lr=bench.ADAM_LR, betas=bench.ADAM_BETAS, eps=bench.ADAM_EPS,
                                           weight_decay=bench.ADAMW_DECAY)),
    "adam_beta1_0": (lambda: bench._Adam(bench.ADAM_LR, (0.0, 0.999), 0.12),
                     lambda ps: torch.optim.Adam(ps, lr=bench.ADAM_LR, betas=(0.0, 0.999), eps=0.12)),
    "rmsprop": (lambda: bench._RMSprop(bench.RMSPROP_LR, bench.RMSPROP_ALPHA, bench.ADAM_EPS),
                lambda ps: torch.optim.RMSprop(ps, lr=bench.RMSPROP_LR, alpha=bench.RMSPROP_ALPHA, eps=bench.ADAM_EPS)),
    "nesterov": (lambda: bench._SGD(bench.LR, 0.9, bench.NESTEROV_DECAY, nesterov=True),
                 lambda ps: torch.optim.SGD(ps, lr=bench.LR, momentum=0.9, weight_decay=bench.NESTEROV_DECAY,
                                            nesterov=True)),
    "heavy_ball": (lambda: bench._SGD(bench.LR, 0.9, 0.0, nesterov=False),
                   lambda ps: torch.optim.SGD(ps, lr=bench.LR, momentum=0.9)),
}


@pytest.mark.parametrize("name", sorted(_TORCH))
def test_zoo_optimizer_is_the_torch_optimizer(name):
    # oracle: torch.optim (the installed torch), float64, 10 steps of gradients of the zoo's size (noise std 0.06 per
    # coordinate); the two compute the same formulas in a different order: tolerance 1e-12 (measured ≤ 3e-15)
    mine, theirs = _TORCH[name]
    g = torch.Generator().manual_seed(0)
    params = [torch.randn(10, 64, generator=g, dtype=torch.float64), torch.randn(10, generator=g, dtype=torch.float64)]
    ref = [p.clone().requires_grad_() for p in params]
    opt, step = theirs(ref), mine()
    for _ in range(10):
        grads = [0.06 * torch.randn(p.shape, generator=g, dtype=torch.float64) for p in params]
        params = [p - d for p, d in zip(params, step.step(params, grads), strict=True)]
        for r, gi in zip(ref, grads, strict=True):
            r.grad = gi.clone()
        opt.step()
    for p, r in zip(params, ref, strict=True):
        assert torch.allclose(p, r.detach(), rtol=0, atol=1e-12)


@pytest.mark.parametrize("bug", ["momentum_noise_after", "rmsprop_noise_after"])
def test_noise_added_after_a_stateful_step_is_caught_by_contribution(bug):
    # the optimizer's state carries noise-free clipped sums, so the canary's earlier inclusions echo in every later
    # step (momentum: about 4 C per step it is in at 2,000 trials, docs/fault-detection.md): the contribution test
    # rejects at the default's level 0.05/3/2/10 on 40 trials (p ≈ 5e-26 at 120 trials for the momentum bug)
    rec = bench.conformance_once(bug, 7, 40)
    assert rec["rej_contribution"] and rec["caught"], rec["finding_contribution"]
