"""Where the local cluster's binaries are: the build ``scripts/kube-build.sh`` caches once per machine.

Kubernetes 1.20.2's server binaries are compiled from Debian bookworm's own source package, with the project's
three patches (scripts/kube/patches); etcd is Debian's. Nothing is downloaded at run time: a machine without the
build gets a refusal that names the script, never a half-started cluster.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import psutil

CACHE_ENV = "CHAOS_KUBE_CACHE"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "pause")
BUILD_HINT = ("run `bash scripts/kube-build.sh` once on this machine as root (about 7 CPU-minutes; the binaries are "
              "then cached)")


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "chaos" / "kube")


def built() -> Path | None:
    """The ``bin`` directory of the current finished build (its READY file is written last), or None."""
    current = cache_root() / "current"
    if not (current / "READY").is_file():
        return None
    bin_dir = current.resolve() / "bin"
    return bin_dir if all(os.access(bin_dir / b, os.X_OK) for b in BINARIES) else None


def build_info() -> str:
    """What the build says of itself (versions, patches, flags, its CPU and wall time), or ''."""
    info = cache_root() / "current" / "BUILDINFO"
    return info.read_text() if info.is_file() else ""


def foreign_kubelet() -> psutil.Process | None:
    """A kubelet this host already runs (not one of the harness's): two kubelets on one dockerd remove each
    other's pod containers, so the local cluster refuses to start beside it."""
    me = os.getpid()
    for proc in psutil.process_iter(["name", "cmdline", "status", "ppid"]):
        try:
            cmd = proc.info["cmdline"] or []
        except psutil.Error:
            continue
        # A dead one (a zombie) removes nothing; one this process started is the harness's own, ending.
        if proc.info["status"] == psutil.STATUS_ZOMBIE or proc.info["ppid"] == me:
            continue
        if proc.info["name"] == "kubelet" or (cmd and os.path.basename(cmd[0]) == "kubelet"):
            return proc
    return None


def refusal() -> str | None:
    """Why the local cluster cannot start here (None: it can), with what to do."""
    if os.geteuid() != 0:
        return "the local Kubernetes cluster needs root (its kubelet mounts volumes and drives docker)"
    if built() is None:
        return f"no Kubernetes build is cached under {cache_root()}: {BUILD_HINT}"
    for tool in ("docker", "openssl", "findmnt"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/setup.sh installs docker.io, openssl and util-linux)"
    if not Path("/var/run/docker.sock").exists():
        return "no docker daemon answers on /var/run/docker.sock (scripts/setup.sh starts one)"
    return None
