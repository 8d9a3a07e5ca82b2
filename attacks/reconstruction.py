"""Informed-adversary reconstruction (Balle, Cherubin, Hayes 2022; Hayes, Mahloujifar, Balle 2023).

The adversary knows every training record except the target and a candidate set {z_1..z_n}
with the target drawn uniformly from it (prior κ = 1/n). It sees the run (white box: every
update; black box: the final model) and picks one candidate; success is an exact match. The
success rate is compared by the audit with the ReRo bound γ ≤ 1 − f(κ) of the claimed curve.

Both reconstructors return (K, n) candidate scores; the guess is the argmax.

>>> import torch
>>> guess(torch.tensor([[0.1, 2.0, -1.0]])).tolist()
[1]
"""

from __future__ import annotations

from torch import Tensor

from accountants.errors import InputError
from accountants.events import DPSGD

from .membership import white_box_llr

__all__ = ["black_box_scores", "guess", "success", "white_box_scores"]


def white_box_scores(observations: Tensor, spec: DPSGD, dataset_size: int, *, amplitude: float = 1.0) -> Tensor:
    """Log-posterior (up to a constant) of each candidate from the update projections.

    With candidates that are gradient canaries on distinct quiet coordinates, the projections on
    the n directions are independent given the target, so the posterior of candidate j is
    κ · Π_t [in-law(o_tj) / out-law(o_tj)] × (terms common to all j): the MAP guess is the
    argmax of the white-box log-likelihood ratio (Bayes-optimal under the uniform prior).

    Args:
        observations: (K, T, n) projections on the n candidate directions, in units of C.

    Returns:
        (K, n).
    """
    return white_box_llr(observations.transpose(-1, -2), spec, dataset_size, amplitude=amplitude)


def black_box_scores(target: Tensor, reference: Tensor) -> Tensor:
    """Standardised shift of each candidate's statistic against reference models trained without it.

    The informed adversary trains reference models on the known records D₋ (no candidate) and
    scores candidate j by (φ_j(θ) − mean_ref φ_j) / sd_ref φ_j: the candidate the model fits
    unusually well is the one it was trained on (an offline-LiRA reconstructor).

    Args:
        target: (K, n) statistics (e.g. :func:`attacks.membership.logit_confidence`) of the attacked models.
        reference: (S, n) the same statistics on S ≥ 2 reference models.

    Returns:
        (K, n).
    """
    if reference.ndim != 2 or reference.shape[0] < 2 or reference.shape[1] != target.shape[-1]:
        raise InputError(f"reference must have shape (S ≥ 2, n={target.shape[-1]}); got {tuple(reference.shape)}")
    mu = reference.mean(dim=0)
    sd = reference.std(dim=0).clamp_min(1e-30)
    return (target - mu) / sd


def guess(scores: Tensor) -> Tensor:
    """The reconstructor's pick: argmax over candidates (first index on ties), (K,)."""
    return scores.argmax(dim=-1)


def success(scores: Tensor, truth: Tensor) -> Tensor:
    """Exact-match success per trial, (K,) bool."""
    return guess(scores) == truth
