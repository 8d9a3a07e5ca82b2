"""Sequential, anytime-valid violation test: fixed-N exact threshold tests at pre-registered looks, α spent over them.

**Null hypothesis** (the same as the fixed-N violation test, :func:`audit.comparator.violation_test`):
the trade-off curve T of the executed mechanism, seen through the audit's score, lies on or above f,
a sound lower bound on the claimed mechanism's curve (the accountant's tight PLD curve, or the claim's
(ε, δ) curve): every threshold test "member iff score ≥ t" has FNR(t) ≥ f(FPR(t)) and FPR(t) ≥ f(FNR(t)).
A correct DP-SGD with a valid claim satisfies it for every score and every canary.

**The test.** Before any trial is played the looks n_1 < n_2 < … < n_K = ``max_trials`` are fixed
(:func:`look_schedule`: ``first`` = 250 trials, then each √2 times the last, then the ceiling) and
so are their levels α_1, …, α_K with Σ α_k = α (:func:`look_levels`: half of α at the ceiling, the other half
shared equally by the earlier looks, so a borderline case keeps most of its power at the ceiling).
At look k the fixed-N test runs on the first n_k trials at level α_k: the exact threshold test of
:mod:`.threshold_test` (one exact p-value per candidate threshold of the Bonferroni order-statistic grid of
:mod:`.multi_run`, integrated over the law of the rate the threshold was read off; a box below f implies its
rejection, not conversely: at the ceiling it rejected the optimal attack on `mask_once` in 40 of 40 replicates
where the box test, which ran here before, rejected 31). The audit stops at the first look that

- rejects: **violation** (H · min_j p_j ≤ α_k);
- is *futile* (:func:`futile`): even if the rates estimated now (moved z standard errors toward the
  claim) held up to the ceiling, the ceiling look's test would not reject: **futility** (a pass);

and otherwise plays trials up to the next look; the last look is the **ceiling** (a pass unless it
rejects). A time budget or an interruption may end it between looks (**time budget**: a pass on
the looks reached).

**Proof sketch** (α-spending over pre-registered looks; Bonferroni over looks). The trials are
i.i.d. and trial i is a pure function of (seed, i), so the first n_k trials are a sample of the fixed
size n_k whatever happened before: under H0 the fixed-N test on them rejects with probability
≤ α_k (its own proof). The procedure rejects only if some look it reached rejected, so
P(reject) ≤ P(∪_k {look k's fixed-N test rejects}) ≤ Σ_k α_k = α — for **any** stopping rule:
futility, the ceiling, a time budget, an interruption, or a user who stops by hand only remove
looks from the union, never add a rejection. The bound reported at the stopping look (ε_lower,
boxes) was computed at α_k; all looks' bounds hold simultaneously with probability ≥ 1 − Σ α_k, so
it holds at 1 − α whichever look the data chose. Futility uses the data freely because it can only
end the audit with a pass: it costs power (a bug stopped too early), never validity. "Anytime" here
means any data-dependent stopping time at the looks: decisions are taken only at looks, and trials
played after the last look reached are ignored until the next look.

Re-testing the fixed-N test at the full α at every look (the naive sequential test) is not valid:
at the boundary of an exact binomial test it fired at one of 5 doubling looks in 12.5 % of 600 seeded
replicates at α = 5 %, this test in 2.5 % (``tests/audit/test_sequential.py``).

>>> looks = look_schedule(20_000)
>>> looks[:5], looks[-3:], len(looks), [round(a, 5) for a in look_levels(len(looks), 0.05)][-2:]
((250, 354, 500, 707, 1000), (11314, 16000, 20000), 14, [0.00192, 0.025])
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import ArrayLike

from accountants.errors import InputError, InputTypeError

from ._checks import _floats, _scores, _significance, _trials
from .multi_run import _grid, _levels, empirical_tradeoff
from .threshold_test import count_pvalues, threshold_test

__all__ = [
    "FINAL_SHARE",
    "FIRST_LOOK",
    "FUTILITY_Z",
    "GROWTH",
    "STOPS",
    "Look",
    "SequentialResult",
    "box_margin",
    "futile",
    "look_levels",
    "look_schedule",
    "sequential_test",
]

FIRST_LOOK = 250
"""The first look of :func:`look_schedule` (trials); the looks double from it up to the ceiling."""

GROWTH = 2 ** 0.5
"""The ratio of two successive looks (:func:`look_schedule`): √2, so a pass is found within 41 % of when it shows."""

FUTILITY_Z = 0.0
"""Futility projects rates this many standard errors toward the claim (:func:`futile`): cost against power.

0 (the rates as estimated) since issue 25's last rounds; 0.25 before. The black-box default sets it per audit
(audit/config.py: ``BLACK_BOX_FUTILITY_Z``: 0 for the main audit, 0.5 for the mean image, whose loss reads a correct
trainer near the claim): with the exact threshold test a correct trainer then spends 1,207 trials on average for
both audits (seeds 1000-1019; 30 % of the former fixed 2 × 2,000; 2,516 at z = 0 for both), and `per_layer_clip` is
caught on 20 of 20 seeds (docs/fault-detection.md, "The exact threshold test, and futility per audit"). Futility
only ends an audit with a pass: z never affects validity."""

FINAL_SHARE = 0.5
"""The share of α spent at the ceiling look (:func:`look_levels`); the earlier looks share the rest equally."""

MAX_LOOKS = 10_000
"""The most looks :func:`look_levels` splits α over (a schedule at growth 1.01 from 2 to 10¹⁸ trials has ~4,000)."""

STOPS = ("violation", "futility", "ceiling", "time_budget", "continue")
"""Why a sequential audit stopped ("continue": the trials given end before the next look decides)."""

Curve = Callable[[np.ndarray], np.ndarray]
"""A sound lower trade-off curve β = f(α), vectorised over numpy arrays of α in [0, 1]."""


def look_schedule(max_trials: int, first: int = FIRST_LOOK, growth: float = GROWTH) -> tuple[int, ...]:
    """The pre-registered looks: round(first·growth^k) below ``max_trials``, then ``max_trials``.

    Fixed by (max_trials, first, growth) alone, before any trial. ``max_trials`` ≤ ``first`` gives one
    look (the fixed-N test at ``max_trials``).
    """
    for name, v in (("max_trials", max_trials), ("first", first)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 2:
            raise InputError(f"{name} must be an integer ≥ 2; got {v!r}")
    if isinstance(growth, bool) or not isinstance(growth, (int, float)) or not 1.01 <= growth <= 16:
        raise InputError(f"growth must be a number in [1.01, 16]; got {growth!r}")
    looks: list[int] = []
    k = 0
    while (n := round(first * growth ** k)) < max_trials:
        if not looks or n > looks[-1]:
            looks.append(n)
        k += 1
    return (*looks, int(max_trials))


def look_levels(n_looks: int, significance: float, final_share: float = FINAL_SHARE) -> tuple[float, ...]:
    """α_k of each look, Σ α_k = ``significance``: ``final_share``·α at the last, the rest equally before it.

    Args:
        n_looks: K in [1, MAX_LOOKS].
        significance: α ∈ (0, 1).
        final_share: in (0, 1]; 1 spends everything at the ceiling (the earlier looks then only stop for futility).
    """
    s = _significance(significance)
    if isinstance(n_looks, bool) or not isinstance(n_looks, (int, np.integer)) or n_looks < 1:
        raise InputError(f"n_looks must be an integer ≥ 1; got {n_looks!r}")
    if isinstance(final_share, bool) or not isinstance(final_share, (int, float)) or not 0.0 < final_share <= 1.0:
        raise InputError(f"final_share must be a number in (0, 1]; got {final_share!r}")
    if n_looks > MAX_LOOKS:
        raise InputError(f"n_looks must be at most {MAX_LOOKS} (look_schedule's cap); got {n_looks!r}")
    if n_looks == 1:
        return (s,)
    last = s * final_share
    early = (s - last) / (n_looks - 1)
    if last == 0.0 or (final_share < 1.0 and early == 0.0):
        raise InputError(f"significance × final_share = {s!r} × {final_share!r} leaves a look a level that "
                         "underflows to 0; use a larger significance or a final_share further from 0 and 1")
    while Fraction(early) * (n_looks - 1) + Fraction(last) > Fraction(s):  # exact: never spend more than α
        early = math.nextafter(early, 0.0)
    return (*([early] * (n_looks - 1)), last)


def _gap(a_hi: np.ndarray, b_hi: np.ndarray, curve: Curve) -> np.ndarray:
    """f(α_hi) − β_hi and f(β_hi) − α_hi, the larger per box (> 0: the box lies below f)."""
    a, b = np.clip(a_hi, 0.0, 1.0), np.clip(b_hi, 0.0, 1.0)
    return np.maximum(np.asarray(curve(a)) - b, np.asarray(curve(b)) - a)


def box_margin(in_scores: ArrayLike, out_scores: ArrayLike, curve: Curve, *, significance: float) -> float:
    """max over the box test's boxes of how far below ``curve`` the box's upper corner lies (> 0: a box below f).

    The same boxes as :func:`audit.comparator.violation_test` (simultaneous at 1 − significance). A look records it
    for reference; its decision is the exact threshold test's, which rejects wherever a box lies below f.
    """
    pts = empirical_tradeoff(in_scores, out_scores, significance=significance)
    return float(np.max(_gap(pts.fpr_hi, pts.fnr_hi, curve)))


def futile(in_scores: ArrayLike, out_scores: ArrayLike, curve: Curve, *, n_final: int, level_final: float,
           z: float = FUTILITY_Z) -> bool:
    """Would the ceiling look fail to reject even if the rates estimated now were the truth?  (Futility; a pass.)

    Projection: at every candidate threshold of the current grid (:func:`.multi_run._grid`) the error
    rates are estimated, the counts scaled to the ceiling's ``n_final`` trials (in the current in/out
    proportion), and the ceiling look's exact threshold test (:mod:`.threshold_test`) run on those counts at
    ``level_final`` over the ceiling's grid size H_K. Futile iff it would not reject. The rate a threshold was read
    off is estimated by its order statistic's mean: a threshold at the (k+1)-th largest of n out
    scores has FPR ~ Beta(k + 1, n − k), mean (k + 1)/(n + 1) (David & Nagaraja 2003 §2.5), not the
    k/n seen (0 at the largest score, which would project "no false positive in 20,000 trials" from
    250); the other rate by its count (the threshold is independent of those scores). Both are then
    moved ``z`` standard errors (√(r(1 − r)/n)) toward the claim: at z > 0 a bug must look a little worse
    than the curve, not merely at it, to keep playing (z = 0.25 cut the trials a mechanism exactly at the
    claim spends by 38 % and the catch rate of a 1.41·C leak from 98 % to 87 %: docs/fault-detection.md);
    z < 0 moves them away from the claim (fewer futility stops, more trials).
    Used only to stop with a pass, so it
    never raises the false-alarm probability (module doc).
    """
    n_final, level_final = _trials("n_final", n_final), _significance(level_final)
    if isinstance(z, bool) or not isinstance(z, (int, float)) or not math.isfinite(z):
        raise InputError(f"z must be a finite number (< 0: away from the claim, fewer futility stops); got {z!r}")
    xin = _floats("in_scores", in_scores).reshape(-1)
    xout = _floats("out_scores", out_scores).reshape(-1)
    n = xin.size + xout.size
    if xin.size == 0 or xout.size == 0 or n_final <= n:
        return False
    xin, xout = _scores("in_scores", xin), _scores("out_scores", xout)  # finite
    g = _grid(xin, xout, 2.0)
    n_in_f = max(1, round(n_final * xin.size / n))
    n_out_f = max(1, n_final - n_in_f)
    h_f = _levels(n_out_f, 2.0).size + _levels(n_in_f, 2.0).size
    a = np.where(g["strict"], np.minimum((g["fp"] + 1) / (xout.size + 1), 1.0), g["fp"] / xout.size)
    b = np.where(g["strict"], g["fn"] / xin.size, np.minimum((g["fn"] + 1) / (xin.size + 1), 1.0))
    a = np.minimum(a + z * np.sqrt(a * (1 - a) / xout.size), 1.0)  # z standard errors toward the claim
    b = np.minimum(b + z * np.sqrt(b * (1 - b) / xin.size), 1.0)
    fp = np.clip(np.round(a * n_out_f), 0, n_out_f)
    fn = np.clip(np.round(b * n_in_f), 0, n_in_f)
    s = g["strict"]
    p = count_pvalues(np.where(s, fp, fn), np.where(s, n_out_f, n_in_f), np.where(s, fn, fp),
                      np.where(s, n_in_f, n_out_f), curve, level=level_final, h=h_f)
    return bool(h_f * float(np.min(p)) > level_final)


@dataclass(frozen=True)
class Look:
    """One look that was evaluated: its trials, level, box margin (> 0: a box below f), decision and the exact
    threshold test's p-value (≤ level: violation)."""

    n: int
    level: float
    margin: float
    decision: str  # "violation" | "futility" | "ceiling" | "continue"
    p_value: float = 1.0  # the exact threshold test's Bonferroni p (:mod:`.threshold_test`); ≤ level: violation


@dataclass(frozen=True)
class SequentialResult:
    """The sequential test's outcome on the trials given.

    Attributes:
        looks, levels: the pre-registered schedule and its levels (Σ levels = significance).
        evaluated: the looks the trials reached, in order, up to the one that decided.
        stopped: one of :data:`STOPS`; "continue" when the trials end before a look decides.
        trials: n of the deciding look (or of the last look reached; 0 when none was).
        level: α_k of that look (the level its fixed-N statistics are computed at), or None.
        next_look: the trials the next look needs when ``stopped`` is "continue", else None.
        significance: α, the false-alarm bound of the whole procedure.
    """

    looks: tuple[int, ...]
    levels: tuple[float, ...]
    evaluated: tuple[Look, ...]
    stopped: str
    trials: int
    level: float | None
    next_look: int | None
    significance: float

    @property
    def violated(self) -> bool:
        return self.stopped == "violation"


def sequential_test(scores: ArrayLike, members: ArrayLike, curve: Curve, *, significance: float, max_trials: int,
                    first: int = FIRST_LOOK, growth: float = GROWTH, futility: bool = True,
                    futility_z: float = FUTILITY_Z,
                    reject: Callable[[np.ndarray, np.ndarray, float], bool] | None = None) -> SequentialResult:
    """Replay the looks over trial-ordered ``scores`` and ``members``; stop at the first look that decides.

    Pure in its inputs, so an interrupted audit resumed on the same trials reaches the same decision.
    Trials beyond the deciding look are ignored; if the trials end before a look decides, ``stopped``
    is "continue" and ``next_look`` says how many trials the next look needs.

    Args:
        scores: (n,) the trials' scores in trial order (higher ⇒ member).
        members: (n,) bool, whether trial i's canary was in.
        curve: f, a sound lower bound on the claimed curve (:data:`Curve`).
        significance: α, the false-alarm bound over all looks.
        max_trials: the ceiling (the last look).
        first: the first look (:func:`look_schedule`).
        growth: the ratio of successive looks (:func:`look_schedule`).
        futility: stop early with a pass when :func:`futile` says so.
        futility_z: :func:`futile`'s ``z``.
        reject: an extra fixed-N test at a look, ``reject(in_scores, out_scores, level) -> bool``, valid at
            ``level`` under the null (the claim check of ``dpaudit check``); a look rejects when either does.
    """
    s = _significance(significance)
    x = np.asarray(scores.detach().cpu().numpy() if hasattr(scores, "detach") else scores, dtype=np.float64)
    m = np.asarray(members.detach().cpu().numpy() if hasattr(members, "detach") else members)
    if x.ndim != 1 or m.shape != x.shape:
        raise InputError(f"scores and members must be 1-d arrays of one length; got shapes {x.shape} and {m.shape}")
    if m.dtype != np.bool_:
        raise InputTypeError(f"members must be booleans; got dtype {m.dtype}")
    if not callable(curve):
        raise InputTypeError(f"curve must be callable (alpha -> beta); got {type(curve).__name__}")
    looks = look_schedule(max_trials, first, growth)
    levels = look_levels(len(looks), s)
    done: list[Look] = []
    for k, (n, a) in enumerate(zip(looks, levels, strict=True)):
        if x.size < n:
            last = done[-1] if done else None
            return SequentialResult(looks, levels, tuple(done), "continue", last.n if last else 0,
                                    last.level if last else None, n, s)
        xi, mi = x[:n], m[:n]
        xin, xout = xi[mi], xi[~mi]
        if xin.size == 0 or xout.size == 0:  # every trial on one side: no box, nothing to decide here
            margin, p_value, violated = -np.inf, 1.0, False
        else:
            margin = box_margin(xin, xout, curve, significance=a)
            p_value = threshold_test(xin, xout, curve, significance=a).p_value
            violated = p_value <= a or (reject is not None and bool(reject(xin, xout, a)))
        final = k == len(looks) - 1
        if violated:
            decision = "violation"
        elif final:
            decision = "ceiling"
        elif futility and xin.size and xout.size and futile(xin, xout, curve, n_final=looks[-1],
                                                            level_final=levels[-1], z=futility_z):
            decision = "futility"
        else:
            decision = "continue"
        done.append(Look(n, a, float(margin), decision, p_value))
        if decision != "continue":
            return SequentialResult(looks, levels, tuple(done), decision, n, a, None, s)
    raise AssertionError("unreachable: the last look always decides")  # pragma: no cover
