"""Closed-form per-example gradient norms and clipped sums for the models of :mod:`attacks.models`.

DP-SGD needs, per step and model, only two things from the per-example gradients g_i: their norms
‖g_i‖ (for the clip factors) and the weighted sum Σ_i w_i g_i (w_i = draw count × clip factor).
For the cross-entropy loss both have closed forms that never build the B × D tensor of gradients
(the "ghost norm" of Goodfellow 2015 and Li et al. 2022, §4 "ghost clipping"):

* a linear layer z = W a + b with back-propagated error δ_i = ∂ℓ_i/∂z_i has per-example gradients
  ∇_W ℓ_i = δ_i a_iᵀ, ∇_b ℓ_i = δ_i, hence ‖∇_W ℓ_i‖² + ‖∇_b ℓ_i‖² = ‖δ_i‖² (‖a_i‖² + 1) and
  Σ_i w_i ∇_W ℓ_i = (w ⊙ Δ)ᵀ A, one batched matmul;
* softmax cross-entropy has δ_i = softmax(z_i) − onehot(y_i) at the logits;
* a convolution is a linear layer on the unfolded patches (im2col): ∇_W ℓ_i = Δ_i U_iᵀ, whose
  per-example size (c_out × c_in·k²) is small enough to form explicitly (Opacus' conv grad sampler,
  here for R models and B records in one ``einsum``).

The gradients are the exact ones (the same function as ``torch.func.vmap(grad(...))``, summed in a
different order: equal to float round-off; ``tests/attacks/test_ghost.py`` pins the agreement).
Clipping is unchanged: every example's whole gradient is scaled to norm ≤ C before the sum, so
DP-SGD's sensitivity, and the accountant's guarantee, are those of the autograd path.

:func:`for_model` returns the closed form for a known architecture, or None (the trainer then uses
``vmap(grad)``): LogisticRegression, MLP without active dropout, SmallCNN (stride-1 "same" conv,
2×2 average pool), and any of them wrapped in :class:`attacks.models.Slotted` (0 on the slots).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import models as _models

__all__ = ["for_model"]

_SLICE_BYTES = 4 << 20  # size of one large per-step temporary of the CNN path

# (params name -> (R, *shape), x (R, B, *features), y (R, B))
#   -> (squared norms (R, B), w (R, B) -> name -> Σ_i w_i ∇ℓ_i, (R, *shape) up to a reshape)
GhostFn = Callable[[dict[str, Tensor], Tensor, Tensor], tuple[Tensor, Callable[[Tensor], dict[str, Tensor]]]]


def _delta(z: Tensor, y: Tensor) -> Tensor:
    """∂CE/∂logits per example: softmax(z) − onehot(y); z (R, B, K), y (R, B)."""
    # softmax written out: torch.softmax over a short last axis (K = 10) is ~3× slower on CPU
    d = (z - z.amax(dim=-1, keepdim=True)).exp_()
    d = d.div_(d.sum(dim=-1, keepdim=True))
    return d.scatter_add_(-1, y.unsqueeze(-1), torch.full_like(d[..., :1], -1.0))


def _linear_sq(delta: Tensor, a: Tensor) -> Tensor:
    """‖δ aᵀ‖² + ‖δ‖² = ‖δ‖²(‖a‖² + 1), per (model, example)."""
    return _sq(delta) * (_sq(a) + 1.0)


def _sq(v: Tensor) -> Tensor:
    """‖v‖² over the last axis, as a batched dot product (no v ⊙ v temporary)."""
    return torch.einsum("...f,...f->...", v, v)


def _linear_sum(wd: Tensor, a: Tensor) -> tuple[Tensor, Tensor]:
    """Σ_i (w_i δ_i) a_iᵀ and Σ_i w_i δ_i for R models: wd (R, B, K), a (R, B, F) -> (R, K, F), (R, K)."""
    return torch.bmm(wd.transpose(1, 2), a), wd.sum(1)


def _logistic(names: list[str]) -> GhostFn:
    w_name, b_name = names

    def fn(p: dict[str, Tensor], x: Tensor, y: Tensor):
        a = x.flatten(2)
        z = torch.baddbmm(p[b_name].unsqueeze(1), a, p[w_name].transpose(1, 2))
        delta = _delta(z, y)
        sq = _linear_sq(delta, a)

        def weighted_sum(w: Tensor) -> dict[str, Tensor]:
            gw, gb = _linear_sum(w.unsqueeze(-1) * delta, a)
            return {w_name: gw, b_name: gb}

        return sq, weighted_sum

    return fn


def _mlp(names: list[str]) -> GhostFn:
    w1, b1, w2, b2 = names

    def fn(p: dict[str, Tensor], x: Tensor, y: Tensor):
        a = x.flatten(2)
        h = torch.tanh(torch.baddbmm(p[b1].unsqueeze(1), a, p[w1].transpose(1, 2)))
        delta = _delta(torch.baddbmm(p[b2].unsqueeze(1), h, p[w2].transpose(1, 2)), y)
        dh = torch.bmm(delta, p[w2]) * (1.0 - h * h)  # back through the output layer and tanh
        sq = _linear_sq(delta, h) + _linear_sq(dh, a)

        def weighted_sum(w: Tensor) -> dict[str, Tensor]:
            w = w.unsqueeze(-1)
            g1w, g1b = _linear_sum(w * dh, a)
            g2w, g2b = _linear_sum(w * delta, h)
            return {w1: g1w, b1: g1b, w2: g2w, b2: g2b}

        return sq, weighted_sum

    return fn


def _cnn(names: list[str], conv: nn.Conv2d) -> GhostFn:
    wc, bc, wo, bo = names
    k, pad = conv.kernel_size, conv.padding
    assert isinstance(pad, tuple)  # a string padding ("same") is refused before a model gets here

    def per_example(p: dict[str, Tensor], x: Tensor, y: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """delta, pooled activations, conv weight and bias gradients of every (model, example)."""
        R, B, cin, H, W = x.shape
        c = p[wc].shape[1]
        # im2col as k² shifted slices of the padded images: F.unfold's layout (channel, then kernel
        # offset), 10× faster than F.unfold for these small images
        xp = F.pad(x.reshape(R * B, cin, H, W), (pad[1], pad[1], pad[0], pad[0]))
        u = torch.stack([xp[:, :, i : i + H, j : j + W] for i in range(k[0]) for j in range(k[1])], dim=2)
        u = u.reshape(R, B, cin * k[0] * k[1], H * W)
        z = torch.matmul(p[wc].flatten(2).unsqueeze(1), u)  # (R, B, c, L)
        # tanh(z) = 2·sigmoid(2z) − 1: 2× faster than torch.tanh in float64 on CPU, equal to ~1e-16
        a = torch.sigmoid_(z.add_(p[bc][:, None, :, None]).mul_(2.0)).mul_(2.0).sub_(1.0)
        pooled = F.avg_pool2d(a.reshape(R * B, c, H, W), 2).reshape(R, B, -1)
        delta = _delta(torch.baddbmm(p[bo].unsqueeze(1), pooled, p[wo].transpose(1, 2)), y)
        dpool = (torch.bmm(delta, p[wo]) * 0.25).reshape(R, B, c, H // 2, 1, W // 2, 1)
        # the adjoint of 2×2 average pooling spreads each error over its four pixels, 1/4 each
        da = dpool.expand(R, B, c, H // 2, 2, W // 2, 2).reshape(R, B, c, H * W)
        dz = torch.ops.aten.tanh_backward(da, a)  # da ⊙ (1 − a²)
        gconv = torch.einsum("rbcl,rbfl->rbcf", dz, u)  # (R, B, c, cin·k²): small, formed per example
        return delta, pooled, gconv, dz.sum(-1)

    def fn(p: dict[str, Tensor], x: Tensor, y: Tensor):
        R, B = x.shape[:2]
        # a few models at a time: the (models, B, c, H·W) temporaries stay a few MB, so the allocator
        # reuses them instead of mapping fresh pages for every step (page faults cost more than the maths)
        per = B * p[wc].shape[1] * x[0, 0].numel() * x.element_size()
        rows = max(1, _SLICE_BYTES // max(1, per))
        parts = [per_example({n: v[i : i + rows] for n, v in p.items()}, x[i : i + rows], y[i : i + rows])
                 for i in range(0, R, rows)]
        delta, pooled, gconv, gbias = (torch.cat(t) if len(parts) > 1 else t[0] for t in zip(*parts, strict=True))
        sq = _linear_sq(delta, pooled) + _sq(gconv.flatten(-2)) + _sq(gbias)

        def weighted_sum(w: Tensor) -> dict[str, Tensor]:
            gcw = torch.einsum("rb,rbcf->rcf", w, gconv)
            gcb = torch.einsum("rb,rbc->rc", w, gbias)
            gow, gob = _linear_sum(w.unsqueeze(-1) * delta, pooled)
            return {wc: gcw, bc: gcb, wo: gow, bo: gob}

        return sq, weighted_sum

    return fn


def _slotted(inner: GhostFn, slots: str, m: int) -> GhostFn:
    """The closed form of a :class:`attacks.models.Slotted` model: the inner model's, and 0 on the slots
    (the forward pass never reads them, so every per-example gradient is 0 there)."""

    def fn(p: dict[str, Tensor], x: Tensor, y: Tensor):
        sq, inner_sum = inner(p, x, y)

        def weighted_sum(w: Tensor) -> dict[str, Tensor]:
            return {**inner_sum(w), slots: w.new_zeros(w.shape[0], m)}

        return sq, weighted_sum

    return fn


def for_model(model: nn.Module, prefix: str = "") -> GhostFn | None:
    """The closed form for ``model``'s architecture, or None when it has none here (use autograd).

    Only the exact classes of :mod:`attacks.models` qualify (a subclass may change ``forward``), and a
    :class:`attacks.models.Slotted` wrapper of one of them. ``prefix``: the parameter names' prefix
    (the wrapped model's "model.").
    """
    if type(model) is _models.Slotted:
        inner = for_model(model.model, prefix + "model.")
        return None if inner is None else _slotted(inner, prefix + _models.Slotted.SLOTS, model.padding.slots.numel())
    names = [prefix + name for name, _ in model.named_parameters()]
    if type(model) is _models.LogisticRegression:
        return _logistic(names)
    if type(model) is _models.MLP and (model.dropout.p == 0.0 or not model.training):
        return _mlp(names)
    if type(model) is _models.SmallCNN:
        conv, pool = model.conv, model.pool
        same = isinstance(conv.padding, tuple) and all(
            2 * pd == ks - 1 for pd, ks in zip(conv.padding, conv.kernel_size, strict=True))
        if (same and conv.stride == (1, 1) and conv.dilation == (1, 1) and conv.groups == 1
                and conv.padding_mode == "zeros" and pool.kernel_size == 2 and pool.stride == 2
                and pool.padding == 0 and not pool.ceil_mode):
            return _cnn(names, conv)
    return None
