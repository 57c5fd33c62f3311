"""netns/docker target helpers: names fit IFNAMSIZ and differ per run, subnets avoid the host's, elastic exit codes."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest
from pydantic import ValidationError

from chaos.runtime.network import IFNAMSIZ, RunNames, pick_subnet, short_id, used_networks
from chaos.targets.base import Node
from chaos.runtime.hostimage import host_rootfs_tar
from chaos.targets.netns import NetnsConfig, nnodes_arg, surviving_exit_code


class _Proc:
    def __init__(self, code):
        self.code = code

    def poll(self):
        return self.code


def test_every_interface_name_fits_and_runs_differ(tmp_path: Path) -> None:
    a, b = RunNames(short_id(tmp_path / "run-a")), RunNames(short_id(tmp_path / "run-b"))
    assert a.rid != b.rid
    for names in (a, b):
        for k in range(32):
            assert len(names.node_if(k)) <= IFNAMSIZ and len(names.switch_if(k)) <= IFNAMSIZ
        assert len(names.bridge) <= IFNAMSIZ
    assert a.nft_table(0) != a.nft_table(1) and a.nft_table(0).startswith(f"chaos_{a.rid}")


def test_subnet_avoids_routes_and_addresses_on_the_host() -> None:
    first = pick_subnet("abc123", [])
    assert first.prefixlen == 24 and first.subnet_of(ipaddress.ip_network("10.192.0.0/10"))
    used = used_networks(f"{first} dev br0 proto kernel scope link\ndefault via 192.0.2.1 dev eth0\n")
    assert first in used
    assert not pick_subnet("abc123", used).overlaps(first)
    # A wide route covering the whole range leaves nothing.
    with pytest.raises(Exception, match="no free private /24"):
        pick_subnet("abc123", used_networks("10.0.0.0/8 dev x"))


def test_elastic_nnodes_and_config_bounds() -> None:
    assert nnodes_arg(2, None) == "2" and nnodes_arg(2, 1) == "1:2" and nnodes_arg(3, 3) == "3"
    with pytest.raises(ValidationError, match="must not exceed"):
        NetnsConfig(nodes=2, min_nodes=3)


def test_a_node_killed_by_a_fault_does_not_decide_the_exit_code() -> None:
    n0, n1 = Node("node0", 0, proc=_Proc(None)), Node("node1", 1, proc=_Proc(-9))
    assert surviving_exit_code([n0, n1]) is None  # node 0 still runs
    n0.proc = _Proc(0)
    assert surviving_exit_code([n0, n1]) == -9  # node 1 died on its own: the job failed
    n1.info["lost"] = True
    assert surviving_exit_code([n0, n1]) == 0  # node 1 was killed on purpose; node 0 finished


def test_host_rootfs_is_tiny_and_mirrors_root_links() -> None:
    import io
    import os
    import tarfile

    data = host_rootfs_tar()
    assert len(data) < 64 * 1024
    members = {m.name: m for m in tarfile.open(fileobj=io.BytesIO(data))}
    assert {"proc", "sys", "dev", "tmp", "usr", "etc"} <= set(members)
    for name in ("bin", "lib"):
        if os.path.islink("/" + name):
            assert members[name].issym() and members[name].linkname == os.readlink("/" + name)
