"""Blast radius and leftovers: what belongs to a run (its tag, its processes, its mounts) and what of it remains.

Every kernel object a run creates (network namespace, bridge, veth, nft table, container) carries
``run_tag(run_dir)`` in its name, so ``find_leftovers`` can list exactly this run's
objects and nothing else. Processes are found by the ``CHAOS_RUN_DIR`` the harness put in their
environment, which survives re-parenting to init and new sessions (torchrun starts workers in their own).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import psutil

from chaos.runtime.ledger import Ledger
from chaos.runtime.network import short_id
from chaos.runtime.processes import stop_processes
from chaos.runtime.shell import Shell

def run_tag(run_dir: str | os.PathLike[str]) -> str:
    """Six hex digits naming one run (the same ``rid`` that chaos.runtime.network builds its names from).

    Kernel objects are named ``chaos-<tag>...``, ``chaos_<tag>...`` or ``ch<letter><tag>...`` (bridge
    ``chb<tag>``, veths ``chn<tag>n0``/``chs<tag>n0``; IFNAMSIZ leaves no room for more): ``tagged``
    matches exactly those, so a leftover check never mistakes someone else's object for the run's.
    """
    return short_id(Path(run_dir))


def tagged(tag: str) -> re.Pattern[str]:
    """Matches a name made for the run with this tag (see ``run_tag``)."""
    return re.compile(rf"(?<![A-Za-z0-9])(?:chaos[-_]|ch[a-z]){re.escape(tag)}")


@dataclass(frozen=True)
class Leftover:
    """One thing of a run still in place after it should have been reverted."""

    kind: str
    """processes | mounts | files | netns | links | nft | qdiscs | containers | docker networks | ledger"""
    what: str


def _same_dir(value: str, cwd: str | None, run_dir: Path) -> bool:
    p = Path(value)
    if not p.is_absolute():
        if cwd is None:
            return False
        p = Path(cwd) / p
    try:
        return p.resolve() == run_dir
    except (OSError, RuntimeError):
        return False


def run_processes(run_dir: str | os.PathLike[str]) -> list[psutil.Process]:
    """Live processes whose environment says they belong to this run (``CHAOS_RUN_DIR``), wherever they were re-parented."""
    target = Path(run_dir).resolve()
    me = os.getpid()
    found = []
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == me:
            continue
        try:
            env = proc.environ()
            value = env.get("CHAOS_RUN_DIR")
            if not value or Path(value).name != target.name:
                continue
            try:
                cwd = proc.cwd()
            except psutil.Error:
                cwd = None
            if _same_dir(value, cwd, target) and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            continue
    return found


def stop_run_processes(run_dir: str | os.PathLike[str], grace_s: float = 3.0) -> list[int]:
    """Kill every process that belongs to this run (resumed first, so a stopped one can die); returns their PIDs."""
    procs = run_processes(run_dir)
    stop_processes(procs, grace_s)
    return [p.pid for p in procs]


def mounts_under(roots: list[Path]) -> list[str]:
    """Mount points at or below any of ``roots`` (from /proc/self/mountinfo)."""
    resolved = [Path(os.path.realpath(r)) for r in roots]
    out = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        fields = line.split()
        if len(fields) < 5:
            continue
        point = Path(fields[4].encode().decode("unicode_escape"))
        if any(point == r or point.is_relative_to(r) for r in resolved):
            out.append(str(point))
    return out


def _run(argv: list[str], failed: list[tuple[str, str]] | None = None) -> str | None:
    """Output of a read-only listing command, or None when the tool is absent or the listing failed.

    A failed listing (the tool is there but said nothing usable: an unreachable docker daemon, an nft
    error, a timeout) is appended to ``failed`` as (tool, why): unknown is not the same as empty."""
    if shutil.which(argv[0]) is None:
        return None
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (subprocess.TimeoutExpired, OSError) as exc:
        if failed is not None:
            failed.append((argv[0], f"'{' '.join(argv)}' did not finish: {exc}"))
        return None
    if proc.returncode != 0:
        if failed is not None:
            said = (proc.stderr or proc.stdout).strip().splitlines()
            failed.append((argv[0], f"'{' '.join(argv)}' exited {proc.returncode}"
                                    + (f": {said[-1][:160]}" if said else "")))
        return None
    return proc.stdout


def _named(text: str | None, tag: str) -> list[str]:
    pattern = tagged(tag)
    return [] if text is None else [line.strip() for line in text.splitlines() if pattern.search(line)]


def kernel_leftovers(tag: str, failed: list[tuple[str, str]] | None = None) -> list[Leftover]:
    """Network namespaces, links, nft tables, qdiscs and containers whose name carries ``tag``; a
    listing that failed goes to ``failed`` (see ``_run``)."""
    out = [Leftover("netns", line) for line in _named(_run(["ip", "netns", "list"], failed), tag)]
    out += [Leftover("links", line) for line in _named(_run(["ip", "-o", "link", "show"], failed), tag)]
    out += [Leftover("nft", line) for line in _named(_run(["nft", "list", "tables"], failed), tag)]
    out += [Leftover("qdiscs", line) for line in _named(_run(["tc", "qdisc", "show"], failed), tag)]
    out += [Leftover("containers", line) for line in _named(
        _run(["docker", "ps", "-a", "--format", "{{.Names}} {{.Status}}"], failed), tag)]
    out += [Leftover("docker networks", line) for line in _named(
        _run(["docker", "network", "ls", "--format", "{{.Name}}"], failed), tag)]
    return out


def find_leftovers(run_dir: str | os.PathLike[str], shell: Shell | None = None,
                   failed: list[tuple[str, str]] | None = None) -> list[Leftover]:
    """Everything of the run still in place: processes, mounts, kernel objects by tag, and whatever
    a ledger entry's own probe (ballast file exists, qdisc still there, rank still stopped) reports.
    Listings that failed go to ``failed`` as (tool, why)."""
    run_dir = Path(run_dir).resolve()
    ledger = Ledger(run_dir)
    out = [Leftover("processes", f"pid {p.pid}: {' '.join(_cmdline(p))[:200]}") for p in run_processes(run_dir)]
    out += [Leftover("mounts", m) for m in mounts_under([run_dir, *ledger.dirs])]
    out += kernel_leftovers(run_tag(run_dir), failed)
    for entry, what in ledger.leftovers(shell or Shell()):
        out.append(Leftover("ledger", f"[{entry.owner}] {what}"))
    out += [Leftover("ledger", f"unreadable ledger record {u}") for u in ledger.unreadable]
    return out


def _cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except psutil.Error:
        return ["?"]
