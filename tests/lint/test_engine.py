"""The pure API: lint_source / lint_paths return values; syntax errors become DDL000 findings;
`# noqa` suppresses; folders are walked deterministically."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ddpdoctor.errors import UsageError
from ddpdoctor.lint import RULES, RULES_BY_CODE, LintFinding, lint_paths, lint_source, report
from ddpdoctor.lint.finding import Related
from ddpdoctor.lint.rules import parse_codes

SAMPLER_SCRIPT = textwrap.dedent(
    """\
    import torch.distributed as dist
    from torch.utils.data import DataLoader
    from torch.utils.data.distributed import DistributedSampler

    dist.init_process_group("nccl")
    sampler = DistributedSampler(dataset){noqa}
    loader = DataLoader(dataset, sampler=sampler)
    for epoch in range(3):
        for batch in loader:
            model(batch).backward()
    dist.destroy_process_group()
    """
)


def codes(findings: list[LintFinding]) -> list[tuple[int, str]]:
    return [(f.line, f.code) for f in findings]


def test_lint_source_returns_values() -> None:
    findings = lint_source(SAMPLER_SCRIPT.format(noqa=""), "train.py")
    assert findings == [
        LintFinding(
            "train.py",
            6,
            11,
            "DDL003",
            "DistributedSampler shuffles, but set_epoch(epoch) is never called in the epoch "
            "loop: every epoch uses the same order",
        )
    ]
    assert findings[0].symbol == "set-epoch-missing"
    assert findings[0].hint == RULES_BY_CODE["DDL003"].fix
    # The other place of the same mistake: the DataLoader the sampler feeds (line 7).
    assert findings[0].related == (Related("train.py", 7, "the DataLoader this sampler feeds"),)


def test_a_sampler_built_inside_its_loader_names_no_other_place() -> None:
    inline = SAMPLER_SCRIPT.format(noqa="").replace(
        "sampler = DistributedSampler(dataset)\nloader = DataLoader(dataset, sampler=sampler)",
        "loader = DataLoader(dataset, sampler=DistributedSampler(dataset))",
    )
    (found,) = lint_source(inline, "train.py")
    assert (found.line, found.code, found.related) == (6, "DDL003", ())


@pytest.mark.parametrize(
    "comment",
    ["  # noqa: DDL003", "  # noqa", "  # NOQA:DDL001,DDL003", "  # noqa: DDL003 (reviewed)"],
)
def test_noqa_suppresses(comment: str) -> None:
    assert lint_source(SAMPLER_SCRIPT.format(noqa=comment)) == []


def test_noqa_for_another_code_does_not_suppress() -> None:
    assert codes(lint_source(SAMPLER_SCRIPT.format(noqa="  # noqa: DDL002"))) == [(6, "DDL003")]


BROKEN_DDP = "import torch.distributed as dist\ndist.init_process_group()\ndef f(:\n"


def test_syntax_error_is_a_finding_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "a_broken.py").write_text(BROKEN_DDP)
    (tmp_path / "b_script.py").write_text(SAMPLER_SCRIPT.format(noqa=""))
    found = lint_paths([str(tmp_path)])
    assert [f.code for f in found] == ["DDL000", "DDL003"]
    assert found[0].line == 3 and "cannot parse" in found[0].message


def test_broken_file_with_nothing_distributed_is_told_only_when_named(tmp_path: Path) -> None:
    """Found in a folder, a file the checks have nothing to ask of is not parsed (a syntax
    error there hides nothing from the DDP rules); named on the command line, it is told."""
    broken = tmp_path / "model.py"
    broken.write_text("def f(:\n    pass\n")
    (tmp_path / "train.py").write_text(SAMPLER_SCRIPT.format(noqa=""))
    assert [f.code for f in lint_paths([str(tmp_path)])] == ["DDL003"]
    (found,) = lint_paths([str(broken)], root=str(tmp_path))
    assert (found.code, found.line) == ("DDL000", 1) and "cannot parse" in found.message


def test_null_bytes_and_bad_encoding_are_findings(tmp_path: Path) -> None:
    (tmp_path / "nul.py").write_bytes(b"x = 1\x00\n")
    (tmp_path / "latin.py").write_bytes(b"# -*- coding: nope -*-\nx = 1\n")
    named = [str(tmp_path / "latin.py"), str(tmp_path / "nul.py")]
    assert [f.code for f in lint_paths(named)] == ["DDL000", "DDL000"]
    # In a folder the file that does not decode is still told (nothing could be asked of it).
    assert [Path(f.path).name for f in lint_paths([str(tmp_path)])] == ["latin.py"]


def test_folders_skip_vendored_dirs_and_sort(tmp_path: Path) -> None:
    for rel in ("b.py", "a/c.py", ".venv/x.py", "node_modules/y.py", "pkg/__pycache__/z.py"):
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(BROKEN_DDP)
    (tmp_path / "notes.txt").write_text("def f(:\n")
    paths = [Path(f.path).relative_to(tmp_path).as_posix() for f in lint_paths([str(tmp_path)])]
    assert paths == ["a/c.py", "b.py"]


def test_missing_path_and_empty_folder_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        lint_paths([str(tmp_path / "nope.py")])
    with pytest.raises(UsageError):
        lint_paths([str(tmp_path)])


def test_non_ddp_file_is_silent() -> None:
    assert lint_source("import torch\nprint(torch.__version__)\n") == []


def test_rule_table_is_complete_and_stable() -> None:
    assert [r.code for r in RULES] == [f"DDL00{i}" for i in range(8)]
    for r in RULES:
        assert r.level in ("fail", "warn", "info")
        assert r.symbol and r.title and r.why and r.fix
        assert r.symbol == r.symbol.lower() and " " not in r.symbol
    assert len({r.symbol for r in RULES}) == len(RULES)


def test_parse_codes_accepts_prefixes_and_rejects_unknown() -> None:
    assert parse_codes("DDL001, ddl003", "--select") == {"DDL001", "DDL003"}
    assert parse_codes("DDL00", "--select") == {r.code for r in RULES}
    with pytest.raises(UsageError):
        parse_codes("E501", "--ignore")


def test_readme_documents_every_rule_with_bad_and_good() -> None:
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    start = readme.index("### ddpdoctor lint")
    section = readme[start : readme.index("\n### ", start + 1)]
    for rule in RULES:
        assert rule.code in section and rule.symbol in section
        if rule.code == "DDL000":
            continue
        block = section[section.index(f"**{rule.code} {rule.symbol}") :]
        block = block[: block.index("\n**") if "\n**" in block else len(block)]
        assert "# bad" in block and "# good" in block, rule.code


def test_pathologically_deep_call_chains_do_not_crash() -> None:
    lines = ["import torch", "import torch.distributed as dist", "dist.init_process_group('gloo')"]
    lines += [f"def f{i}():\n    f{i + 1}()" for i in range(3000)]
    lines += ["def f3000():\n    torch.save(1, 'a.pt')", "f0()", "loss.backward()"]
    assert isinstance(lint_source("\n".join(lines)), list)


def test_made_up_calls_leave_nothing_in_the_resolve_cache() -> None:
    """A call built for the asking (a decorator read as `dec()`) is freed at once, and its id
    may be handed to the next such node: what it resolved to must not be kept under that id.
    The whole-corpus run once lost two findings between runs of the same code this way."""
    import ast

    from ddpdoctor.lint.index import ModuleIndex

    tree = ast.parse("def setup():\n    pass\n\nsetup()\n")
    index = ModuleIndex(tree)
    made_up = ast.Call(func=ast.Name(id="setup"), args=[], keywords=[])
    assert [f.name for f in index.resolve_call(made_up)] == ["setup"]
    assert id(made_up) not in index._resolved
    real = index.calls[0]
    assert [f.name for f in index.resolve_call(real)] == ["setup"]
    assert id(real) in index._resolved  # the tree's own calls are still answered once


def test_every_ddp_word_holds_a_marker() -> None:
    """The project's scan looks for DDP words only in files that hold a marker, and hands the
    engine its marker answers: that is exact only while each DDP word contains a marker."""
    from ddpdoctor.lint.project import DDP_WORDS, MARKERS

    assert all(any(m in w for m in MARKERS) for w in DDP_WORDS)


def test_the_scan_tells_the_engine_which_files_hold_a_marker(tmp_path) -> None:
    """After the project's scan, a file's marker answer comes from its bytes, and it is the
    engine's own answer; before the scan, or for a file outside it, there is none."""
    from ddpdoctor.lint.project import MARKERS, Project

    (tmp_path / "plain.py").write_text("import os\n")
    (tmp_path / "ddp.py").write_text("model = DDP(model)\n")
    (tmp_path / "other.py").write_text("scaler = None\n")
    project = Project(str(tmp_path))
    assert project.marked(str(tmp_path / "ddp.py")) is None  # no scan yet
    project.mentions_set_epoch()  # runs the scan
    for name in ("plain.py", "ddp.py", "other.py"):
        text = (tmp_path / name).read_text()
        assert project.marked(str(tmp_path / name)) == any(m in text for m in MARKERS)
    assert project.marked(str(tmp_path.parent / "elsewhere.py")) is None


def test_the_grouped_marker_scan_answers_as_the_plain_one() -> None:
    """The scan looks for the markers under shared guards (`dist` before `init_dist`); on any
    text it must answer as one scan per marker: each marker alone or in code, cut short at
    either end, and the guards without their words."""
    from ddpdoctor.lint.project import MARKER_BYTES, MARKER_GROUPS, any_word

    texts = [b"", b"x = 1", b"dist ddp caler DataParallel", b"import torch.distributed as dist"]
    for m in MARKER_BYTES:
        texts += [m, b"a = " + m + b"(b)", m[1:], m[:-1]]
    for text in texts:
        assert any_word(text, MARKER_GROUPS) == any(m in text for m in MARKER_BYTES), text
    assert sorted(w for _, *words in MARKER_GROUPS for w in words) == sorted(MARKER_BYTES)
    assert all(group[0] in w for group in MARKER_GROUPS for w in group[1:])


def test_a_write_in_a_helper_names_the_unguarded_call_as_its_other_place() -> None:
    """The save sits in save_ckpt(); the call that runs it on every rank is the other place of
    the same mistake (a rank-0 guard may go around either)."""
    source = textwrap.dedent(
        """\
        import torch
        import torch.distributed as dist

        def save_ckpt(state, path):
            torch.save(state, path)

        def main(model, loader, opt):
            dist.init_process_group("nccl")
            for epoch in range(3):
                for x in loader:
                    model(x).sum().backward()
                save_ckpt(model.state_dict(), "last.pt")
            dist.destroy_process_group()

        if __name__ == "__main__":
            main(*build())
        """
    )
    (found,) = [f for f in lint_source(source, "train.py") if f.code == "DDL006"]
    assert found.line == 5 and "save_ckpt() on line 12" in found.message
    assert [(r.path, r.line) for r in found.related] == [("train.py", 12)]


def test_a_loader_returned_by_a_function_names_where_training_gets_it() -> None:
    """make_loader() builds the sampler and the loader and returns it: the training call that
    receives it is one more place of the mistake; the validation call is not."""
    source = textwrap.dedent(
        """\
        import torch.distributed as dist
        from torch.utils.data import DataLoader, DistributedSampler

        def make_loader(dataset, train=True):
            sampler = DistributedSampler(dataset, shuffle=train)
            loader = DataLoader(dataset, sampler=sampler, batch_size=8)
            return loader

        def main(model, train_set, val_set):
            dist.init_process_group("nccl")
            train_loader = make_loader(train_set)
            val_loader = make_loader(val_set, train=False)
            for epoch in range(3):
                for x in train_loader:
                    model(x).sum().backward()
            dist.destroy_process_group()
        """
    )
    (found,) = [f for f in lint_source(source, "train.py") if f.code == "DDL003"]
    assert found.line == 5
    assert [r.line for r in found.related] == [6, 11]


def test_a_group_set_up_in_two_branches_names_both_inits() -> None:
    """One group, made by either branch (gloo through a file on Windows, nccl elsewhere), and
    never destroyed: the finding is on the first init and names the other."""
    source = textwrap.dedent(
        """\
        import os
        import torch.distributed as dist

        def worker(rank, world, model, loader):
            if os.name == "nt":
                dist.init_process_group("gloo", init_method="file:///c:/init", rank=rank, world_size=world)
            else:
                dist.init_process_group("nccl", rank=rank, world_size=world)
            for x in loader:
                model(x).sum().backward()

        if __name__ == "__main__":
            worker(0, 1, *build())
        """
    )
    (found,) = [f for f in lint_source(source, "train.py") if f.code == "DDL007"]
    assert found.line == 6
    assert [(r.line, r.note) for r in found.related] == [
        (8, "another set-up call that no destroy follows")
    ]


def test_weights_the_program_does_not_save_are_a_warning() -> None:
    """DDL004 is a failure for the program's own checkpoint and a warning for weights made
    elsewhere (a pretrained folder, a fixed file no torch.save of the module names), in every
    output: the level travels with the finding, not only with its rule."""
    path = str(Path(__file__).parent.parent / "fixtures" / "lint" / "ddl004_shipped_weights.py")
    found = lint_paths([path])
    assert [(f.line, f.code, f.level) for f in found] == [
        (19, "DDL004", "warn"),
        (20, "DDL004", "warn"),
        (23, "DDL004", "fail"),
    ]
    assert [r["level"] for r in report.json_doc(found, 1)["findings"]] == ["warn", "warn", "fail"]
    assert report.json_doc(found, 1)["counts"] == {"total": 3, "fail": 1, "warn": 2, "info": 0}
    sarif = report.sarif_doc(found)["runs"][0]["results"]
    assert [r["level"] for r in sarif] == ["warning", "warning", "error"]
    assert "(1 fail, 2 warn)" in report.text(found, 1)


def test_the_imagenet_fallback_without_a_gpu_index_is_a_warning() -> None:
    """The `args.gpu is None` branch of the ImageNet example: a real mistake on a launch that
    hands no index, but not one the example's own mp.spawn launch takes; two blind judges of
    fresh25 did not count it, an earlier one did. A warning, saying which name decides."""
    path = Path(__file__).parent.parent / "fixtures" / "lint" / "ddl004_imagenet_fallback.py"
    found = lint_paths([str(path)])
    assert [(f.line, f.code, f.level) for f in found] == [(26, "DDL004", "warn")]
    assert "args.gpu is None" in found[0].message


def test_code_the_program_does_not_run_is_a_warning() -> None:
    """A fail-level mistake in a function nothing in the script calls, or behind a switch the
    script leaves off, is told as a warning saying why; the same load where it runs fails."""
    path = Path(__file__).parent.parent / "fixtures" / "lint" / "ddl004_code_that_does_not_run.py"
    found = lint_paths([str(path)])
    assert [(f.line, f.code, f.level) for f in found] == [
        (16, "DDL002", "warn"),
        (32, "DDL004", "warn"),
        (34, "DDL004", "fail"),
    ]
    assert "in inference(), which nothing in this file calls" in found[0].message
    assert "only when RESUME is set: it is None here" in found[1].message
    assert "only when" not in found[2].message


@pytest.mark.parametrize(
    ("fixture", "levels", "said"),
    [
        # An optimizer's state holds GPU moments; a scheduler's, step counts.
        ("ddl004_scheduler_state.py", [(21, "fail"), (22, "warn")], "scheduler's state"),
        # A resume in the training run; a load in a function that only evaluates (often one
        # process).
        (
            "ddl004_evaluation_load.py",
            [(14, "warn"), (15, "warn"), (21, "fail")],
            "evaluation pass",
        ),
        # A fixed file named once, then loaded through the name.
        ("ddl004_fixed_file_named_once.py", [(17, "warn")], "does not save"),
        # A load under an evaluation-only switch; the training run's resume.
        ("ddl004_evaluation_switch.py", [(22, "warn"), (26, "fail")], "evaluation pass"),
        # Weights loaded with strict=False were made for another model; the resume is ours.
        ("ddl004_loose_pretrained_load.py", [(18, "warn"), (20, "fail")], "does not save"),
        # A device spelled from the global rank is a failure; `pretrained_dict = torch.load(p)`
        # names weights made elsewhere.
        (
            "ddl004_device_string_of_global_rank.py",
            [(20, "fail"), (22, "warn")],
            "does not save",
        ),
    ],
)
def test_the_same_load_is_a_failure_in_one_place_and_a_warning_in_another(
    fixture: str, levels: list[tuple[int, str]], said: str
) -> None:
    """The same torch.load without map_location: a failure where the file surely holds GPU
    tensors that every rank loads, a warning where lint cannot tell."""
    found = lint_paths([str(Path(__file__).parent.parent / "fixtures" / "lint" / fixture)])
    assert [(f.line, f.code, f.level) for f in found] == [(n, "DDL004", lv) for n, lv in levels]
    assert said in next(f.message for f in found if f.level == "warn")
