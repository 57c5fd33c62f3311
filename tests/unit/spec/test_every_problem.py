"""One ``chaos validate`` run shows every problem of a file (issue 58, a new user's first hour): a typo in an
early section must not hide the later ones, and a misspelled field gets its section's field list and a
did-you-mean wherever it is (workload, target, fault, trigger, check), from one shared helper."""

from __future__ import annotations

from pathlib import Path

import pytest

from chaos.cli import main

from tests.unit.spec.test_experiment import problems, write

TYPOS = """\
name: typo-everywhere
workload:
  scrpt: workloads/ddp.py
  nproc_per_node: 2
target: {kind: netns, nodess: 2}
faults:
  - kind: kill-rank
    rnak: 1
    trigger: {at_stp: 25}
checks:
  - completes: {max_restart: 1}
  - recovery_time: {metric: resume_s, max_s: -3}
"""


def test_a_misspelled_workload_field_hides_no_later_problem(tmp_path: Path) -> None:
    msgs = problems(tmp_path, TYPOS)
    where = f"{tmp_path}/experiments/x.yaml"
    expected = [f"{where}:3 workload.scrpt: unknown field", f"{where}:5 target.nodess: unknown field",
                f"{where}:8 faults[0].rnak: unknown field", f"{where}:9 faults[0].trigger.at_stp: unknown trigger",
                f"{where}:11 checks[0].completes.max_restart: unknown field",
                f"{where}:12 checks[1].recovery_time.max_s: "]
    for start in expected:
        assert sum(m.startswith(start) for m in msgs) == 1, (start, msgs)


def test_a_bad_top_level_still_checks_every_section(tmp_path: Path) -> None:
    text = TYPOS.replace("name: typo-everywhere", "name: 'has spaces'").replace("scrpt:", "script:")
    msgs = problems(tmp_path, text)
    assert any(" name: " in m for m in msgs), msgs
    for path in ("target.nodess", "faults[0].rnak", "faults[0].trigger.at_stp", "checks[0].completes.max_restart"):
        assert any(f" {path}: " in m for m in msgs), (path, msgs)


def test_a_coverage_plan_with_a_bad_workload_still_defaults_its_fault_triggers(tmp_path: Path) -> None:
    text = "name: plan\nworkload: {scrpt: workloads/ddp.py}\ngate: {}\nfaults:\n  - {kind: kill-rank, rank: 0}\n"
    msgs = problems(tmp_path, text)
    assert not any("missing 'trigger'" in m for m in msgs), msgs
    assert any("workload.scrpt" in m for m in msgs), msgs


@pytest.mark.parametrize("text, path, fields, guess", [
    (TYPOS, "workload.scrpt", "script, command, python", "script"),
    (TYPOS, "target.nodess", "nodes, min_nodes", "nodes"),
    (TYPOS, "faults[0].rnak", "rank", "rank"),
    (TYPOS, "checks[0].completes.max_restart", "max_restarts, min_restarts, min_step", "max_restarts"),
], ids=["workload", "target", "fault", "check"])
def test_a_misspelled_field_anywhere_gets_the_field_list_and_a_suggestion(tmp_path: Path, text: str, path: str,
                                                                         fields: str, guess: str) -> None:
    [msg] = [m for m in problems(tmp_path, text) if f" {path}: " in m]
    assert "unknown field for " in msg and "its fields: " in msg and fields in msg, msg
    assert msg.endswith(f"Did you mean '{guess}'?"), msg


def test_a_nested_model_names_its_own_fields(tmp_path: Path) -> None:
    text = ("name: x\nworkload: {script: workloads/ddp.py}\n"
            "known_failure: {checks: [completes], signature: {completes: x}, reson: why}\n"
            "checks: [completes]\n")
    [msg] = [m for m in problems(tmp_path, text) if "known_failure.reson" in m]
    assert "signature, reason" in msg and msg.endswith("Did you mean 'reason'?"), msg


def test_the_shared_helper_lists_fields_and_suggests() -> None:
    from chaos.spec.problems import unknown_field_message

    msg = unknown_field_message("scrpt", ["script", "command"], "the workload")
    assert msg == "unknown field for the workload; its fields: script, command. Did you mean 'script'?"
    assert "Did you mean" not in unknown_field_message("zzz", ["script"], "the workload")


def test_validate_prints_every_problem_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, TYPOS)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err.splitlines()
    located = [line for line in err if line.startswith(f"{path}:")]
    assert len(located) >= 6, err
    assert err[-1] == "1 of 1 experiment file(s) invalid"
