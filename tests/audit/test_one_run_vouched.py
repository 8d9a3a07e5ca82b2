"""dpaudit vouches for independent one-run canaries exactly when the structure guarantees it
(audit.runs.independence_vouched; docs/auditing.md, "When dpaudit vouches"): its own trainer, Poisson
sampling, distinct Dirac canaries on quiet slots, no fault, a score that reads each canary's own coordinate.
Then Xiang et al.'s order statistic, the score bound and the order statistic under the composite SGM null enter
ε_lower (each of the four statistics at s/4) and the result says why."""

from pathlib import Path

import pytest

from accountants.errors import InputError
from audit import config, runs
from audit.comparator import ONE_RUN_INDEPENDENCE
from audit.statistics import SGM_FAMILY_ASSUMPTION

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "own_training"

def _variant(training: str = "", canary: str = 'kind = "dirac_slots"\ncount = 200', attack: str = ""):
    text = (f"[training]\nn_records = 60\nsteps = 3\n{training}\n[canary]\n{canary}\n[attack]\n{attack}\n"
            "[audit]\ngame = \"one_run\"\ntrials = 1\n")
    return config.variants(config.loads(text))[0]


def test_slotted_poisson_audit_vouches_and_says_why(tmp_path):
    v = _variant()
    res = runs.audit_variant(v, tmp_path)
    order = {s.name: s for s in res.one_run_statistics}["order"]
    assert order.in_epsilon_lower and runs.INDEPENDENCE_REASON in order.assumption
    assert order.assumption.startswith(ONE_RUN_INDEPENDENCE)
    scores = {s.name: s for s in res.one_run_statistics}["scores"]  # the continuous-score bound rests on it too
    assert scores.in_epsilon_lower and runs.INDEPENDENCE_REASON in scores.assumption
    family = {s.name: s for s in res.one_run_statistics}["order_family"]  # the vouched structure implies its null
    assert family.in_epsilon_lower and runs.INDEPENDENCE_REASON in family.assumption
    assert SGM_FAMILY_ASSUMPTION in family.assumption
    steinke = {s.name: s for s in res.one_run_statistics}["steinke"]
    assert steinke.confidence == pytest.approx(1 - 0.05 / 4)  # the union bound over the four statistics
    assert family.confidence == pytest.approx(1 - 0.05 / 4)
    # the GDP forms bound μ for a GDP-shaped mechanism: never in ε_lower, vouched or not
    assert not any(s.in_epsilon_lower for s in res.one_run_statistics if s.bound == "gdp_mu_lower")


@pytest.mark.parametrize("kw", [
    {"training": 'sampling = "fixed_wor"\nbatch_size = 100'},  # fixed-size batches couple the canaries
    {"training": 'fault = "realised_batch_normalisation"'},  # a fault: the claim is not what ran
    {"attack": 'score = "update_norm"'},  # reads every coordinate
    {"canary": 'kind = "dirac"\ncount = 20'},  # the quietest natural coordinates may be shared with natural records
], ids=["fixed-size", "fault", "update-norm", "quiet-coordinates"])
def test_no_vouching_outside_the_structure(kw):
    v = _variant(**kw)
    assert runs.independence_vouched(runs.game_input(v), v, v.attack.score) is None
    assert runs.independence_vouched(runs.game_input(_variant()), _variant(), "llr") is not None  # the control


def test_a_user_trainer_cannot_ask_for_slots():
    with pytest.raises(InputError, match="dirac_slots"):
        config.loads('[training]\ntrainer = "torch_trainer:train"\n[canary]\nkind = "dirac_slots"\ncount = 20\n'
                     '[audit]\ngame = "one_run"\ntrials = 1\n', base_dir=EXAMPLES)
