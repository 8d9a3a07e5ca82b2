"""BUGGY twin of torch_trainer.py: one realistic bug, marked BUG (the noise is divided by the batch size twice).

The claim it implements is the [training] section of torch.toml: noise multiplier 3, Poisson
sampling at rate 0.5, 10 steps, clip norm 1, add/remove neighbours. dpaudit calls
``train(x, y, seed=...)`` once per trial (black box) or ``train(x, y, seed=..., audit=...)``
(white box: docs/own-training.md). Nothing here imports dpaudit.
"""

import torch

NOISE_MULTIPLIER, SAMPLE_RATE, STEPS, CLIP_NORM, LEARNING_RATE = 3.0, 0.5, 10, 1.0, 0.5
EXPECTED_BATCH = 50  # q * 100 natural records: a constant, so the update does not reveal the batch size


def per_example_gradients(w: torch.Tensor, b: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    """Gradients of each record's cross-entropy for the model x -> x @ w.T + b: [(B, K, D), (B, K)]."""
    r = torch.softmax(x @ w.T + b, dim=1) - torch.nn.functional.one_hot(y, w.shape[0]).to(x.dtype)
    return [r[:, :, None] * x[:, None, :], r]


def train(x: torch.Tensor, y: torch.Tensor, *, seed: int, audit=None) -> torch.nn.Module:
    """DP-SGD: Poisson batches, per-example clipping to C, one Gaussian draw N(0, (σC)²) per step on the sum."""
    g = torch.Generator().manual_seed(seed)
    model = torch.nn.Linear(x.shape[1], 10)
    # a fixed start (zeros; in practice often a pretrained checkpoint): all randomness is DP-SGD's own
    w, b = torch.zeros_like(model.weight.detach()), torch.zeros_like(model.bias.detach())
    if audit is not None:
        audit.record([w, b])  # white box: the parameters before the first step
    for _ in range(STEPS):
        mask = torch.rand(x.shape[0], generator=g) < SAMPLE_RATE  # Poisson sampling: each record independently
        grads = per_example_gradients(w, b, x[mask], y[mask])
        if audit is not None:  # the gradient-canary hook: one more per-example gradient per sampled canary
            c = audit.canary_gradients([w, b])
            if c is not None:
                grads = [torch.cat([gi, ci]) for gi, ci in zip(grads, c, strict=True)]
        norms = torch.cat([gi.flatten(1) for gi in grads], dim=1).norm(dim=1)
        factor = torch.clamp(CLIP_NORM / (norms + 1e-12), max=1.0)  # clip each example to norm C
        sums = [(gi * factor.view(-1, *[1] * (gi.ndim - 1))).sum(dim=0) for gi in grads]
        # BUG: the noise std is divided by the batch size here AND again below with the sum: sigma*C/B^2
        noisy = [s + NOISE_MULTIPLIER * CLIP_NORM / EXPECTED_BATCH * torch.randn(s.shape, generator=g) for s in sums]
        w = w - LEARNING_RATE * noisy[0] / EXPECTED_BATCH
        b = b - LEARNING_RATE * noisy[1] / EXPECTED_BATCH
        if audit is not None:
            audit.record([w, b])  # white box: the parameters after every step
    with torch.no_grad():
        model.weight.copy_(w)
        model.bias.copy_(b)
    return model
