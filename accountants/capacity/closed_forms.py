"""Closed forms: the conjugates f*, the Rényi ↔ α-divergence map, and the rules that hold (Thms 1, 3, 4)
with their conditions, plus the paper's printed (lin, Rényi) bound, kept only to show where it fails.

Part of :mod:`accountants.capacity` (Chaudhuri, Imola, Machanavajjhala 2019, arXiv:1907.02159v1).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .. import validate as check
from ..errors import InputError, InputTypeError, UnsupportedError
from ..mechanisms import Gaussian, Laplace
from .classes import Polynomial, as_float64, parse_class

# Conjugates and the Rényi map
# ---------------------------------------------------------------------------------------------


def f_star(kind: str, s: Tensor, alpha: Tensor | float | None = None, *, positive_part: bool = False) -> Tensor:
    """Fenchel conjugate f*(s) of the generator of KL or of the α-divergence.

    Chaudhuri et al. 2019, Lemma 1 (KL: e^{s−1}) and Lemma 3 (α: C_α|s|^{α/(α−1)} + 1/(α²−α), with
    the intermediate display's sign typo fixed).

    Args:
        kind: ``"kl"`` or ``"alpha"``.
        s: points (...).
        alpha: order α > 1 (kind ``"alpha"`` only), broadcast against ``s``.
        positive_part: use the (t)_+ domain convention f(t) = (t^α − 1)/(α²−α) on t ≥ 0, whose
            conjugate is C_α (s)_+^{α/(α−1)} + 1/(α²−α). Exposed for comparison only: every
            restricted value in dpaudit uses the paper's absolute-value convention.
    """
    s = as_float64(s)
    if kind == "kl":
        return torch.exp(s - 1.0)
    if kind != "alpha":
        raise InputError(f"kind must be 'kl' or 'alpha'; got {kind!r}")
    if alpha is None:
        raise InputError("alpha is required for kind='alpha'")
    a = torch.as_tensor(alpha, dtype=s.dtype, device=s.device)
    check.in_range(1.0, None, closed="neither", alpha=a)
    big_a = a / (a - 1.0)
    c = (a - 1.0) ** big_a / a
    base = s.clamp_min(0.0) if positive_part else s.abs()
    return c * base**big_a + 1.0 / (a * a - a)


def alpha_divergence_to_renyi(d_alpha: Tensor, alpha: Tensor) -> Tensor:
    """Eq. (3): D_R = log(1 + α(α−1)·D_α)/(α−1). Increasing in D_α, so bounds carry through."""
    return torch.log1p(alpha * (alpha - 1.0) * d_alpha) / (alpha - 1.0)


def renyi_to_alpha_divergence(d_renyi: Tensor, alpha: Tensor) -> Tensor:
    """Inverse of eq. (3): η_α(ε) = (e^{(α−1)ε} − 1)/(α(α−1))."""
    return torch.expm1((alpha - 1.0) * d_renyi) / (alpha * (alpha - 1.0))


# Properties that hold (Thms 1, 3, 4), with their conditions
# ---------------------------------------------------------------------------------------------


def post_process_polynomial(value: Tensor, function_class: Polynomial | str,
                            map_degree: int) -> tuple[Tensor, Polynomial]:
    """Post-processing (Chaudhuri et al. 2019 Thm 1): the parameter carries over to a smaller class.

    If a release A is (poly_k, Γ)-bounded with parameter ``value`` and g is a polynomial map of degree
    m of the (scalar) output, then g∘A is (poly_{⌊k/m⌋}, Γ)-bounded with the same parameter, because
    i∘g ∈ poly_k for every i ∈ poly_{⌊k/m⌋} (hypothesis of Thm 1). m = 1 (affine maps, including
    linear maps between output spaces for the lin class) keeps the class.

    NOT covered: thresholding, clipping, training a model on the release, or any map that is not a
    polynomial (Thm 1 needs i∘g ∈ H); this function raises for them by construction (map_degree
    must be a positive integer) and for m > k.

    Args:
        value: restricted KL or Rényi value(s) of A for ``function_class``.
        function_class: the class the value was computed for.
        map_degree: degree m ≥ 1 of the polynomial post-processing map.

    Returns:
        (value, class for which it holds after post-processing).
    """
    fc = parse_class(function_class)
    check.integer(1, None, map_degree=map_degree)
    if map_degree > fc.degree:
        raise UnsupportedError(f"a degree-{map_degree} map of a {fc.name} release leaves no polynomial class "
                               "covered by Thm 1 (need map degree ≤ class degree)")
    return as_float64(value), Polynomial(fc.degree // int(map_degree))


def compose_parallel(values: Tensor, dim: int = -1) -> Tensor:
    """Parallel composition (Chaudhuri et al. 2019 Thm 3): max of the parameters.  Bound: upper.

    Conditions: the releases use DISJOINT parts of the data; each class is convex and translation
    invariant (every Polynomial class is); the joint class is the separable sum H1 ⊕ H2
    ({h1(o1) + h2(o2)}; for lin classes this is lin on the concatenated output); Γ is KL, or Rényi
    with all values at the SAME order α > 1.
    """
    v = as_float64(values)
    check.in_range(0.0, None, values=v)
    return v.amax(dim)


def compose_nonadaptive(values: Tensor, dim: int = -1) -> Tensor:
    """Non-adaptive sequential composition (Chaudhuri et al. 2019 Thm 4): sum.  Bound: upper.

    Conditions: the releases are NON-ADAPTIVE (no release may depend on another's output; DP-SGD steps
    are adaptive and are NOT covered, nor is any amplification by subsampling); each class is convex,
    translation invariant and contains the constants (every Polynomial class does); the joint class is
    H1 ⊕ H2 (separable sums; for lin: lin on the concatenated output); Γ is KL, or Rényi with all
    values at the SAME order α > 1.
    """
    v = as_float64(values)
    check.in_range(0.0, None, values=v)
    return v.sum(dim)


def paper_claimed_lin_renyi_bound(mechanism: Gaussian | Laplace, alpha: Tensor | float,
                                  v: Tensor | None = None) -> Tensor:
    """The (lin, Rényi) "upper bound" PRINTED in Table 1 / Thm 13 / Cor. 2. NOT A VALID BOUND.

    Chaudhuri et al. 2019 Table 1 rows 3-6 (d-dim rows; d = 1 when ``v`` is None):
    Laplace: log(1 + 2^{d(α−1)}·(ε‖v‖_α)^α)/(α−1) with ε = 1/b;
    Gaussian: log(1 + 2^{d(α−1)}·√(π/2)^{α−1}·‖v‖_α^α/σ^α)/(α−1).
    The proof of Thm 13 drops a factor 2^{−d} on b^A, and the exact values exceed these numbers at
    small ε / large σ with α ≳ 4 (e.g. Gaussian σ = 4, α = 10: exact 0.109697 > 0.000413). Returned
    only so that tests and docs can show the failure; dpaudit never uses it as a bound.
    """
    a = as_float64(alpha)
    if v is None:
        v = torch.ones(1, dtype=a.dtype)
    v = as_float64(v)
    d = v.shape[-1]
    norm_aa = (v.abs() ** a[..., None]).sum(-1)  # ‖v‖_α^α
    if isinstance(mechanism, Laplace):
        term = 2.0 ** (d * (a - 1.0)) * norm_aa / mechanism.b**a
    elif isinstance(mechanism, Gaussian):
        term = 2.0 ** (d * (a - 1.0)) * math.sqrt(math.pi / 2.0) ** (a - 1.0) * norm_aa / mechanism.sigma**a
    else:
        raise InputTypeError(f"mechanism must be Gaussian or Laplace; got {type(mechanism).__name__}")
    return torch.log1p(term) / (a - 1.0)
