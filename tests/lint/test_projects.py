"""Cross-file analysis on small projects in tests/fixtures/lint/projects/: each folder is linted
as a whole (its own --root) and every file's findings must be exactly the `# DDL00N` comments on
its lines. The helpers live in other modules, reached by absolute, `from pkg import` and
relative imports; nothing is imported or run."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ddpdoctor.lint import lint_paths, lint_source
from ddpdoctor.lint.project import Project, find_root

PROJECTS = Path(__file__).parent.parent / "fixtures" / "lint" / "projects"
EXPECT = re.compile(r"#.*?\b(DDL\d{3})\b")
FOLDERS = sorted(p for p in PROJECTS.iterdir() if p.is_dir())


def expected(folder: Path) -> list[tuple[str, int, str]]:
    out = []
    for path in sorted(folder.rglob("*.py")):
        for lineno, line in enumerate(path.read_text().splitlines(), start=1):
            rel = path.relative_to(folder).as_posix()
            out.extend((rel, lineno, code) for code in EXPECT.findall(line))
    return sorted(out)


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_project(folder: Path) -> None:
    found = sorted(
        (Path(f.path).relative_to(folder).as_posix(), f.line, f.code)
        for f in lint_paths([str(folder)], root=str(folder))
    )
    assert found == expected(folder)


@pytest.mark.parametrize("folder", FOLDERS, ids=[p.name for p in FOLDERS])
def test_default_root_finds_the_same(folder: Path) -> None:
    """Without --root the nearest pyproject.toml above is the root: the helpers are still found
    (from the script's own folder, as `python script.py` would)."""
    found = sorted(
        (Path(f.path).relative_to(folder).as_posix(), f.line, f.code)
        for f in lint_paths([str(folder)])
    )
    assert found == expected(folder)


def test_the_same_script_alone_knows_nothing_of_the_helper() -> None:
    """Without the project (a bare source string) the helper's init is invisible: the findings
    above come from reading utils/dist.py, not from the script's text."""
    script = (PROJECTS / "helper_init" / "train.py").read_text()
    assert {f.code for f in lint_source(script, "train.py")} == set()


def helper_one_level_up(tmp_path: Path) -> str:
    """app/train.py calls start() from distutil.py, which sits one folder above app/."""
    (tmp_path / "app").mkdir()
    (tmp_path / "distutil.py").write_text(
        "import torch.distributed as dist\n\ndef start():\n    dist.init_process_group('nccl')\n"
    )
    (tmp_path / "app" / "train.py").write_text(
        "import torch\nfrom distutil import start\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n\n"
        "if __name__ == '__main__':\n    start()\n    DDP(torch.nn.Linear(2, 2).cuda())\n"
    )
    return str(tmp_path / "app")


def test_root_limits_what_is_read(tmp_path: Path) -> None:
    """A helper outside --root is not read: the script is judged as if the helper were a
    library (silent, the precision-first fallback); with the root one level up it is read."""
    app = helper_one_level_up(tmp_path)
    assert lint_paths([app], root=app) == []
    codes = sorted(f.code for f in lint_paths([app], root=str(tmp_path)))
    assert codes == ["DDL004", "DDL007"]


def test_an_installed_package_is_its_own_root(tmp_path: Path) -> None:
    """A package in site-packages is its own project even when a repository holds the Python
    install (pyenv is a git checkout): the default root stops at the package's folder, so a
    lint of one package never walks every other installed one."""
    (tmp_path / ".git").mkdir()
    pkg = tmp_path / "lib" / "python3.11" / "site-packages" / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "sub" / "mod.py").write_text("x = 1\n")
    (tmp_path / "lib" / "python3.11" / "site-packages" / "other.py").write_text("y = 2\n")
    assert find_root([str(pkg / "sub" / "mod.py")]) == str(pkg)
    assert find_root([str(pkg)]) == str(pkg)
    site = pkg.parent
    assert find_root([str(pkg), str(site / "other.py")]) == str(site)  # common root: no climb
    assert find_root([str(tmp_path / "lib")]) == str(tmp_path)  # outside: the marker counts


def test_cli_root_option(tmp_path: Path) -> None:
    """`ddpdoctor lint --root DIR`: the same helper read or not, through the command line."""
    app = helper_one_level_up(tmp_path)

    def run(root: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "ddpdoctor", "lint", "--root", root, app]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)

    assert run(app).returncode == 0
    wide = run(str(tmp_path))
    assert wide.returncode == 1
    assert "train.py:7:9: DDL004" in wide.stdout and "(set up through start())" in wide.stdout


def test_order_of_files_does_not_matter(tmp_path: Path) -> None:
    """A script first read as another script's import (and found to hold no set-up words)
    is still judged in full when its own turn comes."""
    (tmp_path / "helpers.py").write_text(
        "import torch.distributed as dist\n\ndef init_distributed_mode():\n"
        "    dist.init_process_group('nccl')\n"
    )
    (tmp_path / "b_eval.py").write_text(
        "import helpers\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\n"
        "def extract(model):\n    return DDP(model)\n\n"
        "if __name__ == '__main__':\n    helpers.init_distributed_mode()\n"
    )
    (tmp_path / "a_copy.py").write_text(
        "from b_eval import extract  # reads b_eval.py first: it names DDP\n\nextract(None)\n"
    )
    together = [(Path(f.path).name, f.code) for f in lint_paths([str(tmp_path)])]
    alone = [(Path(f.path).name, f.code) for f in lint_paths([str(tmp_path / "b_eval.py")])]
    assert together == alone == [("b_eval.py", "DDL007")]


def test_a_worker_spawned_from_another_module_is_judged_alone() -> None:
    """workers.py linted by itself: launch.py, elsewhere in the project, spawns run_worker, so
    run_worker is a process of its own and its missing teardown is reported in workers.py."""
    folder = PROJECTS / "spawn_elsewhere"
    found = lint_paths([str(folder / "workers.py")], root=str(folder))
    assert [(f.line, f.code) for f in found] == [(10, "DDL007")]
    assert "spawned worker run_worker()" in found[0].message


def test_a_worker_spawned_under_an_import_alias_is_found(tmp_path: Path) -> None:
    """The launcher starts the worker under another name (`from workers import run_worker as
    go`; `Process(target=go)`): the byte-level test that spares parsing launchers whose spawn
    calls start other functions must still let this one through."""
    source = (PROJECTS / "spawn_elsewhere" / "workers.py").read_text()
    (tmp_path / "workers.py").write_text(source)
    (tmp_path / "launch.py").write_text(
        "import torch.multiprocessing as mp\nfrom workers import run_worker as go\n\n"
        "if __name__ == '__main__':\n    p = mp.Process(\n        target=go, args=(0, 1))\n"
        "    p.start()\n"
    )
    found = lint_paths([str(tmp_path / "workers.py")], root=str(tmp_path))
    assert [(f.line, f.code) for f in found] == [(10, "DDL007")]
    (tmp_path / "launch.py").write_text(
        "import torch.multiprocessing as mp\nfrom workers import make_group as go\n\n"
        "def run(rank):\n    go(rank, 2)\n\n"
        "if __name__ == '__main__':\n    mp.spawn(run, nprocs=2)\n"
    )
    assert lint_paths([str(tmp_path / "workers.py")], root=str(tmp_path)) == []


def test_without_its_launcher_a_worker_module_is_a_helper(tmp_path: Path) -> None:
    """The same module in a project where nothing spawns it: a library that sets a group up,
    whose caller decides when training ends (silent, the precision-first fallback)."""
    source = (PROJECTS / "spawn_elsewhere" / "workers.py").read_text()
    (tmp_path / "workers.py").write_text(source)
    (tmp_path / "launch.py").write_text("import workers\n\nworkers.run_worker(0, 1)\n")
    assert lint_paths([str(tmp_path / "workers.py")], root=str(tmp_path)) == []


def test_a_chain_through_a_module_without_effect_words_is_followed() -> None:
    """tools/train.py alone: setup() lives in core/config.py, which never names the group but
    calls core/comm.py, which sets it up. Read two modules deep, as when the whole project is
    linted (where config.py is linted, and kept without its functions, before train.py)."""
    folder = PROJECTS / "chained_setup"
    found = lint_paths([str(folder / "tools" / "train.py")], root=str(folder))
    assert [(f.line, f.code) for f in found] == [(13, "DDL007")]
    assert "set up through setup()" in found[0].message


def test_a_teardown_on_one_side_of_a_rank_test_is_named() -> None:
    found = lint_paths([str(PROJECTS / "chained_setup")], root=str(PROJECTS / "chained_setup"))
    split = [f for f in found if f.path.endswith("evaluate.py")]
    assert [f.line for f in split] == [9]
    assert "line 14 runs on one side of a rank-0 test only" in split[0].message


def test_a_name_imported_two_ways_is_left_to_the_index(tmp_path: Path) -> None:
    """The light walk that spares indexing a module answers "may set a group up" when one
    local name is bound by two imports (`import groups as s` here, `import quiet as s` in a
    function): only the index knows which one a call means."""
    (tmp_path / "quiet.py").write_text("def start():\n    return 0\n")
    (tmp_path / "groups.py").write_text(
        "import torch.distributed as dist\n\ndef start():\n    dist.init_process_group('gloo')\n"
    )
    source = "import groups as s\n\ndef setup():\n    import quiet as s\n    s.start()\n"
    (tmp_path / "app.py").write_text(source)
    project = Project(str(tmp_path))
    assert project.may_reach_init(ast.parse(source), str(tmp_path / "app.py"))
    alone = "import quiet as s\n\ndef setup():\n    s.start()\n"
    assert not project.may_reach_init(ast.parse(alone), str(tmp_path / "app.py"))


def test_import_candidates_are_answered_from_folder_listings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An import is looked for in many folders that do not exist; the listings of the folders
    above answer those, and the disk is asked only of a name a listing holds. A symlinked
    folder is listed like any other."""
    real = tmp_path / "real"
    real.mkdir()
    (real / "dist_util.py").write_text("def setup():\n    pass\n")
    proj = tmp_path / "proj"
    (proj / "data").mkdir(parents=True)  # a folder without __init__.py
    (proj / "data" / "loader.py").write_text("x = 1\n")
    (proj / "helpers").symlink_to(real, target_is_directory=True)
    project = Project(str(proj))
    asked: list[str] = []
    isfile = os.path.isfile
    monkeypatch.setattr(os.path, "isfile", lambda p: asked.append(p) or isfile(p))
    train = str(proj / "tools" / "train.py")
    assert project.module_path(train, "helpers.dist_util", 0) == str(
        proj / "helpers" / "dist_util.py"
    )
    assert project.module_path(train, "helpers.missing", 0) is None
    assert project.module_path(train, "data", 0) is None
    assert project.module_path(train, "data.loader", 0) == str(proj / "data" / "loader.py")
    assert asked == [str(proj / "helpers" / "dist_util.py"), str(proj / "data" / "loader.py")]


def test_a_base_constructors_writes_are_told_in_its_own_file() -> None:
    """tools/train.py builds VisionTrainer on every rank; BaseTrainer's constructor writes are
    reported in trainers/base.py, with the line that builds it, and only when base.py is among
    the files linted (the script alone says nothing of other files). Linted alone, base.py is
    judged as the program that reaches it (three imports away) builds it."""
    folder = PROJECTS / "base_trainer_writes"
    found = [f for f in lint_paths([str(folder)], root=str(folder)) if f.code == "DDL006"]
    assert {Path(f.path).name for f in found} == {"base.py"}
    assert all("tools/train.py builds VisionTrainer, a BaseTrainer" in f.message for f in found)
    alone = lint_paths([str(folder / "tools" / "train.py")], root=str(folder))
    assert alone == []
    base = lint_paths([str(folder / "trainers" / "base.py")], root=str(folder))
    assert [(f.line, f.code) for f in base] == [(f.line, f.code) for f in found]


def test_a_helper_starting_the_tracker_is_told_as_a_run_not_a_file() -> None:
    """`start_tracking()` does `wandb.init`: N ranks log N runs of one experiment."""
    folder = PROJECTS / "helper_writes"
    found = [
        f
        for f in lint_paths([str(folder)], root=str(folder))
        if f.code == "DDL006" and "start_tracking" in f.message
    ]
    assert len(found) == 1
    assert "starts a tracker run (wandb.init)" in found[0].message
    assert "N ranks log the same run" in found[0].message


CYCLE_PROBE = """
import sys
from ddpdoctor.lint.project import Project
project = Project(sys.argv[1])
print(project.links_to("import alpha\\n"), project.links_to("import beta\\n"))
"""


def test_an_import_cycle_is_judged_the_same_whatever_the_hash_order(tmp_path: Path) -> None:
    """alpha imports beta and gamma, beta imports alpha back, gamma imports the set-up module:
    beta leads to a set-up through alpha. A depth-first walk that kept "no" for beta when it met
    it again on the cycle answered by the order a set gave (string hashing is salted per process),
    so the probe runs under several hash seeds."""
    (tmp_path / "alpha.py").write_text("import beta\nimport gamma\n")
    (tmp_path / "beta.py").write_text("import alpha\n")
    (tmp_path / "gamma.py").write_text("import setup_group\n")
    (tmp_path / "setup_group.py").write_text(
        "import torch.distributed as dist\n\n\ndef go():\n    dist.init_process_group('gloo')\n"
    )
    answers = {
        subprocess.run(
            [sys.executable, "-c", CYCLE_PROBE, str(tmp_path)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
        ).stdout.strip()
        for seed in range(8)
    }
    assert answers == {"True True"}


def test_a_helper_loader_names_the_helper_sampler_as_its_other_place() -> None:
    """The finding is on the line that gets the loader; its other place (`related`, shown as
    `see:` and as SARIF relatedLocations) is the DistributedSampler the helper builds."""
    folder = PROJECTS / "single_or_distributed_loader"
    (found,) = lint_paths([str(folder / "train.py")], root=str(folder))
    assert (found.code, found.line) == ("DDL003", 28)
    assert [(Path(r.path).name, r.line) for r in found.related] == [("data.py", 13)]
    assert "make_loader()" in found.related[0].note


def test_a_helper_that_falls_back_to_one_process_makes_info_findings() -> None:
    """Uses after a set-up helper that goes on without a group on a plain run are real crashes
    of that run, but whether the script means to support it is not in the code: info level,
    and the message names the helper and the way out."""
    folder = PROJECTS / "helper_fallback"
    found = lint_paths([str(folder / "train.py")], root=str(folder))
    assert [(f.line, f.code, f.level) for f in found] == [
        (15, "DDL001", "info"),
        (17, "DDL001", "info"),
    ]
    assert all("misc.init_distributed_mode() (line 14)" in f.message for f in found)
    assert all("plain `python` run raises" in f.message for f in found)


def test_a_launchers_workers_are_told_at_its_call_when_its_module_is_not_linted() -> None:
    """process_starter's workers make a group and never leave it. Linted as a folder, that is
    told where they set it up (trainer.py); the script linted alone tells it at its call of
    the launcher, once."""
    folder = PROJECTS / "process_starter"
    alone = lint_paths([str(folder / "train.py")], root=str(folder))
    assert [(Path(f.path).name, f.line, f.code) for f in alone] == [("train.py", 10, "DDL007")]
    assert "starts make a process group and never tear it down" in alone[0].message
    (place,) = alone[0].related  # where the workers set the group up, to pair a destroy with
    assert (Path(place.path).name, place.line) == ("trainer.py", 18)
    whole = lint_paths([str(folder)], root=str(folder))
    assert [(Path(f.path).name, f.line) for f in whole if f.code == "DDL007"] == [
        ("trainer.py", 18)
    ]
