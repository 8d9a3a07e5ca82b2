"""Conformance tests of the DP-SGD premises (audit/conformance.py, attacks/conformance_record.py).

Level: on records drawn from the exact Gaussian model of a correct trainer (tests/audit/conformance_sim.py)
every test rejects at most about its level. Power: each premise break is rejected. Plumbing: a real
hand-written trainer through the plugin game.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import mpmath as mp
import numpy as np
import pytest
import torch
from scipy import stats

import accountants as acc
from attacks import conformance_record, data, plugin
from audit import cli, config, conformance, model

from .conformance_sim import probe_records, records
from .trainer_parts import linear_model

SPEC = acc.DPSGD(3.0, acc.Poisson(0.5), 10)


def _by_name(c: model.Conformance) -> dict[str, model.PremiseTest]:
    return {t.name: t for t in c.tests}


def test_kappa_closed_form_against_mpmath():
    # E[sqrt(df / chi2_df)] = sqrt(df/2) Γ((df-1)/2) / Γ(df/2): mpmath quadrature of the chi-square density
    for df in (5, 20, 29):
        def f(x, df=df):
            return mp.sqrt(df / x) * x ** (df / 2 - 1) * mp.e ** (-x / 2) / (2 ** (df / 2) * mp.gamma(df / 2))
        want = float(mp.quad(f, [0, df, mp.inf]))
        assert conformance._kappa(df) == pytest.approx(want, rel=1e-12)  # both exact; float rounding only


def test_fresh_share_follows_its_beta_law():
    # f²_t of isotropic Gaussian steps ~ Beta((m-t+1)/2, (t-1)/2): its PIT is uniform (mean 1/2, sd 1/√12)
    g = torch.Generator().manual_seed(0)
    f2 = np.array([conformance_record._fresh(torch.randn(10, 20, generator=g, dtype=torch.float64))
                   for _ in range(400)])
    pit, floor = conformance._fresh_pits(f2, 20)
    assert abs(pit.mean() - 0.5) < 4 * math.sqrt(1 / 12 / pit.size)
    assert floor.max() < 1e-40  # the chance of a step without fresh noise under H0


def test_fresh_share_is_zero_for_reused_and_missing_noise():
    v = torch.randn(20, dtype=torch.float64)
    assert max(conformance_record._fresh(torch.stack([v * (1 + t) for t in range(5)]))) < 1e-20
    steps = torch.randn(5, 20, dtype=torch.float64)
    steps[3] = 0.0
    assert conformance_record._fresh(steps)[2] == 0.0


def test_level_on_correct_trainers():
    # 30 seeded correct audits of 300 trials, each test at 0.05: P(Bin(30, 0.05) >= 6) = 0.016 per test
    rejected = {n: 0 for n in conformance.TESTS}
    for seed in range(30):
        c = conformance.run_tests(records(300, seed=seed), SPEC, 0.05 * len(conformance.TESTS), seed,
                                  permutations=199)
        for t in c.tests:
            rejected[t.name] += t.rejected
    assert max(rejected.values()) <= 5, rejected


@pytest.mark.parametrize("kw", [dict(noise=2.0), dict(contribution=0.3), dict(contribution=0.0),
                                dict(mode="record_update"), dict(contribution=0.8, bias_part=0.6)])
def test_benign_deviations_pass(kw):
    # contribution 0.8 on the weight, 0.6 on the bias: per-layer clipping with thresholds whose squares sum to C²
    c = conformance.run_tests(records(400, seed=3, **kw), SPEC, 0.01, 3)  # each test at 0.01/7
    assert not c.rejected, [(t.name, t.p_value) for t in c.tests]


@pytest.mark.parametrize(("kw", "name"), [
    (dict(reuse=True), "noise_fresh"),
    (dict(bias_noise=0.0), "noise_every_tensor"),
    (dict(contribution=2.0), "contribution"),
    (dict(noise=0.5), "contribution"),
    (dict(scale_jitter=0.1), "scale_fixed"),
    (dict(member_scale=1.3), "normalisation"),
    (dict(mask_once=True, sigma=1.0), "sampling"),
    (dict(bias_part=2.0, sigma=1.0), "total_contribution"),  # per-tensor clipping: (1, 2)·C, norm 2.2 C
    (dict(removal=2.0, sigma=1.0), "total_contribution"),  # the canary wipes the others' clipped sum
])
def test_each_premise_break_is_rejected(kw, name):
    spec = acc.DPSGD(kw.get("sigma", 3.0), acc.Poisson(0.5), 10)
    c = conformance.run_tests(records(800, seed=5, **kw), spec, 0.05, 5, permutations=199)
    t = _by_name(c)[name]
    assert t.rejected and c.rejected, (t.p_value, t.finding)


def test_total_contribution_ball_distance_closed_forms():
    # inside the ball: 0; identity covariance: (|d| - r)² (the nearest point is on the ray); a diagonal
    # covariance with d on an axis: (|d| - r)² / var along that axis
    assert conformance._ball_distance(np.array([0.3, 0.4]), np.eye(2), 0.5) == 0.0
    assert conformance._ball_distance(np.array([3.0, 4.0]), np.eye(2), 2.0) == pytest.approx(9.0, rel=1e-9)
    assert conformance._ball_distance(np.array([0.0, 5.0]), np.diag([1.0, 4.0]), 1.0) == pytest.approx(4.0, rel=1e-9)


def test_total_contribution_level_at_the_boundary():
    # the canary contributes exactly C, split over the weight and the bias (0.6² + 0.8² = 1): the null's
    # boundary; 40 seeded audits of 300 trials at level 0.05: P(Bin(40, 0.05) >= 7) = 0.014
    rejected = sum(_by_name(conformance.run_tests(records(300, seed=s, contribution=0.8, bias_part=0.6), SPEC,
                                                  0.05 * len(conformance.TESTS), s, permutations=199)
                            )["total_contribution"].rejected for s in range(40))
    assert rejected <= 6


def test_total_contribution_is_skipped_for_fixed_size_claims():
    spec = acc.DPSGD(3.0, acc.FixedSize(50, 101), 10)
    t = _by_name(conformance.run_tests(records(200, seed=1), spec, 0.05, 1, permutations=199))["total_contribution"]
    assert t.skipped and not t.rejected


def test_momentum_without_record_update_is_skipped_not_rejected():
    c = conformance.run_tests(records(600, seed=2, momentum=0.9), SPEC, 0.05, 2, permutations=199)
    t = _by_name(c)
    assert not c.rejected
    assert t["sampling"].skipped and "record_update" in t["sampling"].skipped
    assert any("state" in n for n in c.notes)


_OPTIMIZERS = {  # torch.optim on the privatised gradient (post-processing), each with state
    "adam": lambda ps: torch.optim.Adam(ps, lr=0.05),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=0.05, weight_decay=0.01),
    "rmsprop": lambda ps: torch.optim.RMSprop(ps, lr=0.01),
    "nesterov": lambda ps: torch.optim.SGD(ps, lr=0.5, momentum=0.9, nesterov=True, weight_decay=5e-4),
}


def _trainer(noise_scale: float, rescale: bool = False, adam: str | None = None, optimizer: str = "adam"):
    """The hand-written DP-SGD (4 steps); ``adam``: torch.optim's ``optimizer`` (_OPTIMIZERS) on the privatised
    gradient, "record" calling audit.record_update with it, "norecord" not."""
    def train(x, y, *, seed, audit=None):
        g = torch.Generator().manual_seed(seed)
        w, b = torch.zeros(10, x.shape[1]), torch.zeros(10)
        opt = None
        if adam is not None:
            w, b = w.requires_grad_(), b.requires_grad_()
            opt = _OPTIMIZERS[optimizer]([w, b])
        if audit is not None:
            audit.record([w, b])
        for _ in range(4):
            mask = torch.rand(x.shape[0], generator=g) < 0.5
            with torch.no_grad():
                r = torch.softmax(x[mask] @ w.T + b, 1) - torch.nn.functional.one_hot(y[mask], 10).float()
            grads = [r[:, :, None] * x[mask][:, None, :], r]
            f = torch.clamp(1.0 / (torch.cat([gi.flatten(1) for gi in grads], 1).norm(dim=1) + 1e-12), max=1.0)
            sums = [(gi * f.view(-1, *[1] * (gi.ndim - 1))).sum(0) for gi in grads]
            if rescale:  # the bug mean_times_batch: the clipped sum averaged over |B_t|, then multiplied by B = 50
                sums = [s_ * 50 / max(int(mask.sum()), 1) for s_ in sums]
            noisy = [s + noise_scale * 3.0 * torch.randn(s.shape, generator=g) for s in sums]
            if opt is None:
                w, b = w - 0.5 * noisy[0] / 50, b - 0.5 * noisy[1] / 50
            else:  # the optimizer on the privatised gradient: post-processing
                if audit is not None and adam == "record":
                    audit.record_update(noisy)
                w.grad, b.grad = noisy[0] / 50, noisy[1] / 50
                opt.step()
            if audit is not None:
                audit.record([w, b])
        return linear_model(w, b)
    return train


def _game(noise_scale: float, n: int, *, rescale: bool = False, n_records: int = 100, adam: str | None = None,
          optimizer: str = "adam"):
    d = data.digits().subset(slice(0, n_records))
    can = conformance_record.dead_feature(d, 1, value=10.0, generator=torch.Generator().manual_seed(0))
    ctx = plugin.Context(_trainer(noise_scale, rescale, adam, optimizer), d, can, 0, "inner_product", None,
                         acc.DPSGD(3.0, acc.Poisson(0.5), 4), "white_box", 1.0)
    return plugin.multi_run_game(ctx, n_trials=n, progress=False)


def test_real_trainer_records_and_verdicts():
    out = _game(1.0, 40)
    recs = out.metadata["conformance"]
    r = recs[0]
    # digits' first 100 records: features 0, 32, 39 are 0 everywhere; the canary sits on feature 0
    assert (r["k"], r["df"], r["mode"], len(r["y"]), len(r["f2"])) == (10, 20, "parameters", 4, 3)
    assert set(r["tensors"]) == {"weight", "bias"} and r["tensors"]["weight"]["n"] == 610
    assert len(r["p1"]) == 3  # step 1 on the canary's weight and bias gradients and the others' summed gradient
    # the canary's weight gradient lies on its dead column K alone, so the first direction is K's: p1[0] = y_1
    assert all(rec["p1"][0] == pytest.approx(rec["y"][0], rel=1e-9, abs=1e-12) for rec in recs)
    spec = acc.DPSGD(3.0, acc.Poisson(0.5), 4)
    assert not conformance.run_tests(recs, spec, 0.05, 0, permutations=199).rejected
    bad = conformance.run_tests(_game(1 / 50, 40).metadata["conformance"], spec, 0.05, 0, permutations=199)
    assert _by_name(bad)["contribution"].rejected  # noise 50x too small: the canary moves the update by ~50 C


def test_the_audits_smaller_dataset_shows_a_realised_batch_rescaling():
    # mean_times_batch (the clipped sum over |B_t|, times B = 50, then the noise): with the audit's 40 records
    # (conformance.natural_records at q = 0.5) |B_t| is about 21, so the canary moves the update by about 2.4 C
    n = conformance.natural_records(100, "poisson", 0.5)
    assert n == 40
    spec = acc.DPSGD(3.0, acc.Poisson(0.5), 4)
    bad = conformance.run_tests(_game(1.0, 200, rescale=True, n_records=n).metadata["conformance"], spec, 0.05, 0,
                                permutations=199)
    t = _by_name(bad)["contribution"]
    assert t.rejected, (t.p_value, t.finding)
    ok = conformance.run_tests(_game(1.0, 60, n_records=n).metadata["conformance"], spec, 0.05, 0, permutations=199)
    assert not ok.rejected, [(t.name, t.p_value) for t in ok.tests]


def test_dead_feature_needs_two_dead_features():
    d = data.digits().subset(slice(0, 100))
    shifted = dataclasses.replace(d, x=d.x + 1.0)  # no feature is 0 everywhere any more
    with pytest.raises(acc.InputError, match="at least two features"):
        conformance_record.dead_feature(shifted, 1)


def test_conformance_round_trips_through_result_json():
    c = conformance.run_tests(records(100, seed=0), SPEC, 0.05, 0, permutations=199)
    assert model.from_dict(model.Conformance, model.to_dict(c)) == c


EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "own_training"


def test_white_box_default_adds_the_conformance_audit():
    c = config.loads('[training]\ntrainer = "torch_trainer:train"\n', base_dir=EXAMPLES)
    assert [v.name for v in c.variants] == ["main", "mean_image", "conformance"]
    assert [v.canary.kind for v in config.variants(c)] == ["blank", "mean_image", "dead_feature"]


def test_natural_records_never_exceeds_the_data_and_keeps_non_poisson_claims():
    for n in (1, 2, 5, 40, 100, 10_000):
        for rate in (1e-6, 0.01, 0.2, 0.5, 1.0):
            k = conformance.natural_records(n, "poisson", rate)
            assert 1 <= k <= n and (k == n or k >= min(n, 20 / rate))  # about 20 expected natural records per batch
        assert conformance.natural_records(n, "fixed_wor", 0.5) == n
        assert conformance.natural_records(n, "shuffle", 0.5) == n


@pytest.mark.parametrize(("text", "n"), [
    ("sample_rate = 0.5\n", 40),  # ceil(20 / 0.5): batches of about 20 natural records
    ("sample_rate = 0.1\n", 100),  # ceil(20 / 0.1) = 200 > the 100 records given: all kept
    ("sampling = \"fixed_wor\"\nbatch_size = 50\n", 100),  # a fixed-size claim names its dataset size
])
def test_conformance_audit_chooses_a_smaller_dataset_under_poisson(text, n):
    c = config.loads('[training]\ntrainer = "torch_trainer:train"\n' + text, base_dir=EXAMPLES)
    sizes = {v.name: v.training.n_records for v in config.variants(c)}
    assert sizes == {"main": 100, "mean_image": 100, "conformance": n}


def _check(tmp_path, trainer: str) -> tuple[int, str]:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[training]\ntrainer = "{trainer}"\ntrainer_dir = "{EXAMPLES.as_posix()}"\nnoise_multiplier = 3.0\n'
                   'sample_rate = 0.5\nsteps = 10\n[audit]\ntrials = 40\n[claim]\ndelta = 1e-5\n')
    junit = tmp_path / "j.xml"
    rc = cli.main(["check", str(cfg), "--junit", str(junit), "--out", str(tmp_path / "run")])
    return rc, junit.read_text()


def test_check_fails_the_build_on_a_noise_bug_through_the_conformance_tests(tmp_path, capsys):
    # torch_trainer_buggy.py: noise sigma*C/B on the sum (B = 50): the canary moves the update by ~50 C
    rc, xml = _check(tmp_path, "torch_trainer_buggy:train")
    out = capsys.readouterr().out
    assert rc == 1
    assert 'name="conformance.contribution.contribution"><failure' in xml.replace(' time="0"', "")
    assert "contribution/contribution: REJECTED" in out


def test_check_passes_the_correct_trainer_with_one_junit_case_per_premise_test(tmp_path):
    rc, xml = _check(tmp_path, "torch_trainer:train")
    assert rc == 0
    assert xml.count('classname="dpaudit.check.conformance"') == len(conformance.TESTS)
    assert "<failure" not in xml


def test_record_update_must_be_called_once_per_step():
    trace = [torch.zeros(650, dtype=torch.float64) for _ in range(4)]
    with pytest.raises(acc.InputError, match="once per step: 2 calls for 3 steps"):
        conformance_record._updates(trace, [[torch.zeros(10, 64), torch.zeros(10)]] * 2, 650)
    u, mode = conformance_record._updates(trace, [[torch.ones(10, 64), torch.ones(10)]] * 3, 650)
    assert mode == "record_update" and u.shape == (3, 650) and float(u.sum()) == 3 * 650
    u, mode = conformance_record._updates(trace, [], 650)
    assert mode == "parameters" and float(u.abs().sum()) == 0.0


def test_inclusion_rate_of_every_sampling():
    """The claimed per-step inclusion probability: q (Poisson), b/n (fixed size, shuffle), k/t (random
    allocation: a record is in k of every t steps). mypy found the random-allocation case reading
    batch_size (an AttributeError before). Exact: each is one float division."""
    for sampling, rate in [(acc.Poisson(0.25), 0.25), (acc.FixedSize(3, 12), 0.25), (acc.Shuffle(3, 12), 0.25),
                           (acc.RandomAllocation(2, 5), 0.4)]:
        assert conformance.inclusion_rate(acc.DPSGD(1.0, sampling, 10)) == rate


def test_scale_fixed_is_exact_where_a_normal_reference_is_not():
    # 2,000 seeded audits of exact-null records (log ss = log chi2_20, 50 trials, 1 step: the one-step mode of a
    # stateful optimizer) at level 0.01. The Monte Carlo null is exact: P(Bin(2000, 0.01) >= 34) = 0.001.
    # The normal reference for z (the test before this fix) rejects about 2 % (41 on these seeds; the exact test 21).
    rng = np.random.default_rng(7)
    new = old = 0
    for i in range(2000):
        t = conformance._scale_fixed({"ss": rng.chisquare(20, size=(50, 1)), "df": 20}, np.arange(1), 0.01,
                                     np.random.default_rng(i), 199)
        new += t.p_value <= 0.01
        old += float(stats.norm.sf(t.statistic)) <= 0.01
    assert new <= 33, (new, old)
    assert old > new  # the skewed sample variance of log chi2 puts more than 1 % of z beyond the normal quantile


# ------------------------------------------------------------------- the probe (canary_effect, third round)

def _effect(recs: list[dict], sigma: float = 3.0, level: float = 0.05) -> model.PremiseTest:
    return conformance._canary_effect(recs, np.arange(len(recs[0]["ss"])), sigma, level, None)


def test_canary_effect_rejects_a_probe_that_moves_the_update_by_2c():
    # the clip_sum shape: the probe flips the clipped sum from +C·S_hat to -C·S_hat (2 C along its direction);
    # and the per_layer_clip shape: C in each of two tensors (sqrt(2)·C)
    # (the probe's own direction, as measured on digits: -0.99, -0.12)
    # and a clipped sum rescaled by B/|B_t| ~ 2.9 (mean_times_batch): more than a clipped sum allows
    for eff, cause in (((-1.96, -0.4), "bounds the sum"), ((-1.0, -1.0), "each tensor is clipped"),
                       ((-2.9, -0.35), "more than even a clipped sum allows")):
        t = _effect(probe_records(400, seed=11, eff=eff, direction=(-0.99, -0.12)))
        assert t.rejected and cause in t.finding, (t.p_value, t.finding)


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_canary_effect_level_at_the_boundary(momentum):
    # the probe contributes exactly C (a correct joint clipping: the null's boundary), 100 seeded audits of 200
    # trials x 10 steps at level 0.1. With k = 2 directions the chi2_2 reference is conservative at the boundary
    # (only the radial excess counts): about 1-2 % expected; P(Bin(100, 0.1) >= 19) = 0.004 bounds a test at
    # its level. Momentum 0.9 (history carried in p and in the noise on R) only shrinks Z.
    ps = [_effect(probe_records(200, seed=s, eff=(-0.8, -0.6), momentum=momentum), level=0.1).p_value
          for s in range(100)]
    assert sum(p <= 0.1 for p in ps) <= 18, sorted(ps)[:20]


def test_canary_effect_is_about_exact_in_one_direction():
    # k = 1 at the boundary: the distance to the ball is (d - r)^2/var beyond r, so P(reject) = level/2 by the
    # CLT: 200 audits at level 0.2 expect 20 (binomial sd 4.2); 8..34 is about 3 sd either side
    k = sum(_effect(probe_records(200, seed=s, eff=(-1.0,)), level=0.2).rejected for s in range(200))
    assert 8 <= k <= 34, k


def test_canary_effect_is_skipped_without_probe_records_or_poisson():
    t = _by_name(conformance.run_tests(records(100, seed=0), SPEC, 0.05, 0, permutations=199))["canary_effect"]
    assert t.skipped and not t.rejected
    spec = acc.DPSGD(3.0, acc.FixedSize(50, 101), 10)
    t = _by_name(conformance.run_tests(records(100, seed=0), spec, 0.05, 0,
                                       permutations=199))["canary_effect"]
    assert t.skipped and "Poisson" in t.skipped and not t.rejected


def _hook_trainer(bug: str = "", steps: int = 4):
    """Hand-written DP-SGD (softmax regression, C = 1, sigma = 1, q = 0.5, B = 50) that calls the gradient hook."""
    def train(x, y, *, seed, audit=None):
        g = torch.Generator().manual_seed(seed)
        w, b = torch.zeros(10, x.shape[1]), torch.zeros(10)
        if audit is not None:
            audit.record([w, b])
        for _ in range(steps):
            mask = torch.rand(x.shape[0], generator=g) < 0.5
            r = torch.softmax(x[mask] @ w.T + b, 1) - torch.nn.functional.one_hot(y[mask], 10).float()
            grads = [r[:, :, None] * x[mask][:, None, :], r]
            if audit is not None:
                c = audit.canary_gradients([w.T, b] if bug == "transposed" else [w, b])
                if c is not None:
                    grads = [torch.cat([gi, ci]) for gi, ci in zip(grads, c, strict=True)]
            flat = torch.cat([gi.flatten(1) for gi in grads], 1)
            if bug == "clip_sum":
                s = flat.sum(0) * min(1.0, 1.0 / (float(flat.sum(0).norm()) + 1e-12))
                sums = [s[:w.numel()].view_as(w), s[w.numel():]]
            else:
                f = torch.clamp(1.0 / (flat.norm(dim=1) + 1e-12), max=1.0)
                sums = [(gi * f.view(-1, *[1] * (gi.ndim - 1))).sum(0) for gi in grads]
            noisy = [s + 1.0 * torch.randn(s.shape, generator=g) for s in sums]
            w, b = w - 0.5 * noisy[0] / 50, b - 0.5 * noisy[1] / 50
            if audit is not None:
                audit.record([w, b])
        return linear_model(w, b)
    return train


SPEC1 = acc.DPSGD(1.0, acc.Poisson(0.5), 4)  # _hook_trainer's claim


def _hook_game(trainer, n: int, seed: int = 0):
    d = data.digits().subset(slice(0, 40))
    can = conformance_record.dead_feature(d, 1, value=10.0, generator=torch.Generator().manual_seed(0))
    ctx = plugin.Context(trainer, d, can, seed, "inner_product", None, SPEC1, "white_box", 1.0)
    return plugin.multi_run_game(ctx, n_trials=n, progress=False).metadata["conformance"]


def test_probe_coins_are_fair_and_the_trainers_randomness_does_not_touch_them():
    recs = _hook_game(_hook_trainer(), 60)
    coins = np.array([r["probe"]["s"] for r in recs])
    # 240 fair coins: mean 1/2 with sd 0.032; 0.35..0.65 is 4.6 sd either side
    assert coins.shape == (60, 4) and 0.35 < coins.mean() < 0.65
    assert all(len(p) == 2 for r in recs for p in r["probe"]["p"])  # weight and bias directions at every step
    # the same game with a trainer that draws differently (no clipping of the sum, other masks: clip_sum) gets
    # the same coins: they come from dpaudit's own stream of each trial, never the trainer's
    other = _hook_game(_hook_trainer("clip_sum", steps=4), 60)
    assert [r["probe"]["s"] for r in other] == [r["probe"]["s"] for r in recs]
    # and they are those of the trial's probe stream (plugin._STREAM_PROBE), coin = U < 1/2 at each call
    from attacks.games import trial_seed
    g = torch.Generator().manual_seed(trial_seed(0, 5, plugin._STREAM_PROBE))
    assert recs[5]["probe"]["s"] == [bool(torch.rand((), generator=g, dtype=torch.float64) < 0.5) for _ in range(4)]


def test_probe_catches_a_clipped_sum_and_passes_the_correct_trainer():
    spec = SPEC1
    bad = _by_name(conformance.run_tests(_hook_game(_hook_trainer("clip_sum"), 150), spec, 0.05, 0,
                                         permutations=199))["canary_effect"]
    assert bad.rejected and "bounds the sum" in bad.finding, (bad.p_value, bad.finding)
    ok = _by_name(conformance.run_tests(_hook_game(_hook_trainer(), 150), spec, 0.05, 0,
                                        permutations=199))["canary_effect"]
    assert ok.skipped is None and not ok.rejected, (ok.p_value, ok.finding)


def test_probe_is_skipped_on_a_shape_mismatch_and_without_the_hook():
    recs = _hook_game(_hook_trainer("transposed"), 12)
    assert "shapes" in recs[0]["probe"]["skip"] and not any(recs[0]["probe"]["s"])
    spec = SPEC1
    t = _by_name(conformance.run_tests(recs, spec, 0.05, 0, permutations=199))["canary_effect"]
    assert t.skipped and "shapes" in t.skipped and not t.rejected
    never = _game(1.0, 12).metadata["conformance"]  # _trainer never calls audit.canary_gradient(s)
    t = _by_name(conformance.run_tests(never, spec, 0.05, 0, permutations=199))["canary_effect"]
    assert t.skipped and "never calls" in t.skipped and not t.rejected


@pytest.mark.parametrize("optimizer", ["adam", "adamw", "rmsprop", "nesterov"])
@pytest.mark.parametrize("adam", ["norecord", "record"])
def test_stateful_optimizer_passes_gated_without_record_update(adam, optimizer):
    # torch.optim's optimizers with state on the privatised gradient (privacy-neutral post-processing), 60 trials of
    # 4 steps: without audit.record_update the fresh-noise gate sees a first-moment state (Adam, AdamW, Nesterov
    # momentum) and the tests read step 1 only (the sampling test skipped); RMSprop carries no first moment, so that
    # gate misses it, and the non-linear step-1 gate (a sign per coordinate) does the same. With record_update they
    # read the noisy sums. docs/fault-detection.md, "Optimizers beyond Adam".
    recs = _game(1.0, 60, adam=adam, optimizer=optimizer).metadata["conformance"]
    c = conformance.run_tests(recs, acc.DPSGD(3.0, acc.Poisson(0.5), 4), 0.05, 0, permutations=199)
    t = _by_name(c)
    assert not c.rejected
    if adam == "norecord":
        assert recs[0]["mode"] == "parameters"
        assert t["sampling"].skipped and "record_update" in t["sampling"].skipped
        stateless = optimizer == "rmsprop"
        assert any("carry state" in n for n in c.notes) != stateless
        if stateless:  # read at step 1 only, as under the state gate, for the non-linear step 1
            assert "varies less than Gaussian noise" in t["sampling"].skipped
        assert t["batch_law"].skipped and "record_update" in t["batch_law"].skipped
    else:
        assert recs[0]["mode"] == "record_update" and t["sampling"].skipped is None
        assert not any("carry state" in n for n in c.notes)


@pytest.mark.parametrize("eps", [1e-8, 0.1, 1.0, 10.0])
@pytest.mark.parametrize("offset", [0.0, 0.7, -2.5])
def test_adams_first_step_moves_no_more_than_the_linear_map(eps, offset):
    # Adam's step 1 from zero state is lr·f(g) per coordinate, f(x) = x/(|x| + eps) (sign-like for small eps). Its
    # mean shift per unit of a record's contribution a, against Gaussian noise N(0, s²), is at most the linear map's
    # in the units of f's own noise: E f(b + a + N) - E f(b + N) <= |a|·sqrt(E f(N)²)/s for any offset b (the other
    # records), because f' is even and decreasing in |x| (so E f'(b + N) <= E f'(N), Anderson), and E f'(N) =
    # E[N f(N)]/s² <= sqrt(E f(N)²)/s (Stein's lemma, then Cauchy-Schwarz). So the step-1 tests' nulls (shift <= C
    # against noise sigma·C in the units of R's noise) hold. Oracle: scipy quad (abs. error ~1e-10; margin 1e-7).
    from scipy import integrate

    s = 3.0

    def mean_f(m: float, sq: bool = False) -> float:
        def h(x: float) -> float:
            v = x / (abs(x) + eps)
            return (v * v if sq else v) * stats.norm.pdf(x, m, s)
        lo, hi = m - 12 * s, m + 12 * s  # split at f's kink, x = 0
        return sum(integrate.quad(h, u, v, limit=400, epsabs=1e-10)[0] for u, v in ((lo, 0.0), (0.0, hi)) if u < v)

    rms = math.sqrt(mean_f(0.0, sq=True))
    for a in (0.1, 1.0, 3.0):
        shift = mean_f(offset + a) - mean_f(offset)
        assert 0 <= shift <= a * rms / s + 1e-7
    if eps == 1e-8 and offset == 0.0:  # sign-like: the bound's slope sqrt(2/pi) ≈ 0.80 of the linear one is attained
        assert (mean_f(1e-3) - mean_f(0.0)) / (1e-3 * rms / s) == pytest.approx(math.sqrt(2 / math.pi), rel=1e-3)


def test_nonlinear_step1_gate_fires_on_a_sign_like_first_step_only():
    # _nonlinear: a linear image of Gaussian noise has var(log ss_1) ≈ psi'(|R|/2) (fires at z < -4: P ≈ 3e-5 per
    # audit); a sign-like step 1 (Adam without record_update) has ss_1 = lr²|R|
    # in every trial; any detected state also distrusts step 1 (Adam with a larger eps).
    fired = 0
    for seed in range(8):
        a = conformance._arrays(records(200, seed=seed))
        fired += conformance._nonlinear(a, None) is not None
    assert fired == 0
    recs = records(200, seed=1)
    for i, r in enumerate(recs):
        r["ss"] = [20.0 * (1 + 1e-3 * ((i % 7) - 3)), *r["ss"][1:]]  # |R| = 20 signs, a little round-off
    why = conformance._nonlinear(conformance._arrays(recs), None)
    assert why is not None and "record_update" in why
    c = _by_name(conformance.run_tests(recs, SPEC, 0.05, 1, permutations=199))
    assert c["batch_law"].skipped == why and not c["batch_law"].rejected
    # the gate reads the trainer as adaptive (RMSprop, Adam with beta1 = 0: no state the fresh-noise gate sees), as
    # the state gate would: the sampling test skipped, the others at step 1 only
    assert c["sampling"].skipped == why
    step1 = conformance._contribution(conformance._arrays(recs), np.array([0]), 0.5, 3.0, 0.005)
    assert c["contribution"].statistic == step1.statistic
    # a soft sign, Adam's step 1 with eps = the noise std (f(z) = z/(|z| + 1) per coordinate): var(log ss_1) ≈ 0.031
    # against psi'(10) ≈ 0.105 (numpy simulation, 2e5 draws), so 200 trials put it ≈ 6.7 standard errors below
    z = np.random.default_rng(3).standard_normal((200, 20))
    for r, zi in zip(recs, z, strict=True):
        r["ss"] = [float(((zi / (np.abs(zi) + 1.0)) ** 2).sum()), *r["ss"][1:]]
    assert conformance._nonlinear(conformance._arrays(recs), None) is not None
    assert conformance._nonlinear(conformance._arrays(records(200, seed=1)), "state") is not None
    upd = conformance._arrays(records(200, seed=1, mode="record_update"))
    assert conformance._nonlinear(upd, None) is None  # the recorded noisy sums are read, not θ-differences
