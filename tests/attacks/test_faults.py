"""Each fault in attacks/faults.py makes a white-box statistic leak more than the honest trainer,
measurably, with seeds fixed. The spec (the claim) is the same in both arms."""

import pytest
import torch

import accountants as acc
from attacks import dpsgd, models
from attacks.faults import (
    ClipNormMismatch,
    NoClipping,
    NoiseMissingFactor,
    RealisedBatchNormalisation,
    ShuffledBatches,
    describe,
    fault_from_name,
    fault_names,
)

D = 650  # logistic regression on digits: 10 × 64 + 10
QUIET = 0  # W[0, 0]: the weight on pixel 0, blank in every digit (tests/attacks/test_canaries.py)


def _runs(d, spec, fault, present_canary, *, R, norm=1.0, seed=0):
    model = models.logistic_regression(64, 10)
    c = torch.zeros(1, D, dtype=torch.float64)
    c[0, QUIET] = norm
    present = torch.ones(R, d.n + 1, dtype=torch.bool)
    present[:, -1] = present_canary
    return dpsgd.train(spec, model, d, clip_norm=1.0, learning_rate=0.5, n_models=R, present=present,
                       gradient_canaries=c, probes=c, fault=fault,
                       generator=[torch.Generator().manual_seed(seed + r) for r in range(R)])


def _auc(s_in, s_out):
    """P[score_in > score_out] (Mann–Whitney), ties count ½."""
    diff = s_in[:, None] - s_out[None, :]
    return ((diff > 0).double().mean() + 0.5 * (diff == 0).double().mean()).item()


def _mu_step(d, spec, fault, **kw):
    o_in = _runs(d, spec, fault, True, seed=0, **kw).observations.reshape(-1)
    o_out = _runs(d, spec, fault, False, seed=10_000, **kw).observations.reshape(-1)
    return ((o_in.mean() - o_out.mean()) / o_out.std()).item(), o_in.mean().item()


def test_noise_missing_factor_shrinks_noise(digits100):
    digits100 = digits100.subset(slice(0, 20))
    spec = acc.DPSGD(1.0, acc.Poisson(1.0), steps=40)  # q = 1: μ_step = 1/σ = 1 when honest
    honest, _ = _mu_step(digits100, spec, None, R=5)
    broken, _ = _mu_step(digits100, spec, NoiseMissingFactor(2.0), R=5)
    assert honest == pytest.approx(1.0, abs=0.15)  # 200 steps per arm: SE ≈ 0.07
    assert broken == pytest.approx(2.0, abs=0.3)


def test_no_clipping_keeps_large_canary(digits100):
    digits100 = digits100.subset(slice(0, 20))
    spec = acc.DPSGD(1.0, acc.Poisson(1.0), steps=40)
    _, honest_mean = _mu_step(digits100, spec, None, R=5, norm=5.0)
    _, broken_mean = _mu_step(digits100, spec, NoClipping(), R=5, norm=5.0)
    assert honest_mean == pytest.approx(1.0, abs=0.25)  # clipped to C = 1
    assert broken_mean == pytest.approx(5.0, abs=0.25)


def test_realised_batch_normalisation_leaks_batch_size(digits100):
    """Tiny dataset (opacus #571): the update norm reveals |B_t|, which is larger by one with the canary."""
    d = digits100.subset(slice(0, 4))
    spec = acc.DPSGD(1.0, acc.Poisson(0.5), steps=30)

    def auc(fault):
        s_in = -_runs(d, spec, fault, True, R=60, seed=0).update_norms.log().sum(1)
        s_out = -_runs(d, spec, fault, False, R=60, seed=10_000).update_norms.log().sum(1)
        return _auc(s_in, s_out)

    honest, broken = auc(None), auc(RealisedBatchNormalisation())
    assert honest < 0.7, honest
    assert broken > 0.9, broken


def test_shuffled_batches_remove_poisson_amplification(digits100):
    """Accounted Poisson(q = 0.1) but trained shuffled: the canary is in every epoch, never absent."""
    d = digits100.subset(slice(0, 9))
    spec = acc.DPSGD(0.3, acc.Poisson(0.1), steps=50)  # N = 10, b = 1, 10 steps per epoch

    def score(res):  # "the canary showed up in every epoch": min over epochs of the epoch's largest o_t
        return res.observations[..., 0].reshape(res.observations.shape[0], 5, 10).amax(-1).amin(-1)

    def auc(fault):
        return _auc(score(_runs(d, spec, fault, True, R=100, seed=0)),
                    score(_runs(d, spec, fault, False, R=100, seed=10_000)))

    honest, broken = auc(None), auc(ShuffledBatches())
    assert honest < 0.85, honest  # seeded: 0.749
    assert broken > 0.95, broken  # seeded: 0.986


def test_describe():
    assert [describe(f) for f in (None, NoiseMissingFactor(3), NoClipping(), RealisedBatchNormalisation(),
                                  ShuffledBatches())] == [
        "none", "noise_missing_factor(3)", "no_clipping", "realised_batch_normalisation", "shuffled_batches"]
    with pytest.raises(ValueError, match="factor"):
        NoiseMissingFactor(1.0)


def test_clip_norm_mismatch_clips_at_factor_c(digits100):
    """The fault added through the registry alone (attacks/faults.py): clipped at 3C, noise for C.

    A canary of norm 5C keeps 3C (closed form: the in-mean of o_t in units of C is min(5, 3) = 3)."""
    digits100 = digits100.subset(slice(0, 20))
    spec = acc.DPSGD(1.0, acc.Poisson(1.0), steps=40)
    _, honest_mean = _mu_step(digits100, spec, None, R=5, norm=5.0)
    _, broken_mean = _mu_step(digits100, spec, ClipNormMismatch(3.0), R=5, norm=5.0)
    assert honest_mean == pytest.approx(1.0, abs=0.25)  # 200 steps, σ = 1: SE of the mean ≈ 0.07
    assert broken_mean == pytest.approx(3.0, abs=0.25)


def test_registry_drives_names_and_config():
    from audit import config

    assert fault_names()[:4] == ["noise_missing_factor", "no_clipping", "realised_batch_normalisation",
                                 "shuffled_batches"]
    assert describe(ClipNormMismatch(3)) == "clip_norm_mismatch(3)"
    assert fault_from_name("clip_norm_mismatch", {"fault_factor": 3.0}) == ClipNormMismatch(3.0)
    assert fault_from_name("none", {}) is None
    for name in fault_names():  # every registered fault is a valid training.fault, with no other edit
        assert config.loads(f'[training]\nfault = "{name}"').training.fault == name
