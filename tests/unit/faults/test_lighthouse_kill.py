"""lighthouse-kill: the replica to kill is read from the lighthouse's own status page and chosen by where its manager runs."""

from __future__ import annotations

from chaos.faults.lighthouse_kill import _port, quorum_members


def member(replica_id: str, address: str, step: int = 20) -> str:
    """One member's block as torchft's lighthouse renders /status (its askama template: values HTML-escaped)."""
    return (f'<div class="member">\n  <b>{replica_id}</b> <br/>\n  Step: {step} <br/>\n  Manager: {address} <br/>\n'
            f'  TCPStore: localhost:29500 <br/>\n  World size: 1 <br/>\n'
            f'  <button hx-post="/replica/{replica_id}/kill"\n          hx-trigger="click">\n    Kill\n  </button>\n</div>\n')


PAGE = ("<h2>Previous quorum</h2>\nQuorum ID: 3 <br/>\n"
        + member("torchft_ddp_0:11107505-f819", "http://localhost:44101")
        + member("torchft_ddp_1:366f5364-128f", "http://localhost:40333", step=19)
        + member("team&#x2f;job:9", "http://[::1]:41000")
        + "<h2>Heartbeats</h2>\n<li>torchft_ddp_0:11107505-f819: 0.05s ago</li>\n")


def test_each_member_of_the_last_quorum_with_its_manager() -> None:
    assert quorum_members(PAGE) == [("torchft_ddp_0:11107505-f819", "http://localhost:44101"),
                                    ("torchft_ddp_1:366f5364-128f", "http://localhost:40333"),
                                    ("team/job:9", "http://[::1]:41000")]


def test_a_page_with_no_quorum_yet_has_no_member() -> None:
    assert quorum_members("<h2>Previous quorum</h2>\nNo quorum yet<h2>Heartbeats</h2>") == []


def test_the_manager_port_is_what_picks_the_group() -> None:
    assert [_port(a) for a in ("http://localhost:44101", "localhost:29510", "http://[::1]:41000", "")] == \
        [44101, 29510, 41000, None]


# ---- the injection, against a lighthouse stand-in and a real process listening as the group's manager ----

import http.server  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import psutil  # noqa: E402
import pytest  # noqa: E402

from chaos.errors import FaultError  # noqa: E402
from chaos.faults import lighthouse_kill  # noqa: E402
from chaos.faults.lighthouse_kill import LighthouseKill, LighthouseKillConfig  # noqa: E402

MANAGER = ("import socket, sys, time\ns = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n"
           "print(s.getsockname()[1], flush=True)\ntime.sleep(120)\n")


def lighthouse(manager_port: int, kill: bool, victim: int) -> http.server.ThreadingHTTPServer:
    """/status lists rg0's and rg1's managers; POST .../kill answers 500 as torchft's does when the manager exits
    inside the RPC, and kills ``victim`` only when ``kill``."""
    page = member("torchft_ddp_0:aa", "http://localhost:1") + member("torchft_ddp_1:bb", f"http://localhost:{manager_port}")

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.end_headers()
            self.wfile.write(page.encode())

        def do_POST(self) -> None:  # noqa: N802
            if kill and self.path == "/replica/torchft_ddp_1%3Abb/kill":
                os.kill(victim, signal.SIGKILL)
            self.send_response(500)
            self.end_headers()
            self.wfile.write(b'Something went wrong: status: Unknown, message: "transport error"')

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("kill", [True, False])
def test_the_kill_is_judged_by_the_manager_s_process_not_by_the_lighthouse_s_answer(kill: bool, monkeypatch) -> None:
    monkeypatch.setattr(lighthouse_kill, "EXIT_WAIT_S", 1.0)
    child = subprocess.Popen([sys.executable, "-c", MANAGER], stdout=subprocess.PIPE, text=True)
    try:
        port = int(child.stdout.readline())
        server = lighthouse(port, kill, child.pid)
        proc = psutil.Process(child.pid)
        run = SimpleNamespace(target=SimpleNamespace(port=server.server_address[1]),
                              tree=SimpleNamespace(processes=lambda: [("rg1", proc)]),
                              clock=SimpleNamespace(wall=time.time))
        fault = LighthouseKill(LighthouseKillConfig(group=1, trigger={"at_step": 20}), 0)
        if kill:
            details = fault.inject(run)
            assert details["pids"] == [child.pid] and details["replica_id"] == "torchft_ddp_1:bb"
            assert details["lighthouse_answer"].startswith("500")
        else:
            with pytest.raises(FaultError, match="still running"):
                fault.inject(run)
        # A group none of whose processes holds a manager the quorum lists (this one listens only as the lighthouse
        # stand-in): refused, nothing killed.
        run.tree = SimpleNamespace(processes=lambda: [("rg0", psutil.Process())])
        if not kill:
            with pytest.raises(FaultError, match="no member of the lighthouse's last quorum has its manager in"):
                LighthouseKill(LighthouseKillConfig(group=0, trigger={"at_step": 20}), 0).inject(run)
            assert child.poll() is None
        server.shutdown()
    finally:
        child.kill()
        child.wait()
