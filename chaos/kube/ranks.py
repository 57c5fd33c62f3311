"""The ranks of a job on a cluster of the user's, reached through the API only (``cluster: existing``).

No process tree of the pods is visible from the harness's machine: the ranks are listed and signalled by exec'ing
the step module (chaos/slurm/steps.py, which Slurm's srun steps run too) in each pod's agent container, where each
is re-checked to be the same process of the run before it is signalled. A killed container is an exec as well.
"""

from __future__ import annotations

import json
import shlex
import signal as _signal
from dataclasses import replace
from pathlib import Path
from typing import Any

from chaos.errors import FaultError
from chaos.kube.ctl import command
from chaos.runtime.context import RunContext
from chaos.runtime.processes import Worker
from chaos.runtime.undo import Command

STEPS = "chaos.slurm.steps"
"""The module that lists and signals a node's ranks where it runs (Slurm's srun steps run it too)."""


class RanksByExec:
    """The remote-workers side of the kubernetes target (its ``workers``, ``signal``, ``signal_undo``): a mixin
    that uses the target's ``cluster``, ``config``, ``pods``, ``pod_of`` and ``agent_status``."""

    cluster: Any
    config: Any
    pods: Any
    pod_of: Any
    agent_status: Any
    as_nodes_see: Any
    local: bool
    agent_name: str

    def agent_pidfile(self, run: RunContext, node: str) -> Path:
        return run.run_dir.resolve() / "kube" / f"agent-{node}.pid"

    def _exec(self, pod: Any, argv: list[str], what: str) -> str:
        code, out, err = self.cluster.exec(pod.metadata.name, self.agent_name, [self.as_nodes_see(a) for a in argv])
        if code != 0:
            raise FaultError(f"{what} in pod {pod.metadata.name} failed (exit {code}): {(err or out).strip()[:300]}")
        return out

    def workers(self, run: RunContext) -> list[Worker]:
        """Live workers of the run: the process tree on the local cluster; on yours, a listing exec in every pod."""
        if self.local:
            return run.tree.workers()
        out: list[tuple[str, Worker]] = []
        for pod in self.pods():
            node = (pod.metadata.labels or {}).get("chaos/node", "?")
            if pod.metadata.deletion_timestamp is not None or self.agent_status(pod) is None:
                continue
            try:
                answer = self._exec(pod, [self.config.python, "-m", STEPS, "list", str(run.run_dir.resolve())],
                                    "listing the ranks")
            except FaultError as exc:  # a pod that went between the listing and the exec
                run.log("kube_read_error", error=str(exc)[:300])
                continue
            for line in answer.splitlines():
                try:
                    w = json.loads(line)
                except ValueError:
                    continue
                if w.get("chaos_host") != node:  # a pod in its host's PID namespace sees every pod's ranks there
                    continue
                out.append((str(w.get("store")), Worker(
                    pid=w["pid"], create_time=w["create_time"], rank=w["rank"], local_rank=w["local_rank"],
                    restart_count=w["restart_count"], node=node, launch=w["launch"])))
        # A round: the workers of one rendezvous, sharing its store (new for every round here); newest last.
        newest = {store: max(w.create_time for s, w in out if s == store) for store, _ in out}
        order = {store: n for n, store in enumerate(sorted(newest, key=newest.__getitem__), start=1)}
        return [replace(w, generation=order[store]) for store, w in out]

    def _step_argv(self, run: RunContext, sig: str, workers: list[Worker]) -> list[str]:
        return [self.config.python, "-m", STEPS, "signal", self.as_nodes_see(str(run.run_dir.resolve())), sig,
                *(f"{w.pid}:{w.create_time!r}" for w in workers)]

    def signal(self, run: RunContext, workers: list[Worker], sig: _signal.Signals) -> list[int]:
        """Signal ``workers`` by an exec in each one's pod; each is re-checked there to be the same process first."""
        hit: list[int] = []
        for node in sorted({w.node for w in workers}):
            pod = self.pod_of(node)
            out = self._exec(pod, self._step_argv(run, sig.name, [w for w in workers if w.node == node]),
                             f"signalling ranks with {sig.name}")
            try:
                hit += json.loads(out.strip().splitlines()[-1])["hit"]
            except (ValueError, IndexError, KeyError, TypeError):
                raise FaultError(f"signalling ranks in pod {pod.metadata.name}: no answer ({out.strip()[:200]})") \
                    from None
        return hit

    def signal_undo(self, run: RunContext, worker: Worker, signame: str) -> Command:
        """A ledger entry that sends ``signame`` to ``worker`` later (a SIGCONT after a SIGSTOP), while its pod runs."""
        pod = self.pod_of(worker.node)
        where = (str(self.cluster.kubeconfig), self.cluster.namespace, pod.metadata.name)
        return Command(command("exec", *where, self.agent_name, context=self.config.context)
                       + ["--", *self._step_argv(run, signame, [worker])],
                       only_if=command("running", *where, context=self.config.context))

    def kill_agent(self, run: RunContext, pod: Any, sig: str) -> None:
        """Signal the node's torchrun agent from inside its container (the container then ends with its status)."""
        pid = shlex.quote(str(self.agent_pidfile(run, pod.metadata.labels["chaos/node"])))
        # Only the run's own agent: the file may be stale, and where the pod shares its host's PID namespace the
        # number could be anyone's there.
        mine = shlex.quote(f"CHAOS_RUN_DIR={run.run_dir.resolve()}")
        self._exec(pod, ["/bin/sh", "-c", f"p=$(cat {pid}) && tr '\\0' '\\n' < /proc/$p/environ | grep -qxF {mine} "
                                          f"&& kill -s {sig.removeprefix('SIG')} \"$p\""],
                   f"killing the agent with {sig}")
