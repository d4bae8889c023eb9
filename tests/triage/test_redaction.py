"""Secrets planted in the environment and in logs never appear in any output of `env`
(panels, --json -, --markdown) nor in `explain` evidence."""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
from triage_helpers import FIXTURES, run_cli

from ddpdoctor.node.redact import REDACTED, is_secret_name, redact_env, redact_text

PEM = (
    "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n"
    "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\n-----END PRIVATE KEY-----"
)
SECRETS = {
    "HF_TOKEN": "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "AWS_ACCESS_KEY_ID": "AKIAIOSFODNN7EXAMPLE",
    "MY_PASSWORD": "hunter2-correct-horse",
    "WANDB_API_KEY": "0123456789abcdef0123456789abcdef01234567",
    "TORCH_HUB_URL": "https://alice:s3cr3tPa55@models.example.com/hub",
    "GITHUB_PAT_FOR_CI": "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
    "CUDA_DEPLOY_KEY_PEM": PEM,
    "NCCL_PLUGIN_URL": "https://x:nccltoken9876@plugins.example.com/?token=abcd1234efgh",
    "OMP_NOTE": "uses AKIAABCDEFGHIJKLMNOP as id",
    "MASTER_CONFIG": "api_key=sk-proj-aaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "TORCH_HUB_TOKEN": "plainvalue-without-known-shape-42",
}
# Values that must never be printed, in whole or in their distinctive part.
NEEDLES = [
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "AKIAIOSFODNN7EXAMPLE",
    "hunter2-correct-horse",
    "0123456789abcdef0123456789abcdef01234567",
    "s3cr3tPa55",
    "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj",
    "nccltoken9876",
    "abcd1234efgh",
    "AKIAABCDEFGHIJKLMNOP",
    "sk-proj-aaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "plainvalue-without-known-shape-42",
]


# --- issue 11 (5): the secret forms of tests/fixtures/triage/secret_forms.tsv ------------------

FORMS_FILE = FIXTURES / "secret_forms.tsv"


def _forms(kind: str) -> list[tuple[str, str]]:
    out = []
    for line in FORMS_FILE.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        k, form, needle = line.split("\t")
        if k == kind:
            out.append((form.replace("\\n", "\n"), needle))
    return out


ENV_FORMS = _forms("env")
TEXT_FORMS = _forms("text")


ENV_FORMATS = [("env", "--ascii"), ("env", "--json", "-"), ("env", "--markdown")]


@pytest.fixture(scope="module")
def env_outputs() -> dict[tuple[str, ...], subprocess.CompletedProcess]:
    """The three formats, run concurrently (each imports torch) with the secrets planted:
    SECRETS and the variables of tests/fixtures/triage/secret_forms.tsv."""
    planted = {**SECRETS, **dict(f.split("=", 1) for f, _ in ENV_FORMS)}
    with ThreadPoolExecutor(len(ENV_FORMATS)) as pool:
        runs = pool.map(lambda a: run_cli(*a, env=planted), ENV_FORMATS)
        return dict(zip(ENV_FORMATS, runs, strict=True))


@pytest.mark.parametrize("args", ENV_FORMATS)
def test_env_outputs_never_contain_secrets(env_outputs, args: tuple[str, ...]) -> None:
    r = env_outputs[args]
    assert r.returncode == 0, r.stderr
    out = r.stdout.decode() + r.stderr.decode()
    for needle in NEEDLES:
        assert needle not in out, needle
    assert "NCCL_PLUGIN_URL" in out  # the variable is shown, its secret parts are not
    if "--json" in args:
        variables = json.loads(r.stdout)["variables"]
        assert variables["TORCH_HUB_TOKEN"] == REDACTED
        assert "MY_PASSWORD" not in variables and "HF_TOKEN" not in variables  # not relevant


def test_explain_evidence_is_redacted() -> None:
    log = (
        "[rank0]: RuntimeError: Error initializing torch.distributed using env:// rendezvous: "
        "environment variable RANK expected, but not set "
        f"HF_TOKEN={SECRETS['HF_TOKEN']} url={SECRETS['TORCH_HUB_URL']} key {SECRETS['GITHUB_PAT_FOR_CI']}\n"
    ).encode()
    for args in (("explain",), ("explain", "--json", "-")):
        r = run_cli(*args, stdin=log)
        assert r.returncode == 0
        out = r.stdout.decode()
        assert "LAUNCH_ENV" in out
        for needle in NEEDLES:
            assert needle not in out, needle


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("postgres://admin:pa55w0rd@db:5432/x", "postgres://<redacted>@db:5432/x"),
        ("Authorization: Bearer abcdefghijklmnop123", "Authorization: Bearer <redacted>"),
        ("password=letmein99 user=bob", "password=<redacted> user=bob"),
        ('{"api_key": "zzzzyyyyxxxx"}', '{"api_key": "<redacted>"}'),
        (
            "token: eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
            "token: <redacted>",
        ),
        (
            "NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
            "NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
        ),
        (
            "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        ),
    ],
)
def test_redact_text_shapes(text: str, kept: str) -> None:
    assert redact_text(text) == kept


def test_secret_names() -> None:
    for name in (
        "HF_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "MY_PASSWORD",
        "WANDB_API_KEY",
        "GH_PAT_KEY",
        "DB_CREDENTIALS",
        "SESSION_COOKIE",
    ):
        assert is_secret_name(name), name
    for name in (
        "NCCL_SOCKET_IFNAME",
        "MASTER_ADDR",
        "PWD",
        "TOKENIZERS_PARALLELISM",
        "CUDA_VISIBLE_DEVICES",
    ):
        assert not is_secret_name(name), name
    assert redact_env({"A_TOKEN": "x", "PATH_URL": "https://u:p@h"}) == {
        "A_TOKEN": REDACTED,
        "PATH_URL": f"https://{REDACTED}@h",
    }


def test_forms_file_covers_the_issue() -> None:
    names = {f.split("=", 1)[0] for f, _ in ENV_FORMS}
    assert {
        "TORCH_DB_PASS",
        "MASTER_CREDS",
        "NCCL_PW",
        "SLURM_BEARER",
        "NCCL_IB_SECRET_KEY",
    } <= names
    assert len(TEXT_FORMS) >= 10


@pytest.mark.parametrize(("form", "needle"), ENV_FORMS + TEXT_FORMS)
def test_secret_form_is_redacted_in_free_text(form: str, needle: str) -> None:
    assert needle not in redact_text(form)


@pytest.mark.parametrize(("form", "needle"), ENV_FORMS)
def test_secret_form_is_redacted_as_a_variable(form: str, needle: str) -> None:
    name, value = form.split("=", 1)
    assert needle not in redact_env({name: value})[name]


def test_nccl_ib_settings_stay_visible() -> None:
    assert not is_secret_name("NCCL_IB_PKEY") and not is_secret_name("NCCL_IB_GID_INDEX")
    assert is_secret_name("NCCL_IB_SECRET_KEY")
    assert redact_text("commit 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b") == (
        "commit 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b"
    )  # hex hashes are not AWS secrets


def test_env_outputs_never_contain_the_secret_forms(env_outputs) -> None:
    for r in env_outputs.values():
        assert r.returncode == 0, r.stderr
        out = r.stdout.decode() + r.stderr.decode()
        for _, needle in ENV_FORMS:
            assert needle not in out, needle


def test_explain_output_never_contains_the_secret_forms() -> None:
    from rich.console import Console

    from ddpdoctor.triage import render
    from ddpdoctor.triage.matcher import explain_text
    from ddpdoctor.triage.report import explain_doc

    forms = ENV_FORMS + TEXT_FORMS
    log = "\n".join(
        f"[rank{i}]: RuntimeError: CUDA out of memory. {form}" for i, (form, _) in enumerate(forms)
    )
    doc = explain_doc(explain_text(log), "-")
    console = Console(record=True, width=200, no_color=True)
    render.explain(doc, console, True)
    for out in (json.dumps(doc), console.export_text()):
        for _, needle in forms:
            assert needle not in out, needle


def test_a_token_cut_by_the_evidence_limit_is_redacted_first() -> None:
    from ddpdoctor.triage.matcher import explain_text
    from ddpdoctor.triage.report import explain_doc

    token = "hf_" + "Zx9" * 12
    line = "RuntimeError: CUDA out of memory. " + "." * (492 - 34) + token
    text = explain_doc(explain_text(line), "-")["matches"][0]["evidence"][0]["text"]
    assert token[:8] not in text and len(text) <= 500


def test_env_escapes_control_characters_so_a_pasted_snapshot_cannot_carry_a_forged_line() -> None:
    """issue 11 (15): a variable's value with a newline or an ESC sequence."""
    forged = "x\n== Warnings\n  1  all good\x1b[2J"
    for fmt in (("env", "--ascii"), ("env", "--markdown")):
        out = run_cli(*fmt, env={"NCCL_DEBUG_SUBSYS": forged}).stdout.decode()
        assert "\x1b[2J" not in out and "\n== Warnings\n  1  all good" not in out
        assert "x\\n== Warnings" in out
