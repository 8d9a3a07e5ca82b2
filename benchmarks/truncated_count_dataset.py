"""A stronger crafted dataset for truncated Poisson? The count-revealing construction, measured.

The accountant's upper pair for truncated Poisson (docs/dominating-pairs.md §4c) reveals whether the
batch was cut and charges a cut batch as a replacement (shift 2C). The crafted dataset of
attacks.worst_case (other records of gradient 0) realises Poisson at the canary's inclusion
probability p instead: a cut is invisible. This script measures the obvious attempt to make a cut
visible while keeping the uncut step a clean +C·e shift: the other N − 1 records get the gradient
C·e₂ on a second quiet coordinate, so the white-box view of a step is the 2-D point

    (1{z in the batch}, number of other records in the batch) + N(0, σ²I),

and a kept z in a cut batch displaces one of them: (1, B − 1) against (0, B) under D′, a shift of
norm √2 C with the cut partly readable from the count. Rotating z towards −e₂ (angle φ) lengthens the
cut shift to √(2 + 2 sin φ) but shortens the uncut one to cos φ (the count coordinate is blurred by the
random number of other records drawn). Scores: the exact 2-D log-likelihood ratio of the mixture
(every count enumerated). Each replicate is one optimal audit (audit.statistics.epsilon_lower_bound,
n_in = n_out = 1,000, s = 0.05, δ = 1e-5, T = 10) of draws of the pair; the medians are compared with
the gradient-0 dataset's (the same code with the count coordinate switched off).

Usage::

    PYTHONPATH=. python benchmarks/truncated_count_dataset.py [--replicates 101] [--sigma 1] [--angles 0,20,40]
"""

from __future__ import annotations

import argparse
import math
import os

import numpy as np
import torch

from audit import statistics as st

Q, B, N, T, DELTA = 0.5, 60, 101, 10, 1e-5


def _pmf(n: int, q: float) -> torch.Tensor:
    k = torch.arange(n + 1, dtype=torch.float64)
    logc = math.lgamma(n + 1) - torch.lgamma(k + 1) - torch.lgamma(n - k + 1)
    return torch.exp(logc + k * math.log(q) + (n - k) * math.log1p(-q))


Mixture = tuple[torch.Tensor, torch.Tensor]


def components(phi: float, count: bool = True) -> tuple[Mixture, Mixture]:
    """(means, weights) of one step's 2-D law with z in and out (z = C(cos φ, −sin φ); others C·e₂, or 0)."""
    pk = _pmf(N - 1, Q)
    c, s = math.cos(phi), math.sin(phi)
    m_in, w_in, m_out, w_out = [], [], [], []
    for k in range(N):
        kept = float(min(k, B))
        m_out.append((0.0, kept))
        w_out.append(float(pk[k]))
        m_in.append((0.0, kept))
        w_in.append((1 - Q) * float(pk[k]))
        if k < B:  # z joins, nothing is cut
            m_in.append((c, k - s))
            w_in.append(Q * float(pk[k]))
        else:  # z drawn into a cut batch: kept with probability B/(k + 1), displacing one other record
            g = B / (k + 1)
            m_in += [(c, B - 1 - s), (0.0, float(B))]
            w_in += [Q * float(pk[k]) * g, Q * float(pk[k]) * (1 - g)]

    def pack(m, w):
        mt = torch.tensor(m, dtype=torch.float64)
        if not count:
            mt[:, 1] = 0.0
        return mt, torch.tensor(w, dtype=torch.float64)

    return pack(m_in, w_in), pack(m_out, w_out)


def _log_density(x: torch.Tensor, m: torch.Tensor, w: torch.Tensor, sigma: float) -> torch.Tensor:
    d2 = ((x.unsqueeze(-2) - m) ** 2).sum(-1)
    return torch.logsumexp(w.log() - d2 / (2 * sigma**2), -1)


def certifiable(phi: float, sigma: float, replicates: int, count: bool = True, seed: int = 1) -> np.ndarray:
    """Sorted ε lower bounds of ``replicates`` optimal audits of draws of the pair (1,000 in, 1,000 out)."""
    cin, cout = components(phi, count)
    g = torch.Generator().manual_seed(seed)

    def draw(m, w, n):
        idx = torch.multinomial(w, n * T, replacement=True, generator=g)
        return (m[idx] + sigma * torch.randn(n * T, 2, generator=g, dtype=torch.float64)).reshape(n, T, 2)

    def llr(x):
        return (_log_density(x, *cin, sigma) - _log_density(x, *cout, sigma)).sum(-1).numpy()

    out = []
    for _ in range(replicates):
        xi, xo = draw(*cin, 1000), draw(*cout, 1000)
        out.append(st.epsilon_lower_bound(llr(xi), llr(xo), delta=DELTA, significance=0.05).value)
    return np.sort(np.asarray(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--replicates", type=int, default=101)
    ap.add_argument("--sigma", type=float, default=1.0)
    ap.add_argument("--angles", default="0,20,40")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}; TruncatedPoisson({Q}, {B}, {N}), σ = {args.sigma}, T = {T}, "
          f"{args.replicates} replicates of 1,000 + 1,000 trials")
    r = certifiable(0.0, args.sigma, args.replicates, count=False)
    print(f"others' gradient 0 (attacks.worst_case): median {np.median(r):.3f}, mean {r.mean():.3f}")
    for deg in (float(a) for a in args.angles.split(",")):
        r = certifiable(math.radians(deg), args.sigma, args.replicates)
        print(f"others' gradient C·e₂, z at φ = {deg:g}°: median {np.median(r):.3f}, mean {r.mean():.3f}", flush=True)


if __name__ == "__main__":
    main()
