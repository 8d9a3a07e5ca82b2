"""Issue 28 (RDP rows) and issue 23 §3 (accountant fuzz items): the Poisson kernel's tables and
chunks change cost and memory, never values; extreme inputs give a number or a clear error."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

import accountants as acc
from accountants import api
from accountants._numerics import log_binom
from accountants.orders import default_orders
from accountants.rdp import _moments, poisson
from accountants.rdp.conversion import steps_factor
from accountants.rdp.fixed_size import MAX_WR_BATCH, fixed_size_step_rdp, rdp_fswr_add_remove_upper

F64 = torch.float64


def _configs(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    sig = 0.5 + 4.5 * torch.rand(n, generator=g, dtype=F64)
    q = 10 ** (-4 + 3 * torch.rand(n, generator=g, dtype=F64))
    t = torch.randint(100, 100_000, (n,), generator=g).to(F64)
    return sig, q, t


def test_log_binom_table_is_bit_identical_to_log_binom():
    # The integer-order table gathers lgamma of the integers instead of calling log_binom per
    # bucket; same lgamma values combined in the same order, so equality is exact (−inf for k > n).
    n = torch.tensor([2.0, 3.0, 11.0, 64.0, 700.0, 1024.0], dtype=F64)
    k = torch.arange(2, 1025, dtype=F64)
    lg = torch.lgamma(torch.arange(0, 1026, dtype=F64))
    assert torch.equal(poisson._log_binom_table(lg, n, k), log_binom(n[:, None], k))


def test_integer_orders_do_not_depend_on_grouping_or_batch():
    # Per element the integer series is one logsumexp over the same terms, whatever the bucket
    # grouping (merged for one configuration, split for many): equal to rounding (rtol 1e-14).
    orders = default_orders()
    ints = orders[orders == torch.round(orders)]
    sig, q, _ = _configs(7, seed=3)
    batch = poisson.rdp_poisson_gaussian(ints, q[:, None], sig[:, None])
    for i in range(7):
        one = poisson.rdp_poisson_gaussian(ints, q[i], sig[i])
        torch.testing.assert_close(batch[i], one, rtol=1e-14, atol=0.0)


def test_fractional_series_blocks_respect_the_memory_cap(monkeypatch):
    # The doubling blocks (up to 4,096 terms) used to take every active row at once, bypassing
    # _MAX_ELEMS (7.65 GB at 100,000 configurations). With a tiny cap every block is split by rows,
    # and the values are unchanged (rows are independent: exact equality).
    orders = torch.tensor([1.01, 1.05, 1.3, 2.5, 7.7], dtype=F64)
    q = torch.tensor([[0.2], [0.05], [0.01]], dtype=F64)
    s = torch.tensor([[0.9], [0.7], [2.0]], dtype=F64)
    want = poisson.rdp_poisson_gaussian(orders, q, s)
    seen: list[tuple[int, int]] = []
    block = poisson._block_terms

    def spy(a, qq, ss, z0, i):
        seen.append((a.shape[0], i.numel()))
        return block(a, qq, ss, z0, i)

    cap = 2048
    monkeypatch.setattr(poisson, "_MAX_ELEMS", cap)
    monkeypatch.setattr(poisson, "_block_terms", spy)
    got = poisson.rdp_poisson_gaussian(orders, q, s)
    assert torch.equal(got, want)
    assert max(b for _, b in seen) > cap // 2  # blocks wider than the cap allows for two rows
    assert all(rows == 1 or rows * b <= cap // 2 for rows, b in seen)  # (rows × terms) ≤ cap / 2


def test_poisson_epsilon_chunks_give_the_same_values_and_one_warning_each(monkeypatch):
    sig, q, t = _configs(40, seed=1)
    sig[0], q[0], t[0] = 0.3, 0.5, 100_000.0  # huge ε: best order 1.01 (lower edge)
    sig[20], q[20], t[20] = 50.0, 1e-4, 10.0  # tiny ε: best order 1024 (upper edge), another chunk
    with warnings.catch_warnings(record=True) as w_one:
        warnings.simplefilter("always")
        want = acc.poisson_epsilon(sig, q, t, 1e-5)
    monkeypatch.setattr(api, "_BATCH_ELEMS", 3 * default_orders().numel())  # 3 configurations per chunk
    with warnings.catch_warnings(record=True) as w_chunks:
        warnings.simplefilter("always")
        got = acc.poisson_epsilon(sig, q, t, 1e-5)
    # Small chunks merge the order buckets differently, so the fractional series stop at other
    # block ends: equal to their certified tolerance (1e-11 relative remainder; rtol 1e-10).
    torch.testing.assert_close(got[0], want[0], rtol=1e-10, atol=0.0)
    assert sorted(str(w.message) for w in w_chunks) == sorted(str(w.message) for w in w_one)
    assert len(w_one) == 2 and "(1.01)" in str(w_one[0].message) + str(w_one[1].message)


def test_low_extension_only_for_configurations_at_the_lower_edge(monkeypatch):
    # Orders 1.01-1.07 are evaluated only for the configurations whose best base order is 1.1
    # (architecture.md); the others get +inf there, so their ε equals a lone call's.
    sig, q, t = _configs(6, seed=2)
    sig[2], q[2], t[2] = 0.5, 0.1, 100_000.0
    calls: list[tuple[int, ...]] = []
    real = api.rdp_poisson_gaussian

    def spy(o, qq, ss):
        calls.append(tuple(torch.broadcast_shapes(o.shape, qq.shape)))
        return real(o, qq, ss)

    monkeypatch.setattr(api, "rdp_poisson_gaussian", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eps, order = acc.poisson_epsilon(sig, q, t, 1e-5)
        assert (1, 5) in calls  # one configuration × the five near-one orders
        assert float(order[2]) < 1.1
        for i in (0, 1, 3):
            e1, _ = acc.poisson_epsilon(sig[i : i + 1], q[i : i + 1], t[i : i + 1], 1e-5)
            torch.testing.assert_close(eps[i : i + 1], e1, rtol=1e-10, atol=0.0)  # series rounding only


def test_single_epsilon_matches_the_pinned_value():
    # Abadi et al. MNIST setting; 2.5965 is the README/doctest value (the refinement grid of
    # architecture.md); Opacus 1.6 gives 2.6029 on its grid, which ours must never exceed.
    e = acc.epsilon(acc.DPSGD(1.1, acc.Poisson(256 / 60_000), 14_062), delta=1e-5).value
    assert round(e, 4) == 2.5965
    assert e <= 2.6029


def test_steps_factor_rounds_up_and_never_overflows():
    assert steps_factor(14_062) == 14_062.0
    big = 2**53 + 1  # not a float: the next float up
    assert steps_factor(big) >= big and steps_factor(big) == float(2**53 + 2)
    assert steps_factor(10**400) == math.inf


def test_forty_digit_steps_give_a_number():
    # Issue 23 §3: a 40-digit --steps was an OverflowError (exit 3) in the RDP composition.
    steps = 1234567890123456789012345678901234567890
    spec = acc.DPSGD(1.0, acc.Poisson(0.01), steps)
    e = acc.epsilon(spec, delta=1e-5, method="rdp").value
    one = acc.epsilon(acc.DPSGD(1.0, acc.Poisson(0.01), 10**6), delta=1e-5, method="rdp").value
    assert math.isfinite(e) and e > one * 1e30  # RDP grows linearly in T: ≥ 1e33 × the T = 1e6 curve
    assert acc.delta(spec, 1.0, method="rdp").value == 1.0
    g = acc.epsilon(acc.DPSGD(1.0, acc.Poisson(0.01), steps, group_size=2), delta=1e-5, method="rdp").value
    assert g >= e


def test_cli_forty_digit_steps_rdp_exit_0(capsys):
    from audit.cli import main

    rc = main(["account", "--steps", "1" * 40, "--noise-multiplier", "1", "--sample-rate", "0.01",
               "--delta", "1e-5", "--method", "rdp", "--json"])
    assert rc == 0
    assert '"epsilon": 9.4' in capsys.readouterr().out  # T·ε(1.01) ≈ 1e39 × 1e-4 ≈ 1e35


def test_fixed_wr_huge_batch_is_a_clear_error():
    # Issue 23 §3: B = N = 1e18 allocated 8e18 bytes. Now refused up front, by supports() too.
    spec = acc.DPSGD(1.0, acc.FixedSize(10**18, 10**18, replace=True), 10)
    assert not acc.supports(spec, "rdp")
    with pytest.raises(acc.UnsupportedError, match=f"batch_size <= {MAX_WR_BATCH}"):
        acc.epsilon(spec, delta=1e-5, method="rdp")
    with pytest.raises(ValueError, match="batch_size must be in"):
        rdp_fswr_add_remove_upper(torch.tensor([2.0], dtype=F64), 1.0, 10**18, 10**18)
    with pytest.raises(acc.UnsupportedError, match="batch_size"):
        fixed_size_step_rdp(torch.tensor([2.0], dtype=F64), 1.0, MAX_WR_BATCH + 1, 10**6, replace=True)


def test_cli_fixed_wr_huge_batch_exit_2(capsys):
    from audit.cli import main

    rc = main(["account", "--sampling", "fixed_wr", "--batch-size", str(10**18), "--dataset-size", str(10**18),
               "--steps", "10", "--noise-multiplier", "1", "--delta", "1e-5", "--method", "rdp"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "batch_size" in err and len(err.strip().splitlines()) == 1


def test_moment_modes_are_resolved_at_tiny_c():
    # σ = 1e40 (c = 4/σ² = 4e-80): the one-sided modes of (e^y − 1)^k φ are ≈ ±√(kc) (first-order
    # expansion of g'(y) = k e^y/(e^y − 1) − (y + c/2)/c = 0 at small y; relative error O(√c)).
    # A fixed 120 halvings of the O(10) bracket left them ~1e-35 off, i.e. ~1e6 quadrature nodes
    # per moment and > 30 s for epsilon(DPSGD(1e40, Poisson(3.69e-63), 10**12, REPLACE_ONE)).
    c = torch.tensor([4e-80, 4e-80], dtype=F64)
    k = torch.tensor([3.0, 6.0], dtype=F64)
    want = torch.sqrt(k * c)
    for positive, sign in ((True, 1.0), (False, -1.0)):
        got = _moments._mode(c, k, positive)
        assert torch.all((got - sign * want).abs() <= 1e-3 * torch.sqrt(c))


def test_replace_one_huge_sigma_tiny_rate_gives_a_number():
    spec = acc.DPSGD(1e40, acc.Poisson(3.69e-63), 10**12, acc.Neighbouring.REPLACE_ONE)
    e = acc.epsilon(spec, delta=0.4246).value
    # σ = 1e40: the unsubsampled bound 2αT/σ² ≈ 1e-68 already makes ε = 0 at this δ.
    assert e == 0.0
