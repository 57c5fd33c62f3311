"""Target ``local``: one torchrun agent on this host, in its own session so the whole tree can be killed."""

from __future__ import annotations

import shlex
import subprocess

import psutil

from chaos.runtime.context import RunContext
from chaos.runtime.launch import Rendezvous, workload_argv, workload_cwd, workload_env
from chaos.targets.base import Node, Target, TargetConfig
from chaos.runtime.undo import KillTree


class LocalConfig(TargetConfig):
    """No fields: the workload runs on this host with torchrun --standalone."""


class Local(Target, kind="local"):
    """One torchrun agent on this host (single node)."""

    Config = LocalConfig

    def _argv(self, run: RunContext) -> list[str]:
        return workload_argv(run, Rendezvous(standalone=True))

    def plan(self, run: RunContext) -> list[str]:
        return [f"launch (local): {shlex.join(self._argv(run))}"]

    def launch(self, run: RunContext) -> list[Node]:
        out = open(run.run_dir / "output.log", "ab")
        proc = subprocess.Popen(
            self._argv(run), env=workload_env(run, "local"), stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True, cwd=workload_cwd(run))
        out.close()
        run.ledger.push("target/procs", KillTree(pid=proc.pid, create_time=psutil.Process(proc.pid).create_time()))
        run.tree.add_root("local", proc.pid)
        self.nodes = [Node(name="local", rank=0, proc=proc)]
        return self.nodes
