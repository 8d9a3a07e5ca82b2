"""accountants.describe: one vocabulary, a lossless dict round trip, one mechanism-string grammar."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import accountants as acc
from accountants.describe import (
    SPEC_FORMAT,
    describe,
    from_dict,
    make_sampling,
    parse_mechanism,
    parse_neighbouring,
    parse_sampling_kind,
    to_dict,
)

rates = st.floats(min_value=1e-9, max_value=1.0, exclude_min=False, allow_subnormal=False)
sigmas = st.floats(min_value=1e-300, max_value=1e300, allow_subnormal=False)


@st.composite
def samplings(draw):
    kind = draw(st.sampled_from(["poisson", "fixed_wor", "fixed_wr"]))
    if kind == "poisson":
        return acc.Poisson(draw(rates))
    n = draw(st.integers(1, 10**9))
    b = draw(st.integers(1, n if kind == "fixed_wor" else 10**9))
    return acc.FixedSize(b, n, replace=kind == "fixed_wr")


@st.composite
def specs(draw):
    return acc.DPSGD(draw(sigmas), draw(samplings()), draw(st.integers(1, 10**9)),
                     draw(st.sampled_from(list(acc.Neighbouring))), draw(st.integers(1, 1000)))


@settings(max_examples=300, deadline=None)
@given(specs())
def test_dpsgd_round_trip_is_lossless(spec):
    d = spec.to_dict()
    assert d["format"] == SPEC_FORMAT
    assert acc.DPSGD.from_dict(d) == spec
    # and through JSON text, as result.json and the resume identity store it
    assert acc.DPSGD.from_dict(json.loads(json.dumps(d))) == spec


@settings(max_examples=50, deadline=None)
@given(st.lists(specs(), min_size=1, max_size=4))
def test_composed_round_trip(parts):
    rel, grp = parts[0].neighbouring, parts[0].group_size
    parts = [acc.DPSGD(p.noise_multiplier, p.sampling, p.steps, rel, grp) for p in parts]
    c = acc.Composed(tuple(parts))
    assert acc.Composed.from_dict(json.loads(json.dumps(c.to_dict()))) == c


@pytest.mark.parametrize("obj", [acc.Gaussian(0.7), acc.Laplace(2.0), acc.RandomizedResponse(0.75),
                                 acc.Poisson(0.25), acc.FixedSize(3, 9, replace=True)])
def test_mechanism_and_sampling_round_trip(obj):
    assert type(obj).from_dict(to_dict(obj)) == obj


def test_from_dict_errors_name_the_key():
    good = acc.DPSGD(1.0, acc.Poisson(0.1), 10).to_dict()
    with pytest.raises(acc.InputError, match=r"spec.format"):
        from_dict({**good, "format": "dpaudit.spec/99"})
    with pytest.raises(acc.InputError, match=r"unknown key 'noise'"):
        from_dict({**good, "noise": 1})
    with pytest.raises(acc.InputError, match=r"spec.sampling is missing rate"):
        from_dict({**good, "sampling": {"kind": "poisson"}})
    with pytest.raises(acc.InputError, match=r"spec.kind must be one of"):
        from_dict({**good, "kind": "dpsgdx"})
    with pytest.raises(TypeError, match=r"not a Gaussian"):
        acc.Gaussian.from_dict(good)


@pytest.mark.parametrize(("spelling", "kind"), [("poisson", "poisson"), ("Fixed-WOR", "fixed_wor"),
                                               ("fixed_size", "fixed_wor"), ("fixed-wr", "fixed_wr")])
def test_sampling_aliases(spelling, kind):
    assert parse_sampling_kind(spelling) == kind


def test_one_vocabulary_for_neighbouring():
    for s in ("add-remove", "add_remove", "ADD_REMOVE", acc.Neighbouring.ADD_REMOVE):
        assert parse_neighbouring(s) is acc.Neighbouring.ADD_REMOVE
    with pytest.raises(acc.InputError, match=r"--neighbouring must be one of \['add_remove', 'replace_one'\]"):
        parse_neighbouring("replace", key="--neighbouring")


def test_make_sampling_rejects_mixed_parameters():
    with pytest.raises(acc.InputError, match="batch_size, dataset_size does not apply"):
        make_sampling("poisson", sample_rate=0.1, batch_size=5, dataset_size=10)
    with pytest.raises(acc.InputError, match="missing dataset_size"):
        make_sampling("fixed_wor", batch_size=5)


def test_parse_mechanism_one_grammar():
    assert parse_mechanism("gaussian:sigma=1") == acc.Gaussian(1.0)
    assert parse_mechanism("Laplace: b = 0.5") == acc.Laplace(0.5)
    spec = parse_mechanism("dpsgd:noise_multiplier=1.1,sampling=fixed-wor,batch_size=64,dataset_size=1000,"
                           "steps=10,neighbouring=replace-one")
    assert spec == acc.DPSGD(1.1, acc.FixedSize(64, 1000), 10, "replace_one")
    assert parse_mechanism("dpsgd:noise_multiplier=1,sample_rate=0.1", defaults={"steps": 1}).steps == 1


@pytest.mark.parametrize(("text", "match"), [
    ("dpsgd:noise_multiplier=1,sample_rate=0.1,steps=1.0", "steps must be a whole number"),
    ("dpsgd:noise_multiplier=1,sample_rate=0.1,steps=2,steps=3", "given twice"),
    ("dpsgd:noise_multiplier=1,steps=2", "missing sample_rate"),
    ("gaussian:sigma=nan", "finite number"),
    ("gaussian:sigma=inf", "finite number"),
    ("gaussian:sigma=1,,", "empty item"),
    ("gaussian:s=1", "unknown 's'"),
    ("gauss:sigma=1", "kind must be one of"),
    ("gaussian", "missing sigma"),
])
def test_parse_mechanism_errors(text, match):
    with pytest.raises(acc.InputError, match=match):
        parse_mechanism(text)


def test_parse_mechanism_restricts_kinds():
    with pytest.raises(acc.InputError, match=r"kind must be one of \['gaussian', 'laplace'\]"):
        parse_mechanism("randomized_response:p=0.7", kinds=("gaussian", "laplace"))


def test_describe_in_words():
    assert describe(acc.DPSGD(1.0, acc.Poisson(0.5), 10)) == "σ = 1, Poisson sampling q = 0.5, 10 steps, add-remove"
    assert describe(acc.DPSGD(2.0, acc.FixedSize(8, 100, replace=True), 1, group_size=2)) == (
        "σ = 2, fixed-size batches of 8 of 100 with replacement, 1 step, add-remove, groups of 2")


def test_input_errors_share_one_base():
    assert issubclass(acc.UnsupportedError, acc.InputError)
    assert issubclass(acc.InputTypeError, acc.InputError) and issubclass(acc.InputTypeError, TypeError)
    with pytest.raises(acc.InputError):
        acc.Poisson(1.5)
    with pytest.raises(acc.InputTypeError):
        acc.DPSGD(True, acc.Poisson(0.5), 1)


# Every description class, with its dict form written out: the byte-exact JSON of result.json and
# of the resume identity (`json.dumps` defaults). Source: the hand-written to_dict of dpaudit before
# issue 24 (main at aeb6ecc), whose output on these objects is pinned here unchanged.
_ONE_PER_CLASS = [
    (acc.Poisson(1), '{"kind": "poisson", "rate": 1.0}'),
    (acc.FixedSize(64, 1000), '{"kind": "fixed_wor", "batch_size": 64, "dataset_size": 1000}'),
    (acc.FixedSize(64.0, 10, replace=True), '{"kind": "fixed_wr", "batch_size": 64, "dataset_size": 10}'),
    (acc.Shuffle(10, 100), '{"kind": "shuffle", "batch_size": 10, "dataset_size": 100}'),
    (acc.RandomAllocation(2, 5), '{"kind": "random_allocation", "k": 2, "steps_per_epoch": 5}'),
    # truncated Poisson: the hand-written to_dict of its first version (wt-trunc 6adadad), same bytes
    (acc.TruncatedPoisson(0.01, 120, 10000),
     '{"kind": "truncated_poisson", "rate": 0.01, "max_batch_size": 120, "dataset_size": 10000}'),
    (acc.Gaussian(1), '{"kind": "gaussian", "sigma": 1.0}'),
    (acc.Laplace(0.5), '{"kind": "laplace", "b": 0.5}'),
    (acc.RandomizedResponse(0.75), '{"kind": "randomized_response", "p": 0.75}'),
    (acc.DPSGD(1.1, acc.Shuffle(10, 100), 7, "replace-one", 2),
     '{"format": "dpaudit.spec/1", "kind": "dpsgd", "noise_multiplier": 1.1, "sampling": {"kind": "shuffle", '
     '"batch_size": 10, "dataset_size": 100}, "steps": 7, "neighbouring": "replace_one", "group_size": 2}'),
    (acc.Composed((acc.DPSGD(2, acc.Poisson(0.1), 3), acc.DPSGD(1, acc.RandomAllocation(1, 4), 8))),
     '{"format": "dpaudit.spec/1", "kind": "composed", "parts": [{"kind": "dpsgd", "noise_multiplier": 2.0, '
     '"sampling": {"kind": "poisson", "rate": 0.1}, "steps": 3, "neighbouring": "add_remove", "group_size": 1}, '
     '{"kind": "dpsgd", "noise_multiplier": 1.0, "sampling": {"kind": "random_allocation", "k": 1, '
     '"steps_per_epoch": 4}, "steps": 8, "neighbouring": "add_remove", "group_size": 1}]}'),
    (acc.Composed(), '{"format": "dpaudit.spec/1", "kind": "composed", "parts": []}'),
]


def test_one_per_class_covers_every_description_class():
    """The table below is complete: one entry (at least) per registered description kind."""
    from accountants import serialise

    assert {obj.kind for obj, _ in _ONE_PER_CLASS} == set(serialise.kinds())


@pytest.mark.parametrize(("obj", "text"), _ONE_PER_CLASS, ids=[type(o).__name__ for o, _ in _ONE_PER_CLASS])
def test_every_description_class_round_trips_byte_exactly(obj, text):
    """The generic to_dict/from_dict (accountants.serialise) writes the pinned bytes and reads them back
    to an equal object, through the function, the method and the class's own from_dict."""
    assert json.dumps(to_dict(obj)) == text
    assert json.dumps(obj.to_dict()) == text
    assert type(obj).from_dict(json.loads(text)) == obj
    assert from_dict(json.loads(text)) == obj


def test_from_dict_of_a_nested_field_names_the_kinds_it_accepts():
    """A sampling dict of a mechanism kind, or a part that is not a DPSGD, is refused naming the place
    and the allowed kinds; aliases are accepted everywhere (one vocabulary)."""
    bad = {"kind": "dpsgd", "noise_multiplier": 1, "sampling": {"kind": "gaussian", "sigma": 1}, "steps": 2}
    with pytest.raises(acc.InputError, match=r"spec.sampling.kind must be one of \['fixed_wor', 'fixed_wr'"):
        from_dict(bad)
    with pytest.raises(acc.InputError, match=r"spec.parts\[0\].kind must be one of \['dpsgd'\]"):
        from_dict({"kind": "composed", "parts": [{"kind": "poisson", "rate": 0.1}]})
    with pytest.raises(acc.InputError, match=r"spec.kind must be one of .*; got None"):
        from_dict({"rate": 0.1})
    assert from_dict({"kind": "Balls-In-Bins", "k": 1, "steps_per_epoch": 3}) == acc.RandomAllocation(1, 3)
    with pytest.raises(acc.InputTypeError, match="sampling describes a Gaussian, not a Poisson"):
        acc.Poisson.from_dict({"kind": "gaussian", "sigma": 1})
