"""Audit games: outcome shapes and orientation, resume after a kill gives identical outcomes,
run folders of another game are refused, black-box LiRA end to end."""

import json

import pytest
import torch

import accountants as acc
from attacks import canaries, data, games, models, threat
from attacks import membership as mia


@pytest.fixture(scope="module")
def white_setup(digits100):
    model = models.logistic_regression(64, 10)
    p0 = {k: v[0] for k, v in models.init_params(model, 1, torch.Generator().manual_seed(0)).items()}
    quiet = canaries.quiet_coordinates(model, p0, digits100, 8)
    setup = games.Setup(acc.DPSGD(1.0, acc.Poisson(0.5), steps=10), model, digits100)
    return setup, canaries.dirac(quiet, dim=650)


def _equal(a: games.AttackOutcome, b: games.AttackOutcome) -> None:
    assert a.scores.keys() == b.scores.keys()
    for k in a.scores:
        assert torch.equal(a.scores[k], b.scores[k]), k  # bit-identical, not merely close
    for f in ("truth", "trial", "canary", "seeds"):
        assert torch.equal(getattr(a, f), getattr(b, f)), f
    assert a.metadata == b.metadata


def test_multi_run_outcome(white_setup, tmp_path):
    setup, c = white_setup
    out = games.multi_run_game(setup, c.select([0]), n_trials=24, seed=5, chunk_size=8, run_dir=tmp_path,
                               progress=False)
    assert out.design is games.Design.MULTI_RUN
    assert out.threat == "white_box"
    assert set(out.scores) == {"llr", "inner_product"}
    assert out.scores["llr"].shape == (24,)
    assert out.truth.dtype == torch.bool
    assert 0 < int(out.truth.sum()) < 24
    assert out.in_scores("llr").mean() > out.out_scores("llr").mean() + 2  # higher ⇒ member
    assert out.seeds.unique().numel() == 24
    lines = (tmp_path / "trials.jsonl").read_text().splitlines()
    assert len(lines) == 24
    assert json.loads(lines[0])["trial"] == 0


def test_kill_and_resume_gives_identical_outcome(white_setup, tmp_path, monkeypatch):
    setup, c = white_setup
    kw = dict(n_trials=30, seed=11, chunk_size=8, progress=False)
    full = games.multi_run_game(setup, c.select([1]), run_dir=tmp_path / "full", **kw)

    real_train, calls = games.train, {"n": 0}

    def dies_on_third_chunk(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt  # the process is killed in the middle of the game
        return real_train(*args, **kwargs)

    monkeypatch.setattr(games, "train", dies_on_third_chunk)
    with pytest.raises(KeyboardInterrupt):
        games.multi_run_game(setup, c.select([1]), run_dir=tmp_path / "killed", **kw)
    path = tmp_path / "killed" / "trials.jsonl"
    assert len(path.read_text().splitlines()) == 16  # two chunks were finished and flushed
    with open(path, "a") as fh:  # and the kill tore the next line in half
        fh.write('{"game_id": "torn')
    monkeypatch.setattr(games, "train", real_train)
    resumed = games.multi_run_game(setup, c.select([1]), run_dir=tmp_path / "killed", **kw)
    _equal(full, resumed)
    assert len(path.read_text().splitlines()) == 30

    # losing arbitrary lines (not a chunk boundary) also resumes to the same outcome
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:5] + lines[9:20]) + "\n")
    _equal(full, games.multi_run_game(setup, c.select([1]), run_dir=tmp_path / "killed", **kw))


def test_run_folder_of_another_game_is_refused(white_setup, tmp_path):
    setup, c = white_setup
    games.multi_run_game(setup, c.select([0]), n_trials=4, seed=1, run_dir=tmp_path, progress=False)
    with pytest.raises(ValueError, match="belongs to another game"):
        games.multi_run_game(setup, c.select([0]), n_trials=4, seed=2, run_dir=tmp_path, progress=False)


def test_one_run_game(white_setup):
    setup, c = white_setup
    out = games.one_run_game(setup, c, n_runs=2, seed=3, progress=False)
    assert out.design is games.Design.ONE_RUN
    assert out.scores["llr"].shape == (16,)
    assert out.trial.tolist() == [0] * 8 + [1] * 8
    assert out.canary.tolist() == list(range(8)) * 2
    assert out.in_scores("llr").mean() > out.out_scores("llr").mean()


def test_one_run_game_honours_its_backend(white_setup):
    """Before: one_run_game accepted `backend` and ignored it (the chunks ran here, silently)."""
    from audit.backends import Local

    class Counting(Local):
        calls = 0

        def map(self, fn, context, items):
            Counting.calls += 1
            yield from super().map(fn, context, items)

    setup, c = white_setup
    here = games.one_run_game(setup, c, n_runs=2, seed=3, progress=False, chunk_size=1)
    there = games.one_run_game(setup, c, n_runs=2, seed=3, progress=False, chunk_size=1, backend=Counting())
    assert Counting.calls == 1
    _equal(here, there)


@pytest.mark.parametrize(("bad", "words"), [(b"\xff\xfe{}\n", "not UTF-8"), (b"[" * 100_000 + b"\n", "not a JSON"),
                                           (b'{"trial": ' + b"9" * 5000 + b"}\n", "not a JSON")],
                         ids=["latin", "deep", "int5000"])
def test_a_corrupted_trials_file_is_an_input_error_on_resume(white_setup, tmp_path, bad, words):
    """Before: invalid UTF-8 in trials.jsonl raised UnicodeDecodeError on resume (exit 3)."""
    setup, c = white_setup
    games.one_run_game(setup, c, n_runs=2, seed=0, run_dir=tmp_path, progress=False, chunk_size=1)
    with open(tmp_path / games.TRIALS_FILE, "ab") as fh:
        fh.write(bad)
    with pytest.raises(acc.InputError, match=f":3 is {words}"):
        games.one_run_game(setup, c, n_runs=4, seed=0, run_dir=tmp_path, progress=False, chunk_size=1)


def test_game_validation(white_setup, digits100):
    setup, c = white_setup
    with pytest.raises(ValueError, match="exactly one canary"):
        games.multi_run_game(setup, c, n_trials=2, progress=False)
    with pytest.raises(acc.UnsupportedError, match="needs a white-box view"):
        games.multi_run_game(setup, c.select([0]), threat=threat.BlackBox(), scores=[mia.LikelihoodRatio()],
                             n_trials=2, progress=False)
    mis = canaries.mislabelled(digits100, 1, generator=torch.Generator().manual_seed(0))
    with pytest.raises(acc.UnsupportedError, match="gradient canaries only"):
        games.multi_run_game(setup, mis, n_trials=2, progress=False)
    with pytest.raises(acc.UnsupportedError, match="needs input-space canaries"):
        games.multi_run_game(setup, c.select([0]), threat=threat.BlackBox(), n_trials=2, progress=False)
    fixed = games.Setup(acc.DPSGD(1.0, acc.FixedSize(10, 100), steps=2), setup.model, digits100)
    with pytest.raises(ValueError, match="dataset_size must be 101"):
        games.multi_run_game(fixed, c.select([0]), n_trials=2, progress=False)


def test_black_box_lira_game(digits100):
    model = models.logistic_regression(64, 10)
    setup = games.Setup(acc.DPSGD(0.5, acc.Poisson(0.5), steps=20), model, digits100, learning_rate=2.0)
    canary = canaries.mislabelled(data.digits().subset(slice(100, 200)), 1, generator=torch.Generator().manual_seed(0))
    scores = [mia.LossScore(), mia.ConfidenceScore(), mia.LiRA(8, online=True, fixed_variance=True),
              mia.LiRA(8, online=False)]
    out = games.multi_run_game(setup, canary, threat=threat.BlackBox(), scores=scores, n_trials=20, seed=2,
                               progress=False)
    assert set(out.scores) == {"loss", "confidence", "lira_online_fixedvar_8", "lira_offline_8"}
    for k in out.scores:  # a mislabelled canary in a weakly private run: members score higher
        assert out.in_scores(k).mean() > out.out_scores(k).mean(), k


def test_white_box_adversary_may_use_black_box_scores_on_input_canaries(digits100):
    # a white-box view contains the black-box one: same trials (seeds depend on (seed, trial) only,
    # input canaries are never probed), so bit-identical scores. It raised AttributeError (no probes
    # on input canaries) until the narrowing that mypy asked for.
    setup = games.Setup(acc.DPSGD(1.0, acc.Poisson(0.5), steps=3), models.logistic_regression(64, 10), digits100)
    canary = canaries.mislabelled(data.digits().subset(slice(100, 200)), 1, generator=torch.Generator().manual_seed(0))
    outs = [games.multi_run_game(setup, canary, threat=view, scores=[mia.LossScore()], n_trials=3, seed=4,
                                 progress=False) for view in (threat.WhiteBox(), threat.BlackBox())]
    assert torch.equal(outs[0].scores["loss"], outs[1].scores["loss"])


def test_kept_observations_reproduce_the_scores(white_setup, tmp_path):
    setup, c = white_setup
    out = games.multi_run_game(setup, c.select([2]), n_trials=12, seed=8, run_dir=tmp_path, progress=False,
                               keep_observations=True)
    assert out.observations.shape == (12, 10)
    assert out.spec is setup.spec
    # the stored per-step statistics are the ones the scores were computed from (round-trip through JSON)
    torch.testing.assert_close(mia.white_box_llr(out.observations, setup.spec, 101), out.scores["llr"],
                               atol=1e-12, rtol=0)
    torch.testing.assert_close(out.observations.sum(1), out.scores["inner_product"], atol=1e-12, rtol=0)
    again = games.multi_run_game(setup, c.select([2]), n_trials=12, seed=8, run_dir=tmp_path, progress=False,
                                 keep_observations=True)  # everything read back from trials.jsonl
    assert torch.equal(again.observations, out.observations)


_CHILD = """
import pathlib, time
import torch
torch.set_num_threads(1)  # the same thread setting as this test process: bit-identical reductions
import accountants as acc
from attacks import canaries, data, games, models
_append, written = games._append, []
def _append_then_wait(fh, record):  # after the 2nd flushed trial: say so, and wait for the SIGKILL
    _append(fh, record)
    written.append(record)
    if len(written) == 2:
        pathlib.Path({ready!r}).write_text("2")
        time.sleep(3600)
games._append = _append_then_wait
d = data.digits().subset(slice(0, 30))
setup = games.Setup(acc.DPSGD(1.0, acc.Poisson(0.5), steps=60), models.logistic_regression(64, 10), d)
games.multi_run_game(setup, canaries.dirac([0], dim=650), n_trials=16, seed=21, chunk_size=2,
                     run_dir={run_dir!r}, progress=False)
"""


def test_sigkill_midway_then_resume(tmp_path):
    """A real kill: the game runs in a child process that receives SIGKILL after two trials are on disk.

    Synchronised on a file, not on timing (issue 23 §6: polling every 5 ms lost the race on a loaded
    machine): the child writes ``ready`` after its 2nd flushed trial and waits; only then is it killed."""
    import os
    import signal
    import subprocess
    import sys
    import time

    run_dir, ready = tmp_path / "killed", tmp_path / "ready"
    child = subprocess.Popen([sys.executable, "-c", _CHILD.format(run_dir=str(run_dir), ready=str(ready))])
    try:
        while not ready.exists() and child.poll() is None:  # no deadline: the child either signals or exits
            time.sleep(0.01)
        assert ready.exists(), f"the child exited ({child.returncode}) before two trials were written"
        os.kill(child.pid, signal.SIGKILL)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
    path = run_dir / "trials.jsonl"
    assert child.returncode == -signal.SIGKILL
    assert len(path.read_bytes().splitlines()) == 2  # exactly what was flushed before the kill

    d = data.digits().subset(slice(0, 30))
    setup = games.Setup(acc.DPSGD(1.0, acc.Poisson(0.5), steps=60), models.logistic_regression(64, 10), d)
    kw = dict(n_trials=16, seed=21, chunk_size=2, progress=False)
    resumed = games.multi_run_game(setup, canaries.dirac([0], dim=650), run_dir=run_dir, **kw)
    full = games.multi_run_game(setup, canaries.dirac([0], dim=650), run_dir=tmp_path / "full", **kw)
    _equal(full, resumed)


def test_white_box_game_is_tight_at_q1(digits100):
    """q = 1, T steps: the LLR of a Dirac canary is the Gaussian privacy loss, N(±μ²/2, μ²) with
    μ = √T/σ (Dong, Roth, Su 2019, μ-GDP of the Gaussian mechanism composed T times), so the game
    realises the claimed trade-off curve exactly (closed form; 5-SE seeded tolerances)."""
    T, sigma, K = 4, 2.0, 400
    mu = T**0.5 / sigma
    setup = games.Setup(acc.DPSGD(sigma, acc.Poisson(1.0), steps=T), models.logistic_regression(64, 10),
                        digits100.subset(slice(0, 20)))
    out = games.multi_run_game(setup, canaries.dirac([0], dim=650), n_trials=K, seed=13, progress=False)
    for s, sign in ((out.in_scores("llr"), 1), (out.out_scores("llr"), -1)):
        n = s.numel()
        assert abs(s.mean().item() - sign * mu**2 / 2) < 5 * mu / n**0.5
        assert abs(s.var().item() - mu**2) < 5 * mu**2 * (2 / n) ** 0.5
