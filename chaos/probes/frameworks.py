"""Probes for the fault-tolerance frameworks judged here (torchft, NVIDIA Resiliency Extension) and the metrics
servers: what is installed beside the harness, read from package metadata (importing them would cost a torch
import per probe)."""

from __future__ import annotations

import importlib.metadata
import shutil

from chaos.probes.base import Host, ProbeResult, probe


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


@probe("torchft", "target torchft: drop-replica replica groups around a lighthouse (torchft-nightly, numpy)")
def torchft(host: Host) -> ProbeResult:
    from chaos.targets.torchft import LIGHTHOUSE, lighthouse_binary

    version = _version("torchft-nightly") or _version("torchft")
    if version is None:
        return ProbeResult(False, "torchft is not installed", 'pip install -e ".[torchft]" (scripts/setup.sh does it)')
    if lighthouse_binary() is None:
        return ProbeResult(False, f"torchft {version} without its {LIGHTHOUSE} binary",
                           'pip install --force-reinstall -e ".[torchft]"')
    if _version("numpy") is None:  # torchft heals through .numpy() and does not declare it
        return ProbeResult(False, f"torchft {version}, but no numpy (a replica cannot heal without it)",
                           "pip install numpy")
    return ProbeResult(True, f"torchft {version}, {lighthouse_binary()}")


@probe("nvrx", "workload.launcher ft_launcher and the in-process restart wrapper (nvidia-resiliency-ext)")
def nvrx(host: Host) -> ProbeResult:
    version = _version("nvidia-resiliency-ext")
    if version is None:
        return ProbeResult(False, "NVIDIA Resiliency Extension is not installed",
                           'pip install -e ".[nvrx]" (0.4.1: later releases need glibc 2.39 or Python 3.12)')
    return ProbeResult(True, f"nvidia-resiliency-ext {version}")


@probe("metrics", "--metrics-textfile/--metrics-pushgateway/--metrics-port; the metrics test's real servers")
def metrics(host: Host) -> ProbeResult:
    client = _version("prometheus-client")
    if client is None:
        return ProbeResult(False, "prometheus-client is not installed", 'pip install -e .')
    servers = {name: shutil.which(name) for name in ("prometheus", "prometheus-pushgateway")}
    missing = [name for name, path in servers.items() if path is None]
    if missing:
        return ProbeResult(True, f"prometheus-client {client}; no {', '.join(missing)} here (only the metrics test "
                                 f"needs them: apt-get install -y {' '.join(missing)}, scripts/setup.sh as root)")
    return ProbeResult(True, f"prometheus-client {client}; prometheus and prometheus-pushgateway installed")
