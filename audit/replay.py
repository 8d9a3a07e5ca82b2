"""The replay check (issue 25): one record's exact contribution, with the noise cancelled, against the noise.

:func:`attacks.replay.observe` runs the trainer twice per seed with the same seed and data, handing out at
step 1 the conformance probe (a gradient of 1000·(‖S‖ + C) against the natural records' summed gradient,
≫ C in every parameter tensor) or a zero gradient. With every random draw the same, the difference of the
first updates is Δ = a·(clip(probe) − clip(0)), a the unknown post-processing scale (learning rate over a
constant batch size; a multiple of the noisy sum at step 1 for any optimizer starting from zero state, or
``audit.record_update``'s privatised gradient), so a correct DP-SGD gives ‖Δ‖ ≤ a·C. The noise in the same
units comes from the same seed's zero-run on R (coordinates no natural record's gradient nor the probe
reaches at θ_0): ss = ‖u_1[R]‖² = a²σ'²C²·χ²_|R| with σ' ≥ σ.

**Null hypothesis** H0 (module constant :data:`NULL`): at every replayed seed ‖Δ‖ ≤ a·C and the noise on R is
Gaussian of std a·σ'·C, σ' ≥ σ, independent across seeds. It holds for every correct DP-SGD whose random draws
do not depend on the handed gradient's value (joint clipping at C or below, per-tensor clipping with thresholds
whose squares sum to at most C², more noise, any learning rate, any constant normalisation, a fixed or seeded
random start). Then F_j = ‖Δ_j‖²·|R|/ss_j ≤ (1/σ²)·|R|/χ²_|R|, so p_j = P(χ²_|R| ≤ |R|/(σ²F_j)) is
super-uniform (exact at the boundary), and Fisher's −2Σ log p_j against χ²_2m (m seeds) is a valid test.
Both gates (the same seed reproduces the same updates; Δ vanishes on R, i.e. the noise cancels) only make the
check "not applicable", never a rejection. Catches what moves one record's contribution beyond C in the noise's
units at step 1: a clipped sum (up to 2C), per-tensor clipping (√L·C), missing clipping, noise too small,
a contribution rescaled by B/|B_t| before the noise. docs/fault-detection.md, "Replay".
"""

from __future__ import annotations

import math
import statistics as pystats

import numpy as np
from scipy import stats

from attacks.replay import ReplayObservation, SeedReplay

from . import model

__all__ = ["NULL", "STATISTIC", "test"]

NULL = ("with the same seed and data, the first update with the probe (1000·C against the natural records' summed "
        "gradient) minus that with a zero gradient, Delta, has ||Delta|| <= a·C, and the noise on the untouched "
        "coordinates R of the same run is Gaussian of std a·sigma'·C with sigma' >= sigma (a the unknown "
        "post-processing scale): p_j = P(chi2_|R| <= |R|/(sigma²·F_j)), F_j = ||Delta_j||²·|R|/||u_1[R]||², "
        "combined over seeds by Fisher")
STATISTIC = "Fisher's -2·sum_j log p_j over the replayed seeds (chi2 with 2m degrees of freedom under H0)"
ALIGN_TOL = 1e-5  # ‖Δ[R]‖ ≤ this·‖u_1[R]‖: the noise cancelled (float32 round-off is ~1e-7; reused bits give 0)
AFFINE_TOL = 1e-3  # ‖Δ(+v) + Δ(−v)‖ ≤ this·‖Δ(+v)‖: the map is linear on small gradients (words only)
# The noise on R must look Gaussian: mean |u| / rms u is √(2/π) ≈ 0.798 for a centred Gaussian (its standard
# error over the ≥ 16·|R| pooled coordinates is ≈ 0.6/√N, under 0.03 for N ≥ 400) and 1 for a sign-like step 1
# (Adam's first update lr·g/(|g| + ε) without audit.record_update), which the null does not cover.
SHAPE_MAX = 0.9


def _skipped(level: float, why: str) -> model.PremiseTest:
    return model.PremiseTest("replay", "contribution", NULL, STATISTIC, None, None, level, False, "not tested", why)


def _log_p(d2: np.ndarray, ss: np.ndarray, df: np.ndarray, sigma: float) -> np.ndarray:
    """log p_j = log P(χ²_df ≤ df/(σ²F_j)), F_j = d2·df/ss (module doc): 0 for Δ = 0, −inf for Δ ≠ 0 without noise."""
    with np.errstate(divide="ignore", invalid="ignore"):
        x = np.where(d2 > 0, ss / (sigma * sigma * np.where(d2 > 0, d2, 1.0)), np.inf)
        return np.where(d2 > 0, stats.chi2.logcdf(x, df), 0.0)


def _shape(seeds: list[SeedReplay]) -> float:
    """Pooled mean |u_1[R]| over its root mean square (√(2/π) for Gaussian noise; 1 for a sign per coordinate)."""
    n, ss = sum(s.df for s in seeds), sum(s.ss for s in seeds)
    return (sum(s.abs_sum for s in seeds) / n) / math.sqrt(ss / n) if ss > 0 else 0.0


def test(obs: ReplayObservation | None, sigma: float, level: float) -> model.PremiseTest:
    """The replay test at ``level`` on :func:`attacks.replay.observe`'s measurements (None: not run)."""
    if obs is None:
        return _skipped(level, "the replay did not run (a white-box user trainer's conformance audit runs it)")
    if obs.skip:
        return _skipped(level, obs.skip)
    seeds = [s for s in obs.seeds if s.df > 0]
    if not seeds:
        return _skipped(level, "no coordinate of the model is out of every natural gradient's reach at θ_0: no "
                               "noise reference")
    bad = [s for s in seeds if not math.sqrt(s.d2_ref) <= ALIGN_TOL * math.sqrt(s.ss)]
    if bad:
        return _skipped(level, f"the noise did not cancel between two runs with the same seed ({len(bad)} of "
                               f"{len(seeds)} seeds: the update on coordinates no gradient reaches differs): the "
                               "trainer's random draws depend on the handed gradient's value, replay not applicable")
    if _shape(seeds) > SHAPE_MAX:
        return _skipped(level, f"the first update on coordinates no gradient reaches is not Gaussian noise (mean |u| / "
                               f"rms u = {_shape(seeds):.2f}; Gaussian: 0.80, a sign per coordinate: 1.00): step 1 is "
                               "not a linear image of the noisy sum (Adam? call audit.record_update(privatised_"
                               "gradient)), replay not applicable")
    d2, ss, df = (np.array([getattr(s, k) for s in seeds], dtype=np.float64) for k in ("d2", "ss", "df"))
    logs = _log_p(d2, ss, df, sigma)
    x = -2.0 * float(logs.sum())
    p = 0.0 if math.isinf(x) else float(stats.chi2.sf(x, 2 * len(seeds)))
    return model.PremiseTest("replay", "contribution", NULL, STATISTIC, x, p, level, p <= level,
                             _words(obs, seeds, sigma, p <= level))


def _words(obs: ReplayObservation, seeds: list[SeedReplay], sigma: float, rejected: bool) -> str:
    """The probe's shift in the noise's units (median over seeds) and, by the small probe, in C and the noise."""
    ratios = [sigma * math.sqrt(s.d2 * s.df / s.ss) if s.ss > 0 else math.inf for s in seeds]
    med = pystats.median(ratios)
    words = (f"replaying {len(seeds)} seeds with a probe gradient of {seeds[0].handed:.3g} C against a zero "
             f"gradient moves the first update by {med:.2f} C in the noise's units (sigma·||Delta||/noise std, "
             f"median; at most 1.00 for a correct DP-SGD)")
    cal = obs.calibration
    if cal is not None and cal.dv > 0 and cal.affine > AFFINE_TOL:
        words += (f"; the map from one record's gradient to the update is not linear on small gradients (a "
                  f"{cal.v:g} C probe and its negative move it by amounts {cal.affine:.2g} apart, relative): "
                  "the clipping acts on more than one example?")
    elif cal is not None and cal.dv > 0:
        per_c = cal.dv / cal.v  # the update per C of an unclipped gradient (the first seed)
        moved = math.sqrt(seeds[0].d2) / per_c
        noise = math.sqrt(sum(s.ss for s in seeds) / sum(s.df for s in seeds)) / per_c / sigma
        words += (f"; calibrated by a small unclipped probe ({cal.v:g} C, its image linear): the probe moves it by "
                  f"{moved:.2f} C and the noise is {noise:.2f}× the claimed sigma·C (estimates, in words only)")
    if rejected:
        words += ": one record moves the update by more than the clipping allows (a clipped sum, per-tensor " \
                 "clipping, no clipping, or noise smaller than the claim)"
    return words
