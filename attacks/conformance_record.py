"""What one white-box trial shows about the three premises of the DP-SGD proof (the per-trial half of
:mod:`audit.conformance`, which tests them over all trials).

**The conformance canary** (:func:`dead_feature`, canary kind ``"dead_feature"``): the data's mean record
(x = 0 in model space) with a large value L on a *dead* feature, one that is exactly 0 in every natural
record. For any model whose first layer is affine, the weights on a dead feature receive no gradient from
any natural record, at any parameters. So the coordinates split in three:

- K, the dead coordinates the canary's gradient touches: canary + noise only;
- R, the other dead coordinates: **noise only**, the reference for the noise's scale in the update's
  own units (whatever the learning rate or normalisation);
- the rest: natural gradients + noise (+ the canary's small bias part).

L is large, so the canary's gradient norm is many C and the clipped contribution puts ≈ C (exactly
C·L/√(L²+1) for a softmax regression) on K at every step it is in the batch.

**What the update is.** A trainer may call ``audit.record_update(privatised_gradient)`` once per step
with the noisy clipped sum (any positive constant multiple, e.g. the noisy mean, one tensor per
parameter, before the optimizer): the tests then read it, whatever the optimizer does with it
(momentum, Adam). Otherwise the update is θ_{t−1} − θ_t, which for plain SGD is a positive multiple
(the learning rate over the expected batch size, any schedule) of the noisy sum.

Per trial and step t this records (:func:`trial_stats`): ``y`` the update on K projected on the
canary's K-gradient direction at θ_{t−1}; ``ss`` = ‖u_t[R]‖² (df = |R|); per parameter tensor the sum
of squares of its non-dead coordinates; ``f2`` the fraction of ‖u_t[R]‖² not in the span of the
earlier steps' u_s[R] (fresh noise); the canary gradient's smallest norm over the steps (in C); ``p1`` the
first update projected on the canary's gradient at θ_0 per parameter tensor and on the natural records'
summed gradient at θ_0 (orthonormalised: :func:`_first_step_projections`); ``bl`` the update projected on
the unit gradient of the data's record 0 at θ_{t−1} (None where that gradient vanishes) and ``n`` the
number of natural records, for the batch-law test (:func:`copied_records` makes record 0 the copied one).

**The audit's dataset** (:func:`copied_records`, Poisson claims): copies of one natural record plus one
record of each other class, so that the natural records' clipped contributions on the copied record's
gradient are (nearly) equal and the batch's Binomial law shows in the projected update's variance.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from accountants import validate as check
from accountants.errors import InputError

from .canaries import InputCanaries
from .data import Dataset

__all__ = ["KIND", "copied_records", "dead_feature", "dead_features", "trial_stats"]

KIND = "dead_feature"
FRESH_FLOOR = 1e-8  # f² below this: no fresh noise at that step (float32 round-off of reused noise is ~1e-13)


def dead_features(x: Tensor) -> list[int]:
    """Flat feature indices that are exactly 0 in every record of ``x`` (N, *features)."""
    return (x.reshape(x.shape[0], -1) == 0).all(dim=0).nonzero().flatten().tolist()


def dead_feature(data: Dataset, m: int = 1, *, value: float = 20.0,
                 generator: torch.Generator | None = None) -> InputCanaries:
    """m conformance canaries: x = 0 (the mean record) but ``value`` on the first dead feature; random labels.

    Raises InputError when the data has fewer than two dead features (one for the canary, one or more
    as the noise reference).
    """
    check.integer(1, None, m=m)
    check.positive(value=value)
    dead = dead_features(data.x)
    if len(dead) < 2:
        raise InputError(f"canary kind 'dead_feature' needs at least two features that are 0 in every record of "
                         f"{data.name!r} (one for the canary, the others as the noise reference); it has {len(dead)}")
    x = torch.zeros(m, *data.feature_shape, dtype=data.x.dtype)
    x.view(m, -1)[:, dead[0]] = value
    y = torch.randint(0, data.num_classes, (m,), generator=generator)
    return InputCanaries(x, y, KIND)


def copied_records(data: Dataset, n: int) -> Dataset:
    """n records: record 0 of ``data`` copied, then the first record of each other class among data's first n.

    The conformance audit's dataset under a Poisson claim (audit.conformance.natural_records gives n). Every
    class of the first n records stays present, so a trainer that infers the number of classes from y builds
    the same model. Where n leaves no room for a copy beside them, the first n records are returned.
    """
    check.integer(1, data.n, n=n)
    head = data.subset(slice(0, n))
    others: list[int] = []
    for c in torch.unique(head.y).tolist():
        if c != int(head.y[0]):
            others.append(int((head.y == c).nonzero()[0]))
    if n - len(others) < 2:
        return head
    index = torch.tensor([0] * (n - len(others)) + others, dtype=torch.int64)
    return head.subset(index)


def _flat_grad(model: nn.Module, named: list, flat: Tensor, x: Tensor, y: Tensor, w: Tensor | None) -> Tensor:
    params, k = {}, 0
    for key, p in named:
        params[key] = flat[k:k + p.numel()].view_as(p).to(p.dtype).detach().requires_grad_(True)
        k += p.numel()
    z = torch.func.functional_call(model, params, (x,))
    loss = nn.functional.cross_entropy(z, y, reduction="none")
    loss = loss.sum() if w is None else (loss * w).sum()
    gs = torch.autograd.grad(loss, list(params.values()), allow_unused=True)
    return torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1) for g, (_, p) in zip(gs, named,
                                                                                                strict=True)]).double()


def _canary_grads(model: nn.Module, named: list, thetas: Tensor, x: Tensor, y: Tensor) -> Tensor:
    """The canary's gradient at each row of ``thetas`` (one vmapped pass; a loop where vmap cannot run)."""
    sizes = [p.numel() for _, p in named]

    def loss(flat: Tensor) -> Tensor:
        params = {k: v.view_as(p).to(p.dtype) for (k, p), v in zip(named, flat.split(sizes), strict=True)}
        return nn.functional.cross_entropy(torch.func.functional_call(model, params, (x,)), y)

    try:
        return torch.func.vmap(torch.func.grad(loss))(thetas).double()
    except Exception:  # a model that vmap cannot trace (data-dependent control flow, in-place buffers)
        return torch.stack([_flat_grad(model, named, th, x, y, None) for th in thetas])


def _updates(trace: list[Tensor], recorded: list[list[Tensor]] | None, dim: int) -> tuple[Tensor, str]:
    theta = torch.stack(trace)
    if recorded:
        if len(recorded) != theta.shape[0] - 1:
            raise InputError(f"audit.record_update must be called once per step: {len(recorded)} calls for "
                             f"{theta.shape[0] - 1} steps")
        u = torch.stack([torch.cat([t.detach().reshape(-1).double() for t in r]) for r in recorded])
        if u.shape[1] != dim:
            raise InputError(f"audit.record_update got {u.shape[1]} numbers per step; the model has {dim} parameters")
        return u, "record_update"
    return theta[:-1] - theta[1:], "parameters"


def _fresh(ur: Tensor) -> list[float]:
    """f²_t for t = 2..T (while t−1 < |R|): the share of ‖u_t[R]‖² orthogonal to u_1[R], …, u_{t−1}[R]."""
    out = []
    for t in range(1, min(ur.shape[0], ur.shape[1])):
        v = ur[t]
        nv = float(v @ v)
        if nv == 0.0:
            out.append(0.0)
            continue
        q, _ = torch.linalg.qr(ur[:t].T)  # orthonormal basis of the earlier steps (rank-deficient: still a basis)
        res = v - q @ (q.T @ v)
        out.append(min(1.0, float(res @ res) / nv))
    return out


def trial_stats(model: nn.Module, trace: list[Tensor], recorded: list[list[Tensor]] | None, data: Dataset,
                canary: InputCanaries, clip_norm: float, member: bool) -> dict[str, Any]:
    """The per-step conformance statistics of one trial (module doc); JSON-ready.

    Raises InputError when the recorded traces are unusable (wrong counts, non-finite updates, no dead
    coordinate in the model's parameters).
    """
    named = list(model.named_parameters())
    dim = sum(p.numel() for _, p in named)
    u, mode = _updates(trace, recorded, dim)
    if not torch.isfinite(u).all():
        raise InputError("the recorded updates hold NaN or inf: the conformance tests need finite updates")
    theta = torch.stack(trace)
    x, y = data.x.to(torch.float32), data.y
    xi = 0.5 + torch.rand(x.shape[0], generator=torch.Generator().manual_seed(0))  # a.s. no cancellation
    dead = torch.ones(dim, dtype=torch.bool)
    for th in (theta[0], theta[-1]):
        dead &= _flat_grad(model, named, th, x, y, xi) == 0
    xc, yc = canary.x[:1].to(torch.float32), canary.y[:1]
    g = _canary_grads(model, named, theta[:-1], xc, yc)  # (T, D) at θ_0, …, θ_{T−1}
    touched = (g != 0).any(dim=0)
    kk, rr = dead & touched, dead & ~touched
    if int(kk.sum()) == 0 or int(rr.sum()) == 0:
        raise InputError(f"the conformance canary needs parameters that no natural record's gradient touches, some "
                         f"touched by the canary and some not; found {int(kk.sum())} and {int(rr.sum())}")
    gk = g[:, kk]
    gk_norm = gk.norm(dim=1, keepdim=True)
    yk = (u[:, kk] * gk / gk_norm.clamp_min(1e-300)).sum(dim=1)
    ur = u[:, rr]
    tensors, k = {}, 0
    for key, p in named:
        sl = slice(k, k + p.numel())
        live = ~dead[sl]
        if int(live.sum()):
            tensors[key] = {"n": int(live.sum()), "ss": [float(v) for v in (u[:, sl][:, live] ** 2).sum(dim=1)]}
        k += p.numel()
    return {"mode": mode, "member": bool(member), "df": int(rr.sum()), "k": int(kk.sum()),
            "y": [float(v) for v in yk], "ss": [float(v) for v in (ur ** 2).sum(dim=1)], "tensors": tensors,
            "f2": _fresh(ur), "gnorm_min": float(g.norm(dim=1).min()) / clip_norm,
            "p1": _first_step_projections(model, named, theta[0], g[0], u[0], x, y),
            "bl": _record_projections(model, named, theta[:-1], u, x[:1], y[:1]), "n": int(x.shape[0])}


def _record_projections(model: nn.Module, named: list, thetas: Tensor, u: Tensor, x0: Tensor, y0: Tensor
                        ) -> list[float | None]:
    """Each update u_t projected on the unit gradient of record (x0, y0) at θ_{t−1} (None where it vanishes)."""
    g = _canary_grads(model, named, thetas, x0, y0)
    norm = g.norm(dim=1)
    proj = (u * g).sum(dim=1) / norm.clamp_min(1e-300)
    return [float(p) if float(nv) > 0 and bool(torch.isfinite(p)) else None for p, nv in zip(proj, norm, strict=True)]


def _first_step_projections(model: nn.Module, named: list, theta0: Tensor, g0: Tensor, u1: Tensor, x: Tensor,
                            y: Tensor) -> list[float]:
    """The first update projected on directions fixed by θ_0 and the data alone (``total_contribution`` test).

    The directions, orthonormalised in this order: the canary's gradient at θ_0 restricted to each parameter
    tensor (one per tensor; zero where the canary does not touch it), then the natural records' summed
    gradient at θ_0 (the direction a clipped *sum* would lose when the canary dominates it). A direction
    that vanishes (or lies in the span of the earlier ones) projects to 0.
    """
    vecs, k = [], 0
    for _, p in named:
        v = torch.zeros_like(g0)
        v[k:k + p.numel()] = g0[k:k + p.numel()]
        vecs.append(v)
        k += p.numel()
    vecs.append(_flat_grad(model, named, theta0, x, y, None))
    out: list[float] = []
    basis: list[Tensor] = []
    for v in vecs:
        for b in basis:
            v = v - (b @ v) * b
        nv = float(v.norm())
        if nv <= 1e-9 * max(1.0, float(u1.norm())) or not torch.isfinite(v).all():
            out.append(0.0)
            continue
        basis.append(v / nv)
        out.append(float(basis[-1] @ u1))
    return out
