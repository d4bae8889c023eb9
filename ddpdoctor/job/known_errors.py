"""Error text from a rank or from torchrun, read through `explain`'s signature table: one store of
knowledge about what error messages mean serves both the log reader and the probes. A signature
that names a problem the probes know maps to that probe code (DDX → DDP); others keep their own
title as the meaning."""

from __future__ import annotations

from dataclasses import dataclass

from ddpdoctor.report import problems
from ddpdoctor.report.problems import Problem

# Log signatures (ddpdoctor.triage.signatures) whose cause is a probe problem.
BY_SIGNATURE: dict[str, Problem] = {
    "DDX111": problems.ENV_MISSING,
    "DDX121": problems.PORT_IN_USE,
    "DDX122": problems.PORT_IN_USE,
    "DDX131": problems.SHARED_GPU,
    "DDX132": problems.MORE_RANKS_THAN_GPUS,
    "DDX136": problems.SHARED_GPU,
    "DDX141": problems.COLLECTIVE_TIMEOUT,
    "DDX142": problems.COLLECTIVE_TIMEOUT,
    "DDX143": problems.COLLECTIVE_TIMEOUT,
    "DDX146": problems.PEER_LOST,
    "DDX151": problems.SOCKET_IFNAME_MISSING,
}


@dataclass(frozen=True)
class Known:
    """What an error text means: the signature it matched, and the probe problem, if any."""

    signature: str
    meaning: str
    problem: Problem | None


def translate(text: str) -> Known | None:
    """The best-ranked signature that matches `text` (causes before symptoms), or None."""
    if not text.strip():
        return None
    from ddpdoctor.triage.matcher import explain_text

    try:
        matches = explain_text(text).matches
    except Exception:  # noqa: BLE001 - a collector never raises: unknown text stays unknown
        return None
    machine = [m for m in matches if not m.signature.phrases]  # prose is for tickets, not errors
    if not machine:
        return None
    sig = machine[0].signature
    return Known(sig.code, sig.title, BY_SIGNATURE.get(sig.code))
