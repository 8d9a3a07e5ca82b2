"""Issue 12 §3: registries drive the audit. A new score, fault or accounting method is one registered
definition (plus its test); the config's allowed values, `--help`, the games, the curves and the CLI follow."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

import accountants as acc
import accountants.api as api
from attacks import faults, games
from attacks import membership as mia
from attacks.threat import WhiteBox
from audit import comparator, config, registry, runs, statistics
from audit.cli import build_parser, main


@dataclass(frozen=True, slots=True)
class LastStep:
    """White box: the last update's projection o_T alone (a weak score, for this test)."""

    def compute(self, view: mia.ScoreView):
        return view.observations[..., -1]


@pytest.fixture
def last_step_registered():
    mia.register_score("last_step", LastStep, threat=WhiteBox(), canary="gradient")
    yield
    del mia.SCORE_INFO["last_step"], mia.SCORES["last_step"]


def test_a_new_score_is_one_registered_definition(last_step_registered, tmp_path, capsys):
    cfg = config.loads('[attack]\nscore = "last_step"\n[training]\nn_records = 20\nsteps = 3\n'
                       "[audit]\ntrials = 6\nchunk_size = 6")
    assert "last_step" in registry.score_names("white_box") and "last_step" not in registry.score_names("black_box")
    with pytest.raises(config.InputError, match=r"attack\.score must be one of"):  # its threat model is checked
        config.loads('[attack]\nscore = "last_step"\nthreat_model = "black_box"\n[canary]\nkind = "blank"')
    v = config.variants(cfg)[0]
    setup, c, threat, scores = runs.build(v)
    out = games.multi_run_game(setup, c, threat=threat, scores=scores, n_trials=6, chunk_size=6, seed=0,
                               progress=False)
    assert set(out.scores) == {"last_step"} and out.scores["last_step"].shape == (6,)
    parser, _ = build_parser()
    run_help = parser._subparsers._group_actions[0].choices["run"].format_help()
    assert "last_step" in run_help


@pytest.mark.parametrize("name", registry.fault_names())
def test_every_registered_fault_is_a_config_choice_and_builds(name):
    cfg = config.loads(f'[training]\nfault = "{name}"\nn_records = 20')
    setup = runs.build(config.variants(cfg)[0])[0]
    assert faults.describe(setup.fault).split("(")[0] == name


@pytest.mark.parametrize("name", sorted(registry.strategies()))
def test_every_strategy_is_a_config_choice(name):
    assert config.loads(f'[audit]\nthreshold = "{name}"').audit.threshold == name
    built = runs._strategy(name, 0)  # the registered builder gives that strategy, named as registered
    assert isinstance(built, statistics.STRATEGIES[name]) and statistics.strategy_name(built).split("(")[0] == name


def test_register_twice_is_refused():
    with pytest.raises(acc.InputError, match="already registered"):
        mia.register_score("llr", mia.LikelihoodRatio, threat=WhiteBox(), canary="gradient")
    with pytest.raises(acc.InputError, match="already registered"):
        faults.register_fault("no_clipping")(faults.NoClipping)


class _Scaled:
    """A sound but loose method: the RDP ε times 1.5 (δ(ε) from RDP at ε / 1.5 is not needed here)."""

    name = "scaled_rdp"

    def unsupported(self, spec):
        return api.get_method("rdp").unsupported(spec)

    def epsilon(self, spec, delta):
        e = api.get_method("rdp").epsilon(spec, delta)
        return acc.EpsilonBound(1.5 * e.value, delta, method=self.name)

    def delta(self, spec, epsilon):
        return api.get_method("rdp").delta(spec, epsilon / 1.5)  # larger δ at the same ε: still an upper bound


def test_a_new_accounting_method_shows_up_everywhere(monkeypatch, capsys):
    monkeypatch.setitem(api._METHODS, "scaled_rdp", _Scaled())
    spec = acc.DPSGD(2.0, acc.Poisson(1.0), steps=1)
    curves = comparator.analytical_curves(spec, 1e-5)
    assert set(curves.curves) == {"pld", "rdp", "scaled_rdp"}  # keyed by method name, never "tight"
    assert curves.epsilon["scaled_rdp"] == pytest.approx(1.5 * curves.epsilon["rdp"])
    assert curves.best_method == "pld"
    # its curve (from δ(ε) on a grid) is a lower bound on the exact 1/2-GDP curve
    a = torch.linspace(0.0, 1.0, 101, dtype=torch.float64)
    assert bool((curves.curves["scaled_rdp"](a) <= acc.TradeOff.from_gdp(0.5)(a) + 1e-9).all())
    assert main(["account", "--noise-multiplier", "2", "--sample-rate", "1", "--steps", "1", "--delta", "1e-5",
                 "--method", "all"]) == 0
    assert "scaled_rdp: epsilon <=" in capsys.readouterr().out
