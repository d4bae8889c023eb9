"""`env`: the launcher's variables, distributed settings and versions on every rank, compared
across ranks. Runs before the process group exists, so a broken launch is still described."""

from __future__ import annotations

import os
import platform
import socket
from collections.abc import Iterable
from typing import Any

from ddpdoctor import __version__, registry
from ddpdoctor.node.envinfo import ifname_matches
from ddpdoctor.report import problems
from ddpdoctor.report.model import Finding, Judgement, World
from ddpdoctor.report.ranks import by_host, fmt_ranks, group_by_value, plural, ranks_txt, spread

ID = "env"
TITLE = "Environment"
STAGE = registry.BEFORE_GROUP
COLLECTIVE = False

LAUNCH_VARS = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
REQUIRED = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE")
PREFIXES = ("NCCL_", "GLOO_", "TORCH_", "TORCHELASTIC_", "CUDA_", "OMP_", "MASTER_", "SLURM_")
# Set per rank or per node by the launcher: differences are expected.
PER_RANK = {
    "RANK",
    "LOCAL_RANK",
    "GROUP_RANK",
    "ROLE_RANK",
    "TORCHELASTIC_ERROR_FILE",
    "CUDA_VISIBLE_DEVICES",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NODEID",
    "SLURMD_NODENAME",
    "SLURM_TOPOLOGY_ADDR",
    "OMP_NUM_THREADS",
}
COMPARED_PREFIXES = ("NCCL_", "GLOO_", "TORCH_NCCL_", "TORCH_DISTRIBUTED_")
RISKY = {
    "NCCL_P2P_DISABLE": ("1", "forces GPU-to-GPU traffic through host memory"),
    "NCCL_IB_DISABLE": ("1", "turns off InfiniBand/RoCE; traffic falls back to TCP sockets"),
    "NCCL_SHM_DISABLE": ("1", "turns off shared-memory transport between local ranks"),
    "NCCL_NET_GDR_LEVEL": ("0", "turns off GPUDirect RDMA"),
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": (
        "0",
        "a failed collective then hangs instead of ending the job",
    ),
    "NCCL_ASYNC_ERROR_HANDLING": ("0", "a failed collective then hangs instead of ending the job"),
    "NCCL_DEBUG": ("TRACE", "TRACE logging slows every collective"),
}
VERSION_KEYS = ("torch", "python", "cuda", "nccl", "driver", "ddpdoctor")


def _versions() -> dict[str, str | None]:
    import torch

    nccl = None
    try:
        if torch.cuda.is_available():
            v = torch.cuda.nccl.version()
            nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception:  # noqa: BLE001 - a probe that cannot answer returns None
        nccl = None
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "cuda": torch.version.cuda,
        "nccl": nccl,
        "ddpdoctor": __version__,
    }


def _interfaces() -> list[str]:
    try:
        return [name for _i, name in socket.if_nameindex()]
    except OSError:
        return []


def ifname_problems(var: str, value: str, existing: list[str]) -> list[str]:
    """Names in a *_SOCKET_IFNAME that match no interface. NCCL reads '^a,b' as 'not these' and
    '=eth0' as an exact name; otherwise each entry is a prefix."""
    if not value or value.startswith("^"):
        return []
    gloo = var.startswith("GLOO")
    entries = [e.strip() for e in value.split(",") if e.strip()]
    return [e for e in entries if not any(ifname_matches(i, e, exact=gloo) for i in existing)]


def run(ctx: Any) -> dict[str, Any]:
    from ddpdoctor.node.redact import redact_env

    env = {k: v for k, v in os.environ.items() if k.startswith(PREFIXES) or k in LAUNCH_VARS}
    guarded = dict(
        ctx.options.get("env_overrides") or {}
    )  # the user's values, not ddpdoctor's guard
    env.update(guarded)
    data: dict[str, Any] = {
        "host": ctx.host,
        "pid": ctx.pid,
        "launched": bool(ctx.options.get("launched", True)),
        "nonce": ctx.options.get("nonce", ""),
        "vars": redact_env(env),
        "versions": _versions(),
        "interfaces": _interfaces(),
        "guarded": sorted(guarded),
    }
    try:
        from ddpdoctor.node import envinfo  # the node snapshot that `ddpdoctor env` prints

        snap = envinfo.snapshot()
        data["snapshot"] = snap
        data["versions"]["driver"] = (snap.get("gpus") or {}).get("driver")
        data["net"] = _traffic_interface(snap, ctx.backend)
    except Exception:  # noqa: BLE001 - the snapshot is a bonus, never a failure
        pass
    return data


def host_facts(data: dict[str, Any]) -> dict[str, Any]:
    """What the per-host table shows from this check: versions and the traffic interface."""
    return {"versions": data.get("versions", {}), "net": data.get("net", {})}


def _traffic_interface(snap: dict[str, Any], backend: str) -> dict[str, Any]:
    """The interface the backend will carry traffic on, and its MTU (from the node snapshot)."""
    net = snap.get("network") or {}
    picks = (net.get("nccl" if backend == "nccl" else "gloo") or {}).get("interfaces") or []
    if not picks:
        picks = (net.get("nccl") or {}).get("interfaces") or []
    mtus = {i.get("name"): i.get("mtu") for i in net.get("interfaces") or []}
    name = picks[0] if picks else None
    return {"interface": name, "mtu": mtus.get(name), "backend": backend}


def _one_value(values: Iterable[Any]) -> bool:
    """All the same (a set of the raw values): at 16,384 ranks that agree, this one pass is the
    whole cost; only when it says no are the values grouped by rank (by text, group_by_value)."""
    try:
        return len(set(values)) < 2
    except TypeError:  # unhashable values: let the grouping decide
        return False


def _compare(per_rank: dict[int, dict[str, Any]], hosts: dict[int, str], key: str) -> str | None:
    if _one_value([d["vars"].get(key, "<unset>") for d in per_rank.values()]):
        return None
    values = {r: d["vars"].get(key, "<unset>") for r, d in per_rank.items()}
    return spread(values, hosts) if len(group_by_value(values)) > 1 else None


def _per_host_differences(
    per_rank: dict[int, dict[str, Any]], hosts: dict[int, str]
) -> list[Finding]:
    """Node-level settings that must match across nodes: the MTU of the interface traffic uses
    (jumbo frames on some nodes only), and CUDA_VISIBLE_DEVICES as a node exports it."""
    findings = []
    groups = by_host(per_rank)
    if len(groups) < 2:
        return findings
    reps = {
        ranks[0]: per_rank[ranks[0]] for ranks in groups.values()
    }  # one rank speaks for its node
    mtu = {
        r: (d.get("net") or {}).get("mtu")
        for r, d in reps.items()
        if (d.get("net") or {}).get("mtu")
    }
    if len(group_by_value(mtu)) > 1:
        findings.append(
            problems.MTU_MISMATCH.finding(
                f"MTU of the traffic interface differs: {_values_by_host(mtu, hosts)}", sorted(mtu)
            )
        )
    cvd = {r: d["vars"].get("CUDA_VISIBLE_DEVICES", "<unset>") for r, d in reps.items()}
    if len(group_by_value(cvd)) > 1:
        findings.append(
            problems.ENV_INCONSISTENT.finding(
                f"CUDA_VISIBLE_DEVICES differs across nodes: {_values_by_host(cvd, hosts)}",
                sorted(cvd),
                variable="CUDA_VISIBLE_DEVICES",
            )
        )
    return findings


def _values_by_host(values: dict[int, Any], hosts: dict[int, str]) -> str:
    """'9000 on node-a,node-b; 1500 on node-c' (one value per host)."""
    return "; ".join(
        f"{v} on {','.join(sorted({hosts.get(r, '?') for r in rs}))}"
        for v, rs in group_by_value(values).items()
    )


def judge(per_rank: dict[int, dict[str, Any]], world: World) -> Judgement:
    findings: list[Finding] = []
    hosts = {r: d.get("host", "?") for r, d in per_rank.items()}
    # every variable any rank has: a per-rank pass runs only for the variables someone set
    every_key = set().union(*(d["vars"] for d in per_rank.values()))

    required = set(REQUIRED)
    missing = {
        r: [v for v in REQUIRED if v not in d["vars"]]
        for r, d in per_rank.items()
        if not required <= d["vars"].keys()
    }
    if missing:
        names = sorted({v for m in missing.values() for v in m})
        findings.append(
            problems.ENV_MISSING.finding(
                f"{', '.join(names)} not set on {ranks_txt(missing)}: not started by torchrun or another launcher",
                list(missing),
                missing=names,
            )
        )

    ws = _compare(per_rank, hosts, "WORLD_SIZE")
    if ws:
        findings.append(
            problems.WORLD_SIZE_MISMATCH.finding(f"WORLD_SIZE differs: {ws}", list(per_rank))
        )

    declared = {r: d["vars"].get("RANK") for r, d in per_rank.items() if "RANK" in d["vars"]}
    # all distinct, the healthy case: 16,384 groups of one are not worth building
    by_value = (
        {} if len(set(map(str, declared.values()))) == len(declared) else group_by_value(declared)
    )
    dups = {v: rs for v, rs in by_value.items() if len(rs) > 1}
    for value, ranks in dups.items():
        findings.append(
            problems.RANK_DUPLICATE.finding(
                f"RANK={value} is used by {len(ranks)} processes", ranks, rank_value=value
            )
        )
    try:
        sizes = {
            int(v)
            for v in {d["vars"].get("WORLD_SIZE") for d in per_rank.values()}
            if v is not None
        }
        numeric = {int(v) for v in declared.values()}
    except ValueError:
        sizes, numeric = set(), set()
    if len(sizes) == 1 and not dups:
        size = sizes.pop()
        bad = sorted(r for r in numeric if not 0 <= r < size)
        if bad:
            findings.append(
                problems.RANK_DUPLICATE.finding(f"RANK {fmt_ranks(bad)} outside 0..{size - 1}", bad)
            )

    for key in ("MASTER_ADDR", "MASTER_PORT"):
        diff = _compare(per_rank, hosts, key)
        if diff:
            findings.append(
                problems.MASTER_MISMATCH.finding(f"{key} differs: {diff}", list(per_rank))
            )

    bad_if: dict[tuple[str, str, str, str], list[int]] = {}
    ifname_vars = [v for v in ("GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME") if v in every_key]
    seen: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}  # 16k ranks, a few answers
    for r, d in sorted(per_rank.items()):
        for var in ifname_vars:
            asked = (var, d["vars"].get(var, ""), tuple(d.get("interfaces", [])))
            if not asked[1]:
                continue
            bad_names = seen.get(asked)
            if bad_names is None:
                bad_names = seen[asked] = ifname_problems(*asked[:2], list(asked[2]))
            if bad_names:
                key = (str(d.get("host")), var, d["vars"][var], ", ".join(bad_names))
                bad_if.setdefault(key, []).append(r)
    for (host, var, value, names), ranks in bad_if.items():
        have = ", ".join(per_rank[ranks[0]].get("interfaces", [])) or "none"
        findings.append(
            problems.SOCKET_IFNAME_MISSING.finding(
                f"{var}={value} on {host}: no interface {names} (has {have})",
                ranks,
                host=host,
                variable=var,
            )
        )

    risky: dict[tuple[str, str], list[int]] = {}
    for var, (bad_value, why) in RISKY.items():
        if var not in every_key:
            continue
        for r, d in per_rank.items():
            if d["vars"].get(var, "").upper() == bad_value:
                risky.setdefault((var, why), []).append(r)
    for (var, why), ranks in sorted(risky.items()):
        findings.append(
            problems.RISKY_SETTING.finding(
                f"{var}={RISKY[var][0]} on {plural(len(ranks), 'rank')}: {why}", ranks, variable=var
            )
        )

    detail = [
        r
        for r, d in per_rank.items()
        if "TORCH_DISTRIBUTED_DEBUG" in every_key
        and d["vars"].get("TORCH_DISTRIBUTED_DEBUG", "").upper() == "DETAIL"
    ]
    if detail:
        findings.append(
            problems.DEBUG_DETAIL.finding(
                "TORCH_DISTRIBUTED_DEBUG=DETAIL is set"
                + (
                    "; with torch 2.13 on CPU it segfaults DDP's constructor, so ddpdoctor ran its "
                    "probes with INFO"
                    if any(
                        "TORCH_DISTRIBUTED_DEBUG" in per_rank[r].get("guarded", []) for r in detail
                    )
                    else ""
                ),
                detail,
            )
        )

    # ranks that agree share one `versions` object (runfiles reads them so): look at each once
    distinct_versions = list({id(d["versions"]): d["versions"] for d in per_rank.values()}.values())
    for key in VERSION_KEYS:
        if _one_value([v.get(key) for v in distinct_versions]):
            continue
        values = {r: d["versions"].get(key) for r, d in per_rank.items()}
        if len(group_by_value(values)) < 2:
            continue
        findings.append(
            problems.VERSION_MISMATCH.finding(
                f"{key} differs: {spread(values, hosts)}", list(per_rank), component=key
            )
        )

    findings += _per_host_differences(per_rank, hosts)

    nonces = {r: d.get("nonce", "") for r, d in per_rank.items()}
    if not _one_value(nonces.values()) and len(group_by_value(nonces)) > 1:
        groups = group_by_value(nonces)
        ours = max(groups.values(), key=len)
        strangers = sorted(r for rs in groups.values() if rs is not ours for r in rs)
        findings.append(
            problems.RUN_CROSS_TALK.finding(
                f"{ranks_txt(strangers)} {'belongs' if len(strangers) == 1 else 'belong'} to another ddpdoctor run on the same master port",
                strangers,
            )
        )

    keys = sorted(k for k in every_key if k.startswith(COMPARED_PREFIXES) and k not in PER_RANK)
    for key in keys:
        diff = _compare(per_rank, hosts, key)
        if diff:
            findings.append(
                problems.ENV_INCONSISTENT.finding(
                    f"{key} differs: {diff}", list(per_rank), variable=key
                )
            )

    any_rank = per_rank[min(per_rank)] if per_rank else {}
    versions = any_rank.get("versions", {})
    nhosts = len(set(hosts.values()))
    summary = (
        f"{plural(len(per_rank), 'rank')} on {plural(nhosts, 'host')}, torch {versions.get('torch', '?')}, "
        f"python {versions.get('python', '?')}"
    )
    if versions.get("nccl"):
        summary += f", NCCL {versions['nccl']}"
    return Judgement(summary=summary, findings=findings)
