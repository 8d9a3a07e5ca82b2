"""Closed-form per-example norms and clipped sums (attacks.ghost) against torch.func's vmap(grad).

Reference: the autograd path of the trainer (``vmap(grad(cross_entropy))``, itself pinned against a
batch-of-one autograd loop in test_dpsgd.py). Same gradients summed in another order, so float64
agreement to 1e-10 absolute (values are O(1); round-off is ~1e-15 per operation).
"""

import pytest
import torch

import accountants as acc
from attacks import dpsgd, ghost, models


def _cases(digits100):
    imgs = digits100.as_images(8)
    return {
        "logreg": (models.logistic_regression(64, 10), digits100),
        "mlp": (models.mlp(64, 16, 10), digits100),
        "cnn": (models.small_cnn(10, channels=4), imgs),
    }


@pytest.mark.parametrize("which", ["logreg", "mlp", "cnn"])
def test_norms_and_weighted_sums_equal_autograd(digits100, which):
    model, d = _cases(digits100)[which]
    R, B = 3, 9
    p = models.init_params(model, R, [torch.Generator().manual_seed(s) for s in range(R)])
    g = torch.Generator().manual_seed(7)
    idx = torch.randint(0, d.n, (R, B), generator=g)
    x, y = d.x[idx], d.y[idx]
    w = torch.rand(R, B, generator=g, dtype=torch.float64)
    sq, weighted_sum = ghost.for_model(model)(p, x, y)
    grads = dpsgd._stacked_per_example_gradients(model)(p, x, y)
    ref_sq = sum((v.reshape(R, B, -1) ** 2).sum(-1) for v in grads.values())
    torch.testing.assert_close(sq, ref_sq, atol=1e-10, rtol=0)
    sums = weighted_sum(w)
    assert list(sums) == list(p)  # one entry per parameter, names as the model's
    for name, v in grads.items():
        ref = torch.einsum("rb,rbk->rk", w, v.reshape(R, B, -1))
        torch.testing.assert_close(sums[name].reshape(R, -1), ref, atol=1e-10, rtol=0)


@pytest.mark.parametrize("which", ["logreg", "cnn"])
def test_trainer_closed_form_equals_autograd_path(digits100, which):
    """Whole DP-SGD runs (clipping active, Poisson batches, noise): both paths give the same models."""
    model, d = _cases(digits100)[which]
    spec = acc.DPSGD(1.0, acc.Poisson(0.2), steps=4)
    runs = [dpsgd.train(spec, model, d, clip_norm=0.1, learning_rate=0.5, n_models=2, closed_form=cf,
                        generator=[torch.Generator().manual_seed(s) for s in (5, 6)]) for cf in (True, False)]
    torch.testing.assert_close(models.flatten(runs[0].params), models.flatten(runs[1].params), atol=1e-10, rtol=0)
    torch.testing.assert_close(runs[0].update_norms, runs[1].update_norms, atol=1e-9, rtol=0)
    assert torch.equal(runs[0].batch_sizes, runs[1].batch_sizes)


def test_only_known_architectures_have_a_closed_form():
    assert ghost.for_model(models.logistic_regression(4, 2)) is not None
    assert ghost.for_model(models.mlp(4, 3, 2, dropout=0.5)) is None  # a random mask: autograd path
    assert ghost.for_model(models.mlp(4, 3, 2, dropout=0.5).eval()) is not None

    class Other(models.LogisticRegression):  # a subclass may change forward
        pass

    assert ghost.for_model(Other(4, 2)) is None
    cnn = models.small_cnn(10)
    cnn.conv.stride = (2, 2)
    assert ghost.for_model(cnn) is None
