"""Synthetic per-trial conformance records drawn from the exact Gaussian model of DP-SGD on the dead coordinates
(tests only): the premise tests' level and power without training a model."""

from __future__ import annotations

import numpy as np
import torch

from attacks.conformance_record import _fresh


def records(n: int, *, seed: int, steps: int = 10, q: float = 0.5, sigma: float = 3.0, contribution: float = 1.0,
            noise: float = 1.0, bias_noise: float = 1.0, reuse: bool = False, mask_once: bool = False,
            scale_jitter: float = 0.0, member_scale: float = 1.0, r: int = 20, k: int = 10,
            mode: str = "parameters", momentum: float = 0.0, bias_part: float = 0.0, removal: float = 0.0
            ) -> list[dict]:
    """n trials; the claim is (sigma, q); the trainer adds noise·sigma·C and contributes contribution·C.

    Step 1's projections ``p1`` (weight, bias, natural direction): the canary adds bias_part·C on the
    bias direction when sampled (per-tensor clipping: contribution² + bias_part² > 1), and removes
    removal·C from the natural direction (a clipped sum that the canary dominates).

    scale_jitter: sd of a per-(trial, step) log-scale (realised-batch normalisation); member_scale: the
    update's scale in member trials (a data-dependent normalisation); momentum: heavy-ball β on the updates.
    """
    g = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        member = bool(g.random() < 0.5)
        c = (g.random(steps) < q) & member
        if mask_once:
            c[:] = member and g.random() < q
        zr = g.standard_normal((steps, r))
        zk = g.standard_normal((steps, k))
        zb = g.standard_normal((steps, 10))
        if reuse:
            zr[:], zk[:], zb[:] = zr[0], zk[0], zb[0]
        a = np.exp(scale_jitter * g.standard_normal(steps)) * (member_scale if member else 1.0)
        s = noise * sigma
        ur = a[:, None] * s * zr
        uk = a[:, None] * (s * zk + np.outer(c * contribution, np.eye(k)[0]))
        ub = a[:, None] * (bias_noise * s * zb + 0.3)  # a gradient signal on the bias
        uw = a[:, None] * s * g.standard_normal((steps, 50))
        if momentum:
            for u in (ur, uk, ub, uw):
                for t in range(1, steps):
                    u[t] += momentum * u[t - 1]
        nat = a[0] * (s * g.standard_normal() + 0.3 + 0.2 * (g.random() < q) - removal * c[0])
        p1 = [float(uk[0, 0]), float(a[0] * (s * g.standard_normal() + bias_part * c[0])), float(nat)]
        out.append({"mode": mode, "member": member, "df": r, "k": k, "y": uk[:, 0].tolist(), "p1": p1,
                    "ss": (ur ** 2).sum(1).tolist(), "f2": _fresh(torch.from_numpy(ur)),
                    "tensors": {"weight": {"n": 50, "ss": (uw ** 2).sum(1).tolist()},
                                "bias": {"n": 10, "ss": (ub ** 2).sum(1).tolist()}},
                    "gnorm_min": 10.0})
    return out


def probe_records(n: int, *, seed: int, eff: tuple[float, ...], direction: tuple[float, ...] | None = None,
                  sigma: float = 3.0, steps: int = 10, q: float = 0.5, r: int = 20, momentum: float = 0.0
                  ) -> list[dict]:
    """Only what the ``canary_effect`` test reads (ss, df, probe), fast: the probe shifts the update by ``eff``
    (in C, one entry per direction) at the steps its fair coin includes it; noise sigma·C on every coordinate;
    momentum carries the earlier updates (the directions' and R's) into each step."""
    g = np.random.default_rng(seed)
    e = np.asarray(eff, dtype=np.float64)
    coin = g.random((n, steps)) < 0.5
    up = sigma * g.standard_normal((n, steps, e.size)) + coin[..., None] * e + 0.5 * (g.random((n, steps, e.size)) < q)
    ur = sigma * g.standard_normal((n, steps, r))
    for t in range(1, steps if momentum else 1):
        up[:, t] += momentum * up[:, t - 1]
        ur[:, t] += momentum * ur[:, t - 1]
    c = np.asarray(direction if direction is not None else e)
    c = (c / np.linalg.norm(c)).tolist()
    ss = (ur ** 2).sum(axis=2)
    return [{"df": r, "ss": ss[i].tolist(), "probe": {"s": coin[i].tolist(), "p": up[i].tolist(), "c": [c] * steps,
                                                      "skip": None}} for i in range(n)]
