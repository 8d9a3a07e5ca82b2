"""Parts shared by the tests' hand-written DP-SGD trainers (softmax regression on digits)."""

from __future__ import annotations

import torch


def linear_model(w: torch.Tensor, b: torch.Tensor) -> torch.nn.Linear:
    """The trained softmax-regression weights (10 × features) and bias as the model a trainer returns."""
    m = torch.nn.Linear(w.shape[1], w.shape[0])
    with torch.no_grad():
        m.weight.copy_(w)
        m.bias.copy_(b)
    return m
