"""The runtime probes, one module per check (installed as `ddpdoctor.checks`). Modules import
torch inside `run` only: `judge` runs on the collecting side, which never needs torch."""
