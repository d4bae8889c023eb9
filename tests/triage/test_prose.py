"""Prose tickets, C++ frame stacks, version lines compared across processes and nodes, and
warnings read in context (issue 16), with the scoring that ranks them."""

from __future__ import annotations

import json
import sys

import jsonschema
import pytest
from triage_helpers import FIXTURES, run_cli

from ddpdoctor.report.schema import schema_for
from ddpdoctor.triage import prose
from ddpdoctor.triage.matcher import explain_text
from ddpdoctor.triage.report import explain_doc

sys.path.insert(0, str(FIXTURES / "corpus"))
import corpus  # noqa: E402

WATCHDOG_FRAMES = """\
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f3b6d41df86 in /usr/lib/python3/dist-packages/torch/lib/libc10.so)
frame #1: c10d::ProcessGroupNCCL::WorkNCCL::checkTimeout(std::optional<std::chrono::duration<long, std::ratio<1l, 1000l> > >) + 0x1d2 (0x7f3b6e71a8d2 in /usr/lib/python3/dist-packages/torch/lib/libtorch_cuda.so)
frame #2: c10d::ProcessGroupNCCL::watchdogHandler() + 0x233 (0x7f3b6e721313 in /usr/lib/python3/dist-packages/torch/lib/libtorch_cuda.so)
"""
SCHED_WARNING = (
    "UserWarning: Detected call of `lr_scheduler.step()` before `optimizer.step()`. In PyTorch "
    "1.1.0 and later, you should call them in the opposite order: `optimizer.step()` before "
    "`lr_scheduler.step()`."
)


def _causes(text: str) -> list[str]:
    return [c.root_cause for c in explain_text(text).candidates]


def test_prose_ticket_is_a_diagnosis_with_confidence_and_why() -> None:
    d = explain_text(
        "We run DDP on 4 GPUs but get no speed-up, each rank processes the whole dataset."
    )
    top = d.candidates[0]
    assert (top.root_cause, top.diagnosis) == ("DATA_SAMPLER", True)
    assert 0.3 < top.confidence < 0.9  # prose alone is never as sure as a traceback
    assert any("whole dataset" in w for w in top.why)
    assert d.matches and d.matches[0].signature.phrases  # shown as a prose finding


def test_traceback_signature_outweighs_prose() -> None:
    text = "Training hangs on this PCIe topology.\nRuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
    d = explain_text(text)
    assert [c.root_cause for c in d.candidates[:2]] == ["OOM", "NCCL_NETWORK"]
    assert d.candidates[0].confidence > d.candidates[1].confidence


def test_weak_signals_add_up() -> None:
    one = explain_text("The job hangs.").candidates[0]
    assert not one.diagnosis  # a lone weak phrase is a hint, not a diagnosis
    many = explain_text(
        "all_reduce hangs with 4 or more GPUs on the PCIe switch; NCCL_P2P_DISABLE=1 makes it work."
    ).candidates[0]
    assert (many.root_cause, many.diagnosis) == ("NCCL_NETWORK", True) and many.score > one.score


def test_cpp_watchdog_frames_only() -> None:
    d = explain_text(WATCHDOG_FRAMES)
    assert [m.signature.code for m in d.matches] == ["DDX148"]
    assert d.matches[0].signature.root_cause == "COLLECTIVE_TIMEOUT"


def test_scheduler_warning_means_gradscaler_only_in_amp_context() -> None:
    alone = explain_text(SCHED_WARNING)
    assert alone.matches == [] and alone.candidates[0].root_cause == "GRADSCALER"
    amp = explain_text("scaler = torch.cuda.amp.GradScaler()\n" + SCHED_WARNING)
    top = amp.candidates[0]
    assert (top.root_cause, top.diagnosis) == ("GRADSCALER", True)
    assert any("AMP" in w for w in top.why)


def test_nccl_versions_compared_across_processes() -> None:
    same = "h1:1:1 [0] NCCL INFO NCCL version 2.18.1+cuda12.1\nh2:2:2 [0] NCCL INFO NCCL version 2.18.1+cuda12.1\n"
    assert explain_text(same).matches == []
    env_vs_torch = (
        'declare -x NCCL_VERSION="2.15.5-1"\n>>> print(torch.cuda.nccl.version())\n(2, 19, 3)\n'
    )
    assert [m.signature.code for m in explain_text(env_vs_torch).matches] == ["DDX224"]


def test_network_plugin_compared_across_nodes() -> None:
    log = (
        "node-b:18226:18274 [5] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.\n"
        "node-a:589474:589541 [0] NCCL INFO Plugin Path : /opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so\n"
    )
    assert [m.signature.code for m in explain_text(log).matches] == ["DDX228"]
    one_node = log.replace("node-b", "node-a")
    assert explain_text(one_node).matches == []


def test_fabric_manager_mismatch_in_a_service_status() -> None:
    log = (
        "nv-fabricmanager[3228]: fabric manager NVIDIA GPU driver interface version 530.30.02 don't "
        "match with driver version 530.41.03. Please update with matching NVIDIA driver package."
    )
    assert _causes(log)[0] == "VERSION_MISMATCH"


@pytest.mark.parametrize(
    ("ticket", "cause"),
    [
        ("After --resume, GPU 0 holds one extra process per rank and runs out of memory.", "OOM"),
        ("Every GPU receives exactly the same batches in DDP.", "DATA_SAMPLER"),
        ("ncclAllReduce deadlocks on 2x RTX 4090 (PCIe PHB topology, no NVLink)", "NCCL_NETWORK"),
        (
            "The loss does not decrease when training with 8 GPUs, but converges on one.",
            "DATA_SAMPLER",
        ),
    ],
)
def test_symptoms_in_words(ticket: str, cause: str) -> None:
    assert _causes(ticket)[0] == cause


def test_literal_precheck_never_hides_a_match() -> None:
    """The cheap precheck may skip a phrase only when its regex could not match anyway."""
    texts = [r.text for r in corpus.load_reports()]
    for sig in prose.PROSE_SIGNATURES:
        for ph in sig.phrases:
            for text in texts:
                joined = " ".join(text.splitlines())
                if ph.pattern.search(joined):
                    assert any(w in joined.lower() for w in ph.literals), (sig.code, ph.label)


def test_no_match_still_prints_what_was_read_and_what_to_collect() -> None:
    r = run_cli("explain", "--ascii", stdin=b"the job hangs\n")
    out = r.stdout.decode()
    assert r.returncode == 1
    assert "No known DDP failure recognised in 1 lines" in out
    assert "Closest candidates (low confidence" in out and "COLLECTIVE_TIMEOUT" in out
    assert "NCCL_DEBUG=INFO" in out and "ddpdoctor env --markdown" in out
    r = run_cli("explain", "--json", "-", stdin=b"the job hangs\n")
    doc = json.loads(r.stdout)
    jsonschema.validate(doc, schema_for("explain"))
    assert r.returncode == 1 and doc["matches"] == [] and doc["confidence"] == 0.0
    assert doc["candidates"][0]["root_cause"] == "COLLECTIVE_TIMEOUT"
    assert doc["candidates"][0]["diagnosis"] is False


def test_json_candidates_name_what_to_run_next() -> None:
    doc = explain_doc(
        explain_text("Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000"), "-"
    )
    jsonschema.validate(json.loads(json.dumps(doc)), schema_for("explain"))
    top = doc["candidates"][0]
    assert top["root_cause"] == "DEVICE_MAPPING" and top["confidence"] >= 0.9
    assert "ddpdoctor check --only rank_device" in top["next"]["run"]
    assert doc["confidence"] == top["confidence"]
