"""A fast seeded subset of the PLD differential battery (benchmarks/bench_differential.py).

Against exact values at q = 1 (the T-fold Gaussian mechanism is μ-GDP, μ = s√T/σ; mpmath
bisection of the closed-form profile, Balle & Wang 2018 Thm 8) and, where the ``peers`` extra
is installed, dp_accounting 0.6 (PLD and RDP), prv_accountant 0.2 and Opacus 1.6: no unsound
end (our upper below a certified lower end, our lower above any peer's upper end), no fallback to
RDP, and the upper end within 1.2× of the tightest peer (issue 22's acceptance ratio).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import bench_differential as bd


def _fast(n: int, seed: int, max_steps: int) -> list[bd.Config]:
    """Seeded random configurations of the battery's laws, T capped for a fast lane."""
    out = []
    for c in bd.random_configs(n, seed):
        out.append(bd.Config(c.sigma, c.q, min(c.steps, max_steps), c.delta, c.relation))
    return out


EXACT = [bd.Config(c.sigma, 1.0, c.steps, c.delta, c.relation) for c in bd.random_configs(10, 11)]


@pytest.mark.parametrize("c", EXACT, ids=lambda c: f"s{c.sigma:.3g}-T{c.steps}-d{c.delta:.1e}-{c.relation}")
def test_exact_at_q1_is_bracketed(c):
    row = bd.evaluate(c, peers=False)
    ex_lo, ex_up = row.certified_lower["exact"], row.peers["exact"]      # ε rounded outwards
    assert row.lower <= ex_up and ex_lo <= row.upper
    assert row.upper <= ex_up * (1 + 1e-12) + 1e-12    # the μ-GDP path is exact to float rounding
    assert not row.unsound()


@pytest.mark.peers
def test_seeded_subset_against_peers():
    """14 seeded configurations (T ≤ 1000) against every installed peer (≈ 20 s idle)."""
    pytest.importorskip("dp_accounting")
    pytest.importorskip("prv_accountant")
    pytest.importorskip("opacus")
    rows = [bd.evaluate(c, prv_max_steps=1000, timeout=60.0) for c in _fast(14, 5, 1000)]
    for r in rows:
        assert not r.unsound(), (r.config, r.unsound())
        assert not r.fallback, (r.config, r.error)
        assert math.isfinite(r.tightest), r.config           # some peer answered
        assert r.looseness <= 1.2, (r.config, r.upper, r.peers)
    s = bd.summarise(rows)
    assert s["unsound"] == 0 and s["fallback_to_rdp"] == 0


def test_battery_counts_an_unsound_row():
    """The battery's checks can fail: a made-up row with our upper below a certified lower end
    and our lower above a peer's upper is counted twice."""
    c = bd.Config(1.0, 0.01, 10, 1e-5, "add-remove")
    row = bd.Row(c, upper=1.0, lower=3.0, pld_upper=1.0, upper_source=None, error=None, seconds=0.0,
                 peers={"p": 2.0}, certified_lower={"p": 1.5})
    assert len(row.unsound()) == 2
    assert bd.summarise([row])["unsound"] == 2


def test_dp_accounting_pld_figure_is_an_estimate_not_a_certificate():
    """Our lower end above dp_accounting's PLD figure is listed for checking, not counted as
    unsound: at T = 1197, δ = 1.6e-12 (σ = 0.7916, q = 0.03047) its interval-1e-3 figure 19.714 is
    below prv_accountant 0.2's certified lower end 19.719 (bracket [19.719, 19.740], eps_error 0.01)."""
    c = bd.Config(0.7915879881350002, 0.030472562792614302, 1197, 1.642384910109319e-12, "add-remove")
    row = bd.Row(c, upper=19.7345, lower=19.7268, pld_upper=19.7345, upper_source=None, error=None, seconds=0.0,
                 peers={"dp_accounting_pld": 19.714034542974034, "prv": 19.739851911902598},
                 certified_lower={"prv": 19.718901990852892})
    assert row.unsound() == []
    assert len(row.estimate_conflicts()) == 1
    assert bd.summarise([row])["lower_above_dp_accounting_pld_estimate"] == 1
