"""Real models (CNN on digits images, MLP on all 1,797 digits) through the trainer and the games;
chunk sizes from a memory budget; device/dtype follow the data with no host synchronisation in
the step loop (counted with a TorchDispatchMode on CPU)."""

import json
from collections import Counter

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import accountants as acc
from attacks import canaries, data, dpsgd, games, models
from audit import runs

# ops that move data to the host or need its values to know a shape: one per step would stall a GPU
_SYNCS = {"_local_scalar_dense", "nonzero", "masked_select", "unique", "_unique2", "item"}


class _CountSyncs(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.counts = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in _SYNCS:
            self.counts[name] += 1
        return func(*args, **(kwargs or {}))


def _train(steps, d, model, R=3):
    spec = acc.DPSGD(1.0, acc.Poisson(0.3), steps=steps)
    return dpsgd.train(spec, model, d, clip_norm=1.0, learning_rate=0.5, n_models=R,
                       gradient_canaries=torch.ones(1, models.num_params(models.init_params(model, 1))),
                       probes=torch.ones(1, models.num_params(models.init_params(model, 1))),
                       generator=[torch.Generator().manual_seed(i) for i in range(R)])


def test_no_host_synchronisation_per_step():
    # the same number of host syncs for 2 and for 8 steps: none inside the step loop (the old
    # loop called int(...max()) and nonzero() at every step: 6 more of each at 8 steps)
    d = data.digits().subset(slice(0, 30))
    model = models.logistic_regression(64, 10)
    counts = []
    for steps in (2, 8):
        with _CountSyncs() as mode:
            _train(steps, d, model)
        counts.append(mode.counts)
    assert counts[0] == counts[1], counts


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dtype_follows_data(dtype):
    d = data.digits(dtype=dtype).subset(slice(0, 30))
    res = _train(2, d, models.logistic_regression(64, 10).to(dtype))
    assert all(v.dtype == dtype for v in res.params.values())
    assert res.observations.dtype == dtype and res.update_norms.dtype == dtype


def test_cnn_on_digits_images_in_both_games():
    d = data.digits(images=True).subset(slice(0, 40))
    model = models.small_cnn(10, channels=4)
    setup = games.Setup(acc.DPSGD(1.0, acc.Poisson(0.5), steps=3), model, d, learning_rate=0.5)
    D = models.num_params(models.init_params(model, 1))
    white = games.multi_run_game(setup, canaries.dirac([0], dim=D), n_trials=6, chunk_size=3, seed=0,
                                 progress=False)
    assert white.scores["llr"].shape == (6,) and torch.isfinite(white.scores["llr"]).all()
    black = games.multi_run_game(setup, canaries.blank(d, 1, generator=torch.Generator().manual_seed(0)),
                                 threat=games.BlackBox(), n_trials=4, chunk_size=4, seed=0, progress=False)
    assert black.scores["loss"].shape == (4,)


def test_a_model_does_not_depend_on_its_chunk():
    # model r's run is a function of its own generator: trained alone or beside others, the same
    d = data.digits(images=True).subset(slice(0, 30))
    model = models.small_cnn(10, channels=2)
    spec = acc.DPSGD(1.0, acc.Poisson(0.5), steps=2)
    both = dpsgd.train(spec, model, d, clip_norm=1.0, learning_rate=0.5, n_models=2,
                       generator=[torch.Generator().manual_seed(i) for i in (5, 6)])
    alone = dpsgd.train(spec, model, d, clip_norm=1.0, learning_rate=0.5, n_models=1,
                        generator=[torch.Generator().manual_seed(6)])
    for k in both.params:
        torch.testing.assert_close(both.params[k][1], alone.params[k][0], rtol=1e-12, atol=1e-12)


def test_memory_estimate_and_models_that_fit():
    d = data.digits()
    spec = acc.DPSGD(1.0, acc.Poisson(0.5), steps=10)
    lr = dpsgd.bytes_per_model(spec, models.logistic_regression(64, 10), d.subset(slice(0, 100)))
    mlp = dpsgd.bytes_per_model(spec, models.mlp(64, 32, 10), d, closed_form=False)
    cnn = dpsgd.bytes_per_model(spec, models.small_cnn(), d.as_images(8), closed_form=False)
    # autograd path: per-example gradients of ~900 drawn records × D parameters dominate: 3 live
    # copies of B·D doubles (B ≈ 0.5·1797 + 6 sd; D = 2,410 for the MLP) and 1.5x margin
    assert 3 * 1.5 * 8 * 900 * 2410 < mlp < 2 * 3 * 1.5 * 8 * 950 * 2410
    # closed form (attacks.ghost, the default): one copy of B·(D + A) (A = 106 activations per
    # example for this MLP), not three of each; still above the measured ~1 MB per model (docs/scale.md)
    mlp_cf = dpsgd.bytes_per_model(spec, models.mlp(64, 32, 10), d)
    assert 1.5 * 8 * 1000 * (2410 + 106) < mlp_cf < 1.5 * 8 * 1030 * (2410 + 106) + 2 * 2**20  # B ≤ 1,027
    assert mlp_cf < mlp / 2
    # a model without a closed form keeps the autograd estimate
    other = torch.nn.Sequential(torch.nn.Linear(64, 10))
    assert dpsgd.bytes_per_model(spec, other, d) == dpsgd.bytes_per_model(spec, other, d, closed_form=False)
    assert lr < cnn < mlp
    assert dpsgd.models_that_fit(10 * mlp, mlp) == 10
    assert dpsgd.models_that_fit(10 * mlp, mlp, cap=4) == 4
    assert dpsgd.models_that_fit(mlp // 2, mlp) == 1  # never 0: one model at a time at worst
    with pytest.raises(acc.InputError, match="budget_bytes"):
        dpsgd.models_that_fit(0, mlp)


MLP_ALL = """
[training]
n_records = 1797
model = "mlp"
sample_rate = 0.02
steps = 2
[audit]
trials = 6
chunk_size = 500
"""


def test_mlp_on_all_digits_chunk_follows_memory_budget(tmp_path):
    cfg = tmp_path / "mlp.toml"
    cfg.write_text(MLP_ALL)
    per = dpsgd.bytes_per_model(acc.DPSGD(1.0, acc.Poisson(0.02), steps=2), models.mlp(64, 32, 10),
                                data.digits(), m=1, probes=1)
    budget_gb = 2.5 * per / 2**30  # room for two models at once
    runs.execute(cfg, tmp_path / "run", progress=False, memory_gb=budget_gb)
    chunking = tmp_path / "run" / "audits" / "main" / runs.CHUNKING_FILE
    ch = json.loads(chunking.read_text())
    assert ch["models_at_once"] == 2 and ch["bytes_per_model_estimate"] == per
    first = json.loads((tmp_path / "run" / "result.json").read_text())["audits"][0]
    # resume keeps the partition, whatever budget is given then
    runs.execute(cfg, tmp_path / "run", resume=True, progress=False, memory_gb=100.0)
    assert json.loads(chunking.read_text()) == ch
    again = json.loads((tmp_path / "run" / "result.json").read_text())["audits"][0]
    assert again["epsilon_lower"] == first["epsilon_lower"]


def test_cnn_config_needs_square_images(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text('[training]\ndataset = "breast_cancer"\nmodel = "cnn"\n[audit]\ntrials = 4\n')
    with pytest.raises(acc.InputError, match="square one-channel images"):
        runs.execute(cfg, tmp_path / "run", progress=False)


def test_memory_estimate_with_no_natural_record(tmp_path):
    """The crafted-dataset threat model trains on canary-side records only (natural data has 0 rows):
    the memory estimate must not index a natural record. The default run's crafted fixed-size variant
    crashed with IndexError here after the chunking and worst-case changes met."""
    d = data.digits()
    empty = d.subset(slice(0, 0))
    model = models.logistic_regression(d.feature_shape[0], d.num_classes)
    spec = acc.DPSGD(1.0, acc.FixedSize(10, 101), 4)
    full = dpsgd.bytes_per_model(spec, model, d.subset(slice(0, 100)), m=1, probes=1)
    none = dpsgd.bytes_per_model(spec, model, empty, m=101, probes=1)
    assert none > 0 and none == pytest.approx(full, rel=0.05)  # same N = 101, same widths

    cfg = tmp_path / "crafted.toml"
    cfg.write_text('[training]\nsampling = "fixed_size"\nsteps = 4\n[attack]\nthreat_model = '
                   '"white_box_crafted_dataset"\n[audit]\ntrials = 20\n', encoding="utf-8")
    _, result = runs.execute(cfg, tmp_path / "run", progress=False)
    assert result.audits[0].trials == 20
