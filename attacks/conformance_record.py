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

summed gradient at θ_0 (orthonormalised: :func:`_first_step_projections`); ``probe`` the second canary's
record (:class:`ProbeHook`, :func:`probe_stats`): per step its coin ``s`` and the update projected on the
natural records' summed gradient per tensor at θ_{t−1}, ``p`` (the ``canary_effect`` test).

**The probe.** Under a Poisson claim the white-box hook (``audit.canary_gradient``), which has no
gradient canary to hand out in this game, hands out a probe instead: a gradient of 1000·(‖S‖ + C)
against the natural records' summed gradient S, included at each step by a fair coin of dpaudit's
own. The coin is independent of everything before it, so the difference of the update's mean with and
without the probe at a step is the probe's causal effect, whatever the trainer; a correct DP-SGD
clips it to at most C (:class:`ProbeHook`, audit/conformance.py ``canary_effect``).
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from accountants import validate as check
from accountants.errors import InputError

from .canaries import InputCanaries
from .data import Dataset

__all__ = ["KIND", "ProbeHook", "copied_records", "dead_feature", "dead_features", "probe_stats", "trial_stats"]

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
                canary: InputCanaries, clip_norm: float, member: bool, probe: ProbeHook | None = None,
                probe_skip: str | None = None) -> dict[str, Any]:
    """The per-step conformance statistics of one trial (module doc); JSON-ready.

    ``probe``: the trial's :class:`ProbeHook` (None: no probe, for the reason ``probe_skip``).

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
            "bl": _record_projections(model, named, theta[:-1], u, x[:1], y[:1]), "n": int(x.shape[0]),
            "probe": probe_stats(probe, u, probe_skip)}


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


# ------------------------------------------------------------------------------------ the probe (canary_effect)

PROBE_EPS = 0.1  # ε: the probe's share on every tensor beside −Ŝ (module doc, "The probe")
PROBE_SCALE = 1000.0  # λ = PROBE_SCALE·(‖S‖ + C): the probe dominates any sum of clipped or unclipped natural gradients
PROBE_DIRECTIONS = 16  # at most this many directions: the 15 tensors with the largest share of S, then the rest


class ProbeHook:
    """The conformance game's second canary, a gradient *probe* handed out by the white-box hook
    (``audit.canary_gradient``): at each step it is included with probability ½ (a fair coin from
    dpaudit's own generator, independent of the trainer's randomness and of the history), and its
    gradient at the hook's parameters θ is

        g = −λ·(Ŝ + ε·Σ_l ê_l/√L),   λ = 1000·(‖S‖ + C),

    S the natural records' summed cross-entropy gradient at θ (through ``template``, the trainer's
    architecture, by ``torch.func.functional_call``), Ŝ = S/‖S‖, ê_l the unit restriction of S to parameter
    tensor l (tensors with S_l = 0 left out), L their number. It opposes the batch (a clipped *sum* flips
    from +C·Ŝ to −C·Ŝ) and is ≫ C in every tensor (per-tensor clipping gives √L·C); S is 0 on dead
    coordinates, so the dead_feature canary's K and R never see it. Per step it keeps the coin and S
    (:func:`probe_stats` projects the update on S's per-tensor directions after the trial).
    """

    def __init__(self, template: nn.Module | None, x: Tensor, y: Tensor, clip_norm: float,
                 generator: torch.Generator, disabled: str | None = None) -> None:
        self._model, self._x, self._y, self._c, self._gen = template, x, y, float(clip_norm), generator
        self.disabled = disabled if template is not None or disabled is not None else "no template model"
        self.names = [] if template is None else [k for k, _ in template.named_parameters()]
        self.steps: list[int] = []  # per call: the step it belongs to (the number of recorded parameters − 1)
        self.included: list[bool] = []
        self.grads: list[list[Tensor] | None] = []  # per call: S per tensor (float64), None where S = 0
        self.sizes: list[int] | None = None

    def gradient(self, params: list[Tensor], step: int) -> list[Tensor] | None:
        """The probe's per-example gradient this step (shapes and dtypes of ``params``), or None when left out."""
        coin = bool(torch.rand((), generator=self._gen, dtype=torch.float64) < 0.5)  # drawn at every call
        self.steps.append(step)
        s = None if self.disabled is not None else self._natural_gradient(params)
        self.grads.append(s)
        self.included.append(coin and s is not None)
        if not self.included[-1]:
            return None
        assert s is not None
        norms = [float(v.norm()) for v in s]
        total = math.sqrt(sum(v * v for v in norms))
        live = sum(v > 0 for v in norms)
        lam = PROBE_SCALE * (total + self._c)
        return [(-lam * (v / total + PROBE_EPS * v / max(nv, 1e-300) / math.sqrt(live))).to(p.device, p.dtype).detach()
                for v, nv, p in zip(s, norms, params, strict=True)]

    def _natural_gradient(self, params: list[Tensor]) -> list[Tensor] | None:
        """S at ``params`` per tensor (float64); None (and the probe disabled, with the reason) on a mismatch."""
        assert self._model is not None
        shapes = [tuple(p.shape) for p in params]
        want = [tuple(p.shape) for _, p in self._model.named_parameters()]
        if shapes != want:
            self.disabled = (f"the hook's parameters (shapes {shapes}) are not the returned model's parameters() "
                             f"(shapes {want}): pass model.parameters() to audit.canary_gradient")
            return None
        self.sizes = [p.numel() for p in params]
        ps = {k: p.detach().clone().requires_grad_(True) for k, p in zip(self.names, params, strict=True)}
        try:
            dev = params[0].device
            z = torch.func.functional_call(self._model, ps, (self._x.to(dev, params[0].dtype),))
            loss = nn.functional.cross_entropy(z, self._y.to(dev), reduction="sum")
            gs = torch.autograd.grad(loss, list(ps.values()), allow_unused=True)
        except Exception as exc:  # a model functional_call cannot run: the test is skipped, never failed
            self.disabled = (f"the probe cannot evaluate the model at the hook's parameters "
                             f"({type(exc).__name__}: {exc})")
            return None
        s = [(torch.zeros_like(p) if g is None else g).detach().to("cpu", torch.float64) for g, p in
             zip(gs, ps.values(), strict=True)]
        if not all(bool(torch.isfinite(v).all()) for v in s) or all(float(v.norm()) == 0.0 for v in s):
            return None  # no direction at this step: the probe sits it out (a function of θ only, not of the coin)
        return s


def _probe_groups(norms: list[float]) -> list[list[int]]:
    """The direction groups: each live tensor alone (parameter order), or the 15 largest and the rest together."""
    live = [i for i, v in enumerate(norms) if v > 0]
    if len(live) <= PROBE_DIRECTIONS:
        return [[i] for i in live]
    top = sorted(sorted(live, key=lambda i: -norms[i])[:PROBE_DIRECTIONS - 1])
    return [[i] for i in top] + [[i for i in live if i not in top]]


def probe_stats(probe: ProbeHook | None, u: Tensor, never: str | None = None) -> dict[str, Any]:
    """The probe's per-step record: coin ``s``, the update's projections ``p`` on S's per-tensor unit directions
    d_{t,j} at θ_{t−1} (empty where S = 0), the probe's own unit direction ``c`` in those coordinates; or a
    ``skip`` reason (then ``p`` is empty and ``s`` all False)."""
    steps = u.shape[0]
    off = [False] * steps
    if probe is None:
        return {"s": off, "p": [], "c": [], "skip": never or "no probe in this game"}
    if not probe.steps:
        return {"s": off, "p": [], "c": [], "skip": "the trainer never calls audit.canary_gradient(s), so the probe "
                                                    "gradient cannot be supplied"}
    if probe.steps != list(range(steps)):
        return {"s": off, "p": [], "c": [], "skip": f"audit.canary_gradient(s) must be called once per step, after "
                f"audit.record of the step's parameters; got {len(probe.steps)} calls for {steps} steps"}
    if probe.disabled is not None:
        return {"s": off, "p": [], "c": [], "skip": probe.disabled}
    assert probe.sizes is not None
    if sum(probe.sizes) != u.shape[1]:
        return {"s": off, "p": [], "c": [], "skip": f"the hook's parameters ({sum(probe.sizes)} numbers) are not the "
                                                    f"recorded ones ({u.shape[1]})"}
    ut = u.split(probe.sizes, dim=1)
    p_all: list[list[float]] = []
    c_all: list[list[float]] = []
    for t, s in enumerate(probe.grads):
        if s is None:
            p_all.append([])
            c_all.append([])
            continue
        norms = [float(v.norm()) for v in s]
        total, live = math.sqrt(sum(v * v for v in norms)), sum(v > 0 for v in norms)
        p, c = [], []
        for grp in _probe_groups(norms):
            ng = math.sqrt(sum(norms[i] ** 2 for i in grp))
            p.append(sum(float(ut[i][t] @ s[i].reshape(-1)) for i in grp) / ng)
            c.append(-sum((norms[i] / total + PROBE_EPS / math.sqrt(live)) * norms[i] for i in grp) / ng)
        nc = math.sqrt(sum(v * v for v in c))
        p_all.append(p)
        c_all.append([v / nc for v in c])
    return {"s": [bool(v) for v in probe.included], "p": p_all, "c": c_all, "skip": None}
