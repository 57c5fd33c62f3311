"""partition and network-degrade: the exact nft/tc command lines, undo registered before acting, netem refusal."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from chaos.errors import CapabilityError, FaultError
from chaos.faults.network_degrade import NetworkDegrade, NetworkDegradeConfig
from chaos.faults.partition import Partition, PartitionConfig, split
from chaos.runtime.network import run_names


def _cmds(seq):
    return [c for kind, c in seq if kind == "cmd"]


def test_partition_both_ways_drops_in_and_out_in_the_isolated_node_only(net_run) -> None:
    run, seq = net_run
    fault = Partition(PartitionConfig(nodes=1), index=0)
    details = fault.inject(run)
    table = run_names(run).nft_table(0)
    assert details["nodes"] == ["node1"] and details["peers"] == ["node0", "node2"]
    assert details["nft_table"] == table and table.startswith(f"chaos_{run_names(run).rid}")
    # The delete is registered before the table exists.
    assert seq[0][0] == "undo" and f"nft delete table inet {table}" in seq[0][1]
    assert "ip netns exec chaos-abcdef-n1 nft list table" in seq[0][1]
    assert _cmds(seq) == ["ip netns exec chaos-abcdef-n1 nft -f -"]
    script = fault.rules(run, *split(run.target.nodes, [1], None))["node1"]
    assert "hook output" in script and "ip daddr { 10.200.1.10, 10.200.1.12 } drop" in script
    assert "hook input" in script and "ip saddr { 10.200.1.10, 10.200.1.12 } drop" in script


def test_one_way_partition_has_one_chain(net_run) -> None:
    run, _seq = net_run
    fault = Partition(PartitionConfig(nodes=[0], peers=[2], direction="outbound"), index=3)
    script = fault.rules(run, *split(run.target.nodes, [0], [2]))["node0"]
    assert "ip daddr { 10.200.1.12 } drop" in script and "hook input" not in script


def test_partition_rejects_overlapping_or_unknown_groups(net_run) -> None:
    run, _seq = net_run
    with pytest.raises(FaultError, match="both sides"):
        split(run.target.nodes, [0, 1], [1])
    with pytest.raises(FaultError, match=r"no node with rank \[7\]"):
        split(run.target.nodes, [7], None)


def test_degrade_without_netem_uses_nft_numgen_and_tbf(net_run) -> None:
    run, seq = net_run
    run.netem = False
    fault = NetworkDegrade(NetworkDegradeConfig(nodes=1, loss_pct=12.5, rate_mbit=10), index=2)
    details = fault.inject(run)
    assert details["mechanism"] == "nftables+tbf"
    handle = run_names(run).qdisc_handle
    cmds = _cmds(seq)
    assert cmds[0] == "ip netns exec chaos-abcdef-n1 nft -f -"
    assert cmds[1] == (f"ip netns exec chaos-abcdef-n1 tc qdisc add dev chnabcdefn1 root handle {handle} "
                       f"tbf rate 10mbit burst 1600 latency 100ms")
    undos = [c for kind, c in seq if kind == "undo"]
    assert f"tc qdisc del dev chnabcdefn1 root handle {handle}" in undos[1]
    # every action has its undo registered right before it
    assert [k for k, _ in seq] == ["undo", "cmd", "undo", "cmd"]


def test_degrade_with_netem_builds_one_netem_qdisc(net_run) -> None:
    run, seq = net_run
    run.netem = True
    cfg = NetworkDegradeConfig(nodes=[0, 2], delay_ms=50, jitter_ms=10, loss_pct=1, corrupt_pct=0.1,
                               duplicate_pct=2, reorder_pct=25, rate_mbit=100)
    NetworkDegrade(cfg, index=0).inject(run)
    handle = run_names(run).qdisc_handle
    assert _cmds(seq) == [
        f"ip netns exec chaos-abcdef-n{k} tc qdisc add dev chnabcdefn{k} root handle {handle} netem delay 50ms 10ms "
        f"loss 1% corrupt 0.1% duplicate 2% reorder 25% rate 100mbit" for k in (0, 2)]


def test_netem_only_options_are_refused_without_netem(net_run, monkeypatch) -> None:
    run, _seq = net_run
    run.netem = False
    monkeypatch.setattr("chaos.faults.network_degrade.require_root", lambda what: None)
    fault = NetworkDegrade(NetworkDegradeConfig(nodes=1, delay_ms=20, corrupt_pct=1), index=0)
    with pytest.raises(CapabilityError, match="delay_ms, corrupt_pct need tc netem"):
        fault.check(run)
    NetworkDegrade(NetworkDegradeConfig(nodes=1, loss_pct=5), index=0).check(run)  # loss alone falls back


def test_degrade_config_needs_something_and_reorder_needs_delay() -> None:
    with pytest.raises(ValidationError, match="at least one"):
        NetworkDegradeConfig(nodes=1)
    with pytest.raises(ValidationError, match="reorder_pct needs delay_ms"):
        NetworkDegradeConfig(nodes=1, reorder_pct=10)


def test_nft_loss_is_per_mille_and_total_loss_is_a_plain_drop() -> None:
    from chaos.runtime.network import nft_ruleset

    assert "numgen random mod 1000 < 5 drop" in nft_ruleset("t", out_daddrs=["10.0.0.1"], loss_pct=0.5)
    assert "numgen" not in nft_ruleset("t", out_daddrs=["10.0.0.1"], loss_pct=100)
