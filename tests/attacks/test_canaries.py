"""Canaries: Dirac vectors, quiet coordinates, input-space canaries, seeded inclusion."""

import pytest
import torch

from attacks import canaries, models


def test_dirac_vectors():
    c = canaries.dirac([1, 4], dim=6, norm=2.5)
    assert c.m == 2
    assert c.kind == "dirac"
    assert c.vectors.norm(dim=1).tolist() == [2.5, 2.5]
    assert torch.nonzero(c.vectors).tolist() == [[0, 1], [1, 4]]
    with pytest.raises(ValueError, match=r"coordinates must be in \[0, 5\]"):
        canaries.dirac([6], dim=6)


def test_random_directions_on_sphere():
    c = canaries.random_directions(5, 100, norm=3.0, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(c.vectors.norm(dim=1), torch.full((5,), 3.0, dtype=torch.float64))


def test_quiet_coordinates_are_weights_on_blank_pixels(digits100):
    """digits pixels 0, 32, 39 are constant ⇒ ∂ℓ/∂W[k, j] = (p_k − y_k)·x_j = 0 for every record."""
    model = models.logistic_regression(64, 10)
    p = {k: v[0] for k, v in models.init_params(model, 1, torch.Generator().manual_seed(0)).items()}
    q = canaries.quiet_coordinates(model, p, digits100, 30)
    assert sorted(q.tolist()) == sorted(k * 64 + j for k in range(10) for j in (0, 32, 39))


def test_input_canaries(digits100):
    g = torch.Generator().manual_seed(1)
    mis = canaries.mislabelled(digits100, 5, generator=g)
    rows = [int(torch.nonzero((digits100.x == x).all(1))[0]) for x in mis.x]
    assert all(int(mis.y[i]) != int(digits100.y[r]) for i, r in enumerate(rows))  # label really changed
    blank = canaries.blank(digits100, 2, generator=g)
    torch.testing.assert_close(blank.x * digits100.scale + digits100.mean, torch.zeros(2, 64, dtype=torch.float64))
    ood = canaries.out_of_distribution(digits100, 3, scale=10.0, generator=g)
    assert ood.x.norm(dim=1).min() > 2 * digits100.x.norm(dim=1).max()  # scale 10 · √64 ≈ 80 vs ≤ 31
    assert mis.select([0, 2]).m == 2


def test_include_is_seeded_and_fair():
    a = canaries.include(4000, 2, generator=torch.Generator().manual_seed(5))
    b = canaries.include(4000, 2, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a, b)
    assert abs(a.double().mean().item() - 0.5) < 5 * (0.25 / 8000) ** 0.5  # 5-SE, seeded
