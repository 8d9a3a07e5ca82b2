"""Conformance: test the three premises of the DP-SGD privacy proof on a white-box user trainer.

An ε audit refutes a claim only when the leak is large enough for its trials to certify. A bug can
break the proof with a leak too small for that (docs/fault-detection.md) and still be visible, because
it breaks one of the premises the proof rests on, and each premise can be tested from every step of
every trial. The per-trial records come from :mod:`attacks.conformance_record` (the ``dead_feature``
canary: coordinates K that only the canary and the noise reach, coordinates R that only the noise
reaches). Units: every statistic compares the update with the noise on R *at the same step*, so the
unknown post-processing scale (learning rate, normalisation by a constant batch size) cancels.

Each test's null hypothesis H0 contains every correct DP-SGD and every benign deviation (more noise,
a smaller clip norm, a fixed initialisation, any learning-rate schedule), so it rejects a correct
trainer with probability at most its level. The tests (docs/fault-detection.md, "Conformance"):

- **sampling** (independence across steps): Z_t = y_t / √(ss_t/|R|), the canary's per-step shift
  in units of the noise. H0: in member trials Z_1, …, Z_T are independent (the canary's inclusion
  is drawn afresh at each step, as Poisson and fixed-size sampling claim). Statistic: twice the sum
  of the sample covariances between steps, Σ_{s≠t} ĉov(Z_s, Z_t); exact Monte Carlo permutation test
  (each step's column permuted independently across member trials), two-sided.
- **contribution** (sensitivity ≤ C): H0: E[Z̄ | member] ≤ r·κ/σ, r the claimed per-step inclusion
  probability, κ = E√(|R|/χ²_{|R|}) (the reference's Student factor): a record moves the noisy sum by
  at most C, against noise of std at least σC. One-sided z-test over member trials (CLT over trials).
- **total contribution** (sensitivity ≤ C in all directions, step 1): H0: ‖E[Z1 | in] − E[Z1 | out]‖ ≤ r·κ/σ,
  Z1 the first update projected on directions fixed by θ_0 and the data (the canary's gradient restricted
  to each parameter tensor, the natural records' summed gradient; orthonormalised) over the step's noise
  std on R. At step 1 the other records' part has the same law with or without the canary (θ_0 does not
  depend on the data; Poisson inclusion is independent), so the difference of means is the canary's
  clipped contribution, whatever the clipping (joint, per layer with thresholds whose squares sum to C²,
  a smaller C). Mahalanobis distance of the difference of means to that ball against χ²_k (CLT over
  trials). Poisson claims only (fixed-size batches couple the others' inclusion to the canary's).
- **normalisation** (independent of the data): H0: the noise scale ss_t has the same distribution
  whether or not the canary is in the data (the scale from noisy sum to update does not depend on
  the records). Statistic Σ_t log(mean_in ss_t / mean_out ss_t); exact permutation test over the
  membership labels, two-sided.
- **scale fixed** (no realised-batch normalisation): H0: the noise scale in the update's units is the
  same in every trial (a fixed normalisation and learning-rate schedule, whatever its values), so
  within a step log ss_it is a constant plus log χ²_{|R|}. Statistic: the within-step sample variance
  of log ss, averaged over steps; exact Monte Carlo test, one-sided, against the same statistic of
  simulated log χ²_{|R|} draws (the constants cancel within a step).
- **noise on every tensor**: H0: each parameter tensor's update gets, on top of its gradient, noise
  at least as large as R's: Σ_i ‖u_t[tensor]‖² ≥_st (noise)·χ²; per step the one-sided F test (the
  non-central χ² of signal + noise dominates the central one), combined over steps (Fisher) and
  tensors (Bonferroni).
- **batch law** (Poisson's Binomial batch size; :func:`_batch_law`): H0: the natural records are sampled
  independently at a rate q' ≤ q, so the update projected on a direction fixed by the history (the
  copied record's unit gradient at θ_{t−1}) has Var P ≥ (1 − q)/(n q)·(E P)² + (noise variance on R) in
  trials without the canary (Binomial variance, Cauchy–Schwarz, law of total variance). One-sided z-test
  (delta method, variance taken at the null's boundary) on Σ_t D_t; step 1 from θ-differences, every step
  from a recorded privatised gradient; Poisson claims only. Catches fixed-size or shuffled batches claimed
  as Poisson and a rate above the claim.
- **fresh noise**: H0: at every step the noise on R has a component outside the span of the earlier
  steps' R-updates. Under fresh isotropic noise its share f²_t ~ Beta((|R|−t+1)/2, (t−1)/2) exactly;
  the count of f²_t < 10⁻⁸ is binomial with that tail (≈ 10⁻⁴⁰), so one such step rejects.
- **canary effect** (sensitivity ≤ C for a gradient that opposes the batch; Poisson claims): the white-box hook
  hands the trainer a *probe* (:class:`attacks.conformance_record.ProbeHook`), a gradient of 1000·(‖S‖ + C)
  against the natural records' summed gradient S at θ_{t−1} (and ≫ C in every tensor), included at each step
  by a fair coin of dpaudit's own. Z_t: the update projected on S's unit direction per tensor (at most 16
  directions) over √(ss_t/|R|). H0: ‖mean_t (E[Z_t | probe in] − E[Z_t | probe out])‖ ≤ κ/σ. The coin is
  independent of the history, so each step's difference is the probe's own clipped contribution (≤ C,
  against noise ≥ σC) averaged over histories, whatever the clipping, the optimizer's state or the trainer.
  Mahalanobis distance of the per-step difference of means (equal weights over steps; covariance
  cluster-robust by trial) to that ball, against χ²_k (CLT over trials). Catches a clipped sum (the probe
  flips it: 2C) and per-tensor clipping (√L·C).
- **replay** (sensitivity ≤ C, the noise cancelled; :mod:`audit.replay`): the trainer replayed with the same seed
  and data, the probe or a zero gradient handed out at step 1 (:mod:`attacks.replay`). H0: ‖Δ‖ ≤ a·C against
  noise a·σ'C (σ' ≥ σ) on the coordinates no gradient reaches; exact χ² law per seed, Fisher over seeds.
  "Not applicable" (never a rejection) when the same seed does not reproduce the updates or the noise does not
  cancel.

**The audit's dataset.** DP must hold for every pair of neighbouring datasets, so the conformance audit
chooses one under a Poisson claim (the worst-case datasets of auditing, Nasr et al. 2021): a smaller one
(:func:`natural_records`: about ``NATURAL_BATCH`` natural records per batch), so a normalisation by the
realised batch size moves the canary visibly by more than C, made of copies of one natural record plus
one record of each other class (:func:`attacks.conformance_record.copied_records`), so the natural
records' clipped contributions on the copied record's gradient are nearly equal and the batch law's
Cauchy–Schwarz bound is nearly tight. No null above depends on the dataset's size or make-up.

**Optimizers with state.** The tests read the privatised gradient when the trainer records it
(``audit.record_update``); otherwise θ_{t−1} − θ_t, whose noise is fresh at each step only for plain
SGD. A momentum (or Adam) trainer that does not record its privatised gradient is recognised by the
fresh-noise shares (their Beta probability-integral transforms have mean below ½ by more than 4
standard errors while no step is noise-free): the sampling test is then skipped with that reason and
the contribution, scale and noise-on-every-tensor tests read step 1 only, where any optimizer's update
is a multiple of the noisy sum (from a state of zeros). Adam's (and RMSprop's) first step is not:
lr·g/(|g| + ε) per coordinate, about lr·sign(g), which compresses the variance of a coordinate that carries
a mean, so the batch-law test's variance bound fails there; it is skipped when the state gate fires or
when the first update's noise scale varies less than Gaussian noise's χ² law allows (:func:`_nonlinear`).
An optimizer without a first-moment state (RMSprop; Adam with β1 = 0) leaves fresh-noise shares the state gate
cannot tell from SGD's, but from step 2 on it rescales each coordinate by a history of that coordinate's own
gradients, which no null below models; its sign-like step 1 is what the :func:`_nonlinear` gate sees, and when that
gate fires the tests are read as under the state gate (sampling skipped, step 1 only). A plain-SGD trainer, buggy
or not, moves by a linear image of Gaussian noise at step 1, so the gate fires on it with probability ≈ 3·10⁻⁵.
The tests that read a mean shift at step 1 (contribution, total contribution, canary effect) keep their
nulls under any per-coordinate map f that is odd, non-decreasing, with f' even and decreasing in |x|
(Adam's step 1): E f(b + a + N) − E f(b + N) ≤ |a|·√(E f(N)²)/s for N ~ N(0, s²) (Anderson's theorem,
then Stein's lemma and Cauchy–Schwarz), i.e. no more than the linear map's shift in the units of the
noise on R; the normalisation test's null holds exactly (R's updates are a function of R's noise alone
under a per-coordinate optimizer). Skipping never adds a rejection, so the level holds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import special, stats

from accountants.events import DPSGD
from accountants.sampling import Poisson, RandomAllocation, TruncatedPoisson
from attacks.replay import ReplayObservation

from . import model, replay
from .jsontypes import JSONObject

__all__ = ["NATURAL_BATCH", "PERMUTATIONS", "TESTS", "inclusion_rate", "natural_records", "run_tests"]

TESTS = ("sampling", "contribution", "total_contribution", "normalisation", "scale_fixed", "noise_every_tensor",
         "noise_fresh", "batch_law", "canary_effect", "replay")
PREMISE = {"sampling": "sampling", "batch_law": "sampling", "contribution": "contribution",
           "total_contribution": "contribution",
           "normalisation": "contribution",
           "scale_fixed": "contribution", "noise_every_tensor": "noise", "noise_fresh": "noise",
           "canary_effect": "contribution", "replay": "contribution"}
NULL = {
    "sampling": "the canary's inclusion is drawn independently at every step: its per-step shifts Z_t are "
                "independent across steps (Z_t = y_t / sqrt(ss_t/|R|))",
    "contribution": "E[mean_t Z_t | canary in the data] <= r·kappa/sigma: one record moves the noisy sum by at most "
                    "C against noise of std at least sigma·C (r: the claimed inclusion rate)",
    "total_contribution": "at step 1, ||E[Z1 | in] - E[Z1 | out]|| <= q·kappa/sigma, Z1 the first update projected "
                          "on directions fixed by theta_0 and the data (the canary's gradient per tensor, the natural "
                          "records' summed gradient) over the noise std on R: the canary moves the noisy sum by at "
                          "most C in all directions together, the other records' part having the same law with or "
                          "without it (Poisson claims)",
    "normalisation": "the noise scale in the update's units has the same distribution whether or not the canary "
                     "is in the data",
    "scale_fixed": "the noise scale in the update's units is the same in every trial (a fixed normalisation and "
                   "learning-rate schedule): log ss_t - log(scale_t) ~ log chi2_|R| (exact Monte Carlo null)",
    "noise_every_tensor": "every parameter tensor's update carries noise at least as large as that on the "
                          "untouched reference coordinates R",
    "batch_law": "Poisson sampling at a rate q' <= q: the update projected on a direction u fixed by the history "
                 "(the copied record's gradient at theta_(t-1)), P = a·(sum of the batch's clipped contributions on "
                 "u + noise), has Var(P) >= (1-q)/(n·q)·(E P)² + a²·(noise variance on R), n the natural records "
                 "(Binomial variance and Cauchy-Schwarz; trials without the canary)",
    "noise_fresh": "at every step the noise on R has a component outside the span of the earlier steps' noise "
                   "(share f2_t ~ Beta((|R|-t+1)/2, (t-1)/2))",
    "canary_effect": "||E[Z_t | probe in] - E[Z_t | probe out]|| <= kappa/sigma, averaged over steps: Z_t the update "
                     "projected on the natural records' summed gradient per tensor at theta_(t-1), over the step's "
                     "noise std on R; the probe (a gradient of 1000·C against that sum) is included by a fair coin "
                     "independent of the history, so the difference is its own clipped contribution, at most C "
                     "against noise of std at least sigma·C, whatever the clipping or the optimizer's state "
                     "(Poisson claims)",
    "replay": replay.NULL,
}
PERMUTATIONS = 1999  # Monte Carlo permutations at least; more where the level needs them (smallest p ≈ level/2)
_STATE_Z = -4.0  # fresh-noise PIT mean this many standard errors below 1/2: the optimizer carries state
_FLOOR = 1e-8  # attacks.conformance_record.FRESH_FLOOR


NATURAL_BATCH = 20  # expected natural records per batch in the conformance audit's dataset (Poisson claims)


def natural_records(n: int, sampling: str, rate: float) -> int:
    """How many of the ``n`` natural records the conformance audit hands the trainer.

    DP must hold for every pair of neighbouring datasets, so the audit may choose a small one (the
    worst-case datasets of auditing: Nasr et al. 2021, §4). Under a Poisson claim it keeps
    ⌈NATURAL_BATCH/q⌉ records (at most n): batches of about 20 natural records, so a normalisation
    by the realised batch size (|B_t| well below the trainer's constant expected size) moves the
    canary by visibly more than C, while an empty batch stays rare (probability ≤ e^(−20) per
    step). Fixed-size and shuffle claims name their dataset size (b of N needs N ≥ b): n is kept. Under a
    Poisson claim the records are copies of one plus one of each other class
    (:func:`attacks.conformance_record.copied_records`, applied by audit.runs; the ``batch_law`` test).
    """
    if sampling != "poisson" or not 0 < rate <= 1:
        return n
    return min(n, max(2, math.ceil(NATURAL_BATCH / rate)))


def inclusion_rate(spec: DPSGD) -> float:
    """The claimed probability that a given record is in a given step's batch."""
    s = spec.sampling
    if isinstance(s, (Poisson, RandomAllocation, TruncatedPoisson)):
        return float(s.rate)  # random allocation: k/t; truncated Poisson: q, at least the kept record's rate
    return float(s.batch_size) / float(s.dataset_size)


def _kappa(df: int) -> float:
    """E[√(df/χ²_df)] (df ≥ 2): the mean of 1/√(ss/df) for a unit-variance reference."""
    return math.sqrt(df / 2.0) * math.exp(math.lgamma((df - 1) / 2.0) - math.lgamma(df / 2.0))


def _arrays(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    member = np.array([r["member"] for r in records], dtype=bool)
    y = np.array([r["y"] for r in records], dtype=np.float64)
    ss = np.array([r["ss"] for r in records], dtype=np.float64)
    names = list(records[0]["tensors"])
    tss = {k: np.array([r["tensors"][k]["ss"] for r in records], dtype=np.float64) for k in names}
    tn = {k: int(records[0]["tensors"][k]["n"]) for k in names}
    f2 = np.array([r["f2"] for r in records], dtype=np.float64)
    return {"member": member, "y": y, "ss": ss, "tss": tss, "tn": tn, "f2": f2, "df": int(records[0]["df"]),
            "mode": records[0]["mode"], "gnorm_min": float(min(r["gnorm_min"] for r in records)),
            "p1": np.array([r["p1"] for r in records], dtype=np.float64) if all("p1" in r for r in records) else None}


def _z(a: dict, steps: np.ndarray) -> np.ndarray:
    """Z_t = y_t / √(ss_t/|R|) on the given steps (trials × steps)."""
    return a["y"][:, steps] / np.sqrt(a["ss"][:, steps] / a["df"])


def _two_sided(stat: float, null: np.ndarray) -> float:
    k = len(null)
    hi = (1 + int((null >= stat).sum())) / (1 + k)
    lo = (1 + int((null <= stat).sum())) / (1 + k)
    return min(1.0, 2 * min(hi, lo))


def _cov_stat(z: np.ndarray) -> float:
    """Σ_{s≠t} ĉov(Z_s, Z_t) = var(row sums) − Σ_t var(column t)."""
    return float(z.sum(axis=1).var(ddof=1) - z.var(axis=0, ddof=1).sum())


def _fresh_pits(f2: np.ndarray, df: int) -> tuple[np.ndarray, np.ndarray]:
    """(PIT values of the valid f² entries under H0, the Beta lower-tail probability at the floor per step)."""
    t = np.arange(2, f2.shape[1] + 2)
    a, b = (df - t + 1) / 2.0, (t - 1) / 2.0
    return special.betainc(a, b, f2), special.betainc(a, b, _FLOOR)


def _result(name: str, stat_name: str, stat: float | None, p: float | None, level: float, finding: str,
            skipped: str | None = None) -> model.PremiseTest:
    rejected = skipped is None and p is not None and p <= level
    return model.PremiseTest(name, PREMISE[name], NULL[name], stat_name, None if stat is None else float(stat),
                             None if p is None else float(p), level, bool(rejected), finding, skipped)


def _sampling(a: dict, steps: np.ndarray, rate: float, level: float, rng: np.random.Generator, skip: str | None,
              perms: int) -> model.PremiseTest:
    name, sn = "sampling", "sum over step pairs of cov(Z_s, Z_t), member trials"
    if skip is not None:
        return _result(name, sn, None, None, level, "not tested", skip)
    if len(steps) < 2:
        return _result(name, sn, None, None, level, "not tested", "fewer than two steps with noise to compare")
    z = _z(a, steps)[a["member"]]
    if z.shape[0] < 3:
        return _result(name, sn, None, None, level, "not tested", "fewer than three member trials")
    stat = _cov_stat(z)
    null = np.empty(perms)
    for lo in range(0, perms, 500):
        n = min(500, perms - lo)
        zz = rng.permuted(np.broadcast_to(z.T, (n, *z.T.shape)).copy(), axis=2)  # (n, T, trials)
        rows = zz.sum(axis=1)
        null[lo:lo + n] = rows.var(axis=1, ddof=1) - zz.var(axis=2, ddof=1).sum(axis=1)
    p = _two_sided(stat, null)
    pairs = len(steps) * (len(steps) - 1)
    corr = stat / pairs / float(z.var(axis=0, ddof=1).mean())
    # the inclusions' correlation, estimated as cov(Z_s, Z_t) / (mu² r (1 − r)), mu the shift per inclusion
    mu = float(z.mean()) / (rate * _kappa(a["df"]))
    se_mu = float(z.mean(axis=1).std(ddof=1)) / math.sqrt(z.shape[0]) / (rate * _kappa(a["df"]))
    words = f"the canary's per-step shifts are correlated across steps: {corr:.3f}, expected 0"
    if p <= level and mu > 4 * se_mu and 0 < rate < 1:  # only a rejection is explained (a noisy estimate)
        rho = float(np.clip(stat / pairs / (mu * mu * rate * (1 - rate)), -1, 1))
        words += f"; its inclusions in different steps: correlation {rho:.2f} (estimate), expected 0"
    return _result(name, sn, stat, p, level, words)


def _contribution(a: dict, steps: np.ndarray, rate: float, sigma: float, level: float) -> model.PremiseTest:
    name = "contribution"
    z = _z(a, steps)[a["member"]].mean(axis=1)
    if z.shape[0] < 2:
        return _result(name, "z", None, None, level, "not tested", "fewer than two member trials")
    bound = rate * _kappa(a["df"]) / sigma
    se = float(z.std(ddof=1)) / math.sqrt(z.shape[0])
    zstat = (float(z.mean()) - bound) / se if se > 0 else (math.inf if z.mean() > bound else -math.inf)
    p = float(stats.norm.sf(zstat))
    moved = float(z.mean()) / bound
    return _result(name, "z = (mean Z - bound) / se", zstat, p, level,
                   f"the canary moves the update by {moved:.2f} C per step it is in, in units of the claimed "
                   f"noise sigma·C (at most 1.00 C)")


def _ball_distance(d: np.ndarray, cov: np.ndarray, radius: float) -> float:
    """min over ||mu|| <= radius of (d - mu)' cov^-1 (d - mu) (the trust-region problem; bisection on λ)."""
    lam, vec = np.linalg.eigh(np.linalg.inv(cov))
    e = vec.T @ d
    if float(np.linalg.norm(d)) <= radius:
        return 0.0

    def norm_mu(lm: float) -> float:
        return float(np.linalg.norm(lam * e / (lam + lm)))

    lo, hi = 0.0, 1.0
    while norm_mu(hi) > radius:
        hi *= 4.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if norm_mu(mid) > radius else (lo, mid)
    lm = hi
    return float((lam * (lm * e / (lam + lm)) ** 2).sum())


def _total_contribution(a: dict, rate: float, sigma: float, level: float, skip: str | None) -> model.PremiseTest:
    """Step 1, all directions at once: the canary's shift of the mean update is at most q·C (module doc).

    At step 1 the other records' part of the update has the same law in member and non-member trials
    (θ_0's law does not depend on the data; Poisson inclusion of the others is independent of the
    canary's), so E[Z1 | in] − E[Z1 | out] = (q κ / σ)·P clip(g_c(θ_0)) / C exactly, P the projection on the
    recorded directions, whatever the clipping (joint, per layer with thresholds whose squares sum to C²,
    a smaller C), the noise (≥ σC) or a constant normalisation. Test: the Mahalanobis distance of the
    difference of means to the ball of that radius, against χ²_k (the distance to the true mean is χ²_k
    by the CLT over trials, and the true mean lies in the ball).
    """
    name = "total_contribution"
    sn = "Mahalanobis distance of mean(Z1 | in) - mean(Z1 | out) to the ball of radius q·kappa/sigma"
    if skip is not None:
        return _result(name, sn, None, None, level, "not tested", skip)
    m = a["member"]
    if a["p1"] is None or m.sum() < 3 or (~m).sum() < 3 or not (a["ss"][:, 0] > 0).all():
        return _result(name, sn, None, None, level, "not tested",
                       "needs step-1 projections, three trials with and three without the canary, and noise on R")
    z = a["p1"] / np.sqrt(a["ss"][:, :1] / a["df"])
    zi, zo = z[m], z[~m]
    cov = np.cov(zi, rowvar=False, ddof=1).reshape(z.shape[1], -1) / len(zi) + \
        np.cov(zo, rowvar=False, ddof=1).reshape(z.shape[1], -1) / len(zo)
    keep = np.diag(cov) > 0  # directions that vanished at θ_0 project to 0 in every trial
    if not keep.any():
        return _result(name, sn, None, None, level, "not tested", "no direction with a spread at step 1")
    d = zi.mean(axis=0)[keep] - zo.mean(axis=0)[keep]
    radius = rate * _kappa(a["df"]) / sigma
    try:
        stat = _ball_distance(d, cov[np.ix_(keep, keep)], radius)
    except np.linalg.LinAlgError:  # directions that coincide in every trial (a degenerate model)
        return _result(name, sn, None, None, level, "not tested", "the step-1 directions' covariance is singular")
    p = float(stats.chi2.sf(stat, int(keep.sum())))
    # ‖d‖² overstates ‖E d‖² by the noise's trace: quote the debiased norm
    moved = math.sqrt(max(float(d @ d) - float(np.trace(cov[np.ix_(keep, keep)])), 0.0)) / radius
    return _result(name, sn, stat, p, level,
                   f"the canary moves the first update by {moved:.2f} C in all {int(keep.sum())} recorded directions "
                   "together (the canary's gradient per tensor, the other records' summed gradient; at most "
                   "1.00 C; estimate, debiased for the noise)")


def _normalisation(a: dict, steps: np.ndarray, level: float, rng: np.random.Generator, perms: int
                   ) -> model.PremiseTest:
    name, sn = "normalisation", "sum over steps of log(mean ss | in / mean ss | out)"
    m = a["member"]
    if m.all() or not m.any():
        return _result(name, sn, None, None, level, "not tested", "needs trials with and without the canary")
    ss = a["ss"][:, steps]

    def stat_of(mask: np.ndarray) -> np.ndarray:  # mask (k, n) -> (k,)
        w_in = mask / mask.sum(axis=1, keepdims=True)
        w_out = ~mask / (~mask).sum(axis=1, keepdims=True)
        return np.log(w_in @ ss).sum(axis=1) - np.log(w_out @ ss).sum(axis=1)

    stat = float(stat_of(m[None, :])[0])
    null = np.concatenate([stat_of(rng.permuted(np.broadcast_to(m, (min(500, perms - lo), m.size)).copy(),
                                                axis=1)) for lo in range(0, perms, 500)])
    p = _two_sided(stat, null)
    ratio = math.exp(stat / (2 * len(steps)))
    return _result(name, sn, stat, p, level,
                   f"the noise in the update is {ratio:.3f}x as large when the canary is in the data (expected "
                   "1.000; a departure means the scale from noisy sum to update depends on the records)")


def _scale_fixed(a: dict, steps: np.ndarray, level: float, rng: np.random.Generator, perms: int
                 ) -> model.PremiseTest:
    """Within-step variance of log ss against its exact null: log ss_it = c_t + log χ²_|R| (Monte Carlo).

    The p-value counts simulated statistics (the same trials × steps of exact log χ²_|R| draws) at or above
    the observed one; the z-score (from the cumulants ψ′, ψ‴ of log χ²) is reported only. A normal
    reference for z was anti-conservative at 200 trials (the sample variance of log χ² is right-skewed:
    9 of 236 correct audits had p < 0.01, docs/fault-detection.md).
    """
    name, sn = "scale_fixed", "z of the within-step variance of log ss against psi'(|R|/2)"
    n, df = a["ss"].shape[0], a["df"]
    if n < 4:
        return _result(name, sn, None, None, level, "not tested", "fewer than four trials")
    lss = np.log(a["ss"][:, steps])
    v = float(lss.var(axis=0, ddof=1).mean())  # per-step sample variances, averaged over (independent) steps
    k2, k4 = float(special.polygamma(1, df / 2)), float(special.polygamma(3, df / 2))  # cumulants of log chi2
    var_s2 = (k4 + 3 * k2 ** 2 - k2 ** 2 * (n - 3) / (n - 1)) / n  # variance of one sample variance
    z = (v - k2) / math.sqrt(var_s2 / len(steps))
    chunk = max(1, 2_000_000 // (n * len(steps)))
    above = 0
    for lo in range(0, perms, chunk):
        sim = np.log(rng.chisquare(df, size=(min(chunk, perms - lo), n, len(steps))))
        above += int((sim.var(axis=1, ddof=1).mean(axis=1) >= v).sum())
    p = (1 + above) / (1 + perms)
    extra = math.sqrt(max(v - k2, 0.0)) / 2  # sd of log(noise std) beyond chi-square's own
    return _result(name, sn, z, p, level,
                   f"the noise scale varies from trial to trial by {100 * extra:.1f} % (sd of its log beyond the "
                   "reference's own; expected 0: the normalisation depends on the realised batch)" if extra > 0 else
                   "the noise scale is the same in every trial, as expected")


def _noise_every_tensor(a: dict, steps: np.ndarray, level: float) -> model.PremiseTest:
    name, sn = "noise_every_tensor", "smallest (tensor noise / reference noise) std ratio"
    n, df = a["ss"].shape[0], a["df"]
    worst_p, worst_ratio, worst = 1.0, math.inf, None
    for key, tss in a["tss"].items():
        nj = a["tn"][key]
        ps, ratios = [], []
        for t in steps:
            ref = float(a["ss"][:, t].sum()) / (n * df)
            f = float(tss[:, t].sum()) / (n * nj) / ref
            ratios.append(f)
            ps.append(max(float(stats.f.cdf(f, n * nj, n * df)), 1e-300))
        p = float(stats.chi2.sf(-2 * np.log(ps).sum(), 2 * len(ps))) if ps else 1.0
        if p <= worst_p:
            worst_p, worst, worst_ratio = p, key, math.sqrt(min(ratios)) if ratios else math.inf
    if worst is None:
        return _result(name, sn, None, None, level, "not tested", "no tensor outside the reference coordinates")
    p = min(1.0, worst_p * len(a["tss"]))
    return _result(name, sn, worst_ratio, p, level,
                   f"tensor {worst!r} gets at most {worst_ratio:.2f}x the reference noise (its update's spread, "
                   f"gradient included; at least 1.00x expected)")


def _noise_fresh(a: dict, level: float) -> model.PremiseTest:
    name, sn = "noise_fresh", "steps without fresh noise on R (share f2 < 1e-8)"
    f2 = a["f2"]
    if f2.size == 0:
        return _result(name, sn, None, None, level, "not tested", "fewer than two steps, or |R| < 2")
    _, floor = _fresh_pits(f2, a["df"])
    count = int((f2 < _FLOOR).sum())
    p0 = float(np.max(floor))
    p = float(stats.binom.sf(count - 1, f2.size, p0)) if count else 1.0
    worst_t = int(np.argmax((f2 < _FLOOR).sum(axis=0))) + 2
    finding = (f"{count} of {f2.size} steps carry no fresh noise on the untouched coordinates (most often step "
               f"{worst_t}): noise reused across steps or missing at some steps" if count else
               f"every step carries fresh noise (median share {float(np.median(f2)):.2f})")
    return _result(name, sn, count, max(p, 0.0), level, finding)


_BL_MIN = 10  # observations per step below which the batch-law test leaves a step out


def _batch_law_data(records: Sequence[dict[str, Any]], a: dict, steps: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int] | None:
    """(P, v, use) on the given steps (trials × steps) and n, or None when the records lack the projections.

    P: the update on the copied record's unit gradient; v = ss/|R|, the noise variance per coordinate; use:
    trials without the canary, a projection, and (where the records carry a probe) the probe left out.
    """
    if not all("bl" in r and "n" in r for r in records):
        return None
    ns = {int(r["n"]) for r, m in zip(records, a["member"], strict=True) if not m}
    if len(ns) != 1:
        return None
    raw = [[r["bl"][t] for t in steps] for r in records]
    use = np.array([[v is not None for v in row] for row in raw], dtype=bool) & ~a["member"][:, None]
    for i, r in enumerate(records):
        probe = r.get("probe", {}).get("s") if isinstance(r.get("probe"), dict) else None
        if probe is not None:  # an independent coin per step: leaving its steps out keeps the law
            use[i] &= ~np.array([bool(probe[t]) for t in steps], dtype=bool)
    p = np.array([[0.0 if v is None else float(v) for v in row] for row in raw], dtype=np.float64)
    return p, a["ss"][:, steps] / a["df"], use, ns.pop()


def _batch_law_stat(p: np.ndarray, v: np.ndarray, use: np.ndarray, k: float) -> tuple[float, float, float, float]:
    """(D, its standard error at the null's boundary, the natural part's variance, its Poisson minimum), over steps.

    Per step (column), over the N trials in ``use``: e = (1 + k/N)·V̂ar P − k·P̄² − v̄, k = (1 − q)/(n q), an
    unbiased estimate of Var P − k(E P)² − noise (≥ 0 under H0), and D = Σ_t e_t / v̄_t. Its variance is taken
    at the boundary Var P = V0 = v̄ + k(E P)², not at V̂ar P (a standard error that shrinks with V̂ar P makes a
    lower-tail test anti-conservative): Var V̂ar ≈ V0²·(2/(N − 1) + γ⁺/N) (γ⁺ the excess kurtosis, if
    positive), Var P̄ = V0/N, their covariance term kept only where it adds; steps are combined with the
    non-negative part of their empirical correlation (delta-method influences; trials are independent).
    """
    d = excess = floor = 0.0
    sd, phis = [], []
    for t in range(p.shape[1]):
        m = use[:, t]
        nt = int(m.sum())
        x, vv = p[m, t], v[m, t]
        m1, w = float(x.mean()), float(vv.mean())
        dev = x - m1
        var = float((dev * dev).sum()) / (nt - 1)
        e = (1 + k / nt) * var - k * m1 * m1 - w
        d += e / w
        excess += var - w
        floor += k * (m1 * m1 - var / nt)
        v0 = w + k * max(m1 * m1 - var / nt, 0.0)
        m2b = float((dev * dev).mean())
        gamma = float((dev ** 4).mean()) / (m2b * m2b) - 3 if m2b > 0 else 0.0
        cross = -4 * k * m1 * (1 + k / nt) * float((dev ** 3).mean()) / nt
        var_e = ((1 + k / nt) ** 2 * v0 * v0 * (2 / (nt - 1) + max(gamma, 0.0) / nt) + 4 * k * k * m1 * m1 * v0 / nt
                 + float(vv.var()) / nt + max(cross, 0.0))
        sd.append(math.sqrt(var_e) / w)
        phi = np.zeros(p.shape[0])
        phi[m] = ((1 + k / nt) * (dev * dev - var) - 2 * k * m1 * dev - (vv - w)) / w
        phis.append(phi)
    f = np.array(phis)
    norms = np.sqrt((f * f).sum(axis=1))
    corr = np.clip((f @ f.T) / np.outer(norms, norms).clip(min=1e-300), 0.0, 1.0)
    np.fill_diagonal(corr, 1.0)
    s = np.array(sd)
    return d, math.sqrt(float(s @ corr @ s)), excess, floor


def _batch_law(records: Sequence[dict[str, Any]], a: dict, spec: DPSGD, level: float, noisy: np.ndarray,
               skip: str | None = None) -> model.PremiseTest:
    """The batch's size varies as much as Poisson sampling at the claimed rate (or a smaller one) makes it.

    Under Poisson sampling at q' ≤ q, given the history H (θ_{t−1}, the data), the update projected on a
    direction u fixed by H is P = a·(Σ_{i∈B_t} a_i + noise), a_i the clipped contributions on u, so
    Var(P | H)/a² = q'(1 − q')Σa_i² + σ_u² ≥ (1 − q)/(n q)·(E[P | H]/a)² + σ_u² (Σa_i² ≥ (Σa_i)²/n;
    (1 − q')/q' ≥ (1 − q)/q), and by the law of total variance and Jensen, unconditionally Var P ≥
    (1 − q)/(n q)·(E P)² + a²σ²C², the noise on u being at least that on R (measured there at the same
    step). A fixed-size batch removes the Binomial variance. One-sided z-test on Σ_t D_t (delta method,
    CLT over trials): steps 1.. T from a recorded privatised gradient, step 1 from θ-differences (where
    a momentum state would inflate E P; skipped when :func:`_nonlinear` distrusts step 1). Poisson claims only.
    """
    name, sn = "batch_law", "z of the summed D_t = (Var P - noise - (1-q)/(nq)·(mean P)²) / noise"
    if skip is not None:  # step 1's θ-difference is not a linear image of the noisy sum (_nonlinear)
        return _result(name, sn, None, None, level, "not tested", skip)
    if not isinstance(spec.sampling, Poisson):
        return _result(name, sn, None, None, level, "not tested",
                       "the claim is not Poisson sampling: the batch-size law it names is not Binomial")
    q = float(spec.sampling.rate)
    steps = noisy if a["mode"] == "record_update" else noisy[:1][noisy[:1] == 0]
    data = _batch_law_data(records, a, steps) if len(steps) and q < 1 else None
    if data is None:
        return _result(name, sn, None, None, level, "not tested",
                       "needs the records' projections on the copied record's gradient, noise on R at the steps "
                       "read, and q < 1")
    p, v, use, n = data
    keep = use.sum(axis=0) >= _BL_MIN
    if not keep.any():
        return _result(name, sn, None, None, level, "not tested",
                       f"fewer than {_BL_MIN} trials without the canary at every step read")
    k = (1 - q) / (n * q)
    d, se, excess, floor = _batch_law_stat(p[:, keep], v[:, keep], use[:, keep], k)
    if not se > 0:
        return _result(name, sn, None, None, level, "not tested", "the projections do not vary")
    z = d / se
    pv = float(stats.norm.cdf(z))
    share = excess / floor if floor > 0 else math.inf
    return _result(name, sn, z, pv, level,
                   f"the natural part's variance is {share:.2f} of its minimum under Poisson sampling at rate {q:g} "
                   f"({int(keep.sum())} step(s), {int(use[:, keep].sum())} observations; at least 1.00 expected)"
                   + ("; the batch's size varies less than Poisson sampling allows: fixed-size or shuffled batches "
                      "claimed as Poisson, a rate above the claim, or an update normalised by the realised batch "
                      "size?" if pv <= level else ""))


def _probe_z(records: Sequence[dict[str, Any]], steps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray
                                                                            ] | str:
    """(Z (trials, steps, k), coin (trials, steps), valid (trials, steps)) of the probe, or why not.

    Z_t = p_t / √(ss_t/|R|); k the most directions of any step (fewer at a step: zeros, the projection on a
    zero vector, which keeps the null's ball); valid: the step had a direction (S ≠ 0 at θ_(t−1)).
    """
    if not all("probe" in r and "p" in r["probe"] for r in records):
        return "the trials carry no probe record"
    why = next((r["probe"]["skip"] for r in records if r["probe"].get("skip")), None)
    if why is not None:
        return why
    n, t = len(records), len(steps)
    k = max((len(v) for r in records for v in r["probe"]["p"]), default=0)
    if k == 0:
        return "no step had a natural gradient to probe"
    z = np.zeros((n, t, k))
    valid = np.zeros((n, t), dtype=bool)
    coin = np.array([[r["probe"]["s"][j] for j in steps] for r in records], dtype=bool)
    for i, r in enumerate(records):
        scale = np.sqrt(np.asarray(r["ss"], dtype=np.float64)[steps] / r["df"])
        for col, j in enumerate(steps):
            p = r["probe"]["p"][j]
            if p and scale[col] > 0:
                z[i, col, :len(p)] = np.asarray(p) / scale[col]
                valid[i, col] = True
    return z, coin, valid


def _effect(z: np.ndarray, coin: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray, int] | None:
    """Per-step difference of means (probe in − out), averaged over the steps with equal weights, and its
    covariance, cluster-robust by trial (each trial's influence, summed over its steps); None if no step has
    two observations on each side."""
    n = z.shape[0]
    inn, out = valid & coin, valid & ~coin
    n1, n0 = inn.sum(axis=0), out.sum(axis=0)
    use = (n1 >= 2) & (n0 >= 2)
    if not use.any():
        return None
    z, inn, out, n1, n0 = z[:, use], inn[:, use], out[:, use], n1[use], n0[use]
    m1 = (z * inn[..., None]).sum(axis=0) / n1[:, None]  # (steps, k)
    m0 = (z * out[..., None]).sum(axis=0) / n0[:, None]
    steps = int(use.sum())
    d = (m1 - m0).mean(axis=0)
    phi = ((inn[..., None] * (z - m1) / n1[:, None]) - (out[..., None] * (z - m0) / n0[:, None])).sum(axis=1) / steps
    cov = phi.T @ phi * n / max(n - 1, 1)
    return d, cov, int(inn.sum() + out.sum())


def _canary_effect(records: Sequence[dict[str, Any]], steps: np.ndarray, sigma: float, level: float,
                   skip: str | None) -> model.PremiseTest:
    """The probe's causal effect on the update, all its directions at once, against the ball of radius κ/σ.

    At step t the probe's coin s_t is drawn independently of the history F_(t−1) (θ_0, …, θ_(t−1), earlier
    coins) and of the trainer's randomness, so E[Z_t | s_t = 1] − E[Z_t | s_t = 0] = E over F of the conditional
    difference, and given F a correct DP-SGD adds a·clip(g) (a the fixed scale from noisy sum to update) while
    the noise's scale on R, independent of the directions' coordinates, gives E[1/√(ss/|R|) | F] ≤ κ/(aσC) (more
    noise, or noise accumulated by momentum, only lowers it): the mean difference lies in the ball of radius
    κ/σ for any clipping that bounds one record's contribution by C (joint, per layer with thresholds whose
    squares sum to C², a smaller C). Test: the Mahalanobis distance of the estimate to that ball against χ²_k
    (CLT over trials, covariance cluster-robust by trial). docs/fault-detection.md, "Third round".
    """
    name = "canary_effect"
    sn = "Mahalanobis distance of mean_t(mean Z | probe in - mean Z | probe out) to the ball of radius kappa/sigma"
    if skip is not None:
        return _result(name, sn, None, None, level, "not tested", skip)
    got = _probe_z(records, steps)
    if isinstance(got, str):
        return _result(name, sn, None, None, level, "not tested", got)
    z, coin, valid = got
    eff = _effect(z, coin, valid) if z.shape[0] >= 10 else None
    if eff is None:
        return _result(name, sn, None, None, level, "not tested",
                       "too few observations: needs ten trials and a step with two trials with the probe and two "
                       "without")
    d, cov, _ = eff
    keep = np.diag(cov) > 0
    if not keep.any():
        return _result(name, sn, None, None, level, "not tested", "no direction with a spread")
    d, cov = d[keep], cov[np.ix_(keep, keep)]
    radius = _kappa(int(records[0]["df"])) / sigma
    try:
        stat = _ball_distance(d, cov, radius)
    except np.linalg.LinAlgError:
        return _result(name, sn, None, None, level, "not tested", "the directions' covariance is singular")
    p = float(stats.chi2.sf(stat, int(keep.sum())))
    return _result(name, sn, stat, p, level, _effect_words(records, steps, d, cov, radius, keep, p <= level))


def _effect_words(records: Sequence[dict[str, Any]], steps: np.ndarray, d: np.ndarray, cov: np.ndarray,
                  radius: float, keep: np.ndarray, rejected: bool) -> str:
    """The probe's shift in C (debiased for the noise), and the cause where the shape of the shift implies it."""
    moved = math.sqrt(max(float(d @ d) - float(np.trace(cov)), 0.0)) / radius
    words = (f"a probe gradient of 1000·C against the natural records' summed gradient moves the update by "
             f"{moved:.2f} C in its {int(keep.sum())} direction(s) (at most 1.00 C; estimate, debiased for the noise)")
    cs = [np.asarray(r["probe"]["c"][j]) for r in records for j in steps if r["probe"]["c"][j]]
    if not rejected or not cs:
        return words
    k = max(len(c) for c in cs)
    cbar = np.mean([np.pad(c, (0, k - len(c))) for c in cs], axis=0)[keep]
    cbar = cbar / max(float(np.linalg.norm(cbar)), 1e-300)
    along = float(d @ cbar) / radius  # the shift along the probe's own clipped direction, in C
    se = math.sqrt(max(float(cbar @ cov @ cbar), 0.0)) / radius
    per = d / radius
    if along >= 1.5 and along - 3 * se <= 2.0:  # a clipped sum moves by at most 2 C
        words += (f"; {along:.2f} C of it along the probe's own direction, where one clipped example moves it by "
                  "at most 1.00 C: the clipping bounds the sum, not each example (or the clipped sum is rescaled "
                  "by something that depends on the batch)")
    elif along >= 1.5:
        words += (f"; {along:.2f} C of it along the probe's own direction, more than even a clipped sum allows "
                  "(2.00 C): the clipped contribution is rescaled by something that depends on the batch (e.g. "
                  "its realised size)")
    elif len(per) >= 2 and (per <= -0.6).sum() >= 2 and along < 1.3:
        words += (f"; about C in each of {int((per <= -0.6).sum())} parameter tensors: each tensor is clipped to C "
                  "separately, not the example as a whole")
    return words


def _state(a: dict) -> str | None:
    """A reason to distrust θ-differences (a stateful optimizer), or None (module doc)."""
    if a["mode"] != "parameters" or a["f2"].size == 0 or (a["f2"] < _FLOOR).any():
        return None
    pits, _ = _fresh_pits(a["f2"], a["df"])
    z = (float(pits.mean()) - 0.5) / math.sqrt(1 / 12 / pits.size)
    if z < _STATE_Z:
        return (f"the updates carry state across steps (fresh-noise share {float(np.median(a['f2'])):.2f}, below "
                "its no-state distribution; momentum or Adam?): call audit.record_update(privatised_gradient) so "
                "the tests read the noisy sum itself")
    return None


_LINEAR_Z = -4.0  # the step-1 noise scale varies this many standard errors less than Gaussian noise's χ² law allows


def _nonlinear(a: dict, state: str | None) -> str | None:
    """A reason to distrust step 1's θ-difference as a linear image of the noisy sum, or None.

    Plain SGD and momentum from zero state move by a·(noisy sum) at step 1, so ss_1 = a²σ'²C²·χ²_|R| and
    the sample variance of log ss_1 over trials has mean ψ'(|R|/2) (any data-dependent scale only adds to
    it). Adam's and RMSprop's first step lr·g/(|g| + ε) is about lr·sign(g): ss_1 ≈ lr²|R| in every trial.
    The gate fires when that variance is more than 4 standard errors below ψ'(|R|/2), or when ``state``
    (an optimizer with state, which may be Adam with a larger ε); it only makes a test "not tested".
    """
    if a["mode"] != "parameters":
        return None
    if state is not None:
        return "the updates carry state across steps (momentum or Adam?), so step 1 may be a non-linear image of " \
               "the noisy sum (Adam's lr·g/(|g| + eps) per coordinate): call audit.record_update(privatised_gradient)"
    n, df = a["ss"].shape[0], a["df"]
    if n < 4 or not (a["ss"][:, 0] > 0).all():
        return None
    v = float(np.log(a["ss"][:, 0]).var(ddof=1))
    k2, k4 = float(special.polygamma(1, df / 2)), float(special.polygamma(3, df / 2))  # cumulants of log χ²
    z = (v - k2) / math.sqrt((k4 + 3 * k2 ** 2 - k2 ** 2 * (n - 3) / (n - 1)) / n)
    if z < _LINEAR_Z:
        return (f"the first update's noise scale varies less than Gaussian noise allows (sd of log ss_1 "
                f"{math.sqrt(v):.3f}, Gaussian: {math.sqrt(k2):.3f}): step 1 is not a linear image of the noisy sum "
                "(Adam or RMSprop, sign-like at step 1?): call audit.record_update(privatised_gradient)")
    return None


def run_tests(records: Sequence[JSONObject], spec: DPSGD, significance: float, seed: int = 0, *,
              permutations: int = PERMUTATIONS, replayed: ReplayObservation | None = None) -> model.Conformance:
    """The premise tests on a conformance game's per-trial records, sharing ``significance`` (Bonferroni).

    Args:
        records: :func:`attacks.conformance_record.trial_stats` of every trial.
        spec: the claimed DP-SGD (σ, sampling).
        significance: the conformance tests' share of the run's significance; each test gets 1/len(TESTS) of it.
        seed: the permutation tests' seed.
        permutations: Monte Carlo permutations of the two permutation tests (at least 4/level).
        replayed: :func:`attacks.replay.observe`'s measurements for the ``replay`` test (audit/replay.py); None:
            that test is reported as not run (its share of the level is spent all the same).
    """
    a = _arrays(records)
    level = significance / len(TESTS)
    permutations = max(permutations, math.ceil(4 / level))  # the smallest two-sided p, 2/(1 + B), is below level
    rng = np.random.default_rng(seed)
    rate, sigma = inclusion_rate(spec), float(spec.noise_multiplier)
    noisy = np.flatnonzero((a["ss"] > 0).all(axis=0))  # steps with noise on R in every trial
    state = _state(a)
    nonlinear = _nonlinear(a, state)
    # an optimizer with state, or one whose step 1 is a non-linear image of the noisy sum (RMSprop, Adam with beta1 = 0:
    # per-coordinate rescaling by a history the state gate does not see), is read at step 1 only (module doc)
    adaptive = state if state is not None else nonlinear
    early = noisy[:1] if adaptive is not None else noisy
    skip_sampling = adaptive
    if skip_sampling is None and spec.sampling.__class__.__name__ == "Shuffle":
        skip_sampling = "shuffled batches are dependent across steps by design: the independence test does not apply"
    if skip_sampling is None and isinstance(spec.sampling, RandomAllocation):
        skip_sampling = "random allocation is dependent across the steps of an epoch by design: the independence " \
                        "test does not apply"
    tests = (_sampling(a, noisy, rate, level, rng, skip_sampling, permutations),
             _contribution(a, early, rate, sigma, level) if len(early) else
             _result("contribution", "z", None, None, level, "not tested", "no step with noise on R"),
             _total_contribution(a, rate, sigma, level, None if isinstance(spec.sampling, Poisson) else
                                 "a fixed-size or shuffled batch couples the other records' inclusion to the canary's"),
             _normalisation(a, noisy, level, rng, permutations) if len(noisy) else
             _result("normalisation", "", None, None, level, "not tested", "no step with noise on R"),
             _scale_fixed(a, early, level, rng, permutations) if len(early) else
             _result("scale_fixed", "", None, None, level, "not tested", "no step with noise on R"),
             _noise_every_tensor(a, early, level),
             _noise_fresh(a, level),
             _batch_law(records, a, spec, level, noisy, nonlinear),
             _canary_effect(records, early, sigma, level, None if isinstance(spec.sampling, Poisson) else
                            "the probe runs under Poisson claims only"),
             replay.test(replayed, sigma, level))
    notes = [f"read from {'the recorded privatised gradients' if a['mode'] == 'record_update' else 'θ_(t-1) - θ_t'}; "
             f"{len(records)} trials, {a['y'].shape[1]} steps, |R| = {a['df']} reference coordinates"]
    if adaptive is not None:
        notes.append(adaptive)
    if a["gnorm_min"] < 1.0:
        notes.append(f"the canary's gradient fell to {a['gnorm_min']:.2f} C at some step (not clipped there); the "
                     "sampling test assumes a constant clipped contribution")
    if len(noisy) < a["ss"].shape[1]:
        notes.append(f"{a['ss'].shape[1] - len(noisy)} step(s) had no noise on R in some trial")
    return model.Conformance(significance, level, tuple(tests), any(t.rejected for t in tests), tuple(notes))
