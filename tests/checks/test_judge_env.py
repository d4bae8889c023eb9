"""env.judge on crafted per-rank data: each launch mistake yields exactly its finding."""

from ddpdoctor.checks import env
from judge_data import codes, env_rank, ranks, world


def test_healthy_ranks_have_no_findings() -> None:
    j = env.judge(ranks(env_rank), world())
    assert codes(j) == []
    assert j.summary.startswith("2 ranks on 1 host, torch 2.13.0")


def test_world_size_disagreement_is_named_with_both_values() -> None:
    data = ranks(env_rank)
    data[1]["vars"]["WORLD_SIZE"] = "4"
    j = env.judge(data, world())
    assert codes(j) == ["DDP102"]
    assert "2 on node-a (rank 0); 4 on node-a (rank 1)" in j.findings[0].message


def test_duplicate_rank_values() -> None:
    data = ranks(env_rank)
    data[1]["vars"]["RANK"] = "0"
    j = env.judge(data, world())
    assert codes(j) == ["DDP103"]
    assert j.findings[0].ranks == [0, 1]


def test_not_launched_by_torchrun() -> None:
    data = ranks(env_rank, 1)
    for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
        del data[0]["vars"][k]
    assert codes(env.judge(data, world(1))) == ["DDP101"]


def test_master_mismatch_and_socket_ifname_missing() -> None:
    data = ranks(env_rank)
    data[1]["vars"]["MASTER_PORT"] = "29501"
    data[0]["vars"]["GLOO_SOCKET_IFNAME"] = data[1]["vars"]["GLOO_SOCKET_IFNAME"] = "ib0"
    j = env.judge(data, world())
    assert codes(j) == ["DDP104", "DDP105"]
    assert j.findings[1].ranks == [0, 1]
    assert "no interface ib0" in j.findings[1].message


def test_ifname_rules_follow_nccl_syntax() -> None:
    have = ["lo", "eth0", "ib0"]
    assert env.ifname_problems("NCCL_SOCKET_IFNAME", "eth", have) == []  # prefix
    assert env.ifname_problems("NCCL_SOCKET_IFNAME", "=eth", have) == ["=eth"]  # exact
    assert env.ifname_problems("NCCL_SOCKET_IFNAME", "^docker,lo", have) == []  # exclusion list
    assert env.ifname_problems("GLOO_SOCKET_IFNAME", "eth", have) == [
        "eth"
    ]  # gloo wants exact names


def test_risky_settings_and_detail_debug() -> None:
    data = ranks(env_rank)
    for d in data.values():
        d["vars"]["NCCL_P2P_DISABLE"] = "1"
        d["vars"]["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
    assert codes(env.judge(data, world())) == ["DDP106", "DDP110"]


def test_version_mismatch_names_hosts_on_each_side() -> None:
    data = {r: env_rank(r, 3, host=h) for r, h in enumerate(["node-a", "node-b", "node-c"])}
    data[2]["versions"]["nccl"] = "2.19.3"
    data[0]["versions"]["nccl"] = data[1]["versions"]["nccl"] = "2.21.5"
    j = env.judge(data, world(3, nnodes=3))
    assert codes(j) == ["DDP107"]
    assert j.findings[0].message == (
        "nccl differs: 2.21.5 on node-a,node-b (ranks 0,1); 2.19.3 on node-c (rank 2)"
    )


def test_foreign_nonce_is_cross_talk() -> None:
    data = ranks(env_rank, 3)
    data[2]["nonce"] = "other-job"
    j = env.judge(data, world(3))
    assert codes(j) == ["DDP108"]
    assert j.findings[0].ranks == [2]


def test_nccl_setting_differs_across_ranks() -> None:
    data = ranks(env_rank)
    data[0]["vars"]["NCCL_ALGO"] = "Ring"
    j = env.judge(data, world())
    assert codes(j) == ["DDP109"]
    assert "NCCL_ALGO differs" in j.findings[0].message


def test_node_settings_compared_across_nodes_not_ranks() -> None:
    data = {
        r: env_rank(r, 4, host=h) for r, h in enumerate(["node-a", "node-a", "node-b", "node-b"])
    }
    for r, d in data.items():
        d["net"] = {"interface": "eth0", "mtu": 9000 if d["host"] == "node-a" else 1500}
        d["vars"]["CUDA_VISIBLE_DEVICES"] = str(r % 2)  # per-rank binding inside a node: fine
    j = env.judge(data, world(4, nnodes=2))
    assert codes(j) == ["DDP111"]
    assert (
        j.findings[0].message
        == "MTU of the traffic interface differs: 9000 on node-a; 1500 on node-b"
    )
    data[2]["vars"]["CUDA_VISIBLE_DEVICES"] = "0,1,2,3"  # node-b's first rank exports another list
    assert codes(env.judge(data, world(4, nnodes=2))) == ["DDP111", "DDP109"]
