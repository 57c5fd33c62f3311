"""Probe for the docker target: the SDK, a reachable daemon, and whether it can build images without a registry."""

from __future__ import annotations

import shutil

from chaos.probes.base import Host, ProbeResult, probe


@probe("docker", "target docker: nodes as containers on a private network")
def docker(host: Host) -> ProbeResult:
    try:
        import docker as sdk
    except ImportError:
        return ProbeResult(False, "the docker Python SDK is not installed", "pip install docker")
    try:
        client = sdk.from_env(timeout=5)
        version = client.version().get("Version", "?")
    except sdk.errors.DockerException as exc:
        fix = ("start the daemon: dockerd > /tmp/dockerd.log 2>&1 & (or ci/install-node-tools.sh)"
               if shutil.which("dockerd") else "apt-get install -y docker.io, then start dockerd")
        return ProbeResult(False, f"no docker daemon: {exc}", fix)
    return ProbeResult(True, f"docker daemon {version} reachable")
