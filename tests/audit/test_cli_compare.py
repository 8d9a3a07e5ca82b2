"""`dpaudit compare`: JSON keys and values, text output, exit codes."""

from __future__ import annotations

import json

import pytest

from audit.cli import main


def test_json_gaussian_vs_laplace(capsys):
    assert main(["compare", "gaussian:sigma=1", "laplace:b=1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("format", "delta_ab", "delta_ba", "worst_prior_ab", "worst_prior_ba", "crossings", "delta_symmetric"):
        assert key in out
    assert out["format"] == "dpaudit.compare/1"
    # Source: values.json delta_divergence (Gaussian σ=1 vs Laplace b=1): 0.00527220886967017 and
    # 0.034138546255492785, crossings [0.418539, 0.58146]; atol 1e-6.
    assert out["delta_ab"] == pytest.approx(0.00527220886967017, abs=1e-6)
    assert out["delta_ba"] == pytest.approx(0.034138546255492785, abs=1e-6)
    assert out["worst_prior_ab"] == pytest.approx(0.5, abs=1e-4)
    assert min(abs(out["worst_prior_ba"] - 0.268941), abs(out["worst_prior_ba"] - 0.731059)) < 1e-4
    assert out["crossings"] == pytest.approx([0.418539, 0.58146], abs=2e-6)
    assert out["a"]["bound"] == "exact"
    assert out["b"]["bound"] == "exact"


def test_text_output_and_dominance(capsys):
    assert main(["compare", "gaussian:sigma=2", "gaussian:sigma=1"]) == 0
    text = capsys.readouterr().out
    assert "Delta(A||B) = 0.0927561" in text  # values.json: 0.09275613559108942
    assert "B Blackwell-dominates A" in text


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["compare", "gauss:sigma=1", "laplace:b=1"], "kind must be one of"),
        (["compare", "gaussian:s=1", "laplace:b=1"], "gaussian takes sigma; unknown 's'"),
        (["compare", "gaussian:sigma=1,x=2", "laplace:b=1"], "unknown 'x'"),
        (["compare", "gaussian:sigma=-1", "laplace:b=1"], "sigma must be"),
        (["compare", "gaussian:sigma=abc", "laplace:b=1"], "sigma must be a finite number"),
        (
            ["compare", "gaussian:sigma=1", "dpsgd:noise_multiplier=1,sample_rate=0.01,steps=1.5"],
            "steps must be a whole number",
        ),
    ],
)
def test_usage_errors_exit_2(capsys, argv, needle):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpaudit compare: error:")
    assert needle in err


def test_dpsgd_without_pld_is_a_clear_error(capsys, monkeypatch):
    """An installation without PLD has no method "pld" registered (accountants.pld registers it on import, and the
    curves reach PLD only through the registry): --method pld is refused naming the choices; the default is rdp."""
    from accountants import api

    monkeypatch.delitem(api._METHODS, "pld")
    argv = ["compare", "dpsgd:noise_multiplier=1.0,sample_rate=0.01,steps=10", "gaussian:sigma=1"]
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--method", "pld"])
    assert exc.value.code == 2 and "invalid choice: 'pld'" in capsys.readouterr().err
    assert main(argv) == 0 and "rdp lower bound" in capsys.readouterr().out


def test_dpsgd_with_rdp_method(capsys):
    # One unsampled step (q = 1) at σ: the RDP curve is a lower bound on G_{1/σ}, so the exact
    # Gaussian Blackwell-dominates nothing here: Δ(dpsgd-rdp‖gaussian) = 0, and Δ(gaussian‖dpsgd-rdp)
    # measures the RDP conversion's looseness (0.0250 at μ = 0.5, attained at π = ½).
    argv = [
        "compare",
        "gaussian:sigma=2",
        "dpsgd:noise_multiplier=2,sample_rate=1,steps=1",
        "--method",
        "rdp",
        "--json",
    ]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["b"]["bound"] == "lower"
    assert out["delta_ba"] <= 1e-9
    assert 0.0 < out["delta_ab"] < 0.05


def test_dpsgd_with_pld(capsys):
    pytest.importorskip("accountants.pld")
    # q = 1, T = 4, σ = 2: exactly μ-GDP with μ = √T/σ = 1 (closed form), so the PLD curve must be
    # within its discretisation of gaussian:sigma=1 (Δ both ways small) and never above it.
    argv = ["compare", "gaussian:sigma=1", "dpsgd:noise_multiplier=2,sample_rate=1,steps=4", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["delta_ba"] <= 1e-9
    assert out["delta_ab"] < 5e-3


@pytest.mark.parametrize(("text", "needle"), [
    ("dpsgd:noise_multiplier=1,sample_rate=0.1,steps=1.0", "steps must be a whole number"),
    ("dpsgd:noise_multiplier=1,sample_rate=0.1,steps=1,steps=2", "steps is given twice"),
    ("gaussian:sigma=nan", "sigma must be a finite number"),
    ("gaussian", "needs sigma"),
    ("gaussian:sigma=1,", "empty item"),
])
def test_compare_and_capacity_share_one_grammar(capsys, text, needle):
    """Issue 12: `steps=1.0` passed one parser and failed the other; both now use accountants.describe."""
    assert main(["compare", text, "laplace:b=1"]) == 2
    err_compare = capsys.readouterr().err
    assert main(["capacity", "--mechanism", text]) == 2
    err_capacity = capsys.readouterr().err
    assert needle in err_compare and needle in err_capacity
    assert err_compare.split("error: ", 1)[1] == err_capacity.split("error: ", 1)[1]  # the same message


def test_compare_method_choices_come_from_the_registry(capsys, monkeypatch):
    """A newly registered accounting method is a `compare --method` choice and supplies its curve."""
    import accountants.api as api

    class Loose:  # sound but loose: (ε, δ) of the RDP method at every ε through its delta()
        name = "loose_rdp"

        def unsupported(self, spec):
            return api.get_method("rdp").unsupported(spec)

        def epsilon(self, spec, delta):
            return api.get_method("rdp").epsilon(spec, delta)

        def delta(self, spec, epsilon):
            return api.get_method("rdp").delta(spec, epsilon)

    monkeypatch.setitem(api._METHODS, "loose_rdp", Loose())
    argv = ["compare", "dpsgd:noise_multiplier=2,sample_rate=1,steps=1", "gaussian:sigma=2", "--method",
            "loose_rdp", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["a"]["curve"].startswith("loose_rdp lower bound for σ = 2")
    # a lower bound on the exact G_{1/2} curve: switching from it to the Gaussian never helps an adversary
    assert out["delta_ab"] == pytest.approx(0.0, abs=1e-9)
