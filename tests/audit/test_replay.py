"""The replay check (audit/replay.py, attacks/replay.py; issue 25).

Level: on measurements drawn from the null's boundary (a record moved by exactly C, Gaussian noise of std σC)
the test rejects at most its level. Power and gates: hand-written trainers, correct and buggy, replayed through
the white-box hook; a trainer that is not reproducible, or whose draws follow the handed gradient, is "not
applicable", never rejected.
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest
import torch

import accountants as acc
from attacks import conformance_record, data, plugin, replay
from audit import conformance
from audit import replay as audit_replay

from .trainer_parts import linear_model

SIGMA = 1.0
SPEC = acc.DPSGD(SIGMA, acc.Poisson(0.5), 3)


def _obs(d2: list[float], ss: list[float], df: int = 30, d2_ref: float = 0.0,
         shape: float = math.sqrt(2 / math.pi)) -> replay.ReplayObservation:
    """Measurements with mean |u| = shape·rms u on R (√(2/π): Gaussian noise; 1: a sign per coordinate)."""
    seeds = tuple(replay.SeedReplay(a, d2_ref, b, shape * math.sqrt(b * df), df, 1000.0)
                  for a, b in zip(d2, ss, strict=True))
    return replay.ReplayObservation(None, True, seeds)


def test_one_seed_p_value_is_the_chi2_cdf_closed_form():
    # ||Δ|| = C at σ = 2, ss = σ²C²·df exactly: p = P(χ²_df ≤ df/(σ²F)) with F = df/ss = 1/σ², i.e. P(χ²_30 ≤ 30)
    # (regularised lower incomplete gamma, mpmath 50 digits); Fisher with one seed: P(χ²_2 ≥ −2 log p) = p exactly
    t = audit_replay.test(_obs([1.0], [4.0 * 30]), 2.0, 0.05)
    want = float(mp.gammainc(15, 0, 15, regularized=True))
    assert t.p_value == pytest.approx(want, rel=1e-9) and not t.rejected


def test_level_at_the_null_boundary():
    # a record moved by exactly C (the boundary of H0), noise N(0, σ²C²) on |R| = 30 coordinates, 16 seeds: the
    # test is exact there, so over 2,000 simulated checks at level 0.05 the rejection count is Bin(2000, 0.05):
    # mean 100, sd 9.7; 140 is 4.1 sd above (and 60 below: the test is not conservative at the boundary)
    rng = np.random.default_rng(0)
    sigma, level, n = 1.5, 0.05, 2000
    rej = 0
    for _ in range(n):
        ss = (sigma ** 2 * rng.chisquare(30, size=16)).tolist()
        rej += audit_replay.test(_obs([1.0] * 16, ss), sigma, level).rejected
    assert 60 < rej < 140, rej


def test_rejects_a_clipped_sum_and_per_tensor_clipping_at_their_sensitivity():
    rng = np.random.default_rng(1)
    ss = (9.0 * rng.chisquare(30, size=16)).tolist()  # σ = 3
    # a clipped sum moves the record by 2C, two tensors clipped separately by √2·C: level 0.05/60 as in check
    assert audit_replay.test(_obs([4.0] * 16, ss), 3.0, 0.05 / 60).rejected
    assert audit_replay.test(_obs([2.0] * 16, ss), 3.0, 0.05 / 60).rejected
    ok = audit_replay.test(_obs([1.0] * 16, ss), 3.0, 0.05 / 60)
    assert not ok.rejected and ok.skipped is None


def test_gates_skip_and_never_reject():
    t = audit_replay.test(_obs([100.0], [1.0], d2_ref=1e-3), 1.0, 0.05)  # the noise did not cancel on R
    assert t.skipped and "did not cancel" in t.skipped and not t.rejected and t.p_value is None
    t = audit_replay.test(replay.ReplayObservation("not reproducible: ...", False), 1.0, 0.05)
    assert t.skipped and not t.rejected
    # a sign per coordinate on R (Adam's first step without record_update): outside the null, so not applicable,
    # even with a record moved by 10 C (which would reject if the noise were Gaussian)
    t = audit_replay.test(_obs([100.0] * 16, [30.0] * 16, shape=1.0), 1.0, 0.05)
    assert t.skipped and "not Gaussian" in t.skipped and not t.rejected
    assert audit_replay.test(_obs([100.0] * 16, [30.0] * 16), 1.0, 0.05).rejected
    t = audit_replay.test(None, 1.0, 0.05)
    assert t.skipped and not t.rejected


def _trainer(bug: str = "", steps: int = 3):
    """Hand-written DP-SGD (softmax regression, C = 1, σ = 1, q = 0.5, B = 20, lr 0.5) calling the hook."""
    counter = [0]

    def train(x, y, *, seed, audit=None):
        counter[0] += 1
        g = torch.Generator().manual_seed(seed + (counter[0] if bug == "unseeded" else 0))
        w, b = torch.zeros(10, x.shape[1]), torch.zeros(10)
        if audit is not None:
            audit.record([w, b])
        for _ in range(steps):
            mask = torch.rand(x.shape[0], generator=g) < 0.5
            r = torch.softmax(x[mask] @ w.T + b, 1) - torch.nn.functional.one_hot(y[mask], 10).float()
            grads = [r[:, :, None] * x[mask][:, None, :], r]
            if audit is not None:
                c = audit.canary_gradients([w, b])
                if c is not None:
                    grads = [torch.cat([gi, ci]) for gi, ci in zip(grads, c, strict=True)]
                    if bug == "draws_on_value" and float(c[1].abs().sum()) > 0:
                        torch.rand(1, generator=g)  # a draw that depends on the handed gradient: noise misaligned
            flat = torch.cat([gi.flatten(1) for gi in grads], 1)
            if bug == "clip_sum":
                s = flat.sum(0) * min(1.0, 1.0 / (float(flat.sum(0).norm()) + 1e-12))
                sums = [s[:w.numel()].view_as(w), s[w.numel():]]
            elif bug == "per_layer_clip":
                sums = [(gi * torch.clamp(1.0 / (gi.flatten(1).norm(dim=1) + 1e-12), max=1.0).view(
                    -1, *[1] * (gi.ndim - 1))).sum(0) for gi in grads]
            else:
                f = torch.clamp(1.0 / (flat.norm(dim=1) + 1e-12), max=1.0)
                sums = [(gi * f.view(-1, *[1] * (gi.ndim - 1))).sum(0) for gi in grads]
            noisy = [s + SIGMA * torch.randn(s.shape, generator=g) for s in sums]
            if bug == "adam":  # Adam's bias-corrected step from zero state: lr·g/(|g| + ε), about a sign
                w, b = w - 0.01 * noisy[0] / (noisy[0].abs() + 1e-8), b - 0.01 * noisy[1] / (noisy[1].abs() + 1e-8)
            else:
                w, b = w - 0.5 * noisy[0] / 20, b - 0.5 * noisy[1] / 20
            if audit is not None:
                audit.record([w, b])
        return linear_model(w, b)
    return train


def _context(trainer, seed: int = 0) -> plugin.Context:
    d = data.digits().subset(slice(0, 40))
    can = conformance_record.dead_feature(d, 1, value=10.0, generator=torch.Generator().manual_seed(0))
    return plugin.Context(trainer, d, can, seed, "inner_product", None, SPEC, "white_box", 1.0)


def test_correct_trainer_passes_and_the_probe_moves_it_by_exactly_c():
    obs = replay.observe(_context(_trainer()), seeds=6)
    assert obs.skip is None and obs.reproducible and len(obs.seeds) == 6
    assert all(s.d2_ref == 0.0 and s.df > 0 for s in obs.seeds)  # the noise cancels bit for bit on R
    assert obs.calibration is not None and obs.calibration.affine < 1e-4  # Δ(+v) = −Δ(−v) up to float32 round-off
    t = audit_replay.test(obs, SIGMA, 0.05)
    assert t.skipped is None and not t.rejected, (t.p_value, t.finding)
    # the probe is clipped to exactly C and the 0.1 C probe is not clipped: their images are 10:1 (float32)
    assert "moves it by 1.00 C" in t.finding, t.finding


@pytest.mark.parametrize(("bug", "words"), [("clip_sum", "not linear"), ("per_layer_clip", "moves it by 1.41 C")])
def test_buggy_clipping_is_rejected(bug, words):
    t = audit_replay.test(replay.observe(_context(_trainer(bug)), seeds=6), SIGMA, 0.05 / 60)
    assert t.rejected and words in t.finding, (t.p_value, t.finding)


def test_not_reproducible_and_misaligned_trainers_are_not_applicable():
    obs = replay.observe(_context(_trainer("unseeded")), seeds=3)
    assert obs.reproducible is False and obs.skip is not None and "not reproducible" in obs.skip
    t = audit_replay.test(obs, SIGMA, 0.05)
    assert t.skipped and "not reproducible" in t.skipped and not t.rejected
    t = audit_replay.test(replay.observe(_context(_trainer("draws_on_value")), seeds=3), SIGMA, 0.05)
    assert t.skipped and "did not cancel" in t.skipped and not t.rejected


def test_adam_without_record_update_is_not_applicable_not_a_false_alarm():
    # Adam's first step is about lr·sign(noisy sum) per coordinate: not a linear image of the noisy sum, so the
    # null does not cover it; the replay must say "not applicable" (the shape gate), never reject a correct trainer
    t = audit_replay.test(replay.observe(_context(_trainer("adam")), seeds=4), SIGMA, 0.05)
    assert t.skipped and "not Gaussian" in t.skipped and not t.rejected, (t.p_value, t.finding)


def test_false_alarms_of_a_correct_trainer_across_seeds():
    # 30 audits of the correct trainer (each its own seeds): it sits on the null's boundary (the probe clipped to
    # exactly C), so its p-values are about uniform; at level 0.1 the alarms are at most Bin(30, 0.1): P(≥ 9) = 0.007
    ps = [audit_replay.test(replay.observe(_context(_trainer(), seed=s), seeds=4), SIGMA, 0.1).p_value
          for s in range(30)]
    assert all(p is not None for p in ps)
    assert sum(p <= 0.1 for p in ps) <= 8, ps
    assert 0.25 < float(np.mean(ps)) < 0.75, ps  # uniform mean 1/2, sd 0.053: ±4.7 sd


def test_run_tests_reports_replay_as_the_tenth_test_sharing_the_level():
    from .conformance_sim import records

    c = conformance.run_tests(records(60, seed=0), SPEC, 0.05, 0, permutations=199,
                              replayed=_obs([1.0], [30.0]))
    names = [t.name for t in c.tests]
    assert names[-1] == "replay" and len(names) == len(conformance.TESTS) == 10
    assert all(math.isclose(t.level, 0.005) for t in c.tests)
    c = conformance.run_tests(records(60, seed=0), SPEC, 0.05, 0, permutations=199)
    assert c.tests[-1].skipped and not c.tests[-1].rejected
