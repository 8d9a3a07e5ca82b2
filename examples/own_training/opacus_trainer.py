"""A DP-SGD trainer with Opacus (PrivacyEngine's building blocks, Poisson sampling), auditable by dpaudit.

The claim it implements is the [training] section of opacus.toml: noise multiplier 3, Poisson
sampling at rate 0.5, 10 steps, clip norm 1, add/remove neighbours.

The sample-rate pitfall. ``PrivacyEngine.make_private`` derives q = 1/len(data_loader): with
batch size 50, 100 records give q = 1/2 but 101 records (one canary more) give q = 1/3, so
adding a record would change the mechanism that the claim describes. This trainer fixes the
rate instead: it builds Opacus' ``DPDataLoader`` with ``sample_rate=SAMPLE_RATE`` and a
``DPOptimizer`` with a constant ``expected_batch_size`` — exactly what ``make_private`` wires up,
minus the derived q. (With ``make_private``, pass ``poisson_sampling=False`` and such a
``DPDataLoader`` yourself, and check ``optimizer.expected_batch_size``.)

White box (docs/own-training.md): with ``audit``, the gradient canary is appended to Opacus'
per-sample gradients (``p.grad_sample``) before ``optimizer.step()``, so Opacus' own clipping,
summing and noise process it, and the parameters are recorded before and after every step.
"""

import warnings

import torch
from opacus.data_loader import DPDataLoader
from opacus.grad_sample import GradSampleModule
from opacus.optimizers import DPOptimizer

NOISE_MULTIPLIER, SAMPLE_RATE, STEPS, CLIP_NORM, LEARNING_RATE = 3.0, 0.5, 10, 1.0, 0.5
EXPECTED_BATCH = 50  # q * 100 natural records, fixed: the canary must not change the normalisation


def train(x: torch.Tensor, y: torch.Tensor, *, seed: int, audit=None) -> torch.nn.Module:
    """Opacus DP-SGD; returns the trained (unwrapped) model."""
    g = torch.Generator().manual_seed(seed)
    net = torch.nn.Linear(x.shape[1], 10)
    with torch.no_grad():  # a fixed start (in practice often a pretrained checkpoint)
        net.weight.zero_()
        net.bias.zero_()
    model = GradSampleModule(net)
    optimizer = DPOptimizer(torch.optim.SGD(model.parameters(), lr=LEARNING_RATE), noise_multiplier=NOISE_MULTIPLIER,
                            max_grad_norm=CLIP_NORM, expected_batch_size=EXPECTED_BATCH, generator=g)
    loader = DPDataLoader(torch.utils.data.TensorDataset(x, y), sample_rate=SAMPLE_RATE, generator=g)
    if audit is not None:
        audit.record(model.parameters())
    step = 0
    while step < STEPS:
        for xb, yb in loader:
            optimizer.zero_grad()
            with warnings.catch_warnings():  # torch warns that the input needs no gradient: expected here
                warnings.simplefilter("ignore", UserWarning)
                torch.nn.functional.cross_entropy(model(xb), yb).backward()
            if audit is not None:  # the gradient-canary hook, inside Opacus' per-sample gradients
                c = audit.canary_gradients(model.parameters())  # one per sampled canary (one-run: several)
                if c is not None:
                    for p, ci in zip(model.parameters(), c, strict=True):
                        p.grad_sample = torch.cat([p.grad_sample, ci.to(p.grad_sample.dtype)])
            optimizer.step()
            if audit is not None:
                audit.record(model.parameters())
            step += 1
            if step == STEPS:
                break
    model.remove_hooks()  # hand back the plain module, without Opacus' per-sample-gradient hooks
    return net
