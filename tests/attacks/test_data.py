"""Embedded datasets: shapes, standardisation, seeding, and the optional torchvision path."""

import importlib.util

import pytest
import torch

from attacks import data


def test_digits_standardised(digits):
    assert tuple(digits.x.shape) == (1797, 64)
    assert digits.num_classes == 10
    assert digits.x.dtype == torch.float64
    std = digits.x.std(dim=0, unbiased=False)
    live = std > 0
    # z-score: mean 0 and std 1 on every non-constant pixel (closed form; float64 round-off)
    torch.testing.assert_close(digits.x.mean(dim=0), torch.zeros(64, dtype=torch.float64), atol=1e-12, rtol=0)
    torch.testing.assert_close(std[live], torch.ones(int(live.sum()), dtype=torch.float64), atol=1e-12, rtol=0)
    # pixels 0, 32, 39 are blank in every sklearn digit: exactly 0 after standardisation
    assert torch.nonzero(~live).squeeze(1).tolist() == [0, 32, 39]
    assert bool((digits.x[:, [0, 32, 39]] == 0).all())


def test_digits_images_and_raw_map(digits):
    img = data.digits(images=True)
    assert tuple(img.x.shape) == (1797, 1, 8, 8)
    torch.testing.assert_close(img.x.reshape(1797, 64), digits.x)
    raw = digits.x * digits.scale + digits.mean
    torch.testing.assert_close(digits.to_model_space(raw), digits.x)


def test_breast_cancer():
    d = data.breast_cancer()
    assert tuple(d.x.shape) == (569, 30)
    assert d.num_classes == 2
    assert set(d.y.tolist()) == {0, 1}


def test_gaussian_classes_seeded():
    a = data.gaussian_classes(200, 5, 3, seed=7)
    b = data.gaussian_classes(200, 5, 3, seed=7)
    c = data.gaussian_classes(200, 5, 3, seed=8)
    assert torch.equal(a.x, b.x)
    assert torch.equal(a.y, b.y)
    assert not torch.equal(a.x, c.x)
    assert torch.bincount(a.y).tolist() == [67, 67, 66]  # balanced: label = i mod K before shuffling


def test_load_registry_and_errors():
    assert data.names() == ["breast_cancer", "digits", "gaussian_classes"]
    with pytest.raises(ValueError, match="unknown dataset 'mnist'; choose from"):
        data.load("mnist")
    with pytest.raises(ValueError, match="num_classes"):
        data.gaussian_classes(10, 2, 1)


def test_torchvision_is_optional(tmp_path):
    if importlib.util.find_spec("torchvision") is None:
        with pytest.raises(ImportError, match="torchvision"):
            data.torchvision_folder("MNIST", tmp_path)
    else:  # never downloads: an empty folder is an error naming the folder
        with pytest.raises(ValueError, match="not found"):
            data.torchvision_folder("MNIST", tmp_path)
