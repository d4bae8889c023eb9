"""Many nodes: three `ddpdoctor node` processes write into one --out folder as srun's tasks
would (one of them started with a small locked-memory limit, a real difference in a real
fact), a fourth expected node never starts; `--collect` names the odd node and the silent one
and writes the exclude file."""

from __future__ import annotations

import copy
import json
import resource
import subprocess
import sys

import jsonschema
import pytest

from ddpdoctor.node import cluster
from ddpdoctor.report import schema

NODE = [sys.executable, "-m", "ddpdoctor", "node", "--no-perf", "--rdma-interval", "0"]


def _small_memlock() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (64 << 10, hard))


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    out = tmp_path_factory.mktemp("health")
    procs = [
        subprocess.Popen(
            [*NODE, "--out", str(out), "--node-name", name, "--timeout", "40"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=_small_memlock if name == "node-3" else None,
        )
        for name in ("node-1", "node-2", "node-3")
    ]
    lines = [p.communicate(timeout=90)[0].strip() for p in procs]
    exclude = out / "exclude.txt"
    report = out / "cluster.report"
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "ddpdoctor",
            "node",
            "--collect",
            str(out),
            "--hosts",
            "node-[1-4]",
            "--exclude-file",
            str(exclude),
            "--json",
            str(report),
            "--ascii",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return out, lines, r, json.loads(report.read_text()), exclude.read_text()


def test_every_node_wrote_its_own_report_and_one_line(collected) -> None:
    out, lines, _r, _doc, _ex = collected
    assert sorted(p.name for p in out.glob("node-*.json")) == [
        "node-1.json",
        "node-2.json",
        "node-3.json",
    ]
    assert [line.split(":")[0] for line in lines] == ["node-1", "node-2", "node-3"]
    assert all(f"{out}/node-" in line for line in lines)


def test_collect_names_the_odd_and_the_silent_node_and_writes_the_exclude_file(collected) -> None:
    _out, _lines, r, doc, exclude = collected
    assert r.returncode == 1, r.stderr
    jsonschema.validate(doc, schema.schema_for("node"))
    assert exclude == "node-[3-4]\n" and doc["exclude"] == "node-[3-4]"
    rows = {row["id"]: row for row in doc["rows"]}
    assert [f["message"] for f in rows["reports"]["findings"]] == ["node-4: no report"]
    (odd,) = rows["digest"]["findings"]
    assert odd["code"] == "DDN180" and odd["data"]["differs"] == ["memlock"]
    assert odd["message"].startswith(
        "node-3: memlock 64 KiB; the other 2 (node-[1-2]) have memlock "
    )
    assert [(g["hosts"], g["count"]) for g in doc["groups"]] == [("node-[1-2]", 2), ("node-3", 1)]
    assert "Exclude: node-[3-4] (written to " in r.stdout


def test_a_slow_node_is_named_against_the_median_of_its_type(collected) -> None:
    """Documents of four nodes built from a real one, with speed figures set for the test."""
    out = collected[0]
    real = json.loads((out / "node-1.json").read_text())
    docs = {}
    for name, gflops in (("gpu1", 100.0), ("gpu2", 96.0), ("gpu3", 104.0), ("gpu4", 41.0)):
        d = copy.deepcopy(real)
        d["node"] = name
        d["facts"]["perf"] = [
            {"device": "cpu", "gemm_gflops": gflops, "copy_gbps": 9.0, "error": None}
        ]
        docs[name] = d
    view = cluster.judge(docs, [], [])
    speed = {r.id: r for r in view.rows}["speed"]
    assert [f.message for f in speed.findings] == [
        "gpu4: CPU GEMM 41 GFLOP/s, 0.42 of the median 98"
    ]
    assert view.exclude == ["gpu4"]


def test_files_that_are_not_node_reports_are_named_not_fatal(collected, tmp_path) -> None:
    out = collected[0]
    for name in ("node-1.json", "node-2.json"):
        (tmp_path / name).write_text((out / name).read_text())
    (tmp_path / "junk.json").write_text("{not json")
    (tmp_path / "old.json").write_text('{"schema": "ddpdoctor.node/1", "kind": "node"}')
    docs, bad = cluster.read_dir(str(tmp_path))
    assert sorted(docs) == ["node-1", "node-2"] and bad == ["junk.json", "old.json"]
    reports = cluster.judge(docs, [], bad).rows[0]
    assert [(f.code, f.level.word) for f in reports.findings] == [("DDN181", "warn")]
