"""Result types: every result states its direction (lower bound, estimate, confidence boxes)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..jsontypes import JSONObject


@dataclass(frozen=True)
class EpsilonLowerBound:
    """ε ≥ ``value`` at ``delta``, with probability ≥ ``confidence``.  Bound: lower.

    Attributes:
        value: the lower bound (0 when nothing is certified).
        confidence: 1 − significance.
        delta: the δ of the (ε, δ) statement.
        method: "clopper_pearson", "jeffreys" (approximate coverage) or "one_run" (the f-DP one-run audit
            returns a :class:`GdpLowerBound`, never this type).
        strategy: how the threshold (or number of guesses) was chosen and paid for.
        threshold: the threshold that attained ``value`` (score ≥ threshold ⇒ member); None if none.
        fpr, fnr: realised empirical rates at that threshold (multi-run).
        fpr_upper, fnr_upper: the upper confidence limits used.
        n_in, n_out: counts of member / non-member trials (multi-run); m canaries (one-run: n_in + n_out).
        n_hypotheses: thresholds (or guess counts) the union bound paid for.
        guesses, correct: one-run: guesses made and how many were right.
    """

    value: float
    confidence: float
    delta: float
    method: str
    strategy: str
    threshold: float | None = None
    fpr: float | None = None
    fnr: float | None = None
    fpr_upper: float | None = None
    fnr_upper: float | None = None
    n_in: int = 0
    n_out: int = 0
    n_hypotheses: int = 1
    guesses: int | None = None
    correct: int | None = None
    bound: str = field(default="lower", init=False)

    def __float__(self) -> float:
        return float(self.value)

    def to_dict(self) -> JSONObject:
        """JSON-ready dictionary (every attribute, plus ``bound``)."""
        return {k: getattr(self, k) for k in (
            "value", "bound", "confidence", "delta", "method", "strategy", "threshold", "fpr", "fnr", "fpr_upper",
            "fnr_upper", "n_in", "n_out", "n_hypotheses", "guesses", "correct")}


@dataclass(frozen=True)
class GdpEstimate:
    """A Gaussian-DP fit to the empirical trade-off.  Bound: none (an estimate).

    It assumes the mechanism's curve has Gaussian shape, so it is not a model-free lower bound
    (auditing digest §2c) and never passes or fails anything.

    Attributes:
        mu_estimate: max over the frontier of Φ⁻¹(1 − FPR_ub) − Φ⁻¹(FNR_ub) (both orientations),
            with the same Bonferroni-corrected CP limits as the ε bound (grid thresholds); clamped at 0.
        epsilon_estimate: the ε of μ-GDP at ``delta`` (Dong et al. Cor. 2.13).
        delta: δ.
    """

    mu_estimate: float
    epsilon_estimate: float
    delta: float

    def to_dict(self) -> JSONObject:
        return {"mu_estimate": self.mu_estimate, "epsilon_estimate": self.epsilon_estimate, "delta": self.delta}


@dataclass(frozen=True)
class EmpiricalTradeOff:
    """Empirical (FPR, FNR) points on the threshold frontier with simultaneous confidence boxes.

    All boxes contain the true (FPR, FNR) of their threshold simultaneously with probability
    ≥ ``confidence``: each rate gets a two-sided Clopper–Pearson interval at level
    significance / (2H) for H thresholds.

    Attributes:
        thresholds, fpr, fnr, fpr_lo, fpr_hi, fnr_lo, fnr_hi: (H,) arrays, thresholds decreasing.
        n_in, n_out: trial counts.
        confidence: simultaneous confidence of the boxes.
        roc_fpr, roc_tpr: the full empirical ROC (every threshold), for plots only.
    """

    thresholds: np.ndarray
    fpr: np.ndarray
    fnr: np.ndarray
    fpr_lo: np.ndarray
    fpr_hi: np.ndarray
    fnr_lo: np.ndarray
    fnr_hi: np.ndarray
    n_in: int
    n_out: int
    confidence: float
    roc_fpr: np.ndarray = field(default_factory=lambda: np.zeros(0))
    roc_tpr: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def to_dict(self) -> JSONObject:
        return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in (
            ("thresholds", self.thresholds), ("fpr", self.fpr), ("fnr", self.fnr), ("fpr_lo", self.fpr_lo),
            ("fpr_hi", self.fpr_hi), ("fnr_lo", self.fnr_lo), ("fnr_hi", self.fnr_hi), ("n_in", self.n_in),
            ("n_out", self.n_out), ("confidence", self.confidence))}  # the ROC is for plots only


@dataclass(frozen=True)
class GdpLowerBound:
    """The mechanism is not μ-GDP for any μ ≤ ``mu_lower``, with probability ≥ ``confidence``.  Bound: gdp_mu_lower.

    IMPORTANT: NOT an (ε, δ) lower bound, and never shown as ε_lower. (ε, δ)-DP does not imply
    μ(ε, δ)-GDP, so refuting a GDP curve says nothing about the mechanism's ε at δ: randomized
    response with pure ε = 1 is refuted at ``refuted_curve_epsilon`` > 1 in most audits (issue 11 §3).

    Attributes:
        mu_lower: lower bound on the GDP μ (0 when nothing is refuted).
        refuted_curve_epsilon: ε at ``delta`` of the refuted μ-GDP curve (Dong et al. Cor. 2.13).
        confidence: 1 − significance.
        delta: the δ at which ``refuted_curve_epsilon`` is read.
        method: "one_run_fdp" (Mahloujifar, Melis, Chaudhuri 2024).
        strategy: how the number of guesses was chosen and paid for.
        n_in, n_out, n_hypotheses, guesses, correct: as in :class:`EpsilonLowerBound`.
    """

    mu_lower: float
    refuted_curve_epsilon: float
    confidence: float
    delta: float
    method: str
    strategy: str
    n_in: int = 0
    n_out: int = 0
    n_hypotheses: int = 1
    guesses: int | None = None
    correct: int | None = None
    bound: str = field(default="gdp_mu_lower", init=False)

    def to_dict(self) -> JSONObject:
        """JSON-ready dictionary (every attribute, plus ``bound``)."""
        return {k: getattr(self, k) for k in (
            "mu_lower", "refuted_curve_epsilon", "bound", "confidence", "delta", "method", "strategy", "n_in",
            "n_out", "n_hypotheses", "guesses", "correct")}
