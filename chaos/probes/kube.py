"""Probe for the local Kubernetes cluster: the cached build, its tools and the official Python client."""

from __future__ import annotations

import importlib.util

from chaos.kube.build import BUILD_HINT, build_info, built, foreign_kubelet, refusal
from chaos.probes.base import Host, ProbeResult, probe


@probe("kube", "local Kubernetes 1.20 (etcd, API server, controller manager, scheduler, kubelet on docker)",
       needs=("root", "docker"))
def kube(host: Host) -> ProbeResult:
    if built() is None:
        return ProbeResult(False, "no Kubernetes build is cached on this machine", BUILD_HINT)
    why = refusal()
    if why:
        return ProbeResult(False, why)
    if importlib.util.find_spec("kubernetes") is None:
        return ProbeResult(False, "the official Python client is not installed", "pip install -e '.[kube]'")
    other = foreign_kubelet()
    if other is not None:
        return ProbeResult(False, f"a kubelet already runs here (pid {other.pid}): the local cluster would fight it "
                                  f"over docker's containers", "stop it, or use its cluster through a kubeconfig")
    first = build_info().splitlines()[1:2]
    return ProbeResult(True, f"{first[0] if first else 'built'}; a throwaway cluster starts per run")
