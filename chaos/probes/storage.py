"""Probes for the storage faults: the checkpoint mounts of storage-full and read-only-storage, and the FUSE
passthrough of slow-storage and write-error."""

from __future__ import annotations

from chaos.errors import CapabilityError
from chaos.probes.base import Host, ProbeResult, probe


@probe("mounts", "storage-full, read-only-storage: a tmpfs or loop-mounted ext4 over the checkpoint directory",
       needs=("root",))
def mounts(host: Host) -> ProbeResult:
    from chaos.faults.ckpt_mount import check_can_mount

    try:
        check_can_mount("ext4")
    except CapabilityError as exc:  # its message says what is missing and how to get it
        return ProbeResult(False, str(exc))
    return ProbeResult(True, "mount, umount, mkfs.ext4 and truncate present")


@probe("fuse", "slow-storage, write-error: a FUSE passthrough over the checkpoint directory (root, /dev/fuse, "
       "libfuse2, mfusepy)", needs=("root",))
def fuse(host: Host) -> ProbeResult:
    from chaos.faults.slow_storage import check_can_fuse

    try:
        check_can_fuse()
    except CapabilityError as exc:  # its message says what is missing and how to get it
        return ProbeResult(False, str(exc))
    import mfusepy

    return ProbeResult(True, f"/dev/fuse, libfuse {mfusepy.fuse_version_major}.{mfusepy.fuse_version_minor}, mfusepy")
