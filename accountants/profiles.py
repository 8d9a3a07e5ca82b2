"""Privacy profiles δ(ε) and amplification by subsampling on profiles (Balle, Barthe, Gaboardi 2018).

A privacy profile is the whole curve δ_M(ε) = sup_{x≃x'} D_{e^ε}(M(x) ‖ M(x')) of hockey-stick
divergences: M is (ε, δ)-DP iff δ ≥ δ_M(ε). Balle, Barthe, Gaboardi, "Privacy Amplification by
Subsampling: Tight Analyses via Couplings and Divergences" (arXiv:1807.01647, NeurIPS 2018)
give the exact profiles of the base mechanisms (Thms 3, 4), advanced joint convexity (Thm 2), and
amplification theorems that map a base profile to the profile of the subsampled mechanism
(Thms 8, 9, 10, 11). The randomized-membership mechanism (Lemma 12, Thm 13) attains them, so
as maps (base profile) ↦ (amplified bound) they cannot be improved.

Conventions:
    * Profiles are functions of ε ≥ 0 (the paper writes α = e^ε); a *profile* argument below is a
      callable ``eps -> delta`` on tensors, a *group profile* a callable ``(eps, k) -> delta``.
    * All functions broadcast over ε and their parameters; float64 unless the inputs are another
      floating dtype; device follows the inputs.
    * ``mu`` (Gaussian) and ``eta`` (Laplace) are sensitivity / noise scale. For one DP-SGD step
      without subsampling μ = 1/σ under add/remove and 2/σ under replace-one.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor

from . import validate as check
from ._numerics import as_float, log1mexp, log_binom, log_expm1, log_ndtr
from .errors import InputError

__all__ = [
    "advanced_joint_convexity",
    "amplified_epsilon",
    "amplify_poisson_remove_add",
    "amplify_wor_substitution",
    "amplify_wr_remove_add",
    "amplify_wr_substitution",
    "base_epsilon",
    "delta_gaussian",
    "delta_gaussian_group",
    "delta_group_black_box",
    "delta_laplace",
    "delta_laplace_group",
    "delta_randomized_response",
    "hockey_stick",
    "log_delta_gaussian",
    "randomized_membership_output",
    "randomized_membership_profile",
    "tv_poisson",
    "tv_wor",
    "tv_wr",
]

Profile = Callable[[Tensor], Tensor]
GroupProfile = Callable[[Tensor, Tensor], Tensor]

_SQRT2 = math.sqrt(2.0)


def _eps(eps: Tensor | float) -> Tensor:
    check.in_range(0.0, None, closed="left", eps=eps)  # first: a TypeError that names eps for a wrong kind
    return as_float(eps)


# ------------------------------------------------------------------------ base mechanisms


def log_delta_gaussian(eps: Tensor | float, mu: Tensor | float) -> Tensor:
    """log δ(ε) of the Gaussian mechanism with sensitivity/σ = μ.  Bound: exact.

    Balle, Barthe, Gaboardi (arXiv:1807.01647) Thm 4 (= Balle & Wang 2018, analytic Gaussian),
    Eq. (7): δ = Φ(a) − e^ε Φ(b), a = μ/2 − ε/μ, b = −μ/2 − ε/μ, for every ε ≥ 0, any dimension.

    Written as log δ = log Φ(a) + log(1 − e^d), d = ε + log Φ(b) − log Φ(a) ≤ 0. For a < 0 the
    two log Φ are huge and nearly equal, so d is computed from the scaled complementary error
    function instead: log Φ(x) = log(erfcx(−x/√2)/2) − x²/2 and (b² − a²)/2 = ε exactly, hence
    d = log erfcx(−b/√2) − log erfcx(−a/√2) with no cancellation (relative error ~1e-15 where
    the plain form loses ~1e-10 at μ = 0.1, ε = 8).

    Args:
        eps: ε ≥ 0, any shape.
        mu: μ > 0, broadcastable with ``eps``.

    Returns:
        log δ with the broadcast shape (−inf where δ underflows or is 0).
    """
    eps = _eps(eps)
    mu = as_float(mu, like=eps)
    check.positive(mu=mu)
    eps, mu = torch.broadcast_tensors(eps, mu)
    a = mu / 2.0 - eps / mu
    b = -mu / 2.0 - eps / mu
    lphi_a = log_ndtr(a)
    neg = a < 0
    # erfcx(y) overflows for y < −26: only feed it −a/√2 > 0 (branch a < 0), else a safe 1.
    ya = torch.where(neg, -a / _SQRT2, torch.ones_like(a))
    yb = torch.where(neg, -b / _SQRT2, torch.ones_like(b))
    d_scaled = torch.log(torch.special.erfcx(yb)) - torch.log(torch.special.erfcx(ya))
    d_plain = eps + log_ndtr(b) - lphi_a
    d = torch.where(neg, d_scaled, d_plain)
    return lphi_a + log1mexp(torch.clamp(d, max=0.0))


def delta_gaussian(eps: Tensor | float, mu: Tensor | float) -> Tensor:
    """δ(ε) of the Gaussian mechanism (Balle et al. 2018 Thm 4).  Bound: exact.

    See :func:`log_delta_gaussian`. δ(0) = 2Φ(μ/2) − 1 (total variation).

    >>> round(float(delta_gaussian(1.0, 1.0)), 12)
    0.126936737507
    """
    return torch.exp(log_delta_gaussian(eps, mu))


def delta_laplace(eps: Tensor | float, eta: Tensor | float) -> Tensor:
    """δ(ε) of the Laplace mechanism with sensitivity/b = η.  Bound: exact.

    Balle, Barthe, Gaboardi (arXiv:1807.01647) Thm 3: δ = [1 − exp((ε − η)/2)]_+.
    """
    eps = _eps(eps)
    eta = as_float(eta, like=eps)
    check.positive(eta=eta)
    return -torch.expm1(torch.clamp((eps - eta) / 2.0, max=0.0)) + 0.0  # + 0.0 turns −0.0 into 0.0


def delta_randomized_response(eps: Tensor | float, p: Tensor | float) -> Tensor:
    """δ(ε) of binary randomized response that reports the truth with probability p.  Bound: exact.

    Balle, Barthe, Gaboardi (arXiv:1807.01647) §5: φ_p(e^ε) = [(1 + e^ε)p − e^ε]_+ for
    p ≥ 1/2; p < 1/2 is the same mechanism with the output relabelled (φ_{1−p}).
    """
    eps = _eps(eps)
    p = as_float(p, like=eps)
    check.in_range(0.0, 1.0, closed="both", p=p)
    p = torch.maximum(p, 1.0 - p)
    # p − e^ε(1 − p), without overflow of e^ε: clamp ε where the value is already 0.
    e = torch.exp(torch.clamp(eps, max=700.0))
    return torch.clamp(p - e * (1.0 - p), min=0.0)


# ------------------------------------------------------------------------ group profiles


def delta_gaussian_group(eps: Tensor | float, mu: Tensor | float, k: Tensor | float) -> Tensor:
    """Group-k profile of the Gaussian mechanism (white box: sensitivity kμ).  Bound: exact.

    Balle, Barthe, Gaboardi (arXiv:1807.01647) §3 (group privacy): the triangle inequality gives
    group sensitivity ≤ kΔ, so δ_{M,k}(ε) = δ_M(ε; kμ). Beats the black-box bound everywhere.
    """
    k = as_float(k)
    check.positive(k=k)
    return delta_gaussian(eps, as_float(mu, like=k) * k)


def delta_laplace_group(eps: Tensor | float, eta: Tensor | float, k: Tensor | float) -> Tensor:
    """Group-k profile of the Laplace mechanism (white box: sensitivity kη).  Bound: exact."""
    k = as_float(k)
    check.positive(k=k)
    return delta_laplace(eps, as_float(eta, like=k) * k)


def delta_group_black_box(profile: Profile, eps: Tensor | float, k: Tensor | float) -> Tensor:
    """Group-k profile from the single-record profile alone (black box), clipped at 1.  Bound: upper.

    Balle, Barthe, Gaboardi (arXiv:1807.01647) §3, footnote (Vadhan 2017 Lemma 2.2):
    δ_{M,k}(ε) ≤ min{1, (e^ε − 1)/(e^{ε/k} − 1) · δ_M(ε/k)}; the factor tends to k at ε = 0.

    Args:
        profile: δ_M as a callable on tensors.
        eps: ε ≥ 0.
        k: group size ≥ 1 (integer), broadcastable with ``eps``.
    """
    eps = _eps(eps)
    k = as_float(k, like=eps)
    check.integer(1, None, k=k)
    eps, k = torch.broadcast_tensors(eps, k)
    small = eps < 1e-8
    e_safe = torch.where(small, torch.ones_like(eps), eps)
    # log((e^ε − 1)/(e^{ε/k} − 1)), both log_expm1 finite for ε > 0; limit log k at ε → 0.
    log_factor = torch.where(small, torch.log(k), log_expm1(e_safe) - log_expm1(e_safe / k))
    base = profile(eps / k)
    out = torch.exp(torch.clamp(log_factor + torch.log(base), max=0.0))
    return torch.where(base > 0, out, torch.zeros_like(out))


# --------------------------------------------------------------------- amplification maps


def amplified_epsilon(eps: Tensor | float, gamma: Tensor | float) -> Tensor:
    """ε' = log(1 + γ(e^ε − 1)), the amplified ε of Thms 2/8/9/10.  Exact map.

    Balle, Barthe, Gaboardi (arXiv:1807.01647) Thm 2 (ε-form); computed as
    logaddexp(0, log γ + log(e^ε − 1)), stable for large ε and small γ.
    """
    eps = _eps(eps)
    gamma = as_float(gamma, like=eps)
    check.in_range(0.0, 1.0, closed="right", gamma=gamma)
    return torch.logaddexp(torch.zeros_like(eps * gamma), torch.log(gamma) + log_expm1(eps))


def base_epsilon(eps_amplified: Tensor | float, gamma: Tensor | float) -> Tensor:
    """The inverse map ε = log(1 + (e^{ε'} − 1)/γ).  Exact map.

    Balle, Barthe, Gaboardi (arXiv:1807.01647) Thm 2: α = 1 + (α' − 1)/γ with α = e^ε.
    """
    eps_amplified = as_float(eps_amplified)
    check.in_range(0.0, None, closed="left", eps_amplified=eps_amplified)
    gamma = as_float(gamma, like=eps_amplified)
    check.in_range(0.0, 1.0, closed="right", gamma=gamma)
    return torch.logaddexp(torch.zeros_like(eps_amplified * gamma), log_expm1(eps_amplified) - torch.log(gamma))


def tv_poisson(rate: Tensor | float) -> Tensor:
    """Total variation between Poisson(γ) subsample laws of remove/add neighbours: γ (§4 table)."""
    rate = as_float(rate)
    check.in_range(0.0, 1.0, closed="right", rate=rate)
    return rate


def tv_wor(batch_size: Tensor | int, dataset_size: Tensor | int) -> Tensor:
    """TV between WOR(m of n) subsample laws of substitution neighbours: m/n (§4)."""
    m, n = _wr_args(batch_size, dataset_size)
    m, n = torch.broadcast_tensors(m, n)
    bad = m > n
    if bool(bad.any()):
        i = int(torch.nonzero(bad.reshape(-1))[0].item())
        raise InputError(
            "batch_size must be <= dataset_size for sampling without replacement; got batch_size="
            f"{m.reshape(-1)[i].item():g}, dataset_size={n.reshape(-1)[i].item():g}"
        )
    return m / n


def tv_wr(batch_size: Tensor | int, dataset_size: Tensor | int) -> Tensor:
    """TV between WR(m of n) subsample laws of neighbours: 1 − (1 − 1/n)^m, as −expm1(m log1p(−1/n))."""
    m, n = _wr_args(batch_size, dataset_size)
    return -torch.expm1(m * torch.log1p(-1.0 / n))


def _wr_args(batch_size: Tensor | int, dataset_size: Tensor | int) -> tuple[Tensor, Tensor]:
    check.integer(1, None, batch_size=batch_size, dataset_size=dataset_size)
    m = as_float(batch_size)
    n = as_float(dataset_size, like=m)
    return m, n


def amplify_poisson_remove_add(profile: Profile, eps: Tensor | float, rate: Tensor | float) -> Tensor:
    """Profile of M∘Poisson(γ) under remove/add from the base profile under remove/add.  Bound: upper.

    Balle, Barthe, Gaboardi (arXiv:1807.01647) Thm 8: δ'(ε') ≤ γ·δ_M(ε) with
    ε = log(1 + (e^{ε'} − 1)/γ). Tight: attained by randomized membership (Thm 13), and exact for
    one step of the Poisson-subsampled Gaussian or Laplace sum (removal direction).

    Args:
        profile: the base mechanism's profile δ_M (callable on tensors).
        eps: ε' ≥ 0 at which the amplified profile is evaluated.
        rate: γ in (0, 1], broadcastable with ``eps``.
    """
    gamma = tv_poisson(rate)
    return gamma * profile(base_epsilon(eps, gamma))


def amplify_wor_substitution(
    profile: Profile, eps: Tensor | float, batch_size: Tensor | int, dataset_size: Tensor | int
) -> Tensor:
    """Profile of M∘WOR(m of n) under substitution, from the base profile under substitution.  Bound: upper.

    Balle, Barthe, Gaboardi (arXiv:1807.01647) Thm 9: δ'(ε') ≤ (m/n)·δ_M(ε),
    ε = log(1 + (n/m)(e^{ε'} − 1)). Tight (Thm 13).
    """
    gamma = tv_wor(batch_size, dataset_size)
    return gamma * profile(base_epsilon(eps, gamma))


def _wr_sum(group_profile: GroupProfile, eps: Tensor | float, batch_size: int, dataset_size: int) -> Tensor:
    check.integer(1, None, batch_size=batch_size, dataset_size=dataset_size)
    m, n = int(batch_size), int(dataset_size)
    gamma = tv_wr(m, n)
    eps_base = base_epsilon(eps, gamma)
    k = torch.arange(1, m + 1, dtype=eps_base.dtype, device=eps_base.device)
    # Binomial(m, 1/n) weights at k ≥ 1 (copies of the differing record), in log space.
    lw = log_binom(torch.full_like(k, float(m)), k) - k * math.log(n) + (m - k) * math.log1p(-1.0 / n)
    d = group_profile(eps_base[..., None], k)  # (..., m)
    return torch.sum(torch.exp(lw) * d, dim=-1)


def amplify_wr_substitution(
    group_profile: GroupProfile, eps: Tensor | float, batch_size: int, dataset_size: int
) -> Tensor:
    """Profile of M∘WR(m draws from n) under substitution, from the group profiles.  Bound: upper.

    Balle, Barthe, Gaboardi (arXiv:1807.01647) Thm 10, Eq. (12):
    δ'(ε') ≤ Σ_{k=1}^{m} Bin(k; m, 1/n)·δ_{M,k}(ε), ε = log(1 + (e^{ε'} − 1)/γ), γ = 1 − (1 − 1/n)^m.
    Tight over mechanisms (Thm 13); ``group_profile(eps, k)`` is δ_{M,k} (e.g. white box
    :func:`delta_gaussian_group`, or :func:`delta_group_black_box`).

    Args:
        group_profile: callable (eps (..., 1), k (m,)) -> δ_{M,k} (..., m).
        eps: ε' ≥ 0, any shape.
        batch_size, dataset_size: m ≥ 1 draws, n ≥ 1 records (Python ints).
    """
    return _wr_sum(group_profile, eps, batch_size, dataset_size)


def amplify_wr_remove_add(
    group_profile: GroupProfile, eps: Tensor | float, batch_size: int, dataset_size: int
) -> Tensor:
    """Profile of M∘WR(m from n) under remove/add (hybrid: base profile under substitution).  Bound: upper.

    Balle, Barthe, Gaboardi (arXiv:1807.01647) Thm 11, Eq. (13): the same sum as Thm 10, for
    x ∈ 2^U_n and x' ≃_r x. The guarantee depends on the true size n of the larger dataset (the
    worst direction is |x| = n, |x'| = n − 1); there is no guarantee uniform over n. Not claimed
    tight.
    """
    return _wr_sum(group_profile, eps, batch_size, dataset_size)


# ------------------------------------------------------------- divergences and tightness


def hockey_stick(p: Tensor, q: Tensor, eps: Tensor | float) -> Tensor:
    """D_{e^ε}(p ‖ q) = Σ_z [p(z) − e^ε q(z)]_+ for pmfs on the last dimension.  Exact.

    Balle, Barthe, Gaboardi (arXiv:1807.01647) Eq. (2). ``eps`` may be any real (orders below 1
    are allowed here; Appendix A). Shapes broadcast; the pmf axis is the last one.
    """
    p = as_float(p)
    q = as_float(q, like=p)
    eps = as_float(eps, like=p)
    return torch.clamp(p - torch.exp(eps)[..., None] * q, min=0.0).sum(dim=-1)


def advanced_joint_convexity(
    mu0: Tensor, mu1: Tensor, mu1_prime: Tensor, gamma: Tensor | float, eps: Tensor | float
) -> Tensor:
    """γ·D_{e^ε_base}(μ1 ‖ (1−β)μ0 + βμ1'), equal to D_{e^ε}(μ ‖ μ').  Exact (an identity).

    Balle, Barthe, Gaboardi (arXiv:1807.01647) Thm 2, Eq. (6): for μ = (1−γ)μ0 + γμ1 and
    μ' = (1−γ)μ0 + γμ1', with α' = e^ε, α = 1 + (α' − 1)/γ and β = α'/α,
    D_{α'}(μ ‖ μ') = γ·D_α(μ1 ‖ (1−β)μ0 + βμ1'). pmfs on the last dimension.
    """
    mu0, mu1, mu1_prime = (as_float(t) for t in (mu0, mu1, mu1_prime))
    eps = _eps(eps)
    gamma = as_float(gamma, like=eps)
    check.in_range(0.0, 1.0, closed="right", gamma=gamma)
    eps_base = base_epsilon(eps, gamma)
    beta = torch.exp(eps - eps_base)[..., None]
    return gamma * hockey_stick(mu1, (1.0 - beta) * mu0 + beta * mu1_prime, eps_base)


def randomized_membership_output(p: Tensor | float, inclusion: Tensor | float) -> Tensor:
    """P[M^S_{v,p}(x) = 1] for the randomized-membership mechanism.  Exact.

    Balle, Barthe, Gaboardi (arXiv:1807.01647) §5: M_{v,p}(y) = R_p(1[v ∈ y]); with
    η = P[v ∈ S(x)] the output is 1 with probability (1 − η)(1 − p) + ηp.
    """
    p = as_float(p)
    inclusion = as_float(inclusion, like=p)
    check.in_range(0.0, 1.0, closed="both", p=p, inclusion=inclusion)
    return (1.0 - inclusion) * (1.0 - p) + inclusion * p


def randomized_membership_profile(eps: Tensor | float, p: Tensor | float, gamma: Tensor | float) -> Tensor:
    """Profile of randomized membership M^S_{v,p} under a natural subsampling with TV γ.  Bound: exact.

    Balle, Barthe, Gaboardi (arXiv:1807.01647) Lemma 12, Eq. (14): δ(ε') = γ·φ_p(1 + (e^{ε'}−1)/γ),
    i.e. [γ(2p − 1) − (e^{ε'} − 1)(1 − p)]_+ for p ≥ 1/2. It equals Thm 8/9/10 applied to the
    base profile φ_p, which shows those theorems are tight (Thm 13).
    """
    eps = _eps(eps)
    p = as_float(p, like=eps)
    gamma = as_float(gamma, like=eps)
    check.in_range(0.0, 1.0, closed="both", p=p)
    check.in_range(0.0, 1.0, closed="right", gamma=gamma)
    p = torch.maximum(p, 1.0 - p)
    return torch.clamp(gamma * (2.0 * p - 1.0) - torch.expm1(torch.clamp(eps, max=700.0)) * (1.0 - p), min=0.0)
