"""Make one rank run out of memory: CUDA's out-of-memory error in its next forward, or a real kill by the
host kernel's OOM killer under a memory limit of its own."""

from __future__ import annotations

from typing import Any, Literal

import psutil
from pydantic import Field

from chaos.errors import CapabilityError, FaultError
from chaos.faults._instep import InStepConfig, InStepFault
from chaos.faults.kill_rank import remote, select_workers
from chaos.instep.command import Command
from chaos.runtime import memcg
from chaos.runtime.context import RunContext
from chaos.runtime.undo import RemoveCgroup


class OomConfig(InStepConfig):
    mode: Literal["cuda", "host"] = "cuda"
    """cuda: the rank's next forward fails with ``torch.OutOfMemoryError``, so the stack's own handling runs. On a
    rank that trains on CUDA it is CUDA's own: the forward asks the caching allocator for more than the card
    holds, which frees its cache, counts the OOM and calls its observers as on any OOM (the ``instep`` event
    says ``allocator: cuda``); on a CPU rank the harness raises it with CUDA's message (``allocator:
    injected``). host: the rank's process
    gets a memory cgroup of its own, limited to what it uses plus ``headroom_mb``, and then allocates ``gib``
    in its next forward: the kernel's OOM killer ends it (SIGKILL), and the cgroup's own counter names the kill
    (needs root and a writable memory cgroup)."""
    gib: float = Field(default=2.0, gt=0, le=1e6)
    """cuda: how far the request goes beyond the card's capacity (GiB; on a CPU rank, the allocation the message
    says failed). host: what the rank allocates, beyond its limit."""
    headroom_mb: int = Field(default=128, ge=16, le=1 << 20)
    """host: the limit is the rank's resident memory when the fault acts plus this."""


class Oom(InStepFault, kind="oom"):
    """Make one rank run out of memory: CUDA's out-of-memory error in its next forward, or a real kill by the host kernel's OOM killer under a memory limit of its own."""

    Config = OomConfig
    named_by = ("oom",)

    def __init__(self, config: OomConfig, index: int) -> None:
        super().__init__(config, index)
        self._cgroup: memcg.MemCgroup | None = None

    def check(self, run: RunContext) -> None:
        super().check(run)
        c: OomConfig = self.config  # type: ignore[assignment]
        if c.mode != "host":
            return
        if c.rank == "all":
            raise CapabilityError(f"{self.label}: mode host limits one rank's process; give a rank number")
        if remote(run):
            raise CapabilityError(f"{self.label}: mode host acts on a process of this host; the target's ranks run "
                                  f"elsewhere (use mode: cuda)")
        why = memcg.refusal()
        if why is not None:
            raise CapabilityError(f"{self.label}: {why}")

    def command(self) -> Command:
        c: OomConfig = self.config  # type: ignore[assignment]
        where = "allocate" if c.mode == "host" else "forward"
        return Command(index=self.index, kind=self.kind, where=where, ranks=self._ranks(), steps=c.steps,
                       params={"gib": c.gib})

    def inject(self, run: RunContext) -> dict[str, Any]:
        c: OomConfig = self.config  # type: ignore[assignment]
        if c.mode != "host":
            return super().inject(run)
        [worker] = select_workers(run, c.rank)
        try:
            rss = psutil.Process(worker.pid).memory_info().rss
        except psutil.Error as exc:
            raise FaultError(f"rank {c.rank} (pid {worker.pid}) is gone: {exc}") from None
        limit = rss + c.headroom_mb * 2**20
        own = memcg.own_memory_cgroup()
        if own is None:
            raise FaultError("no memory cgroup to make the rank's own below (checked before launch; gone since?)")
        cgroup = memcg.MemCgroup(own.path / f"chaos-{run.run_dir.name}-oom{self.index}", own.version)
        run.ledger.push(self.owner, RemoveCgroup(str(cgroup.path)))  # the undo before the act
        cgroup.path.mkdir()
        cgroup.set_limit(limit)
        cgroup.add(worker.pid)
        self._cgroup = cgroup
        run.log("oom_limit", fault=self.label, cgroup=str(cgroup.path), pid=worker.pid, rank=c.rank,
                limit_bytes=limit, rss_bytes=rss, version=cgroup.version)
        details = super().inject(run)
        return {**details, "cgroup": str(cgroup.path), "pid": worker.pid, "limit_bytes": limit, "rss_bytes": rss}

    def revert(self, run: RunContext) -> list[Any]:
        if self._cgroup is not None:
            # Read before the cgroup goes: the kernel's own count is what names the kill as an OOM kill.
            run.log("oom_kill", fault=self.label, cgroup=str(self._cgroup.path), oom_kills=self._cgroup.oom_kills(),
                    version=self._cgroup.version)
            self._cgroup = None
        return super().revert(run)
