"""Fail the writes of some checkpoint files (one rank's shard) while every other write succeeds (FUSE passthrough).

A full or read-only filesystem fails every rank at once, and every rank sees it. What large jobs meet
is narrower: one node's disk or mount throws EIO, one rank's quota is used up, and that rank's write
fails while its peers' succeed and they go on to the next collective of the save. A checkpointer
that does not agree on the outcome then hangs (the peers wait for a rank that is handling its
error) or commits a checkpoint without the failed rank's part. This fault mounts the same passthrough
as slow-storage (chaos.runtime.slowfs; before launch, over the empty checkpoint directory) and, while
it acts, fails creating, writing, truncating or syncing each file whose path in the checkpoint
directory matches one of ``paths`` with ``error``: ``*rng_rank1.pt`` is rank 1's own file in the
reference DDP workload, ``*__1_*.distcp`` rank 1's shard of a DCP save. What failed (each operation,
its time and file) is the ``slowfs`` harness record when the fault is reverted.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from chaos.faults.base import FaultConfig
from chaos.faults.slow_storage import ThroughSlowfs, set_control
from chaos.runtime.context import RunContext
from chaos.runtime.slowfs import FAIL_OPS

Op = Literal["create", "write", "truncate", "fsync"]


class WriteErrorConfig(FaultConfig):
    paths: list[str] = Field(min_length=1)
    """Globs (fnmatch: ``*`` crosses folders) of the files to fail, relative to the checkpoint directory, e.g.
    ``["*rng_rank1.pt"]`` (rank 1's own file of the reference DDP workload), ``["*__1_*.distcp"]`` (rank 1's DCP shard)."""
    error: Literal["EIO", "ENOSPC", "EROFS", "EDQUOT", "EACCES"] = "EIO"
    """The error each failed operation returns: an I/O error, no space, a read-only filesystem, a quota, a permission."""
    ops: list[Op] = Field(default_factory=lambda: list(FAIL_OPS), min_length=1)
    """The operations that fail on those files."""


class WriteError(ThroughSlowfs, kind="write-error"):
    """Fail the writes of some checkpoint files (one rank's shard) while every other write succeeds (FUSE passthrough)."""

    Config = WriteErrorConfig

    def acts(self) -> str:
        c = self.config
        return f"fail {', '.join(c.ops)} of {', '.join(c.paths)} with {c.error}"

    def inject(self, run: RunContext) -> dict[str, Any]:
        c = self.config
        mount = set_control(run, self, fail={"paths": list(c.paths), "errno": c.error, "ops": list(c.ops)})
        return {"mount": str(mount), "paths": list(c.paths), "error": c.error, "ops": list(c.ops),
                "mechanism": "FUSE passthrough (chaos.runtime.slowfs)"}
