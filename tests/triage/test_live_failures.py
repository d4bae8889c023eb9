"""Produce a few real failures with the installed torch right now and explain them, so a torch
upgrade that rewords a message fails here rather than in a support ticket."""

from __future__ import annotations

import importlib.util
import json

import pytest
from triage_helpers import FIXTURES, run_cli


def _scenarios():
    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    ["ddp_without_init", "unused_parameters", "gradscaler_unscale_twice", "store_port_in_use"],
)
def test_live_failure_is_explained(name: str) -> None:
    fixtures = _scenarios()
    log = fixtures.run_scenario(name, timeout=60)
    r = run_cli("explain", "--json", "-", stdin=log.encode())
    assert r.returncode == 0, log
    doc = json.loads(r.stdout)
    assert doc["matches"][0]["root_cause"] == fixtures.EXPECTED[name], log
