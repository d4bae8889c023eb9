"""The process boundary, as rules on imports (README: Architecture):
- the parent side (CLI, job/, report/, node/, lint/, triage/, bench's command) imports no torch at
  module level: `ddpdoctor --help` and every report stay fast and work where torch is broken;
- the rank side (rank/) never imports rich, typer or the parent side, not even inside functions;
- report/ imports neither side; runfiles.py and registry.py are the shared seam."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

import ddpdoctor

PKG = Path(ddpdoctor.__file__).parent

PARENT_MODULES = sorted(
    {
        "ddpdoctor.cli",
        "ddpdoctor.registry",
        "ddpdoctor.runfiles",
        "ddpdoctor.bench.command",
        *(
            f"ddpdoctor.{sub}.{p.stem}"
            for sub in ("job", "report", "node", "lint", "triage")
            for p in (PKG / sub).glob("*.py")
            if p.stem != "__init__"
        ),
    }
)


def imported_names(path: Path) -> list[str]:
    """Every module an import statement in the file names, at any depth of the file."""
    names: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names += [f"{node.module}.{a.name}" for a in node.names]
    return names


def loaded_after_import(modules: list[str]) -> list[str]:
    code = (
        "import importlib, json, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_the_parent_side_imports_no_torch_at_module_level() -> None:
    assert len(PARENT_MODULES) > 30  # the glob found the packages
    loaded = loaded_after_import(PARENT_MODULES)
    assert not [m for m in loaded if m == "torch" or m.startswith("torch.")]


def test_help_loads_neither_torch_nor_the_launcher() -> None:
    code = (
        "import sys, json\n"
        "from ddpdoctor import cli\n"
        "try:\n    cli.main(['--help'])\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    loaded = json.loads(out.stderr.strip().splitlines()[-1])
    assert "torch" not in loaded and "psutil" not in loaded
    assert not [m for m in loaded if m.startswith(("ddpdoctor.job", "ddpdoctor.rank"))]


@pytest.mark.parametrize("path", sorted((PKG / "rank").glob("*.py")), ids=lambda p: p.name)
def test_the_rank_side_never_imports_rich_typer_or_the_parent(path: Path) -> None:
    bad = [
        n
        for n in imported_names(path)
        if n.split(".")[0] in ("rich", "typer", "click")
        or n.startswith(("ddpdoctor.job", "ddpdoctor.cli", "ddpdoctor.report.render"))
        or n.startswith(("ddpdoctor.bench.command", "ddpdoctor.lint", "ddpdoctor.triage"))
    ]
    assert bad == []


def test_the_worker_loads_nothing_of_the_parent_transitively() -> None:
    loaded = loaded_after_import(["ddpdoctor.rank.worker", "ddpdoctor.worker"])
    assert "rich" not in loaded and "typer" not in loaded
    assert not [m for m in loaded if m.startswith(("ddpdoctor.job", "ddpdoctor.cli"))]


@pytest.mark.parametrize("path", sorted((PKG / "report").glob("*.py")), ids=lambda p: p.name)
def test_report_imports_neither_side(path: Path) -> None:
    bad = [n for n in imported_names(path) if n.startswith(("ddpdoctor.job", "ddpdoctor.rank"))]
    assert bad == []
