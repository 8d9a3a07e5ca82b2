"""Canaries: records the auditor controls and whose membership the attack must guess.

Two kinds, one shape (m canaries at a time):

- :class:`GradientCanaries`: the record's per-example gradient *is* a given vector, inserted
  directly into the clipped sum (strongest threat model; Nasr et al. 2023). :func:`dirac` puts
  norm C on one coordinate; :func:`quiet_coordinates` finds coordinates that natural records
  never touch (weights on constant input features), where a Dirac canary collides with nothing.
- :class:`DiracCanaries`: m Dirac gradient canaries stored by coordinate (no (m, D) tensor), for the
  trainer's sparse path; :func:`dirac_slots` puts them on the slots of an
  :class:`attacks.models.Slotted` model, coordinates the forward pass never reads (one run at scale:
  m = 1e4–1e5 canaries that collide with nothing).
- :class:`InputCanaries`: ordinary (x, y) records appended to the data: :func:`mislabelled`,
  :func:`blank`, :func:`out_of_distribution`.
- :class:`CraftedDataset`: one gradient canary plus a training set whose every record's gradient
  the adversary chooses (threat model "white box, crafted dataset"): the worst-case
  instantiations of :mod:`attacks.worst_case` (docs/worst-case.md).

Inclusion is random and seeded (:func:`include`): one canary per run for the multi-run game,
m canaries per run for the one-run game (Steinke et al. 2023, each in with probability ½).

>>> import torch
>>> c = dirac([3, 5], dim=8, norm=1.0)
>>> c.vectors.sum(dim=1).tolist()
[1.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor, nn

from accountants import validate as check
from accountants.errors import InputError

from .data import Dataset

__all__ = [
    "Canaries",
    "CraftedDataset",
    "DiracCanaries",
    "GradientCanaries",
    "InputCanaries",
    "blank",
    "dirac",
    "dirac_slots",
    "include",
    "mean_image",
    "mislabelled",
    "out_of_distribution",
    "quiet_coordinates",
    "random_directions",
]


@dataclass(frozen=True)
class GradientCanaries:
    """m gradient canaries: the per-example gradient of canary j is ``vectors[j]`` at every step.

    Attributes:
        vectors: (m, D). Clipped to C by the trainer like any gradient.
        kind: "dirac" or "random_direction".
    """

    vectors: Tensor
    kind: str = "dirac"

    def __post_init__(self) -> None:
        if self.vectors.ndim != 2:
            raise InputError(f"vectors must have shape (m, D); got {tuple(self.vectors.shape)}")

    @property
    def m(self) -> int:
        """Number of canaries."""
        return int(self.vectors.shape[0])

    def select(self, index: Sequence[int] | Tensor) -> GradientCanaries:
        """The canaries ``index`` only."""
        return GradientCanaries(self.vectors[torch.as_tensor(index)], self.kind)


@dataclass(frozen=True)
class DiracCanaries:
    """m Dirac gradient canaries stored sparsely: canary j's gradient is ``norm`` · e_{coordinates[j]} in R^dim.

    The same canaries as :func:`dirac` (``dense()`` returns those), without the (m, D) tensor:
    :func:`attacks.dpsgd.train` adds their clipped contributions at their coordinates and reads the
    white-box observations there, so m = 1e5 canaries cost O(m) per step instead of O(m·D).
    Coordinates must be distinct (two canaries on one coordinate interact).

    Attributes:
        coordinates: (m,) int64 distinct flat parameter coordinates.
        dim: D.
        norm: the canaries' gradient norm (clipped to C by the trainer like any gradient).
    """

    coordinates: Tensor
    dim: int
    norm: float = 1.0
    kind: ClassVar[str] = "dirac"

    def __post_init__(self) -> None:
        check.integer(1, None, dim=self.dim)
        check.positive(norm=self.norm)
        c = self.coordinates
        if c.ndim != 1 or c.dtype != torch.int64:
            raise InputError(f"coordinates must be a 1-D int64 tensor; got shape {tuple(c.shape)}, {c.dtype}")
        if c.numel() and (int(c.min()) < 0 or int(c.max()) >= self.dim):
            raise InputError(f"coordinates must be in [0, {self.dim - 1}]")
        if torch.unique(c).numel() != c.numel():
            raise InputError("coordinates must be distinct (two Dirac canaries on one coordinate interact)")

    @property
    def m(self) -> int:
        """Number of canaries."""
        return int(self.coordinates.numel())

    def select(self, index: Sequence[int] | Tensor) -> DiracCanaries:
        """The canaries ``index`` only."""
        return DiracCanaries(self.coordinates[torch.as_tensor(index)], self.dim, self.norm)

    def dense(self, dtype=torch.float64) -> GradientCanaries:
        """The same canaries as an (m, D) :class:`GradientCanaries` (small m only: m·D numbers)."""
        return dirac(self.coordinates, self.dim, norm=self.norm, dtype=dtype)


@dataclass(frozen=True)
class InputCanaries:
    """m input-space canaries, appended to the training data as ordinary records.

    Attributes:
        x: (m, *feature_shape) in model-input (standardised) space.
        y: (m,) int64 labels.
        kind: "mislabelled", "blank", "mean_image" or "out_of_distribution".
    """

    x: Tensor
    y: Tensor
    kind: str

    def __post_init__(self) -> None:
        if self.x.shape[0] != self.y.shape[0]:
            raise InputError(f"x and y must have the same length; got {self.x.shape[0]} and {self.y.shape[0]}")

    @property
    def m(self) -> int:
        """Number of canaries."""
        return int(self.x.shape[0])

    def select(self, index: Sequence[int] | Tensor) -> InputCanaries:
        """The canaries ``index`` only."""
        i = torch.as_tensor(index)
        return InputCanaries(self.x[i], self.y[i], self.kind)


@dataclass(frozen=True)
class CraftedDataset(GradientCanaries):
    """One gradient canary g and a crafted training set around it (white box, crafted dataset).

    The records of the dataset, beside the natural ones of the setup, are gradient records:

    - ``background`` records whose gradient is −g (``background_gradient`` = −1, the default) or 0
      (``background_gradient`` = 0: records that only take batch places, for truncated Poisson),
      present in both neighbouring datasets;
    - the canary z (gradient g), ``copies`` times (a group of K records), present when "in";
    - with ``alternative``, a record z′ with gradient −g present when z is out (replace-one).

    Built by :func:`attacks.worst_case.crafted`; docs/worst-case.md gives each construction's
    argument. ``vectors`` is (1, D), the canary's gradient (also the white-box probe).
    """

    background: int = 0
    copies: int = 1
    alternative: bool = False
    background_gradient: int = -1

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.vectors.shape[0] != 1:
            raise InputError(f"a crafted dataset audits one canary; vectors must have shape (1, D), got "
                             f"{tuple(self.vectors.shape)}")
        check.integer(0, None, background=self.background)
        check.integer(1, None, copies=self.copies)
        if self.background_gradient not in (-1, 0) or isinstance(self.background_gradient, bool):
            raise InputError(f"background_gradient must be -1 (records of gradient −g) or 0; got "
                             f"{self.background_gradient!r}")

    @property
    def records(self) -> int:
        """Gradient records of the larger neighbouring dataset (background + copies, z′ replacing z)."""
        return self.background + self.copies

    def gradient_records(self) -> Tensor:
        """(background + copies + alternative, D): the gradient of every crafted record, in slot order."""
        g = self.vectors[0]
        rows = [(self.background_gradient * g).expand(self.background, -1), g.expand(self.copies, -1)]
        if self.alternative:
            rows.append(-g[None])
        return torch.cat(rows)

    def presence(self, member: Tensor) -> Tensor:
        """(R, slots) bool presence of every crafted slot given the (R, 1) membership of the canary."""
        R = member.shape[0]
        cols = [torch.ones(R, self.background, dtype=torch.bool), member[:, :1].expand(R, self.copies)]
        if self.alternative:
            cols.append(~member[:, :1])
        return torch.cat(cols, dim=1)


Canaries = GradientCanaries | DiracCanaries | InputCanaries


def dirac(coordinates: Sequence[int] | Tensor, dim: int, *, norm: float = 1.0, dtype=torch.float64) -> GradientCanaries:
    """Dirac gradient canaries: canary j is ``norm`` · e_{coordinates[j]} in R^dim.

    With ``norm`` = C (or more) and a coordinate no natural record touches, the white-box
    projection of each update on e_j is exactly (draws of canary j) + N(0, σ²) in units of C.
    """
    check.integer(1, None, dim=dim)
    check.positive(norm=norm)
    coords = torch.as_tensor(coordinates, dtype=torch.int64).reshape(-1)
    if coords.numel() and (coords.min() < 0 or coords.max() >= dim):
        raise InputError(f"coordinates must be in [0, {dim - 1}]; got {coords.tolist()}")
    v = torch.zeros(coords.numel(), dim, dtype=dtype)
    v[torch.arange(coords.numel()), coords] = norm
    return GradientCanaries(v, "dirac")


def dirac_slots(model: nn.Module, *, norm: float = 1.0) -> DiracCanaries:
    """One Dirac canary on each slot of a :class:`attacks.models.Slotted` model (norm ``norm`` each).

    The slots are never read by the forward pass, so no natural record's gradient touches them at any
    parameter value: each canary's white-box projection is exactly (its draws) + N(0, σ²) in units of
    C, independent of every other canary's and of the training (docs/worst-case.md, "One run at scale").
    """
    from .models import num_params, slot_coordinates

    coords = slot_coordinates(model)
    dim = num_params(dict(model.named_parameters()), stacked=False)
    return DiracCanaries(coords, dim, float(norm))


def random_directions(m: int, dim: int, *, norm: float = 1.0, generator: torch.Generator | None = None,
                      dtype=torch.float64) -> GradientCanaries:
    """m gradient canaries with uniformly random directions on the sphere of radius ``norm``."""
    check.integer(1, None, m=m, dim=dim)
    check.positive(norm=norm)
    v = torch.randn(m, dim, generator=generator, dtype=dtype)
    return GradientCanaries(v * (norm / v.norm(dim=1, keepdim=True)), "random_direction")


def quiet_coordinates(model: nn.Module, params: dict[str, Tensor], data: Dataset, k: int) -> Tensor:
    """The k parameter coordinates with the smallest largest per-example gradient over ``data``.

    Evaluated at ``params`` (one model, no leading axis). Coordinates that are *structurally*
    zero (a weight on an input feature that is constant in the data, such as digits pixels 0,
    32 and 39 after standardisation) stay zero at every parameter value, so Dirac canaries
    placed there collide with no natural record during the whole training run.

    Returns:
        (k,) int64 coordinates, quietest first.
    """
    from .models import per_example_gradients

    check.integer(1, None, k=k)
    g = per_example_gradients(model, params, data.x, data.y)
    mass = torch.cat([v.reshape(v.shape[0], -1).abs() for v in g.values()], dim=1).amax(dim=0)
    if k > mass.numel():
        raise InputError(f"k must be in [1, {mass.numel()}]; got {k}")
    return torch.sort(mass, stable=True).indices[:k]


def mislabelled(data: Dataset, m: int, *, generator: torch.Generator | None = None) -> InputCanaries:
    """m records of ``data`` (drawn without replacement) with a label changed to a random other class."""
    check.integer(1, data.n, m=m)
    i = torch.randperm(data.n, generator=generator)[:m]
    shift = torch.randint(1, data.num_classes, (m,), generator=generator)
    return InputCanaries(data.x[i].clone(), (data.y[i] + shift) % data.num_classes, "mislabelled")


def blank(data: Dataset, m: int = 1, *, generator: torch.Generator | None = None) -> InputCanaries:
    """m copies of the all-zero raw input (a blank image, Annamalai & De Cristofaro 2024), random labels."""
    check.integer(1, None, m=m)
    x = data.to_model_space(torch.zeros(data.feature_shape, dtype=data.x.dtype)).expand(m, *data.feature_shape)
    y = torch.randint(0, data.num_classes, (m,), generator=generator)
    return InputCanaries(x.clone(), y, "blank")


def mean_image(data: Dataset, m: int = 1, *, generator: torch.Generator | None = None) -> InputCanaries:
    """m copies of the data's mean record (x = 0 in standardised model space), random labels.

    For a model whose first layer is affine, the canary's gradient lies in that layer's bias (and
    the layers after it) alone: its weight gradient is the outer product with x = 0. So the audit
    reads how the trainer treats the bias, where a bug that skips noise or clipping on some
    parameters shows (docs/fault-detection.md: it catches noise missing on the bias, which every
    other canary misses).
    """
    check.integer(1, None, m=m)
    x = torch.zeros(m, *data.feature_shape, dtype=data.x.dtype)
    y = torch.randint(0, data.num_classes, (m,), generator=generator)
    return InputCanaries(x, y, "mean_image")


def out_of_distribution(data: Dataset, m: int, *, scale: float = 5.0,
                        generator: torch.Generator | None = None) -> InputCanaries:
    """m inputs drawn from N(0, scale² I) in standardised space (far from the data), random labels."""
    check.integer(1, None, m=m)
    check.positive(scale=scale)
    x = scale * torch.randn(m, *data.feature_shape, generator=generator, dtype=data.x.dtype)
    y = torch.randint(0, data.num_classes, (m,), generator=generator)
    return InputCanaries(x, y, "out_of_distribution")


def include(n: int, m: int = 1, *, p: float = 0.5, generator: torch.Generator | None = None) -> Tensor:
    """Seeded random inclusion: an (n, m) bool tensor, each entry True with probability p, independently."""
    check.integer(1, None, n=n, m=m)
    check.in_range(0.0, 1.0, closed="both", p=p)
    return torch.rand(n, m, generator=generator, dtype=torch.float64) < p
