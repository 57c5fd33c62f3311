"""A gate run judged from the harness's own records; each lie about a catch must not be called caught."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from chaos.evidence.events import History
from chaos.evidence.fault_record import FaultRecord
from chaos.evidence.outcome import RunOutcome, RunReport
from chaos.gate.cell import judge
from chaos.spec.gate import GateConfig

T0 = 1000.0


def report(*, exit_code: int | None = 1, t_exit: float | None = T0 + 3.0, t_inject: float | None = T0 - 0.1,
           status: str = "injected", error: str | None = None, faults: int = 1, timed_out: bool = False,
           launch: bool = True, revert_failures: list[str] | None = None, diagnostics: list[str] | None = None,
           exit_source: str = "harness", output: str = "preflight: FAIL storage: EROFS", tmp: Path | None = None,
           t_release: float | None = None, extra: list[dict] | None = None) -> RunReport:
    records = list(extra or [])
    if launch:
        records.append({"ev": "launch", "t": T0, "source": "harness"})
    if t_exit is not None:
        records.append({"ev": "workload_exit", "t": t_exit, "code": exit_code, "source": exit_source})
    recs = [FaultRecord(index=i, kind="read-only-storage", label=f"ro#{i}", t_inject=t_inject, status=status,  # type: ignore[arg-type]
                        error=error, t_release=t_release) for i in range(faults)]
    run_dir = tmp or Path("/nonexistent")
    exp = SimpleNamespace(timeout_s=60.0, name="gate")
    out = RunOutcome(experiment=exp, run_dir=run_dir, ckpt_dir=run_dir, history=History(records),  # type: ignore[arg-type]
                     exit_code=None if timed_out else exit_code, timed_out=timed_out, wall_s=3.0, faults=recs,
                     diagnostics=diagnostics or [], output_tail=output)
    return RunReport(out, [], run_dir, 0, revert_failures or [])


GATE = GateConfig()


def test_the_truth_is_caught_and_timed_from_the_launch():
    cell = judge(report(), GATE, healthy=False)
    assert cell.verdict == "caught" and cell.caught
    assert cell.seconds == pytest.approx(3.0)
    assert cell.said == "preflight: FAIL storage: EROFS"


def test_a_fault_injected_after_the_launch_is_timed_from_its_injection():
    cell = judge(report(t_inject=T0 + 1.0), GATE, healthy=False)
    assert cell.verdict == "caught" and cell.seconds == pytest.approx(2.0)


@pytest.mark.parametrize("lie, verdict", [
    (dict(exit_code=0), "missed"),                                   # the gate passed with the fault there
    (dict(status="failed", error="no such mount"), "untested"),      # the fault never acted
    (dict(status="never_fired", t_inject=None), "untested"),
    (dict(t_inject=T0 + 5.0), "untested"),                           # the gate failed before the fault acted
    (dict(timed_out=True, t_exit=None), "hung"),                     # never answered, nothing stops it
    (dict(t_exit=None), "error"),                                    # no record of the gate's end
    (dict(exit_source="workload"), "error"),                         # a workload's claim of the end is not evidence
    (dict(launch=False), "error"),                                   # no launch: nothing ran
    (dict(revert_failures=["nft delete table: busy"]), "error"),     # a fault left behind
    (dict(faults=2), "error"),                                       # a cell is one fault
    (dict(faults=0), "error"),
    (dict(diagnostics=["harness error: KeyError: x"]), "error"),
    (dict(diagnostics=["interrupted by SIGINT: workload stopped, faults reverted"]), "error"),
    (dict(exit_code=None), "error"),                                 # the run ended before the gate answered
    (dict(t_inject=T0 + 3.0), "untested"),                           # in the same instant as the gate's end
    (dict(t_inject=T0 + 1.0, extra=[{"ev": "worker_exit", "t": T0 + 0.5, "source": "harness", "worker_pid": 9}]),
     "untested"),                                                    # a rank of the gate had already ended
    (dict(t_release=T0 + 2.0), "untested"),                          # the fault was gone before the gate answered
    (dict(t_inject=float("nan")), "error"),
    (dict(extra=[{"ev": "workload_exit", "t": T0 + 2.0, "code": 0, "source": "harness"}]), "missed"),  # its first answer
])
def test_a_lie_is_not_a_catch(lie, verdict):
    cell = judge(report(**lie), GATE, healthy=False)
    assert cell.verdict == verdict, cell.reason
    assert not cell.caught


def test_a_rank_that_ends_after_the_fault_is_the_catch_itself():
    cell = judge(report(t_inject=T0 + 1.0, extra=[{"ev": "worker_exit", "t": T0 + 1.2, "source": "harness"}]), GATE,
                 healthy=False)
    assert cell.verdict == "caught" and cell.seconds == pytest.approx(2.0)


def test_a_relaunch_does_not_hide_the_gates_first_answer():
    # launch, exit 1, (the harness relaunches), exit 0: the pipeline's gate failed.
    again = [{"ev": "launch", "t": T0 + 3.5, "source": "harness"},
             {"ev": "workload_exit", "t": T0 + 6.0, "code": 0, "source": "harness"}]
    healthy = judge(report(faults=0, exit_code=1, extra=again), GATE, healthy=True)
    assert healthy.verdict == "false_alarm" and healthy.gate_exit == 1
    assert judge(report(exit_code=1, extra=again), GATE, healthy=False).verdict == "caught"


def test_a_relaunch_that_runs_into_the_deadline_does_not_turn_a_pass_into_a_catch():
    again = [{"ev": "launch", "t": T0 + 3.5, "source": "harness"}]
    cell = judge(report(exit_code=0, timed_out=True, extra=again), GateConfig(deadline_s=30), healthy=False)
    assert cell.verdict == "missed"


def test_a_deadline_turns_a_hang_into_a_catch_at_the_deadline():
    cell = judge(report(timed_out=True, t_exit=None), GateConfig(deadline_s=30), healthy=False)
    assert cell.verdict == "caught_at_deadline" and cell.caught and cell.seconds == 30


def test_a_deadline_does_not_excuse_a_fault_that_never_acted():
    cell = judge(report(timed_out=True, t_exit=None, status="failed", error="x"), GateConfig(deadline_s=30),
                 healthy=False)
    assert cell.verdict == "untested"


@pytest.mark.parametrize("lie, verdict", [
    (dict(exit_code=0), "ok"),
    (dict(exit_code=1), "false_alarm"),
    (dict(timed_out=True, t_exit=None), "false_alarm"),
    (dict(exit_code=0, faults=1), "error"),                          # a healthy run with a fault is not healthy
    (dict(exit_code=0, t_exit=None), "error"),
])
def test_healthy_runs(lie, verdict):
    kwargs = {"faults": 0, **lie}
    cell = judge(report(**kwargs), GATE, healthy=True)
    assert cell.verdict == verdict, cell.reason


def test_said_prefers_the_gates_fail_line_over_a_launchers_traceback(tmp_path: Path):
    (tmp_path / "output.log").write_text("preflight rank 0 storage: FAIL: x\npreflight: FAIL storage on rank 0: EROFS\n"
                                         + "Traceback\n  File x\nRuntimeError: boom\n" * 50 + "=" * 60 + "\n")
    cell = judge(report(tmp=tmp_path), GATE, healthy=False)
    assert cell.said == "preflight: FAIL storage on rank 0: EROFS"
    (tmp_path / "output.log").write_text("start\n  exitcode  : -9 (pid: 1)\n  traceback : Signal 9 (SIGKILL)\n====\n")
    assert judge(report(tmp=tmp_path), GATE, healthy=False).said == "traceback : Signal 9 (SIGKILL)"
