"""Embedded datasets that need no download, as float tensors ready for DP-SGD.

Every loader returns a :class:`Dataset`: standardised features (per-feature z-score; a feature
that is constant in the data is mapped to exactly 0, which keeps weights on it *structurally*
untouched by every natural gradient, the coordinates Dirac canaries live on), integer labels,
and the standardisation constants so that raw-space canaries (a blank image) can be mapped in.

>>> from attacks import data
>>> d = data.digits()
>>> tuple(d.x.shape), d.num_classes
((1797, 64), 10)
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from accountants import validate as check
from accountants.errors import InputError, InputTypeError

__all__ = ["Dataset", "breast_cancer", "digits", "gaussian_classes", "load", "names", "torchvision_folder"]


@dataclass(frozen=True)
class Dataset:
    """Features, labels and how the features were standardised.

    Attributes:
        x: (n, *feature_shape) features in model-input space (standardised).
        y: (n,) int64 labels in [0, num_classes).
        num_classes: K.
        name: where the data came from.
        mean, scale: (*feature_shape) raw = x * scale + mean (scale is 1 on constant features).
    """

    x: Tensor
    y: Tensor
    num_classes: int
    name: str
    mean: Tensor
    scale: Tensor

    def __post_init__(self) -> None:
        if self.x.shape[0] != self.y.shape[0]:
            raise InputError(f"x and y must have the same length; got {self.x.shape[0]} and {self.y.shape[0]}")
        if self.y.dtype != torch.int64:
            raise InputTypeError(f"y must be int64; got {self.y.dtype}")

    @property
    def n(self) -> int:
        """Number of records."""
        return int(self.x.shape[0])

    @property
    def feature_shape(self) -> tuple[int, ...]:
        """Shape of one record's features."""
        return tuple(self.x.shape[1:])

    def to_model_space(self, raw: Tensor) -> Tensor:
        """Map raw features (same shape as one or many records) into standardised space."""
        return (raw.to(self.x.dtype) - self.mean) / self.scale

    def subset(self, index: Tensor | slice) -> Dataset:
        """Records ``index`` (standardisation constants unchanged), in their own storage: a slice is
        copied, so the subset travels to worker processes without the whole dataset behind it."""
        return Dataset(self.x[index].clone(), self.y[index].clone(), self.num_classes, self.name, self.mean,
                       self.scale)

    def append(self, x: Tensor, y: Tensor) -> Dataset:
        """A new dataset with records ``(x, y)`` appended at the end (canary slots)."""
        return Dataset(
            torch.cat([self.x, x.to(self.x.dtype)]), torch.cat([self.y, y.to(torch.int64)]),
            self.num_classes, self.name, self.mean, self.scale,
        )

    def as_images(self, side: int) -> Dataset:
        """Reshape flat features to (n, 1, side, side) (for the small CNN)."""
        shape = (1, side, side)
        return Dataset(
            self.x.reshape(self.n, *shape), self.y, self.num_classes, self.name,
            self.mean.reshape(shape), self.scale.reshape(shape),
        )


def _standardise(x: np.ndarray, y: np.ndarray, num_classes: int, name: str, dtype: torch.dtype) -> Dataset:
    mean = x.mean(axis=0)
    std = x.std(axis=0)
    scale = np.where(std > 0, std, 1.0)  # constant feature -> exactly 0 after centring
    z = (x - mean) / scale
    return Dataset(
        torch.as_tensor(z, dtype=dtype), torch.as_tensor(y, dtype=torch.int64), num_classes, name,
        torch.as_tensor(mean, dtype=dtype), torch.as_tensor(scale, dtype=dtype),
    )


def digits(*, images: bool = False, dtype: torch.dtype = torch.float64) -> Dataset:
    """scikit-learn's 8×8 handwritten digits (1,797 records, 10 classes), standardised.

    Pixels 0, 32 and 39 are 0 in every image, so they are exactly 0 after standardisation.

    Args:
        images: reshape to (n, 1, 8, 8) for the CNN.
        dtype: floating dtype of the features.
    """
    from sklearn.datasets import load_digits

    raw = load_digits()
    d = _standardise(raw.data.astype(np.float64), raw.target, 10, "digits", dtype)
    return d.as_images(8) if images else d


def breast_cancer(*, dtype: torch.dtype = torch.float64) -> Dataset:
    """scikit-learn's Wisconsin breast cancer data (569 records, 30 features, 2 classes), standardised."""
    from sklearn.datasets import load_breast_cancer

    raw = load_breast_cancer()
    return _standardise(raw.data.astype(np.float64), raw.target, 2, "breast_cancer", dtype)


def gaussian_classes(
    n: int = 1000, dim: int = 20, num_classes: int = 2, *, separation: float = 2.0, seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> Dataset:
    """Synthetic Gaussian classes: class k is N(c_k, I) with a random centre c_k of norm ``separation``.

    Centres are drawn once from N(0, I) and rescaled to norm ``separation``; labels are balanced
    (record i has label i mod K), then the rows are shuffled. Fully determined by ``seed``.

    Args:
        n: number of records (≥ num_classes).
        dim: feature dimension.
        num_classes: K ≥ 2.
        separation: norm of each class centre.
        seed: seed of the NumPy generator.
    """
    check.integer(2, None, num_classes=num_classes)
    check.integer(num_classes, None, n=n)
    check.integer(1, None, dim=dim)
    check.positive(separation=separation)
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((num_classes, dim))
    centres *= separation / np.linalg.norm(centres, axis=1, keepdims=True)
    y = np.arange(n) % num_classes
    x = centres[y] + rng.standard_normal((n, dim))
    perm = rng.permutation(n)
    return _standardise(x[perm], y[perm], num_classes, f"gaussian_classes(seed={seed})", dtype)


def torchvision_folder(
    name: str, root: str | Path, *, train: bool = True, dtype: torch.dtype = torch.float64
) -> Dataset:
    """A torchvision dataset (e.g. "MNIST") read from a local folder, never downloaded.

    Raises:
        ImportError: torchvision is not installed (it is optional: the ``vision`` extra).
        ValueError: unknown dataset name, or the files are not in ``root``.
    """
    if importlib.util.find_spec("torchvision") is None:
        raise ImportError("torchvision_folder needs torchvision (pip install 'dpaudit[vision]')")
    import torchvision  # optional dependency

    cls = getattr(torchvision.datasets, name, None)
    if cls is None:
        raise InputError(f"name must be a torchvision dataset class such as 'MNIST'; got {name!r}")
    try:
        ds = cls(root=str(root), train=train, download=False)
    except RuntimeError as err:  # torchvision raises RuntimeError when files are missing
        raise InputError(f"{name} not found under root={str(root)!r}: {err}") from None
    x = np.asarray(ds.data, dtype=np.float64).reshape(len(ds.data), -1)
    y = np.asarray(ds.targets)
    return _standardise(x, y, int(y.max()) + 1, f"torchvision:{name}", dtype)


_LOADERS = {"digits": digits, "breast_cancer": breast_cancer, "gaussian_classes": gaussian_classes}


def names() -> list[str]:
    """Names accepted by :func:`load`."""
    return sorted(_LOADERS)


def load(name: str, **kwargs) -> Dataset:
    """Load an embedded dataset by name (see :func:`names`)."""
    try:
        loader = _LOADERS[name]
    except KeyError:
        raise InputError(f"unknown dataset {name!r}; choose from {names()}") from None
    return loader(**kwargs)
