"""The hidden-state threat model (attacks.threat.HiddenState, score final_projection; docs/worst-case.md):
the adversary reads only θ_T (θ_0 known), and its audits are sound on correct DP-SGD (seeded)."""

import pytest
import torch
from scipy.stats import binom

import accountants as acc
from accountants.errors import InputError, UnsupportedError
from attacks import canaries, data, games, models
from attacks import membership as mia
from attacks.threat import BlackBox, HiddenState, WhiteBox, allows, describe
from audit import comparator, config, registry
from audit import statistics as st


def test_final_projection_reads_the_final_parameters_and_equals_the_white_box_sum():
    """Random θ_0, natural records, a Dirac canary on a quiet coordinate: ⟨θ_0 − θ_T, e⟩·E|B|/(ηC) = Σ_t o_t."""
    spec = acc.DPSGD(1.0, acc.Poisson(0.5), 6)
    model = models.logistic_regression(64, 10)
    d = data.digits().subset(slice(0, 30))
    p0 = {k: v[0] for k, v in models.init_params(model, 1, torch.Generator().manual_seed(0)).items()}
    c = canaries.dirac(canaries.quiet_coordinates(model, p0, d, 1), dim=650)
    setup = games.Setup(spec, model, d, clip_norm=1.5, learning_rate=0.3)
    kw = dict(n_trials=40, seed=4, chunk_size=40, progress=False)
    hidden = games.multi_run_game(setup, c, threat=HiddenState(), **kw)
    white = games.multi_run_game(setup, c, scores=[mia.InnerProductSum()], **kw)
    assert hidden.threat == "hidden_state" and list(hidden.scores) == ["final_projection"]
    assert torch.equal(hidden.truth, white.truth)
    torch.testing.assert_close(hidden.scores["final_projection"], white.scores["inner_product"], rtol=1e-9,
                               atol=1e-9)


def test_hidden_state_audits_are_sound_on_correct_dpsgd():
    """M seeded audits of the hidden-state pair Σ_t o_t ~ Bin(T, q) + N(0, Tσ²) (in) vs N(0, Tσ²) (out)
    against the accountant's curve (all T updates released, so it bounds the final model too): violations
    and ε_lower > ε_upper each at most binom.ppf(0.999, M, s) (probability < 0.001 if the true rate ≤ s);
    measured 0. Then the full pipeline on the real trainer (300 trials) reports no violation."""
    spec = acc.DPSGD(1.0, acc.Poisson(0.5), 4)
    curves = comparator.analytical_curves(spec, 1e-5)
    g = torch.Generator().manual_seed(7)
    M, n, s, T = 60, 250, 0.05, 4

    def draw(member):
        k = (torch.rand(n, T, generator=g, dtype=torch.float64) < 0.5).double().sum(1) if member else 0.0
        return (k + torch.randn(n, T, generator=g, dtype=torch.float64).sum(1)).numpy()

    violations = above = 0
    for _ in range(M):
        si, so = draw(True), draw(False)
        violations += comparator.violation_test(st.empirical_tradeoff(si, so, significance=s), curves.best).violated
        above += st.epsilon_lower_bound(si, so, delta=1e-5, significance=s).value > curves.epsilon_best
    slack = int(binom.ppf(0.999, M, s))
    assert violations <= slack and above <= slack, (violations, above, slack)
    assert violations == 0 and above == 0  # measured (seeded)

    d = data.digits().subset(slice(0, 20))
    model = models.logistic_regression(64, 10)
    p0 = {k: v[0] for k, v in models.init_params(model, 1, torch.Generator().manual_seed(0)).items()}
    c = canaries.dirac(canaries.quiet_coordinates(model, p0, d, 1), dim=650)
    out = games.multi_run_game(games.Setup(spec, model, d), c, threat=HiddenState(), n_trials=300, seed=1,
                               chunk_size=300, progress=False)
    cmp = comparator.compare_membership(out.in_scores("final_projection"), out.out_scores("final_projection"),
                                        spec, delta=1e-5, curves=curves)
    assert not cmp.violated and cmp.epsilon_lower.value <= curves.epsilon_best


def test_hidden_state_vocabulary_and_errors():
    assert describe(HiddenState()) == "hidden_state"
    assert allows(WhiteBox(), HiddenState()) and allows(HiddenState(), BlackBox())
    assert not allows(HiddenState(), WhiteBox()) and not allows(BlackBox(), HiddenState())
    assert registry.score_names("hidden_state") == ["final_projection"]
    cfg = config.loads('[attack]\nthreat_model = "hidden_state"\nscore = "final_projection"\n')
    assert cfg.attack.threat_model == "hidden_state"
    with pytest.raises(InputError, match=r"attack\.score must be one of \['final_projection'\]"):
        config.loads('[attack]\nthreat_model = "hidden_state"\n')  # the default llr reads every update
    with pytest.raises(InputError, match="needs a gradient canary"):
        config.loads('[attack]\nthreat_model = "hidden_state"\nscore = "final_projection"\n[canary]\nkind = "blank"\n')
    with pytest.raises(InputError, match="'multi_run' or 'one_run'"):
        config.loads('[attack]\nthreat_model = "hidden_state"\nscore = "final_projection"\n'
                     '[audit]\ngame = "reconstruction"\n[canary]\ncount = 3\n')
    spec = acc.DPSGD(1.0, acc.Poisson(0.5), 2)
    d5 = data.digits().subset(slice(0, 5))
    with pytest.raises(UnsupportedError, match="hidden-state threat model is audited with gradient canaries"):
        games.multi_run_game(games.Setup(spec, models.logistic_regression(64, 10), d5), canaries.blank(d5),
                             threat=HiddenState(), scores=[mia.LossScore()], n_trials=2, progress=False)
    with pytest.raises(UnsupportedError, match="needs a white-box view; the threat is hidden state"):
        games.multi_run_game(games.Setup(spec, models.logistic_regression(64, 10), data.digits().subset(slice(0, 5))),
                             canaries.dirac([0], dim=650), threat=HiddenState(), scores=[mia.InnerProductSum()],
                             n_trials=2, progress=False)
