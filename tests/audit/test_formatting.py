"""audit.formatting: printed upper bounds are rounded up and lower bounds down, everywhere a bound
is printed (issue 23 §5: the accountant's ε = 2.36613... printed to nearest as "2.366" and copied
into a claim failed the claim check)."""

import dataclasses
import re
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

import accountants as acc
from audit import formatting as fmt
from audit import model, report
from audit.cli import main

from .test_model import audit_result, run_result

# 1.7117144437828522: acc.epsilon(DPSGD(1.1, Poisson(0.01), 1000), 1e-5, RDP); nearest at 4 and 6
# significant digits rounds it DOWN ("1.712" is above it, "1.71171" below), so it is the test value.
X = 1.7117144437828522


def test_the_value_whose_nearest_rounding_goes_the_wrong_way():
    assert float(fmt.nearest(X, 6)) < X  # the defect: to nearest, the printed upper bound is below the bound
    assert fmt.upper(X, 6) == "1.71172" and fmt.lower(X, 6) == "1.71171"
    assert fmt.upper(X, 4) == "1.712" and fmt.lower(X, 4) == "1.711"
    assert fmt.upper(X, 3, fixed=True) == "1.712" and fmt.lower(X, 3, fixed=True) == "1.711"
    assert fmt.upper(2.5, 4) == "2.5" and fmt.lower(2.5, 4) == "2.5"  # exact values are not nudged
    assert fmt.upper(0.1, 3, fixed=True) == "0.100"  # the float 0.1 reads back as itself: not "0.101"
    assert fmt.upper(9.9996, 4) == "10" and fmt.lower(-9.9996, 4) == "-10"
    assert fmt.upper(float("inf")) == "inf" and fmt.exact(4.5) == "4.5" and fmt.exact(2.3661234567) == "2.3661234567"


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300),
       st.integers(1, 12), st.booleans())
def test_direction_holds_for_every_float(x, digits, fixed):
    if fixed and abs(x) > 1e15:
        digits = 0  # keep the decimal string short
    assert float(fmt.upper(x, digits, fixed=fixed)) >= x
    assert float(fmt.lower(x, digits, fixed=fixed)) <= x
    assert abs(Decimal(fmt.nearest(x, digits, fixed=fixed)) - Decimal(repr(x))) <= \
        abs(Decimal(fmt.upper(x, digits, fixed=fixed)) - Decimal(fmt.lower(x, digits, fixed=fixed)))


def test_account_prints_upper_bounds_that_can_be_claimed(capsys):
    spec = acc.DPSGD(1.1, acc.Poisson(0.01), 1000)
    assert main(["account", "--noise-multiplier", "1.1", "--sample-rate", "0.01", "--steps", "1000",
                 "--delta", "1e-5", "--method", "all"]) == 0
    out = capsys.readouterr().out
    printed = {m: float(v) for m, v in re.findall(r"(\w+): epsilon <= (\S+) at", out)}
    lowers = [float(v) for v in re.findall(r"certified lower (\S+?)[ ,]", out)]
    for method, value in printed.items():
        bound = acc.epsilon(spec, 1e-5, method=method)
        assert value >= bound.value  # copying the printed ε into a claim passes the accountant check
        assert value - bound.value < 1e-5 * bound.value  # and costs at most one unit in the 6th digit
    assert printed["rdp"] == 1.71172  # the value X above, rounded up (to nearest it printed 1.71171)
    pld = acc.epsilon(spec, 1e-5, method="pld")
    assert lowers and lowers[0] <= pld.lower


def test_report_rounds_each_bound_in_its_direction(tmp_path):
    lb = dataclasses.replace(audit_result().epsilon_lower, value=0.80067)
    r = run_result(audit_result(epsilon_lower=lb, ceiling=3.20041, epsilon_tight=2.30011, epsilon_rdp=2.60011))
    row = report.summary_rows(r)[0]
    assert (row[5], row[6], row[9], row[10]) == ("0.800", "3.201", "2.301", "2.601")
    paths = report.render(tmp_path / "run", r)
    for p in (paths["markdown"], paths["html"]):
        text = p.read_text()
        assert "3.201" in text and "3.2005" in text and "2.301" in text and "2.3002" in text  # uppers rounded up
        assert "0.800" in text and "0.8006" in text  # the lower bound rounded down, at 3 and 4 decimals
        for nearest in ("3.200", "3.2004", "2.300", "2.3001", "2.600", "2.6001", "0.801", "0.8007"):
            assert not re.search(rf"(?<![\d.]){re.escape(nearest)}(?!\d)", text), nearest


def test_claim_check_prints_the_claim_as_written_and_the_bound_rounded_up():
    c = model.ClaimCheck(1.71171, 1e-5, X, False, 0.2, True, False, ())
    assert report.claim_status(c) == "not supported"
    assert fmt.exact(c.epsilon) == "1.71171" and float(fmt.upper(c.accountant_epsilon)) >= X


@pytest.mark.parametrize("argv", [["account", "--noise-multiplier", "1", "--steps", "10", "--delta", "1e-5",
                                   "--sample-rate", "0.01", "--bogus"],
                                  ["compare", "gaussian:sigma=1", "laplace:b=1", "--bogus"]])
def test_a_bad_flag_after_a_subcommand_prints_that_subcommands_usage(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: dpaudit {argv[0]} ")  # was "usage: dpaudit [-h] COMMAND ..."
    assert f"dpaudit {argv[0]}: error: unrecognized arguments: --bogus" in err
