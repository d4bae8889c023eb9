"""One line per report row with the key number, from the records alone (the findings say what
is wrong; this says what was seen, so a healthy row still tells the user something)."""

from __future__ import annotations

from statistics import median

from ddpdoctor.report.ranks import plural
from ddpdoctor.trace import record as R
from ddpdoctor.trace.judges.findings import (
    COLLECTIVES,
    DATA,
    DEVICES,
    GROUP,
    REPLICAS,
    SCALER,
    TIMING,
    WRITES,
)  # fmt: skip
from ddpdoctor.trace.record import TraceRecord


def summarize(records: dict[int, TraceRecord]) -> dict[str, str]:
    """area -> one line. Empty records: every area says nothing was recorded."""
    if not records:
        return dict.fromkeys((GROUP, DEVICES, DATA, SCALER, REPLICAS, COLLECTIVES, WRITES, TIMING),
                             "no rank left a record")  # fmt: skip
    recs = [records[r] for r in sorted(records)]
    first = recs[0]
    ends = sorted({r.exit.kind for r in recs})
    steps = sorted({r.steps for r in recs})
    out = {
        GROUP: f"{first.backend or 'no group'}, {plural(len(recs), 'rank')}, "
        f"{'-'.join(map(str, (steps[0], steps[-1]))) if len(steps) > 1 else steps[0]} optimizer "
        f"steps, ended: {', '.join(ends)}",
    }
    ddp = [e for r in recs for e in r.events if e.kind == R.DDP_BUILT]
    if ddp:
        devices = sorted(
            {
                d
                for e in ddp
                for d in (e.data.get("device_ids") or e.data.get("param_devices") or [])
            }
        )
        out[DEVICES] = f"DDP on {', '.join(devices) or 'cpu'} ({plural(len(ddp), 'wrap')})"
    else:
        out[DEVICES] = "no DistributedDataParallel built"
    loaders = {p.loader for p in first.passes}
    done = [p for p in first.passes if p.complete]
    out[DATA] = (
        f"{plural(len(loaders), 'DataLoader')}, {plural(len(first.passes), 'pass')} on rank "
        f"{first.rank}" + (f", {done[0].batches} batches / {done[0].items} samples per epoch" if done else "")
        if first.passes else "no DataLoader iterated"
    )  # fmt: skip
    scalers = sum(e.count for e in first.events if e.kind == R.SCALER_CREATED)
    if scalers:
        last = first.scales[max(first.scales)] if first.scales else None
        out[SCALER] = (f"{plural(scalers, 'GradScaler')}, {first.skipped_count} skipped steps"
                       + (f", scale {last:g}" if last is not None else ""))  # fmt: skip
    else:
        out[SCALER] = "no GradScaler"
    n_fp = min(len(r.fingerprints) for r in recs)
    out[REPLICAS] = (f"{plural(n_fp, 'fingerprint')} per rank, {len(first.fingerprint_names)} tensors"
                     if n_fp else "no fingerprint taken")  # fmt: skip
    counts = sorted({r.collective_count for r in recs})
    out[COLLECTIVES] = (f"{'-'.join(map(str, (counts[0], counts[-1])))} calls per rank" if len(counts) > 1
                        else f"{plural(counts[0], 'call')} per rank" if counts[0] else "none called by the script")  # fmt: skip
    paths = {w.path for r in recs for w in r.writes}
    out[WRITES] = f"{plural(len(paths), 'path')} written" if paths else "nothing written"
    times = [t for r in recs for t in r.step_s[2:]]
    waits = [t for r in recs for t in r.data_s[2:]]
    if times:
        share = sum(waits) / sum(times) if sum(times) else 0.0
        out[TIMING] = (
            f"{1000 * median(times):.1f} ms per step (median), {100 * share:.0f}% waiting for data"
        )
    else:
        out[TIMING] = "too few steps to time"
    return out
