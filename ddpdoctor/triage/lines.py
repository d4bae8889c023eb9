"""Turning one raw log line into text the signatures can read, and reading which rank wrote it.

Logs arrive as bytes of any encoding, with ANSI colours and with prefixes that launchers add in
front of every line (`[rank3]:`, torchrun's `[default0]:`, mpirun's `[1,3]<stdout>:`, srun's
`3: `, NCCL's `host:pid:tid [dev]`, glog and logging timestamps). Patterns are searched anywhere
in a line, so prefixes only matter for the rank and for joining a message wrapped over two lines.
"""

from __future__ import annotations

import re

LINE_CAP = 64 * 1024  # characters of one line that take part in matching
SHOW_CAP = 500  # characters of one evidence line that are shown

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

# One launcher prefix at the start of a line; group "rank" when it names the rank.
_PREFIX = re.compile(
    r"""^\s*(?:
        \[(?:rank|default|trainer|worker)(?P<rank>\d+)\]:?\s?       # [rank3]: torchrun [default0]:
      | \[\d+,(?P<mpirank>\d+)\]<std(?:out|err)>:\s?                # mpirun [1,3]<stdout>:
      | (?P<srunrank>\d+):\s                                        # srun --label "3: "
      | (?:\(\w+\s+pid=\d+(?:,\s*ip=[\d.]+)?\)\s)                   # ray "(Worker pid=12, ip=..)"
      | [\w.-]+:\d+:\d+\s+\[\d+\]\s                                 # NCCL "host:pid:tid [dev] "
      | \d{4}-\d\d-\d\d[T\s]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\s*(?:-\s*)?  # ISO time
      | [IWEF]\d{4}\s\d\d:\d\d:\d\d\.\d+\s+\d+\s+\S+:\d+\]\s?       # glog
      | \[[IWEF]\d{4}\s\d\d:\d\d:\d\d\.\d+\s+\S+:\d+\]\s?           # torch C++ log
    )""",
    re.VERBOSE,
)
# Ranks named inside the message: "[Rank 3]", "[PG 0 Rank 3]", "[PG ID 0 PG GUID 0(default_pg) Rank 1]".
_RANK_IN_TEXT = re.compile(r"\[(?:PG\b[^\]]{0,60}?\s)?Rank\s+(\d+)\]")


def decode(raw: bytes) -> str:
    """Bytes → printable text: invalid UTF-8 replaced, ANSI and control characters removed."""
    text = raw[: LINE_CAP * 2].decode("utf-8", errors="replace")
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    text = _CONTROL.sub("", text.rstrip("\r\n"))
    return text[:LINE_CAP]


def strip_prefixes(text: str) -> tuple[str, int | None]:
    """Remove launcher prefixes (up to four stacked ones); return the message and the rank."""
    rank: int | None = None
    for _ in range(4):
        m = _PREFIX.match(text)
        if not m or m.end() == 0:
            break
        found = m.group("rank") or m.group("mpirank") or m.group("srunrank")
        if found is not None and rank is None:
            rank = int(found)
        text = text[m.end() :]
    if rank is None:
        m = _RANK_IN_TEXT.search(text[:400])
        if m:
            rank = int(m.group(1))
    return text, rank


def shown(text: str) -> str:
    """An evidence line as printed: stripped and shortened."""
    text = text.strip()
    return text if len(text) <= SHOW_CAP else text[: SHOW_CAP - 1] + "…"
