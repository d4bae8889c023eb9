"""Renderers are pure: findings in, text or documents out."""

from __future__ import annotations

from ddpdoctor.lint import LintFinding
from ddpdoctor.lint.finding import Related
from ddpdoctor.lint.report import counts, json_doc, sarif_doc, text

A = LintFinding("a.py", 3, 5, "DDL003", "sampler never set")
B = LintFinding("b.py", 9, 1, "DDL007", "no destroy")
C = LintFinding("b.py", 12, 9, "DDL001", "barrier first")


def test_text_clean_and_counts() -> None:
    assert text([], 1) == "All clean: 1 file.\n"
    assert text([], 4) == "All clean: 4 files.\n"
    out = text([A, B, C], 2).splitlines()
    assert out[0] == "a.py:3:5: DDL003 sampler never set"
    assert out[1].startswith("    hint: Call sampler.set_epoch(epoch)")
    assert out[-1] == "Found 3 problems (1 fail, 1 warn, 1 info) in 2 files."
    assert text([A], 1).splitlines()[-1] == "Found 1 problem (1 warn) in 1 file."


def test_counts_by_level() -> None:
    assert counts([A, B, C]) == {"total": 3, "fail": 1, "warn": 1, "info": 1}


def test_json_doc_shape() -> None:
    doc = json_doc([A], 7)
    assert doc["schema"] == "ddpdoctor.lint/1" and doc["files"] == 7
    assert doc["findings"][0]["symbol"] == "set-epoch-missing"
    assert doc["findings"][0]["col"] == 5


def test_sarif_levels_and_rule_index() -> None:
    run = sarif_doc([A, B, C])["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    levels = [r["level"] for r in run["results"]]
    assert levels == ["warning", "note", "error"]
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]


R = LintFinding(
    "a.py", 3, 5, "DDL003", "sampler never set", (Related("a.py", 4, "the DataLoader it feeds"),)
)


def test_other_places_in_every_format() -> None:
    """A finding's related places: a `see:` line in text, `related` in JSON (absent when there
    are none, so older readers see the same documents), relatedLocations in SARIF."""
    assert text([R], 1).splitlines()[2] == "    see:  a.py:4: the DataLoader it feeds"
    assert json_doc([R], 1)["findings"][0]["related"] == [
        {"path": "a.py", "line": 4, "note": "the DataLoader it feeds"}
    ]
    assert "related" not in json_doc([A], 1)["findings"][0]
    (result,) = sarif_doc([R])["runs"][0]["results"]
    (where,) = result["relatedLocations"]
    assert where["physicalLocation"]["region"]["startLine"] == 4
    assert where["message"]["text"] == "the DataLoader it feeds"
    assert "relatedLocations" not in sarif_doc([A])["runs"][0]["results"][0]
