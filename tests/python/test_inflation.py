"""lipi.inflation and inflation_html against `lipi inflation`."""
import json
import os

import pytest

import lipi
from conftest import ROOT, lipi as run_lipi

FLORES = os.path.join(ROOT, "data/flores200")
TOKS = ["cl100k_base", "bert-base-multilingual-cased"]


def test_rows_are_the_json_report_s_rows():
    want = json.loads(run_lipi("inflation", "-t", TOKS[0], "-t", TOKS[1], "--parallel", FLORES,
                               "--format", "json"))
    rows = lipi.inflation(TOKS, parallel=FLORES, reference="eng_Latn")
    assert rows == want["rows"]
    assert len(rows) == 2 * 4 and {"parity", "fertility"} <= set(rows[0])
    hin = [r for r in rows if r.get("language") == "hin_Deva" and r.get("tokenizer") == "cl100k_base"]
    assert len(hin) == 1 and hin[0]["parity"] > 1


def test_html_is_the_command_line_s_page(tmp_path):
    run_lipi("inflation", "-t", TOKS[0], "--parallel", FLORES, "--format", "html", "-o",
             str(tmp_path / "cli.html"))
    html = lipi.inflation_html([TOKS[0]], parallel=FLORES, path=tmp_path / "py.html")
    assert html == (tmp_path / "cli.html").read_text()
    assert (tmp_path / "py.html").read_text() == html


def test_inflation_errors(tmp_path):
    with pytest.raises(ValueError):
        lipi.inflation(TOKS)
    with pytest.raises(lipi.LipiError) as ex:
        lipi.inflation(["no_such_tokenizer_name"], parallel=FLORES)
    assert ex.value.code == "EIO"
    with pytest.raises(lipi.LipiError):
        lipi.inflation(TOKS, parallel=tmp_path / "missing")


def test_text_mode_is_the_command_line_s(tmp_path):
    mixed = tmp_path / "mixed.txt"
    mixed.write_text("".join(open(os.path.join(FLORES, f), encoding="utf-8").read()
                             for f in ("eng_Latn.txt", "hin_Deva.txt")), encoding="utf-8")
    want = json.loads(run_lipi("inflation", "-t", TOKS[0], "--text", str(mixed), "--format", "json"))
    assert lipi.inflation([TOKS[0]], text=mixed) == want["rows"]
