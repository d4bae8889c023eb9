"""Slurm-style host lists, both ways."""

from __future__ import annotations

import pytest

from ddpdoctor.errors import UsageError
from ddpdoctor.node.hostlist import compress_hostlist, expand_hostlist


@pytest.mark.parametrize(
    ("hosts", "text"),
    [
        (["node-0588", "node-0417"], "node-[0417,0588]"),
        (["gpu001", "gpu002", "gpu003", "gpu004", "gpu007"], "gpu[001-004,007]"),
        (["gpu001"], "gpu001"),
        (["login", "gpu2", "gpu1", "cpu9"], "cpu9,gpu[1-2],login"),
        (["rack1-n03", "rack1-n04"], "rack1-n[03-04]"),
        ([], ""),
    ],
)
def test_compress(hosts: list[str], text: str) -> None:
    assert compress_hostlist(hosts) == text


def test_expand_is_the_inverse_and_multiplies_brackets() -> None:
    hosts = [f"gpu{n:03d}" for n in (1, 2, 3, 4, 7, 10)]
    assert expand_hostlist(compress_hostlist(hosts)) == hosts
    assert expand_hostlist("rack[1-2]-n[03-04],login") == [
        "rack1-n03",
        "rack1-n04",
        "rack2-n03",
        "rack2-n04",
        "login",
    ]


@pytest.mark.parametrize("bad", ["gpu[1-", "gpu[a-b]", "gpu[5-2]"])
def test_bad_host_lists_are_usage_errors(bad: str) -> None:
    with pytest.raises(UsageError):
        expand_hostlist(bad)
