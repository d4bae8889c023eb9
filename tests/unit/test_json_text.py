"""The text `--json` writes: indented like json.dumps(indent=2) for people, but a list or object
of more than schema.MANY items one compact item per line, which json's C encoder writes (a
16,384-rank report in a fraction of the indenting encoder's time). Same document either way."""

from __future__ import annotations

import json

from ddpdoctor.report import schema


def test_small_documents_read_exactly_as_indented_json() -> None:
    doc = {
        "a": 1,
        "b": [1, 2.5, {"c": None, "d": [], "e": {}}],
        "f": {"g": 'x\n\u00e9"', "h": [[True, False]]},
        "i": [],
    }
    assert schema.dumps(doc) == json.dumps(doc, indent=2)


def test_big_lists_and_objects_have_one_compact_item_per_line() -> None:
    ranks = [{"rank": r, "state": "ok", "stack": []} for r in range(schema.MANY + 1)]
    per = {str(r): {"v": [r]} for r in range(schema.MANY + 1)}
    doc = {"ranks": ranks, "per": per, "few": [{"rank": 0}]}
    text = schema.dumps(doc)
    assert json.loads(text) == doc
    lines = text.splitlines()
    assert '    {"rank": 5, "state": "ok", "stack": []},' in lines
    assert '    "7": {"v": [7]},' in lines
    assert '      "rank": 0' in lines  # a small list stays indented
    assert len(lines) == 2 * (schema.MANY + 1) + 11  # the 66 items and 11 lines of frame


def test_values_json_cannot_encode_are_written_as_text() -> None:
    from pathlib import Path

    assert json.loads(schema.dumps({"p": Path("/tmp/x"), "q": [Path("/y")] * 40})) == {
        "p": "/tmp/x",
        "q": ["/y"] * 40,
    }
