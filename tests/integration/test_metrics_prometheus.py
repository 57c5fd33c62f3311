"""A real run's metrics reach a real Prometheus, live (scraped from ``--metrics-port`` while the run goes) and whole
(pushed to a real Pushgateway when it ends), and read back through Prometheus' HTTP API equal the run's journal.
The Grafana dashboard's every query is accepted by that Prometheus and finds the run's series.

Debian packages both servers (``prometheus``, ``prometheus-pushgateway``); scripts/setup.sh installs them as root."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS, PUSHGATEWAY = shutil.which("prometheus"), shutil.which("prometheus-pushgateway")
DASHBOARD = ROOT / "ci" / "grafana" / "chaos-gameday.json"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(PROMETHEUS is None or PUSHGATEWAY is None,
                       reason="needs Prometheus and the Pushgateway: as root, bash scripts/setup.sh installs the Debian "
                              "packages prometheus and prometheus-pushgateway"),
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        body = resp.read().decode()
    return json.loads(body) if body.startswith("{") else body


def wait_for(what: str, probe: Any, timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            got = probe()
        except OSError:
            got = None
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:g} s")
        time.sleep(0.3)


class Servers:
    def __init__(self, tmp: Path) -> None:
        self.pg, self.prom, self.live = free_port(), free_port(), free_port()
        config = tmp / "prometheus.yml"
        config.write_text(f"""global: {{scrape_interval: 1s, evaluation_interval: 1s}}
scrape_configs:
  - job_name: pushgateway
    honor_labels: true
    static_configs: [{{targets: ["127.0.0.1:{self.pg}"]}}]
  - job_name: chaos-live
    static_configs: [{{targets: ["127.0.0.1:{self.live}"]}}]
""")
        log = open(tmp / "servers.log", "ab")
        self.procs = [
            subprocess.Popen([PUSHGATEWAY, f"--web.listen-address=127.0.0.1:{self.pg}"], stdout=log, stderr=log),
            subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp / 'tsdb'}",
                              f"--web.listen-address=127.0.0.1:{self.prom}"], stdout=log, stderr=log),
        ]
        wait_for("the Pushgateway ready", lambda: get(f"http://127.0.0.1:{self.pg}/-/ready"), 30)
        wait_for("Prometheus ready", lambda: get(f"http://127.0.0.1:{self.prom}/-/ready"), 30)

    def query(self, expr: str) -> list[dict]:
        out = get(f"http://127.0.0.1:{self.prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        assert out["status"] == "success", out
        return out["data"]["result"]

    def stop(self) -> None:
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Servers]:
    s = Servers(tmp_path)
    try:
        yield s
    finally:
        s.stop()


def experiment(tmp: Path) -> Path:
    path = tmp / "metrics-kill.yaml"
    path.write_text(f"""name: metrics-kill
workload:
  script: {ROOT / 'workloads' / 'ddp.py'}
  nproc_per_node: 2
  max_restarts: 2
  args: {{steps: 80, ckpt_every: 10, seed: 0, step_sleep: 0.05}}
faults:
  - kind: kill-rank
    rank: 1
    signal: SIGKILL
    trigger: {{at_step: 30}}
checks:
  - completes: {{min_restarts: 1, max_restarts: 1}}
  - recovery_time: {{metric: resume_s, max_s: 60}}
timeout_s: 240
""")
    return path


def test_a_run_s_metrics_reach_prometheus_live_and_pushed_and_equal_its_journal(servers: Servers,
                                                                              tmp_path: Path) -> None:
    textfile = tmp_path / "chaos.prom"
    proc = subprocess.Popen([sys.executable, "-m", "chaos", "run", str(experiment(tmp_path)), "--runs-dir",
                             str(tmp_path / "runs"), "--metrics-port", str(servers.live), "--metrics-pushgateway",
                             f"http://127.0.0.1:{servers.pg}", "--metrics-textfile", str(textfile)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        # Live: Prometheus scraped the run while it trained.
        live = wait_for("a live step scraped from --metrics-port",
                        lambda: servers.query('chaos_training_step{job="chaos-live"} > 0')
                        and servers.query('chaos_run_verdict{job="chaos-live", verdict="RUNNING"} == 1'), 120)
        assert live[0]["metric"]["experiment"] == "metrics-kill"
        out, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out[-3000:]
    run_dir = next((tmp_path / "runs").iterdir())
    journal = json.loads((run_dir / "journal.json").read_text())
    fault = journal["faults"][0]
    # Pushed when it ended, scraped from the Pushgateway, read back through the HTTP API.
    # honor_labels keeps the pushed job label ("chaos") over the scrape job's name.
    pushed = {"job": "chaos", "experiment": "metrics-kill", "run": run_dir.name}
    sel = ", ".join(f'{k}="{v}"' for k, v in pushed.items())
    verdict = wait_for("the pushed verdict in Prometheus",
                       lambda: servers.query(f'chaos_run_verdict{{{sel}, verdict="PASS"}}'), 30)
    assert float(verdict[0]["value"][1]) == 1
    resume = servers.query(f'chaos_fault_recovery_seconds{{{sel}, fault="kill-rank#0", phase="resume"}}')
    assert float(resume[0]["value"][1]) == pytest.approx(fault["recovery"]["resume_s"])
    goodput = servers.query(f'chaos_goodput_ratio{{{sel}}}')
    assert float(goodput[0]["value"][1]) == pytest.approx(journal["goodput"]["goodput"])
    assert float(servers.query(f'chaos_faults_injected_total{{{sel}, kind="kill-rank"}}')[0]["value"][1]) == 1
    checks = {r["metric"]["check"]: r["metric"]["verdict"] for r in servers.query(f'chaos_check_verdict{{{sel}}} == 1')}
    assert checks == {c["kind"]: c["verdict"] for c in journal["checks"]}
    # The node exporter's textfile says the same.
    line = f'chaos_run_verdict{{experiment="metrics-kill",run="{run_dir.name}",verdict="PASS"}} 1.0'
    assert line in textfile.read_text()
    # Every query of the dashboard is valid PromQL to this Prometheus and finds this run.
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    exprs += [a["expr"] for a in dashboard["annotations"]["list"] if "expr" in a]
    empty = []
    for expr in exprs:
        concrete = expr.replace("$experiment", "metrics-kill").replace("$run", run_dir.name)
        if not servers.query(concrete) and "changes(" not in expr and "increase(" not in expr:
            empty.append(concrete)
    assert not empty, f"dashboard queries that found nothing for the run: {empty}"
