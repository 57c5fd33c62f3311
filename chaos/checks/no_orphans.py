"""Nothing of the run is left after teardown: no process, netns, link, nft table, container, network or mount named for it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import psutil

from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome
from chaos.network import short_id
from chaos.shell import Shell


def leftover_processes(run_dir: Path) -> list[str]:
    """Processes whose environment names this run (every process the harness launched inherits CHAOS_RUN_DIR)."""
    want = str(run_dir)
    found = []
    for proc in psutil.process_iter(["pid", "name"]):
        try:
            if proc.pid == os.getpid():
                continue
            if proc.environ().get("CHAOS_RUN_DIR") == want and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(f"pid {proc.pid} ({proc.info['name']})")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def leftover_kernel_objects(rid: str, shell: Shell) -> list[str]:
    """Network namespaces, links and nft tables in the host namespace whose names carry the run id."""
    found = []
    if shutil.which("ip"):
        found += [f"netns {line.split()[0]}" for line in shell.run(["ip", "netns", "list"], check=False).stdout.splitlines()
                  if rid in line]
        for line in shell.run(["ip", "-o", "link", "show"], check=False).stdout.splitlines():
            parts = line.split(":")
            if len(parts) > 1 and rid in parts[1]:
                found.append(f"link {parts[1].strip().split('@')[0]}")
    if shutil.which("nft"):
        found += [f"nft {line.strip()}" for line in shell.run(["nft", "list", "tables"], check=False).stdout.splitlines()
                  if f"chaos_{rid}" in line]
    return found


def leftover_containers(rid: str, shell: Shell) -> list[str]:
    if shutil.which("docker") is None:
        return []
    ps = shell.run(["docker", "ps", "-a", "--filter", f"name=chaos-{rid}", "--format", "{{.Names}}"], check=False)
    nets = shell.run(["docker", "network", "ls", "--filter", f"name=chaos-{rid}", "--format", "{{.Name}}"], check=False)
    return ([f"container {n}" for n in ps.stdout.split() if ps.ok]
            + [f"docker network {n}" for n in nets.stdout.split() if nets.ok])


def leftover_mounts(run_dir: Path, rid: str) -> list[str]:
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return []
    root = str(run_dir.resolve())
    return [f"mount {line.split()[1]}" for line in lines
            if len(line.split()) > 1 and (line.split()[1].startswith(root) or f"chaos-{rid}" in line.split()[1])]


class NoOrphansConfig(CheckConfig):
    """No fields: everything named for the run is looked for."""


class NoOrphans(Check, kind="no_orphans"):
    """Nothing of the run is left after teardown: no process, netns, link, nft table, container, network or mount named for it."""

    Config = NoOrphansConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        rid = short_id(outcome.run_dir)
        shell = Shell()
        left = (leftover_processes(outcome.run_dir) + leftover_kernel_objects(rid, shell)
                + leftover_containers(rid, shell) + leftover_mounts(outcome.run_dir, rid))
        if left:
            return self.failed(f"{len(left)} thing(s) of run {rid} left behind: {', '.join(left)}; "
                               f"remove them with: chaos cleanup {outcome.run_dir}", leftovers=left)
        return self.passed(f"nothing of run {rid} left (processes, netns, links, nft tables, containers, mounts)")
