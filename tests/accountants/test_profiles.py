"""Privacy profiles and amplification by subsampling (Balle, Barthe, Gaboardi 2018, arXiv:1807.01647)."""

import itertools
import math

import mpmath as mp
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from accountants.profiles import (
    advanced_joint_convexity,
    amplified_epsilon,
    amplify_poisson_remove_add,
    amplify_wor_substitution,
    amplify_wr_remove_add,
    amplify_wr_substitution,
    base_epsilon,
    delta_gaussian,
    delta_gaussian_group,
    delta_group_black_box,
    delta_laplace,
    delta_laplace_group,
    delta_randomized_response,
    hockey_stick,
    log_delta_gaussian,
    randomized_membership_output,
    randomized_membership_profile,
    tv_poisson,
    tv_wor,
    tv_wr,
)
from tests.oracles import reference_records

F64 = torch.float64
EPS_GRID = (0.0, 0.1, 0.5, 1.0, 2.0, 4.0, 8.0)


def _t(x):
    return torch.as_tensor(x, dtype=F64)


# ------------------------------------------------------------------------------ Gaussian profile


# tests/data/reference_values.json family tradeoff_gaussian, `delta` and `tv_delta_at_eps0` (mpmath 1.3.0 at 50
# digits), embedded. Rows: (μ, δ at ε = 0, 0.1, 0.5, 1, 2, 4, 8, δ(0) = 2Φ(μ/2) − 1).
TRADEOFF_GAUSSIAN_DELTA = [
    (
        0.1,
        (0.039877611676744924, 0.008751768145809595, 6.856582455838737e-09, 1.2308359836427112e-25,
         3.7194507268047234e-91, 0.0, 0.0),
        0.039877611676744924,
    ),
    (
        0.25,
        (0.09947644966022579, 0.060337166358103385, 0.002708880218318193, 2.924272104856407e-06,
         5.0921308938635904e-17, 7.263011664576725e-59, 2.3030265327224766e-225),
        0.09947644966022579,
    ),
    (
        0.5,
        (0.19741265136584746, 0.15926050741399167, 0.05244032328766966, 0.0068295949831145755, 9.439168634947234e-06,
         2.706033802956907e-16, 1.0486591789128747e-57),
        0.19741265136584746,
    ),
    (
        1.0,
        (0.3829249225480262, 0.3523251716813667, 0.23842170813487662, 0.12693673750664394, 0.020923635821113732,
         4.71224120079312e-05, 3.6508216874217905e-15),
        0.3829249225480262,
    ),
    (
        1.5,
        (0.5467452952462636, 0.5239657746326271, 0.4318221378672062, 0.3203919142103852, 0.14232098784668343,
         0.01033448543972005, 5.336763400246518e-07),
        0.5467452952462636,
    ),
    (
        2.0,
        (0.6826894921370859, 0.6666395155288459, 0.5991856185339333, 0.5098616600546702, 0.3318979987768294,
         0.08495331867107106, 0.0004954017389387454),
        0.6826894921370859,
    ),
    (
        3.0,
        (0.8663855974622838, 0.8595863792150229, 0.8299958099476903, 0.7876007413603845, 0.6858741657160493,
         0.4404297627863119, 0.07560389484898687),
        0.8663855974622838,
    ),
    (
        5.0,
        (0.9875806693484477, 0.9869460233658883, 0.9841174642339661, 0.9798516780897752, 0.9683489802905149,
         0.9290404733859434, 0.7543607144299146),
        0.9875806693484477,
    ),
]


@pytest.mark.parametrize(("mu", "delta_ref", "tv_ref"), TRADEOFF_GAUSSIAN_DELTA)
def test_gaussian_profile_reference(mu, delta_ref, tv_ref):
    # Tolerance from values.json README: rtol 1e-10; atol 1e-20 for δ ≲ 1e-15 (here δ underflows at
    # μ = 0.1, ε = 8: e^{−3196}).
    got = delta_gaussian(_t(EPS_GRID), mu)
    torch.testing.assert_close(got, _t(delta_ref), rtol=1e-10, atol=1e-20)
    assert delta_gaussian(0.0, mu).item() == pytest.approx(tv_ref, rel=1e-12)


def test_embedded_reference_matches_values_json():
    recs = reference_records("tradeoff_gaussian")
    got = [(x["params"]["mu"], tuple(x["values"]["delta"]), x["values"]["tv_delta_at_eps0"]) for x in recs]
    assert got == TRADEOFF_GAUSSIAN_DELTA
    assert all(tuple(x["params"]["eps"]) == EPS_GRID for x in recs)


# (μ, ε, δ): the Gaussian profile δ(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ) (Balle & Wang 2018 Thm 8), the
# third column as printed by _gaussian_delta_mp below (mpmath, 60 digits), extreme tails included.
GAUSSIAN_CASES = [
    (0.5, 0.0, 0.197412651366), (0.5, 1.0, 0.00682959498311), (0.5, 4.0, 2.70603380296e-16),
    (1.0, 0.5, 0.238421708135), (1.0, 2.0, 0.0209236358211), (1.0, 4.0, 4.71224120079e-05),
    (2.0, 1.0, 0.509861660055), (2.0, 4.0, 0.0849533186711),
    (0.5, 6.0, 1.42222804349e-33), (1.0, 10.0, 9.81270582685e-23), (1.0, 20.0, 2.6647067054e-86),
    (0.2, 3.0, 2.16378577086e-52), (3.0, 30.0, 2.43098043176e-18), (0.01, 0.001, 0.0035110920258421),
    (0.001, 0.005, 5.35954704106e-11),
]


def _gaussian_delta_mp(mu: float, eps: float) -> float:
    with mp.workdps(60):
        m, e = mp.mpf(mu), mp.mpf(eps)
        return float(mp.ncdf(m / 2 - e / m) - mp.exp(e) * mp.ncdf(-m / 2 - e / m))


def test_gaussian_profile_closed_form_and_tails():
    mu, eps, printed = (list(c) for c in zip(*GAUSSIAN_CASES, strict=True))
    want = [_gaussian_delta_mp(m, e) for m, e in zip(mu, eps, strict=True)]
    torch.testing.assert_close(_t(printed), _t(want), rtol=1e-10, atol=0.0)  # the table is the closed form
    torch.testing.assert_close(delta_gaussian(_t(eps), _t(mu)), _t(want), rtol=1e-10, atol=0.0)


def test_gaussian_profile_mpmath_oracle():
    # Oracle: Φ(a) − e^ε Φ(b) at 60 digits (mpmath 1.3). rtol 1e-13 — the scaled-erfc form of d
    # loses nothing to cancellation (a plain float64 formula loses ~1e-10 at μ = 0.1, ε = 8).
    mp.mp.dps = 60
    cases = [(0.1, 0.5), (0.1, 2.0), (0.25, 1.0), (0.05, 0.3), (1.5, 8.0), (5.0, 0.0), (5.0, 8.0), (0.3, 4.0)]
    for mu, eps in cases:
        m, e = mp.mpf(mu), mp.mpf(eps)
        want = mp.ncdf(m / 2 - e / m) - mp.exp(e) * mp.ncdf(-m / 2 - e / m)
        got = log_delta_gaussian(eps, mu).item()
        assert got == pytest.approx(float(mp.log(want)), rel=1e-13, abs=1e-13)


def test_gaussian_profile_limits():
    # ε → ∞ with fixed μ: δ → 0; μ → ∞: δ → 1 (TV → 1).
    assert delta_gaussian(200.0, 1.0).item() == 0.0
    assert delta_gaussian(0.0, 80.0).item() == pytest.approx(1.0, abs=1e-15)
    # gradient through the profile is finite (guarded branches; calibration by autograd)
    mu = _t(0.7).requires_grad_()
    delta_gaussian(_t([0.0, 1.0, 9.0]), mu).sum().backward()
    assert torch.isfinite(mu.grad)


# --------------------------------------------------------------------------- Laplace and RR


def test_laplace_profile_closed_form():
    # Closed form (Balle et al. 2018 §5, Laplace with ε₀ = η): δ(ε) = 1 − e^{(ε − η)/2} for ε < η, else 0;
    # e.g. 0.393469340287 at η = 1, ε = 0. rtol 1e-11.
    cases = [(1.0, 0.0), (1.0, 0.25), (1.0, 0.5), (1.0, 1.0), (1.0, 3.0), (0.5, 0.25), (2.0, 0.5), (2.0, 1.9)]
    for eta, eps in cases:
        want = -math.expm1((eps - eta) / 2) if eps < eta else 0.0
        assert delta_laplace(eps, eta).item() == pytest.approx(want, rel=1e-11, abs=1e-300)


def test_randomized_response_profile_is_its_own_delta():
    # Closed form (§5): R_p with p = (e^ε + δ)/(e^ε + 1) has δ_M(ε) = δ exactly; zero beyond log(p/(1−p)).
    for eps, delta in [(1.0, 0.01), (0.3, 0.2), (2.0, 0.0)]:
        p = (math.exp(eps) + delta) / (math.exp(eps) + 1)
        assert delta_randomized_response(eps, p).item() == pytest.approx(delta, abs=1e-15)
        assert delta_randomized_response(eps, 1 - p).item() == pytest.approx(delta, abs=1e-15)
    assert delta_randomized_response(math.log(0.8 / 0.2) + 1e-9, 0.8).item() == 0.0


# ------------------------------------------------------------------------------ group profiles


def test_group_profiles_white_box_beats_black_box():
    eps = _t([0.0, 0.1, 0.5, 1.0, 2.0, 5.0])
    for k in (2, 3, 5):
        white = delta_gaussian_group(eps, 1.0, k)
        black = delta_group_black_box(lambda e: delta_gaussian(e, 1.0), eps, k)
        assert (white <= black + 1e-15).all()
        assert (black <= 1.0).all()
        white_l = delta_laplace_group(eps, 0.5, k)
        black_l = delta_group_black_box(lambda e: delta_laplace(e, 0.5), eps, k)
        assert (white_l <= black_l + 1e-15).all()
    # k = 3, μ = 1, ε = 3: the black-box group bound exceeds 1 (1.41) before clipping, so the bound is 1.
    assert delta_group_black_box(lambda e: delta_gaussian(e, 1.0), 3.0, 3).item() == 1.0
    # ε → 0: the factor tends to k
    got = delta_group_black_box(lambda e: delta_gaussian(e, 0.1), 0.0, 4).item()
    assert got == pytest.approx(4 * delta_gaussian(0.0, 0.1).item(), rel=1e-12)


# ----------------------------------------------------------------------- amplification maps


def test_amplification_map_closed_form():
    # Closed form (Balle et al. 2018 Thm 8): ε' = log(1 + γ(e^ε − 1)), e.g. 0.0170368632362 at ε = 1, γ = 0.01.
    for eps, gamma in [(1.0, 0.01), (1.0, 0.1), (0.1, 0.5), (5.0, 0.001), (2.0, 0.05)]:
        want = math.log1p(gamma * math.expm1(eps))
        assert amplified_epsilon(eps, gamma).item() == pytest.approx(want, rel=1e-11)
        assert base_epsilon(want, gamma).item() == pytest.approx(eps, rel=1e-10)
    assert amplified_epsilon(800.0, 0.01).item() == pytest.approx(800.0 + math.log(0.01), rel=1e-15)


def _poisson_gaussian_removal_mp(gamma: float, mu: float, eps: float) -> float:
    """D_{e^ε}((1−γ)N(0,1) + γN(μ,1) ‖ N(0,1)) in closed form (mpmath, 40 digits): the likelihood ratio exceeds
    e^ε iff z > t, t = (log((e^ε − (1 − γ))/γ) + μ²/2)/μ."""
    with mp.workdps(40):
        g, m, a = mp.mpf(gamma), mp.mpf(mu), mp.e ** mp.mpf(eps)
        t = (mp.log((a - (1 - g)) / g) + m**2 / 2) / m
        return float((1 - g) * mp.ncdf(-t) + g * mp.ncdf(m - t) - a * mp.ncdf(-t))


def test_poisson_amplified_gaussian_closed_form():
    # Balle et al. 2018 Thm 8 applied to the Gaussian profile = the exact removal direction of one
    # Poisson-subsampled Gaussian step (_poisson_gaussian_removal_mp; e.g. 0.0019002737053 at γ = 0.01, μ = 1,
    # ε = 0.01). rtol 1e-10.
    cases = [(0.01, 1.0, 0.01), (0.01, 1.0, 0.5), (0.01, 1.0, 2.0), (0.1, 1.0, 0.1), (0.1, 0.5, 0.1), (0.5, 2.0, 0.5),
             (0.001, 2.0, 1.0)]
    for gamma, mu, eps in cases:
        got = amplify_poisson_remove_add(lambda e, mu=mu: delta_gaussian(e, mu), eps, gamma).item()
        assert got == pytest.approx(_poisson_gaussian_removal_mp(gamma, mu, eps), rel=1e-10)


def test_poisson_amplified_gaussian_is_exact_removal_divergence():
    # Oracle: D_{e^ε}((1−γ)N(0,1) + γN(μ,1) ‖ N(0,1)) by mpmath quadrature over the region where the
    # integrand is positive (the Thm 8 value is attained: Balle et al. 2018 Thm 13).
    mp.mp.dps = 30
    gamma, mu, eps = 0.2, 1.3, 0.4
    a = mp.e**eps
    t = (mp.log((a - (1 - gamma)) / gamma) + mu**2 / 2) / mu  # likelihood ratio exceeds e^ε iff z > t
    want = (1 - gamma) * mp.ncdf(-t) + gamma * mp.ncdf(mu - t) - a * mp.ncdf(-t)
    got = amplify_poisson_remove_add(lambda e: delta_gaussian(e, mu), eps, gamma).item()
    assert got == pytest.approx(float(want), rel=1e-12)


def _wr_white_mp(eps_amp: float, m: int, n: int) -> float:
    """Balle et al. 2018 Thm 10, Eq. (12), with the white-box Gaussian group profiles (μ = k for k records),
    in mpmath (40 digits): Σ_{k=1}^{m} Bin(k; m, 1/n) δ_{N(k)}(ε), ε = log(1 + (e^{ε'} − 1)/γ), γ = 1 − (1 − 1/n)^m."""
    with mp.workdps(40):
        w = 1 / mp.mpf(n)
        gamma = 1 - (1 - w) ** m
        e = mp.log(1 + mp.expm1(eps_amp) / gamma)
        return float(mp.fsum(mp.binomial(m, k) * w**k * (1 - w) ** (m - k)
                             * (mp.ncdf(k / mp.mpf(2) - e / k) - mp.exp(e) * mp.ncdf(-k / mp.mpf(2) - e / k))
                             for k in range(1, m + 1)))


def test_wr_amplification_closed_form():
    # γ = 1 − (1 − 1/n)^m (Balle et al. 2018 Thm 10): 0.0042576127806 at m = 256, n = 60000; 0.40951 at 5 of 10.
    assert tv_wr(256, 60000).item() == pytest.approx(-math.expm1(256 * math.log1p(-1 / 60000)), rel=1e-12)
    assert tv_wr(5, 10).item() == pytest.approx(1 - 0.9**5, rel=1e-12)

    def white(e, k):
        return delta_gaussian_group(e, 1.0, k)

    def black(e, k):
        return delta_group_black_box(lambda x: delta_gaussian(x, 1.0), e, k)

    # white box: the mpmath sum above (0.1573778526, 0.001025866959), rtol 1e-9; black box (0.1653660043,
    # 0.00160750874): the same sum over the black-box group profiles, never below the white box
    for n, m, eps in [(10, 5, 0.1), (100, 10, 1.0)]:
        assert amplify_wr_substitution(white, eps, m, n).item() == pytest.approx(_wr_white_mp(eps, m, n), rel=1e-9)
        w_, g_ = 1 / n, 1 - (1 - 1 / n) ** m
        base = math.log1p(math.expm1(eps) / g_)
        b_want = sum(math.comb(m, k) * w_**k * (1 - w_) ** (m - k) * black(_t([base]), _t([float(k)])).item()
                     for k in range(1, m + 1))
        assert amplify_wr_substitution(black, eps, m, n).item() == pytest.approx(b_want, rel=1e-9)
        assert amplify_wr_substitution(black, eps, m, n) >= amplify_wr_substitution(white, eps, m, n)
        # Thm 11 (hybrid remove/add) has the same bound
        assert amplify_wr_remove_add(white, eps, m, n).item() == amplify_wr_substitution(white, eps, m, n).item()


def test_wr_with_flat_group_profile_reduces_to_gamma_delta():
    # §3.9: if δ_{M,k} ≡ δ_M for all k the WR bound is γ δ_M(ε).
    eps = _t([0.0, 0.2, 1.0])

    def flat(e, k):
        return delta_laplace(e, 1.0) + 0 * k

    want = tv_wr(7, 20) * delta_laplace(base_epsilon(eps, tv_wr(7, 20)), 1.0)
    torch.testing.assert_close(amplify_wr_substitution(flat, eps, 7, 20), want, rtol=1e-13, atol=0.0)


# -------------------------------------------------------------------------------- AJC (Thm 2)


def test_advanced_joint_convexity_identity():
    # Thm 2 is an identity: D_{α'}(μ‖μ') = γ D_α(μ1 ‖ (1−β)μ0 + βμ1') for every mixture pair.
    gen = torch.Generator().manual_seed(7)
    for _ in range(20):
        mu0, mu1, mu1p = (torch.rand(6, generator=gen, dtype=F64) for _ in range(3))
        mu0, mu1, mu1p = mu0 / mu0.sum(), mu1 / mu1.sum(), mu1p / mu1p.sum()
        gamma = torch.rand((), generator=gen, dtype=F64).item() * 0.9 + 0.05
        eps = torch.rand((), generator=gen, dtype=F64).item() * 2.0
        mu = (1 - gamma) * mu0 + gamma * mu1
        mup = (1 - gamma) * mu0 + gamma * mu1p
        want = hockey_stick(mu, mup, eps)
        got = advanced_joint_convexity(mu0, mu1, mu1p, gamma, eps)
        assert got.item() == pytest.approx(want.item(), rel=1e-12, abs=1e-15)


# --------------------------------------------------------------- randomized membership (tightness)


def _rm_pmf(p, inclusion):
    one = randomized_membership_output(p, inclusion)
    return torch.stack([1 - one, one])


def _sup_divergence(px, py, eps):
    return max(hockey_stick(px, py, eps).item(), hockey_stick(py, px, eps).item())


def _brute_poisson(p, gamma, n, eps):
    # x = {0..n−1} ∋ v = 0, x' = x \ {v}: enumerate every Poisson subsample of x and of x'.
    def law(records):
        out = _t(0.0)
        for size in range(len(records) + 1):
            for y in itertools.combinations(records, size):
                prob = gamma ** len(y) * (1 - gamma) ** (len(records) - len(y))
                out = out + prob * randomized_membership_output(p, float(0 in y))
        return torch.stack([1 - out, out])

    return _sup_divergence(law(range(n)), law(range(1, n)), eps)


def _brute_wor(p, m, n, eps):
    # x = {0..n−1}, x' = x with v = 0 substituted by n: enumerate every m-subset.
    def law(records):
        subsets = list(itertools.combinations(records, m))
        one = sum(randomized_membership_output(p, float(0 in y)) for y in subsets) / len(subsets)
        return torch.stack([1 - one, one])

    return _sup_divergence(law(range(n)), law([*range(1, n), n]), eps)


def _brute_wr(p, m, n, eps):
    def law(records):
        draws = list(itertools.product(records, repeat=m))
        one = sum(randomized_membership_output(p, float(0 in y)) for y in draws) / len(draws)
        return torch.stack([1 - one, one])

    return _sup_divergence(law(range(n)), law([*range(1, n), n]), eps)


def test_randomized_membership_attains_amplified_profiles():
    # Brute force (exhaustive enumeration of subsamples, n = 6) = Lemma 12 closed form = Thms 8/9/10
    # applied to the base profile φ_p (Thm 13: the theorems are tight). The values in closed form: for
    # randomized membership the profile is δ(ε) = max(0, γ(2p − 1) − (e^ε − 1)(1 − p)) (Lemma 12).
    p, n, m = 0.8, 6, 3

    def phi(e):
        return delta_randomized_response(e, p)

    for alpha in [1.0, 1.1, 1.5, 2.0]:
        eps = math.log(alpha)
        brute = {
            "poisson": _brute_poisson(p, 0.3, n, eps),
            "wor": _brute_wor(p, m, n, eps),
            "wr": _brute_wr(p, m, n, eps),
        }
        theorem = {
            "poisson": amplify_poisson_remove_add(phi, eps, 0.3).item(),
            "wor": amplify_wor_substitution(phi, eps, m, n).item(),
            "wr": amplify_wr_substitution(lambda e, k: phi(e) + 0 * k, eps, m, n).item(),
        }
        gammas = {"poisson": tv_poisson(0.3), "wor": tv_wor(m, n), "wr": tv_wr(m, n)}
        for scheme in brute:
            closed = randomized_membership_profile(eps, p, gammas[scheme]).item()
            assert brute[scheme] == pytest.approx(closed, abs=1e-14), scheme
            assert theorem[scheme] == pytest.approx(closed, abs=1e-14), scheme
            g = float(gammas[scheme])
            assert closed == pytest.approx(max(0.0, g * (2 * p - 1) - (alpha - 1) * (1 - p)), abs=1e-12), scheme


def test_randomized_membership_worked_case():
    # Closed form (Lemma 12 above): at ε = 0, δ = γ(2p − 1) = 0.0467495985687 for p = (e + 0.01)/(e + 1), γ = 0.1.
    p = (math.e + 0.01) / (math.e + 1)
    assert randomized_membership_profile(0.0, p, 0.1).item() == pytest.approx(0.1 * (2 * p - 1), abs=1e-14)
    eps_amp = amplified_epsilon(1.0, 0.1).item()
    assert randomized_membership_profile(eps_amp, p, 0.1).item() == pytest.approx(0.001, abs=1e-13)
    # the audit reading: a test with FPR = 1 − p and TPR = 1 − p + γ(2p − 1) recovers ε' exactly
    gamma, delta_amp = 0.1, 0.001
    fpr, fnr = 1 - p, p - gamma * (2 * p - 1)
    assert math.log((1 - delta_amp - fnr) / fpr) == pytest.approx(eps_amp, rel=1e-12)
    assert _rm_pmf(p, 0.0)[1].item() == pytest.approx(fpr, rel=1e-15)


# -------------------------------------------------------------------------------- properties


@settings(max_examples=40, deadline=None)
@given(
    e1=st.floats(0.0, 30.0),
    de=st.floats(0.0, 5.0),
    mu=st.floats(0.01, 20.0),
    gamma=st.floats(1e-4, 1.0),
    k=st.integers(1, 6),
)
def test_profiles_valid_and_non_increasing(e1, de, mu, gamma, k):
    eps = _t([e1, e1 + de])
    profiles = [
        delta_gaussian(eps, mu),
        delta_laplace(eps, mu),
        delta_randomized_response(eps, 0.5 + 0.5 * gamma),
        delta_gaussian_group(eps, mu, k),
        delta_group_black_box(lambda e: delta_gaussian(e, mu), eps, k),
        amplify_poisson_remove_add(lambda e: delta_gaussian(e, mu), eps, gamma),
        amplify_wor_substitution(lambda e: delta_laplace(e, mu), eps, k, 6),
        amplify_wr_substitution(lambda e, j: delta_gaussian_group(e, mu, j), eps, k, 6),
        randomized_membership_profile(eps, 0.5 + 0.5 * gamma, gamma),
    ]
    for d in profiles:
        assert ((d >= 0) & (d <= 1)).all()
        assert d[1] <= d[0] * (1 + 1e-12) + 1e-300
    # more noise never hurts: δ is non-decreasing in μ
    assert delta_gaussian(e1, mu).item() <= delta_gaussian(e1, mu * 1.1).item() * (1 + 1e-12) + 1e-300


# ------------------------------------------------------------------------------------- errors


def test_invalid_inputs():
    with pytest.raises(ValueError, match=r"eps must be in \[0, inf\)"):
        delta_gaussian(-0.1, 1.0)
    with pytest.raises(ValueError, match="mu must be a finite number > 0"):
        delta_gaussian(0.1, 0.0)
    with pytest.raises(ValueError, match="eta must be"):
        delta_laplace(0.1, -1.0)
    with pytest.raises(ValueError, match=r"p must be in \[0, 1\]"):
        delta_randomized_response(0.1, 1.5)
    with pytest.raises(ValueError, match=r"rate must be in \(0, 1\]"):
        amplify_poisson_remove_add(lambda e: e, 0.1, 0.0)
    with pytest.raises(ValueError, match="batch_size must be <= dataset_size"):
        amplify_wor_substitution(lambda e: e, 0.1, 7, 6)
    with pytest.raises(ValueError, match="k must be an integer"):
        delta_group_black_box(lambda e: e, 0.1, 1.5)
    with pytest.raises(TypeError, match="eps"):
        delta_gaussian("a", 1.0)
