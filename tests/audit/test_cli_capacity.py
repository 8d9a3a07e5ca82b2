"""`dpaudit capacity`: restricted vs unrestricted values, JSON keys, exit codes."""

import json
import math

import numpy as np
import pytest

from audit.cli import main
from tests.oracles import reference_records


def _json(capsys, argv):
    assert main(["capacity", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_laplace_kl(capsys):
    out = _json(capsys, ["--mechanism", "laplace:b=1", "--class", "linear", "--divergence", "kl"])
    for key in ("restricted", "unrestricted", "class", "divergence", "order", "format", "mechanism", "by_direction"):
        assert key in out
    assert out["format"] == "dpaudit.capacity/2"
    assert out["divergence"] == "kl"
    assert out["order"] is None
    assert out["class"] == "linear"
    # Laplace ε = 1: linear KL 0.225987, the closed form k(1) of Chaudhuri et al. 2019 Thm 9 (k(ε) = √(1+ε²) − 1
    # − log((1+√(1+ε²))/2)), against the full KL of the Laplace pair, ε − 1 + e^{−ε} = e^{−1} at ε = 1.
    k1 = math.sqrt(2.0) - 1.0 - math.log((1.0 + math.sqrt(2.0)) / 2.0)
    assert out["restricted"]["linear"] == pytest.approx(k1, rel=1e-10)
    assert out["unrestricted"] == pytest.approx(math.exp(-1.0), rel=1e-12)
    assert "NOT (epsilon, delta)" in out["meaning"]


def _poly_chi2(k: int) -> float:
    """Δφᵀ Cov_Q(φ)⁻¹ Δφ for φ = (x, …, x^k), P = Laplace(0, 1), Q = Laplace(1, 1) (the α = 2 restricted
    divergence is log(1 + this)). Raw moments from the central ones, E[(x − μ)^j] = j! for even j, 0 for odd."""
    def raw(mu: float, n: int) -> float:
        return sum(math.comb(n, j) * mu ** (n - j) * (math.factorial(j) if j % 2 == 0 else 0) for j in range(n + 1))

    d = np.array([raw(0.0, i) - raw(1.0, i) for i in range(1, k + 1)])
    cov = np.array([[raw(1.0, i + j) - raw(1.0, i) * raw(1.0, j) for j in range(1, k + 1)] for i in range(1, k + 1)])
    return float(d @ np.linalg.solve(cov, d))


def test_json_all_classes_renyi(capsys):
    out = _json(capsys, ["--mechanism", "laplace:b=1", "--class", "all", "--divergence", "renyi", "--order", "2"])
    assert out["order"] == 2.0
    assert out["class"] == "all"
    r = out["restricted"]
    # α = 2 closed forms: restricted to polynomials of degree k, D_2 = log(1 + Δφᵀ Cov_Q(φ)⁻¹ Δφ), φ = (x, …, x^k),
    # from the Laplace moments (_poly_chi2 below): log 1.5, log 1.55, log 1.6078703704; the full Rényi-2 divergence
    # of Laplace shifted by 1 is log(⅔e + ⅓e^{−2}) = 0.619124 (Mironov 2017 Table II).
    assert r["linear"] == pytest.approx(math.log1p(_poly_chi2(1)), rel=1e-10)
    assert r["poly2"] == pytest.approx(math.log1p(_poly_chi2(2)), rel=1e-10)
    assert r["poly3"] == pytest.approx(math.log1p(_poly_chi2(3)), rel=1e-9)
    assert out["unrestricted"] == pytest.approx(math.log(2 / 3 * math.e + math.exp(-2) / 3), rel=1e-12)
    assert r["linear"] <= r["poly2"] <= r["poly3"] <= out["unrestricted"]


def test_gaussian_and_dpsgd(capsys):
    out = _json(capsys, ["--mechanism", "gaussian:sigma=1", "--divergence", "renyi", "--order", "5"])
    # tests/data/reference_values.json capacity_bounded (gaussian, σ = 1): lin_renyi at order 5 is 0.608795 (an
    # independent scipy + mpmath implementation of Chaudhuri et al. 2019); full α/(2σ²) = 2.5.
    (want,) = [r["values"]["lin_renyi"][r["params"]["orders"].index(5)] for r in reference_records("capacity_bounded")
               if r["params"]["mechanism"] == "gaussian" and r["params"]["sigma"] == 1.0]
    assert out["restricted"]["linear"] == pytest.approx(want, abs=1e-6)
    assert out["unrestricted"] == pytest.approx(2.5, rel=1e-12)
    out = _json(capsys, ["--mechanism", "dpsgd:noise_multiplier=1,sample_rate=0.1", "--divergence", "renyi",
                         "--order", "2"])
    # α = 2 closed form (the Mahalanobis form above with k = 1): the mean moves by q, the variance is σ² one way
    # and σ² + q(1−q) the other, so max(log(1 + q²/σ²), log(1 + q²/(σ² + q(1−q)))) = log 1.01.
    assert out["restricted"]["linear"] == pytest.approx(math.log(1.01), rel=1e-10)
    d = out["by_direction"]["restricted"]["linear"]
    assert d["without||with"] == pytest.approx(math.log1p(0.01 / 1.09), rel=1e-10)
    assert out["mechanism"]["steps"] == 1


def test_text_output_side_by_side(capsys):
    assert main(["capacity", "--mechanism", "gaussian:sigma=2", "--class", "all"]) == 0
    out = capsys.readouterr().out
    assert "restricted" in out
    assert "unrestricted" in out
    assert "NOT (epsilon, delta)" in out
    for name in ("linear", "poly2", "poly3"):
        assert name in out
    assert "0.125" in out  # KL = 1/(2σ²) for every class (the log-likelihood ratio is linear)


@pytest.mark.parametrize("argv", [
    ["--mechanism", "laplace:b=1", "--divergence", "renyi"],                      # no --order
    ["--mechanism", "laplace:b=1", "--order", "2"],                               # --order with kl
    ["--mechanism", "laplace:c=1"],                                               # unknown key
    ["--mechanism", "uniform:b=1"],                                               # unknown mechanism
    ["--mechanism", "laplace:b=-1"],                                              # invalid scale
    ["--mechanism", "laplace:b=1", "--divergence", "renyi", "--order", "0.5"],    # order <= 1
    ["--mechanism", "dpsgd:noise_multiplier=1,sample_rate=0.1,steps=10"],         # adaptive: unsupported
])
def test_usage_errors_exit_2(capsys, argv):
    assert main(["capacity", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpaudit capacity: error:")
    assert err.count("\n") == 1


@pytest.mark.parametrize(("mechanism", "flags", "words"), [
    ("gaussian:sigma=1e-300", [], "sigma must be in [0.03, 10000]"),   # was ZeroDivisionError (exit 3)
    ("gaussian:sigma=1e300", [], "sigma must be in [0.03, 10000]"),    # was OverflowError (exit 3)
    ("laplace:b=1e-300", [], "b must be in [0.03, 10000]"),            # was restricted 0 beside 1e300
    ("laplace:b=1e300", ["--divergence", "renyi", "--order", "2"], "b must be in"),  # was NaN
    ("dpsgd:noise_multiplier=1e300,sample_rate=0.5", [], "noise_multiplier must be in"),  # was NaN
    ("dpsgd:noise_multiplier=1,sample_rate=1e-300", [], "sample_rate must be in [1e-06, 1]"),
    ("gaussian:sigma=1", ["--divergence", "renyi", "--order", "1e6"], "orders must be in (1, 1000]"),
])
def test_capacity_outside_its_reliable_domain_is_exit_2(capsys, mechanism, flags, words):
    """Issue 23 §3: the capacity fuzz (9 scales × 4 divergences × 3 classes) found ZeroDivisionError at σ = 1e-300,
    OverflowError at 1e300 and NaN or negative outputs at extreme scales; they are now refused by name."""
    assert main(["capacity", "--mechanism", mechanism, *flags]) == 2
    assert words in capsys.readouterr().err


@pytest.mark.parametrize(("mechanism", "order"), [
    ("gaussian:sigma=0.03", 1.01), ("gaussian:sigma=10000", 100.0), ("laplace:b=0.03", 1.0001),
    ("laplace:b=10000", 2.0), ("dpsgd:noise_multiplier=0.03,sample_rate=1e-6", 2.0),
    ("dpsgd:noise_multiplier=10000,sample_rate=1", 1.01), ("laplace:b=0.03", None),
])
def test_capacity_at_the_domain_edges_is_a_number_or_a_clear_error(capsys, mechanism, order):
    """Inside the domain every value is finite and 0 ≤ restricted ≤ unrestricted (restricting the tests cannot
    raise a divergence: Chaudhuri et al. 2019 eq. 2), or the solver failure is named (exit 2), never NaN."""
    flags = ["--divergence", "renyi", "--order", str(order)] if order else []
    code = main(["capacity", "--mechanism", mechanism, "--class", "all", "--json", *flags])
    out = capsys.readouterr()
    if code == 2:
        assert "reliable" in out.err
        return
    assert code == 0
    o = json.loads(out.out)
    for v in o["restricted"].values():
        assert math.isfinite(v) and 0.0 <= v <= o["unrestricted"] * (1 + 1e-6) + 1e-12
