"""The netns target and network faults on the real kernel: nodes reach each other, a partition cuts them, teardown leaves nothing."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chaos.runtime.safety import kernel_leftovers
from chaos.runtime.context import HarnessLog, RunContext
from chaos.faults.network_degrade import NetworkDegrade, NetworkDegradeConfig
from chaos.faults.partition import Partition, PartitionConfig
from chaos.runtime.ledger import Ledger
from chaos.runtime.network import has_netem, run_names
from chaos.runtime.shell import Shell
from chaos.targets.netns import Netns, NetnsConfig

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("nft") is None,
    reason="needs root, iproute2 and nftables: run as root or in CI (ci/install-node-tools.sh, then pytest)")

SERVER = "import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); " \
         "s.bind((sys.argv[1], 5999)); s.listen(8)\nwhile True: c,_=s.accept(); c.sendall(b'ok'); c.close()"
CLIENT = "import socket,sys; s=socket.create_connection((sys.argv[1], 5999), timeout=1.5); print(s.recv(2).decode())"
# The time to connect and read the server's reply, measured inside the client (its start-up left out).
CLIENT_RTT = "import socket,sys,time; t=time.perf_counter(); s=socket.create_connection((sys.argv[1], 5999), " \
             "timeout=5); s.recv(2); print(time.perf_counter()-t)"


@pytest.fixture
def netns_run(tmp_path: Path):
    log = HarnessLog(tmp_path / "harness.jsonl")
    run = RunContext(experiment=None, run_dir=tmp_path, ckpt_dir=tmp_path, ledger=Ledger(tmp_path),  # type: ignore[arg-type]
                     shell=Shell(log), log=log, rng=random.Random(0))
    target = Netns(NetnsConfig(nodes=3))
    run.target = target
    target.prepare(run)
    server = subprocess.Popen(["ip", "netns", "exec", target.nodes[0].info["netns"], sys.executable, "-c", SERVER,
                               target.nodes[0].address], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    try:
        yield run, target
    finally:
        server.kill()
        server.wait()
        failures = run.ledger.revert(run.shell)
        assert not failures
        assert kernel_leftovers(run_names(run).rid) == []


def round_trip_s(target: Netns, src: int, dst: int) -> float:
    res = subprocess.run(["ip", "netns", "exec", target.nodes[src].info["netns"], sys.executable, "-c", CLIENT_RTT,
                          target.nodes[dst].address], capture_output=True, text=True, timeout=20, check=True)
    return float(res.stdout)


def reaches(target: Netns, src: int, dst: int) -> bool:
    res = subprocess.run(["ip", "netns", "exec", target.nodes[src].info["netns"], sys.executable, "-c", CLIENT,
                          target.nodes[dst].address], capture_output=True, text=True, timeout=10)
    return res.stdout.strip() == "ok"


def test_nodes_reach_each_other_and_nothing_is_left(netns_run) -> None:
    run, target = netns_run
    names = run_names(run)
    assert all(len(x) <= 15 for k in range(3) for x in (names.node_if(k), names.switch_if(k), names.bridge))
    assert reaches(target, 1, 0) and reaches(target, 2, 0)
    # The host's own namespace has no link, route or address of the run.
    assert names.rid not in subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert str(target.nodes[0].address) not in subprocess.run(["ip", "route"], capture_output=True, text=True).stdout


def test_partition_cuts_one_node_and_revert_heals_it(netns_run) -> None:
    run, target = netns_run
    fault = Partition(PartitionConfig(nodes=[1]), index=0)
    fault.inject(run)
    assert not reaches(target, 1, 0)
    assert reaches(target, 2, 0)  # only node 1 is cut off
    assert not fault.revert(run)
    assert reaches(target, 1, 0)


def test_netem_detection_is_logged_and_loss_falls_back_without_it(netns_run) -> None:
    run, target = netns_run
    netem = has_netem(run)
    records = [r for r in run.log.records if r["ev"] == "capability"]
    assert records and records[0]["available"] is netem
    fault = NetworkDegrade(NetworkDegradeConfig(nodes=[1], loss_pct=100, rate_mbit=5), index=1)
    details = fault.inject(run)
    assert details["mechanism"] == ("netem" if netem else "nftables+tbf")
    assert not reaches(target, 1, 0)  # 100% loss
    qdiscs = subprocess.run(["ip", "netns", "exec", target.nodes[1].info["netns"], "tc", "qdisc", "show",
                             "dev", target.nodes[1].info["ifname"]], capture_output=True, text=True).stdout
    assert f" {run_names(run).qdisc_handle} root" in qdiscs
    assert not fault.revert(run)
    assert reaches(target, 1, 0)


def test_netem_delay_holds_back_one_nodes_packets_and_revert_restores_them(netns_run) -> None:
    run, target = netns_run
    if not has_netem(run):
        pytest.skip("this kernel has no sch_netem (modprobe sch_netem; bash ci/netem_check.sh runs the netem path "
                    "where it loads)")
    fault = NetworkDegrade(NetworkDegradeConfig(nodes=[1], delay_ms=150), index=1)
    assert fault.inject(run)["mechanism"] == "netem"
    # Node 1's egress only: its SYN waits 150 ms; node 2's link is untouched.
    assert round_trip_s(target, 1, 0) >= 0.15
    assert round_trip_s(target, 2, 0) < 0.1
    assert not fault.revert(run)
    assert round_trip_s(target, 1, 0) < 0.1
