"""Slurm's client commands as the harness uses them: submit, follow, cancel, requeue, run a step.

Every command goes through the run's Shell (so harness.jsonl has its exact argv) with the cluster's
``SLURM_CONF``, and, for the local cluster, inside the controller's network namespace (the only
place its address is reachable from). The harness follows a job with ``scontrol show job``: no
slurmdbd (``sacct``) is needed, which is what a staging partition usually lacks too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

from chaos.errors import FaultError
from chaos.runtime.shell import CommandResult, Shell

TERMINAL_STATES = frozenset({
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE",
    "OUT_OF_MEMORY", "SPECIAL_EXIT", "REVOKED",
})
"""Base states after which a job does not run again by itself (a requeue goes back to PENDING)."""

_FIELD = re.compile(r"(?:^|\s)([A-Za-z][\w:/]*)=")


def parse_record(line: str) -> dict[str, str]:
    """One ``scontrol show -o`` record (``Key=value Key=value ...``) as a dict.

    Values may contain spaces (``Reason=...``, ``Comment=``), so a value runs up to the next `` Key=``.
    """
    keys = list(_FIELD.finditer(line))
    out: dict[str, str] = {}
    for i, m in enumerate(keys):
        end = keys[i + 1].start() if i + 1 < len(keys) else len(line)
        out[m.group(1)] = line[m.end():end].strip()
    return out


@dataclass(frozen=True)
class JobState:
    """What ``scontrol show job`` says about the run's job at one moment."""

    job_id: str
    state: str
    """Base state (RUNNING, PENDING, COMPLETED, ...); flags such as COMPLETING are in ``flags``."""
    reason: str = ""
    nodes: str = ""
    restarts: int = 0
    exit_code: int = 0
    exit_signal: int = 0
    flags: tuple[str, ...] = field(default_factory=tuple)
    requeue: bool = False
    """Slurm may requeue the job (sbatch --requeue): a PREEMPTED state is then a step on the way back to PENDING."""

    @classmethod
    def parse(cls, text: str) -> "JobState":
        rec = parse_record(text.strip().splitlines()[0] if text.strip() else "")
        if "JobId" not in rec or "JobState" not in rec:
            raise ValueError(f"not a scontrol job record: {text[:200]!r}")
        state, *flags = rec["JobState"].split("+")
        code, _, sig = rec.get("ExitCode", "0:0").partition(":")
        nodes = rec.get("NodeList", "")
        return cls(job_id=rec["JobId"], state=state, reason=rec.get("Reason", ""),
                   nodes="" if nodes == "(null)" else nodes, restarts=_int(rec.get("Restarts")),
                   exit_code=_int(code), exit_signal=_int(sig), flags=tuple(flags),
                   requeue=rec.get("Requeue") == "1")

    @property
    def finished(self) -> bool:
        """Over for good: a terminal base state and nothing of it still completing on a node."""
        if self.state == "PREEMPTED" and self.requeue:
            return False
        return self.state in TERMINAL_STATES and "COMPLETING" not in self.flags

    @property
    def running(self) -> bool:
        return self.state == "RUNNING"

    def shell_exit_code(self) -> int:
        """The job's result as an exit status: its batch script's code, 128+signal, or 1 for a failure without one."""
        if self.state == "COMPLETED":
            return self.exit_code
        if self.exit_code:
            return self.exit_code
        if self.exit_signal:
            return 128 + self.exit_signal
        return 1

    def summary(self) -> dict[str, object]:
        return {"job_id": self.job_id, "state": self.state, "reason": self.reason, "nodes": self.nodes,
                "restarts": self.restarts, "exit_code": f"{self.exit_code}:{self.exit_signal}",
                "flags": list(self.flags)}


def _int(value: str | None) -> int:
    try:
        return int(value or 0)
    except ValueError:
        return 0


@dataclass
class SlurmControl:
    """Runs Slurm client commands for one cluster: ``prefix`` enters its network, ``conf`` is its slurm.conf."""

    shell: Shell
    conf: str | None = None
    prefix: Sequence[str] = ()

    @property
    def env(self) -> dict[str, str] | None:
        return {"SLURM_CONF": self.conf} if self.conf else None

    def argv(self, *cmd: str) -> list[str]:
        return [*self.prefix, *cmd]

    def run(self, *cmd: str, check: bool = True, timeout: float = 30.0, env: dict[str, str] | None = None,
            input: str | None = None) -> CommandResult:
        merged = {**(self.env or {}), **(env or {})} or None
        return self.shell.run(self.argv(*cmd), check=check, timeout=timeout, env=merged, input=input)

    def undo_argv(self, *cmd: str) -> list[str]:
        """``cmd`` as a ledger entry can replay it: the cluster's SLURM_CONF on the command line, not in the environment."""
        return self.argv(*(["env", f"SLURM_CONF={self.conf}"] if self.conf else []), *cmd)

    def submit(self, script: str | None, env: dict[str, str] | None = None, options: Sequence[str] = ()) -> str:
        """``sbatch --parsable [OPTIONS] [SCRIPT]`` (with ``env`` added to the environment; no script with
        ``--wrap``); returns the job id."""
        res = self.run("sbatch", "--parsable", *options, *([script] if script else []), env=env)
        job_id = res.stdout.strip().split(";")[0]
        if not job_id.isdigit():
            raise FaultError(f"sbatch did not return a job id: {res.stdout.strip()!r} {res.stderr.strip()!r}")
        return job_id

    def job(self, job_id: str) -> JobState | None:
        """The job's state, or None when the controller cannot be asked (down, or timed out)."""
        try:
            res = self.run("scontrol", "show", "job", "-o", job_id, check=False, timeout=10)
        except FaultError:
            return None
        if not res.ok:
            return None
        try:
            return JobState.parse(res.stdout)
        except ValueError:
            return None

    def cancel(self, job_id: str) -> None:
        self.run("scancel", job_id, check=False)

    def requeue(self, job_id: str) -> None:
        self.run("scontrol", "requeue", job_id)

    def hostnames(self, hostlist: str) -> list[str]:
        """``node[0,2]`` as ``["node0", "node2"]`` (Slurm's own expansion, ``scontrol show hostnames``)."""
        return self.run("scontrol", "show", "hostnames", hostlist, timeout=10).stdout.split()

    def update_node(self, name: str, **fields: str) -> None:
        """``scontrol update NodeName=NAME Key=value ...`` (drain, resume: operator rights)."""
        self.run("scontrol", "update", f"NodeName={name}", *(f"{k}={v}" for k, v in fields.items()))

    def nodes(self) -> dict[str, dict[str, str]]:
        """Every node's record from ``scontrol show node -o``, by name."""
        res = self.run("scontrol", "show", "node", "-o", check=False, timeout=10)
        out = {}
        for line in res.stdout.splitlines():
            rec = parse_record(line)
            if "NodeName" in rec:
                out[rec["NodeName"]] = rec
        return out
