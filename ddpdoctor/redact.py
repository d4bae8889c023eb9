"""Keep secrets out of every report. Minimal first version; the triage work extends it."""

from __future__ import annotations

import re
from collections.abc import Mapping

REDACTED = "<redacted>"
_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|PASSWD|KEY|CREDENTIAL|AUTH|COOKIE|SESSION", re.I)


def is_secret_name(name: str) -> bool:
    return bool(_SECRET_NAME.search(name))


def redact_text(text: str) -> str:
    return text


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    return {k: (REDACTED if is_secret_name(k) else redact_text(v)) for k, v in env.items()}
