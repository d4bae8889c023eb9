"""`ddpdoctor lint` end to end through a subprocess: exit codes, formats, filters, usage errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from ddpdoctor.report.schema import schema_for

FIXTURES = Path(__file__).parent.parent / "fixtures" / "lint"
CLEAN = str(FIXTURES / "clean_tutorial_trainer.py")
HITS = str(FIXTURES / "ddl003_set_epoch.py")
MIXED = str(FIXTURES / "ddl006_rank_zero.py")


def run_lint(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ddpdoctor", "lint", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_clean_file_exits_0() -> None:
    r = run_lint(CLEAN)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip() == "All clean: 1 file."


def test_findings_exit_1_in_ruff_style() -> None:
    r = run_lint(HITS)
    assert r.returncode == 1
    lines = r.stdout.splitlines()
    line = next(i for i, t in enumerate(Path(HITS).read_text().splitlines(), 1) if "# DDL003" in t)
    assert lines[0].startswith(f"{HITS}:{line}:17: DDL003 DistributedSampler shuffles")
    assert lines[1].startswith("    hint: Call sampler.set_epoch(epoch)")
    assert lines[-1] == "Found 1 problem (1 warn) in 1 file."


def test_json_validates_against_schema(tmp_path: Path) -> None:
    r = run_lint("--format", "json", str(FIXTURES))
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, schema_for("lint"))
    assert doc["schema"] == "ddpdoctor.lint/1"
    assert doc["files"] == len(list(FIXTURES.rglob("*.py")))
    assert doc["counts"]["total"] == len(doc["findings"])
    first = doc["findings"][0]
    assert set(first) >= {"path", "line", "col", "code", "symbol", "message", "hint"}
    assert any(f.get("related") for f in doc["findings"])  # validated above too


def test_output_file(tmp_path: Path) -> None:
    out = tmp_path / "lint.json"
    r = run_lint("--format", "json", "-o", str(out), CLEAN)
    assert r.returncode == 0 and r.stdout == ""
    jsonschema.validate(json.loads(out.read_text()), schema_for("lint"))


def test_sarif_structure() -> None:
    r = run_lint("--format", "sarif", MIXED)
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["version"] == "2.1.0" and "sarif" in doc["$schema"]
    run = doc["runs"][0]
    rule_ids = [rule["id"] for rule in run["tool"]["driver"]["rules"]]
    assert "DDL006" in rule_ids
    assert run["results"]
    for result in run["results"]:
        assert result["ruleId"] in rule_ids
        assert result["level"] in ("error", "warning", "note")
        assert result["message"]["text"]
        loc = result["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"]["uri"].endswith("ddl006_rank_zero.py")
        assert loc["region"]["startLine"] >= 1 and loc["region"]["startColumn"] >= 1


def test_select_and_ignore() -> None:
    r = run_lint("--format", "json", "--select", "DDL003,DDL007", str(FIXTURES))
    assert {f["code"] for f in json.loads(r.stdout)["findings"]} == {"DDL003", "DDL007"}
    r = run_lint("--ignore", "DDL003", HITS)
    assert r.returncode == 0


def test_noqa_in_a_file(tmp_path: Path) -> None:
    text = Path(HITS).read_text().replace("# DDL003", "# noqa: DDL003")
    (tmp_path / "train.py").write_text(text)
    assert run_lint(str(tmp_path / "train.py")).returncode == 0
    (tmp_path / "train.py").write_text(text.replace("# noqa: DDL003", "# noqa"))
    assert run_lint(str(tmp_path / "train.py")).returncode == 0


@pytest.mark.parametrize(
    "args",
    [
        ("does/not/exist.py",),
        ("--select", "DDL999", CLEAN),
        ("--ignore", "XYZ", CLEAN),
        ("--format", "xml", CLEAN),
        ("--no-such-option", CLEAN),
        ("-o", "/no/such/folder/report.json", CLEAN),
        ("--root", "/no/such/folder", CLEAN),
        (),
    ],
)
def test_usage_errors_are_one_line_exit_2(args: tuple[str, ...]) -> None:
    r = run_lint(*args)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_folder_without_python_files_is_usage_error(tmp_path: Path) -> None:
    r = run_lint(str(tmp_path))
    assert r.returncode == 2 and "no Python files" in r.stderr


def test_lint_never_imports_torch() -> None:
    code = (
        "import sys; from ddpdoctor.lint.command import run; "
        "from ddpdoctor.lint import lint_paths; "
        f"lint_paths([{str(FIXTURES)!r}]); print('torch' in sys.modules)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.stdout.strip() == "False"
