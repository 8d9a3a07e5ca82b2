"""Place the experiment on the theory: empirical points and boxes against analytical curves.

The analytical curves of the audited spec come from the accountants (each is a sound LOWER
bound on the true trade-off curve, so ``bound == "lower"``): one per registered accounting method
(:func:`accountants.methods`: "rdp", "pld", and any method registered later) that covers the spec.
Of those, :func:`tightest_method` picks the one with the smallest ε at δ (the minimum of sound upper
bounds is sound); its curve is the one every test below runs against, and ε_certifiable is
simulated on it (:mod:`audit.runs`).

- **Violation test** (:func:`violation_test`): if some confidence box lies entirely below a sound
  lower curve f, i.e. its upper corner has FNR_ub < f(FPR_ub) (or FPR_ub < f(FNR_ub), the other
  ordering of the neighbouring pair), the mechanism that was run does NOT satisfy the claim. With
  simultaneous boxes at confidence 1 − s, a correct implementation is flagged with probability
  ≤ s. Reported as "bug or broken DP", never as noise.
- **Tightness**: ε_lower / ε_tight and ε_lower / ε_rdp (both ε's are accountant upper bounds).
- **Δ-divergences** Δ(theory‖empirical) and Δ(empirical‖theory) (Kaissis et al. 2024,
  arXiv:2406.08918v1, Def. 1) between the analytical curve and the convex hull of the empirical
  points; the hull is a point estimate, so both are ``*_estimate``.
- **Reconstruction**: success rate with a Clopper–Pearson lower bound against the ReRo bound
  1 − f(κ) (Hayes, Mahloujifar, Balle 2023, arXiv:2302.07225v3 Thm 2).

>>> import numpy as np, accountants as acc
>>> from scipy.stats import norm
>>> q = (np.arange(1000) + 0.5) / 1000
>>> pts = statistics.empirical_tradeoff(norm.ppf(q) + 1.0, norm.ppf(q))
>>> violation_test(pts, acc.TradeOff.from_gdp(1.0)).violated, violation_test(pts, acc.TradeOff.from_gdp(0.2)).violated
(False, True)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import scipy.stats
import torch

import accountants as acc
from accountants.comparison import delta_divergence
from accountants.errors import InputError, InputTypeError, UnsupportedError
from accountants.events import DPSGD
from accountants.reconstruction import rero_bound
from accountants.tradeoff import TradeOff

from . import formatting as fmt
from . import statistics
from .jsontypes import JSONObject
from .statistics import EmpiricalTradeOff, EpsilonLowerBound, GdpEstimate, GdpLowerBound, ThresholdStrategy

__all__ = [
    "Curves",
    "MembershipComparison",
    "OneRunStatisticResult",
    "ReconstructionComparison",
    "Violation",
    "analytical_curves",
    "compare_membership",
    "compare_one_run",
    "compare_reconstruction",
    "format_confidence",
    "tightest_method",
    "violation_test",
]

_TOL = 1e-9  # numerical guard: a box must lie below the curve by more than this


def format_confidence(c: float) -> str:
    """A confidence as a percentage with the digits it needs, rounded down: 0.95 → "95%", 1 − 0.05/12 →
    "99.58%", 1 − 0.05/4 → "98.7%" (never "100%", never more than the confidence held).

    The fewest decimals whose rounded-down value shows the miss probability 1 − c to within 5 % of itself (a
    printed confidence never overstates the one the bound holds at; rounding to the nearest printed 98.8 %
    for 98.75 %).
    """
    c = float(c)
    if not 0.0 <= c < 1.0:
        return f"{c:.0%}"
    miss = 100.0 * (1.0 - c)
    for d in range(0, 12):
        down = math.floor(100.0 * c * 10 ** d + 1e-9) / 10 ** d  # + 1e-9: 100·0.975 is 97.49999… in floats
        if down < 100.0 and (100.0 - down) - miss <= 0.05 * miss:
            return f"{down:.{d}f}%"
    return f"{100.0 * c:.17g}%"


def tightest_method(epsilon: dict[str, float]) -> str | None:
    """The method with the smallest ε (ties: the first in name order); None for no method.

    The one choice of the accountant the audit reports as its upper bound and runs against: the
    violation test, the reconstruction bound and ε_certifiable all use this method's curve. Each
    method's ε is a sound upper bound, so their minimum is one too.
    """
    if not epsilon:
        return None
    return min(sorted(epsilon), key=lambda m: epsilon[m])


@dataclass
class Curves:
    """The analytical curves of one spec (sound lower bounds on its trade-off curve), keyed by method name.

    Every registered accounting method (:func:`accountants.methods`) that covers the spec has an
    entry, so a newly registered method shows up here, in the run's result and in the report.

    Attributes:
        spec: the audited DP-SGD description.
        delta: δ.
        curves: method name → TradeOff (a lower bound on the trade-off curve).
        epsilon: method name → the accountant's ε at ``delta`` (an upper bound).
        epsilon_lower: method name → the certified lower end of the method's bracket, or None.
        labels: method name → its label for reports (:func:`accountants.method_label`).
        notes: why a method is missing ("name: reason").
    """

    spec: DPSGD
    delta: float
    curves: dict[str, TradeOff] = field(default_factory=dict)
    epsilon: dict[str, float] = field(default_factory=dict)
    epsilon_lower: dict[str, float | None] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def best_method(self) -> str | None:
        """:func:`tightest_method` of the methods with a curve, or None when none covers the spec."""
        return tightest_method({m: self.epsilon.get(m, math.inf) for m in self.curves})

    @property
    def best(self) -> TradeOff | None:
        """The curve of :attr:`best_method`."""
        m = self.best_method
        return None if m is None else self.curves[m]

    @property
    def epsilon_best(self) -> float | None:
        """The smallest accountant ε (each is a sound upper bound)."""
        return min(self.epsilon.values()) if self.epsilon else None

    # Read-only names of the two built-in methods, for callers written before the registry drove this
    # (and for the result's epsilon_rdp/epsilon_tight fields); nothing chooses a curve by these names.
    @property
    def rdp(self) -> TradeOff | None:
        return self.curves.get("rdp")

    @property
    def tight(self) -> TradeOff | None:
        """The PLD curve (the method called "pld")."""
        return self.curves.get("pld")

    @property
    def epsilon_rdp(self) -> float | None:
        return self.epsilon.get("rdp")

    @property
    def epsilon_tight(self) -> float | None:
        return self.epsilon.get("pld")

    @property
    def epsilon_tight_lower(self) -> float | None:
        return self.epsilon_lower.get("pld")


def analytical_curves(spec: DPSGD, delta: float, *, methods: tuple[str, ...] | None = None) -> Curves:
    """Curves and ε of ``spec`` from every method in ``methods`` (default: every registered one) that covers it.

    Bound: lower (curves), upper (ε).
    """
    if not isinstance(spec, DPSGD):
        raise InputTypeError(f"spec must be an accountants.DPSGD; got {type(spec).__name__}")
    out = Curves(spec, float(delta))
    for method in acc.methods() if methods is None else methods:
        try:
            f = acc.tradeoff_curve(spec, method=method)
            e = acc.epsilon(spec, delta, method=method)
        except UnsupportedError as exc:
            out.notes.append(f"{method}: {exc}")
            continue
        out.curves[method], out.epsilon[method], out.epsilon_lower[method] = f, float(e.value), e.lower
        out.labels[method] = acc.method_label(method)
    return out


@dataclass(frozen=True)
class Violation:
    """Outcome of a violation test against one curve: the box-below-curve test, or the exact threshold test.

    Attributes:
        violated: True when some box lies entirely below the curve.
        against: what the curve is (e.g. "pld curve of the spec" or "claim eps=2, delta=1e-05").
        confidence: the boxes' simultaneous confidence.
        threshold, fpr_upper, fnr_upper, curve_fnr: the worst box (largest gap), when any.
        margin: max over boxes of f(FPR_ub) − FNR_ub (and the swapped ordering); > 0 ⇔ violated. For the exact
            threshold test (:func:`exact_violation_test`): significance − p, with ``p_value`` and the realised
            ``fpr``, ``fnr`` at its threshold (the box corners then None).
    """

    violated: bool
    against: str
    confidence: float
    margin: float
    threshold: float | None = None
    fpr_upper: float | None = None
    fnr_upper: float | None = None
    curve_fnr: float | None = None
    p_value: float | None = None  # the exact threshold test's (Bonferroni over the grid); None: the box test
    fpr: float | None = None  # the exact test's realised rates at its threshold
    fnr: float | None = None

    @property
    def message(self) -> str:
        """One line for reports; a violation is always worded as "bug or broken DP"."""
        conf = format_confidence(self.confidence)  # 1 − 0.05/12 prints "99.6%", never "100%"
        if not self.violated:
            return f"no violation of {self.against} (at {conf} confidence)"
        if self.p_value is not None and None not in (self.threshold, self.fpr, self.fnr, self.curve_fnr):
            return (f"VIOLATION of {self.against}: bug or broken DP — at threshold {self.threshold:.6g} the trials "
                    f"show FPR {self.fpr:.4g} and FNR {self.fnr:.4g}, where the curve allows no FNR below "
                    f"{self.curve_fnr:.4g} (the exact threshold test's p ≤ {fmt.upper(self.p_value, 2)}, at {conf} "
                    "confidence)")
        if self.threshold is None or self.fpr_upper is None or self.fnr_upper is None or self.curve_fnr is None:
            return f"VIOLATION of {self.against}: bug or broken DP (at {conf} confidence)"
        return (f"VIOLATION of {self.against}: bug or broken DP — at threshold {self.threshold:.6g} the "
                f"{conf} box has FPR ≤ {fmt.upper(self.fpr_upper, 4)} and FNR ≤ {fmt.upper(self.fnr_upper, 4)}, "
                f"below the curve's {self.curve_fnr:.4g}")

    def to_dict(self) -> JSONObject:
        return {"violated": self.violated, "against": self.against, "confidence": self.confidence,
                "margin": self.margin, "threshold": self.threshold, "fpr_upper": self.fpr_upper,
                "fnr_upper": self.fnr_upper, "curve_fnr": self.curve_fnr, "p_value": self.p_value, "fpr": self.fpr,
                "fnr": self.fnr, "message": self.message}


def violation_test(points: EmpiricalTradeOff, curve: TradeOff, *, against: str | None = None) -> Violation:
    """Is some confidence box entirely below ``curve``?  Bound: false-alarm probability ≤ 1 − points.confidence.

    A box [α_lo, α_hi] × [β_lo, β_hi] lies below a non-increasing f iff β_hi < f(α_hi). Both
    orderings of the neighbouring pair are tested (α_hi < f(β_hi) too), which is valid for the
    symmetric curves the accountants return and for claims of (ε, δ)-DP.

    Args:
        points: :func:`audit.statistics.empirical_tradeoff` output (multi-run design only).
        curve: a sound lower bound on the claimed mechanism's trade-off (``bound`` "lower" or "exact").
        against: label for reports (default: the curve's description).
    """
    if not isinstance(points, EmpiricalTradeOff):
        raise InputTypeError(f"points must be an EmpiricalTradeOff; got {type(points).__name__}")
    if not isinstance(curve, TradeOff):
        raise InputTypeError(f"curve must be an accountants.TradeOff; got {type(curve).__name__}")
    if curve.bound == "estimate":
        raise InputError("curve must be a sound bound (bound 'lower' or 'exact'); an estimate cannot be violated")
    a_hi = torch.as_tensor(np.clip(points.fpr_hi, 0, 1), dtype=torch.float64)
    b_hi = torch.as_tensor(np.clip(points.fnr_hi, 0, 1), dtype=torch.float64)
    g1 = (curve(a_hi) - b_hi).numpy()  # > 0: the box is below f
    g2 = (curve(b_hi) - a_hi).numpy()  # the other ordering
    gap = np.maximum(g1, g2)
    i = int(np.argmax(gap))
    margin = float(gap[i])
    label = against or curve.description
    if margin <= _TOL:
        return Violation(False, label, points.confidence, margin)
    first = g1[i] >= g2[i]
    t = float(points.thresholds[i])
    return Violation(True, label, points.confidence, margin, t,
                     float(points.fpr_hi[i] if first else points.fnr_hi[i]),
                     float(points.fnr_hi[i] if first else points.fpr_hi[i]),
                     float(curve(torch.tensor(float(a_hi[i] if first else b_hi[i])))))


def numpy_curve(f: TradeOff) -> Callable[[np.ndarray], np.ndarray]:
    """``f`` as a function of numpy arrays (float64), the form :mod:`audit.statistics` takes curves in."""
    return lambda a: f(torch.as_tensor(np.asarray(a, dtype=np.float64))).numpy()


def exact_violation_test(in_scores, out_scores, curve: TradeOff, *, significance: float,
                         against: str | None = None) -> Violation:
    """The exact threshold test (:mod:`audit.statistics.threshold_test`) of "the trade-off lies on or above
    ``curve``".  Bound: false-alarm probability ≤ ``significance``.

    The same null and grid of thresholds as :func:`violation_test`, one exact p-value per threshold instead of a
    box per threshold: a box below the curve implies a rejection here, not conversely. ``margin`` is
    significance − p (> 0 ⇔ violated); the worst threshold's realised rates are ``fpr``, ``fnr``; where the
    threshold was read off the in-scores, the curve bounds the other ordering (FPR ≥ f(FNR)) and ``fpr``/``fnr``
    are swapped to match ``curve_fnr``.
    """
    if not isinstance(curve, TradeOff):
        raise InputTypeError(f"curve must be an accountants.TradeOff; got {type(curve).__name__}")
    if curve.bound == "estimate":
        raise InputError("curve must be a sound bound (bound 'lower' or 'exact'); an estimate cannot be violated")
    r = statistics.threshold_test(in_scores, out_scores, numpy_curve(curve), significance=significance)
    label = against or curve.description
    violated = r.rejects(significance)
    first, second = (r.fpr, r.fnr) if r.strict else (r.fnr, r.fpr)
    return Violation(violated, label, 1 - significance, significance - r.p_value,
                     r.threshold if violated else None, None, None, r.curve_fnr if violated else None, r.p_value,
                     first if violated else None, second if violated else None)


ONE_RUN_INDEPENDENCE = "canaries do not interact (each canary's view independent of the others' bits)"
"""The assumption of the order-statistics one-run bound (:mod:`audit.statistics.one_run_order`)."""


@dataclass(frozen=True)
class OneRunStatisticResult:
    """One one-run statistic's result, as the report lists it (which statistic certified what).

    Attributes:
        name: "steinke" (Steinke et al. 2023), "order" (Xiang et al. 2025, (ε, δ) form), "scores" (threshold
            boxes on the scores, :func:`audit.statistics.epsilon_one_run_scores`), "order_family" (the order
            statistic under the composite SGM null, :func:`audit.statistics.epsilon_one_run_order_sgm_family`),
            "fdp_gdp" (Mahloujifar et al.
            2024), "order_gdp" (Xiang et al., μ-GDP form) or "scores_gdp" (the boxes' μ-GDP form); the three GDP
            ones bound μ.
        result: its bound (an ε lower bound, or a GDP μ lower bound that never enters ε_lower).
        in_epsilon_lower: whether it entered the audit's ε_lower (the max over the entered ones).
        assumption: what its soundness assumes beyond the one-run game ("" for nothing).
    """

    name: str
    result: EpsilonLowerBound | GdpLowerBound
    in_epsilon_lower: bool
    assumption: str = ""


@dataclass
class MembershipComparison:
    """Everything the report says about one membership audit (multi-run or one-run).

    Lower bounds: ``epsilon_lower`` (at ``delta``, confidence 1 − s); ``gdp_lower`` bounds the GDP μ
    (one-run f-DP audit), not ε. Upper bounds: ``curves.epsilon`` (one per method; the tightest,
    ``curves.epsilon_best``, is the one tested). Estimates: ``gdp``, the Δ's, ``tightness_*``.
    """

    epsilon_lower: EpsilonLowerBound
    ceiling: float
    curves: Curves
    points: EmpiricalTradeOff | None = None
    gdp: GdpEstimate | None = None
    violations: list[Violation] = field(default_factory=list)
    delta_theory_empirical_estimate: float | None = None
    delta_empirical_theory_estimate: float | None = None
    gdp_lower: GdpLowerBound | None = None  # one-run f-DP audit: a lower bound on the GDP μ, never an ε_lower
    one_run_statistics: tuple[OneRunStatisticResult, ...] = ()  # one-run: every statistic, which certified what

    @property
    def violated(self) -> bool:
        """A sound test found the run leaking more than its own accountant allows."""
        return any(v.violated for v in self.violations)

    @property
    def tightness_tight(self) -> float | None:
        e = self.curves.epsilon_tight
        return None if not e else self.epsilon_lower.value / e

    @property
    def tightness_rdp(self) -> float | None:
        e = self.curves.epsilon_rdp
        return None if not e else self.epsilon_lower.value / e


def _hull(points: EmpiricalTradeOff) -> TradeOff:
    fpr = torch.as_tensor(points.roc_fpr if points.roc_fpr.size else points.fpr, dtype=torch.float64)
    fnr = 1.0 - torch.as_tensor(points.roc_tpr, dtype=torch.float64) if points.roc_tpr.size else \
        torch.as_tensor(points.fnr, dtype=torch.float64)
    return TradeOff.from_points(fpr, fnr, bound="estimate", description="empirical convex hull")


def compare_membership(in_scores, out_scores, spec: DPSGD, *, delta: float, significance: float = 0.05,
                       strategy: ThresholdStrategy | None = None, curves: Curves | None = None,
                       exact: bool = False) -> MembershipComparison:
    """Multi-run audit of ``spec``: ε lower bound, ceiling, GDP estimate, violation tests, Δ's.

    Args:
        in_scores, out_scores: scores of independent trials (higher ⇒ member).
        spec: the claimed DP-SGD description.
        delta: δ for every ε.
        significance: s; ε_lower and the boxes hold at 1 − s.
        strategy: threshold strategy (default Bonferroni).
        curves: precomputed :func:`analytical_curves` (they cost seconds).
        exact: the violation test is :func:`exact_violation_test` (the sequential design's), not the box test.
    """
    curves = analytical_curves(spec, delta) if curves is None else curves
    lb = statistics.epsilon_lower_bound(in_scores, out_scores, delta=delta, significance=significance,
                                        strategy=strategy)
    pts = statistics.empirical_tradeoff(in_scores, out_scores, significance=significance)
    cmp = MembershipComparison(
        lb, statistics.ceiling(lb.n_in, lb.n_out, delta=delta, significance=significance, strategy=strategy),
        curves, pts, statistics.gdp_estimate(in_scores, out_scores, delta=delta, significance=significance))
    theory = curves.best
    if theory is not None:
        label = f"{curves.best_method} curve of the spec"
        cmp.violations.append(
            exact_violation_test(in_scores, out_scores, theory, significance=significance, against=label) if exact else
            violation_test(pts, theory, against=label))
        hull = _hull(pts)
        cmp.delta_theory_empirical_estimate = float(delta_divergence(theory, hull).value)
        cmp.delta_empirical_theory_estimate = float(delta_divergence(hull, theory).value)
    return cmp


def compare_one_run(scores, truth, spec: DPSGD, *, delta: float, significance: float = 0.05,
                    curves: Curves | None = None, independent_canaries: bool = False,
                    sgm_family: bool = False) -> MembershipComparison:
    """One-run audit (m canaries, one training run each): Steinke et al. bound, f-DP GDP bound, and the ε test.

    The violation test here is ε_lower > the tightest accountant ε (a sound lower bound above a sound upper bound);
    no confidence boxes are drawn (the canaries of one run are independent trials only if they do not interact).
    The f-DP result (:func:`audit.statistics.gdp_lower_bound_one_run`) bounds the GDP μ; it is kept as
    ``gdp_lower`` and never enters ε_lower or a violation test (nor do the other GDP forms listed beside it).

    With ``independent_canaries`` (the caller vouches that the canaries do not interact, e.g. white-box Dirac
    gradient canaries on distinct quiet coordinates under Poisson sampling), the statistics that assume it enter
    too: Xiang et al.'s order-statistics bound (:func:`audit.statistics.epsilon_one_run_order`) and the
    continuous-score bound (:func:`audit.statistics.epsilon_one_run_scores`). ε_lower is the largest of the
    :data:`ONE_RUN_EPSILON_STATISTICS` (Steinke's and these two), each computed at s / 3 (the union bound for
    taking the max). Without it they are still listed in ``one_run_statistics`` at s, marked as outside ε_lower
    (their assumption is not vouched for).

    With ``sgm_family`` too (only dpaudit's own vouched trainer: each canary's T observations are a T-fold
    subsampled Gaussian pair of unknown rate and noise, T = ``spec.steps``), the order statistic under the
    composite SGM null (:func:`audit.statistics.epsilon_one_run_order_sgm_family`) enters as a fourth
    statistic: each of the four at s / 4 (:data:`ONE_RUN_FAMILY_STATISTICS`). It is not computed otherwise.
    """
    if sgm_family and not independent_canaries:
        raise InputError("sgm_family needs independent_canaries (the family null assumes non-interacting canaries)")
    curves = analytical_curves(spec, delta) if curves is None else curves
    eps_stats = _one_run_epsilon_statistics(scores, truth, delta, significance, independent_canaries,
                                            spec.steps if sgm_family else None)
    lb = max((x.result for x in eps_stats if x.in_epsilon_lower and isinstance(x.result, EpsilonLowerBound)),
             key=lambda b: b.value)
    gdp_stats = _one_run_gdp_statistics(scores, truth, delta, significance)
    gdp = gdp_stats[0].result if gdp_stats else None  # Mahloujifar et al.'s, assumption-free beyond GDP shape
    assert gdp is None or isinstance(gdp, GdpLowerBound)
    stats = [*eps_stats, *gdp_stats]
    m = lb.n_in + lb.n_out
    sig = significance / _one_run_split(independent_canaries, sgm_family)
    ceiling = statistics.ceiling_one_run(m, delta=delta, significance=sig)
    if independent_canaries:  # ε_lower may come from any statistic: the design's ceiling is the largest one
        ceiling = max(ceiling, statistics.ceiling_one_run_order(m, delta=delta, significance=sig))
        if lb.n_in and lb.n_out:
            ceiling = max(ceiling, statistics.ceiling(lb.n_in, lb.n_out, delta=delta, significance=sig))
    if sgm_family:  # a perfect guesser rejects every member up to the reveal pair: no finite ceiling is computed
        ceiling = math.inf
    cmp = MembershipComparison(lb, ceiling, curves, gdp_lower=gdp, one_run_statistics=tuple(stats))
    e = curves.epsilon_best
    if e is not None:
        violated = lb.value > e + _TOL
        cmp.violations.append(Violation(violated, f"accountant epsilon {fmt.upper(e, 4)} (one-run "
                                        f"epsilon_lower {fmt.lower(lb.value, 4)})", 1 - significance, lb.value - e))
    return cmp


ONE_RUN_EPSILON_STATISTICS = ("steinke", "order", "scores")
"""The one-run (ε, δ) statistics :func:`compare_one_run` computes, in order; with ``independent_canaries`` each
enters ε_lower at s / 3 (fixed before the audit: the union bound over the max)."""

ONE_RUN_FAMILY_STATISTICS = (*ONE_RUN_EPSILON_STATISTICS, "order_family")
"""With ``sgm_family`` (dpaudit's own vouched trainer) the order statistic under the composite SGM null joins:
each of the four enters ε_lower at s / 4."""


def _one_run_split(independent: bool, sgm_family: bool) -> int:
    """How many statistics share the significance (the union bound over the max, fixed before the audit)."""
    if sgm_family:
        return len(ONE_RUN_FAMILY_STATISTICS)
    return len(ONE_RUN_EPSILON_STATISTICS) if independent else 1


def _one_run_epsilon_statistics(scores, truth, delta: float, significance: float, independent: bool,
                                family_steps: int | None = None) -> list[OneRunStatisticResult]:
    """Steinke's bound (always in ε_lower), the two that assume non-interacting canaries (in only if vouched) and,
    with ``family_steps`` (T), the order statistic under the composite SGM null (in; vouched by the caller)."""
    s = significance / _one_run_split(independent, family_steps is not None)
    steinke = statistics.epsilon_one_run(scores, truth, delta=delta, significance=s)
    order = statistics.epsilon_one_run_order(scores, truth, delta=delta, significance=s)
    out = [OneRunStatisticResult("steinke", steinke, True),
           OneRunStatisticResult("order", order, independent, ONE_RUN_INDEPENDENCE)]
    if steinke.n_in and steinke.n_out:  # the score boxes need canaries on both sides
        sc = statistics.epsilon_one_run_scores(scores, truth, delta=delta, significance=s)
        out.append(OneRunStatisticResult("scores", sc, independent, statistics.ONE_RUN_SCORES_ASSUMPTION))
    if family_steps is not None and delta > 0:
        fam = statistics.epsilon_one_run_order_sgm_family(scores, truth, steps=family_steps, delta=delta,
                                                          significance=s)
        out.append(OneRunStatisticResult("order_family", fam, True,
                                         f"{ONE_RUN_INDEPENDENCE}; {statistics.SGM_FAMILY_ASSUMPTION}"))
    return out


def _one_run_gdp_statistics(scores, truth, delta: float, significance: float) -> list[OneRunStatisticResult]:
    """The GDP μ bounds (never in ε_lower), each at s: f-DP (Mahloujifar et al.), order and score forms."""
    if delta <= 0:
        return []
    shape = "a GDP-shaped mechanism (refutes a GDP curve)"
    out = [OneRunStatisticResult("fdp_gdp", statistics.gdp_lower_bound_one_run(
               scores, truth, delta=delta, significance=significance), False, shape),
           OneRunStatisticResult("order_gdp", statistics.gdp_lower_bound_one_run_order(
               scores, truth, delta=delta, significance=significance), False, f"{ONE_RUN_INDEPENDENCE}; {shape}")]
    n_in = out[0].result.n_in
    if n_in and out[0].result.n_out:
        out.append(OneRunStatisticResult("scores_gdp", statistics.gdp_lower_bound_one_run_scores(
            scores, truth, delta=delta, significance=significance), False,
            f"{statistics.ONE_RUN_SCORES_ASSUMPTION}; {shape}"))
    return out


@dataclass(frozen=True)
class ReconstructionComparison:
    """Reconstruction success against the ReRo bound.

    Attributes:
        trials, successes: counts.
        success_rate: successes / trials (an estimate).
        success_lower: one-sided Clopper–Pearson lower bound at 1 − s.  Bound: lower.
        kappa: baseline success 1/n.
        bound: 1 − f(κ) from the tightest method's curve (:func:`tightest_method`).  Bound: upper on the true success.
        violated: success_lower > bound.
    """

    trials: int
    successes: int
    success_rate: float
    success_lower: float
    kappa: float
    bound: float | None
    confidence: float

    @property
    def violated(self) -> bool:
        return self.bound is not None and self.success_lower > self.bound + _TOL

    def to_dict(self) -> JSONObject:
        return {"trials": self.trials, "successes": self.successes, "success_rate_estimate": self.success_rate,
                "success_lower": self.success_lower, "kappa": self.kappa, "rero_bound_upper": self.bound,
                "confidence": self.confidence, "violated": self.violated}


def compare_reconstruction(successes, kappa: float, curves: Curves, *, significance: float = 0.05
                           ) -> ReconstructionComparison:
    """CP lower bound on the success probability against 1 − f(κ) (Hayes et al. 2023 Thm 2)."""
    if hasattr(successes, "detach"):
        successes = successes.detach().cpu().numpy()
    s = np.asarray(successes).astype(bool).reshape(-1)
    if s.size == 0:
        raise InputError("successes must hold at least one trial")
    k, n = int(s.sum()), int(s.size)
    statistics.clopper_pearson(k, n, significance)  # validates k, n and significance
    lo = 0.0 if k == 0 else float(scipy.stats.beta.ppf(significance, k, n - k + 1))  # one-sided CP lower at s
    f = curves.best
    bound = None if f is None else float(rero_bound(f, kappa))
    return ReconstructionComparison(n, k, k / n, lo, float(kappa), bound, 1 - significance)


def tightness(lower: float, upper: float | None) -> float | None:
    """ε_lower / ε_upper (None when the upper bound is missing or 0)."""
    if upper is None or upper == 0 or math.isinf(upper):
        return None
    return lower / upper
