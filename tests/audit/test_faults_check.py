"""The white-box update-norm score (attacks.membership.UpdateNorm) and the fault it exists for:
`dpaudit check` catches RealisedBatchNormalisation (exit 1, naming the violation) at a budget where
the correct trainer passes (exit 0). The other three faults are caught in test_cli_run.py."""

import json
from pathlib import Path

import pytest
import torch

import accountants as acc
from attacks import canaries, data, dpsgd, games, models
from attacks import membership as mia
from attacks.faults import RealisedBatchNormalisation
from attacks.threat import WhiteBox
from audit import config
from audit.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "faulty_normalisation.toml"
D = 650  # logistic regression on digits: 10 × 64 + 10
QUIET = 0  # W[0, 0]: the weight on pixel 0, blank in every digit (tests/attacks/test_canaries.py)


def _train(fault, canary_in: bool, *, R=4, probes=None, record_updates=False):
    d = data.digits().subset(slice(0, 3))
    spec = acc.DPSGD(2.0, acc.Poisson(0.5), steps=6)
    c = torch.zeros(1, D, dtype=torch.float64)
    c[0, QUIET] = 1.0
    present = torch.ones(R, d.n + 1, dtype=torch.bool)
    present[:, -1] = canary_in
    return dpsgd.train(spec, models.logistic_regression(64, 10), d, clip_norm=1.0, learning_rate=0.5, n_models=R,
                       present=present, gradient_canaries=c, probes=c if probes is None else probes, fault=fault,
                       record_updates=record_updates,
                       generator=[torch.Generator().manual_seed(r) for r in range(R)])


def _score(res, probes):
    return mia.update_norm_score(res.update_norms, res.observations, probes)


def test_update_norm_is_null_for_the_correct_trainer_and_not_for_the_fault():
    """Same seeds in and out: the same batches of natural records and the same noise. With the public
    normaliser the projected update is then identical whether the canary is in or out (a quiet
    coordinate moves no other gradient), so the score carries no signal at all; with the realised
    normaliser it rises whenever the canary was drawn (|B_t| larger by one)."""
    c = torch.zeros(1, D, dtype=torch.float64)
    c[0, QUIET] = 1.0
    honest_in, honest_out = _score(_train(None, True), c), _score(_train(None, False), c)
    torch.testing.assert_close(honest_in, honest_out, rtol=0, atol=1e-12)  # float64 round-off only
    broken_in = _score(_train(RealisedBatchNormalisation(), True), c)
    broken_out = _score(_train(RealisedBatchNormalisation(), False), c)
    # seeded: the canary is drawn in some of the 6 steps of every run (P[never] = 1/64), each draw
    # shrinks the scale by |B|/(|B|+1) ≤ 3/4, so −log ‖·‖ rises by ≥ log(4/3) = 0.29 per draw
    assert bool((broken_in - broken_out > 0.25).all()), broken_in - broken_out


def test_update_norm_projection_against_the_recorded_updates():
    """‖Π⊥ u_t‖ from (‖u_t‖, projections, Gram matrix) equals a QR projection of the recorded u_t,
    also for non-orthogonal probes (oracle: torch.linalg.qr on the updates themselves)."""
    g = torch.Generator().manual_seed(5)
    probes = torch.randn(2, D, generator=g, dtype=torch.float64)
    probes[1] += 3 * probes[0]  # far from orthogonal
    res = _train(None, True, R=2, probes=probes, record_updates=True)
    Q, _ = torch.linalg.qr(probes.T)  # (D, 2) orthonormal basis of the probes
    u = res.updates * (res.expected_batch_size / 1.0)  # units of C (C = 1)
    perp = u - (u @ Q) @ Q.T
    want = -torch.log(perp.norm(dim=-1)).sum(-1)
    torch.testing.assert_close(_score(res, probes), want, rtol=1e-10, atol=0)
    with pytest.raises(ValueError, match="projections must have shape"):
        mia.update_norm_score(res.update_norms, res.observations, probes[:1])


def test_update_norm_is_a_typed_white_box_variant():
    s = mia.score_from_name("update_norm")
    assert s == mia.UpdateNorm() and mia.score_name(s) == "update_norm" and mia.needs(s) == WhiteBox()
    cfg = config.loads('[attack]\nscore = "update_norm"')
    assert cfg.attack.score == "update_norm"
    with pytest.raises(ValueError, match=r"attack.score must be one of \['inner_product', 'llr', 'update_norm'\]"):
        config.loads('[attack]\nscore = "loss"')  # white box (the default threat model)
    with pytest.raises(ValueError, match=r"one of \['confidence', 'lira', 'loss'\] .*got 'update_norm'"):
        config.loads('[canary]\nkind = "blank"\n[attack]\nthreat_model = "black_box"\nscore = "update_norm"')
    with pytest.raises(ValueError, match="update_norm"):  # the allowed values are named
        config.loads('[attack]\nscore = "norm"')


def test_game_records_update_norm_and_resumes(tmp_path, monkeypatch):
    """A new score is one more key of "scores" in trials.jsonl (old files keep theirs); a second call
    with the same run folder trains nothing and returns the same outcome."""
    d = data.digits().subset(slice(0, 10))
    model = models.logistic_regression(64, 10)
    p0 = {k: v[0] for k, v in models.init_params(model, 1, torch.Generator().manual_seed(0)).items()}
    c = canaries.dirac(canaries.quiet_coordinates(model, p0, d, 1), dim=D)
    setup = games.Setup(acc.DPSGD(1.0, acc.Poisson(0.5), steps=3), model, d)
    scores = [mia.LikelihoodRatio(), mia.UpdateNorm()]
    a = games.multi_run_game(setup, c, scores=scores, n_trials=6, seed=2, run_dir=tmp_path, chunk_size=3,
                             progress=False)
    line = json.loads((tmp_path / games.TRIALS_FILE).read_text().splitlines()[0])
    assert sorted(line["scores"]) == ["llr", "update_norm"] and len(line["scores"]["update_norm"]) == 1

    def no_training(*args, **kwargs):
        raise AssertionError("resume must not train again")

    monkeypatch.setattr(games, "train", no_training)
    b = games.multi_run_game(setup, c, scores=scores, n_trials=6, seed=2, run_dir=tmp_path, chunk_size=3,
                             progress=False)
    for k in ("llr", "update_norm"):
        assert torch.equal(a.scores[k], b.scores[k])


def test_check_catches_realised_batch_normalisation_where_correct_passes(tmp_path, capsys):
    """examples/faulty_normalisation.toml: exit 1 naming the violation; the same file with the correct
    trainer: exit 0. Seeded, so deterministic (measured: ε_lower 1.619 faulty, 0.000 correct, against
    the claim ε = 0.749 of the PLD accountant)."""
    junit = tmp_path / "faulty.xml"
    assert main(["check", str(EXAMPLE), "--junit", str(junit), "--out", str(tmp_path / "faulty")]) == 1
    err = capsys.readouterr().err
    assert "VIOLATION of claim" in err and "bug or broken DP" in err
    assert "<failure" in junit.read_text()
    honest = tmp_path / "honest.toml"
    text = EXAMPLE.read_text()
    assert 'fault = "realised_batch_normalisation"' in text
    honest.write_text(text.replace('fault = "realised_batch_normalisation"', 'fault = "none"'))
    assert main(["check", str(honest), "--out", str(tmp_path / "honest")]) == 0
    assert "holds" in capsys.readouterr().out
