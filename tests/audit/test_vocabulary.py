"""One vocabulary (issue 24 item 2): every spelling any front end accepts is accepted by all of them (TOML,
`dpaudit account`, `dpaudit score`, result.json), and files hold the canonical spelling."""

import json

import numpy as np
import pytest

import accountants as acc
from accountants import describe
from audit import config, score
from audit.cli import build_parser, main

# Every spelling of fixed-size sampling without replacement any front end accepted before (TOML: fixed_size;
# account: fixed-size, fixed_wor; score: fixed-wor; result.json's spec: fixed_wor).
FIXED_WOR = ["fixed_size", "fixed-size", "fixed_wor", "fixed-wor", "FIXED-WOR", "without_replacement"]
ADD_REMOVE = ["add_remove", "add-remove"]
REPLACE_ONE = ["replace_one", "replace-one", "Replace-One"]


@pytest.mark.parametrize("spelling", FIXED_WOR)
def test_toml_accepts_every_sampling_spelling_and_writes_the_canonical_one(spelling):
    """Before: TOML refused `fixed_wor`, the spelling result.json's spec holds."""
    cfg = config.loads(f'[training]\nsampling = "{spelling}"\nbatch_size = 10\nneighbouring = "replace-one"')
    assert cfg.training.sampling == "fixed_wor" == describe.sampling_kind(acc.FixedSize(10, 100))
    assert cfg.training.neighbouring == "replace_one"
    assert 'sampling = "fixed_wor"' in config.dumps(cfg)


def test_toml_accepts_dashes_in_every_enumerated_key():
    cfg = config.loads('[audit]\ngame = "one-run"\n[attack]\nthreat_model = "black-box"\nscore = "loss"\n'
                       '[canary]\nkind = "blank"\ncount = 4')
    assert cfg.audit.game == "one_run" and cfg.attack.threat_model == "black_box"


def test_toml_refuses_with_replacement_naming_the_trained_kinds():
    with pytest.raises(acc.InputError, match=r"not trained by an audit; choose one of \['fixed_wor', 'poisson'"):
        config.loads('[training]\nsampling = "fixed_wr"')


@pytest.mark.parametrize("spelling", FIXED_WOR)
@pytest.mark.parametrize("relation", REPLACE_ONE)
def test_account_and_score_flags_accept_every_spelling(spelling, relation):
    """Before: `dpaudit score` refused `fixed_wor` and `replace_one`."""
    parser, _ = build_parser()
    common = ["--noise-multiplier", "1", "--steps", "5", "--sampling", spelling, "--batch-size", "10",
              "--dataset-size", "100", "--neighbouring", relation, "--delta", "1e-5"]
    a = parser.parse_args(["account", *common])
    s = parser.parse_args(["score", "x.csv", *common, "--design", "one-run"])
    assert a.sampling == s.sampling == "fixed_wor" and a.neighbouring == s.neighbouring == "replace_one"
    assert s.design == "one_run"


@pytest.mark.parametrize("design", ["multi-run", "multi_run", "one-run", "one_run"])
def test_score_designs_in_both_spellings_write_the_canonical_one(design):
    member = np.arange(100) % 2 == 0
    r = score.audit_scores({"member": member, "score": np.arange(100.0)}, acc.DPSGD(1.0, acc.Poisson(0.5), 10),
                           delta=1e-5, design=design)
    assert r["audits"][0]["design"] == design.replace("-", "_")


def test_what_score_writes_is_read_back_by_the_toml_and_the_flags(tmp_path, capsys):
    """Round trip: the spec score writes into result.json (fixed_wor, replace_one) is accepted by TOML and flags."""
    p = tmp_path / "s.csv"
    p.write_text("member,score\n" + "".join(f"{i % 2},{i}\n" for i in range(100)), encoding="utf-8")
    out = tmp_path / "o"
    code = main(["score", str(p), "--noise-multiplier", "2", "--steps", "5", "--sampling", "fixed-size",
                 "--batch-size", "10", "--dataset-size", "100", "--neighbouring", "replace-one", "--delta", "1e-5",
                 "--out", str(out)])
    assert code in (0, 1)
    spec = json.loads((out / "result.json").read_text())["audits"][0]["spec"]
    kind = spec["sampling"]["kind"]
    assert kind == "fixed_wor" and spec["neighbouring"] == "replace_one"
    cfg = config.loads(f'[training]\nsampling = "{kind}"\nneighbouring = "{spec["neighbouring"]}"\nbatch_size = 10')
    assert cfg.training.sampling == kind
