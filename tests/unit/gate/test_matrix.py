"""The coverage matrix: what counts as covered, each requirement, and the matrix read back as written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.gate.cell import Cell
from chaos.gate.matrix import Coverage
from chaos.spec.gate import GateConfig


def cell(fault: str | None, verdict: str, seconds: float | None = 1.0) -> Cell:
    return Cell(fault=fault, kind="x" if fault else None, verdict=verdict, reason=verdict, seconds=seconds)  # type: ignore[arg-type]


def matrix(gate: GateConfig, faults: list[Cell], healthy: list[Cell] | None = None, listed: list[str] | None = None,
           calibration: Cell | None = None) -> Coverage:
    return Coverage(name="g", gate=gate, gate_command="gate", target="local", faults=faults,
                    healthy=[cell(None, "ok")] if healthy is None else healthy,
                    listed=listed if listed is not None else [c.fault for c in faults], calibration=calibration)


def test_everything_caught_passes():
    cov = matrix(GateConfig(require_coverage=1.0, require_caught=["a"]), [cell("a", "caught"), cell("b", "caught_at_deadline")])
    assert cov.coverage == 1.0
    assert cov.problems() == (0, [])


@pytest.mark.parametrize("verdict", ["missed", "hung", "untested"])
def test_an_uncaught_cell_counts_against_coverage(verdict):
    cov = matrix(GateConfig(require_coverage=0.75), [cell("a", "caught"), cell("b", verdict)])
    assert cov.coverage == 0.5
    code, why = cov.problems()
    assert code == 1 and "coverage 50% below the required 75%" in why[0]


def test_a_listed_fault_that_was_not_run_is_not_covered():
    cov = matrix(GateConfig(require_coverage=0.5), [cell("a", "caught")], listed=["a", "b", "c"])
    assert cov.coverage == pytest.approx(1 / 3)
    code, why = cov.problems()
    assert code == 1 and any("not run: b, c" in w for w in why)


def test_a_required_catch_that_was_missed_fails_whatever_the_share():
    cov = matrix(GateConfig(require_coverage=0.5, require_caught=["b"]), [cell("a", "caught"), cell("b", "missed")])
    code, why = cov.problems()
    assert code == 1 and why == ["b must be caught: MISSED (missed)"]


def test_false_alarms_fail_beyond_the_allowance():
    cov = matrix(GateConfig(), [cell("a", "caught")], healthy=[cell(None, "ok"), cell(None, "false_alarm")])
    assert cov.problems()[0] == 1
    cov.gate = GateConfig(max_false_alarms=1)
    assert cov.problems() == (0, [])


def test_no_healthy_run_is_no_proof_of_no_false_alarm():
    code, why = matrix(GateConfig(), [cell("a", "caught")], healthy=[]).problems()
    assert code == 1 and "no healthy run" in why[0]


def test_a_failed_calibration_fails_and_says_nothing_else_ran():
    cov = matrix(GateConfig(calibrate=["--record-baseline"]), [], healthy=[], listed=["a"],
                 calibration=cell(None, "false_alarm"))
    code, why = cov.problems()
    assert code == 1 and why[0].startswith("calibration: the gate does not pass")


def test_a_cell_that_could_not_be_judged_is_a_harness_error():
    code, why = matrix(GateConfig(), [cell("a", "caught"), cell("b", "error")]).problems()
    assert code == 3 and "b: error" in why


def test_the_matrix_reads_back_as_written(tmp_path: Path):
    cov = matrix(GateConfig(require_coverage=0.5, deadline_s=60), [cell("a", "caught", 2.5), cell("b", "missed", None)])
    cov.write(tmp_path)
    back = Coverage.from_json(json.loads((tmp_path / "coverage.json").read_text()))
    assert back == cov
    md = (tmp_path / "coverage.md").read_text()
    assert "| a | caught | 2.50 |" in md and "| b | MISSED |  |" in md and "1 of 2 faults caught (50%)" in md


def test_fewer_healthy_runs_than_planned_or_a_missing_calibration_is_not_proof():
    cov = matrix(GateConfig(healthy_runs=3), [cell("a", "caught")])
    code, why = cov.problems()
    assert code == 1 and why == ["1 of the 3 healthy runs were judged"]
    code, why = matrix(GateConfig(calibrate=["--record"]), [cell("a", "caught")]).problems()
    assert code == 1 and "no calibration run was judged" in why[0]


def test_a_label_twice_is_judged_by_its_worse_cell():
    cov = matrix(GateConfig(require_caught=["full"]), [cell("full", "missed"), cell("full", "caught")])
    code, why = cov.problems()
    assert code == 1 and "full must be caught: MISSED" in why[0]
