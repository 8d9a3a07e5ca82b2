"""Function classes (polynomials in the output) and scalar output laws (location-scale mixtures).

Part of :mod:`accountants.capacity` (Chaudhuri, Imola, Machanavajjhala 2019, arXiv:1907.02159v1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

import torch
from torch import Tensor

from .. import validate as check
from ..errors import InputError, InputTypeError

_DTYPE = torch.float64


# ---------------------------------------------------------------------------------------------
# Descriptions: function classes and scalar output laws
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Polynomial:
    """Adversary class of polynomials of degree ≤ ``degree`` in the scalar output, WITH a constant.

    h(x) = c_0 + c_1 x + ... + c_k x^k. ``Polynomial(1)`` is the paper's "lin" (affine: the bias is
    part of the class; every closed form depends on it). The class is a linear space containing the
    constants, so it is convex and translation invariant (hypotheses of Thms 3 and 4).
    """

    degree: int

    def __post_init__(self) -> None:
        check.integer(1, 8, degree=self.degree)
        object.__setattr__(self, "degree", int(self.degree))

    @property
    def name(self) -> str:
        return "linear" if self.degree == 1 else f"poly{self.degree}"


LINEAR = Polynomial(1)


def parse_class(name: str | Polynomial) -> Polynomial:
    """``"linear"``/``"lin"``/``"poly1"`` → Polynomial(1); ``"polyK"`` → Polynomial(K) (1 ≤ K ≤ 8)."""
    if isinstance(name, Polynomial):
        return name
    if not isinstance(name, str):
        raise InputTypeError(f"function class must be a str or Polynomial; got {type(name).__name__}")
    key = name.strip().lower()
    if key in ("linear", "lin"):
        return LINEAR
    if key.startswith("poly") and key[4:].isdigit():
        return Polynomial(int(key[4:]))
    raise InputError(f"unknown function class {name!r}; choose from linear, poly2, poly3, ... poly8")


class Family(Enum):
    """Location-scale family of the components of a :class:`ScalarMixture`."""

    GAUSSIAN = "gaussian"
    LAPLACE = "laplace"


@dataclass(frozen=True, slots=True)
class ScalarMixture:
    """A finite mixture Σ_j w_j · F((x − loc_j)/scale_j)/scale_j of one location-scale family.

    Tensors have shape (..., K): leading dimensions are configurations, the last indexes the K
    components. Laplace components have density e^{−|x−loc|/scale}/(2·scale).

    Attributes:
        family: :class:`Family`.
        weights, loc, scale: broadcastable tensors (..., K); weights ≥ 0 summing to 1, scale > 0.
    """

    family: Family
    weights: Tensor
    loc: Tensor
    scale: Tensor

    def __post_init__(self) -> None:
        if not isinstance(self.family, Family):
            raise InputTypeError(f"family must be a Family; got {type(self.family).__name__}")
        w = torch.as_tensor(self.weights, dtype=_DTYPE) if not isinstance(self.weights, Tensor) else self.weights
        loc = torch.as_tensor(self.loc, dtype=w.dtype, device=w.device)
        scale = torch.as_tensor(self.scale, dtype=w.dtype, device=w.device)
        check.in_range(0.0, 1.0, weights=w)
        check.finite(loc=loc)
        check.positive(scale=scale)
        w, loc, scale = torch.broadcast_tensors(w, loc, scale)
        if w.ndim == 0:
            raise InputError("weights, loc, scale must have a last (component) dimension; got scalars")
        if not bool(torch.allclose(w.sum(-1), torch.ones((), dtype=w.dtype, device=w.device), atol=1e-12)):
            raise InputError("weights must sum to 1 over the last dimension")
        object.__setattr__(self, "weights", w)
        object.__setattr__(self, "loc", loc)
        object.__setattr__(self, "scale", scale)

    @property
    def batch_shape(self) -> torch.Size:
        return self.weights.shape[:-1]

    @classmethod
    def gaussian(cls, loc: Tensor | float, scale: Tensor | float) -> ScalarMixture:
        """One Gaussian N(loc, scale²) per configuration."""
        loc_t, scale_t = _aligned(loc, scale)
        return cls(Family.GAUSSIAN, torch.ones_like(loc_t)[..., None], loc_t[..., None], scale_t[..., None])

    @classmethod
    def laplace(cls, loc: Tensor | float, scale: Tensor | float) -> ScalarMixture:
        """One Laplace Lap(loc, scale) per configuration."""
        loc_t, scale_t = _aligned(loc, scale)
        return cls(Family.LAPLACE, torch.ones_like(loc_t)[..., None], loc_t[..., None], scale_t[..., None])

    @classmethod
    def subsampled_gaussian(cls, q: Tensor | float, sigma: Tensor | float, shift: float = 1.0) -> ScalarMixture:
        """(1 − q)·N(0, σ²) + q·N(shift, σ²): one Poisson-subsampled Gaussian step with the record."""
        q_t, s_t = _aligned(q, sigma)
        check.in_range(0.0, 1.0, closed="right", q=q_t)
        w = torch.stack([1.0 - q_t, q_t], -1)
        loc = torch.stack([torch.zeros_like(q_t), torch.full_like(q_t, float(shift))], -1)
        return cls(Family.GAUSSIAN, w, loc, torch.stack([s_t, s_t], -1))

    def expand(self, shape: torch.Size) -> ScalarMixture:
        k = self.weights.shape[-1]
        return ScalarMixture(self.family, self.weights.expand(*shape, k), self.loc.expand(*shape, k),
                             self.scale.expand(*shape, k))

    def mean(self) -> Tensor:
        return (self.weights * self.loc).sum(-1)

    def log_density(self, x: Tensor) -> Tensor:
        """log density at x (..., N) for configurations (...)."""
        return _log_density(self.family, self.weights, self.loc, self.scale, x)

    def raw_moments(self, k: int, ref_loc: Tensor, ref_scale: Tensor) -> Tensor:
        """E[z^j], j = 0..k, for z = (x − ref_loc)/ref_scale; shape (..., k+1). Exact (binomial expansion)."""
        o = (self.loc - ref_loc[..., None]) / ref_scale[..., None]
        s = self.scale / ref_scale[..., None]
        um = [_unit_moment(self.family, i) for i in range(k + 1)]
        out = []
        for j in range(k + 1):
            acc = torch.zeros_like(o)
            for i in range(j + 1):
                if um[i] != 0.0:
                    acc = acc + math.comb(j, i) * o ** (j - i) * s**i * um[i]
            out.append((self.weights * acc).sum(-1))
        return torch.stack(out, -1)


def _log_density(family: Family, w: Tensor, loc: Tensor, scale: Tensor, x: Tensor) -> Tensor:
    w, m, s = (t[..., None, :] for t in (w, loc, scale))
    u = (x[..., None] - m) / s
    if family is Family.GAUSSIAN:
        lc = -0.5 * u * u - 0.5 * math.log(2 * math.pi) - torch.log(s)
    else:
        lc = -u.abs() - math.log(2.0) - torch.log(s)
    return torch.logsumexp(lc + torch.log(w), -1)


def _unit_moment(family: Family, i: int) -> float:
    """E u^i for the standard member (Gaussian N(0,1): (i−1)!!; Laplace Lap(0,1): i!) of the family."""
    if i % 2:
        return 0.0
    if family is Family.GAUSSIAN:
        return float(math.prod(range(i - 1, 0, -2))) if i else 1.0
    return float(math.factorial(i))


def _aligned(*xs: Tensor | float) -> list[Tensor]:
    """float64 tensors on the device of the first tensor argument, broadcast together."""
    dev = next((x.device for x in xs if isinstance(x, Tensor)), None)
    return list(torch.broadcast_tensors(*(as_float64(x).to(dev) if dev is not None else as_float64(x) for x in xs)))


def as_float64(x: Tensor | float) -> Tensor:
    """``x`` (a scalar, sequence or tensor of any real dtype) as a float64 tensor."""
    return x.to(_DTYPE) if isinstance(x, Tensor) and not x.is_floating_point() else torch.as_tensor(x, dtype=_DTYPE)
