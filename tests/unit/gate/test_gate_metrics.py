"""The coverage matrix as Prometheus metrics, parsed back with prometheus-client's own parser."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from chaos.errors import UsageError
from chaos.gate.cell import Cell
from chaos.gate.matrix import Coverage
from chaos.gate.metrics import export
from chaos.spec.gate import GateConfig


def test_the_textfile_says_each_cell_and_the_coverage(tmp_path: Path):
    cov = Coverage(name="pre", gate=GateConfig(), gate_command="g", target="netns", listed=["a", "b"],
                   faults=[Cell("a", "xid", "caught", "", seconds=2.5), Cell("b", "partition", "hung", "")],
                   healthy=[Cell(None, None, "ok", "", seconds=5.0)])
    path = tmp_path / "gate.prom"
    export(cov, textfile=str(path))
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for fam in text_string_to_metric_families(path.read_text()) for s in fam.samples}
    assert samples[("chaos_gate_coverage_ratio", (("gate", "pre"),))] == 0.5
    assert samples[("chaos_gate_detect_seconds", (("fault", "a"), ("gate", "pre"), ("kind", "xid")))] == 2.5
    assert ("chaos_gate_detect_seconds", (("fault", "b"), ("gate", "pre"), ("kind", "partition"))) not in samples
    verdict = {k[1]: v for k, v in samples.items() if k[0] == "chaos_gate_cell_verdict" and v == 1.0}
    assert sorted(dict(k)["fault"] + ":" + dict(k)["verdict"] for k in verdict) == ["a:caught", "b:hung", "healthy-0:ok"]
    assert samples[("chaos_gate_exit_code", (("gate", "pre"),))] == 0


def test_a_bad_textfile_path_is_refused(tmp_path: Path):
    cov = Coverage(name="pre", gate=GateConfig(), gate_command="g", target="local")
    with pytest.raises(UsageError, match=".prom"):
        export(cov, textfile=str(tmp_path / "x.txt"))
