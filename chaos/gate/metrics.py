"""A coverage matrix as Prometheus metrics (prometheus-client): a node-exporter textfile or a Pushgateway push.

``gate`` (the plan's name) on every series, ``fault`` and ``kind`` per cell; a cell's verdict is a state set
(one series per verdict, 1 for the one that holds), as a run's verdict is in chaos.report.metrics.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge

from chaos.gate.cell import VERDICT_TEXT
from chaos.gate.matrix import Coverage
from chaos.report.metrics import push, write_textfile


def registry_of(cov: Coverage) -> CollectorRegistry:
    r = CollectorRegistry()
    verdict = Gauge("chaos_gate_cell_verdict", "Each run of the gate, judged (1 for the verdict that holds): caught, "
                    "caught_at_deadline, missed, hung, untested under a fault; ok or false_alarm with none",
                    ["gate", "fault", "kind", "verdict"], registry=r)
    seconds = Gauge("chaos_gate_detect_seconds", "Seconds from the fault being there to the gate failing",
                    ["gate", "fault", "kind"], registry=r)
    Gauge("chaos_gate_coverage_ratio", "Faults caught over faults listed", ["gate"], registry=r).labels(
        cov.name).set(cov.coverage or 0.0)
    Gauge("chaos_gate_false_alarms", "Healthy runs the gate failed", ["gate"], registry=r).labels(
        cov.name).set(len(cov.false_alarms))
    Gauge("chaos_gate_healthy_runs", "Healthy runs judged", ["gate"], registry=r).labels(cov.name).set(len(cov.healthy))
    code, _why = cov.problems()
    Gauge("chaos_gate_exit_code", "The coverage run's exit code (0 every requirement holds, 1 one does not, 3 a run "
          "could not be judged)", ["gate"], registry=r).labels(cov.name).set(code)
    for i, cell in enumerate(cov.faults + cov.healthy):
        fault = cell.fault or f"healthy-{i - len(cov.faults)}"
        for state in VERDICT_TEXT:
            verdict.labels(cov.name, fault, cell.kind or "", state).set(1.0 if cell.verdict == state else 0.0)
        if cell.fault is not None and cell.caught and cell.seconds is not None:
            seconds.labels(cov.name, fault, cell.kind or "").set(cell.seconds)
    return r


def export(cov: Coverage, *, textfile: str | None = None, pushgateway: str | None = None) -> None:
    registry = registry_of(cov)
    if textfile:
        write_textfile(textfile, registry)
    if pushgateway:
        push(pushgateway, registry, "chaos_gate", {"gate": cov.name})
