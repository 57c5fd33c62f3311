"""The host-userland image: an almost empty root whose containers see this host's /usr, /etc and Python
through read-only bind mounts, so a node or a pod runs the host's own torch with no registry and no build.
The docker target's nodes and the kubernetes target's pods both use it."""

from __future__ import annotations

import hashlib
import io
import os
import sys
import tarfile
from pathlib import Path
from typing import Any

HOST_IMAGE_REPO = "chaos-node-host"
_ROOT_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")


def host_rootfs_tar() -> bytes:
    """A tar of an almost empty root: mount points, and the host's /bin -> usr/bin style links."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for d in ("proc", "sys", "dev", "tmp", "run", "etc", "usr", "root", "work", "var", "var/tmp"):
            info = tarfile.TarInfo(d)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if d.endswith("tmp") else 0o755
            tar.addfile(info)
        for name in _ROOT_LINKS:
            p = Path("/") / name
            if p.is_symlink():
                info = tarfile.TarInfo(name)
                info.type, info.linkname = tarfile.SYMTYPE, os.readlink(p)
                tar.addfile(info)
    return buf.getvalue()


def host_binds() -> dict[str, dict[str, str]]:
    """Read-only binds that make the host's userland the container's: /usr, /etc, real /lib* dirs, Python."""
    binds = {"/usr": {"bind": "/usr", "mode": "ro"}, "/etc": {"bind": "/etc", "mode": "ro"}}
    for name in _ROOT_LINKS:
        p = Path("/") / name
        if p.is_dir() and not p.is_symlink():
            binds[str(p)] = {"bind": str(p), "mode": "ro"}
    prefix = Path(sys.prefix).resolve()
    if not str(prefix).startswith("/usr/"):
        binds[str(prefix)] = {"bind": str(prefix), "mode": "ro"}
    base = Path(sys.base_prefix).resolve()
    if base != prefix and not str(base).startswith("/usr/"):
        binds[str(base)] = {"bind": str(base), "mode": "ro"}
    return binds


def ensure_host_image(client: Any) -> tuple[str, bool]:
    """The host-userland image's reference in ``client``'s docker daemon (a docker SDK client), imported on first
    use: its tag is the hash of the tar, so a host whose root links change gets a new one. (ref, newly imported)"""
    tar = host_rootfs_tar()
    ref = f"{HOST_IMAGE_REPO}:{hashlib.sha1(tar).hexdigest()[:12]}"
    if client.images.list(name=ref):
        return ref, False
    repo, tag = ref.split(":")
    client.api.import_image_from_data(tar, repository=repo, tag=tag)
    return ref, True
