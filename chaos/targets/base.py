"""The target contract: where the nodes of a run live (this host, network namespaces, containers)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, ClassVar

from chaos.errors import CapabilityError
from chaos.runtime.context import RunContext
from chaos.runtime.launch import check_launcher
from chaos.runtime.node import Node
from chaos.runtime.processes import Worker
from chaos.registry import TARGETS, Plugin
from chaos.spec.configs import TargetConfig

__all__ = ["Node", "Target", "TargetConfig"]


class Target(Plugin):
    """The target contract (chaos.runtime.context.TargetHandle is what the run sees of it). Base class. Subclass with ``kind="..."`` to register.

    ``prepare`` and ``launch`` register their undo in the ledger (owner ``"target"``) before acting,
    so ``teardown`` and ``chaos cleanup`` remove whatever they made.
    """

    registry = TARGETS
    Config: ClassVar[type[TargetConfig]] = TargetConfig
    independent_worlds: ClassVar[bool] = False
    """Each node runs a torchrun world of its own (torchft's replica groups): a restart on one node is that node's
    own, not a new round of the whole job, so the live workers are the newest of each node, not the newest of all."""

    def __init__(self, config: TargetConfig) -> None:
        self.config = config
        self.nodes: list[Node] = []

    @property
    def node_count(self) -> int:
        return 1

    def job_node_names(self) -> list[str]:
        """The nodes the job runs on now, node rank order (a scheduler may have moved it: see Slurm)."""
        return [n.name for n in sorted(self.nodes, key=lambda n: n.rank)]

    def check(self, run: RunContext) -> None:
        """Raise CapabilityError naming what is missing (root, docker) and how to get it. Here: the workload's
        launcher (ft_launcher needs its extra); a target that checks more calls this first."""
        check_launcher(run)

    def blocked(self, run: RunContext) -> str | None:
        """Why the workload cannot start or go on as things are (a pod the cluster cannot start), read every poll:
        the run ends there, naming it, instead of waiting out its timeout. None: nothing holds it."""
        return None

    def admit(self, run: RunContext, kind: str, config: Any) -> None:
        """Raise CapabilityError, before launch, for a fault of ``kind`` this target cannot let the run do."""

    # The run's ranks. Here: the run's own process tree on this host. A target whose nodes the
    # harness cannot see (Slurm, cluster: existing) answers through the scheduler instead.
    remote_workers: ClassVar[bool] = False

    def workers(self, run: RunContext) -> list["Worker"]:
        """Live training workers of the run."""
        return run.tree.workers()

    def owned_dirs(self, run: RunContext) -> list[Path]:
        """Directories outside the run directory that the target creates and removes (its scope in the ledger)."""
        return []

    def plan(self, run: RunContext) -> list[str]:
        """What prepare/launch will do, with exact commands, for ``--dry-run``."""
        return []

    def prepare(self, run: RunContext) -> None:
        """Create the nodes' environment (namespaces, bridges, containers)."""

    def launch(self, run: RunContext) -> list[Node]:
        """Start one torchrun agent per node; returns the nodes."""
        raise NotImplementedError

    def exit_code(self) -> int | None:
        """None while any node's agent runs; then the first non-zero exit code, or 0."""
        codes = [n.poll() for n in self.nodes]
        if any(c is None for c in codes):
            return None
        return next((c for c in codes if c != 0), 0)

    def stop(self, run: RunContext) -> None:
        """Kill every process of the run (all nodes)."""
        run.ledger.revert(run.shell, owner="target/procs")

    def teardown(self, run: RunContext) -> list[Any]:
        """Remove everything ``prepare`` made; returns revert failures."""
        return run.ledger.revert(run.shell, owner="target")


class ClusterModes:
    """A target whose cluster is a throwaway local one (``cluster: local``, its nodes this host's processes) or
    the user's (``cluster: existing``: the ranks are reached through the cluster, not a process tree)."""

    config: Any

    @property
    def local(self) -> bool:
        return self.config.cluster == "local"

    @property
    def remote_workers(self) -> bool:
        return not self.local

    def as_nodes_see(self, text: str) -> str:
        """``text`` (a command, a variable's value) with this host's real path of ``shared_dir`` written as the
        setting names it: the harness resolves its paths, and where the setting goes through a symlink on this host
        (/shared -> /mnt/nfs/team) the nodes, which mount the shared filesystem at the setting's path, have no
        /mnt/nfs/team."""
        shared = getattr(self.config, "shared_dir", None)
        if self.local or not shared:
            return text
        written = os.path.abspath(os.path.expanduser(shared))
        real = str(Path(written).resolve())
        if real == written:
            return text
        # A whole path only: at the start of the text or after a separator (space, quote, =, :), and ending there
        # or at a /: /scratch/data/x is not /data/x.
        return re.sub(r"(?<![^\s'\"=:;])" + re.escape(real) + r"(?=/|$|[\s'\":;])", lambda _: written, text)


def require_shared_dir(run: RunContext, shared_dir: str | None, nodes: str) -> None:
    """A cluster of the user's writes the run's events and checkpoints where the harness reads them: refuse,
    before anything starts, a ``shared_dir`` that is not a writable directory here, or a run directory outside it."""
    shared = Path(shared_dir or "").resolve()
    if not shared.is_dir() or not os.access(shared, os.W_OK):
        raise CapabilityError(f"target.shared_dir: {shared} is not a writable directory on this host; it must be "
                              f"a shared filesystem the {nodes} mount at the same path")
    run_dir = run.run_dir.resolve()
    if not run_dir.is_relative_to(shared):
        raise CapabilityError(f"the run directory {run_dir} is not inside target.shared_dir {shared}: the {nodes} "
                              f"write the run's events and checkpoints there; run with --runs-dir {shared / 'runs'}")
