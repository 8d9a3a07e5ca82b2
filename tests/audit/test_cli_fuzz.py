"""Fuzzed CLI flags and TOML keys (issue 11 §7): exit codes are only 0, 1 or 2, bad input never prints a
traceback, and a bad configuration leaves no run folder. Audits are not played here: a valid configuration
stops where the games would start (a sentinel), after the run folder and its config.toml were written."""

from __future__ import annotations

import dataclasses
import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from audit import config, runs
from audit.cli import main

FUZZ = settings(max_examples=120, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


class _Reached(BaseException):
    """Raised where the audit games would start (BaseException: the CLI must not swallow it)."""


scalars = st.one_of(
    st.integers(min_value=-10, max_value=3000),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.text(max_size=12),
    st.sampled_from(["poisson", "fixed_size", "mlp", "dirac", "blank", "black_box", "lira", "one_run",
                     "reconstruction", "split", "noise_missing_factor", "clip_norm_mismatch", "accountant"]),
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3), max_leaves=6)
keys = st.sampled_from([(s, f.name) for s, cls in config.SECTIONS.items() for f in dataclasses.fields(cls)]
                       + [("training", "bogus"), ("nope", "x")])


def _toml(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, str):
        return '"' + v.encode("unicode_escape").decode("ascii").replace('"', '\\"') + '"'
    return "[" + ", ".join(_toml(x) for x in v) + "]"


@st.composite
def configs(draw) -> str:
    tables: dict[str, list[str]] = {}
    for section, key in draw(st.lists(keys, max_size=6, unique=True)):
        tables.setdefault(section, []).append(f"{key} = {_toml(draw(values))}")
    text = "".join(f"[{s}]\n" + "\n".join(lines) + "\n" for s, lines in tables.items())
    if draw(st.booleans()):
        text += f"[[variant]]\nname = {_toml(draw(st.text(max_size=8)))}\n"
    return draw(st.sampled_from([text, text.replace("\n", "\r"), text + draw(st.text(max_size=20))]))


@pytest.fixture
def stop_before_games(monkeypatch):
    def reached(*a, **k):
        raise _Reached

    monkeypatch.setattr(runs, "_run_audits", reached)


@pytest.mark.slow
@FUZZ
@given(text=configs())
def test_fuzzed_toml(tmp_path_factory, capsys, stop_before_games, text):
    tmp = tmp_path_factory.mktemp("fuzz")
    cfg = tmp / "c.toml"
    cfg.write_text(text, encoding="utf-8", newline="")
    out = tmp / "runs" / "x"
    capsys.readouterr()  # a valid example before this one returned without reading its run-folder line
    try:
        code = main(["run", str(cfg), "--out", str(out), "--quiet"])
    except _Reached:  # valid: the folder holds the resolved config, which loads back to the same
        assert config.load_resolved(out / "config.toml") == config.load(cfg)
        return
    err = capsys.readouterr().err
    assert code == 2, (code, err)
    assert "Traceback" not in err and err.startswith("dpaudit run: error:"), err
    assert not (tmp / "runs").exists()


numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr),
                    st.integers(-5, 10**6).map(str), st.text(max_size=6))


@FUZZ
@given(sigma=numbers, steps=st.one_of(st.integers(-3, 300).map(str), st.text(max_size=4)),
       rate=st.none() | numbers, batch=st.none() | st.integers(-2, 300).map(str),
       size=st.none() | st.integers(-2, 3000).map(str), target=st.sampled_from(["--delta", "--epsilon"]),
       tval=numbers, sampling=st.sampled_from(["poisson", "fixed-wor", "fixed_wr", "fixed-size", "shuffle"]),
       neighbouring=st.sampled_from(["add-remove", "replace_one", "swap"]),
       group=st.sampled_from(["1", "2", "0", "-1", "x"]))
def test_fuzzed_account_flags(capsys, sigma, steps, rate, batch, size, target, tval, sampling, neighbouring,
                              group):
    argv = ["account", "--noise-multiplier", sigma, "--steps", steps, target, tval, "--sampling", sampling,
            "--neighbouring", neighbouring, "--group-size", group, "--method", "rdp"]
    for flag, v in (("--sample-rate", rate), ("--batch-size", batch), ("--dataset-size", size)):
        if v is not None:
            argv += [flag, v]
    try:
        code = main(argv)
    except SystemExit as e:  # argparse: a malformed flag value
        code = e.code
    err = capsys.readouterr().err
    assert code in (0, 2), (argv, code, err)
    assert "Traceback" not in err, (argv, err)


mechanisms = st.one_of(
    st.text(max_size=30),
    st.builds(lambda kind, items: kind + ":" + ",".join(items),
              st.sampled_from(["gaussian", "laplace", "dpsgd", "randomized_response", "uniform"]),
              st.lists(st.builds(lambda k, v: f"{k}={v}",
                                 st.sampled_from(["sigma", "b", "p", "noise_multiplier", "sample_rate", "steps",
                                                  "neighbouring", "group_size", "x"]),
                                 st.sampled_from(["1", "0.5", "2", "1.0", "-1", "nan", "inf", "1e400", "abc", "",
                                                  "add_remove"])), max_size=4)),
)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(a=mechanisms)
@example(a="-:")
def test_fuzzed_compare_mechanisms(a):
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(["compare", a, "laplace:b=1", "--method", "rdp"])
        except SystemExit as e:  # argparse: a value that looks like a flag ('-:', found by a random run)
            code = e.code
    assert code in (0, 2), (a, code, err.getvalue())
    assert "Traceback" not in err.getvalue(), (a, err.getvalue())

