"""The Grafana dashboard (ci/grafana/chaos-gameday.json) by Grafana's documented JSON model: what a panel needs to
render, a layout on the 24-column grid, variables that exist, and only metrics the harness exports (a misspelled
metric would draw an empty panel, silently). tests/integration/test_metrics_prometheus.py runs its queries."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import generate_latest

from chaos.report.metrics import RunMetrics

DASHBOARD = Path(__file__).resolve().parents[3] / "ci" / "grafana" / "chaos-gameday.json"
PANEL_TYPES = {"stat", "timeseries", "bargauge", "table", "gauge", "state-timeline", "barchart", "text"}
PROMQL_WORDS = {"max", "min", "sum", "by", "rate", "increase", "changes", "deriv", "clamp_min", "label_values",
                "count", "avg", "without", "on", "and", "or", "unless"}


def exported_names() -> set[str]:
    registry = RunMetrics().registry
    names = set()
    for metric in registry.collect():
        names.add(metric.name)
        names.update({f"{metric.name}_total", f"{metric.name}_created"} if metric.type == "counter" else set())
    return names


def test_the_dashboard_is_a_grafana_dashboard_of_exported_metrics() -> None:
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] and dash["title"] and isinstance(dash["schemaVersion"], int)
    variables = {v["name"] for v in dash["templating"]["list"]}
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    exported = exported_names()
    for p in dash["panels"]:
        assert p["type"] in PANEL_TYPES, p["type"]
        g = p["gridPos"]
        assert g["w"] > 0 and g["h"] > 0 and 0 <= g["x"] and g["x"] + g["w"] <= 24, (p["title"], g)
        assert p["targets"], p["title"]
        for t in p["targets"]:
            assert t["refId"] and t["expr"], p["title"]
            used = set(re.findall(r"\$(\w+)", t["expr"])) | set(re.findall(r"\$(\w+)", json.dumps(p["datasource"])))
            assert used <= variables, (p["title"], used - variables)
            metrics = {w for w in re.findall(r"\b(chaos_\w+)", t["expr"])}
            assert metrics and metrics <= exported, (p["title"], metrics - exported)
    for a in dash["annotations"]["list"]:
        assert {w for w in re.findall(r"\b(chaos_\w+)", a["expr"])} <= exported


def test_the_exported_names_follow_prometheus_conventions() -> None:
    text = generate_latest(RunMetrics().registry).decode()
    for line in text.splitlines():
        if line.startswith("# TYPE"):
            _, _, name, kind = line.split()
            assert name.startswith("chaos_")
            if kind == "counter":
                assert name.endswith("_total"), name
            elif name.endswith(("_seconds", "_ratio", "_step", "_steps", "_code", "_restarts", "_verdict")):
                continue
            else:
                raise AssertionError(f"{name}: a gauge without a unit or a known count suffix")
