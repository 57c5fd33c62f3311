"""Kill a replica group through torchft's own lighthouse: the dashboard's Kill button (POST /replica/<id>/kill)."""

from __future__ import annotations

import html
import re
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import psutil
from pydantic import Field

from chaos.errors import FaultError
from chaos.faults.base import Fault, FaultConfig
from chaos.runtime.context import RunContext

HTTP_TIMEOUT_S = 10.0
"""The lighthouse answers from memory; its kill waits for the manager's Kill RPC (torchft gives that 10 s)."""
EXIT_WAIT_S = 15.0
"""How long the killed manager's process may take to exit before the kill counts as not done."""
_KILL = re.compile(r'hx-post="/replica/([^"]+)/kill"')
_MANAGER = re.compile(r"Manager:\s*(\S+)")


class LighthouseKillConfig(FaultConfig):
    group: int = Field(default=1, ge=0)
    """The replica group (node rg<group>) whose manager the lighthouse is asked to kill."""


def quorum_members(status_html: str) -> list[tuple[str, str]]:
    """(replica id, manager address) of each member of the lighthouse's last quorum, as its /status page lists
    them: each member's block names its manager and ends with its Kill button."""
    out, start = [], 0
    for kill in _KILL.finditer(status_html):
        managers = _MANAGER.findall(status_html, start, kill.start())
        # The page is an HTML template: its values come escaped (a "/" in a replica id as &#x2f;).
        out.append((html.unescape(kill.group(1)), html.unescape(managers[-1]) if managers else ""))
        start = kill.end()
    return out


def _port(address: str) -> int | None:
    try:
        return urllib.parse.urlsplit(address if "//" in address else f"//{address}").port
    except ValueError:
        return None


class LighthouseKill(Fault, kind="lighthouse-kill"):
    """Kill a replica group through torchft's own lighthouse: the dashboard's Kill button (POST /replica/<id>/kill).

    The way torchft's users fail a replica by hand: the lighthouse looks the replica up in its last quorum and
    sends that replica's manager a Kill RPC, and the manager's process exits ("killed from dashboard"). The
    harness reads the quorum from the lighthouse's /status page and picks the member whose manager listens
    in a process of replica group ``group`` (the port of its address, matched against that group's
    processes): the group is found by what runs in it, not by a naming convention of the script's replica
    ids. torchrun restarts the killed process like any other rank failure. Nothing to revert.
    """

    Config = LighthouseKillConfig
    needs_target = ("torchft",)

    def plan(self, run: RunContext) -> list[str]:
        url = self._url(run) or "http://127.0.0.1:<lighthouse port>"
        return [f"GET {url}/status; POST {url}/replica/<replica id of the manager in rg{self.config.group}>/kill"]

    def _url(self, run: RunContext) -> str | None:
        port = getattr(run.target, "port", 0)
        return f"http://127.0.0.1:{port}" if port else None

    def inject(self, run: RunContext) -> dict[str, Any]:
        url = self._url(run)
        if url is None:
            raise FaultError("lighthouse-kill needs target torchft with its lighthouse running")
        node = f"rg{self.config.group}"
        try:
            with urllib.request.urlopen(f"{url}/status", timeout=HTTP_TIMEOUT_S) as resp:
                status = resp.read().decode("utf-8", "replace")
        except (OSError, urllib.error.URLError) as e:
            raise FaultError(f"lighthouse-kill: the lighthouse's status page {url}/status did not answer: {e}") from e
        members = quorum_members(status)
        listening = self._listening(run, node)
        chosen = [(rid, addr) for rid, addr in members if _port(addr) in listening]
        if not chosen:
            seen = ", ".join(f"{rid} (manager {addr or '?'})" for rid, addr in members) or "none"
            raise FaultError(f"lighthouse-kill: no member of the lighthouse's last quorum has its manager in replica "
                             f"group {node} (members: {seen}; {node} listens on {sorted(listening) or 'no port'}): "
                             f"the group is not in the quorum yet, or is down")
        replica_id, address = chosen[0]
        pid = listening[_port(address)]
        t_fault = run.clock.wall()
        request = urllib.request.Request(f"{url}/replica/{urllib.parse.quote(replica_id, safe='')}/kill", method="POST")
        try:
            with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as resp:
                answer = f"{resp.status}"
        except urllib.error.HTTPError as e:
            # The manager exits inside the Kill RPC, before it can reply, so a kill that worked comes back from the
            # lighthouse as a 500 "transport error": what happened is judged by the process, not by the answer.
            answer = f"{e.code}: {e.read().decode('utf-8', 'replace')[:200]}"
        except (OSError, urllib.error.URLError) as e:
            raise FaultError(f"lighthouse-kill: POST {url}/replica/.../kill failed: {e}") from e
        try:
            psutil.Process(pid).wait(timeout=EXIT_WAIT_S)
        except psutil.NoSuchProcess:
            pass
        except psutil.TimeoutExpired:
            raise FaultError(f"lighthouse-kill: the lighthouse answered {answer} to killing {replica_id}, but its "
                             f"manager's process (pid {pid}, {node}) was still running {EXIT_WAIT_S:g} s "
                             f"later") from None
        return {"t_fault": t_fault, "node": node, "pids": [pid], "replica_id": replica_id, "manager": address,
                "lighthouse_answer": answer}

    @staticmethod
    def _listening(run: RunContext, node: str) -> dict[int, int]:
        """Port -> pid of every TCP port a process of ``node`` listens on."""
        out: dict[int, int] = {}
        for name, proc in run.tree.processes():
            if name != node:
                continue
            try:
                conns = proc.net_connections(kind="tcp")
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
            out.update({c.laddr.port: proc.pid for c in conns if c.status == psutil.CONN_LISTEN})
        return out
