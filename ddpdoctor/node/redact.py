"""Keep secrets out of every report, log excerpt and environment dump ddpdoctor prints or writes.

Two nets, because either alone leaks:
- by name: the value of a variable whose name looks secret (HF_TOKEN, AWS_SECRET_ACCESS_KEY,
  WANDB_API_KEY, MY_PASSWORD, ...) is replaced whole;
- by shape: anywhere in free text (any variable's value, a log line), values that look like
  credentials are replaced: user:password in URLs, `token=...` pairs, bearer tokens, cloud keys,
  the well-known token prefixes (hf_, ghp_, sk-, xox..., glpat-), JWTs and PEM private keys.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

REDACTED = "<redacted>"

_SECRET_WORDS = (
    r"TOKEN|SECRET|PASSW|PASSWD|PASS(?=_|$)|PWD$|(?<![A-Z])PW(?=_|$)|KEY|CREDENTIAL|CREDS?(?=_|$)|"
    r"AUTH|BEARER|COOKIE|SESSION|PRIVATE|SIGNATURE|CERT|DSN|CONN(?:ECTION)?_STR|API_?KEY|ACCESS_?ID"
)
_SECRET_NAME = re.compile(_SECRET_WORDS, re.I)
# Names that match the pattern above but hold nothing secret (keeps `env` useful). NCCL's
# InfiniBand "key" settings (NCCL_IB_PKEY, ...) are numbers, unless the name also says secret.
_NOT_SECRET = re.compile(
    r"^(?:PWD|OLDPWD|KEYBOARD\w*|XDG_SESSION_\w+|SESSION_MANAGER|DBUS_SESSION_BUS_ADDRESS|"
    r"NCCL_IB_(?!\w*(?:SECRET|TOKEN|PASS|PWD|CRED|AUTH|PRIVATE))\w*KEY\w*|SSH_AUTH_SOCK|"
    r"\w*_TOKENIZERS_PARALLELISM|TOKENIZERS_PARALLELISM)$",
    re.I,
)
# A key that looks secret, in free text (key=value, --flag value, Namespace(k='v'), JSON).
_SECRET_KEY = (
    r"[\w.-]*(?:token|secret|passw(?:or)?d|pass(?![a-z])|pwd|(?<![a-z0-9])pw(?![a-z])|api[_-]?key|access[_-]?key|"
    r"private[_-]?key|credential|creds?(?![a-z])|auth|cookie|session[_-]?id|bearer|_key(?![a-z]))[\w.-]*"
)

_TEXT_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    # PEM blocks: the whole block, wherever it is (also with literal "\n" escapes)
    (
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----.*?"
            r"(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
            re.S,
        ),
        REDACTED,
    ),
    # scheme://user:password@host (the password may hold '/')
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/:@]+:[^\s@]+@"), rf"\1{REDACTED}@"),
    # Authorization: Bearer xxx / Basic xxx / Token xxx
    (
        re.compile(
            r"(?i)\b(authorization\s*[=:]\s*(?:token|bearer|basic|digest|apikey)?\s*)(?!<redacted>)\S+"
        ),
        rf"\1{REDACTED}",
    ),
    (re.compile(r"(?i)\b(bearer|basic)\s+(?!<redacted>)[A-Za-z0-9._~+/=-]{8,}"), rf"\1 {REDACTED}"),
    # --password X / --api-token X / --db-password="x" on a command line
    (
        re.compile(rf"(?i)(--{_SECRET_KEY})(\s+|\s*=\s*)([\"']?)(?!<redacted>|-)[^\s\"']+\3"),
        rf"\1\2\3{REDACTED}\3",
    ),
    # key=value / key: value / key='value' / "key": "value" whose key looks secret
    (
        re.compile(
            rf"(?i)\b({_SECRET_KEY})"
            r"(\s*[=:]\s*[\"']?|\"\s*:\s*\"|'\s*:\s*')(?!<redacted>|(?:bearer|basic|token)\s)"
            r"([^\s\"',;&)]+)"
        ),
        rf"\1\2{REDACTED}",
    ),
    # well-known token shapes
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"), REDACTED),  # Hugging Face
    (re.compile(r"\b(?:gh[pousr]|github_pat)_[A-Za-z0-9_]{20,}\b"), REDACTED),  # GitHub
    (re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}\b"), REDACTED),  # GitLab
    (re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}\b"), REDACTED),  # OpenAI / Anthropic
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b"), REDACTED),  # Slack
    (re.compile(r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}\b"), REDACTED),  # AWS key id
    (re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), REDACTED),  # Google API key
    (
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\b"),
        REDACTED,
    ),  # JWT
    (re.compile(r"\bnpm_[A-Za-z0-9]{30,}\b"), REDACTED),
    (re.compile(r"\bpypi-[A-Za-z0-9_-]{30,}\b"), REDACTED),
    (
        re.compile(r"(?i)\b(wandb[_-]?api[_-]?key|wandb(?:\s+login)?)\s+[0-9a-f]{40}\b"),
        rf"\1 {REDACTED}",
    ),
    # AWS-style secret access keys: 40 base64 characters with upper and lower case and a digit
    # or '/' or '+'; hex hashes (git, sha1) have no upper case and are kept.
    (
        re.compile(
            r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]{0,39}[A-Z])(?=[A-Za-z0-9/+]{0,39}[a-z])"
            r"(?=[A-Za-z0-9/+]{0,39}[0-9/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
        ),
        REDACTED,
    ),
)
_AWS_SECRET = re.compile(r"(?i)(aws.{0,30}?[=:\s]\s*)([A-Za-z0-9/+]{40})\b")


def is_secret_name(name: str) -> bool:
    """Whether a variable with this name holds a secret (its value is never shown)."""
    return bool(_SECRET_NAME.search(name)) and not _NOT_SECRET.match(name)


def redact_text(text: str) -> str:
    """Replace secret-looking values anywhere in free text."""
    if not text:
        return text
    for rx, repl in _TEXT_RULES:
        text = rx.sub(repl, text)
    return _AWS_SECRET.sub(rf"\1{REDACTED}", text)


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of an environment with secret names blanked and secret-looking values replaced."""
    return {k: (REDACTED if is_secret_name(k) else redact_text(v)) for k, v in env.items()}
