"""Probes for the netns target and network faults: root, network namespaces, tc netem, nftables, tbf."""

from __future__ import annotations

import os
import shutil

from chaos.probes.base import Host, ProbeResult, probe
from chaos.errors import ChaosError


@probe("root", "namespaces, links, nftables, tc and mounts need root")
def root(host: Host) -> ProbeResult:
    if os.geteuid() == 0:
        return ProbeResult(True, "running as root")
    return ProbeResult(False, f"running as uid {os.geteuid()}", "run as root: sudo -E chaos run ...")


@probe("netns", "target netns: a network namespace per node", needs=("root",))
def netns(host: Host) -> ProbeResult:
    if shutil.which("ip") is None:
        return ProbeResult(False, "'ip' not installed", "apt-get install -y iproute2")
    try:
        ns = host.netns()  # creates a namespace with a veth pair in it
    except ChaosError as exc:
        return ProbeResult(False, f"cannot create a namespace with a veth pair: {exc}", "modprobe veth")
    res = host.shell.run(["ip", "-n", ns, "link", "add", "chdocb0", "type", "bridge"], check=False)
    if not res.ok:
        return ProbeResult(False, f"bridges fail: {res.stderr.strip()}", "load the bridge module: modprobe bridge")
    return ProbeResult(True, "namespaces, veth links and bridges work")


@probe("netem", "network-degrade delay/jitter/corrupt/duplicate/reorder", needs=("netns",))
def netem(host: Host) -> ProbeResult:
    res = host.shell.run(["tc", "-n", host.netns(), "qdisc", "add", "dev", "chdoc0", "root", "netem", "delay", "1ms"],
                         check=False)
    if res.ok:
        host.shell.run(["tc", "-n", host.netns(), "qdisc", "del", "dev", "chdoc0", "root"], check=False)
        return ProbeResult(True, "tc netem works")
    return ProbeResult(False, f"tc netem fails: {res.stderr.strip()} (partition and loss fall back to nftables, "
                       f"bandwidth to tbf; delay, jitter, corrupt, duplicate, reorder are refused)",
                       "modprobe sch_netem (Debian/Ubuntu: apt-get install -y linux-modules-extra-$(uname -r))")


@probe("nftables", "partition, and packet loss without netem", needs=("netns",))
def nftables(host: Host) -> ProbeResult:
    if shutil.which("nft") is None:
        return ProbeResult(False, "'nft' not installed", "apt-get install -y nftables")
    script = ("table inet chaos_doctor {\n  chain out {\n    type filter hook output priority 0; policy accept;\n"
              "    ip daddr 192.0.2.99 numgen random mod 1000 < 10 drop\n  }\n}\n")
    res = host.shell.run(["ip", "netns", "exec", host.netns(), "nft", "-f", "-"], input=script, check=False)
    if not res.ok:
        return ProbeResult(False, f"nft rules fail: {res.stderr.strip()}",
                           "load nf_tables: modprobe nf_tables (kernel >= 4.x with CONFIG_NF_TABLES)")
    return ProbeResult(True, "nftables tables, drop and numgen rules work")


@probe("tbf", "network-degrade rate_mbit without netem", needs=("netns",))
def tbf(host: Host) -> ProbeResult:
    res = host.shell.run(["tc", "-n", host.netns(), "qdisc", "add", "dev", "chdoc0", "root", "tbf", "rate", "1mbit",
                          "burst", "1600", "latency", "100ms"], check=False)
    if not res.ok:
        return ProbeResult(False, f"tc tbf fails: {res.stderr.strip()}", "modprobe sch_tbf")
    host.shell.run(["tc", "-n", host.netns(), "qdisc", "del", "dev", "chdoc0", "root"], check=False)
    return ProbeResult(True, "tc tbf works")
