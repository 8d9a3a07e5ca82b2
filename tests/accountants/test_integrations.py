"""accountants.integrations: the Opacus accountant and dp_accounting DpEvent conversion.

Peer values are pinned with the peer's version beside them; each pinned test also checks the live
peer when it is installed at that version (the ``peers`` extra), so a pinned value cannot go stale.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import re
import sys

import pytest
import torch

import accountants as acc
from accountants.integrations import PeerMissingError
from accountants.integrations import dp_accounting as dpi
from accountants.integrations.opacus import DpauditAccountant, register_with_opacus

DELTA = 1e-5
DP_ACCOUNTING_VERSION = "0.6.0"  # the version the pinned dp_accounting values below come from


# ----------------------------------------------------------------------------------- Opacus


def _train(engine, *, n: int = 64, batch: int = 16, steps: int = 6, poisson: bool = True, sigma: float = 1.3):
    """A tiny Opacus training: logistic regression on random data, ``steps`` optimiser steps."""
    torch.manual_seed(0)
    x, y = torch.randn(n, 4), torch.randint(0, 2, (n,))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=batch)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model, opt, loader = engine.make_private(module=model, optimizer=opt, data_loader=loader,
                                             noise_multiplier=sigma, max_grad_norm=1.0, poisson_sampling=poisson)
    done = 0
    while done < steps:
        for xb, yb in loader:
            opt.zero_grad()
            if len(xb):
                torch.nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
            done += 1
            if done == steps:
                break
    return 1 / len(loader)


def test_opacus_training_with_dpaudit_accountant_poisson():
    opacus = pytest.importorskip("opacus")
    engine = opacus.PrivacyEngine()
    ours = DpauditAccountant(method="rdp")
    engine.accountant = ours  # Opacus 1.6 takes a name in PrivacyEngine(); an instance is set here
    q = _train(engine, steps=6)
    assert len(ours) == 6 and ours.history == [(1.3, q, 6)]
    eps = engine.get_epsilon(DELTA)
    # equal to dpaudit's direct call
    assert eps == acc.epsilon(acc.DPSGD(1.3, acc.Poisson(q), 6), DELTA).value
    # ≤ Opacus' own RDP accountant on the same history (Opacus 1.6 RDPAccountant)
    theirs = opacus.accountants.RDPAccountant()
    theirs.history = list(ours.history)
    assert eps <= theirs.get_epsilon(DELTA) * (1 + 1e-9)
    assert isinstance(ours, opacus.accountants.IAccountant)


def test_opacus_registered_name_pld_is_below_rdp_and_checkpoints():
    opacus = pytest.importorskip("opacus")
    register_with_opacus("dpaudit-test-pld", method="pld", force=True)
    engine = opacus.PrivacyEngine(accountant="dpaudit-test-pld")
    q = _train(engine, steps=4)
    eps = engine.get_epsilon(DELTA)
    bound = engine.accountant.epsilon_bound(DELTA)
    assert eps == bound.value and bound.lower is not None and bound.lower <= eps
    theirs = opacus.accountants.RDPAccountant()
    theirs.history = [(1.3, q, 4)]
    assert eps <= theirs.get_epsilon(DELTA)
    # state_dict / load_state_dict, as Opacus' checkpoints call them
    state = engine.accountant.state_dict()
    fresh = opacus.accountants.create_accountant("dpaudit-test-pld")
    fresh.load_state_dict(state)
    assert fresh.get_epsilon(DELTA) == eps
    with pytest.raises(acc.InputError, match="declares"):
        DpauditAccountant(method="pld", sampling="fixed_wor", batch_size=16, dataset_size=64).load_state_dict(
            {**state, "mechanism": "dpaudit"})


def test_opacus_fixed_size_declaration_rejects_another_sample_rate():
    opacus = pytest.importorskip("opacus")
    ours = DpauditAccountant(sampling="fixed_wor", batch_size=16, dataset_size=64)
    engine = opacus.PrivacyEngine()
    engine.accountant = ours
    _train(engine, n=64, batch=16, steps=4, poisson=False)  # 1/len(loader) = 16/64: accepted
    assert ours.spec() == acc.Composed((acc.DPSGD(1.3, acc.FixedSize(16, 64), 4),))
    assert ours.get_epsilon(DELTA) == acc.epsilon(acc.DPSGD(1.3, acc.FixedSize(16, 64), 4), DELTA).value
    # 60 records in batches of 16: Opacus passes 1/4, not 16/60
    wrong = DpauditAccountant(sampling="fixed_wor", batch_size=16, dataset_size=60)
    engine = opacus.PrivacyEngine()
    engine.accountant = wrong
    with pytest.raises(acc.InputError, match=r"sample_rate must equal batch_size/dataset_size = 16/60"):
        _train(engine, n=60, batch=16, steps=2, poisson=False)
    assert len(wrong) == 0  # nothing recorded by the refused step


def test_opacus_shuffle_declaration_accounts_the_shuffling_loader():
    """Opacus' poisson_sampling=False loader reshuffles every epoch: declare "shuffle" (docs/shuffle.md)."""
    opacus = pytest.importorskip("opacus")
    ours = DpauditAccountant(sampling="shuffle", batch_size=16, dataset_size=60)
    engine = opacus.PrivacyEngine()
    engine.accountant = ours
    _train(engine, n=60, batch=16, steps=5, poisson=False)  # Opacus passes 1/len(loader) = 1/4
    spec = acc.DPSGD(1.3, acc.Shuffle(16, 60), 5)  # ⌊60/16⌋ = 3 steps per epoch: 2 epochs, upper bound
    assert ours.get_epsilon(DELTA) == acc.epsilon(spec, DELTA).value
    assert ours.get_epsilon(DELTA) == acc.epsilon(acc.DPSGD(1.3, acc.Poisson(1.0), 2), DELTA).value


def test_opacus_accountant_heterogeneous_steps_compose():
    ours = DpauditAccountant(method="rdp")
    for _ in range(3):
        ours.step(noise_multiplier=1.0, sample_rate=0.01)
    ours.step(noise_multiplier=2.0, sample_rate=0.02)
    ours.step(noise_multiplier=2.0, sample_rate=0.02)
    assert ours.history == [(1.0, 0.01, 3), (2.0, 0.02, 2)]
    spec = acc.Composed((acc.DPSGD(1.0, acc.Poisson(0.01), 3), acc.DPSGD(2.0, acc.Poisson(0.02), 2)))
    assert ours.get_epsilon(DELTA) == acc.epsilon(spec, DELTA).value
    assert DpauditAccountant().get_epsilon(DELTA) == 0.0
    with pytest.raises(acc.InputError, match=r"rate must be in \(0, 1\]"):
        ours.step(noise_multiplier=1.0, sample_rate=1.5)
    assert len(ours) == 5
    with pytest.raises(acc.InputError, match="unknown accounting method"):
        DpauditAccountant(method="nope")
    with pytest.raises(acc.InputError, match="batch_size and dataset_size"):
        DpauditAccountant(sampling="fixed_wr")
    with pytest.raises(acc.InputError, match="takes no batch_size"):
        DpauditAccountant(batch_size=3)


def test_opacus_get_noise_multiplier_drives_the_registered_accountant():
    """Opacus' calibration writes ``history`` directly and calls get_epsilon: σ meets the target."""
    pytest.importorskip("opacus")
    from opacus.accountants.utils import get_noise_multiplier

    register_with_opacus("dpaudit-test-rdp", method="rdp", force=True)
    sigma = get_noise_multiplier(target_epsilon=2.0, target_delta=DELTA, sample_rate=0.01, steps=500,
                                 accountant="dpaudit-test-rdp")
    assert acc.epsilon(acc.DPSGD(sigma, acc.Poisson(0.01), 500), DELTA).value <= 2.0


def test_register_with_opacus_names_the_extra_when_absent(monkeypatch):
    monkeypatch.setitem(sys.modules, "opacus", None)
    monkeypatch.setitem(sys.modules, "opacus.accountants", None)
    with pytest.raises(PeerMissingError, match=r"pip install dpaudit\[peers\]"):
        register_with_opacus("never")


# ----------------------------------------------------------------------------------- dp_accounting


@pytest.fixture(scope="module")
def dpa():
    mod = pytest.importorskip("dp_accounting")
    return mod


def _events(E):
    """Supported events built by dp_accounting 0.6.0's own tests (dp_event_test.py, rdp_privacy_accountant_test.py)."""
    G = E.GaussianDpEvent
    return {
        "gaussian": G(1.0),
        "laplace": E.LaplaceDpEvent(1.0),
        "self_composed": E.SelfComposedDpEvent(G(1.0), 10),
        "composed_gaussians": E.ComposedDpEvent([G(1.0), G(2.0)]),
        "poisson": E.PoissonSampledDpEvent(0.1, G(1.0)),
        "poisson_of_composed": E.PoissonSampledDpEvent(0.1, E.ComposedDpEvent([G(1.0), G(2.0)])),
        "sampled_without_replacement": E.SampledWithoutReplacementDpEvent(1000, 10, G(1.0)),
        "self_composed_laplace": E.SelfComposedDpEvent(E.LaplaceDpEvent(1.0), 3),
        "composed_gaussian_laplace": E.ComposedDpEvent([G(1.0), E.LaplaceDpEvent(1.0)]),
        "nested": E.ComposedDpEvent([G(3.14159), E.SelfComposedDpEvent(G(3.14159), 2), G(1.61803)]),
        "dpsgd": E.SelfComposedDpEvent(E.PoissonSampledDpEvent(0.01, G(1.1)), 100),
    }


def _peer(dpa, event, rel: str, kind: str, pld_grid: float = 1e-3):
    NR = dpa.NeighboringRelation
    relation = NR.ADD_OR_REMOVE_ONE if rel == "add_remove" else NR.REPLACE_ONE
    if kind == "rdp":
        a = dpa.rdp.RdpAccountant(neighboring_relation=relation)
    else:  # a 1e-3 grid (10x faster than the default 1e-4) keeps the peer's PLD within our bracket here
        a = dpa.pld.PLDAccountant(neighboring_relation=relation, value_discretization_interval=pld_grid)
    if not a.supports(event):
        return None
    return a.compose(event).get_epsilon(DELTA)


def test_dp_events_add_remove_rdp_at_most_peer_and_pld_inside_bracket(dpa):
    compared = set()
    for name, event in _events(dpa.dp_event).items():
        ours = dpi.from_dp_event(event)
        peer_rdp = _peer(dpa, event, "add_remove", "rdp")
        if peer_rdp is not None:  # dp_accounting's RDP has fixed-size WOR under REPLACE_ONE only
            assert dpi.epsilon(ours, DELTA).value <= peer_rdp * (1 + 1e-6), name
            compared.add(name)
        if isinstance(ours, (dpi.WithLaplace, acc.Laplace)):
            continue  # no Laplace pair in dpaudit's PLD
        peer_pld = _peer(dpa, event, "add_remove", "pld")
        if peer_pld is None:  # dp_accounting's PLD has no fixed-size or composed-inside-sampling event
            continue
        ours_pld = dpi.epsilon(ours, DELTA, method="pld")
        # the peer's PLD is itself an upper bound: ≥ our certified lower end; ≤ our upper + our
        # tolerance + the peer's own pessimistic discretisation (q = 1 runs are exact μ-GDP in ours,
        # an ulp-wide bracket, and dp_accounting 0.4's PLD is 8.5e-8 relative above that: 1e-5 allowed)
        slack = max(ours_pld.value - ours_pld.lower, 1e-5 * ours_pld.value)
        assert ours_pld.lower <= peer_pld <= ours_pld.value + slack, name
        compared.add(name + "/pld")
    assert len(compared) == 16, sorted(compared)  # 10 RDP and 6 PLD comparisons: none skipped silently


def test_dp_events_replace_one(dpa):
    """dp_accounting's RDP reads the noise multiplier as std/sensitivity under REPLACE_ONE, where a
    replaced record moves a clipped sum by 2C (google/differential-privacy#378): so our ε at σ is
    compared with its RDP at σ/2, and its PLD (which doubles the sensitivity itself) directly."""
    E = dpa.dp_event
    for sigma, wrap in [(1.0, lambda g: g), (1.0, lambda g: E.SampledWithoutReplacementDpEvent(1000, 10, g))]:
        event, halved = wrap(E.GaussianDpEvent(sigma)), wrap(E.GaussianDpEvent(sigma / 2))
        ours = dpi.from_dp_event(event, neighbouring="replace_one")
        eps = dpi.epsilon(ours, DELTA).value
        assert eps > _peer(dpa, event, "replace_one", "rdp")  # the peer's 4× RDP underestimate
        assert eps <= _peer(dpa, halved, "replace_one", "rdp") * (1 + 1e-6)
    event = E.SelfComposedDpEvent(E.PoissonSampledDpEvent(0.1, E.GaussianDpEvent(1.0)), 10)
    ours_pld = dpi.epsilon(dpi.from_dp_event(event, neighbouring="replace_one"), DELTA, method="pld")
    peer_pld = _peer(dpa, event, "replace_one", "pld")
    assert ours_pld.lower <= peer_pld <= ours_pld.value + (ours_pld.value - ours_pld.lower)


# Pinned: SelfComposed(PoissonSampled(0.01, Gaussian(1.1)), 1000) at δ = 1e-5, add/remove;
# dp_accounting 0.6.0 RdpAccountant / PLDAccountant (default discretisation 1e-4).
PINNED_DPSGD = {"rdp": 1.7117701662429012, "pld": 1.5153702482034066}


def test_dp_event_pinned_against_dp_accounting_values():
    spec = dpi.from_dp_event({"module_name": "dp_accounting.dp_event", "class_name": "SelfComposedDpEvent",
                              "count": 1000, "event": {
                                  "module_name": "dp_accounting.dp_event", "class_name": "PoissonSampledDpEvent",
                                  "sampling_probability": 0.01, "event": {
                                      "module_name": "dp_accounting.dp_event", "class_name": "GaussianDpEvent",
                                      "noise_multiplier": 1.1}}})
    assert spec == acc.DPSGD(1.1, acc.Poisson(0.01), 1000)
    assert acc.epsilon(spec, DELTA).value <= PINNED_DPSGD["rdp"] * (1 + 1e-6)
    pld = acc.epsilon(spec, DELTA, method="pld")
    assert pld.lower <= PINNED_DPSGD["pld"] <= pld.value
    try:
        import dp_accounting as dpa
        version = importlib.metadata.version("dp-accounting")
    except ImportError:
        return
    if version == DP_ACCOUNTING_VERSION:  # the pinned values are the live peer's
        event = dpi.to_dp_event(spec)
        assert _peer(dpa, event, "add_remove", "rdp") == pytest.approx(PINNED_DPSGD["rdp"], rel=1e-12)
        assert _peer(dpa, event, "add_remove", "pld", 1e-4) == pytest.approx(PINNED_DPSGD["pld"], rel=1e-9)


def test_dp_event_round_trips(dpa):
    E = dpa.dp_event
    for name, event in _events(E).items():
        ours = dpi.from_dp_event(event)
        # JSON form of the named tuple (dp_accounting's serialisation), through text
        text = json.dumps(dpi.event_to_json(event))
        assert dpi.from_dp_event(json.loads(text)) == ours, name
        assert dpi.from_dp_event(event.to_named_tuple()) == ours, name
        # description → event → description
        assert dpi.from_dp_event(dpi.to_dp_event(ours)) == ours, name
        back = dpi.to_dp_event(ours)
        assert E.DpEvent.from_named_tuple(back.to_named_tuple()) == back
    descriptions = [
        acc.DPSGD(1.1, acc.FixedSize(10, 1000, replace=True), 7),
        acc.Composed((acc.DPSGD(1.0, acc.Poisson(0.1), 3), acc.DPSGD(2.0, acc.FixedSize(10, 1000), 2))),
        acc.DPSGD(0.9, acc.Poisson(0.2), 5, "replace_one"),
    ]
    for d in descriptions:
        rel = d.parts[0].neighbouring if isinstance(d, acc.Composed) else d.neighbouring
        assert dpi.from_dp_event(dpi.to_dp_event(d), neighbouring=rel) == d


def test_dp_event_without_equivalent_names_the_sub_event(dpa):
    E = dpa.dp_event
    cases = {
        "event is a ZCDpEvent": E.ZCDpEvent(1.0, 2.0),
        "event.events[1].event is a LaplaceDpEvent inside a PoissonSampledDpEvent": E.ComposedDpEvent(
            [E.GaussianDpEvent(1.0), E.PoissonSampledDpEvent(0.1, E.LaplaceDpEvent(1.0))]),
        "event.event is a MixtureOfGaussiansDpEvent": E.SelfComposedDpEvent(
            E.MixtureOfGaussiansDpEvent(1.0, [0, 1, 2], [0.25, 0.5, 0.25]), 2),
        "event.events[0] is a SingleEpochTreeAggregationDpEvent": E.ComposedDpEvent(
            [E.SingleEpochTreeAggregationDpEvent(1.0, 5)]),
        "event is a RandomizedResponseDpEvent": E.RandomizedResponseDpEvent(0.3, 15),
    }
    for where, event in cases.items():
        with pytest.raises(acc.UnsupportedError, match=where.replace("[", r"\[").replace("]", r"\]")):
            dpi.from_dp_event(event)
    with pytest.raises(acc.UnsupportedError, match="group"):
        dpi.to_dp_event(acc.DPSGD(1.0, acc.Poisson(0.1), 1, group_size=2))
    with pytest.raises(acc.UnsupportedError, match="rdp"):
        dpi.epsilon(E.LaplaceDpEvent(1.0), DELTA, method="pld")
    # edge events of dp_accounting's tests: sampling probability 0 releases nothing
    assert dpi.from_dp_event(E.PoissonSampledDpEvent(0, E.GaussianDpEvent(1.0))) == acc.Composed(())


def test_laplace_rdp_closed_form_and_pure_bound():
    """Mironov 2017 Prop. 6 at α = 2, b = 1 (closed form): log(2/3·e + 1/3·e^{−2})."""
    v = dpi.rdp_laplace(torch.tensor([2.0], dtype=torch.float64), 1.0).item()
    assert v == pytest.approx(math.log(2 / 3 * math.e + 1 / 3 * math.exp(-2)), rel=1e-14)
    # Laplace only: basic composition ε = 3/b is below the RDP conversion here
    assert dpi.epsilon(dpi.WithLaplace(acc.Composed(()), ((acc.Laplace(1.0), 3),)), DELTA).value == 3.0


def test_to_dp_event_names_the_extra_when_absent(monkeypatch):
    monkeypatch.setitem(sys.modules, "dp_accounting", None)
    monkeypatch.setitem(sys.modules, "dp_accounting.dp_event", None)
    with pytest.raises(PeerMissingError, match=r"pip install dpaudit\[peers\]"):
        dpi.to_dp_event(acc.DPSGD(1.0, acc.Poisson(0.1), 1))


def test_cli_account_dp_event(tmp_path, capsys):
    from audit.cli import main

    event = {"module_name": "dp_accounting.dp_event", "class_name": "ComposedDpEvent", "events": [
        {"module_name": "dp_accounting.dp_event", "class_name": "SelfComposedDpEvent", "count": 100, "event": {
            "module_name": "dp_accounting.dp_event", "class_name": "PoissonSampledDpEvent",
            "sampling_probability": 0.01, "event": {
                "module_name": "dp_accounting.dp_event", "class_name": "GaussianDpEvent", "noise_multiplier": 1.1}}},
        {"module_name": "dp_accounting.dp_event", "class_name": "GaussianDpEvent", "noise_multiplier": 20.0}]}
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))
    assert main(["account", "--dp-event", str(path), "--delta", "1e-5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    spec = acc.Composed((acc.DPSGD(1.1, acc.Poisson(0.01), 100), acc.DPSGD(20.0, acc.Poisson(1.0), 1)))
    assert out["methods"]["rdp"]["epsilon"] == acc.epsilon(spec, 1e-5).value
    # a DPSGD-only event prints the usual one-run text
    path.write_text(json.dumps(event["events"][0]))
    assert main(["account", "--dp-event", str(path), "--delta", "1e-5"]) == 0
    out = capsys.readouterr().out  # the one-run text (its wording belongs to the account command)
    assert re.search(r"q ?= ?0\.01", out) and "100" in out and "epsilon <=" in out
    # errors name the flag or the sub-event
    assert main(["account", "--dp-event", str(path), "--delta", "1e-5", "--steps", "3"]) == 2
    assert "drop --steps" in capsys.readouterr().err
    path.write_text(json.dumps({"module_name": "dp_accounting.dp_event", "class_name": "ZCDpEvent", "xi": 1, "rho": 2}))
    assert main(["account", "--dp-event", str(path), "--delta", "1e-5"]) == 2
    assert "ZCDpEvent" in capsys.readouterr().err
    path.write_text("{not json")
    assert main(["account", "--dp-event", str(path), "--delta", "1e-5"]) == 2
    assert "is not JSON" in capsys.readouterr().err


def test_docs_recipes_run_as_written(capsys):
    """Every ```python block of docs/integrations.md runs as written (the two five-line recipes)."""
    pytest.importorskip("opacus")
    pytest.importorskip("dp_accounting")
    import pathlib
    import re

    text = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) == 2 and all(len(b.strip().splitlines()) == 5 for b in blocks)
    for block in blocks:
        exec(compile(block, "docs/integrations.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "0.0" and out[1].startswith("DPSGD(noise_multiplier=1.1")
    assert "value=1.52" in out[2] and "lower=1.51" in out[2]


# ------------------------------------------------------------------ hostile --dp-event input (issue 23 §3)

_G = {"class_name": "GaussianDpEvent", "noise_multiplier": 1.0}


def _poisson(inner: dict, q: float = 0.1) -> dict:
    return {"class_name": "PoissonSampledDpEvent", "sampling_probability": q, "event": inner}


@pytest.mark.parametrize(("event", "where"), [
    ({"class_name": "SelfComposedDpEvent", "count": -1, "event": _G}, "event.count"),
    ({"class_name": "SelfComposedDpEvent", "count": 0.5, "event": _G}, "event.count"),
    (_poisson({"class_name": "SelfComposedDpEvent", "count": -1, "event": _G}), "event.event.count"),
    (_poisson({"class_name": "SelfComposedDpEvent", "count": 0.5, "event": _G}), "event.event.count"),
    ({"class_name": "GaussianDpEvent", "noise_multiplier": -1}, "event.noise_multiplier"),
    (_poisson({"class_name": "ComposedDpEvent", "events": [{"class_name": "GaussianDpEvent",
                                                           "noise_multiplier": -1}]}),
     r"event.event.events\[0\].noise_multiplier"),
    ({"class_name": "GaussianDpEvent", "noise_multiplier": True}, "event.noise_multiplier"),
    ({"class_name": "GaussianDpEvent", "noise_multiplier": "1"}, "event.noise_multiplier"),
    (_poisson(_G, q=1.5), "event.sampling_probability"),
    (_poisson(_G, q=float("nan")), "event.sampling_probability"),
    ({"class_name": "SampledWithoutReplacementDpEvent", "sample_size": 1.5, "source_dataset_size": 10,
      "event": _G}, "event.sample_size"),
    ({"class_name": "SampledWithoutReplacementDpEvent", "sample_size": "10", "source_dataset_size": 100,
      "event": _G}, "event.sample_size"),
    ({"class_name": "SampledWithReplacementDpEvent", "sample_size": True, "source_dataset_size": 100,
      "event": _G}, "event.sample_size"),
    ({"class_name": "LaplaceDpEvent", "noise_multiplier": 0}, "event.noise_multiplier"),
])
def test_dp_event_bad_fields_are_input_errors_naming_the_path(event, where):
    """Before: count -1 / 0.5 inside a sampled event gave σ = inf ("epsilon <= 0", exit 0), Gaussian(-1) inside
    a composition was read as σ = 1 (σ⁻² = 1), sample_size 1.5 was truncated and "10" / true were cast."""
    with pytest.raises(acc.InputError, match=where):
        dpi.from_dp_event(event)


def test_dp_event_repeated_events_compose_by_count_not_expansion():
    """SelfComposed(Composed([G, Poisson(0.1, G)]), 10**9) reads as two phases of 10**9 steps each (before:
    a list of 2·10**9 parts, MemoryError). Composition commutes, so the parts merge by (σ, sampling)."""
    inner = {"class_name": "ComposedDpEvent", "events": [_G, _poisson(_G)]}
    d = dpi.from_dp_event({"class_name": "SelfComposedDpEvent", "count": 10**9, "event": inner})
    assert d == acc.Composed((acc.DPSGD(1.0, acc.Poisson(1.0), 10**9), acc.DPSGD(1.0, acc.Poisson(0.1), 10**9)))
    # nested counts multiply; count 0 releases nothing
    nested = {"class_name": "SelfComposedDpEvent", "count": 10**6,
              "event": {"class_name": "SelfComposedDpEvent", "count": 10**6, "event": _poisson(_G)}}
    assert dpi.from_dp_event(nested) == acc.DPSGD(1.0, acc.Poisson(0.1), 10**12)
    assert dpi.from_dp_event({"class_name": "SelfComposedDpEvent", "count": 0, "event": _G}) == acc.Composed(())
    # interleaved parts merge: [A, B, A] composes like [A×2, B]
    a, b = _poisson(_G), _poisson(_G, q=0.2)
    mixed = dpi.from_dp_event({"class_name": "ComposedDpEvent", "events": [a, b, a]})
    assert mixed == acc.Composed((acc.DPSGD(1.0, acc.Poisson(0.1), 2), acc.DPSGD(1.0, acc.Poisson(0.2), 1)))


def test_dp_event_depth_is_capped():
    e: dict = _G
    for _ in range(500):  # before: RecursionError (exit 3)
        e = {"class_name": "SelfComposedDpEvent", "count": 1, "event": e}
    with pytest.raises(acc.InputError, match="nested more than"):
        dpi.from_dp_event(e)


def _cli(path, capsys) -> tuple[int, str]:
    from audit.cli import main

    code = main(["account", "--dp-event", str(path), "--delta", "1e-5"])
    return code, capsys.readouterr().err


def test_cli_dp_event_hostile_files_exit_2(tmp_path, capsys):
    """Non-UTF-8, a FIFO, /dev/zero, a 100 MB (sparse) file, 100,000-deep JSON: one line, exit 2, nothing read
    past the cap (before: a hang on the FIFO and /dev/zero, RecursionError, UnicodeDecodeError)."""
    import os

    latin = tmp_path / "latin.json"
    latin.write_bytes(b'{"class_name": "G\xe9"}')
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    huge = tmp_path / "huge.json"
    with open(huge, "wb") as fh:
        fh.truncate(100 * 2**20)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path, words in ((latin, "not UTF-8"), (deep, "nested too deeply"), (huge, "at most"),
                        (fifo, "not a regular file"), ("/dev/zero", "not a regular file"),
                        (tmp_path / "absent.json", "cannot read")):
        code, err = _cli(path, capsys)
        assert code == 2, (path, err)
        assert words in err and "Traceback" not in err, (path, err)


def test_cli_dp_event_bad_count_exits_2_not_zero(tmp_path, capsys):
    path = tmp_path / "e.json"
    path.write_text(json.dumps(_poisson({"class_name": "SelfComposedDpEvent", "count": -1, "event": _G})))
    code, err = _cli(path, capsys)
    assert code == 2 and "event.event.count" in err
